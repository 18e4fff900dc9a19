"""The cpu fast paths of Cast (one ``astype``) and Pow (a one-element exponent 2, 3 or 0.5):
the same results as the paths they bypass, bit for bit, and as independent numpy formulas; the
fast path is the one taken (the bypassed portable helpers are made to fail)."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer_cases import TP, helper, model

from onnxkit import InferenceSession
from onnxkit_cpu.overrides import cast as cpu_cast
from onnxkit_cpu.overrides import elementwise as cpu_elementwise
from onnxkit_default_domain.kernels import elementwise as portable_elementwise

TAGS = {np.dtype(np.bool_): TP.BOOL, np.dtype(np.int8): TP.INT8, np.dtype(np.int32): TP.INT32,
        np.dtype(np.int64): TP.INT64, np.dtype(np.uint8): TP.UINT8, np.dtype(np.uint64): TP.UINT64,
        np.dtype(np.float32): TP.FLOAT, np.dtype(np.float64): TP.DOUBLE, np.dtype(np.float16): TP.FLOAT16}


def _kernel(op, dtypes, out, **attrs):
    names = [f"x{k}" for k in range(len(dtypes))]
    m = model([helper.make_node(op, names, ["y"], **attrs)],
              [helper.make_tensor_value_info(n, TAGS[np.dtype(d)], None) for n, d in zip(names, dtypes)],
              [helper.make_tensor_value_info("y", out, None)])
    return InferenceSession(m.SerializeToString(), validate=False).plan.steps[0].fn


def _values(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.array([[True, False, True], [False, False, True]])
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.array([[0, 1, 7], [info.max, info.min, 3]], dtype=dtype)
    return np.array([[0.0, -1.5, 2.75], [np.nan, np.inf, -np.inf], [1e30, -3e-39, 65504.5]], dtype=dtype)


def _same(got, want):
    assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


DIRECT = [(s, d) for s in ("bool", "int8", "int64", "uint64") for d in ("int32", "uint8", "float32", "float64")] + \
         [("float32", "float64"), ("float64", "float32"), ("float32", "float32"), ("int64", "int64")]
PORTABLE = [("float32", "int64"), ("float64", "int32"), ("int64", "bool"), ("float32", "bool"),
            ("float16", "float32"), ("float32", "float16")]


@pytest.mark.parametrize("src,dst", DIRECT)
def test_cast_direct_pairs_are_one_astype(monkeypatch, src, dst):
    src, dst = np.dtype(src), np.dtype(dst)
    fn = _kernel("Cast", [src], TAGS[dst], to=TAGS[dst])
    for x in (_values(src), _values(src)[:, ::2], _values(src)[0, 0, ...], _values(src)[:0]):
        with np.errstate(all="ignore"):
            want = x.astype(dst)  # the rule of Cast for these pairs (numpy's own conversion)
        _same(fn(x), want)
    x = _values(src)
    if src == dst:
        assert fn(x) is x  # the same type: the input itself, as the portable kernel gives it

    def fail(*args):
        raise AssertionError("the portable conversion ran")

    monkeypatch.setattr(cpu_cast.portable, "cast_values", fail)
    _same(fn(x), fn(x))  # the direct path does not reach it
    assert cpu_cast.direct(src, dst) is not None


@pytest.mark.parametrize("src,dst", PORTABLE)
def test_cast_other_pairs_keep_their_rules(monkeypatch, src, dst):
    src, dst = np.dtype(src), np.dtype(dst)
    assert cpu_cast.direct(src, dst) is None
    fn = _kernel("Cast", [src], TAGS[dst], to=TAGS[dst])
    x = _values(src)
    got = fn(x)
    monkeypatch.setattr(cpu_cast, "direct", lambda s, d: None)  # every pair by the bypassed path
    _same(got, _kernel("Cast", [src], TAGS[dst], to=TAGS[dst])(x))
    if dst.kind == "b":
        _same(got, x != 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("e", [2.0, 3.0, 0.5])
def test_pow_small_exponents_are_products_or_a_root(monkeypatch, dtype, e):
    fn = _kernel("Pow", [dtype, dtype], TAGS[np.dtype(dtype)])
    x = _values(dtype)
    x = np.concatenate([x, -x, np.linspace(-4, 4, 3, dtype=dtype).reshape(1, 3)])
    with np.errstate(all="ignore"):
        want = {2.0: x * x, 3.0: x * x * x, 0.5: np.sqrt(x)}[e]
        ref = np.power(x.astype(np.float64), e)
    for y in (np.array(e, dtype), np.array([e], dtype), np.array([[e]], dtype)):
        got = fn(x, y)
        _same(got, want)
        info = np.finfo(dtype)
        finite = np.isfinite(ref) & (np.abs(ref) < info.max) & ((np.abs(ref) >= info.tiny) | (ref == 0))  # in range
        np.testing.assert_allclose(got[finite], ref[finite], rtol=4 * np.finfo(dtype).eps)
        assert np.array_equal(np.isnan(got), np.isnan(ref))
    _same(fn(x[:, ::2], np.array(e, dtype)), want[:, ::2])
    _same(fn(x[0, 0, ...], np.array(e, dtype)), want[0, 0, ...])  # a 0-d result is an array

    def fail(*args):
        raise AssertionError("the portable small_power ran")

    monkeypatch.setattr(portable_elementwise, "small_power", fail)
    _same(fn(x, np.array(e, dtype)), want)


def test_pow_other_exponents_and_shapes_are_the_portable_kernels(monkeypatch):
    fn = _kernel("Pow", [np.float32, np.float32], TP.FLOAT)
    x = np.abs(_values(np.float32)) + 1
    cases = [(x, np.array(1.7, np.float32)), (x, np.array(np.nan, np.float32)), (x, np.array([2.0, 2.0, 2.0], np.float32)),
             (x[0], np.array([[2.0]], np.float32)), (x, np.array(2.0, np.float64))]
    got = [fn(a, b) for a, b in cases]
    monkeypatch.setattr(cpu_elementwise, "_SMALL_POWERS", {})
    plain = _kernel("Pow", [np.float32, np.float32], TP.FLOAT)
    for (a, b), g in zip(cases, got):
        _same(g, plain(a, b))
    with np.errstate(all="ignore"):
        _same(got[0], np.power(x, np.float32(1.7)))
