"""The convolution family (kernels/conv.py, the shared geometry inference/nn_geometry.py) on both
backends: cpu (numpy) and gpu (torch; its CPU device here).

Results are compared with a direct convolution written here (a sum over kernel taps of
shifted inputs, in float64), not with another backend; the geometry of inference and kernels
with each other; the portable im2col body is also run on its own over torch (the gpu backend
overrides Conv with torch's convolution).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

import onnxkit  # noqa: E402
from one_node import BACKENDS, build, run  # noqa: E402
from onnxkit.errors import OnnxkitError  # noqa: E402
from onnxkit.inference import infer_model  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_default_domain.inference.nn_geometry import (  # noqa: E402
    GeometryError, transpose_geometry, window_geometry)

RNG = np.random.default_rng(13)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def direct_conv(x, w, b, strides, pads, dil, group):
    """Conv by definition: zero padding, then for each kernel tap a strided slice times W."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    nd = x.ndim - 2
    begin, end = pads[:nd], pads[nd:]
    x = np.pad(x, [(0, 0), (0, 0)] + [(max(bb, 0), max(e, 0)) for bb, e in zip(begin, end)])
    x = x[(slice(None), slice(None)) + tuple(slice(max(-bb, 0), x.shape[2 + i] - max(-e, 0))
                                             for i, (bb, e) in enumerate(zip(begin, end)))]
    k = w.shape[2:]
    out = [(x.shape[2 + i] - (k[i] - 1) * dil[i] - 1) // strides[i] + 1 for i in range(nd)]
    n, c, m = x.shape[0], x.shape[1], w.shape[0]
    cg, mg = c // group, m // group
    y = np.zeros((n, m, *out))
    for g in range(group):
        xs = x[:, g * cg:(g + 1) * cg]
        for tap in itertools.product(*(range(kk) for kk in k)):
            sl = tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(tap, dil, out, strides))
            patch = xs[(slice(None), slice(None)) + sl]                          # (N, Cg, *O)
            wt = w[(slice(g * mg, (g + 1) * mg), slice(None)) + tap]              # (Mg, Cg)
            y[:, g * mg:(g + 1) * mg] += np.einsum("mc,nc...->nm...", wt, patch)
    if b is not None:
        y += b.reshape((1, -1) + (1,) * nd)
    return y


CASES = [
    dict(x=(2, 4, 7, 8), w=(6, 4, 3, 3), strides=[1, 1], pads=[1, 1, 1, 1], dil=[1, 1], group=1),
    dict(x=(1, 4, 7, 8), w=(6, 2, 3, 2), strides=[2, 1], pads=[2, 0, 1, 3], dil=[2, 2], group=2),
    dict(x=(1, 6, 6, 6), w=(12, 1, 3, 3), strides=[1, 2], pads=[1, 1, 1, 1], dil=[1, 1], group=6),  # depthwise x2
    dict(x=(2, 5, 6, 7), w=(3, 5, 1, 1), strides=[2, 3], pads=[0, 0, 0, 0], dil=[1, 1], group=1),   # 1x1 strided
    dict(x=(1, 2, 6, 6), w=(3, 2, 2, 2), strides=[1, 1], pads=[-1, 1, 0, -2], dil=[1, 1], group=1),  # crop
    dict(x=(2, 4, 9), w=(2, 2, 3), strides=[2], pads=[2, 1], dil=[2], group=2),                      # 1-D
    dict(x=(1, 2, 4, 5, 3), w=(3, 2, 2, 3, 2), strides=[1, 2, 1], pads=[1, 0, 1, 0, 1, 1], dil=[1, 1, 1], group=1),
    dict(x=(1, 2, 3, 4, 3, 4), w=(2, 2, 2, 2, 1, 2), strides=[1, 1, 2, 1], pads=[0, 1, 0, 0, 1, 0, 1, 1],
         dil=[1, 1, 1, 2], group=1),                                                                  # 4 spatial axes
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_conv_matches_the_definition(backend, case):
    c = CASES[case]
    x, w, b = randn(*c["x"]), randn(*c["w"]), randn(c["w"][0])
    attrs = dict(strides=c["strides"], pads=c["pads"], dilations=c["dil"], group=c["group"])
    y, sess = run(backend, "Conv", 11, [x, w, b], attrs)
    want = direct_conv(x, w, b, c["strides"], c["pads"], c["dil"], c["group"])
    assert y.dtype == np.float32 and y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    assert not sess.fallbacks


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_portable_im2col_body_on_each_namespace(backend):
    """kernels/conv.py's own Conv (both backends override it) against the definition."""
    import array_api_compat.numpy as xnp
    import array_api_compat.torch as xtorch

    from onnxkit_default_domain.kernels import conv as portable
    from onnxkit_default_domain.schemas import definitions

    class Ctx:   # what the factory reads of its NodeContext
        op_type, since_version, name = "Conv", 22, "n0"
        schema = next(s for s in definitions() if s.domain == "" and s.name == "Conv" and s.since_version == 22)
        xp = xnp if backend == "cpu" else xtorch

        def __init__(self, attrs):
            # the node's attributes over the definition's defaults, as the planner gives them
            defaults = {n: a.default_value for n, a in self.schema.attributes.items() if a.default_value is not None}
            self.attrs = {**defaults, **attrs}

        def attr(self, name, default=None):
            v = self.attrs.get(name)
            return default if v is None else v

        def attr_str(self, name, default=None):
            v = self.attr(name, default)
            return v.decode() if isinstance(v, bytes) else v

        def fail(self, message):
            raise OnnxkitError(message)

    wrap = (lambda a: a) if backend == "cpu" else torch.from_numpy
    for c in CASES:
        x, w, b = randn(*c["x"]), randn(*c["w"]), randn(c["w"][0])
        fn = portable.conv(Ctx(dict(strides=c["strides"], pads=c["pads"], dilations=c["dil"], group=c["group"])))
        y = np.asarray(fn(wrap(x), wrap(w), wrap(b)))
        np.testing.assert_allclose(y, direct_conv(x, w, b, c["strides"], c["pads"], c["dil"], c["group"]),
                                   rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_auto_pad_output_extents(backend, auto_pad):
    x, w = randn(1, 2, 7, 6), randn(3, 2, 2, 3)
    y, _ = run(backend, "Conv", 11, [x, w], {"auto_pad": auto_pad, "strides": [2, 1]})
    assert y.shape == ((1, 3, 4, 6) if auto_pad.startswith("SAME") else (1, 3, 3, 4))
    out, begin, end = window_geometry([7, 6], [2, 3], [2, 1], None, None, auto_pad)
    pads = begin + end
    np.testing.assert_allclose(y, direct_conv(x, w, None, [2, 1], pads, [1, 1], 1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_window_one_stride_too_wide_is_empty_a_wider_one_an_error(backend):
    y, _ = run(backend, "Conv", 11, [randn(1, 2, 2, 2), randn(3, 2, 3, 3)])
    assert y.shape == (1, 3, 0, 0)
    with pytest.raises(OnnxkitError, match=r"n0.*larger than the padded input"):
        run(backend, "Conv", 11, [randn(1, 2, 2, 2), randn(3, 2, 4, 4)])


def test_inference_and_kernel_give_the_same_geometry():
    """The inferred output shape is the computed one (both come from nn_geometry), and the
    impossible window is an inference error too."""
    geometries = [({"pads": [1, 0, 2, 1], "strides": [2, 3], "dilations": [1, 2]}, (1, 2, 9, 11), (4, 2, 3, 3)),
                  ({"auto_pad": "SAME_LOWER", "strides": [3, 2]}, (2, 2, 8, 5), (3, 2, 4, 2)),
                  ({"pads": [-1, 0, 0, -2]}, (1, 1, 6, 6), (1, 1, 2, 2)),
                  ({}, (1, 2, 2, 2), (3, 2, 3, 3))]
    for attrs, xs, ws in geometries:
        model, feed = build("Conv", 11, [randn(*xs), randn(*ws)], attrs)
        inferred = infer_model(onnxkit.load(model)).type_of("y").shape.values
        y = InferenceSession(model, "cpu", validate=False).run(None, feed)[0]
        assert list(inferred) == list(y.shape)
    model, _ = build("Conv", 11, [randn(1, 2, 2, 2), randn(3, 2, 4, 4)])
    report = infer_model(onnxkit.load(model))
    assert any("larger than the padded input" in str(d) for d in report.errors)


def test_window_geometry_over_unknown_and_symbolic_extents():
    assert window_geometry(["N", None, 9], [3, 3, 3], [1, 1, 2], None, [1] * 6) == ([None, None, 5], [1] * 3, [1] * 3)
    assert window_geometry([5, "W"], None, [2, 2], None, None, "SAME_UPPER") == ([3, None], [None] * 2, [None] * 2)
    assert window_geometry([6], [3], [2], None, [1, 1], "NOTSET", ceil_mode=True)[0] == [4]
    assert window_geometry([5], [2], [2], None, [0, 1], "NOTSET", ceil_mode=True)[0] == [3]   # last window starts at 4
    assert window_geometry([4], [3], [2], None, None, "SAME_LOWER") == ([2], [1], [0])
    for bad in (dict(strides=[0]), dict(pads=[1]), dict(auto_pad="SAME"), dict(kernel=[5])):
        args = dict(in_dims=[3], kernel=[2], strides=None, dilations=None, pads=None, auto_pad="NOTSET") | bad
        with pytest.raises(GeometryError):
            window_geometry(**args)
    assert transpose_geometry([3], [3], [2], None, None, "SAME_UPPER") == ([0], [0], [1], [6])
    assert transpose_geometry(["L"], [3], [2], None, None, "NOTSET", None, [1, 1, 9])[3] == [9]
    with pytest.raises(GeometryError, match="negative"):
        transpose_geometry([2], [2], [1], None, [2, 2])


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv_transpose_matches_the_adjoint_of_conv(backend):
    """<ConvTranspose(y), x> == <y, Conv(x)> for the same W, strides, pads and dilations."""
    x, w = randn(1, 6, 7, 8), randn(4, 3, 3, 2)      # Conv: 6 -> 4 channels; ConvTranspose: 4 -> 6
    attrs = {"strides": [2, 1], "pads": [1, 0, 0, 1], "dilations": [1, 2], "group": 2}
    fwd = direct_conv(x, w, None, [2, 1], [1, 0, 0, 1], [1, 2], 2)
    y = randn(*fwd.shape)
    got, _ = run(backend, "ConvTranspose", 11, [y, w], dict(attrs, output_padding=[1, 0]))
    assert got.shape == x.shape
    np.testing.assert_allclose(float(np.sum(got.astype(np.float64) * x)), float(np.sum(y * fwd)), rtol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_types_follow_the_definition(backend):
    x, w = randn(1, 1, 3, 3), randn(1, 1, 2, 2)
    with pytest.raises(OnnxkitError, match="bfloat16"):     # bfloat16 from Conv-22
        run(backend, "Conv", 11, [x.astype("bfloat16"), w.astype("bfloat16")])
    y16, _ = run(backend, "Conv", 11, [x.astype(np.float16), w.astype(np.float16)])
    assert y16.dtype == np.float16
    np.testing.assert_allclose(y16, direct_conv(x.astype(np.float16), w.astype(np.float16), None, [1, 1],
                                                [0] * 4, [1, 1], 1), rtol=2e-3, atol=2e-3)
    with pytest.raises(OnnxkitError, match="group 2 must divide"):
        run(backend, "Conv", 11, [randn(1, 3, 4, 4), randn(2, 1, 2, 2)], {"group": 2})


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv_integer_col2im_deform_conv_run_on_the_backend(backend):
    xi = RNG.integers(0, 255, (1, 2, 5, 5)).astype(np.uint8)
    wi = RNG.integers(0, 255, (3, 2, 2, 2)).astype(np.uint8)
    y, sess = run(backend, "ConvInteger", 10, [xi, wi, np.array(7, np.uint8), np.array([1, 2, 3], np.uint8)],
                  {"pads": [1, 0, 0, 1]})
    zw = np.array([1, 2, 3], np.float64).reshape(3, 1, 1, 1)
    want = direct_conv(xi.astype(np.float64) - 7, wi - zw, None, [1, 1], [1, 0, 0, 1], [1, 1], 1)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, want.astype(np.int32))
    assert not sess.fallbacks
    cols = RNG.integers(-9, 9, (1, 4, 12)).astype(np.int32)
    img, sess = run(backend, "Col2Im", 18, [cols, np.array([4, 5]), np.array([2, 2])])
    want = np.zeros((1, 1, 4, 5), np.int64)
    for t, (i, j) in enumerate(itertools.product(range(2), range(2))):
        want[0, 0, i:i + 3, j:j + 4] += cols[0, t].reshape(3, 4)
    np.testing.assert_array_equal(img, want)
    assert img.dtype == np.int32 and not sess.fallbacks
    x, w = randn(1, 2, 5, 5), randn(2, 2, 2, 2)
    offsets = np.zeros((1, 2 * 4, 4, 4), np.float32)        # zero offsets: DeformConv is Conv
    y, sess = run(backend, "DeformConv", 19, [x, w, offsets])
    np.testing.assert_allclose(y, direct_conv(x, w, None, [1, 1], [0] * 4, [1, 1], 1), rtol=1e-4, atol=1e-4)
    shifted = offsets.copy()
    shifted[:, 1::2] = 1.0                                   # every tap one column to the right
    y1, _ = run(backend, "DeformConv", 19, [x, w, shifted])
    np.testing.assert_allclose(y1[..., :3], direct_conv(x[..., 1:], w, None, [1, 1], [0] * 4, [1, 1], 1)[..., :3],
                               rtol=1e-4, atol=1e-4)


def test_conv_family_runs_on_the_gpu_backend_not_on_its_fallback():
    x, w = randn(1, 2, 5, 5), randn(3, 2, 3, 3)
    for op, opset, inputs in (("Conv", 22, [x, w]), ("ConvTranspose", 22, [x, np.swapaxes(w, 0, 1).copy()]),
                              ("Conv", 22, [x.astype("bfloat16"), w.astype("bfloat16")])):
        _, sess = run("gpu", op, opset, inputs)
        assert sess.fallbacks == [], (op, sess.fallbacks)
