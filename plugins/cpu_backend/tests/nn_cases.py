"""What the cpu backend's nn tests share (test_nn.py, test_nn_linalg_resize.py): one-node models
built with ``onnx.helper`` (tests only), run by onnxkit and by onnx's ReferenceEvaluator (the
oracle), the tests' random stream, a float64 comparison and a direct 2-D convolution.  Callers
import ``onnx`` with ``pytest.importorskip`` first."""

from __future__ import annotations

import itertools

import numpy as np
from onnx import helper
from onnx.reference import ReferenceEvaluator

from onnxkit.runtime import InferenceSession

RNG = np.random.default_rng(20240601)


def elem_type(a) -> int:
    return helper.np_dtype_to_tensor_dtype(a.dtype)


def build(op, opset, inputs, attrs=None, n_out=1, out_elem=None, out_rank=None):
    """A one-node model and its feeds (``None`` in ``inputs`` = omitted optional input)."""
    names = [f"i{k}" if v is not None else "" for k, v in enumerate(inputs)]
    outs = [f"o{k}" for k in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    graph_inputs = [helper.make_tensor_value_info(n, elem_type(v), list(v.shape))
                    for n, v in zip(names, inputs) if v is not None]
    first = next(v for v in inputs if v is not None)
    outputs = []
    for k, o in enumerate(outs):
        elem = out_elem[k] if isinstance(out_elem, (list, tuple)) else out_elem
        rank = out_rank[k] if isinstance(out_rank, (list, tuple)) else out_rank
        outputs.append(helper.make_tensor_value_info(o, elem or elem_type(first), [None] * (first.ndim if rank is None
                                                                                          else rank)))
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(helper.make_graph([node], "g", graph_inputs, outputs), opset_imports=opsets)
    return model, {n: v for n, v in zip(names, inputs) if v is not None}


def run(op, opset, inputs, attrs=None, n_out=1, **kw):
    model, feeds = build(op, opset, inputs, attrs, n_out, **kw)
    # validate=False: the harness guesses the declared output rank; validation is tested in tests/checker
    outs = InferenceSession(model.SerializeToString(), validate=False).run(None, feeds)
    return outs if n_out > 1 else outs[0]


def oracle(op, opset, inputs, attrs=None, n_out=1, **kw):
    model, feeds = build(op, opset, inputs, attrs, n_out, **kw)
    outs = ReferenceEvaluator(model).run(None, feeds)
    return outs if n_out > 1 else outs[0]


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def close(a, b, rtol=1e-4, atol=1e-5):
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol, atol=atol)


def naive_conv(x, w, strides, pads, dil, group):
    """Direct definition of a 2-D convolution (loops over output pixels; small inputs only)."""
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - (kh - 1) * dil[0] - 1) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - (kw - 1) * dil[1] - 1) // strides[1] + 1
    y = np.zeros((n, m, oh, ow))
    mg = m // group
    for o in range(m):
        g = o // mg
        for i, j in itertools.product(range(oh), range(ow)):
            win = xp[:, g * cg:(g + 1) * cg, i * strides[0]:i * strides[0] + (kh - 1) * dil[0] + 1:dil[0],
                     j * strides[1]:j * strides[1] + (kw - 1) * dil[1] + 1:dil[1]]
            y[:, o, i, j] = (win * w[o]).sum(axis=(1, 2, 3))
    return y
