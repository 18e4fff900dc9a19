"""ml_dtypes is imported only when a narrow element type appears (issue 44 item 3): importing its
extension costs a fresh process 0.1-0.4 s, and a model of float32 values has no use for it.

Each test runs in a fresh process (this one has imported ml_dtypes long ago: onnx imports it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _fresh(code: str, **env) -> str:
    """What ``code`` prints in a fresh process (``env``: variables set for it, None to unset one)."""
    environ = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=str(ROOT), env=environ)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.mark.parametrize("policy", [None, "warm"])
def test_a_session_on_the_example_does_not_import_ml_dtypes(policy):
    """The default first-run policy (numpy bodies) and ``warm`` (the compiled loops from the first
    run): neither the import, the session nor its runs need a narrow type."""
    printed = _fresh(
        "import sys, numpy as np, onnxkit\n"
        "s = onnxkit.InferenceSession('examples/digits.onnx')\n"
        "y = s.run(None, {'image': np.zeros((1, 1, 8, 8), np.float32)})[0]\n"
        "import onnxkit.dtypes, onnxkit.narrow, onnxkit.tolerances\n"
        "print(y.shape, y.dtype, 'ml_dtypes' in sys.modules)", ONNXKIT_FIRST_RUN=policy)
    assert printed.split() == ["(1,", "10)", "float32", "False"], printed


def test_the_element_type_table_imports_ml_dtypes_on_the_first_read_of_a_narrow_dtype():
    printed = _fresh(
        "import sys, numpy as np\n"
        "from onnxkit.dtypes import DataType, by_name, element_type, from_numpy_dtype, numpy_dtype\n"
        "from onnxkit.errors import OnnxkitTypeError\n"
        "row = element_type(DataType.BFLOAT16)\n"
        "facts = (row.bits, row.is_float, by_name('int4').bits, from_numpy_dtype(np.float32).name,\n"
        "         hash(row) == hash(row))\n"
        "try:\n"
        "    from_numpy_dtype(np.dtype('V2'))\n"
        "except OnnxkitTypeError:\n"
        "    facts += ('refused',)\n"
        "before = 'ml_dtypes' in sys.modules\n"
        "dt = numpy_dtype(DataType.BFLOAT16)\n"
        "import ml_dtypes\n"
        "print(*facts, before, 'ml_dtypes' in sys.modules, dt == ml_dtypes.bfloat16, row.dtype is dt,\n"
        "      from_numpy_dtype(ml_dtypes.int4).name, from_numpy_dtype(np.dtype(ml_dtypes.float8_e5m2)).name)")
    assert printed.split() == ["16", "True", "4", "FLOAT", "True", "refused", "False", "True", "True", "True",
                               "INT4", "FLOAT8E5M2"], printed


def test_a_narrow_type_named_by_its_numpy_name_is_found_as_before():
    """numpy knows ml_dtypes' names only once it is imported: ``from_numpy_dtype('bfloat16')`` imports it."""
    printed = _fresh(
        "import sys\n"
        "from onnxkit.dtypes import from_numpy_dtype\n"
        "try:\n"
        "    from_numpy_dtype('no_such_type')\n"
        "except TypeError:\n"
        "    print('refused', 'ml_dtypes' in sys.modules)\n"
        "print(from_numpy_dtype('bfloat16').name, from_numpy_dtype('float4_e2m1fn').name, 'ml_dtypes' in sys.modules)")
    assert printed.split() == ["refused", "False", "BFLOAT16", "FLOAT4E2M1", "True"], printed


def test_ml_dtypes_imported_elsewhere_is_recognised_without_reading_the_table():
    """A caller's own ml_dtypes array (imported after onnxkit) has its element type."""
    printed = _fresh(
        "import onnxkit.dtypes as d\n"
        "import ml_dtypes, numpy as np\n"
        "print(d.from_numpy_dtype(np.zeros(2, ml_dtypes.bfloat16).dtype).name,\n"
        "      d.from_numpy_dtype(ml_dtypes.uint2).name)")
    assert printed.split() == ["BFLOAT16", "UINT2"], printed


def test_a_model_with_a_bfloat16_cast_imports_ml_dtypes_and_runs(tmp_path):
    onnx = pytest.importorskip("onnx")  # (which imports ml_dtypes itself: the model is made here)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    helper, TP = onnx.helper, onnx.TensorProto
    nodes = [helper.make_node("Cast", ["x"], ["b"], to=TP.BFLOAT16),
             helper.make_node("Cast", ["b"], ["y"], to=TP.FLOAT)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TP.FLOAT, [5])],
                              [helper.make_tensor_value_info("b", TP.BFLOAT16, [5]),
                               helper.make_tensor_value_info("y", TP.FLOAT, [5])])
    path = tmp_path / "bf16.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]).SerializeToString())
    x = np.array([1.0, 1.00390625, 1.01171875, -3.14159, 1e30], np.float32)  # ties to even, rounding, range
    np.save(tmp_path / "x.npy", x)
    printed = _fresh(
        "import sys, numpy as np, onnxkit\n"
        f"s = onnxkit.InferenceSession({str(path)!r})\n"
        f"b, y = s.run(None, {{'x': np.load({str(tmp_path / 'x.npy')!r})}})\n"
        "print('ml_dtypes' in sys.modules, b.dtype, *y.view(np.uint32).tolist())")
    loaded, dtype, *bits = printed.split()
    want = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    assert (loaded, dtype) == ("True", "bfloat16"), printed
    assert [int(v) for v in bits] == want.view(np.uint32).tolist(), (printed, want)
