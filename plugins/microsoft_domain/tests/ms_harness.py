"""One-node com.microsoft models run on onnxkit (cpu and gpu backends) and on onnxruntime, compared.

onnx.helper and onnxruntime are used here as test tools and the oracle only.  :func:`check`
builds the model, runs it on onnxruntime's CPU provider (graph optimizations off, so the node
itself runs) and on each onnxkit backend with default options, and asserts equal dtypes and
shapes and close values; on gpu it first asserts the node runs on torch, not on the cpu
fallback (except for the ``host_only`` string kernels).
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import helper

from onnxkit.dtypes import from_numpy_dtype
from onnxkit.runtime import InferenceSession

MS = "com.microsoft"
BACKENDS = ("cpu", "gpu")


def build(op, inputs, attrs=None, n_out=1, domain=MS, opset=17) -> tuple:
    """``(model bytes, feeds)`` of one node ``n0`` over ``inputs`` (None: an omitted optional input)."""
    names = [f"x{k}" if v is not None else "" for k, v in enumerate(inputs)]
    while names and not names[-1]:
        names.pop()
    outs = ["y"] + [f"y{k}" for k in range(1, n_out)]
    node = helper.make_node(op, names, outs, name="n0", domain=domain, **(attrs or {}))
    ins = [helper.make_tensor_value_info(n, int(from_numpy_dtype(np.asarray(v).dtype).tag), list(np.shape(v)))
           for n, v in zip(names, inputs) if v is not None]
    g = helper.make_graph([node], "g", ins, [helper.make_empty_tensor_value_info(o) for o in outs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    return m.SerializeToString(), {n: v for n, v in zip(names, inputs) if v is not None}


def run_ort(model: bytes, feed: dict) -> list:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(None, feed)


def run_onnxkit(model: bytes, feed: dict, backend: str, on_fallback: bool = False) -> list:
    sess = InferenceSession(model, backend)
    if backend == "gpu" and not on_fallback:
        assert not [f for f in sess.fallbacks if f.node == "n0"], sess.fallbacks
    return sess.run(None, feed)


def assert_same(got, want, rtol, atol, what="") -> None:
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (what, k, g.dtype, w.dtype, g.shape, w.shape)
        if w.dtype == object:
            assert g.tolist() == w.tolist(), (what, k)
        elif w.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w, err_msg=f"{what} output {k}")
        else:
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                       err_msg=f"{what} output {k}")


def check(op, inputs, attrs=None, n_out=1, rtol=1e-5, atol=1e-5, host_only=False, outputs=None, opset=17):
    """Run ``op`` on onnxruntime and on both onnxkit backends and compare (``outputs``: only
    these output positions are compared, e.g. where onnxruntime leaves one unspecified)."""
    model, feed = build(op, inputs, attrs, n_out, opset=opset)
    want = run_ort(model, feed)
    for backend in BACKENDS:
        got = run_onnxkit(model, feed, backend, on_fallback=host_only)
        if outputs is not None:
            got, want_k = [got[k] for k in outputs], [want[k] for k in outputs]
        else:
            want_k = want
        assert_same(got, want_k, rtol, atol, f"{op} {attrs or {}} on {backend}")
    return want


def rand(rng, shape, dtype=np.float32, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def nbits_model(n: int, k: int, block: int, zp: bool, bias: bool, seed: int = 5) -> bytes:
    """One MatMulNBits node ``Y = A @ B`` (4 bits, accuracy_level 4) with random constant B and
    scales, packed uint8 zero points (``zp``) and a bias (``bias``); K need not be a whole number
    of blocks (the last block's nibbles past K random)."""
    from onnx import TensorProto, numpy_helper

    rng = np.random.default_rng(seed)
    kb = -(-k // block)
    q = rng.integers(0, 16, (n, kb, block))
    b = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    inits = [numpy_helper.from_array(b, "B"),
             numpy_helper.from_array((rng.random(n * kb) * 0.1 + 0.01).astype(np.float32), "S")]
    names = ["A", "B", "S"]
    if zp:
        z = rng.integers(0, 16, (n, -(-kb // 2) * 2))
        inits.append(numpy_helper.from_array((z[:, 0::2] | (z[:, 1::2] << 4)).astype(np.uint8).reshape(-1), "Z"))
        names.append("Z")
    if bias:
        names += [""] * (5 - len(names)) + ["bias"]
        inits.append(numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "bias"))
    node = helper.make_node("MatMulNBits", names, ["Y"], name="n0", domain=MS, K=k, N=n, bits=4,
                            block_size=block, accuracy_level=4)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("A", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])
    m.ir_version = 10
    return m.SerializeToString()


def spied(lazy, calls: list, note=lambda args: 1):
    """What ``lazy.get()`` gives (None where compiled loops are off), its calls noted in ``calls``
    (``note(args)`` each)."""
    real = lazy.get()
    return None if real is None else (lambda *args: calls.append(note(args)) or real(*args))
