"""The memory budget of evaluation: every computed value's size is known before it is allocated.

One mechanism serves every backend.  At planning, :func:`guard_for` decides which nodes need a
run-time size check: those whose output can be larger than their inputs bound it — sizes read
from input *values* (ConstantOfShape, Expand, Tile, Range, Pad, Resize, OneHot, windows, ...),
broadcasting and contracting products (elementwise operators, MatMul, Gemm, Einsum, Gather,
Concat), generators whose size is an attribute (RandomNormal, Multinomial), and sequence and
string operators.  Which operators those are is not written here: the domain package that
defines an operator declares the check it needs on its portable kernel, a ``size_guard`` kind
(:func:`onnxkit.plugin.size_guard`, :data:`~onnxkit.kernel_traits.SIZE_GUARDS`), and this module
implements each kind once, for every operator that declares it (:func:`guarded_operators` lists
them).  Every other node of ai.onnx gets no guard and costs the run loop one ``is None`` test:
its output is bounded by inputs that were themselves checked or fed (Reshape, Slice, Scatter*,
TopK, Compress, elementwise operators on equal shapes, reductions, convolutions, ...).

A guard is called by :meth:`GraphPlan.run` with the node's input values, *before* the kernel.
It predicts the output sizes from the operator's own inference function (Clause 9.2), called
with the concrete input shapes and the values of small inputs (the same shape function that
types the model, so the check and the kernel cannot disagree), or — for the few operators
whose size depends on data an inference function never sees (NonZero's count, a sequence's
length, strings' lengths) — from a small estimator in this module.  For broadcasting,
contracting, gathering and concatenating operators a cheap bound on the output's elements
(equal shapes; |a|·|b|/K for a contraction over K; the sum for Concat; the product of the
input sizes otherwise) passes the common case without calling inference at all.

Every node of every domain is checked.  Nodes of other domains (ai.onnx.ml, a plugin's own
operators) are checked as follows, first match, and so are ai.onnx nodes whose kernel declares
its sizes (an ai.onnx node whose operator declares no ``size_guard`` is not checked otherwise):

* a kernel that declares its output sizes (:func:`declares_output_bytes`, the plugin surface's
  pre-allocation guard: ImageDecoder reads the image header; ZipMap, CastMap and DictVectorizer
  of ai.onnx.ml) is checked with that prediction before it runs;
* a node whose operator declares a ``size_guard`` kind is checked by that kind, as an ai.onnx
  node is;
* a node of another domain whose definition has an inference function (the
  ``onnxkit_inference_functions`` hook: every ai.onnx.ml operator) is checked before it runs
  with the sizes that function gives for the concrete inputs;
* every node of another domain is also checked *after* its kernel returns, unless it declared
  its sizes: each output against ``max_value_bytes`` (a sequence's length against
  ``max_sequence_length``), the bytes charged to ``max_run_bytes``.  That check still refuses
  and frees the value, but only once the kernel allocated it: a plugin whose outputs can be
  larger than its inputs should declare its sizes.

Refusals raise :class:`~onnxkit.errors.LimitExceeded` naming the limit, the node, its op_type
and the requested size; nothing has been allocated for the node by then.  The limits
(:class:`onnxkit.limits.Limits`): ``max_value_bytes`` (one computed value),
``max_run_bytes`` (the bytes the size-checked values of one run hold at once; released when
the run loop frees them), ``max_sequence_length``, ``max_string_bytes``.

Sizes are *logical*: ``numel x itemsize`` even for a broadcast view that numpy does not
materialise, so a view cannot smuggle a huge extent to the next node.
"""

from __future__ import annotations

import contextvars
from typing import Optional

import numpy as np

from .. import ir
from ..domains import is_default_domain
from ..dtypes import ELEMENT_TYPES, from_numpy_dtype
from ..errors import OnnxkitError
from ..inference.context import MAX_CONSTANT_ELEMENTS, InferenceContext
from ..kernel_traits import NO_TRAITS, declare_traits, operator_traits, traits_of
from ..limits import DEFAULT_LIMITS
from ..log import get_logger
from .size_bounds import BOUNDS, ESTIMATORS, REFUSED, UNREADABLE, nbytes, numel, odd, refuse, sequence_length

_CURRENT: contextvars.ContextVar = contextvars.ContextVar("onnxkit_run_budget", default=None)


class RunBudget:
    """The bytes one run (``InferenceSession.run``, nested graphs included) holds in checked values."""

    __slots__ = ("limits", "live", "small")

    def __init__(self, limits=None):
        self.limits = limits or DEFAULT_LIMITS
        self.live = 0
        #: output elements below which a bound passes a node uncharged (16 octets bound any element)
        self.small = self.limits.max_value_bytes >> 4

    def charge(self, nbytes: int, node, op: str, what: str = "output") -> int:
        """Admit ``nbytes`` more for ``what`` of ``node``, or raise :class:`LimitExceeded`.  Returns ``nbytes``."""
        limits = self.limits
        if nbytes > limits.max_value_bytes:
            refuse("max_value_bytes", nbytes, limits.max_value_bytes, node, op, what)
        if self.live + nbytes > limits.max_run_bytes:
            refuse("max_run_bytes", self.live + nbytes, limits.max_run_bytes, node, op,
                   f"{what} ({nbytes} bytes, {self.live} already held by this run)")
        self.live += nbytes
        return nbytes


def current_budget(limits=None) -> RunBudget:
    """The budget of the run in progress on this thread (a fresh one outside any run)."""
    budget = _CURRENT.get()
    return budget if budget is not None else RunBudget(limits)


def enter_run(limits):
    """``(budget, token)``: the run in progress, or a new one (token not None: call :func:`leave_run`)."""
    budget = _CURRENT.get()
    if budget is not None:
        return budget, None
    budget = RunBudget(limits)
    return budget, _CURRENT.set(budget)


def leave_run(token) -> None:
    if token is not None:
        _CURRENT.reset(token)


class Accumulation:
    """Values a kernel gathers over iterations before it combines them (a Loop's or Scan's scan
    outputs): every value added is charged to the run's budget, and the values of one output
    together — the value they will be stacked into — must stay within ``max_value_bytes``.
    Refuses during the iteration that would exceed a limit, not after the loop.  ``close()``
    releases the charge once the kernel has combined them."""

    __slots__ = ("budget", "node", "op", "totals", "charged")

    def __init__(self, node, op: str, n: int, limits=None):
        self.budget = current_budget(limits)
        self.node, self.op = node, op
        self.totals = [0] * n
        self.charged = 0

    def add(self, k: int, value) -> None:
        nb = nbytes(value)
        total = self.totals[k] + nb
        maximum = self.budget.limits.max_value_bytes
        if total > maximum:
            refuse("max_value_bytes", total, maximum, self.node, self.op, f"scan output {k} (accumulated over iterations)")
        self.totals[k] = total
        self.charged += self.budget.charge(nb, self.node, self.op, f"scan output {k}")

    def close(self) -> None:
        self.budget.live -= self.charged
        self.charged = 0


def _tag(v) -> int:
    dtype = v.dtype
    if not isinstance(dtype, np.dtype):  # torch: its dtype's name is numpy's (bfloat16: ml_dtypes')
        try:
            dtype = np.dtype(str(dtype).rsplit(".", 1)[-1])
        except TypeError:
            return 0
    try:
        return from_numpy_dtype(dtype).tag
    except OnnxkitError:
        return 0


def _type_of(v):
    if isinstance(v, list):
        return ir.SequenceType(_type_of(v[0]) if v else None)
    if v is None or not hasattr(v, "shape"):
        return None
    return ir.TensorType(_tag(v), [int(d) for d in v.shape])


def _small_value(v):
    """The value inference may read: a small numeric tensor, as numpy (what ``ctx.constant`` gives)."""
    if numel(v) > MAX_CONSTANT_ELEMENTS or not hasattr(v, "shape"):
        return None
    if type(v) is np.ndarray:
        return None if v.dtype == object else v
    detach = getattr(v, "detach", None)
    if detach is None:  # not a torch tensor (a numpy scalar, an opaque value): no value read
        return None
    try:
        return np.asarray(detach().cpu().numpy())
    except (TypeError, RuntimeError):  # an element type numpy lacks (bfloat16), a tensor torch will not show
        return None


def type_bytes(t) -> Optional[int]:
    """Bytes a value of tensor type ``t`` takes, or None when its extents are not all known."""
    if not isinstance(t, ir.TensorType) or t.shape is None:
        return None
    n = 1
    for d in t.shape.values:
        if type(d) is not int:
            return None
        n *= max(d, 0)
    row = ELEMENT_TYPES.get(int(t.elem_type or 0))
    return n * (row.dtype.itemsize if row is not None else 8)


# -- the guards ------------------------------------------------------------------------------------

class _ConcreteContext(InferenceContext):
    """An inference context over concrete values (no engine: fresh dimensions are just unknown);
    ``_read`` collects the positions whose values the inference function asked for."""

    def fresh_dim(self):
        return None

    def constant(self, i: int):
        self._read.add(i)
        return super().constant(i)

    def symbolic(self, i: int):
        self._read.add(i)
        return super().symbolic(i)

    def warn(self, code, message):
        pass

    def subgraph_types(self, *args, **kwargs):
        return None


class Guard:
    """The run-time size check of one node; ``guard(budget, args)`` -> bytes charged to ``budget``."""

    __slots__ = ("node", "op", "infer", "template", "kind", "n_out", "bound", "known", "after", "declared", "reads")

    def __init__(self, node, op: str, infer, template, kind: str, after: bool = False, declared=None):
        self.node, self.op, self.infer, self.template, self.kind = node, op, infer, template, kind
        self.n_out = len(node.output)
        self.bound = BOUNDS.get(kind)
        #: predicted bytes by what inference reads of the inputs (their types, small values)
        self.known: dict = {}
        #: the input positions whose values some inference of this node read (the others' values are no part of a key)
        self.reads: frozenset = frozenset()
        #: whether the run loop also checks the outputs once the kernel returned (:meth:`check_outputs`)
        self.after = after
        #: the kernel's own prediction (:func:`declares_output_bytes`), kind "declared"
        self.declared = declared

    def __call__(self, budget: RunBudget, args) -> int:
        bound = self.bound  # None for the kinds "declared", "after", "value" and the estimators
        kind = self.kind
        if bound is None:
            if kind == "declared":
                return self._declared(budget, args)
            if kind == "after":
                return 0
        else:
            try:  # a small bound passes, uncharged: the output is no bigger than its inputs allow
                small = bound(self, args) <= budget.small
            except UNREADABLE:  # inputs the bound cannot read: inference (or the kernel) will say
                small = False
            except AttributeError:
                if not odd(args):
                    raise  # a bug of the bound (its inputs are tensors): the run loop names the node
                small = False  # a sequence, a map, an opaque value where a tensor belongs
            if small:
                return 0
        if bound is None and kind != "value":
            try:
                return ESTIMATORS[kind](self, budget, args)
            except OnnxkitError:
                raise
            except UNREADABLE:  # inputs the estimator cannot read: the kernel reports them, by name
                return 0
        need = self.predict(args)
        return budget.charge(need, self.node, self.op, "outputs") if need else 0

    def _declared(self, budget: RunBudget, args) -> int:
        try:
            need = self.declared(*args)
        except OnnxkitError:
            raise
        except UNREADABLE:  # inputs the prediction cannot read: the kernel reports them, by name
            return 0
        except AttributeError:
            if not odd(args):
                raise  # a bug of the prediction (its inputs are tensors): the run loop names the node
            return 0  # a sequence, a map, an opaque value where a tensor belongs: the kernel says
        length = 0
        if isinstance(need, tuple):
            need, length = need
        if length:
            sequence_length(self, budget, int(length))
        return budget.charge(int(need), self.node, self.op, "outputs") if need else 0

    def check_outputs(self, budget: RunBudget, out, charged: int) -> int:
        """The check after the kernel returned ``out`` (the guard's ``after``): each output
        against ``max_value_bytes``, a sequence's length against ``max_sequence_length``
        (refused: the value is dropped, but it was allocated); the bytes beyond ``charged``
        (what the guard charged before the kernel) are charged to the run.  Returns the bytes
        charged in all."""
        limits = budget.limits
        total = 0
        for k, v in enumerate(out if type(out) is tuple else (out,)):
            if isinstance(v, list) and len(v) > limits.max_sequence_length:
                refuse("max_sequence_length", len(v), limits.max_sequence_length, self.node, self.op,
                       f"output {k}, a sequence (checked after its kernel ran)")
            nb = nbytes(v)
            if nb > limits.max_value_bytes:
                refuse("max_value_bytes", nb, limits.max_value_bytes, self.node, self.op,
                       f"output {k} (checked after its kernel ran)")
            total += nb
        if total <= charged:
            return charged
        return charged + budget.charge(total - charged, self.node, self.op, "outputs (checked after its kernel ran)")

    def predict(self, args) -> int:
        """Bytes of the outputs the inference function determines (unknown extents count 0).

        Inference reads only the inputs' types and the small values it asks for, so its answer
        is remembered per such key (up to :data:`KNOWN_MAX` per node): a run with the shapes and
        shape values of an earlier one costs a key, not an inference call.  A key holds the values
        of the inputs some inference of this node asked for (:attr:`reads`), not those of the
        others (a Pad's data: a new audio chunk every call is no new key): inference is a
        function of what it reads, so equal keys read equal values and give equal sizes; when an
        inference asks for the value of another input, the remembered answers (keyed without
        it) are dropped."""
        if self.infer is None:
            return 0
        reads = self.reads
        key = tuple(_input_key(a, k in reads) for k, a in enumerate(args))
        need = self.known.get(key)
        if need is None:
            read: set = set()
            need = self._infer(args, [_small_value(a) for a in args], read)
            if not read <= reads:
                reads = self.reads = reads | read
                self.known.clear()
                key = tuple(_input_key(a, k in reads) for k, a in enumerate(args))
            if len(self.known) >= KNOWN_MAX:
                self.known.clear()
            self.known[key] = need
        return need

    def _infer(self, args, values, read: set) -> int:
        ctx = _ConcreteContext.__new__(_ConcreteContext)
        ctx.__dict__.update(self.template)
        ctx._input_types = [_type_of(a) for a in args]
        ctx._input_values = values
        ctx._read = read
        ctx.output_types = [None] * self.n_out
        ctx.output_values = [None] * self.n_out
        try:
            ret = self.infer(ctx)
        except REFUSED:  # a contradiction, or inputs it cannot read: the kernel reports them, by name
            return 0
        except Exception as exc:  # noqa: BLE001
            # Broad: an inference function is plugin code (Clause 9.4: its fault makes the sizes
            # unknown, never the run fail), called here with concrete inputs.  A fault that is
            # not a typed refusal is a bug: logged with the node and the traceback, and the node
            # runs unchecked by it (once per input key: the 0 is remembered, :meth:`predict`).
            get_logger("run").warning("size guard: the inference of %s at node %r raised %s: %s; its output sizes are "
                                      "not checked before it runs", self.op, self.node.name, type(exc).__name__, exc,
                                      exc_info=exc)
            return 0
        types = ret if isinstance(ret, (list, tuple)) else ctx.output_types
        return sum(type_bytes(t) or 0 for t in types)


#: input keys whose predicted size one guard remembers (emptied when full)
KNOWN_MAX = 64


def _input_key(a, valued: bool = True):
    """What inference reads of one input, as a key: its element type, extents and, for a small
    numeric tensor whose value is ``valued`` (inference asked for it), its values
    (:func:`_small_value`'s choice)."""
    if type(a) is np.ndarray:
        small = valued and a.size <= MAX_CONSTANT_ELEMENTS and a.dtype != object
        return a.dtype, a.shape, a.tobytes() if small else None
    if a is None:
        return None
    if not valued:
        return _dtype_key(a), tuple(a.shape) if hasattr(a, "shape") else type(a), None
    v = _small_value(a)
    return (_dtype_key(a), tuple(a.shape) if hasattr(a, "shape") else type(a), None if v is None else v.tobytes())


def _dtype_key(v):
    """What a key holds of a value's element type (and a sequence's length, which its type shows)."""
    if isinstance(v, list):
        return ("seq", len(v), (_dtype_key(v[0]), tuple(getattr(v[0], "shape", ()))) if v else None)
    return str(getattr(v, "dtype", type(v).__name__))


def declares_output_bytes(fn, predict):
    """Declare the sizes of a node function's outputs: the pre-allocation guard of a plugin's kernel.

    ``predict(*inputs)`` (the node's inputs, as ``fn`` gets them) returns the bytes the outputs
    will take, or ``(bytes, length)`` where an output is a sequence of ``length`` elements; the
    run loop calls it before ``fn`` and refuses, by :class:`~onnxkit.errors.LimitExceeded`,
    what exceeds ``max_value_bytes`` / ``max_run_bytes`` / ``max_sequence_length``.  It should
    read only shapes, attributes and headers, not compute the result.  An
    :class:`~onnxkit.errors.OnnxkitError` it raises is the node's refusal; a TypeError,
    ValueError, IndexError or ArithmeticError (inputs it cannot read), or an AttributeError where
    an input is not a tensor, counts as 0 (``fn`` reports the input); anything else is a bug of
    it, and fails the run with an :class:`~onnxkit.errors.EvaluationError` naming the node.
    A node whose kernel declares its sizes is not checked again after it ran.  Returns ``fn``."""
    return declare_traits(fn, output_bytes=predict)


def guard_for(node, op: str, domain: str, schema, registry, version: int, fn=None, traits=None) -> Optional[Guard]:
    """The run-time size check a node needs, or None (decided once, at planning; see the module
    docstring).  ``fn``: the node function, whose :func:`declares_output_bytes` is used;
    ``traits``: the operator traits of the node's definition (default: read from ``registry``,
    :func:`~onnxkit.kernel_traits.operator_traits`), whose ``size_guard`` names the check."""
    declared = None if fn is None else traits_of(fn).output_bytes
    default = is_default_domain(domain)
    if traits is None:
        traits = NO_TRAITS if schema is None else operator_traits(registry, schema)
    kind = traits.size_guard
    if callable(declared):
        kind = "declared"
    elif kind is None:
        if default:
            return None
        kind = "value"
    infer = registry.inference.get(schema.key) if schema is not None and kind != "declared" else None
    if kind == "value" and infer is None:
        kind = "after"  # nothing predicts this node's outputs: checked once they exist
    template = InferenceContext(None, node, schema, domain, version, [], [], {}, None, "", False).__dict__
    return Guard(node, op, infer, template, kind, after=not default and kind != "declared",
                 declared=declared if kind == "declared" else None)


def guarded_operators(registry=None, domain: str = "") -> dict:
    """``{op_type: kind}`` of the operators of ``domain`` (default ai.onnx) whose definitions
    declare a ``size_guard`` in ``registry`` (default: the process's), the kinds of every
    definition of an operator joined by ``"|"`` should they differ (the hostile tests enumerate
    it: a guard declared without a test fails them)."""
    if registry is None:
        from ..registry import get_registry

        registry = get_registry()
    kinds: dict = {}
    for key in sorted(registry.portable):
        if key[0] == domain:
            kind = operator_traits(registry, key).size_guard
            if kind is not None:
                kinds.setdefault(key[1], set()).add(kind)
    return {t: "|".join(sorted(k)) for t, k in sorted(kinds.items())}
