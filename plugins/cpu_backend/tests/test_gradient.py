"""Gradient (ai.onnx.preview.training) on the cpu backend: reverse-mode differentiation of
the enclosing graph.

The two ONNX vectors only differentiate scalar Add/Mul.  These tests cover each gradient
rule (broadcasting, legacy ``broadcast``/``axis``, attribute and input forms of the
reductions, Softmax's 2-D coercion before 13), chains checked against analytic formulas
(MatMul -> Softmax -> weighted sum, Gemm with transposes), intermediate ``xs`` fed a
different value, ``zs`` through operators without a rule, and the refusals at planning
time (an operator without a rule, named; y depending on a free graph input).  Expected
values are derived by hand and computed independently in float64 numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnxkit import ir
from onnxkit.dtypes import from_numpy_dtype
from onnxkit.errors import EvaluationError, OnnxkitError
from onnxkit.runtime import InferenceSession

A = ir.Attribute.make
TRAIN = "ai.onnx.preview.training"


def node(op, inputs, outputs, domain="", **attrs):
    return ir.Node(list(inputs), list(outputs), name=f"{op}_{outputs[0]}", op_type=op, domain=domain,
                   attribute=[A(k, v) for k, v in attrs.items()])


def vi(name, value, shaped=True):
    arr = np.asarray(value)
    return ir.ValueInfo(name, ir.tensor_type(int(from_numpy_dtype(arr.dtype).tag), list(arr.shape) if shaped else None))


def grad(nodes, feeds, xs, y, zs=(), opset=13, consts=None, outputs=None, validate=True):
    """Run ``nodes`` + Gradient(xs, zs, y) and return the gradients in the order of xs."""
    consts = consts or {}
    gnode = node("Gradient", list(xs) + list(zs), outputs or [f"d_{x}" for x in xs], domain=TRAIN,
                 xs=list(xs), y=y, **({"zs": list(zs)} if zs else {}))
    outs = [(o, feeds.get(x, np.float32(0))) for o, x in zip(gnode.output, xs) if o]
    g = ir.Graph(node=list(nodes) + [gnode], name="g", input=[vi(n, v) for n, v in feeds.items()],
                 output=[vi(o, v) for o, v in outs],
                 initializer=[ir.Tensor.from_numpy(np.asarray(v), name=n) for n, v in consts.items()])
    m = ir.Model(ir_version=8, opset_import=[ir.OperatorSetId("", opset), ir.OperatorSetId(TRAIN, 1)], graph=g)
    return InferenceSession(m, validate=validate).run(None, feeds)


def f32(*shape, seed=0, lo=-1.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


def close(got, want, rtol=1e-5, atol=1e-6):
    assert got.dtype == np.asarray(want).dtype or np.asarray(want).dtype == np.float64
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol)


# -- scalars and elementwise binaries ----------------------------------------------------------
def test_scalar_add_mul_by_hand():
    a, b = np.float32(3.0).reshape(()), np.float32(-2.0).reshape(())
    # d = (a + b) * a: dd/da = 2a + b = 4, dd/db = a = 3
    da, db = grad([node("Add", "ab", "c"), node("Mul", "ca", "d")], {"a": a, "b": b}, ["a", "b"], "d", opset=12)
    assert da.dtype == np.float32 and da.shape == () and float(da) == 4.0 and float(db) == 3.0


@pytest.mark.parametrize("opset", [7, 13, 14])
def test_broadcast_binaries(opset):
    a, b = f32(2, 3, seed=1), f32(3, seed=2, lo=0.5, hi=2.0)
    # y = (a + b) * a - a / b, summed via the ones seed
    nodes = [node("Add", "ab", "s"), node("Mul", "sa", "m"), node("Div", "ab", "q"), node("Sub", "mq", "y")]
    da, db = grad(nodes, {"a": a, "b": b}, "ab", "y", opset=opset)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    close(da, 2 * a64 + b64 - 1 / b64)
    close(db, (a64 + a64 / b64 ** 2).sum(axis=0))


def test_legacy_broadcast_axis_opset6():
    a, b = f32(2, 3, 4, seed=3), f32(3, seed=4, lo=0.5, hi=2.0)
    # B aligned at axis 1: y = a * b[None, :, None]
    nodes = [node("Mul", "ab", "y", broadcast=1, axis=1)]
    da, db = grad(nodes, {"a": a, "b": b}, "ab", "y", opset=6)
    close(da, np.broadcast_to(b[None, :, None], a.shape).astype(np.float64))
    close(db, a.astype(np.float64).sum(axis=(0, 2)))


def test_same_value_used_twice_and_unconnected_x_is_zero():
    x, u = f32(4, seed=5), f32(2, 2, seed=6)
    dx, du = grad([node("Mul", "xx", "y")], {"x": x, "u": u}, ["x", "u"], "y")
    close(dx, 2 * x.astype(np.float64))
    assert du.dtype == np.float32 and du.shape == (2, 2) and not du.any()


# -- unary rules --------------------------------------------------------------------------------
UNARY = {
    "Neg": lambda x: -np.ones_like(x),
    "Identity": np.ones_like,
    "Relu": lambda x: (x > 0).astype(np.float64),
    "Sigmoid": lambda x: np.exp(-x) / (1 + np.exp(-x)) ** 2,
    "Tanh": lambda x: 1 / np.cosh(x) ** 2,
    "Exp": np.exp,
    "Log": lambda x: 1 / x,
    "Sqrt": lambda x: 0.5 / np.sqrt(x),
    "Abs": np.sign,
    "Reciprocal": lambda x: -1 / x ** 2,
}


@pytest.mark.parametrize("op", sorted(UNARY))
@pytest.mark.parametrize("opset", [6, 13])
def test_unary(op, opset):
    x = f32(3, 4, seed=7, lo=-2, hi=2)
    if op in ("Log", "Sqrt"):
        x = np.abs(x) + np.float32(0.25)
    (dx,) = grad([node(op, ["x"], ["y"])], {"x": x}, ["x"], "y", opset=opset)
    close(dx, UNARY[op](x.astype(np.float64)), rtol=1e-5)


def test_leaky_relu_alpha():
    x = np.array([-2.0, -0.5, 0.5, 3.0], np.float32)
    (dx,) = grad([node("LeakyRelu", ["x"], ["y"], alpha=0.2)], {"x": x}, ["x"], "y", opset=16)
    close(dx, np.array([0.2, 0.2, 1.0, 1.0]))


def test_pow_base_and_exponent():
    x, e = f32(2, 3, seed=8, lo=0.5, hi=2.0), f32(3, seed=9, lo=-1.5, hi=2.5)
    dx, de = grad([node("Pow", "xe", "y")], {"x": x, "e": e}, ["x", "e"], "y", opset=15)
    x64, e64 = x.astype(np.float64), e.astype(np.float64)
    close(dx, e64 * x64 ** (e64 - 1), rtol=1e-5)
    close(de, (x64 ** e64 * np.log(x64)).sum(axis=0), rtol=1e-5)


def test_pow_constant_exponent():
    x = np.array([[1.0, -2.0], [3.0, 0.5]], np.float32)
    # y = x ** 3, exponent an initializer: dy/dx = 3 x^2
    (dx,) = grad([node("Pow", ["x", "three"], ["y"])], {"x": x}, ["x"], "y",
                 consts={"three": np.array(3.0, np.float32)})
    close(dx, 3 * x.astype(np.float64) ** 2)


# -- matrix products ----------------------------------------------------------------------------
def test_matmul_softmax_chain_analytic():
    x, w, t = f32(2, 5, 3, seed=10), f32(3, 4, seed=11), f32(4, seed=12)
    # y = sum(Softmax(x @ w, axis=-1) * t)
    nodes = [node("MatMul", "xw", "z"), node("Softmax", "z", "s"), node("Mul", "st", "p"),
             node("ReduceSum", ["p"], ["y"], keepdims=0)]
    dx, dw = grad(nodes, {"x": x, "w": w}, "xw", "y", consts={"t": t})
    x64, w64, t64 = (v.astype(np.float64) for v in (x, w, t))
    z = x64 @ w64
    s = np.exp(z - z.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    dz = s * (t64 - (s * t64).sum(-1, keepdims=True))
    close(dx, dz @ w64.T, rtol=1e-4, atol=1e-6)
    close(dw, np.einsum("bmk,bmn->kn", x64, dz), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("ashape,bshape", [((4,), (4, 3)), ((2, 4), (4,)), ((4,), (4,)), ((2, 1, 3, 4), (5, 4, 2))])
def test_matmul_vectors_and_batches(ashape, bshape):
    a, b = f32(*ashape, seed=13), f32(*bshape, seed=14)
    t = f32(*np.matmul(a, b).shape, seed=15)
    da, db = grad([node("MatMul", "ab", "p"), node("Mul", "pt", "y")], {"a": a, "b": b}, "ab", "y",
                  consts={"t": t})
    a64, b64, t64 = (v.astype(np.float64) for v in (a, b, t))

    def basis_gradient(shape, f):
        # f is linear in its argument, so df/dv[i] = f(e_i) exactly
        out = np.zeros(shape)
        for i in np.ndindex(*shape):
            e = np.zeros(shape)
            e[i] = 1.0
            out[i] = f(e)
        return out

    close(da, basis_gradient(a.shape, lambda e: np.sum(np.matmul(e, b64) * t64)), rtol=1e-5)
    close(db, basis_gradient(b.shape, lambda e: np.sum(np.matmul(a64, e) * t64)), rtol=1e-5)


@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_gemm_transposes_alpha_beta(ta, tb):
    a = f32(*((4, 3) if ta else (3, 4)), seed=15)
    b = f32(*((5, 4) if tb else (4, 5)), seed=16)
    c = f32(5, seed=17)
    t = f32(3, 5, seed=18)
    # y = sum((alpha A'B' + beta C) * t)
    nodes = [node("Gemm", "abc", ["g"], alpha=0.5, beta=2.0, transA=ta, transB=tb), node("Mul", "gt", "y")]
    da, db, dc = grad(nodes, {"a": a, "b": b, "c": c}, "abc", "y", consts={"t": t}, opset=11)
    a64, b64, t64 = (v.astype(np.float64) for v in (a, b, t))
    ap, bp = (a64.T if ta else a64), (b64.T if tb else b64)
    dap, dbp = 0.5 * t64 @ bp.T, 0.5 * ap.T @ t64
    close(da, dap.T if ta else dap, rtol=1e-5)
    close(db, dbp.T if tb else dbp, rtol=1e-5)
    close(dc, 2.0 * t64.sum(0), rtol=1e-5)


# -- variadic and reductions -------------------------------------------------------------------
def test_sum_and_mean_broadcast():
    a, b, c = f32(2, 3, seed=19), f32(3, seed=20), f32(1, 1, seed=21)
    nodes = [node("Sum", "abc", ["s"]), node("Mean", "abc", ["m"]), node("Mul", "sm", "y")]
    da, db, dc = grad(nodes, {"a": a, "b": b, "c": c}, "abc", "y")
    a64, b64, c64 = (v.astype(np.float64) for v in (a, b, c))
    s, m = a64 + b64 + c64, (a64 + b64 + c64) / 3
    per = m + s / 3  # d(s*m)/d(each input) before un-broadcasting
    close(da, per, rtol=1e-5)
    close(db, per.sum(0), rtol=1e-5)
    close(dc, per.sum().reshape(1, 1), rtol=1e-5)


@pytest.mark.parametrize("opset,form", [(11, "attr"), (13, "input")])
def test_reduce_sum_axes_forms(opset, form):
    x, t = f32(2, 3, 4, seed=22), f32(2, 4, seed=23)
    if form == "attr":
        red = node("ReduceSum", ["x"], ["r"], axes=[1], keepdims=0)
        consts = {"t": t}
    else:
        red = node("ReduceSum", ["x", "ax"], ["r"], keepdims=0)
        consts = {"t": t, "ax": np.array([-2], np.int64)}
    (dx,) = grad([red, node("Mul", "rt", "y")], {"x": x}, ["x"], "y", opset=opset, consts=consts)
    close(dx, np.broadcast_to(t.astype(np.float64)[:, None, :], x.shape))


def test_reduce_sum_noop_with_empty_axes():
    x = f32(2, 3, seed=24)
    # both reductions are the identity: y = x * x
    nodes = [node("ReduceSum", ["x"], ["r"], noop_with_empty_axes=1),
             node("ReduceMean", ["x", "none"], ["m"], noop_with_empty_axes=1), node("Mul", "rm", "y")]
    (dx,) = grad(nodes, {"x": x}, ["x"], "y", opset=18, consts={"none": np.zeros(0, np.int64)})
    close(dx, 2 * x.astype(np.float64))


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_reduce_mean(opset):
    x, t = f32(2, 3, 4, seed=25), f32(2, 1, 4, seed=26)
    if opset >= 18:
        red = node("ReduceMean", ["x", "ax"], ["r"])
        consts = {"t": t, "ax": np.array([1], np.int64)}
    else:
        red = node("ReduceMean", ["x"], ["r"], axes=[1])
        consts = {"t": t}
    (dx,) = grad([red, node("Mul", "rt", "y")], {"x": x}, ["x"], "y", opset=opset, consts=consts)
    close(dx, np.broadcast_to(t.astype(np.float64) / 3, x.shape))


def test_reduce_mean_all_axes_keepdims0():
    x = f32(3, 4, seed=27)
    (dx,) = grad([node("ReduceMean", ["x"], ["y"], keepdims=0)], {"x": x}, ["x"], "y")
    close(dx, np.full((3, 4), 1 / 12))


# -- shape operators ----------------------------------------------------------------------------
def test_reshape_transpose_chain():
    x, w = f32(2, 6, seed=28), f32(4, 3, seed=29)
    nodes = [node("Reshape", ["x", "shape"], ["r"]), node("Transpose", ["r"], ["tr"], perm=[1, 0]),
             node("Mul", ["tr", "w"], ["y"])]
    (dx,) = grad(nodes, {"x": x}, ["x"], "y", consts={"w": w, "shape": np.array([3, 4], np.int64)})
    close(dx, w.astype(np.float64).T.reshape(2, 6))


def test_transpose_3d_perm_and_default():
    x, w = f32(2, 3, 4, seed=30), f32(3, 4, 2, seed=31)
    nodes = [node("Transpose", ["x"], ["t"], perm=[1, 2, 0]), node("Mul", "tw", "y")]
    (dx,) = grad(nodes, {"x": x}, ["x"], "y", consts={"w": w})
    close(dx, w.astype(np.float64).transpose(2, 0, 1))
    w2 = f32(4, 3, 2, seed=32)
    (dx,) = grad([node("Transpose", ["x"], ["t"]), node("Mul", "tw", "y")], {"x": x}, ["x"], "y", consts={"w": w2})
    close(dx, w2.astype(np.float64).transpose())


def test_concat_expand_flatten_squeeze():
    a, b, w = f32(2, 1, seed=33), f32(2, 2, seed=34), f32(2, 3, 4, seed=35)
    nodes = [node("Concat", "ab", ["c"], axis=-1),                       # (2, 3)
             node("Unsqueeze", ["c", "ax"], ["u"]),                      # (2, 3, 1)
             node("Expand", ["u", "shp"], ["e"]),                        # (2, 3, 4)
             node("Mul", "ew", ["m"]), node("Flatten", ["m"], ["y"], axis=1)]
    da, db = grad(nodes, {"a": a, "b": b}, "ab", "y",
                  consts={"w": w, "ax": np.array([2], np.int64), "shp": np.array([2, 3, 4], np.int64)})
    dc = w.astype(np.float64).sum(-1)
    close(da, dc[:, :1])
    close(db, dc[:, 1:])


@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_and_logsoftmax_axis_semantics(opset):
    x, t = f32(2, 3, 4, seed=36), f32(2, 3, 4, seed=37)
    for op in ("Softmax", "LogSoftmax"):
        (dx,) = grad([node(op, ["x"], ["s"], axis=1), node("Mul", "st", "y")], {"x": x}, ["x"], "y",
                     opset=opset, consts={"t": t})
        x64, t64 = x.astype(np.float64), t.astype(np.float64)
        if opset < 13:  # coerced to 2-D: (2, 12), normalised over the 12
            x64, t64 = x64.reshape(2, 12), t64.reshape(2, 12)
            ax = 1
        else:
            ax = 1
        z = np.exp(x64 - x64.max(ax, keepdims=True))
        s = z / z.sum(ax, keepdims=True)
        if op == "Softmax":
            want = s * (t64 - (s * t64).sum(ax, keepdims=True))
        else:
            want = t64 - s * t64.sum(ax, keepdims=True)
        close(dx, want.reshape(x.shape), rtol=1e-4, atol=1e-6)


# -- xs, zs, outputs and dtypes -----------------------------------------------------------------
def test_intermediate_xs_fed_another_value():
    a, b = f32(3, seed=38), f32(3, seed=39)
    h1 = np.array([1.0, -2.0, 0.5], np.float32)
    # H = a + b; y = H * H; Gradient(xs=[H]) fed H1: dy/dH = 2 H1 (not 2 (a + b))
    g = ir.Graph(
        node=[node("Add", "ab", "H"), node("Mul", "HH", "y"),
              node("Gradient", ["h1"], ["dH"], domain=TRAIN, xs=["H"], y="y")],
        name="g", input=[vi("a", a), vi("b", b), vi("h1", h1)], output=[vi("y", a), vi("dH", h1)])
    m = ir.Model(ir_version=8, opset_import=[ir.OperatorSetId("", 13), ir.OperatorSetId(TRAIN, 1)], graph=g)
    y, dh = InferenceSession(m).run(None, {"a": a, "b": b, "h1": h1})
    close(dh, 2 * h1.astype(np.float64))


def test_zs_through_operator_without_rule():
    x, z = f32(4, seed=40), f32(4, seed=41)
    # y = x * cos(z): Cos has no gradient rule but only z (not differentiated) flows through it
    dx, = grad([node("Cos", ["z"], ["c"]), node("Mul", "xc", "y")], {"x": x, "z": z}, ["x"], "y", zs=["z"])
    close(dx, np.cos(z.astype(np.float64)))


def test_unnamed_output_skipped_and_float64_kept():
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    (db,) = grad([node("Mul", "ab", "y")], {"a": a, "b": b}, "ab", "y", outputs=["", "d_b"])
    assert db.dtype == np.float64
    np.testing.assert_array_equal(db, a)


def test_float16_xs():
    a = np.array([1.5, -2.0], np.float16)
    (da,) = grad([node("Mul", "aa", "y")], {"a": a}, ["a"], "y")
    assert da.dtype == np.float16
    np.testing.assert_array_equal(da, np.array([3.0, -4.0], np.float16))


def test_y_is_x_gives_ones():
    x = f32(2, 2, seed=42)
    (dx,) = grad([node("Relu", ["x"], ["r"])], {"x": x}, ["x"], "x")
    np.testing.assert_array_equal(dx, np.ones((2, 2), np.float32))


# -- refusals ------------------------------------------------------------------------------------
def test_operator_without_rule_refused_at_planning():
    x = f32(3, seed=43)
    with pytest.raises(EvaluationError, match=r"Cos") as info:
        grad([node("Cos", ["x"], ["c"]), node("Neg", ["c"], ["y"])], {"x": x}, ["x"], "y")
    assert "no gradient rule" in str(info.value)


def test_gradient_of_gradient_refused():
    x = f32(3, seed=44)
    nodes = [node("Mul", "xx", "y"), node("Gradient", ["x"], ["dx1"], domain=TRAIN, xs=["x"], y="y")]
    with pytest.raises(EvaluationError, match=r"Gradient"):
        grad(nodes, {"x": x}, ["x"], "dx1")


def test_rule_missing_for_definition_refused():
    # Identity's rule is for tensors; an unknown op_type in another domain has none either
    x = f32(2, seed=45)
    with pytest.raises(EvaluationError, match=r"Softplus"):
        grad([node("Softplus", ["x"], ["y"])], {"x": x}, ["x"], "y", opset=22)


def test_y_depending_on_free_graph_input_refused():
    x, q = f32(2, seed=46), f32(2, seed=47)
    with pytest.raises(EvaluationError, match=r"'q'"):
        grad([node("Mul", "xq", "y")], {"x": x, "q": q}, ["x"], "y")


def test_xs_flowing_into_shape_input_refused():
    x = np.array([2.0, 3.0], np.float32)
    nodes = [node("Cast", ["x"], ["s"], to=7), node("Reshape", ["x", "s"], ["y"])]
    with pytest.raises(EvaluationError, match=r"Cast"):
        grad(nodes, {"x": x}, ["x"], "y")


def test_integer_xs_refused_at_run():
    a = np.array([1, 2], np.int64)
    with pytest.raises(OnnxkitError, match=r"float"):
        grad([node("Mul", "aa", "y")], {"a": a}, ["a"], "y", validate=False)  # the checker refuses it too
