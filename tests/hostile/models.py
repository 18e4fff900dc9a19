"""The hostile models of the suite: tiny valid models whose sizes come from fed values.

``CASES[name]()`` -> :class:`Case`: the model's bytes, the feeds, and what must happen —
``expect`` is ``"LimitExceeded:<limit>"`` (refused before allocation, naming that limit), an
error class name, or ``"ok"`` with ``check`` (a function of the outputs, True when right).
Built with the ``onnx`` package (a test dependency); the subprocess that runs a case needs
only onnxkit and numpy.
"""

from __future__ import annotations

from typing import Callable, Optional

from onnxkit import records
import numpy as np
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

F, I64, STR, BOOL, U8 = T.FLOAT, T.INT64, T.STRING, T.BOOL, T.UINT8
BIG = 1 << 20


@records.define
class Case:
    model: bytes
    feeds: dict
    expect: str
    check: Optional[Callable] = None
    #: Limits keywords for the session (defaults: the suite's, see run_case.SUITE_LIMITS)
    limits: dict = records.field(factory=dict)


def vi(name, elem, shape):
    return h.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, opset=21, inits=(), domains=(), functions=()) -> bytes:
    g = h.make_graph(nodes, "hostile", inputs, outputs, initializer=list(inits))
    ops = [h.make_opsetid("", opset), *[h.make_opsetid(d, v) for d, v in domains]]
    return h.make_model(g, opset_imports=ops, ir_version=10, functions=list(functions)).SerializeToString()


def node(op, ins, outs, **attrs_):
    return h.make_node(op, ins, outs, name=f"hostile_{op.lower()}", **attrs_)


def i64(*v):
    return np.array(v, dtype=np.int64)


def one_op(op, inputs: list, feeds: dict, out_elem=F, out_rank=2, opset=21, expect="LimitExceeded:max_value_bytes",
           n_out=1, **attrs_) -> Case:
    """A model of one node ``op`` whose inputs are all fed (``inputs``: [(name, elem, shape)])."""
    outs = [f"y{k}" for k in range(n_out)]
    return Case(model([node(op, [n for n, _, _ in inputs], outs, **attrs_)], [vi(*x) for x in inputs],
                      [vi(o, out_elem, [f"d{k}_{j}" for j in range(out_rank)]) for k, o in enumerate(outs)],
                      opset=opset), feeds, expect)


def _expand_then(op, shape, elem=F, n_in=1, out_elem=F, out_rank=2, extra=(), expect="LimitExceeded:max_value_bytes",
                 n_out=1, **attrs_):
    """``op`` applied to a value Expand builds from a scalar to the fed ``shape``."""
    fill = np.ones((), dtype={F: np.float32, BOOL: np.bool_, U8: np.uint8}[elem])
    outs = [f"y{k}" for k in range(n_out)]
    nodes = [node("Expand", ["one", "shape"], ["x"]), node(op, ["x"] * n_in + list(extra), outs, **attrs_)]
    return Case(model(nodes, [vi("shape", I64, [len(shape)])],
                      [vi(o, out_elem if k == 0 else I64, [f"d{k}_{j}" for j in range(out_rank)])
                       for k, o in enumerate(outs)],
                      inits=[numpy_helper.from_array(fill, "one")]), {"shape": i64(*shape)}, expect)


def _constant_of_shape():
    return one_op("ConstantOfShape", [("s", I64, [2])], {"s": i64(BIG, BIG)})


def _expand():
    return one_op("Expand", [("x", F, [1]), ("s", I64, [3])], {"x": np.ones(1, np.float32), "s": i64(4096, 4096, 4096)},
                  out_rank=3)


def _tile():
    return one_op("Tile", [("x", F, [2, 2]), ("r", I64, [2])], {"x": np.ones((2, 2), np.float32), "r": i64(1 << 19, 1 << 19)})


def _range():
    return one_op("Range", [("a", I64, []), ("b", I64, []), ("d", I64, [])],
                  {"a": np.array(0), "b": np.array(1 << 40), "d": np.array(1)}, out_elem=I64, out_rank=1)


def _resize():
    return one_op("Resize", [("x", F, [1, 1, 4, 4]), ("roi", F, [0]), ("scales", F, [4])],
                  {"x": np.ones((1, 1, 4, 4), np.float32), "roi": np.zeros(0, np.float32),
                   "scales": np.array([1, 1, 1e5, 1e5], np.float32)}, out_rank=4)


def _pad():
    return one_op("Pad", [("x", F, [4, 4]), ("p", I64, [4])], {"x": np.ones((4, 4), np.float32), "p": i64(BIG, BIG, BIG, BIG)})


def _onehot():
    return one_op("OneHot", [("i", I64, [3]), ("depth", I64, []), ("v", F, [2])],
                  {"i": i64(0, 1, 2), "depth": np.array(1 << 40), "v": np.array([0, 1], np.float32)})


def _split_to_sequence():
    # 2^31 pieces of an empty tensor: a length attack without a byte of data
    return Case(model([node("SplitToSequence", ["x"], ["y"], keepdims=0)], [vi("x", F, [None, 0])],
                      [h.make_tensor_sequence_value_info("y", F, None)]),
                {"x": np.empty((1 << 31, 0), np.float32)}, "LimitExceeded:max_sequence_length")


def _nonzero():
    return _expand_then("NonZero", [1 << 13, 1 << 13], elem=BOOL, out_elem=I64)


def _unique():
    return _expand_then("Unique", [1 << 13, 1 << 13], out_rank=1, n_out=4, expect="LimitExceeded:max_value_bytes")


def _concat():
    return _expand_then("Concat", [1 << 12, 1 << 13], n_in=8, axis=0)


def _matmul():
    return one_op("MatMul", [("a", F, [BIG, 1]), ("b", F, [1, BIG])],
                  {"a": np.ones((BIG, 1), np.float32), "b": np.ones((1, BIG), np.float32)})


def _einsum():
    return one_op("Einsum", [("a", F, [BIG]), ("b", F, [BIG])],
                  {"a": np.ones(BIG, np.float32), "b": np.ones(BIG, np.float32)}, equation="i,j->ij")


def _gather():
    return one_op("Gather", [("d", F, [1, BIG]), ("i", I64, [BIG])],
                  {"d": np.ones((1, BIG), np.float32), "i": np.zeros(BIG, np.int64)})


def _where():
    return one_op("Where", [("c", BOOL, [BIG, 1]), ("a", F, [1, BIG]), ("b", F, [1])],
                  {"c": np.ones((BIG, 1), bool), "a": np.ones((1, BIG), np.float32), "b": np.ones(1, np.float32)})


def _string_concat():
    x = np.array([b"ab"] * (1 << 16), dtype=object)
    return one_op("StringConcat", [("a", STR, [1 << 16, 1]), ("b", STR, [1, 1 << 16])],
                  {"a": x.reshape(-1, 1), "b": x.reshape(1, -1)}, out_elem=STR, opset=20)


def _string_length():
    c = one_op("StringConcat", [("a", STR, [1]), ("b", STR, [1])],
               {"a": np.array([b"x" * 600_000], dtype=object), "b": np.array([b"y" * 600_000], dtype=object)},
               out_elem=STR, out_rank=1, opset=20, expect="LimitExceeded:max_string_bytes")
    c.limits = {"max_string_bytes": 1 << 20}
    return c


def _dft():
    return one_op("DFT", [("x", F, [1, 8, 1]), ("n", I64, [])], {"x": np.ones((1, 8, 1), np.float32), "n": np.array(1 << 40)},
                  out_rank=3, opset=20)


def _hann():
    return one_op("HannWindow", [("n", I64, [])], {"n": np.array(1 << 40)}, out_rank=1, opset=17)


def _mel():
    return one_op("MelWeightMatrix", [("bins", I64, []), ("dft", I64, []), ("sr", I64, []), ("lo", F, []), ("hi", F, [])],
                  {"bins": np.array(BIG), "dft": np.array(BIG * 2), "sr": np.array(16000), "lo": np.array(0, np.float32),
                   "hi": np.array(8000, np.float32)}, opset=17)


def _affine_grid():
    return one_op("AffineGrid", [("t", F, [1, 2, 3]), ("s", I64, [4])],
                  {"t": np.ones((1, 2, 3), np.float32), "s": i64(1, 1, BIG, BIG)}, out_rank=4, opset=20)


def _center_crop_pad():
    return one_op("CenterCropPad", [("x", F, [2, 2]), ("s", I64, [2])], {"x": np.ones((2, 2), np.float32), "s": i64(BIG, BIG)},
                  opset=18)


def _conv_transpose():
    return one_op("ConvTranspose", [("x", F, [1, 1, 2, 2]), ("w", F, [1, 1, 1, 1])],
                  {"x": np.ones((1, 1, 2, 2), np.float32), "w": np.ones((1, 1, 1, 1), np.float32)}, out_rank=4,
                  output_shape=[BIG, BIG])


def _max_unpool():
    return one_op("MaxUnpool", [("x", F, [1, 1, 2, 2]), ("i", I64, [1, 1, 2, 2]), ("s", I64, [4])],
                  {"x": np.ones((1, 1, 2, 2), np.float32), "i": np.zeros((1, 1, 2, 2), np.int64), "s": i64(1, 1, BIG, BIG)},
                  out_rank=4, kernel_shape=[2, 2])


def _random_normal():
    return Case(model([node("RandomNormal", [], ["y"], shape=[BIG, BIG])], [], [vi("y", F, [BIG, BIG])]), {},
                "LimitExceeded:max_value_bytes")


def _multinomial():
    return one_op("Multinomial", [("x", F, [1, 2])], {"x": np.zeros((1, 2), np.float32)}, out_elem=T.INT32,
                  sample_size=1 << 40)


def _regex():
    def check(outs):
        return outs[0].tolist() == [False, True]

    c = one_op("RegexFullMatch", [("x", STR, [2])], {"x": np.array([b"a" * 40 + b"!", b"a" * 40], dtype=object)},
               out_elem=BOOL, out_rank=1, opset=20, expect="ok", pattern="(a+)+$")
    c.check = check
    return c


def _body(nodes, inputs, outputs):
    return h.make_graph(nodes, "body", inputs, outputs)


def _loop_scan_output():
    # each iteration emits a fresh 256 KiB tensor as a scan output: accumulation must be refused
    body = _body([node("Identity", ["c"], ["c_out"]), node("ConstantOfShape", ["len"], ["piece"])],
                 [vi("i", I64, []), vi("c", BOOL, [])], [vi("c_out", BOOL, []), vi("piece", F, [65536])])
    loop = node("Loop", ["M", ""], ["acc"], body=body)
    return Case(model([loop], [vi("M", I64, []), vi("len", I64, [1])], [vi("acc", F, ["n", 65536])]),
                {"M": np.array(1 << 20), "len": i64(65536)}, "LimitExceeded:max_value_bytes")


def _scan_output():
    body = _body([node("ConstantOfShape", ["len"], ["piece"]), node("Identity", ["s"], ["s_out"])],
                 [vi("s", F, [1]), vi("x", F, [1])], [vi("s_out", F, [1]), vi("piece", F, [65536])])
    scan = node("Scan", ["s0", "xs"], ["s_end", "acc"], body=body, num_scan_inputs=1)
    return Case(model([scan], [vi("s0", F, [1]), vi("xs", F, ["n", 1]), vi("len", I64, [1])],
                      [vi("s_end", F, [1]), vi("acc", F, ["n", 65536])]),
                {"s0": np.zeros(1, np.float32), "xs": np.zeros((1 << 14, 1), np.float32), "len": i64(65536)},
                "LimitExceeded:max_value_bytes")


def _sequence_growth():
    body = _body([node("Identity", ["c"], ["c_out"]), node("SequenceInsert", ["seq", "t"], ["seq_out"])],
                 [vi("i", I64, []), vi("c", BOOL, []), h.make_tensor_sequence_value_info("seq", F, None)],
                 [vi("c_out", BOOL, []), h.make_tensor_sequence_value_info("seq_out", F, None)])
    nodes = [node("SequenceEmpty", [], ["s0"]), node("Loop", ["M", "", "s0"], ["s_end"], body=body)]
    c = Case(model(nodes, [vi("M", I64, []), vi("t", F, [1])], [h.make_tensor_sequence_value_info("s_end", F, None)]),
             {"M": np.array(1 << 20), "t": np.zeros(1, np.float32)}, "LimitExceeded:max_sequence_length")
    c.limits = {"max_sequence_length": 1000}
    return c


def _pb(field: int, payload) -> bytes:
    """One protobuf field: a varint (int) or length-delimited (bytes) — for messages too deep for protobuf."""
    def varint(n):
        out = bytearray()
        while True:
            out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
            n >>= 7
            if not n:
                return bytes(out)
    if isinstance(payload, int):
        return varint(field << 3) + varint(payload)
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def _nested_types():
    # seq(map(int64, seq(map(...)))) 5,000 levels deep in a graph input's type
    t = _pb(1, _pb(1, F))                                               # TypeProto{tensor_type{elem_type}}
    for k in range(5000):
        t = _pb(4, _pb(1, t)) if k % 2 else _pb(5, _pb(1, I64) + _pb(2, t))  # sequence_type / map_type
    value = _pb(1, b"x") + _pb(2, t)
    graph = _pb(1, _pb(1, b"x") + _pb(2, b"y") + _pb(4, b"Identity")) + _pb(2, b"g") + _pb(11, value) + \
        _pb(12, _pb(1, b"y") + _pb(2, t))
    blob = _pb(1, 10) + _pb(8, _pb(2, 21)) + _pb(7, graph)
    return Case(blob, {}, "LimitExceeded:max_nesting_depth")


def _run_budget():
    # each value is allowed, together they are not: 8 live 16 MiB tensors under a 100 MiB run budget
    nodes = [node("ConstantOfShape", ["s"], [f"v{k}"], value=h.make_tensor("f", F, [1], [float(k)])) for k in range(8)]
    for k in range(8):
        nodes[k].name = f"c{k}"
    nodes.append(node("Sum", [f"v{k}" for k in range(8)], ["y"]))
    c = Case(model(nodes, [vi("s", I64, [1])], [vi("y", F, ["n"])]), {"s": i64(4 << 20)}, "LimitExceeded:max_run_bytes")
    c.limits = {"max_run_bytes": 100 << 20}
    return c


def _add_ok():
    def check(outs):
        return outs[0].shape == (3, 4) and float(outs[0].sum()) == 24.0

    c = one_op("Add", [("a", F, [3, 1]), ("b", F, [1, 4])], {"a": np.ones((3, 1), np.float32), "b": np.ones((1, 4), np.float32)},
               expect="ok")
    c.check = check
    return c


CASES = {
    "constant_of_shape": _constant_of_shape, "expand": _expand, "tile": _tile, "range": _range, "resize": _resize,
    "pad": _pad, "onehot": _onehot, "split_to_sequence": _split_to_sequence, "nonzero": _nonzero, "unique": _unique,
    "concat": _concat, "matmul": _matmul, "einsum": _einsum, "gather": _gather, "where": _where,
    "string_concat": _string_concat, "string_length": _string_length, "dft": _dft, "hann_window": _hann,
    "mel_weight_matrix": _mel, "affine_grid": _affine_grid, "center_crop_pad": _center_crop_pad,
    "conv_transpose": _conv_transpose, "max_unpool": _max_unpool, "random_normal": _random_normal,
    "multinomial": _multinomial, "regex": _regex, "loop_scan_output": _loop_scan_output, "scan_output": _scan_output,
    "sequence_growth": _sequence_growth, "nested_types": _nested_types, "run_budget": _run_budget, "add_ok": _add_ok,
}


def SEED_MODELS() -> dict:
    """``{name: model bytes}`` of every case (the fuzzer's seeds)."""
    return {name: make().model for name, make in CASES.items() if name != "nested_types"}
