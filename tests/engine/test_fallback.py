"""Per-node fallback (onnxkit.runtime.fallback): decided at planning, reported, transfers once per crossing.

Two backends exercise it: the gpu backend (torch; its fallback is cpu) and ``boxed``, a test
backend whose values are :class:`Box` objects, with one kernel (Relu) and float32 only, so
that every conversion is counted and a value on the wrong backend is caught.  Expected values
are written out by hand.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import onnxkit
from onnxkit import hookimpl, ir
from onnxkit.dtypes import DataType
from onnxkit.errors import UnsupportedOperatorError
from onnxkit.registry import Backend, build_registry
from onnxkit.runtime import InferenceSession

T = ir.tensor_type


def _model(nodes, inputs, outputs, opset=21, initializer=(), extra_opsets=()):
    g = ir.Graph(node=nodes, name="g", input=inputs, output=outputs, initializer=list(initializer))
    opsets = [ir.OperatorSetId("", opset), *extra_opsets]
    return ir.Model(ir_version=10, opset_import=opsets, graph=g)


# -- a counting backend ---------------------------------------------------------------------------

class Box:
    """A value of the ``boxed`` backend."""

    def __init__(self, a):
        self.a = a


class Counts:
    to_box = 0
    to_host = 0


def _to_box(a):
    a = np.asarray(a)
    if a.dtype != np.float32:
        return a  # not computed on boxed: stays on the host
    Counts.to_box += 1
    return Box(a)


def _to_host(v):
    if isinstance(v, Box):
        Counts.to_host += 1
        return v.a
    return v


class BoxedPlugin:
    @hookimpl
    def onnxkit_backends(self):
        return [Backend(name="boxed", asarray=_to_box, to_numpy=_to_host,
                        element_types=frozenset({int(DataType.FLOAT)}), fallback="cpu")]

    @hookimpl
    def onnxkit_kernels(self, backend):
        if backend != "boxed":
            return None

        def relu(ctx):
            def run(x):
                assert isinstance(x, Box), f"a boxed kernel got {type(x).__name__}"
                return Box(np.maximum(x.a, 0))
            return run

        return {("", "Relu", 14): relu}


@pytest.fixture
def boxed():
    Counts.to_box = Counts.to_host = 0
    return build_registry(extra=[("boxed_test_backend", BoxedPlugin())])


def test_values_cross_once_per_crossing(boxed):
    """x -Relu(boxed)-> a -Neg(cpu)-> b, read by Relu(boxed) and by Abs(cpu) and Sin(cpu)."""
    f = T(1, [4])
    nodes = [ir.Node(["x"], ["a"], op_type="Relu", name="r1"), ir.Node(["a"], ["b"], op_type="Neg", name="neg"),
             ir.Node(["b"], ["c"], op_type="Relu", name="r2"), ir.Node(["b"], ["d"], op_type="Abs", name="abs"),
             ir.Node(["a"], ["e"], op_type="Sin", name="sin")]
    m = _model(nodes, [ir.ValueInfo("x", f)], [ir.ValueInfo(n, f) for n in "cde"])
    sess = InferenceSession(m, "boxed", registry=boxed)
    assert [(fb.node, fb.op_type, fb.runs_on) for fb in sess.fallbacks] == [
        ("neg", "Neg", "cpu"), ("abs", "Abs", "cpu"), ("sin", "Sin", "cpu")]
    assert all("no kernel for ai.onnx::" in fb.why and "on backend 'boxed'" in fb.why for fb in sess.fallbacks)
    Counts.to_box = Counts.to_host = 0
    c, d, e = sess.run(None, {"x": np.array([-1, 0, 2, 3], np.float32)})
    np.testing.assert_array_equal(c, [0, 0, 0, 0])
    np.testing.assert_array_equal(d, [0, 0, 2, 3])
    np.testing.assert_allclose(e, np.sin(np.array([0, 0, 2, 3], np.float32)), rtol=1e-6)
    # to boxed: the feed x, and b (Neg's output, read by r2) once.  To host: a once, by its producer
    # (only cpu nodes read it); b for abs (b is read on both backends: it stays boxed and its cpu
    # reader converts it); and c, the session's output
    assert (Counts.to_box, Counts.to_host) == (2, 3)


def test_an_output_only_the_fallback_reads_is_converted_once_by_its_producer(boxed):
    f = T(1, [3])
    nodes = [ir.Node(["x"], ["a"], op_type="Relu"), ir.Node(["a"], ["b"], op_type="Neg"),
             ir.Node(["a"], ["c"], op_type="Abs"), ir.Node(["a"], ["d"], op_type="Exp")]
    m = _model(nodes, [ir.ValueInfo("x", f)], [ir.ValueInfo(n, f) for n in "bcd"])
    sess = InferenceSession(m, "boxed", registry=boxed)
    Counts.to_box = Counts.to_host = 0
    b, c, d = sess.run(None, {"x": np.array([-2, 0, 1], np.float32)})
    np.testing.assert_array_equal(b, [0, 0, -1])
    np.testing.assert_array_equal(c, [0, 0, 1])
    np.testing.assert_allclose(d, [1, 1, np.e], rtol=1e-6)
    assert (Counts.to_box, Counts.to_host) == (1, 1)  # x in; a out of Relu, once for three readers


def test_types_the_backend_does_not_compute_fall_back_and_unknown_types_are_decided_by_the_definition(boxed):
    """Relu of float64 falls back (a type boxed does not compute); Identity of an input of unknown
    type falls back (its definition admits strings there); Relu of float32 stays on boxed."""
    nodes = [ir.Node(["x64"], ["y64"], op_type="Relu", name="relu64"),
             ir.Node(["u"], ["v"], op_type="Identity", name="ident"),
             ir.Node(["x"], ["y"], op_type="Relu", name="relu32")]
    m = _model(nodes, [ir.ValueInfo("x64", T(11, [2])), ir.ValueInfo("u"), ir.ValueInfo("x", T(1, [2]))],
               [ir.ValueInfo("y64", T(11, [2])), ir.ValueInfo("v"), ir.ValueInfo("y", T(1, [2]))])
    sess = InferenceSession(m, "boxed", registry=boxed, validate=False)
    why = {fb.node: fb.why for fb in sess.fallbacks}
    assert set(why) == {"relu64", "ident"}
    assert "input 0 'x64' is tensor(double)" in why["relu64"]
    assert why["ident"].startswith("the type of input 0 'u' is unknown at planning and ai.onnx::Identity-21 admits ")
    y64, v, y = sess.run(None, {"x64": np.array([-1.0, 2.0]), "u": np.array(["a", "b"], dtype=object),
                                "x": np.array([-3, 4], np.float32)})
    assert y64.dtype == np.float64 and y64.tolist() == [0.0, 2.0]
    assert v.tolist() == ["a", "b"]
    assert y.dtype == np.float32 and y.tolist() == [0.0, 4.0]


def test_a_loop_that_falls_back_runs_its_body_on_the_fallback(boxed):
    """Loop (no boxed kernel) of 3 iterations: s <- Relu(s + x), x = [-1, 1] from outside."""
    f = T(1, [2])
    body = ir.Graph(node=[ir.Node(["s", "x"], ["t"], op_type="Add"), ir.Node(["t"], ["s_out"], op_type="Relu"),
                          ir.Node(["c"], ["c_out"], op_type="Identity")], name="body",
                    input=[ir.ValueInfo("i", T(7, [])), ir.ValueInfo("c", T(9, [])), ir.ValueInfo("s", f)],
                    output=[ir.ValueInfo("c_out", T(9, [])), ir.ValueInfo("s_out", f)])
    loop = ir.Node(["M", "", "s0"], ["s_final"], op_type="Loop", name="loop",
                   attribute=[ir.Attribute.make("body", body)])
    pre = ir.Node(["x0"], ["x"], op_type="Relu", name="pre")  # x lives on boxed; the body reads it on cpu
    m = _model([pre, loop], [ir.ValueInfo("M", T(7, [])), ir.ValueInfo("s0", f), ir.ValueInfo("x0", f)],
               [ir.ValueInfo("s_final", f)])
    sess = InferenceSession(m, "boxed", registry=boxed)
    assert [(fb.node, fb.op_type) for fb in sess.fallbacks] == [("loop", "Loop")]  # its body is not listed
    (s,) = sess.run(None, {"M": np.array(3, np.int64), "s0": np.array([1, -5], np.float32),
                           "x0": np.array([2, 1], np.float32)})
    np.testing.assert_array_equal(s, [7, 2])  # [1, -5] -> [3, 0] -> [5, 1] -> [7, 2]


def test_a_function_body_is_planned_node_by_node_with_the_call_s_types(boxed):
    """Local function F(x) = Relu(Neg(Relu(x))): called on float32, its body's Neg runs on cpu and its Relus on boxed;
    F(u) with u float64 runs wholly on cpu (the body typed with the call's input type)."""
    body = [ir.Node(["x"], ["a"], op_type="Relu", name="in_relu"), ir.Node(["a"], ["b"], op_type="Neg", name="in_neg"),
            ir.Node(["b"], ["y"], op_type="Relu", name="in_relu2")]
    fn = ir.Function(name="F", domain="com.example", input=["x"], output=["y"], node=body,
                     opset_import=[ir.OperatorSetId("", 21)])
    nodes = [ir.Node(["x"], ["y"], op_type="F", domain="com.example", name="call32"),
             ir.Node(["y"], ["z"], op_type="Relu", name="after"),
             ir.Node(["u"], ["v"], op_type="F", domain="com.example", name="call64")]
    m = _model(nodes, [ir.ValueInfo("x", T(1, [2])), ir.ValueInfo("u", T(11, [2]))],
               [ir.ValueInfo("z", T(1, [2])), ir.ValueInfo("v", T(11, [2]))],
               extra_opsets=[ir.OperatorSetId("com.example", 1)])
    m.functions = [fn]
    sess = InferenceSession(m, "boxed", registry=boxed)
    assert [(fb.node, fb.why.split(",")[0]) for fb in sess.fallbacks] == [
        ("in_neg", "no kernel for ai.onnx::Neg-13 on backend 'boxed'"),
        ("in_relu", "input 0 'x' is tensor(double)"), ("in_neg", "input 0 'a' is tensor(double)"),
        ("in_relu2", "input 0 'b' is tensor(double)")]
    z, v = sess.run(None, {"x": np.array([-1, 2], np.float32), "u": np.array([-1.0, 2.0])})
    assert z.dtype == np.float32 and z.tolist() == [0.0, 0.0]  # Relu(-Relu(x)) = 0
    assert v.dtype == np.float64 and v.tolist() == [0.0, 0.0]


def test_the_cpu_backend_declares_no_fallback_and_keeps_refusing():
    reg = onnxkit.registry.get_registry()
    assert reg.backends["cpu"].fallback is None and reg.backends["cpu"].element_types is None
    boxed_only = build_registry(include=["onnxkit-default-domain", "boxed_test_backend"],
                                extra=[("boxed_test_backend", BoxedPlugin())])
    assert "cpu" not in boxed_only.backends
    m = _model([ir.Node(["x"], ["y"], op_type="Neg")], [ir.ValueInfo("x", T(1, [2]))], [ir.ValueInfo("y", T(1, [2]))])
    with pytest.raises(UnsupportedOperatorError, match="Neg"):  # its fallback is not installed
        InferenceSession(m, "boxed", registry=boxed_only)


# -- the gpu backend ---------------------------------------------------------------------------------

torch = pytest.importorskip("torch")


def test_gpu_declares_cpu_as_its_fallback_and_the_types_torch_computes():
    gpu = onnxkit.registry.get_registry().backends["gpu"]
    assert gpu.fallback == "cpu"
    for tag in (DataType.FLOAT, DataType.INT64, DataType.BOOL, DataType.BFLOAT16, DataType.UINT8):
        assert int(tag) in gpu.element_types
    for tag in (DataType.UINT16, DataType.UINT32, DataType.UINT64, DataType.STRING, DataType.FLOAT8E4M3FN,
                DataType.INT4, DataType.FLOAT4E2M1):
        assert int(tag) not in gpu.element_types


def _mixed_model():
    """y = Relu(Cast<float>(a + b)) with a, b uint32: Add and Cast run on cpu, Relu on torch."""
    nodes = [ir.Node(["a", "b"], ["s"], op_type="Add", name="add"),
             ir.Node(["s"], ["f"], op_type="Cast", name="cast", attribute=[ir.Attribute.make("to", 1)]),
             ir.Node(["f", "k"], ["g"], op_type="Sub", name="sub"),
             ir.Node(["g"], ["y"], op_type="Relu", name="relu")]
    k = ir.Tensor.from_numpy(np.array([5.0], np.float32), "k")
    return _model(nodes, [ir.ValueInfo("a", T(12, [3])), ir.ValueInfo("b", T(12, [3]))],
                  [ir.ValueInfo("y", T(1, [3]))], initializer=[k])


def test_gpu_runs_a_uint32_node_on_cpu_and_the_rest_on_torch():
    sess = InferenceSession(_mixed_model(), "gpu")
    assert [(fb.node, fb.op_type, fb.domain, fb.version, fb.runs_on) for fb in sess.fallbacks] == [
        ("add", "Add", "ai.onnx", 14, "cpu"), ("cast", "Cast", "ai.onnx", 21, "cpu")]
    assert "input 0 'a' is tensor(uint32), which backend 'gpu' does not compute" == sess.fallbacks[0].why
    (y,) = sess.run(None, {"a": np.array([1, 2, 4000000000], np.uint32), "b": np.array([1, 9, 4000000000], np.uint32)})
    # 4e9 + 4e9 wraps modulo 2**32 (uint32 arithmetic, computed exactly on cpu) = 3705032704
    assert isinstance(y, np.ndarray) and y.dtype == np.float32
    np.testing.assert_array_equal(y, [0.0, 6.0, np.float32(3705032704) - 5])


def test_gpu_runs_ml_and_string_operators_on_cpu():
    ml = ir.OperatorSetId("ai.onnx.ml", 1)
    nodes = [ir.Node(["x"], ["y"], op_type="Binarizer", domain="ai.onnx.ml", name="bin",
                     attribute=[ir.Attribute.make("threshold", 0.5)]),
             ir.Node(["y"], ["z"], op_type="Neg", name="neg")]
    m = _model(nodes, [ir.ValueInfo("x", T(1, [3]))], [ir.ValueInfo("z", T(1, [3]))], extra_opsets=[ml])
    sess = InferenceSession(m, "gpu")
    assert [(fb.op_type, fb.domain) for fb in sess.fallbacks] == [("Binarizer", "ai.onnx.ml")]
    (z,) = sess.run(None, {"x": np.array([0.2, 0.7, 0.5], np.float32)})
    np.testing.assert_array_equal(z, [0.0, -1.0, 0.0])


def test_onnxkit_unsupported_lists_fallbacks_separately_and_exits_0(tmp_path):
    path = tmp_path / "mixed.onnx"
    onnxkit.save(_mixed_model(), path)
    out = subprocess.run([sys.executable, "-m", "onnxkit", "unsupported", str(path), "--backend", "gpu"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 operator(s) planned on a fallback of gpu" in out.stdout
    assert "Add-14" in out.stdout and "runs on cpu: input 0 'a' is tensor(uint32)" in out.stdout
    assert "Relu" not in out.stdout
    cpu = subprocess.run([sys.executable, "-m", "onnxkit", "unsupported", str(path)], capture_output=True, text=True)
    assert cpu.returncode == 0 and "fallback" not in cpu.stdout


def test_asking_for_cuda_where_torch_sees_none_is_an_error(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    from onnxkit_gpu import device

    monkeypatch.setenv("ONNXKIT_GPU_DEVICE", "cuda")
    device.device.cache_clear()
    try:
        with pytest.raises(onnxkit.errors.OnnxkitError, match="sees no CUDA device"):
            InferenceSession(_mixed_model(), "gpu")
    finally:
        monkeypatch.delenv("ONNXKIT_GPU_DEVICE")
        device.device.cache_clear()


def test_the_example_domain_package_runs_on_gpu_through_the_cpu_fallback():
    """examples/custom_domain has cpu kernels only, and an opaque Histogram value between its two nodes."""
    import importlib

    from test_custom_domain import EXAMPLE, stats_model

    sys.path.insert(0, str(EXAMPLE))
    try:
        plugin = importlib.import_module("onnxkit_example_stats.plugin")
    finally:
        sys.path.remove(str(EXAMPLE))
    sess = InferenceSession(stats_model(), "gpu", registry=build_registry(extra=[("example_stats", plugin)]))
    assert [(f.node, f.runs_on) for f in sess.fallbacks] == [("hist", "cpu"), ("quant", "cpu")]
    (y,) = sess.run(None, {"x": np.arange(8, dtype=np.float32), "q": np.array([0.0, 0.5, 1.0], np.float32)})
    np.testing.assert_allclose(y, [0.0, 3.5, 7.0])  # 4 equal bins over [0, 7]: the median is the middle edge
