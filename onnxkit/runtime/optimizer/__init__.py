"""The plan-time graph optimizer: exact rewrites of a copy of the model's graph.

:func:`optimize` applies the passes selected by ``SessionOptions.graph_optimization_level``
(onnxruntime's enum) to a copy of the top-level graph, in the order of the one table
:data:`PASSES` (a :class:`Pass` each, graph and plan passes alike, with what each rewrites).

``ORT_DISABLE_ALL`` runs none; ``ORT_ENABLE_BASIC`` the exact rewrites; from
``ORT_ENABLE_EXTENDED`` on (the default, ``ORT_ENABLE_ALL``, included) also the fusions into
one node that computes the same function rounded once (as onnxruntime's extended level fuses
into its own operators).  ``onehot`` and ``epilogue`` work on the plan once it is made,
``specialize`` on the plan at run time (the session's :class:`~.specialize.Specializer`), the
others on the graph.  Each pass is its own module whose docstring says why it is exact
(``epilogue``, ``qlut`` and ``elementwise``: bit-identical; ``onehot``: equal, a zero's sign aside); ``conv_bn``,
``channel_affine`` and ``pad_conv`` are exact up to rounding, ``gelu``, ``hardswish`` and ``attention`` within the
element type's tolerance.  The graph passes leave subgraphs (If/Loop/Scan bodies) alone (planning
folds their constants, :mod:`onnxkit.runtime.plan`), and a name read inside one is never removed
or renamed; graph outputs keep their names; graph inputs are kept as they were.  A graph with an
ai.onnx.preview.training node (Gradient reads the graph it is in) is planned as given.  The
user's :class:`~onnxkit.ir.Model` is not changed.

``disabled`` (a set of pass names, e.g. from the session config entry
``session.disable_passes``, comma-separated) switches single passes off.  A pass marked
``opt_in`` (:data:`OPT_IN`: one that has not shown a gain over the unfused plan in the
benchmarks, docs/benchmarks.md) is off in a session unless the config entry
``session.enable_passes`` names it (:func:`session_disabled`); :func:`optimize` called
directly runs it as any other.
"""

from __future__ import annotations

from importlib import import_module
from typing import Callable, Optional

from onnxkit import records
from onnxkit import record_methods

from ... import ir
from ...errors import OnnxkitError
from ...registry import normalize_domain
from . import epilogue, onehot
from .view import GraphView


@records.frozen
class Pass:
    """One optimizer pass: its ``name`` (``session.disable_passes``), the lowest ``level`` that runs
    it, what it works on (``"graph"``: ``run(view) -> count`` on the :class:`GraphView`; ``"plan"``:
    ``run(plan) -> count`` on the plan once made; ``"run"``: the plans made at run time, by the
    session's :class:`~.specialize.Specializer`, ``run`` None), and (plan passes) what its count
    counts, for the session's log."""

    name: str
    level: int
    works_on: str
    run: Optional[Callable] = None
    counts: str = ""
    #: off in a session unless ``session.enable_passes`` names it (module docstring)
    opt_in: bool = False
    __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH


def _on_roots(module: str, *op_types: str, reads: str = "") -> Callable:
    """``run(view)`` of the rules-based pass ``module`` (its own ``run``), which imports the module
    only once the graph has a node one of its rules can start at: ``op_types``, those of its
    rules' roots (:func:`.rules.apply_rules` tries a rule at no other node, so without one the
    pass rewrites nothing), and, where ``reads`` names one, a node of that op type, which every
    match of every rule reads (qdq: a DequantizeLinear).  A model without them does not pay for
    the module and its record classes at its first result (``tests/structure/test_lazy_api.py``
    holds ``op_types`` to the rules)."""
    roots = frozenset(op_types)

    def run(view: GraphView) -> int:
        if not any(n.op_type in roots for n in view.node) or (reads and not any(n.op_type == reads for n in view.node)):
            return 0
        return import_module(f"{__name__}.{module}").run(view)
    run.module, run.roots = module, roots
    return run


def _on_types(module: str, *needs: tuple) -> Callable:
    """``run(view)`` of the rules-based pass ``module`` (its own ``run``), which imports the module
    only once the graph holds the op types one of its rules needs: ``needs``, alternatives, each a
    tuple of op types a match of some rule reads at once (a ``"Mul"`` also met by a Div, as
    :func:`~.rules.apply_rules` matches a Mul pattern).  A graph meeting none of them gives no
    match, so the pass rewrites nothing; it does not pay for the module, the rules engine and
    their record classes at its first result (``tests/structure/test_first_result_path.py``
    holds ``needs`` to the rules)."""
    kinds = tuple(tuple(frozenset(("Mul", "Div") if t == "Mul" else (t,)) for t in need) for need in needs)

    def meets(present) -> bool:
        """True if the op types ``present`` meet one of ``needs``."""
        return any(all(group & present for group in need) for need in kinds)

    def run(view: GraphView) -> int:
        if not meets({n.op_type for n in view.node}):
            return 0
        return import_module(f"{__name__}.{module}").run(view)
    run.module, run.needs, run.meets = module, needs, meets
    return run


def _on_chains(module: str, *op_types: str) -> Callable:
    """``run(view)`` of the pass ``module`` (its own ``run``), which imports the module only once
    the graph has a node of ``op_types`` reading the output of another such node (a region of
    two nodes at least: without one the pass rewrites nothing)."""
    kinds = frozenset(op_types)

    def run(view: GraphView) -> int:
        made = {o for n in view.node if n.op_type in kinds for o in n.output}
        if not any(n.op_type in kinds and any(i in made for i in n.input) for n in view.node):
            return 0
        return import_module(f"{__name__}.{module}").run(view)
    run.module, run.chains = module, kinds
    return run


#: every pass, in the order it runs, with the lowest level that runs it (1: ``ORT_ENABLE_BASIC``,
#: 2: ``ORT_ENABLE_EXTENDED``; the one table: the session's plan passes and the specializer too)
PASSES = (
    Pass("identity", 1, "graph", _on_types("identity", ("Identity",), ("Dropout",))),  # Identity, inference Dropout removed
    Pass("cast", 1, "graph", _on_types("cast", ("Cast",), ("CastLike",))),  # a Cast to its input's type removed
    Pass("qdq", 2, "graph", _on_roots("qdq", "QuantizeLinear", "Gemm", reads="DequantizeLinear")),  # DQ / Q
    # around moves dropped, DQ -> Q cancelled, QDQ groups to integer operators
    Pass("transpose", 1, "graph", _on_types("transpose", ("Transpose",))),  # Transpose pairs cancelled / merged
    Pass("reshape", 1, "graph", _on_types("reshape", ("Reshape",))),        # Reshape -> Reshape collapsed
    Pass("pad_conv", 1, "graph", _on_types("pad_conv", ("Conv", "Pad"))),   # a zero constant Pad into Conv's pads
    Pass("qpad_conv", 1, "graph", _on_types("qpad_conv", ("QLinearConv", "Pad"), ("ConvInteger", "Pad"))),  # an
    # 8-bit Pad of the zero point into QLinearConv / ConvInteger's pads
    Pass("conv_bn", 1, "graph", _on_types("conv_bn", ("BatchNormalization", "Conv"))),  # BN folded into Conv
    Pass("channel_affine", 1, "graph", _on_types(                           # per-channel Mul / Add folded into
        "channel_affine", ("Mul", "Conv"), ("Mul", "BatchNormalization"), ("Add", "Conv"),  # Conv or BN
        ("Add", "BatchNormalization"))),
    Pass("matmul_add", 1, "graph", _on_types("matmul_add", ("Add", "MatMul"))),  # MatMul + Add -> Gemm
    Pass("gelu", 2, "graph", _on_roots("gelu", "Mul", "Div")),     # the exporters' GELU expansions -> Gelu
    Pass("hardswish", 2, "graph", _on_roots("hardswish", "Mul", "Div")),  # x * Clip(x + 3, 0, 6) / 6 -> HardSwish
    Pass("attention", 2, "graph", _on_roots("attention", "MatMul")),  # softmax(scale * Q K^T + mask) V -> Attention
    Pass("qlut", 2, "graph", _on_roots("qlut", "QuantizeLinear", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearAdd",
                                       "QLinearMul")),  # an 8-bit function of one 8-bit tensor -> LookupTable
    # (qlut after the other fusions: a region's body holds their fusions as planned unfused; it
    # raises the ai.onnxkit import to 3)
    Pass("elementwise", 2, "graph", _on_chains("elementwise", "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Abs", "Sqrt",
                                               "Reciprocal", "Relu", "Sigmoid", "Tanh"), opt_in=True),  # a float32 elementwise
    # region -> Elementwise (last among the graph passes: qlut's regions first; it raises the
    # ai.onnxkit import to 4)
    Pass("onehot", 2, "plan", onehot.run, "one-hot product(s) read as rows"),
    Pass("epilogue", 2, "plan", epilogue.run, "step(s) folded into their producers"),  # Relu / Add into a cpu Conv
    Pass("specialize", 1, "run"),                            # a plan per input-shape signature, If branches inlined
)
PASS_NAMES = tuple(p.name for p in PASSES)
#: the passes a session runs only where ``session.enable_passes`` names them
OPT_IN = frozenset(p.name for p in PASSES if p.opt_in)


@records.frozen
class Optimized:
    """The result of :func:`optimize`: the model to plan, what each pass rewrote, and the IR < 4
    graph inputs whose initializers were read as constants (feeding one of those must run the
    model as given)."""

    model: ir.Model
    rewrites: dict
    consumed_defaults: frozenset = frozenset()
    __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH

    @property
    def changed(self) -> bool:
        return any(self.rewrites.values())


def passes_on(works_on: str, level: int, disabled=frozenset()) -> list:
    """The passes working on ``works_on`` that run at ``level`` with ``disabled`` switched off, in order."""
    return [p for p in PASSES if p.works_on == works_on and level >= p.level and p.name not in disabled]


def optimize(model: ir.Model, level: int, registry=None, disabled=frozenset(), types: Optional[dict] = None) -> Optimized:
    """``model`` rewritten by the graph passes of ``level`` (a copy; ``model`` itself is unchanged).
    ``types``: the top-level graph's types inference gives ``model`` without its declarations,
    where the caller has them (:class:`GraphView`)."""
    chosen = passes_on("graph", level, disabled)
    if not chosen or model.graph is None or reads_its_graph(model.graph):
        return Optimized(model, {})
    view = GraphView(model, registry, types)
    rewrites = {p.name: p.run(view) for p in chosen}
    if not any(rewrites.values()):
        return Optimized(model, rewrites)
    return Optimized(view.finish(), rewrites, frozenset(view.consumed_defaults))


def run_plan_passes(plan, level: int, disabled=frozenset(), log: Optional[Callable] = None) -> dict:
    """The plan passes of ``level`` on ``plan`` (in place); ``{name: count}``.  ``log(name, message)``
    is told of each that changed something."""
    counts = {}
    for p in passes_on("plan", level, disabled):
        counts[p.name] = p.run(plan)
        if counts[p.name] and log is not None:
            log(p.name, f"{counts[p.name]} {p.counts}")
    return counts


def reads_its_graph(graph: ir.Graph) -> bool:
    """True if a node reads the graph's own structure by name (``Gradient`` of
    ai.onnx.preview.training differentiates the nodes between its ``xs`` and ``y``): such a graph
    is planned as given, since any rewrite would change what that node computes."""
    return any(normalize_domain(n.domain) == "ai.onnx.preview.training" for n in graph.node)


def disabled_passes(config_value: Optional[str]) -> frozenset:
    """The pass names of a comma-separated ``session.disable_passes`` (or ``session.enable_passes``)
    entry (unknown names refused)."""
    names = frozenset(p.strip() for p in (config_value or "").split(",") if p.strip())
    unknown = names - set(PASS_NAMES)
    if unknown:
        raise OnnxkitError(f"unknown optimizer pass(es) {sorted(unknown)}; passes: {list(PASS_NAMES)}")
    return names


def session_disabled(disable: Optional[str], enable: Optional[str]) -> frozenset:
    """The passes a session switches off: those its ``session.disable_passes`` entry names, and
    the :data:`OPT_IN` passes its ``session.enable_passes`` entry does not name (a pass named in
    both is off)."""
    return disabled_passes(disable) | (OPT_IN - disabled_passes(enable))


def plan_pass_on(name: str, level: int, disabled=frozenset()) -> bool:
    """True if the pass ``name`` (a plan or run-time pass) runs at ``level`` with ``disabled`` switched off."""
    return any(p.name == name for p in passes_on("plan", level, disabled) + passes_on("run", level, disabled))


__all__ = ["optimize", "Optimized", "Pass", "PASSES", "PASS_NAMES", "passes_on", "run_plan_passes",
           "reads_its_graph", "disabled_passes", "session_disabled", "OPT_IN", "plan_pass_on", "GraphView"]
