"""Operator knowledge lives with the operator's plugin (issue 42 item 4): the host holds no table of
ai.onnx operator names.

What the host needs to know of an operator it reads from what the domain package declares on the
operator's portable kernel (:mod:`onnxkit.kernel_traits`): the run-time size check it needs
(``size_guard``, :mod:`onnxkit.runtime.budget`), whether it is ``nondeterministic`` (never folded at
planning: plan.py, the shape specializer, computed constants; the conformance statement's 8.5 row)
and whether it ``fails_on_values`` (never dropped unread by the specializer); what a kernel does
(``calls_blas``: the session's BLAS thread limit); and what a backend's values are
(``Backend.array_kind``: a session's feeds and outputs).

The scan: every module of ``onnxkit/runtime/`` is parsed, and no module-level assignment (a class
body's at module level included) whose value builds a set, frozenset, dict, tuple or list may hold
a string naming an ai.onnx operator (a string is split on whitespace first:
``"Add Sub".split()``).  Exempt, and only these (:data:`EXEMPT`, 21 modules): the graph
optimizer's pattern rules — each pass module of ``onnxkit/runtime/optimizer/`` listed in its
``PASSES`` table (a rewrite names the operators it rewrites, as onnxruntime's optimizer does:
``epilogue`` the Relu / Add / Clip it folds, ``qdq`` the value moves it sees through,
``specialize`` the Shape / Size it records), ``PASSES`` itself (``optimizer/__init__.py``: the
operators a pass's rules start at), and the pattern language the rules are written in
(``rules.py``'s commutative operators, ``patterns.py``).  The optimizer's other modules
(``computed``, ``view``, ``inline``) are scanned.
"""

from __future__ import annotations

import ast
import types
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

import onnxkit  # noqa: E402
from onnxkit import hookimpl, ir  # noqa: E402
from onnxkit.errors import LimitExceeded  # noqa: E402
from onnxkit.kernel_traits import (FACTORY_TRAITS, NO_TRAITS, OPERATOR_TRAITS, SIZE_GUARDS,  # noqa: E402
                                   operator_traits, traits_of)
from onnxkit.limits import MiB, Limits  # noqa: E402
from onnxkit.plugin import (Backend, FormalParameter, KernelTable, OperatorSet, OpSchema, TypeConstraint,  # noqa: E402
                            calls_blas, nondeterministic, size_guard)
from onnxkit.registry import build_registry, get_registry  # noqa: E402
from onnxkit.runtime import budget, size_bounds  # noqa: E402
from onnxkit.runtime.feeds import is_torch_backend  # noqa: E402
from onnxkit.runtime.optimizer import PASSES  # noqa: E402
from onnxkit.runtime.plan import is_deterministic  # noqa: E402
from onnxkit.runtime.threads import blas_operators, uses_blas  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "onnxkit" / "runtime"

#: the modules exempt from the scan (module docstring): the optimizer's passes, and the pattern language
EXEMPT = frozenset({f"optimizer/{name}.py" for name in (
    "identity", "cast", "qdq", "transpose", "reshape", "pad_conv", "qpad_conv", "conv_bn", "channel_affine", "matmul_add",
    "gelu", "hardswish", "attention", "qlut", "elementwise", "onehot", "epilogue", "specialize",   # PASSES
    "rules", "patterns",                                                     # the pattern language
)}) | {"optimizer/__init__.py"}                                              # PASSES: the rules' roots

_BUILDERS = {"frozenset", "set", "dict", "tuple", "list", "fromkeys"}


def ai_onnx_operators() -> set:
    """Every op_type the registry's ai.onnx operator sets define, at any version."""
    reg = get_registry()
    return {op for (domain, _v), opset in reg.operator_sets.items() if domain == "" for op in opset.schemas}


def _builds_a_table(value) -> bool:
    for n in ast.walk(value):
        if isinstance(n, (ast.Set, ast.Dict, ast.Tuple, ast.List, ast.SetComp, ast.DictComp, ast.ListComp)):
            return True
        if isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) in _BUILDERS:
            return True
    return False


def operator_tables(source: str, names: set) -> dict:
    """``{table name: sorted operator names}`` of the module-level tables of ``source`` naming any of ``names``."""
    found = {}
    tree = ast.parse(source)
    body = list(tree.body)
    body += [s for c in tree.body if isinstance(c, ast.ClassDef) for s in c.body]
    for st in body:
        if isinstance(st, ast.Assign):
            targets, value = st.targets, st.value
        elif isinstance(st, ast.AnnAssign) and st.value is not None:
            targets, value = [st.target], st.value
        else:
            continue
        if not _builds_a_table(value):
            continue
        words = {w for n in ast.walk(value) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                 for w in n.value.split()}
        hits = sorted(words & names)
        if hits:
            found[", ".join(ast.unparse(t) for t in targets)] = hits
    return found


def _modules() -> list:
    return sorted(p.relative_to(RUNTIME).as_posix() for p in RUNTIME.rglob("*.py"))


# -- the scan -------------------------------------------------------------------------------------

def test_no_runtime_module_holds_a_table_of_ai_onnx_operators():
    names = ai_onnx_operators()
    assert len(names) > 190 and {"Concat", "Dropout", "RandomNormal", "Div", "MatMul"} <= names
    scanned = [m for m in _modules() if m not in EXEMPT]
    assert len(scanned) >= 25 and {"budget.py", "size_bounds.py", "plan.py", "threads.py", "feeds.py", "optimizer/computed.py", "optimizer/view.py", "optimizer/inline.py"} <= set(scanned)
    offending = {m: t for m in scanned if (t := operator_tables((RUNTIME / m).read_text(encoding="utf-8"), names))}
    assert not offending, ("tables of ai.onnx operators in the host; declare the knowledge on the operator's "
                           f"kernel instead (onnxkit.kernel_traits): {offending}")


def test_the_exempt_modules_are_the_optimizers_passes_and_its_pattern_language():
    assert len(EXEMPT) == 21
    assert {f"optimizer/{p.name}.py" for p in PASSES} | {"optimizer/rules.py", "optimizer/patterns.py",
                                                        "optimizer/__init__.py"} == EXEMPT
    assert EXEMPT <= set(_modules())
    # the exemption is used: the passes do name the operators they rewrite
    names = ai_onnx_operators()
    assert operator_tables((RUNTIME / "optimizer/epilogue.py").read_text(), names) == {
        "_CONSUMERS": ["Add", "Clip", "Relu", "Sum"]}
    assert operator_tables((RUNTIME / "optimizer/specialize.py").read_text(), names) == {"SHAPE_OPS": ["Shape", "Size"]}


def test_the_scan_finds_each_way_of_writing_a_table():
    names = {"Concat", "Add", "Sub", "Dropout", "Gather"}
    source = '''
A = frozenset({"Concat"})
B = dict.fromkeys("""Add
    Sub""".split(), "broadcast")
C: dict = {"Gather": "gather"}
D = ("x", "Dropout")
E = {"kind": ["Add"]}
F = "Concat"            # a string, not a table
G = {"concat": 1}       # a kind, not an operator (case matters)
class K:
    H = {"Sub"}
def f():
    I = {"Add"}         # not module level
'''
    assert operator_tables(source, names) == {"A": ["Concat"], "B": ["Add", "Sub"], "C": ["Gather"], "D": ["Dropout"],
                                              "E": ["Add"], "H": ["Sub"]}


# -- size guards -------------------------------------------------------------------------------------

def test_every_size_guard_kind_is_implemented_once_by_the_host():
    assert set(size_bounds.BOUNDS) | set(size_bounds.ESTIMATORS) | {"value"} == set(SIZE_GUARDS)
    assert not set(size_bounds.BOUNDS) & set(size_bounds.ESTIMATORS) and len(SIZE_GUARDS) == 15
    with pytest.raises(TypeError, match="size_guard must be one of"):
        size_guard("Concat")


def test_the_default_domain_declares_the_guards_on_its_kernels():
    guarded = budget.guarded_operators()
    assert len(guarded) == 66
    assert guarded["Concat"] == "concat" and guarded["Add"] == "broadcast" and guarded["ConstantOfShape"] == "value"
    assert guarded["NonZero"] == "nonzero" and guarded["Gemm"] == "gemm" and "Reshape" not in guarded
    reg = get_registry()
    assert traits_of(reg.portable[("", "Concat", 13)]).size_guard == "concat"   # from the kernel index, not imported


def _plain(factory):
    """``factory`` behind a wrapper that declares nothing."""
    return lambda ctx: factory(ctx)


def _session(nodes, inputs, outputs, registry=None, opset=21, **kwargs):
    graph = h.make_graph(nodes, "g", inputs, outputs)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset), h.make_opsetid(CUSTOM, 1)], ir_version=10)
    return onnxkit.InferenceSession(model.SerializeToString(), registry=registry, **kwargs)


def _vi(name, elem=T.FLOAT, shape=None):
    return h.make_tensor_value_info(name, elem, shape)


def test_the_guard_of_an_ai_onnx_node_is_what_its_domain_package_declares():
    concat = [h.make_node("Concat", ["a", "b"], ["y"], axis=0)]
    ins, outs = [_vi("a", shape=[2]), _vi("b", shape=[3])], [_vi("y", shape=[5])]
    (step,) = _session(concat, ins, outs).plan.steps
    assert step.guard is not None and step.guard.kind == "concat" and step.traits.size_guard == "concat"
    reg = build_registry()
    for key in [k for k in reg.portable if k[:2] == ("", "Concat")]:
        reg.portable[key] = _plain(reg.portable[key])          # the declaration withdrawn
    (step,) = _session(concat, ins, outs, registry=reg).plan.steps
    assert step.guard is None and step.traits is NO_TRAITS


# -- a plugin's own operators ---------------------------------------------------------------------

CUSTOM = "com.example.tables"
CALLED = []


def _indices(ctx):
    def run(x):
        CALLED.append(ctx.op_type)
        return np.stack(np.nonzero(x)).astype(np.int64)
    return run


class _Plugin:
    KERNELS = KernelTable()

    @staticmethod
    def schema(name):
        return OpSchema(domain=CUSTOM, name=name, since_version=1, inputs=(FormalParameter("x", "T"),),
                        outputs=(FormalParameter("y", "tensor(int64)"),),
                        type_constraints=(TypeConstraint("T", ("tensor(bool)", "tensor(float)")),))

    @staticmethod
    @hookimpl
    def onnxkit_operator_sets():
        return [OperatorSet(CUSTOM, 1, {n: _Plugin.schema(n) for n in ("Indices", "IndicesPlain", "Draw", "Product")})]

    @staticmethod
    @hookimpl
    def onnxkit_portable_kernels():
        return _Plugin.KERNELS


_Plugin.KERNELS.register("Indices", 1, domain=CUSTOM)(size_guard("nonzero")(_indices))
_Plugin.KERNELS.register("IndicesPlain", 1, domain=CUSTOM)(lambda ctx: _indices(ctx))
_Plugin.KERNELS.register("Draw", 1, domain=CUSTOM)(nondeterministic(lambda ctx: _indices(ctx)))
_Plugin.KERNELS.register("Product", 1, domain=CUSTOM)(calls_blas(lambda ctx: _indices(ctx)))


@pytest.fixture(scope="module")
def registry():
    reg = build_registry(extra=[("tables_plugin", types.SimpleNamespace(
        onnxkit_operator_sets=_Plugin.onnxkit_operator_sets, onnxkit_portable_kernels=_Plugin.onnxkit_portable_kernels))])
    assert not reg.faults, reg.faults
    return reg


def _custom(op, registry, limits=None):
    node = h.make_node(op, ["x"], ["y"], domain=CUSTOM, name=f"custom_{op}")
    return _session([node], [_vi("x", T.BOOL, [None])], [_vi("y", T.INT64, None)], registry=registry, limits=limits)


def test_a_plugin_operator_declaring_a_kind_gets_that_guard(registry):
    limits = Limits(max_value_bytes=MiB, max_run_bytes=64 * MiB)
    x = {"x": np.ones(1 << 18, np.bool_)}                  # 2^18 indices of 8 octets: 2 MiB > 1 MiB
    assert budget.guarded_operators(registry, CUSTOM) == {"Indices": "nonzero"}
    sess = _custom("Indices", registry, limits)
    assert sess.plan.steps[0].guard.kind == "nonzero"
    CALLED.clear()
    with pytest.raises(LimitExceeded) as info:
        sess.run(None, x)
    assert info.value.limit == "max_value_bytes" and info.value.value == 2 * MiB
    assert CALLED == [] and "checked after" not in str(info.value)    # refused before its kernel ran
    # the same kernel undeclared: nothing predicts its size, so it is refused once it has run
    with pytest.raises(LimitExceeded) as info:
        _custom("IndicesPlain", registry, limits).run(None, x)
    assert CALLED == ["IndicesPlain"] and "checked after" in str(info.value)
    assert _custom("Indices", registry, limits).run(None, {"x": np.ones(1 << 16, np.bool_)})[0].shape == (1, 1 << 16)


def test_plugin_operator_traits_reach_the_planner_and_the_blas_limit(registry):
    draw, plain, product = (_custom(op, registry).plan.steps[0] for op in ("Draw", "IndicesPlain", "Product"))
    assert not is_deterministic(draw) and is_deterministic(plain) and is_deterministic(product)
    assert (CUSTOM, "Product") in blas_operators(registry) and (CUSTOM, "Draw") not in blas_operators(registry)
    model = onnxkit.load(_model_bytes("Product"))
    assert uses_blas(model, registry) and not uses_blas(onnxkit.load(_model_bytes("Draw")), registry)
    assert operator_traits(registry, (CUSTOM, "Draw", 1)).nondeterministic


def _model_bytes(op):
    node = h.make_node(op, ["x"], ["y"], domain=CUSTOM)
    graph = h.make_graph([node], "g", [_vi("x", T.BOOL, [None])], [_vi("y", T.INT64, None)])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 21), h.make_opsetid(CUSTOM, 1)],
                        ir_version=10).SerializeToString()


# -- determinism, values that fail, BLAS -----------------------------------------------------------

def test_the_nondeterministic_operators_are_those_the_domain_package_declares():
    from onnxkit.positions import POSITIONS, nondeterministic_operators

    declared = ["Bernoulli", "Dropout", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform",
                "RandomUniformLike"]
    assert nondeterministic_operators() == declared
    (row,) = [p for p in POSITIONS if p.clause == "8.5"]
    assert row.position.startswith(f"Every operator except {', '.join(declared)} is deterministic")


def test_folding_at_planning_reads_the_declaration():
    node = [h.make_node("RandomUniform", [], ["z"], shape=[4], seed=3.0)]
    plan = _session(node, [], [_vi("z", shape=[4])]).plan
    assert [s.node.op_type for s in plan.steps] == ["RandomUniform"]       # drawn at every run, never folded
    reg = build_registry()
    for key in [k for k in reg.portable if k[:2] == ("", "RandomUniform")]:
        reg.portable[key] = _plain(reg.portable[key])                      # the declaration withdrawn
    assert _session(node, [], [_vi("z", shape=[4])], registry=reg).plan.steps == []   # folded once


def test_div_and_mod_declare_that_they_fail_on_values():
    nodes = [h.make_node(op, ["a", "b"], [op.lower()]) for op in ("Div", "Mod", "Add")]
    ins = [_vi("a", T.INT32, [2]), _vi("b", T.INT32, [2])]
    steps = _session(nodes, ins, [_vi(op, T.INT32, [2]) for op in ("div", "mod", "add")]).plan.steps
    assert [s.traits.fails_on_values for s in steps] == [True, True, False]


def test_the_blas_operators_are_those_whose_kernels_declare_it():
    ops = blas_operators(get_registry())
    assert {("", "MatMul"), ("", "Gemm"), ("", "Conv"), ("", "LSTM"), ("ai.onnx.ml", "LinearClassifier")} <= ops
    assert ("", "Add") not in ops and ("", "Relu") not in ops
    matmul = h.make_model(h.make_graph([h.make_node("MatMul", ["a", "a"], ["y"])], "g", [_vi("a", shape=[2, 2])],
                                       [_vi("y", shape=[2, 2])]), opset_imports=[h.make_opsetid("", 21)])
    add = h.make_model(h.make_graph([h.make_node("Add", ["a", "a"], ["y"])], "g", [_vi("a", shape=[2, 2])],
                                    [_vi("y", shape=[2, 2])]), opset_imports=[h.make_opsetid("", 21)])
    assert uses_blas(onnxkit.load(matmul.SerializeToString()))
    assert not uses_blas(onnxkit.load(add.SerializeToString()))


# -- factory traits in the kernel index ---------------------------------------------------------------

def test_the_factory_traits_are_the_operator_traits_host_only_and_calls_blas():
    assert OPERATOR_TRAITS == ("size_guard", "nondeterministic", "fails_on_values", "accepts_beyond")
    assert FACTORY_TRAITS == ("host_only", "calls_blas", *OPERATOR_TRAITS)
    reg = build_registry()  # its own: the process's registry may have loaded Dropout's family already
    lazy = reg.portable[("", "Dropout", 13)]
    assert traits_of(lazy).nondeterministic and lazy._real is None       # answered from the index


# -- backends declare what their values are ------------------------------------------------------------

def test_backends_declare_their_array_kind():
    reg = get_registry()
    assert reg.backends["cpu"].array_kind == "numpy" and not is_torch_backend(reg.backends["cpu"])
    if "gpu" in reg.backends:
        assert reg.backends["gpu"].array_kind == "torch" and is_torch_backend(reg.backends["gpu"])
    # the description no longer decides: a device string naming torch is not a declaration
    assert not is_torch_backend(Backend(name="x", device="torch (cuda)"))
    assert is_torch_backend(Backend(name="y", array_kind="torch"))


# -- computed constants ----------------------------------------------------------------------------------

def _view(nodes, out, inits=()):
    from onnxkit.runtime.optimizer.view import GraphView

    model = h.make_model(h.make_graph(nodes, "g", [], [_vi(out, T.INT64, None)], initializer=list(inits)),
                         opset_imports=[h.make_opsetid("", 21)], ir_version=10)
    return GraphView(onnxkit.load(model.SerializeToString()), get_registry())


def test_computed_constants_evaluate_deterministic_nodes_on_a_host_array_backend():
    from onnxkit.runtime.optimizer.computed import _host_backend, computed_constant

    c = h.make_node("Constant", [], ["c"], value=h.make_tensor("c", T.INT64, [3], [-1, 2, -3]))
    value, _ = computed_constant(_view([c, h.make_node("Abs", ["c"], ["y"])], "y"), "y")
    assert value.tolist() == [1, 2, 3]                                  # any deterministic operator
    shape = h.make_node("Constant", [], ["s"], value=h.make_tensor("s", T.INT64, [1], [3]))
    draw = h.make_node("RandomUniformLike", ["f"], ["r"], dtype=T.FLOAT)
    fill = h.make_node("ConstantOfShape", ["s"], ["f"])
    assert computed_constant(_view([shape, fill, draw], "r"), "r") is None   # a nondeterministic one: never
    assert computed_constant(_view([shape, fill], "f"), "f")[0].tolist() == [0.0, 0.0, 0.0]
    assert _host_backend(get_registry()) == "cpu"
    assert _host_backend(types.SimpleNamespace(backends={"z": Backend(name="z")})) is None


def test_a_specialized_plan_keeps_what_the_declarations_keep():
    """The shape specializer's copies of steps carry their operator traits: a random draw whose
    inputs become constants is still drawn at every run, and a Div nothing reads still fails on a
    zero divisor once the plan for the input shapes is specialized."""
    x = _vi("x", shape=[3])
    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("ConstantOfShape", ["s"], ["f"]),
             h.make_node("RandomUniformLike", ["f"], ["y"], dtype=T.FLOAT)]
    sess = _session(nodes, [x], [_vi("y", shape=[3])])
    feed = {"x": np.zeros(3, np.float32)}
    draws = [sess.run(None, feed)[0].tobytes() for _ in range(6)]
    assert len(set(draws)) == 6
    ints = [_vi("a", T.INT32, [2]), _vi("b", T.INT32, [2])]
    nodes = [h.make_node("Div", ["a", "b"], ["unread"]), h.make_node("Add", ["a", "a"], ["y"])]
    sess = _session(nodes, ints, [_vi("y", T.INT32, [2])])
    ones = np.ones(2, np.int32)
    for _ in range(4):
        assert sess.run(None, {"a": ones, "b": ones})[0].tolist() == [2, 2]
    with pytest.raises(onnxkit.OnnxkitError, match="zero"):
        sess.run(None, {"a": ones, "b": np.array([1, 0], np.int32)})
