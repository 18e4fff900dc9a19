"""SparseAttention against onnxruntime 1.32's CPU kernel, run as onnxruntime's own tests run it
(test_sparse_attention.py): past and present bound to one buffer through IO binding.  Prompt and
decoding steps, batch rows of different lengths, packed and separate QKV, rotary (interleaved or
not), one or two block layouts (local blocks plus attention sinks, as Phi-3-small's), dense
layouts, float32 and float16."""

from __future__ import annotations

import itertools

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from onnxkit.errors import OnnxkitError
from onnxkit.runtime import InferenceSession

RNG = np.random.default_rng(99)


def model(n, nkv, block, packed, rotary, dtype, interleaved=0, scale=None) -> bytes:
    ins = ["q", "" if packed else "k", "" if packed else "v", "pk", "pv", "rows", "cols", "tot", "ktot"]
    if rotary:
        ins += ["cos", "sin"]
    attrs = dict(num_heads=n, kv_num_heads=nkv, sparse_block_size=block, do_rotary=int(rotary),
                 rotary_interleaved=interleaved)
    if scale is not None:
        attrs["scale"] = scale
    node = helper.make_node("SparseAttention", ins, ["y", "present_k", "present_v"], name="n0", domain="com.microsoft",
                            **attrs)
    et = TensorProto.FLOAT if dtype == np.float32 else TensorProto.FLOAT16
    names = [(x, et) for x in ("q", "pk", "pv")] + [(x, TensorProto.INT32) for x in ("rows", "cols", "tot", "ktot")]
    names += [] if packed else [("k", et), ("v", et)]
    names += [("cos", et), ("sin", et)] if rotary else []
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(x, t, None) for x, t in names],
                          [helper.make_tensor_value_info(x, et, None) for x in ("y", "present_k", "present_v")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10
    return m.SerializeToString()


def layouts(count, blocks, local):
    """CSR block layouts: layout l keeps the first block (a sink) and the last local + l blocks of each row."""
    rows, cols = [], []
    for lay in range(count):
        r, c = [0], []
        for i in range(blocks):
            c += [j for j in range(i + 1) if j == 0 or i - j < local + lay]
            r.append(len(c))
        rows.append(r)
        cols.append(c)
    width = max(len(c) for c in cols)
    return np.array(rows, np.int32), np.array([c + [-1] * (width - len(c)) for c in cols], np.int32)


def ort_run(data, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    io = sess.io_binding()
    vals = {k: ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(v)) for k, v in feeds.items()}
    for k, v in vals.items():
        io.bind_ortvalue_input(k, v)
    io.bind_output("y")
    io.bind_ortvalue_output("present_k", vals["pk"])
    io.bind_ortvalue_output("present_v", vals["pv"])
    sess.run_with_iobinding(io)
    return io.get_outputs()[0].numpy(), vals["pk"].numpy(), vals["pv"].numpy()


def case(b, s, past, n, nkv, h, cache, block, packed, rotary, dtype, count=2, local=2):
    """Feeds of one step: ``past[i]`` cached tokens per row (all 0: the prompt)."""
    feeds = {}
    if packed:
        feeds["q"] = RNG.standard_normal((b, s, (n + 2 * nkv) * h)).astype(dtype)
    else:
        feeds["q"] = RNG.standard_normal((b, s, n * h)).astype(dtype)
        feeds["k"] = RNG.standard_normal((b, s, nkv * h)).astype(dtype)
        feeds["v"] = RNG.standard_normal((b, s, nkv * h)).astype(dtype)
    pk = np.zeros((b, nkv, cache, h), dtype)
    pv = np.zeros((b, nkv, cache, h), dtype)
    for i, p in enumerate(past):
        pk[i, :, :p] = RNG.standard_normal((nkv, p, h))
        pv[i, :, :p] = RNG.standard_normal((nkv, p, h))
    feeds["pk"], feeds["pv"] = pk, pv
    feeds["rows"], feeds["cols"] = layouts(count, cache // block, local)
    lengths = np.array(past, np.int32) + s
    feeds["tot"] = np.array([int(lengths.max())], np.int32)
    feeds["ktot"] = lengths
    if rotary:
        angles = np.arange(cache)[:, None] / (10000 ** (np.arange(8) / 8))  # rot 16: all or part of H
        feeds["cos"], feeds["sin"] = np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)
    return feeds


def compare(data, feeds, dtype, backends=("cpu", "gpu")):
    want = ort_run(data, feeds)
    tol = 2e-5 if dtype == np.float32 else 3e-3
    for backend in backends:
        got = InferenceSession(data, backend).run(None, feeds)
        for g, w in zip(got, want):
            g = np.asarray(g)
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("packed,rotary,dtype", list(itertools.product([0, 1], [0, 1], [np.float32, np.float16])))
@pytest.mark.parametrize("step", ["prompt", "decode", "decode_ragged", "chunk"])
def test_sparse_attention_equals_onnxruntime(packed, rotary, dtype, step):
    n, nkv, h, cache, block = 4, 2, 16, 64, 16
    b, s, past = {"prompt": (2, 40, [0, 0]), "decode": (2, 1, [37, 37]), "decode_ragged": (2, 1, [20, 50]),
                  "chunk": (1, 5, [30])}[step]
    feeds = case(b, s, past, n, nkv, h, cache, block, packed, rotary, dtype)
    if step == "chunk":  # a later step of several tokens: total_sequence_length differs from S
        feeds["tot"] = np.array([35], np.int32)
    data = model(n, nkv, block, packed, rotary, dtype)
    if step != "decode_ragged":
        compare(data, feeds, dtype)
        return
    # Rows shorter than total_sequence_length: onnxruntime's CPU kernel reads their probabilities
    # at another offset than it wrote them (its result is unspecified memory); each row alone,
    # a batch of one, is what it computes right and what onnxkit's batch gives for that row.
    got = InferenceSession(data, "cpu").run(None, feeds)
    per_row = {"q", "k", "v", "pk", "pv", "ktot"}
    for i in range(b):
        one = {key: (val[i:i + 1] if key in per_row else val) for key, val in feeds.items()}
        one["tot"] = feeds["ktot"][i:i + 1].copy()
        want = ort_run(data, one)
        tol = 2e-5 if dtype == np.float32 else 3e-3
        for g, w in zip(got, want):
            np.testing.assert_allclose(g[i:i + 1].astype(np.float64), w.astype(np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("count,local", [(1, 1), (2, 3), (1, 8)])
def test_sparse_attention_layouts_scale_and_interleaved_rotary(interleaved, count, local):
    """(local 8 with 4 block rows: the dense lower triangle, causal only.)"""
    n, nkv, h, cache, block = 4, 1, 32, 64, 16
    feeds = case(1, 48, [0], n, nkv, h, cache, block, 0, 1, np.float32, count=count, local=local)
    compare(model(n, nkv, block, 0, 1, np.float32, interleaved=interleaved, scale=0.2), feeds, np.float32)


def test_sparse_attention_refuses_a_cache_too_short_by_name():
    n, nkv, h, cache, block = 2, 1, 8, 32, 16
    feeds = case(1, 1, [31], n, nkv, h, cache, block, 0, 0, np.float32)
    feeds["ktot"] = np.array([40], np.int32)
    with pytest.raises(OnnxkitError, match="do not fit the cache"):
        InferenceSession(model(n, nkv, block, 0, 0, np.float32), "cpu").run(None, feeds)
