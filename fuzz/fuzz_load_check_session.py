"""Coverage-guided fuzzing (atheris) of load + check + session creation + one small run.

    python fuzz/fuzz_load_check_session.py fuzz/corpus -rss_limit_mb=2048 -timeout=20 -max_total_time=1800

Every input is decoded (``onnxkit.load``), checked (``check_model``) and, when valid, planned
(``InferenceSession``) and run once with small feeds (every dimension variable bound to 2),
under tight limits so a run stays cheap.  Any exception that is not an
:class:`onnxkit.errors.OnnxkitError` is a finding (atheris reports it and stops); a
MemoryError anywhere in an onnxkit error's cause chain is a finding too.

``python fuzz/fuzz_load_check_session.py --seed fuzz/corpus`` (re)writes the seed corpus:
a few small models of the ONNX package and of the hostile suite.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["onnxkit", "onnxkit_cpu", "onnxkit_default_domain", "onnxkit_ml"],
                                exclude=["onnxkit_gpu"]):
    import numpy as np

    import onnxkit
    from onnxkit import ir
    from onnxkit.checker import check_model
    from onnxkit.errors import OnnxkitError
    from onnxkit.limits import MiB, Limits
    from onnxkit.registry import get_registry

    get_registry()  # imports the plugins (schemas, inference functions, kernels) under instrumentation

LIMITS = Limits(max_message_bytes=8 * MiB, max_tensor_bytes=64 * MiB, max_run_bytes=256 * MiB,
                max_loop_iterations=1000, max_sequence_length=10_000, max_string_bytes=MiB,
                max_dim_extent=1 << 20)


def _feed(t, rng):
    """A small value of declared type ``t`` (None when the harness cannot make one)."""
    if isinstance(t, ir.TensorType):
        from onnxkit.dtypes import ELEMENT_TYPES

        row = ELEMENT_TYPES.get(t.elem_type)
        if row is None:
            return None
        dims = [] if t.shape is None else [d if isinstance(d, int) and 0 <= d <= 8 else 2 for d in t.shape.values]
        if t.shape is not None and any(isinstance(d, int) and d > 8 for d in t.shape.values):
            return None
        if row.tag == 8:
            return np.array([b"ab"] * int(np.prod(dims, dtype=np.int64)), dtype=object).reshape(dims)
        return (rng.random(dims) * 4).astype(row.dtype)
    if isinstance(t, ir.SequenceType):
        v = _feed(t.elem_type, rng)
        return None if v is None else [v, v]
    if isinstance(t, ir.OptionalType):
        return _feed(t.elem_type, rng)
    return None


def _no_memory_error(exc: BaseException) -> None:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, MemoryError):
            raise AssertionError("MemoryError in the cause chain of an onnxkit error") from exc
        exc = exc.__cause__ or exc.__context__


def one_input(data: bytes) -> None:
    try:
        model = onnxkit.load(bytes(data), limits=LIMITS, external_data="never")
        report = check_model(model)
        if report.errors:
            return
        sess = onnxkit.InferenceSession(model, limits=LIMITS)
        rng = np.random.default_rng(0)
        feed = {}
        for vi in sess.get_inputs():
            v = _feed(vi.ir_type, rng)
            if v is None:
                return
            feed[vi.name] = v
        sess.run(None, feed)
    except OnnxkitError as exc:
        _no_memory_error(exc)
    except RecursionError:
        raise


def write_seeds(folder: Path) -> None:
    """A few small models: ONNX package models under 4 KiB, and the hostile suite's models."""
    folder.mkdir(parents=True, exist_ok=True)
    root = Path(__file__).resolve().parents[1]
    vectors = root / ".cache" / "onnx-vectors-1.23.2"
    picked = sorted(p for sub in ("simple", "pytorch-operator") for p in (vectors / sub).glob("*/model.onnx")
                    if p.stat().st_size < 4096)[:40]
    for p in picked:
        (folder / f"{p.parent.name}.onnx").write_bytes(p.read_bytes())
    sys.path.insert(0, str(root / "tests" / "hostile"))
    from models import SEED_MODELS

    for name, blob in SEED_MODELS().items():
        (folder / f"hostile_{name}.onnx").write_bytes(blob)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--seed":
        write_seeds(Path(sys.argv[2]))
    else:
        atheris.Setup(sys.argv, one_input)
        atheris.Fuzz()
