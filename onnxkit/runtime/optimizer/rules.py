"""Rewrite rules: a pattern written as an expression, a condition, a replacement.

A :class:`Rule` is data: its ``pattern`` is built from :class:`Var` (any value, the same
value wherever the name recurs), :class:`Const` (a one-element floating-point constant equal
to a number), :class:`Scalar` (a one-element floating-point constant, its value captured),
:class:`AnyOf` (alternatives, tried in order) and :class:`Op` (an ai.onnx node whose inputs
match the operand patterns), written with Python's operators where they read naturally::

    x = Var("x")
    exact_gelu = 0.5 * (x * (op.Erf(x / math.sqrt(2)) + 1.0))

**Products and sums match in any order and grouping.**  ``*`` and ``+`` build one flat
``Mul`` / ``Add`` pattern of all their operands (associativity and commutativity, exact for
matching: the fused node computes the function, not the expansion's rounding).  A graph's
product tree is opened through every two-input Mul read by its parent alone, and through a
``Div(u, c)`` by a one-element floating-point constant ``c`` read by its parent alone (``u``
opened, ``c`` a factor ``1/c``: a pattern's ``x / 6`` is ``x * (1/6)``, matching a graph's
``Div(x, 6)`` or ``Mul(x, 0.16666)``); a sum tree through every two-input Add.  Each way of
opening whose factor count is the pattern's is tried with every assignment of factors to
operands (patterns hold at most a handful).

**What a match guarantees** (checked before the condition runs):

* every node of the match except the root has each of its outputs read only by the match's
  own nodes, through the inputs the pattern names (an intermediate that is a graph output, read
  inside a subgraph, or read by any other node is no match: removing it would change the graph);
* every constant a :class:`Const` or :class:`Scalar` matched keeps the shape of the rule's
  ``subject`` value (:func:`~.patterns.keeps_shape`: x's element type, rank 0 or no higher than
  x's rank as verified inference knows it, never a declaration), where the rule names one;
* a :class:`Const` is within :data:`~.patterns.SCALAR_RTOL` (relative) of its number.

The rule's ``condition(view, match)`` then checks what the pattern cannot say (types from
inference, dimensions), and ``rewrite(view, match)`` edits the view (its use-def index stays
current).  :func:`apply_rules` runs a pass's rules over the graph, each node in order tried as
the root of each rule, and returns how many rewrites it made.
"""

from __future__ import annotations

from itertools import product as _combinations
from typing import Callable, Iterator, Optional

from onnxkit import records
from onnxkit import record_methods

from ... import ir
from ...domains import is_default_domain
from .patterns import FUSED_DOMAIN, SCALAR_RTOL, keeps_shape
from .view import GraphView, is_default

#: ops matched in any order and grouping (associative and commutative)
AC_OPS = ("Mul", "Add")


class Pattern:
    """A pattern; ``*``, ``+`` and ``/`` build product and sum patterns (module docstring)."""

    def __mul__(self, other):
        return _flat("Mul", self, other)

    def __rmul__(self, other):
        return _flat("Mul", other, self)

    def __add__(self, other):
        return _flat("Add", self, other)

    def __radd__(self, other):
        return _flat("Add", other, self)

    def __truediv__(self, other):
        if isinstance(other, (int, float)):
            return _flat("Mul", self, Const(1.0 / other))
        return Op("Div", (self, _lift(other)))


@records.frozen(eq=False)
class Var(Pattern):
    """Any value; where the name recurs, the same value."""

    name: str
    __repr__ = record_methods.REPR


@records.frozen(eq=False)
class Const(Pattern):
    """A one-element floating-point constant: equal to ``value`` within :data:`SCALAR_RTOL`, or
    (``value`` None) any, its value (as a factor: ``1/c`` for a divisor) bound to ``bind``."""

    value: Optional[float] = None
    bind: Optional[str] = None
    __repr__ = record_methods.REPR


def Scalar(name: str) -> Const:  # noqa: N802 (a pattern constructor, as Var and Const)
    """Any one-element floating-point constant, its value bound to ``name``."""
    return Const(None, name)


@records.frozen(eq=False)
class AnyOf(Pattern):
    """The first of ``alternatives`` that matches (in order)."""

    alternatives: tuple
    __repr__ = record_methods.REPR


@records.frozen(eq=False)
class Op(Pattern):
    """An ai.onnx ``op_type`` node whose inputs match ``operands`` (in order; any order and
    grouping for :data:`AC_OPS`); ``check(view, node)`` for its attributes; ``bind``: a name
    the matched node is bound to; ``variadic``: inputs past the operands are not matched (a
    Conv's optional bias, a Dropout's ratio)."""

    op_type: str
    operands: tuple
    check: Optional[Callable] = None
    bind: Optional[str] = None
    variadic: bool = False
    __repr__ = record_methods.REPR


def _lift(p) -> Pattern:
    return Const(float(p)) if isinstance(p, (int, float)) else p


def _flat(op_type: str, a, b) -> Op:
    operands = []
    for p in (_lift(a), _lift(b)):
        if isinstance(p, Op) and p.op_type == op_type and p.check is None and p.bind is None and not p.variadic:
            operands.extend(p.operands)
        else:
            operands.append(p)
    return Op(op_type, tuple(operands))


class _Ops:
    """``op.Erf(x)``, ``op.Clip(x, 0.0, 6.0, check=...)``: an :class:`Op` pattern."""

    def __getattr__(self, op_type: str):
        def build(*operands, check=None, bind=None, variadic=False):
            return Op(op_type, tuple(_lift(p) for p in operands), check, bind, variadic)
        return build


op = _Ops()


@records.frozen
class Match:
    """A match of a rule: ``root`` (the node computing the result), ``nodes`` (every node
    matched, root included), ``bindings`` (:class:`Var` names -> value names, :class:`Scalar`
    names -> floats, bound :class:`Op` names -> nodes) and ``constants`` (the constants read)."""

    root: ir.Node
    nodes: list
    bindings: dict
    constants: list
    __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH

    def __getitem__(self, name: str):
        return self.bindings[name]

    def get(self, name: str, default=None):
        return self.bindings.get(name, default)

    @property
    def output(self) -> str:
        return self.root.output[0]


@records.frozen
class Rule:
    """``pattern`` (its root an :class:`Op`), ``condition(view, match) -> bool`` (or None),
    ``rewrite(view, match)``, and the :class:`Var` whose shape every matched constant must keep
    (``subject``, or None)."""

    name: str
    pattern: Op
    rewrite: Callable
    condition: Optional[Callable] = None
    subject: Optional[str] = None
    __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH

    def match(self, view: GraphView, node: ir.Node) -> Optional[Match]:
        """The first match of the rule with ``node`` as its root, or None."""
        for state in _match_node(view, self.pattern, node, _State({}, {}, frozenset(), [], {})):
            found = Match(node, list(state.nodes.values()), state.bindings, state.constants)
            if not _closed(view, found, state.edges):
                continue
            subject = state.bindings.get(self.subject) if self.subject else None
            if self.subject and not all(keeps_shape(view, view.constant(c), subject) for c in state.constants):
                continue
            if self.condition is None or self.condition(view, found):
                return found
        return None


@records.define
class _State:
    bindings: dict
    nodes: dict
    edges: frozenset
    constants: list
    memo: dict
    __repr__, __eq__ = record_methods.REPR, record_methods.EQ

    def evolve(self, bind=None, nodes=(), edges=(), constant=None, memo=None) -> "_State":
        bindings = {**self.bindings, **bind} if bind else self.bindings
        all_nodes = dict(self.nodes)
        for n in nodes:
            all_nodes[id(n)] = n
        return _State(bindings, all_nodes, self.edges | frozenset(edges),
                      self.constants + [constant] if constant else self.constants,
                      {**self.memo, **memo} if memo else self.memo)


def _closed(view: GraphView, found: Match, edges: frozenset) -> bool:
    """Every output of every matched node but the root is read only through the match's edges."""
    for node in found.nodes:
        if node is found.root:
            continue
        for out in node.output:
            if out and any(u.slot < 0 or (id(u.item), u.slot) not in edges for u in view.index.uses(out)):
                return False
    return True


def _float_scalar(view: GraphView, name: str) -> Optional[float]:
    c = view.constant(name)
    if c is None or c.size != 1 or c.dtype.kind != "f":
        return None
    return float(c.reshape(-1)[0])


def _divides_by_constant(view: GraphView, node) -> bool:
    return is_default(node, "Div") and len(node.input) == 2 and _float_scalar(view, node.input[1]) is not None


def _operands(view: GraphView, node, op_type: str, limit: int) -> Iterator[tuple]:
    """``(leaves, opened, edges)`` for each way of opening the ``op_type`` tree rooted at ``node``:
    leaves ``(name, reader, slot, inverted)``, the nodes opened below ``node``, their edges."""
    per_input = []
    divisor = op_type == "Mul" and node.op_type == "Div"
    for slot, name in enumerate(node.input):
        if divisor and slot == 1:
            per_input.append([([(name, node, slot, True)], [], [])])
            continue
        options = [([(name, node, slot, False)], [], [])]
        child = view.producer_of(name)
        openable = (is_default(child, op_type) and len(child.input) == 2) or (op_type == "Mul" and _divides_by_constant(view, child))
        if openable and view.sole_consumer(name) is node and limit > 1:
            for leaves, opened, edges in _operands(view, child, op_type, limit - 1):
                options.append((leaves, [child] + opened, [(id(node), slot)] + edges))
        per_input.append(options)
    for combo in _combinations(*per_input):
        leaves = [leaf for c in combo for leaf in c[0]]
        if len(leaves) <= limit:
            yield leaves, [n for c in combo for n in c[1]], [e for c in combo for e in c[2]]


def _match_node(view: GraphView, p: Op, node, state: _State) -> Iterator[_State]:
    if not (is_default(node, p.op_type) or (p.op_type == "Mul" and _divides_by_constant(view, node))):
        return
    if p.check is not None and not p.check(view, node):
        return
    state = state.evolve(bind={p.bind: node} if p.bind else None, nodes=[node])
    if p.op_type in AC_OPS:
        if len(node.input) != 2:
            return
        for leaves, opened, edges in _operands(view, node, p.op_type, len(p.operands)):
            if len(leaves) == len(p.operands):
                yield from _assign(view, list(p.operands), leaves, state.evolve(nodes=opened, edges=edges))
        return
    if len(node.input) != len(p.operands) and not (p.variadic and len(node.input) > len(p.operands)):
        return
    leaves = [(n, node, k, False) for k, n in enumerate(node.input[:len(p.operands)])]
    yield from _assign(view, list(p.operands), leaves, state, ordered=True)


def _assign(view, patterns: list, leaves: list, state, ordered: bool = False) -> Iterator[_State]:
    """Every assignment of ``leaves`` to ``patterns``: in order (``ordered``), else in any order
    (a product's or sum's operands)."""
    if not patterns:
        yield state
        return
    for k, leaf in enumerate(leaves[:1] if ordered else leaves):
        for s in _match_leaf(view, patterns[0], leaf, state):
            yield from _assign(view, patterns[1:], leaves[:k] + leaves[k + 1:], s, ordered)


def _match_leaf(view: GraphView, p: Pattern, leaf: tuple, state: _State) -> Iterator[_State]:
    name, reader, slot, inverted = leaf
    if not name:
        return
    if isinstance(p, AnyOf):
        for alt in p.alternatives:
            yield from _match_leaf(view, alt, leaf, state)
        return
    if isinstance(p, Const):
        c = _float_scalar(view, name)
        if c is None or (inverted and c == 0.0):
            return
        if p.value is None:
            yield state.evolve(bind={p.bind: 1.0 / c if inverted else c}, constant=name)
            return
        target = 1.0 / p.value if inverted else p.value
        if abs(c - target) <= SCALAR_RTOL * abs(target):
            yield state.evolve(constant=name)
        return
    if inverted:
        return
    if isinstance(p, Var):
        bound = state.bindings.get(p.name)
        if bound is None:
            yield state.evolve(bind={p.name: name})
        elif bound == name:
            yield state
        return
    seen = state.memo.get(id(p))                # one pattern node read twice (a DAG): the same value
    if seen is not None:
        if seen == name:
            yield state.evolve(edges=[(id(reader), slot)])
        return
    yield from _match_node(view, p, view.producer_of(name),
                           state.evolve(edges=[(id(reader), slot)], memo={id(p): name}))


def apply_rules(view: GraphView, rules, from_the_end: bool = False) -> int:
    """Try every rule of ``rules`` with each node (in graph order, or from the last node back) as
    its root; rewrite the first match; returns how many rewrites were made."""
    by_type: dict = {}
    for rule in rules:   # a product's root may be a Div by a constant too
        for t in ("Mul", "Div") if rule.pattern.op_type == "Mul" else (rule.pattern.op_type,):
            by_type.setdefault(t, []).append(rule)
    count = 0
    for node in (list(reversed(view.node)) if from_the_end else list(view.node)):
        for rule in by_type.get(node.op_type, ()):
            if not view.holds(node):
                break
            found = rule.match(view, node)
            if found is not None:
                rule.rewrite(view, found)
                count += 1
    return count


def rules_pass(rules, from_the_end: bool = False, applies: Optional[Callable] = None) -> Callable:
    """A graph pass's ``run(view) -> count``: :func:`apply_rules` of ``rules`` (``from_the_end``
    as there) where ``applies(view)`` holds (e.g. the operator set a rewrite needs), else 0."""
    def run(view: GraphView) -> int:
        return apply_rules(view, rules, from_the_end) if applies is None or applies(view) else 0
    return run


def replace_match(view: GraphView, match: Match, op_type: str, inputs: list, domain: str = "", attribute=(),
                  named_after: Optional[str] = None, version: int = 1, read=()) -> None:
    """Replace the match by one ``op_type`` node of ``domain`` reading ``inputs`` and writing the
    root's output, named after the node bound to ``named_after`` (else the root); ``domain`` is
    imported at ``version`` where the model does not import it.  Every constant the match read and
    each name of ``read`` is noted (:meth:`~.view.GraphView.read_constant`: an IR < 4 override of
    one runs the model as given)."""
    for c in list(match.constants) + list(read):
        view.read_constant(c)
    label = match[named_after].name if named_after else match.root.name
    view.replace_pattern(match.nodes, ir.Node(input=list(inputs), output=[match.output], op_type=op_type, domain=domain,
                                              name=(label or match.output) + "/" + op_type, attribute=list(attribute)))
    if not is_default_domain(domain):
        view.require_opset(domain, version)


def fused_op(op_type: str, since_onnx: int, inputs=("x",), attributes: Callable = lambda match: [],
             named_after: Optional[str] = None) -> Callable:
    """A rewrite replacing the match by one ``op_type`` node reading the bound ``inputs``
    (:func:`replace_match`): ai.onnx's where the model imports ai.onnx ``since_onnx`` or later,
    else ai.onnxkit's (version 1)."""
    def rewrite(view: GraphView, match: Match) -> None:
        domain = "" if view.version("") >= since_onnx else FUSED_DOMAIN
        replace_match(view, match, op_type, [match[i] for i in inputs], domain, attributes(match), named_after)
    return rewrite


__all__ = ["Rule", "Match", "Var", "Const", "Scalar", "AnyOf", "Op", "op", "apply_rules", "fused_op", "replace_match",
           "rules_pass", "AC_OPS"]
