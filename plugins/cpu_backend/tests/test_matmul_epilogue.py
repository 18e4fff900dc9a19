"""MatMul with the plan's epilogue (onnxkit_cpu.overrides.linalg.epilogue, the epilogue pass).

* MatMul + Add of a numpy operand of the product's type that broadcasts to the product's shape
  (bias [N], [1, N], a same-shape residual given as a graph input, either operand order) is one
  step: the separate nodes' bits (the plan with ``session.disable_passes=epilogue``, and numpy's
  product + operand written here), onnxruntime within float32 rounding; the in-place path is
  counted, so a case that silently falls back fails.
* Near misses run the Add's own kernel on the product (same bits): an operand that widens the
  product's shape, float16 (the widened product), int32 (the portable product).
* A Relu after the Add or alone is ``np.maximum`` in place (counted), a Clip its own kernel: the
  separate nodes' bits, NaN rows and zero columns included.
* MatMul's size guard still runs in the fused step: a product over ``max_value_bytes`` is
  refused by the MatMul's name.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from onnxkit.errors import LimitExceeded  # noqa: E402
from onnxkit.limits import Limits  # noqa: E402
from onnxkit.runtime import InferenceSession, SessionOptions  # noqa: E402
from onnxkit_cpu.overrides import linalg  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")
RNG = np.random.default_rng(4445)
ELEM = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.float16: TensorProto.FLOAT16,
        np.int32: TensorProto.INT32}


def rand(*shape, dtype=np.float32):
    if dtype == np.int32:
        return RNG.integers(-5, 5, shape).astype(np.int32)
    return RNG.standard_normal(shape).astype(dtype)


def model(a_shape, w, r, side=0, r_input=False, after=(), dtype=np.float32) -> bytes:
    """``Y = after(Add(MatMul(A, W), R))`` (``side`` 1: ``Add(R, MatMul)``; R None: no Add)."""
    elem = ELEM[dtype]
    inits, inputs = [numpy_helper.from_array(w, "w")], [helper.make_tensor_value_info("a", elem, a_shape)]
    nodes = [helper.make_node("MatMul", ["a", "w"], ["m"], name="the_matmul")]
    last = "m"
    if r is not None:
        if r_input:
            inputs.append(helper.make_tensor_value_info("r", elem, r.shape))
        else:
            inits.append(numpy_helper.from_array(r, "r"))
        nodes.append(helper.make_node("Add", ["m", "r"] if side == 0 else ["r", "m"], ["s"]))
        last = "s"
    for k, op in enumerate(after):
        extra = []
        if op == "Clip":
            inits += [numpy_helper.from_array(np.array(-0.5, dtype), "lo"), numpy_helper.from_array(np.array(0.75, dtype), "hi")]
            extra = ["lo", "hi"]
        nodes.append(helper.make_node(op, [last] + extra, [f"e{k}"]))
        last = f"e{k}"
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", elem, None)], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


@pytest.fixture
def in_place(monkeypatch):
    """How many Adds and Relus the fused step made in place (a list of one count)."""
    count = [0]
    real = np.add

    class Spy:
        @staticmethod
        def add(x, y, out=None):
            count[0] += out is not None
            return real(x, y, out=out)

        @staticmethod
        def maximum(x, y, out=None):
            count[0] += out is not None and out is x
            return np.maximum(x, y, out=out)

    monkeypatch.setattr(linalg, "np", _Proxy(np, Spy))
    return count


class _Proxy:
    """numpy, but ``add`` is the spy's."""

    def __init__(self, module, spy):
        self._module, self._spy = module, spy

    def __getattr__(self, name):
        return getattr(self._spy, name) if name in ("add", "maximum") else getattr(self._module, name)


def run(data, feeds, fused=True, limits=None):
    so = SessionOptions()
    so.intra_op_num_threads = 1
    if not fused:
        so.add_session_config_entry("session.disable_passes", "epilogue")
    sess = InferenceSession(data, so) if limits is None else InferenceSession(data, so, limits=limits)
    return sess.run(None, feeds)[0]


def peer(data, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


CASES = [
    ((1, 14, 14, 160), (160, 640), (640,), 0, False),
    ((1, 14, 14, 160), (160, 640), (640,), 1, False),
    ((1, 128, 128), (128, 512), (1, 512), 0, False),
    ((2, 9, 64), (64, 48), (2, 9, 48), 0, True),        # a residual of the product's shape
    ((2, 9, 64), (64, 48), (9, 1), 1, True),            # broadcast along N
    ((7, 320), (320, 1280), (1280,), 0, True),          # rank 2, C a graph input (no Gemm rewrite)
    ((5, 3, 64), (64, 32), (), 0, False),               # 0-d operand
]


@pytest.mark.parametrize("a_shape, w_shape, r_shape, side, r_input", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_add_in_place_gives_the_separate_nodes_bits(a_shape, w_shape, r_shape, side, r_input, dtype, in_place):
    a, w, r = rand(*a_shape, dtype=dtype), rand(*w_shape, dtype=dtype), rand(*r_shape, dtype=dtype)
    data = model(a.shape, w, r, side, r_input, dtype=dtype)
    feeds = {"a": a, "r": r} if r_input else {"a": a}
    unfused = run(data, feeds, fused=False)
    before = in_place[0]
    got = run(data, feeds)
    assert in_place[0] > before, "the Add was not made in place"
    assert got.dtype == dtype and np.array_equal(got, unfused)
    product = linalg.np.matmul(a.reshape(-1, a.shape[-1]), w).reshape(a.shape[:-1] + w.shape[1:]) \
        if linalg.flat_rows(a, w) else np.matmul(a, w)
    assert np.array_equal(got, product + r if side == 0 else r + product)
    k = a.shape[-1]
    tol = 4 * k * np.finfo(dtype).eps * (np.abs(unfused).max() + 1)
    np.testing.assert_allclose(got, peer(data, feeds), rtol=0, atol=tol)


def test_an_operand_that_widens_the_product_runs_the_add_kernel(in_place):
    a, w, r = rand(1, 5, 64), rand(64, 32), rand(3, 1, 32)
    data = model(a.shape, w, r, 0, True)
    got = run(data, {"a": a, "r": r})
    assert in_place[0] == 0 and got.shape == (3, 5, 32)
    assert np.array_equal(got, run(data, {"a": a, "r": r}, fused=False))
    assert np.array_equal(got, np.matmul(a, w) + r)


@pytest.mark.parametrize("dtype", [np.float16, np.int32])
def test_other_element_types_run_the_add_kernel(dtype, in_place):
    a, w, r = rand(4, 6, 16, dtype=dtype), rand(16, 8, dtype=dtype), rand(8, dtype=dtype)
    data = model(a.shape, w, r, 1, dtype=dtype)
    got = run(data, {"a": a})
    assert in_place[0] == 0
    assert got.dtype == dtype and np.array_equal(got, run(data, {"a": a}, fused=False))
    if dtype == np.int32:
        assert np.array_equal(got, r + np.matmul(a, w))


@pytest.mark.parametrize("after, with_add", [(("Relu",), True), (("Clip",), True), (("Relu",), False)])
def test_relu_and_clip_after(after, with_add, in_place):
    a, w, r = rand(2, 7, 7, 320), rand(320, 256), rand(256)
    a[0, 1, 2, 3] = np.nan          # a row of NaN products: the Relu keeps NaN's bits
    w[:, 5] = 0.0                   # a column of zero products (+0 or -0 before the Relu)
    a[1] = np.abs(a[1])
    w[:, 6] = -np.abs(w[:, 6])
    data = model(a.shape, w, r if with_add else None, after=after)
    got = run(data, {"a": a})
    maxima = sum(1 for op in after if op == "Relu")
    assert in_place[0] == (1 if with_add else 0) + maxima
    unfused = run(data, {"a": a}, fused=False)
    assert np.array_equal(got.view(np.uint32), unfused.view(np.uint32))
    assert np.isnan(got[0, 1, 2]).all()
    fine = ~np.isnan(got)
    np.testing.assert_allclose(got[fine], peer(data, {"a": a})[fine], rtol=0, atol=1e-3)


def test_the_matmul_size_guard_runs_in_the_fused_step():
    a, w, r = rand(1, 128, 256), rand(256, 4096), rand(4096)
    data = model(a.shape, w, r)
    so = SessionOptions()
    for fused in (False, True):
        if not fused:
            so.add_session_config_entry("session.disable_passes", "epilogue")
        sess = InferenceSession(data, so, limits=Limits(max_value_bytes=1 << 20))
        with pytest.raises(LimitExceeded, match="the_matmul"):
            sess.run(None, {"a": a})
        so = SessionOptions()
    small = rand(1, 8, 256)       # 128 KiB: passes
    small_data = model(small.shape, w, r)
    got = InferenceSession(small_data, so, limits=Limits(max_value_bytes=1 << 20)).run(None, {"a": small})[0]
    assert np.array_equal(got, np.matmul(small, w) + r)


@pytest.mark.parametrize("a_shape, w_shape, dtype", [((64,), (64, 33), np.float32), ((64,), (64,), np.float32),
                                                     ((3, 64), (64, 7), np.float64), ((2, 5, 64), (64, 1), np.float32)])
def test_relu_on_vectors_scalars_and_odd_extents(a_shape, w_shape, dtype, in_place):
    a, w = rand(*a_shape, dtype=dtype), rand(*w_shape, dtype=dtype)
    a[..., 0] = 0.0
    w[..., 0] = -0.0 if w.ndim == 1 else w[..., 0]
    data = model(a.shape, w, None, after=("Relu",), dtype=dtype)
    got = run(data, {"a": a})
    assert in_place[0] == 1
    unfused = run(data, {"a": a}, fused=False)
    bits = np.uint32 if dtype == np.float32 else np.uint64
    assert got.shape == unfused.shape and np.array_equal(np.asarray(got).view(bits), np.asarray(unfused).view(bits))
    assert np.array_equal(got, np.maximum(np.matmul(a, w), 0))


@pytest.mark.parametrize("dtype, bits", [(np.float32, np.uint32), (np.float64, np.uint64)])
def test_the_zero_row_maximum_is_the_scalar_maximum_bit_for_bit(dtype, bits):
    """BLAS never hands the Relu a -0 or a NaN with a payload: the zero row is checked on them here."""
    y = rand(7, 37, dtype=dtype)
    specials = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, np.finfo(dtype).tiny / 4, -np.finfo(dtype).tiny / 4],
                        dtype)
    y[0, :7] = specials
    y[1, :4] = np.array([0x7fc00123, 0xffc00456, 0x7f800001, 0xff800001] if dtype == np.float32 else
                        [0x7ff8000000000123, 0xfff8000000000456, 0x7ff0000000000001, 0xfff0000000000001], bits).view(dtype)
    want = np.maximum(y, 0)
    got = y.copy()
    np.maximum(got, linalg.zero_row(got), out=got)
    assert np.array_equal(got.view(bits), want.view(bits))
    assert linalg.zero_row(np.asarray(np.float32(1.0))) == 0 and not linalg.zero_row(y).flags.writeable
