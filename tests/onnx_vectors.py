"""The ONNX 1-3 test package, generated from the installed ``onnx`` wheel (test-only; never committed).

``ensure_vectors()`` returns a folder with the layout of onnx's ``backend/test/data``:
``node/<case>/`` (from ``onnx.backend.test.case.node.collect_testcases``), ``simple/``,
``real/``, ``pytorch-converted/``, ``pytorch-operator/`` and ``light/`` (copied from the
wheel).  Each case folder holds ``model.onnx`` and ``test_data_set_N/{input,output}_K.pb``.
The folder is ``$ONNXKIT_VECTORS`` or ``<repo>/.cache/onnx-vectors-<onnx version>``, made once
and reused (a ``COMPLETE`` marker says it is whole).  Run ``python tests/onnx_vectors.py`` to
make it by hand.
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COPIED = ("simple", "real", "pytorch-converted", "pytorch-operator", "light")


def vectors_dir() -> Path:
    import onnx

    env = os.environ.get("ONNXKIT_VECTORS")
    return Path(env) if env else REPO / ".cache" / f"onnx-vectors-{onnx.__version__}"


def _write_value(path: Path, value, vi) -> None:
    from onnx import TensorProto, numpy_helper

    t = vi.type
    if t.HasField("map_type"):
        proto = numpy_helper.from_dict(value, vi.name)
    elif t.HasField("sequence_type"):
        proto = numpy_helper.from_list(value, vi.name)
    elif t.HasField("optional_type"):
        proto = numpy_helper.from_optional(value, vi.name)
    elif isinstance(value, TensorProto):
        proto = value
    else:
        proto = numpy_helper.from_array(value, vi.name)
    path.write_bytes(proto.SerializeToString())


def _write_node_cases(root: Path) -> int:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    for case in cases:
        out = root / "node" / case.name
        out.mkdir(parents=True, exist_ok=True)
        (out / "model.onnx").write_bytes(case.model.SerializeToString())
        for i, (inputs, outputs) in enumerate(case.data_sets):
            ds = out / f"test_data_set_{i}"
            ds.mkdir(exist_ok=True)
            for j, value in enumerate(inputs):
                _write_value(ds / f"input_{j}.pb", value, case.model.graph.input[j])
            for j, value in enumerate(outputs):
                _write_value(ds / f"output_{j}.pb", value, case.model.graph.output[j])
    return len(cases)


def ensure_vectors() -> Path:
    """The vector folder, generated first if it is missing or incomplete."""
    import onnx.backend.test as backend_test

    root = vectors_dir()
    if (root / "COMPLETE").exists():
        return root
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    data = Path(backend_test.__file__).parent / "data"
    for name in COPIED:
        if (data / name).exists():
            shutil.copytree(data / name, root / name)
    n = _write_node_cases(root)
    (root / "COMPLETE").write_text(f"{n} node cases\n")
    return root


def model_files(root: Path) -> list[Path]:
    """Every model file of the package (``*.onnx``), sorted."""
    return sorted(root.rglob("*.onnx"))


def value_files(root: Path) -> list[Path]:
    """Every value file of the package (``*.pb``), sorted."""
    return sorted(root.rglob("*.pb"))


if __name__ == "__main__":
    print(ensure_vectors(), file=sys.stdout)
