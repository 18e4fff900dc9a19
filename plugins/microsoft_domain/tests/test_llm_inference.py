"""Shape and type inference of the LLM operators (inference/llm.py): each one-node model's
inferred output types (onnxkit.infer_shapes, the node's outputs read through Identity nodes so
that they land in value_info) equal the element types and shapes onnxruntime 1.32 computes."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxkit import infer_shapes, ir, load

F, F16, U8, I32, I64 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.UINT8, TensorProto.INT32, TensorProto.INT64
RNG = np.random.default_rng(11)


def model(op, inputs, inits, n_out=1, **attrs) -> bytes:
    """``inputs``: [(name, elem, shape)] graph inputs; ``inits``: {name: array}; every node output
    goes through an Identity to an untyped graph output."""
    names = [n for n, _, _ in inputs] + list(inits)
    order = attrs.pop("order", names)
    outs = [f"y{i}" for i in range(n_out)]
    nodes = [helper.make_node(op, order, outs, name="n0", domain="com.microsoft", **attrs)]
    nodes += [helper.make_node("Identity", [o], [f"z{i}"]) for i, o in enumerate(outs)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, e, s) for n, e, s in inputs],
                          [helper.make_empty_tensor_value_info(f"z{i}") for i in range(n_out)],
                          initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10
    return m.SerializeToString()


def inferred(data: bytes, n_out: int) -> list:
    out = infer_shapes(load(data))
    types = {vi.name: vi.type for vi in out.graph.value_info}
    return [types.get(f"y{i}") for i in range(n_out)]


def check(data, feeds, n_out=1):
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    for t, w in zip(inferred(data, n_out), want):
        assert t is not None
        elem = {np.dtype(np.float32): F, np.dtype(np.float16): F16}[w.dtype]
        assert t == ir.tensor_type(elem, list(w.shape)), (t, w.dtype, w.shape)


@pytest.mark.parametrize("bits,dims", [(4, [2, 3]), (8, [5]), (2, [1, 1, 4])])
def test_gather_block_quantized(bits, dims):
    per = 8 // bits
    data = model("GatherBlockQuantized", [("idx", I64, dims)],
                 {"data": RNG.integers(0, 256, (10, 64 // per)).astype(np.uint8),
                  "scales": np.ones((10, 2), np.float16)}, order=["data", "idx", "scales"], bits=bits, block_size=32)
    check(data, {"idx": RNG.integers(0, 10, dims).astype(np.int64)})


def test_matmul_bnb4():
    data = model("MatMulBnb4", [("a", F, [2, 3, 32])], {"b": np.zeros(8 * 32 // 2, np.uint8),
                                                        "absmax": np.ones(4, np.float32)},
                 K=32, N=8, block_size=64, quant_type=1)
    check(data, {"a": np.ones((2, 3, 32), np.float32)})


@pytest.mark.parametrize("op", ["MoE", "QMoE"])
def test_moe(op):
    e, h, i = 2, 8, 8
    if op == "MoE":
        inits = {"w1": np.ones((e, i, h), np.float32), "w2": np.ones((e, h, i), np.float32)}
        order, attrs = ["x", "r", "w1", "", "w2"], {}
    else:
        inits = {"w1": np.zeros((e, i, h // 2), np.uint8), "s1": np.ones((e, i), np.float32),
                 "w2": np.zeros((e, h, i // 2), np.uint8), "s2": np.ones((e, h), np.float32)}
        order, attrs = ["x", "r", "w1", "s1", "", "w2", "s2"], {"expert_weight_bits": 4}
    data = model(op, [("x", F, [1, 3, h]), ("r", F, [3, e])], inits, order=order, k=1, **attrs)
    check(data, {"x": np.ones((1, 3, h), np.float32), "r": np.ones((3, e), np.float32)})


@pytest.mark.parametrize("packed", [False, True])
def test_sparse_attention(packed):
    b, s, n, nkv, h, cache = 1, 4, 2, 1, 16, 32
    width = (n + 2 * nkv) * h if packed else n * h
    ins = [("q", F, [b, s, width])] + ([] if packed else [("k", F, [b, s, nkv * h]), ("v", F, [b, s, nkv * h])])
    ins += [("pk", F, [b, nkv, cache, h]), ("pv", F, [b, nkv, cache, h])]
    rows = np.array([[0, 1, 3]], np.int32)
    cols = np.array([[0, 0, 1]], np.int32)
    inits = {"rows": rows, "cols": cols, "tot": np.array([s], np.int32), "ktot": np.array([s], np.int32)}
    order = ["q", "" if packed else "k", "" if packed else "v", "pk", "pv", "rows", "cols", "tot", "ktot"]
    data = model("SparseAttention", ins, inits, n_out=3, order=order, num_heads=n, kv_num_heads=nkv,
                 sparse_block_size=16)
    types = inferred(data, 3)
    assert types[0] == ir.tensor_type(F, [b, s, n * h])
    assert types[1] == types[2] == ir.tensor_type(F, [b, nkv, cache, h])


@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (1, 1)])
def test_sparse_to_dense_matmul(trans_a, trans_b):
    node = helper.make_node("SparseToDenseMatMul", ["A", "B"], ["y0"], name="n0", domain="com.microsoft",
                            transA=trans_a, transB=trans_b)
    g = helper.make_graph([node, helper.make_node("Identity", ["y0"], ["z0"])], "g",
                          [helper.make_sparse_tensor_value_info("A", F, [5, 4] if trans_a else [4, 5]),
                           helper.make_tensor_value_info("B", F, [3, 5] if trans_b else [5, 3])],
                          [helper.make_empty_tensor_value_info("z0")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    assert inferred(m.SerializeToString(), 1)[0] == ir.tensor_type(F, [4, 3])
