"""One way each (issue 42 item 6): a concept implemented once, and scans that keep it once.

1. *Is this the default domain*: :func:`onnxkit.domains.is_default_domain` (with
   :func:`~onnxkit.domains.normalize_domain` and :func:`~onnxkit.domains.display_domain`, in
   the same module) is the only code spelling ``"ai.onnx"`` or comparing a domain with ``""``.
2. *A type as a string*: :func:`onnxkit.ir.types.type_string` gives onnxruntime's spelling
   (``tensor(float)``, ``map(string,tensor(float))``); the places that spell a type otherwise do
   so on purpose (the IR's display form with shapes, the printer's ONNX text syntax), each listed.
3. *BatchNormalization's mode*: :func:`onnxkit.operator_modes.batch_norm_mode` decides it for the
   kernel and the optimizer's folds alike; per version, the kernel's result and the fold follow it.
4. *A node's subgraphs*: :func:`onnxkit.functions.subgraph_attributes` (and :func:`subgraphs_of`,
   :func:`with_subgraphs` over it) is the one walker of a node's graph-valued attributes.
5. *Attribute defaults*: the schema's (a kernel's ``ctx.attributes`` has them filled in); a
   kernel's ``ctx.attr(name, literal)`` keeps its literal only where some definition it serves
   has no default for the attribute (tests/attr_defaults.py finds the definitions per call).
6. *The opset map*: :func:`onnxkit.domains.opset_map` gives ``{domain: version}`` of a model's
   or a function's imports (the domain normalised, a function's over its caller's); nothing else
   walks ``opset_import`` normalising domains but the checker, which reports each import.
7. *Registering a kernel, an inference function*: ``KERNELS.register(op_type, *since_versions,
   ...)`` on a :class:`~onnxkit.plugin.KernelTable`, ``FUNCTIONS.register(op_types, first, last,
   ...)`` on a :class:`~onnxkit.plugin.FunctionTable`, the families handed over by
   ``lazy_family_tables``; no plugin fills a table otherwise (a dict literal, an item stored by
   key, a helper handed the table) or uses the spellings that are gone (``merge_family_tables``,
   ``host_only(factory)``), each refused by name.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _sources():
    """The host's modules and every plugin's package modules (not their tests or tools)."""
    files = sorted(ROOT.glob("onnxkit/**/*.py")) + sorted(ROOT.glob("plugins/*/onnxkit_*/**/*.py"))
    return [(f.relative_to(ROOT).as_posix(), ast.parse(f.read_text(encoding="utf-8"))) for f in files]


def _enclosing(tree) -> dict:
    """``{id(node): qualified name of the innermost function or class holding it}`` ('<module>'
    outside any; ``Class.method``, nested functions by their own name)."""
    out = {}

    def visit(node, name):
        for child in ast.iter_child_nodes(node):
            inner = name
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = f"{name}.{child.name}" if isinstance(node, ast.ClassDef) else child.name
            out[id(child)] = inner
            visit(child, inner)

    visit(tree, "<module>")
    return out


# -- 1. the default domain ---------------------------------------------------------------------

def _domainish(node) -> bool:
    """A value that is a domain: a name or attribute called ``*domain*`` (or ``d``), or a
    ``normalize_domain(...)`` call."""
    if isinstance(node, ast.Name):
        return "domain" in node.id or node.id == "d"
    if isinstance(node, ast.Attribute):
        return "domain" in node.attr
    if isinstance(node, ast.Call):
        f = node.func
        return (getattr(f, "id", None) or getattr(f, "attr", None)) == "normalize_domain"
    return False


def _is_str(node, value) -> bool:
    return isinstance(node, ast.Constant) and node.value == value


def default_domain_spellings(sources) -> Counter:
    """``{(file, enclosing function): count}`` of the places that spell the default domain's test
    themselves: the literal ``"ai.onnx"``, a domain compared with ``""`` (or a tuple holding it),
    a ``normalize_domain(...)`` call used as a truth value, a domain ``or`` a string literal."""
    found = Counter()
    for path, tree in sources:
        where = _enclosing(tree)
        for node in ast.walk(tree):
            hit = False
            if _is_str(node, "ai.onnx"):
                hit = True
            elif isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                if any(_domainish(o) for o in operands) and any(
                        _is_str(o, "") or (isinstance(o, ast.Tuple) and any(_is_str(e, "") for e in o.elts))
                        for o in operands):
                    hit = True
            elif isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Assert)) and isinstance(node.test, ast.Call) \
                    and _domainish(node.test):
                hit = True
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and isinstance(node.operand, ast.Call) \
                    and _domainish(node.operand):
                hit = True
            elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and _domainish(node.values[0]) \
                    and any(isinstance(v, ast.Constant) and isinstance(v.value, str) and v.value for v in node.values[1:]):
                hit = True
            if hit:
                found[(path, where.get(id(node), "<module>"))] += 1
    return found


#: The places allowed to spell it, each with its count and why.
DEFAULT_DOMAIN_ALLOWED = Counter({
    ("onnxkit/domains.py", "<module>"): 1,  # DEFAULT_DOMAIN = "ai.onnx": the one spelling
    ("onnxkit/domains.py", "is_default_domain"): 1,  # domain in (None, "", DEFAULT_DOMAIN): the one test
})


def assert_only_allowed(found: Counter, allowed: Counter, size: int, instead: str) -> None:
    """``found`` is exactly ``allowed`` (of ``size`` places in all): nothing beyond it (else use
    ``instead``), nothing of it gone (else shrink it)."""
    extra = {k: v for k, v in found.items() if v > allowed.get(k, 0)}
    assert not extra, f"use {instead}: {extra}"
    assert found == allowed, f"an allowed place is gone: shrink the allow-list {dict(allowed - found)}"
    assert sum(allowed.values()) == size


def test_default_domain_is_spelled_in_one_place():
    assert_only_allowed(default_domain_spellings(_sources()), DEFAULT_DOMAIN_ALLOWED, 2,
                        "onnxkit.domains.is_default_domain")


def test_default_domain_scan_sees_each_inline_form():
    """The scan finds each form the inline copies took (else the test above proves nothing)."""
    forms = ['node.domain in ("", "ai.onnx")', 'domain or "ai.onnx"', 'normalize_domain(d) == ""',
             'if normalize_domain(domain):\n    pass', 'not normalize_domain(domain)', 'schema.domain != ""',
             'f"{d or \'ai.onnx\'}"']
    for form in forms:
        found = default_domain_spellings([("x.py", ast.parse(form))])
        assert sum(found.values()) >= 1, form
    assert not default_domain_spellings([("x.py", ast.parse("is_default_domain(node.domain)"))])


@pytest.mark.parametrize("domain, default", [(None, True), ("", True), ("ai.onnx", True), ("ai.onnx.ml", False),
                                             ("com.microsoft", False), ("ai.onnx.preview.training", False)])
def test_is_default_domain(domain, default):
    from onnxkit.domains import display_domain, is_default_domain, normalize_domain
    from onnxkit import plugin, registry

    assert is_default_domain(domain) is default
    assert normalize_domain(domain) == ("" if default else domain)
    assert display_domain(domain) == ("ai.onnx" if default else domain)
    # one function, re-exported (the host's old import and the plugins' surface)
    assert registry.is_default_domain is plugin.is_default_domain is is_default_domain
    assert registry.normalize_domain is plugin.normalize_domain is normalize_domain


# -- 2. a type as a string ---------------------------------------------------------------------

_TYPE_OPENING = re.compile(r"\b(tensor|sparse_tensor|seq|map|optional|opaque)\($")


def type_spellings(sources) -> Counter:
    """``{(file, enclosing function): count}`` of the f-strings that spell a type constructor
    around a value (``f"tensor({...})"``, ``f"map({k},{v})"``...)."""
    found = Counter()
    for path, tree in sources:
        where = _enclosing(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                parts = node.values
                for a, b in zip(parts, parts[1:]):
                    if isinstance(a, ast.Constant) and isinstance(a.value, str) and _TYPE_OPENING.search(a.value) \
                            and isinstance(b, ast.FormattedValue):
                        found[(path, where.get(id(node), "<module>"))] += 1
    return found


#: The places allowed to spell a type themselves, each with its count and why.
TYPE_SPELLINGS_ALLOWED = Counter({
    # the one implementation: tensor, sparse_tensor, seq, map, optional, opaque with and without a domain
    ("onnxkit/ir/types.py", "type_string"): 7,
    # the IR's display form (str()), which keeps the shapes and the tables' "map(k, v)": on purpose
    ("onnxkit/ir/types.py", "TensorType.__str__"): 1,
    ("onnxkit/ir/types.py", "SparseTensorType.__str__"): 1,
    ("onnxkit/ir/types.py", "SequenceType.__str__"): 1,
    ("onnxkit/ir/types.py", "MapType.__str__"): 1,
    ("onnxkit/ir/types.py", "OptionalType.__str__"): 1,
    ("onnxkit/ir/types.py", "OpaqueType.__str__"): 2,
    # the printer's ONNX textual syntax (float[N], map(int64, float)): on purpose
    ("onnxkit/printer.py", "_type"): 4,
    # a dtype of no element type named as it is (no constraint admits it)
    ("plugins/default_domain/onnxkit_default_domain/kernels/_common.py", "_type_string"): 1,
})


def test_a_type_is_spelled_in_one_place():
    assert_only_allowed(type_spellings(_sources()), TYPE_SPELLINGS_ALLOWED, 19, "onnxkit.ir.types.type_string")


def test_type_scan_sees_a_type_spelled():
    assert sum(type_spellings([("x.py", ast.parse('f"seq({inner})"'))]).values()) == 1
    assert sum(type_spellings([("x.py", ast.parse('f"declared tensor({e}) here"'))]).values()) == 1
    assert not type_spellings([("x.py", ast.parse('f"got {n} tensors"'))])


def _types():
    """``{name: (ir type, onnxruntime's spelling)}``; the spellings are onnxruntime 1.2x's
    ``NodeArg.type`` for these graph inputs."""
    from onnxkit import ir
    from onnxkit.dtypes import DataType as T

    t = lambda e, shape=None: ir.TensorType(int(e), shape)  # noqa: E731
    return {
        "a": (t(T.FLOAT, [2, "N"]), "tensor(float)"),
        "b": (ir.SequenceType(t(T.INT64)), "seq(tensor(int64))"),
        "c": (ir.MapType(int(T.STRING), t(T.FLOAT)), "map(string,tensor(float))"),
        "d": (ir.OptionalType(t(T.FLOAT)), "optional(tensor(float))"),
        "e": (ir.OptionalType(ir.SequenceType(t(T.BFLOAT16))), "optional(seq(tensor(bfloat16)))"),
        "f": (t(T.FLOAT8E4M3FN), "tensor(float8e4m3fn)"),
        "g": (t(T.UINT4), "tensor(uint4)"),
        "h": (t(T.BOOL), "tensor(bool)"),
        "i": (t(T.STRING), "tensor(string)"),
        "j": (t(T.DOUBLE), "tensor(double)"),
        "l": (ir.SparseTensorType(int(T.FLOAT), [3, 4]), "sparse_tensor(float)"),
        "m": (t(T.FLOAT4E2M1), "tensor(float4e2m1)"),
        "n": (t(T.FLOAT8E8M0), "tensor(float8e8m0)"),
        "q": (ir.SequenceType(ir.MapType(int(T.INT64), t(T.FLOAT))), "seq(map(int64,tensor(float)))"),
    }


def test_type_string_is_onnxruntimes_spelling():
    from onnxkit import ir
    from onnxkit.ir.types import type_string

    for name, (t, want) in _types().items():
        assert type_string(t) == want, name
    assert type_string(ir.OpaqueType("com.x", "Blob")) == "opaque(com.x,Blob)"
    assert type_string(ir.OpaqueType("", "Blob")) == "opaque(Blob)"
    assert type_string(ir.UndefinedType()) == "undefined"
    assert type_string(None) == "unknown"
    assert str(ir.MapType(8, ir.TensorType(1, [2]))) == "map(string, tensor(float)[2])"  # the display form differs


def test_type_string_agrees_with_onnxruntime():
    """Each type of :func:`_types` as a graph input of a model onnxruntime loads: its NodeArg.type."""
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    from onnx import helper

    from onnxkit.api import load
    from onnxkit.ir.types import type_string

    compared = 0
    for name, (_, want) in _types().items():
        proto = _onnx_type(helper, onnx, name)
        graph = helper.make_graph([], "g", [helper.make_value_info(name, proto)], [helper.make_value_info(name, proto)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
        model.ir_version = 10 if name not in ("m", "n") else 11
        octets = model.SerializeToString()
        try:
            session = ort.InferenceSession(octets, providers=["CPUExecutionProvider"])
        except Exception:  # an older onnxruntime without the type: nothing to compare
            continue
        assert session.get_inputs()[0].type == want, name
        assert type_string(load(octets).graph.input[0].type) == want, name
        compared += 1
    assert compared >= 10, "onnxruntime loaded too few of the models to compare"


def _onnx_type(helper, onnx, name):
    T = onnx.TensorProto
    t = lambda e: helper.make_tensor_type_proto(e, None)  # noqa: E731
    return {
        "a": helper.make_tensor_type_proto(T.FLOAT, [2, "N"]),
        "b": helper.make_sequence_type_proto(t(T.INT64)),
        "c": helper.make_map_type_proto(T.STRING, t(T.FLOAT)),
        "d": helper.make_optional_type_proto(t(T.FLOAT)),
        "e": helper.make_optional_type_proto(helper.make_sequence_type_proto(t(T.BFLOAT16))),
        "f": t(T.FLOAT8E4M3FN), "g": t(T.UINT4), "h": t(T.BOOL), "i": t(T.STRING), "j": t(T.DOUBLE),
        "l": helper.make_sparse_tensor_type_proto(T.FLOAT, [3, 4]),
        "m": t(T.FLOAT4E2M1), "n": t(T.FLOAT8E8M0),
        "q": helper.make_sequence_type_proto(helper.make_map_type_proto(T.INT64, t(T.FLOAT))),
    }[name]


def test_kernels_type_check_uses_the_one_spelling():
    """The portable kernels' input check spells a dtype as the tables do, the narrow floats too
    (it spelled float8_e8m0fnu ``tensor(float8e8m0fnu)`` and float4_e2m1fn ``tensor(float4_e2m1fn)``)."""
    import ml_dtypes
    import numpy as np
    from onnxkit_default_domain.kernels._common import _type_string

    assert _type_string(np.dtype(np.float32)) == "tensor(float)"
    assert _type_string(np.dtype(object)) == "tensor(string)"
    assert _type_string(np.dtype(ml_dtypes.float8_e8m0fnu)) == "tensor(float8e8m0)"
    assert _type_string(np.dtype(ml_dtypes.float4_e2m1fn)) == "tensor(float4e2m1)"


# -- 3. BatchNormalization's mode --------------------------------------------------------------

_C1 = {"consumed_inputs": [0, 0, 0, 1, 1]}  # required by BatchNormalization-1
_FIVE = ["n", "m1", "v1", "sm", "sv"]

#: (opset, attributes, outputs, training): Part 2's rule (onnxkit.operator_modes.batch_norm_mode)
BN_CASES = [
    (1, {**_C1, "is_test": 1}, ["n"], False),
    (1, dict(_C1), ["n"], True),               # is_test 0 (its default) is training, even with Y alone
    (1, dict(_C1), _FIVE, True),
    (6, {"is_test": 1}, ["n"], False),
    (6, {}, ["n"], True),                      # the old rules disagreed: kernel inference, optimizer training
    (6, {"is_test": 0}, _FIVE, True),
    (7, {}, ["n"], False),
    (7, {}, ["n", "", ""], False),             # the old rules disagreed: kernel training (3 outputs), optimizer inference
    (7, {}, _FIVE, True),
    (9, {}, ["n"], False),
    (9, {"momentum": 0.5}, _FIVE, True),
    (14, {}, ["n"], False),
    (14, {"training_mode": 1}, ["n", "rm", "rv"], True),
    (15, {"training_mode": 0}, ["n"], False),
    (15, {"training_mode": 1}, ["n"], True),   # training with Y alone: the batch's statistics
]


@pytest.mark.parametrize("opset, attrs, outputs, training", BN_CASES)
def test_batch_norm_mode_per_version(opset, attrs, outputs, training):
    from onnxkit import plugin
    from onnxkit.operator_modes import batch_norm_mode

    assert plugin.batch_norm_mode is batch_norm_mode   # the kernel's import is the host's function
    assert batch_norm_mode(opset, attrs, outputs) == (training, True)
    if opset < 9:
        assert batch_norm_mode(opset, {**attrs, "spatial": 0}, outputs) == (training, False)
    else:  # spatial is no attribute from 9: ignored
        assert batch_norm_mode(opset, {**attrs, "spatial": 0}, outputs).spatial


def _bn_model(opset, attrs, outputs, conv=False):
    """``x [2, 3, 4, 4] -> (Conv 1x1 ->) BatchNormalization(attrs) -> outputs``, the parameters
    initializers; and the feed."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(6)
    c = 3
    inits = {"s": rng.uniform(0.5, 2, c), "b": rng.standard_normal(c), "mean": rng.standard_normal(c) + 3,
             "var": rng.uniform(4, 9, c)}
    nodes = []
    x = "x"
    if conv:
        inits["W"] = rng.standard_normal((c, c, 1, 1))
        nodes.append(helper.make_node("Conv", ["x", "W"], ["c"]))
        x = "c"
    nodes.append(helper.make_node("BatchNormalization", [x, "s", "b", "mean", "var"], outputs, **attrs))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c, 4, 4])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs if o],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=onnx.IR_VERSION)
    return model, {"x": rng.standard_normal((2, c, 4, 4)).astype(np.float32)}, inits


@pytest.mark.parametrize("opset, attrs, outputs, training", BN_CASES)
def test_batch_norm_kernel_follows_the_mode(opset, attrs, outputs, training):
    """Y normalised with the batch's statistics in training, the given ones in inference."""
    from onnxkit import InferenceSession, SessionOptions
    from onnxkit.runtime.options import GraphOptimizationLevel

    model, feed, p = _bn_model(opset, attrs, outputs)
    so = SessionOptions()
    so.graph_optimization_level = GraphOptimizationLevel.ORT_DISABLE_ALL
    y = InferenceSession(model.SerializeToString(), so).run(["n"], feed)[0]
    x = feed["x"].astype(np.float64)
    if training:
        mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    else:
        mean, var = p["mean"], p["var"]
    r = (1, -1, 1, 1)
    want = (x - mean.reshape(r)) / np.sqrt(var.reshape(r) + 1e-5) * p["s"].reshape(r) + p["b"].reshape(r)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("opset, attrs, outputs, training", BN_CASES)
def test_batch_norm_fold_follows_the_mode(opset, attrs, outputs, training):
    """The conv_bn pass folds a BatchNormalization with Y its only named output exactly when
    the mode is inference (one with other outputs named is never folded)."""
    import onnxkit
    from onnxkit.runtime.optimizer import PASS_NAMES, optimize
    from onnxkit.runtime.options import GraphOptimizationLevel

    model, _, _ = _bn_model(opset, attrs, outputs, conv=True)
    m = onnxkit.load(model.SerializeToString())
    r = optimize(m, GraphOptimizationLevel.ORT_ENABLE_ALL, disabled=set(PASS_NAMES) - {"conv_bn"})
    folded = r.rewrites.get("conv_bn", 0)
    only_y = not any(outputs[1:])
    assert folded == (1 if only_y and not training else 0)
    assert [n.op_type for n in r.model.graph.node] == (["Conv"] if folded else ["Conv", "BatchNormalization"])


# -- 4. a node's subgraphs ---------------------------------------------------------------------

def _graph_test(node) -> bool:
    """``GRAPH_TYPES`` / ``AttributeType.GRAPH(S)`` named, or ``isinstance(x, ir.Graph)``."""
    if isinstance(node, ast.Name) and node.id in ("GRAPH_TYPES", "_GRAPH_TYPES"):
        return True
    if isinstance(node, ast.Attribute) and node.attr in ("GRAPH", "GRAPHS"):
        return True
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
        t = node.args[1]
        return (isinstance(t, ast.Attribute) and t.attr == "Graph") or (isinstance(t, ast.Name) and t.id == "Graph")
    return False


def subgraph_walkers(sources) -> set:
    """``{(file, function)}`` of the functions that iterate a node's ``.attribute`` and pick the
    graphs out themselves."""
    found = set()
    for path, tree in sources:
        where = _enclosing(tree)
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            inside = [n for stmt in fn.body for n in ast.walk(stmt)]
            iterates = any(isinstance(n, (ast.For, ast.comprehension)) and isinstance(n.iter, ast.Attribute)
                           and n.iter.attr == "attribute" for n in inside)
            if iterates and any(_graph_test(n) for n in inside):
                found.add((path, where[id(fn)]))
    return found


SUBGRAPH_WALKERS_ALLOWED = {
    # the walker itself, and the two functions built on the same test
    ("onnxkit/functions.py", "subgraph_attributes"),
    ("onnxkit/functions.py", "with_subgraphs"),
    ("onnxkit/functions.py", "substitute"),  # rebuilds each subgraph's nodes with the call's attributes
    # a lookup of one graph attribute by name (an If's then_branch), not a walk
    ("plugins/default_domain/onnxkit_default_domain/kernels/control_flow.py", "_graph_attr"),
}


def test_one_walker_of_a_nodes_subgraphs():
    assert_only_allowed(Counter(subgraph_walkers(_sources())), Counter(SUBGRAPH_WALKERS_ALLOWED), 4,
                        "onnxkit.functions.subgraph_attributes")


def test_subgraph_walker_scan_sees_a_walker():
    code = ("def f(node):\n    for a in node.attribute:\n        if a.type in GRAPH_TYPES:\n            yield a.value\n"
            "def g(node):\n    return [a for a in node.attribute if isinstance(a.value, ir.Graph)]\n"
            "def h(node):\n    return [a.name for a in node.attribute]\n")
    assert subgraph_walkers([("x.py", ast.parse(code))]) == {("x.py", "f"), ("x.py", "g")}


def test_subgraph_attributes_and_with_subgraphs():
    from onnxkit import ir
    from onnxkit.functions import subgraph_attributes, subgraph_label, subgraphs_of, with_subgraphs

    g1, g2, g3 = (ir.Graph(name=n) for n in ("then", "b0", "b1"))
    node = ir.Node(op_type="X", attribute=[
        ir.Attribute.make("alpha", 1.0), ir.Attribute.make("then_branch", g1), ir.Attribute.make("bodies", [g2, g3]),
        ir.Attribute(name="ref", type=int(ir.AttributeType.GRAPH), ref_attr_name="p")])   # a reference: no graph
    got = [(a.name, k, g.name) for a, k, g in subgraph_attributes(node)]
    assert got == [("then_branch", None, "then"), ("bodies", 0, "b0"), ("bodies", 1, "b1")]
    assert [subgraph_label(a, k) for a, k, _ in subgraph_attributes(node)] == ["then_branch", "bodies[0]", "bodies[1]"]
    assert subgraphs_of(node) == [g1, g2, g3]
    renamed = with_subgraphs(node, lambda g: ir.Graph(name=g.name.upper()))
    assert [g.name for g in subgraphs_of(renamed)] == ["THEN", "B0", "B1"]
    assert renamed.attribute[0] == node.attribute[0] and renamed.attribute[3] == node.attribute[3]
    plain = ir.Node(op_type="Relu")
    assert with_subgraphs(plain, lambda g: None) is plain and subgraphs_of(plain) == []


# -- 5. attribute defaults ---------------------------------------------------------------------

#: ``ctx.attr(name, literal)`` calls restating every served definition's default: none (the last
#: twelve, in the cpu overrides norm, quantized_conv, quantized_microsoft and rnn, went in the
#: second pass)
RESTATING_ALLOWED = Counter()
#: the literal defaults left, each read where a served definition has no default: the attribute
#: is absent from some version (``broadcast`` before 7, Resize-10's modes, QuantizeLinear-10's
#: axis...) or optional without a default (Split-1's axis, TfIdfVectorizer's gram lengths,
#: com.microsoft's many, QLinearConcat's axis read as its portable kernel reads it; Momentum's
#: are required, and checked first)
NEEDED_NO_ATTRIBUTE = 53
NEEDED_NO_DEFAULT = 26


@pytest.fixture(scope="module")
def attr_sites():
    import attr_defaults

    return attr_defaults.classify()


def test_kernels_leave_attribute_defaults_to_the_schema(attr_sites):
    by_kind = {}
    for s in attr_sites:
        by_kind.setdefault(s.kind, []).append(s)
    assert not by_kind.get("unbound"), by_kind.get("unbound")      # every call site reaches a definition
    assert not by_kind.get("differs"), by_kind.get("differs")      # no literal contradicts a definition
    restating = Counter((s.path, s.name, s.value) for s in by_kind.get("restates", ()))
    assert_only_allowed(restating, RESTATING_ALLOWED, 0, "ctx.attr(name) (drop the literal default the schema gives)")
    needed = by_kind.get("needed", [])
    absent = [s for s in needed if "no attribute in" in s.why]
    assert (len(absent), len(needed) - len(absent)) == (NEEDED_NO_ATTRIBUTE, NEEDED_NO_DEFAULT), \
        "\n".join(map(repr, needed))
    assert len(attr_sites) == sum(RESTATING_ALLOWED.values()) + NEEDED_NO_ATTRIBUTE + NEEDED_NO_DEFAULT


def test_attr_default_scan_classifies(attr_sites):
    """The scan reads the definitions a call serves: a few known calls, and synthetic ones."""
    import attr_defaults as ad

    where = {(s.path.rsplit("/", 1)[-1], s.name): s for s in attr_sites}
    resize = where[("resize.py", "antialias")]
    assert resize.kind == "needed" and ("", "Resize", 10) in resize.keys and ("", "Resize", 19) in resize.keys
    assert where[("shape.py", "axis")].kind == "needed" and "Split-1" in where[("shape.py", "axis")].why

    def site(name, value, *keys):
        s = ad.Site("x.py", 1, "attr", name, value, [])
        s.keys = set(keys)
        return ad.classify(found=[s])[0]

    assert site("alpha", 0.01, ("", "LeakyRelu", 16)).kind == "restates"         # the float32 the schema keeps
    assert site("alpha", 0.02, ("", "LeakyRelu", 16)).kind == "differs"
    assert site("mode", "bilinear", ("", "GridSample", 16), ("", "GridSample", 20)).kind == "differs"
    assert site("axis", 0, ("", "Split", 1)).kind == "needed"                      # no default in Split-1
    assert site("broadcast", 0, ("", "Add", 1), ("", "Add", 7)).kind == "needed"   # no broadcast from 7
    assert site("default_float", 0.0, ("ai.onnx.ml", "LabelEncoder", 2)).kind == "differs"  # the default is -0.0
    assert site("mode", "constant", ("", "Pad", 2)).kind == "restates"             # strings: decoded bytes


# -- 6. the opset map --------------------------------------------------------------------------

def _iterates_opset_import(node) -> bool:
    """``x.opset_import`` (or a name ``opset_import``), or it wrapped in a call
    (``enumerate(x.opset_import)``)."""
    if isinstance(node, ast.Call):
        return any(_iterates_opset_import(a) for a in node.args)
    return (isinstance(node, ast.Attribute) and node.attr == "opset_import") or \
        (isinstance(node, ast.Name) and node.id == "opset_import")


def opset_map_spellings(sources) -> Counter:
    """``{(file, enclosing function): count}`` of the loops and comprehensions over an
    ``opset_import`` that normalise the domains themselves (``{normalize_domain(o.domain): ...
    for o in model.opset_import}``, a loop filling a dict, a lookup comparing domains)."""
    found = Counter()
    for path, tree in sources:
        where = _enclosing(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.For, ast.AsyncFor)):
                iters, inside = [node.iter], [n for stmt in node.body for n in ast.walk(stmt)]
            elif isinstance(node, (ast.DictComp, ast.ListComp, ast.SetComp, ast.GeneratorExp)):
                iters = [g.iter for g in node.generators]
                inside = list(ast.walk(node))
            else:
                continue
            if any(_iterates_opset_import(i) for i in iters) and any(
                    isinstance(n, ast.Call) and (getattr(n.func, "id", None) or getattr(n.func, "attr", None))
                    == "normalize_domain" for n in inside):
                found[(path, where.get(id(node), "<module>"))] += 1
    return found


#: The places allowed to walk an ``opset_import`` normalising its domains, each with why.
OPSET_MAP_ALLOWED = Counter({
    ("onnxkit/domains.py", "opset_map"): 1,  # the one map
    # the checker's validation: each import judged on its own (repeated, duplicate, invalid version,
    # a function's disagreeing with the model's), reported with its index
    ("onnxkit/checker/operators.py", "check_imports"): 1,
    ("onnxkit/checker/functions.py", "_function_opsets"): 1,
})


def test_the_opset_map_is_built_in_one_place():
    assert_only_allowed(opset_map_spellings(_sources()), OPSET_MAP_ALLOWED, 3, "onnxkit.domains.opset_map")


def test_opset_map_scan_sees_each_inline_form():
    forms = ["{normalize_domain(o.domain): int(o.version) for o in model.opset_import}",
             "for o in fn.opset_import:\n    opsets[normalize_domain(o.domain)] = int(o.version)",
             "next((o.version for o in m.opset_import if normalize_domain(o.domain) == d), None)",
             "{**top, **{normalize_domain(o.domain): o.version for o in fn.opset_import}}"]
    for form in forms:
        assert sum(opset_map_spellings([("x.py", ast.parse(form))]).values()) >= 1, form
    assert not opset_map_spellings([("x.py", ast.parse("{o.domain: o.version for o in m.opset_import}"))])
    assert not opset_map_spellings([("x.py", ast.parse("opset_map(model.opset_import)"))])


def test_opset_map():
    from onnxkit import ir
    from onnxkit.domains import opset_map

    imports = [ir.OperatorSetId("ai.onnx", 13), ir.OperatorSetId("com.microsoft", 1), ir.OperatorSetId("x.y", 2)]
    assert opset_map(imports) == {"": 13, "com.microsoft": 1, "x.y": 2}
    assert all(type(v) is int for v in opset_map([ir.OperatorSetId("", 7)]).values())
    outer = {"": 18, "ai.onnx.ml": 3}
    assert opset_map([ir.OperatorSetId("", 13), ir.OperatorSetId("com.example", 1)], outer) == \
        {"": 13, "ai.onnx.ml": 3, "com.example": 1}          # a function's own imports replace its caller's
    assert outer == {"": 18, "ai.onnx.ml": 3}                 # the caller's map is not written
    assert opset_map([]) == {} and opset_map([], outer) == outer
    model = ir.Model(ir_version=8, opset_import=[ir.OperatorSetId("", 17), ir.OperatorSetId("ai.onnx.ml", 3)])
    assert model.opset_version("ai.onnx") == 17 and model.opset_version("ai.onnx.ml") == 3
    assert model.opset_version("com.microsoft") is None


# -- 7. registering a kernel, an inference function --------------------------------------------

def _plugin_sources():
    """Every plugin's package modules and the example domain package's (not their tests or tools)."""
    files = sorted(ROOT.glob("plugins/*/onnxkit_*/**/*.py")) + sorted(ROOT.glob("examples/*/onnxkit_*/**/*.py"))
    return [(f.relative_to(ROOT).as_posix(), ast.parse(f.read_text(encoding="utf-8"))) for f in files]


#: a family module's table and the class it must be
_TABLES = {"KERNELS": "KernelTable", "FUNCTIONS": "FunctionTable"}
#: the former spellings, refused by name when called
_GONE = ("merge_family_tables", "host_only")


def _called(node) -> str:
    f = node.func
    return getattr(f, "id", None) or getattr(f, "attr", None) or ""


def _registry_key(node) -> bool:
    """A ``(domain, op, version)`` key: a 3-tuple whose first element is a domain (a string, a name
    holding ``domain`` or in capitals such as ``DOMAIN`` / ``ML``, a ``normalize_domain(...)`` call),
    or whose op and version are literals (``(d, "OpName", 1)``); not numpy's ``x[i, j, k]``."""
    if not (isinstance(node, ast.Tuple) and len(node.elts) == 3):
        return False
    d, op, v = node.elts
    literal = isinstance(op, ast.Constant) and isinstance(op.value, str) and isinstance(v, ast.Constant) \
        and isinstance(v.value, int)
    domain = (isinstance(d, ast.Constant) and isinstance(d.value, str)) or (
        isinstance(d, ast.Name) and ("domain" in d.id.lower() or d.id.isupper())) or (
        isinstance(d, ast.Call) and _called(d) == "normalize_domain")
    return literal or domain


def registration_spellings(sources) -> Counter:
    """``{(file, enclosing function, form): count}`` of the registrations that bypass the tables'
    ``register``: ``"table"`` (``KERNELS`` / ``FUNCTIONS`` bound to anything but a ``KernelTable()``
    / ``FunctionTable(...)``), ``"item"`` (an entry stored by key: into ``KERNELS`` / ``FUNCTIONS``,
    their ``update`` / ``setdefault`` / ``|=``, any ``x[(domain, op, version)] = ...``, a dict
    literal keyed ``(domain, "Op", 1)``),
    ``"helper"`` (the table handed to a call: ``register_direct(KERNELS, ...)``, ``rule(FUNCTIONS,
    ...)``) and ``"gone"`` (``merge_family_tables(...)``, ``host_only(...)``,
    ``declare_traits(..., host_only=...)``)."""
    found = Counter()
    for path, tree in sources:
        where = _enclosing(tree)

        def hit(node, form):
            found[(path, where.get(id(node), "<module>"), form)] += 1

        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and target.id in _TABLES and node.value is not None and not (
                            isinstance(node.value, ast.Call) and _called(node.value) == _TABLES[target.id]):
                        hit(node, "table")
                    if isinstance(target, ast.Subscript) and (
                            (isinstance(target.value, ast.Name) and target.value.id in _TABLES)
                            or _registry_key(target.slice)):
                        hit(node, "item")
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id in _TABLES:
                hit(node, "item")
            elif isinstance(node, ast.Dict) and any(k is not None and _registry_key(k) for k in node.keys):
                hit(node, "item")
            elif isinstance(node, ast.Call):
                f = node.func
                if isinstance(f, ast.Attribute) and f.attr in ("update", "setdefault", "__setitem__") and \
                        isinstance(f.value, ast.Name) and f.value.id in _TABLES:
                    hit(node, "item")
                elif any(isinstance(a, ast.Name) and a.id in _TABLES for a in node.args) and _called(node) not in (
                        "dict", "len", "sorted", "list", "tuple", "set"):
                    hit(node, "helper")
                elif _called(node) in _GONE or (_called(node) == "declare_traits"
                                                and any(k.arg == "host_only" for k in node.keywords)):
                    hit(node, "gone")
    return found


#: The places allowed to register otherwise, each with why: none.
REGISTRATION_ALLOWED = Counter()


def test_kernels_and_inference_functions_are_registered_one_way():
    assert_only_allowed(registration_spellings(_plugin_sources()), REGISTRATION_ALLOWED, 0,
                        "KERNELS.register(...) on a KernelTable, FUNCTIONS.register(...) on a FunctionTable")


def test_registration_scan_sees_each_other_spelling():
    """Each spelling the plugins used (and the ones that are gone) is found; the one way is not."""
    forms = {
        'FUNCTIONS: dict = {}': "table",
        'KERNELS = {}': "table",
        'FUNCTIONS[("", "SimplifiedLayerNormalization", 1)] = f': "item",
        'def rule(table, *ops):\n    for op in ops:\n        table[(DOMAIN, op, 1)] = fn': "item",
        'for v in vs:\n    table[(domain, op, v)] = fn': "item",
        'table[(ML, op, v)] = fn': "item",
        'FUNCTIONS = FunctionTable(k, domain=D)\nFUNCTIONS.update(other)': "item",
        'FUNCTIONS = FunctionTable(k)\nFUNCTIONS |= other': "item",
        'X = {(FUSED, "Gelu", 1): f}': "item",
        '@rule(FUNCTIONS, "Relu")\ndef f(ctx): pass': "helper",
        'register(FUNCTIONS, "Pow", g, 1, 1)': "helper",
        'register_direct(KERNELS, portable, "Add", np.add)': "helper",
        'merge_family_tables(__name__, __path__, "KERNELS")': "gone",
        'for f in table.values():\n    host_only(f)': "gone",
        'declare_traits(f, host_only=True)': "gone",
    }
    for code, form in forms.items():
        found = registration_spellings([("x.py", ast.parse(code))])
        assert {k[2] for k in found} == {form}, (code, found)
    one_way = ("KERNELS = KernelTable()\n@KERNELS.register('Relu', 6, 13, host_only=True)\ndef relu(ctx): pass\n"
               "KERNELS.register('Add', *portable.KERNELS.versions('Add'))(direct_factory(portable, 'Add', np.add))\n"
               "FUNCTIONS = FunctionTable(definition_keys, domain=ML)\n@FUNCTIONS.register(('A', 'B'), 1, 6)\n"
               "def f(ctx): pass\nFUNCTIONS.register('C')(same_as_input(0))\nx = portable.KERNELS[('', 'Add', 7)]\n"
               "return lazy_family_tables(__name__, ENTRIES, table='FUNCTIONS')\nout[b, h, r0:r1] = s\n"
               "y[n, c, i] = 0")
    assert not registration_spellings([("x.py", ast.parse(one_way))])


def test_function_table_registers_over_the_definitions():
    from onnxkit import ir
    from onnxkit.inference.common import same_as_input
    from onnxkit.plugin import FunctionTable, OpSchema

    keys = [("ai.onnx", "Relu", 1), ("", "Relu", 6), ("", "Relu", 13), ("", "Relu", 14), ("", "Pow", 7), ("", "Pow", 12),
            ("com.example", "Relu", 1)]
    table = FunctionTable(lambda: keys)

    @table.register("Relu", 6, 13)
    def relu(ctx):
        return []

    assert {k for k in table} == {("", "Relu", 6), ("", "Relu", 13)} and table[("", "Relu", 6)] is relu
    made = same_as_input(0)
    table.register(("Pow",))(made)
    rule = table[("", "Pow", 7)]
    assert table[("", "Pow", 12)] is rule and rule.__module__ == __name__    # recorded under the registering module
    assert made.__module__ == "onnxkit.inference.common" and rule.__wrapped__ is made
    ctx = _FakeCtx()
    rule(ctx)
    assert ctx.outputs == {0: "x's type"}                                     # and computes the rule's result
    table.register("Relu", domain="com.example")(relu)
    assert table[("com.example", "Relu", 1)] is relu
    assert table.versions("Relu") == [1, 6, 13, 14] and table.versions("Relu", 7, 13) == [13]
    with pytest.raises(KeyError, match=r"ai\.onnx::Relu in \[2, 5\]"):
        table.register("Relu", 2, 5)
    with pytest.raises(KeyError, match="Swish"):
        table.register(("Relu", "Swish"))                                     # nothing registered: checked first
    assert ("", "Relu", 14) not in table
    schema = OpSchema(domain="com.example", name="Scale", since_version=3)
    small = FunctionTable([schema], domain="com.example")
    assert small.register("Scale")(relu) is relu and list(small) == [("com.example", "Scale", 3)]
    assert isinstance(small, dict) and ir is not None


class _FakeCtx:
    num_inputs = num_outputs = 1

    def __init__(self):
        self.outputs = {}

    def input_type(self, i):
        return "x's type"

    def set_output(self, k, t):
        self.outputs[k] = t


def test_the_former_spellings_are_refused_naming_the_replacement():
    from onnxkit.errors import OnnxkitError
    from onnxkit.plugin import KernelTable, host_only, merge_family_tables

    with pytest.raises(OnnxkitError, match=r"merge_family_tables.*gone.*write_index.*lazy_family_tables"):
        merge_family_tables("pkg", [], "KERNELS")
    with pytest.raises(OnnxkitError, match=r"host_only.*gone.*KernelTable\.register\(.*host_only=True\)"):
        host_only(lambda ctx: None)
    table = KernelTable()
    table.register("Relu", 14, 6)(lambda ctx: None)
    table.register("Relu", 1, domain="com.example")(lambda ctx: None)
    assert table.versions("Relu") == (6, 14) and table.versions("Relu", "com.example") == (1,)
