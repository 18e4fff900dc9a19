"""The kernel contract: what a backend plugin provides for one operator definition.

A *kernel* is a factory.  The runtime calls it once per node when a session is planned,
with a :class:`NodeContext`; it parses the attributes it needs and returns the function
that computes the node::

    KERNELS = KernelTable()

    @KERNELS.register("LeakyRelu", 1, 6, 16)          # the since_versions it implements
    def leaky_relu(ctx):
        alpha = ctx.attr("alpha")                     # default of the schema applied
        return lambda x: np.where(x < 0, x * alpha, x)

The returned function takes one positional argument per node input (``None`` for an
unsupplied optional input, Clause 7.3.3) and returns the outputs: a ``tuple`` in positional
order (it may be shorter than the node's outputs when trailing optional outputs are not
computed), or, for a single output, the value itself (anything but a tuple).  Values are
backend arrays (numpy on ``cpu``), lists (sequences — never tuples), dicts (maps), ``None``
(an absent optional) or opaque objects.

What a kernel can do beyond computing its node is declared as :class:`KernelTraits` (one typed
record per function, read by the host with :func:`traits_of` only), through these helpers:

* :func:`binds_constants`: a kernel whose inputs include a shape, axes or other small integer
  tensor that is usually a constant: the run loop hands it those values once, and calls the
  function it returns.
* :func:`needs_scope`: a kernel for a node carrying subgraphs (If, Loop, Scan, ...); it is then
  called as ``fn(scope, *inputs)`` and evaluates a subgraph with
  ``ctx.subgraph('body').run(inputs, scope)``.
* :func:`offers_epilogue`: a kernel that can apply a following Relu / Add / Clip to the array it
  just made (the ``epilogue`` plan pass).
* ``KernelTable.register(..., host_only=True)``: a portable kernel that needs numpy values (the
  one way to declare it; :func:`host_only`, a second spelling, is refused by name).
* :func:`onnxkit.runtime.budget.declares_output_bytes`: the outputs' sizes, checked before the
  kernel runs.
* :func:`reports_bodies`: which body (compiled / numpy / Winograd / BLAS ...) the kernel chose
  for each input-shape key (read with :func:`bodies_of`; :mod:`onnxkit.runtime.bodies`).

*Portable* kernels (a domain package's, :func:`onnxkit.hookspecs.onnxkit_portable_kernels`)
compute with ``xp = ctx.xp``, the array namespace of the backend the node is planned on, so
one body serves numpy and torch alike; ``ctx.to_host(v)`` gives a value's contents as numpy
(for shapes, indices and other host arithmetic), ``ctx.from_host(a)`` a numpy array as a value
of the backend, ``ctx.dtype(np_dtype)`` the namespace's dtype.

Kernels never write into their inputs: an input may be a view of another value, of a
constant, or of the mapped model file (outputs may be views of inputs).  Kernels must not
keep state between calls other than what they parsed from the node
(Clause 8.1: a model is a stateless function), except the random operators, whose state
comes from the ``seed`` attribute or the session's seed.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from onnxkit import records
from onnxkit import record_methods
import numpy as np

from ..errors import OnnxkitError
from ..kernel_traits import NO_TRAITS, KernelTraits, declare_traits, traits_of
from ..log import get_logger
from ..registry import normalize_domain
from .visible import declared_type

__all__ = ["KernelTable", "KernelTraits", "NO_TRAITS", "NodeContext", "Unsupported", "binds_constants", "bodies_of",
           "declare_traits", "host_only", "needs_scope", "offers_epilogue", "reports_bodies", "traits_of"]


#: What a kernel raises on inputs it refuses (and a size guard's estimator on inputs it cannot
#: read): onnxkit's typed errors, and numpy's and Python's on bad shapes, element types, indices,
#: arithmetic and sizes.  Code that calls a kernel ahead of the run (constant folding at planning
#: and specialization, binding constants, computed constants) takes these as "not now: the run
#: fails by name"; anything else (AttributeError, KeyError, NameError, ...) is a bug of the code
#: called and is not taken for a refusal: it is logged at WARNING naming the node, or propagates.
REFUSALS = (OnnxkitError, ValueError, TypeError, IndexError, ArithmeticError, MemoryError)


class Unsupported(OnnxkitError):
    """Raised by a kernel factory that cannot serve its node on this installation (a library it
    needs is missing, ...): the planner reports the operator unsupported, with this message as
    the reason, together with every other unsupported operator (Clause 4.4)."""


class KernelTable(dict):
    """``{(domain, op_type, since_version): factory}`` with a registering decorator."""

    def register(self, op_type: str, *since_versions: int, domain: str = "", host_only: bool = False):
        """Register ``factory`` for each ``since_version`` of ``domain::op_type``: the one way to
        register a kernel (as a decorator, or called on a factory made elsewhere).

        ``host_only``: a portable kernel that needs numpy itself (values are numpy arrays):
        only backends with ``host_arrays`` run it; others run the node on their fallback."""
        if not since_versions:
            raise ValueError(f"register({op_type!r}) needs at least one since_version")

        def deco(factory):
            if host_only:
                declare_traits(factory, host_only=True)
            for v in since_versions:
                self[(normalize_domain(domain), op_type, int(v))] = factory
            return factory

        return deco

    def versions(self, op_type: str, domain: str = "") -> tuple:
        """The since_versions this table holds for ``domain::op_type``, ascending (an override
        registers those of the portable family it overrides)."""
        d = normalize_domain(domain)
        return tuple(sorted(v for (kd, op, v) in self if kd == d and op == op_type))


def binds_constants(fn: Callable, bind: Callable, *positions: int) -> Callable:
    """Let the run loop specialize the node function ``fn`` on inputs that are constants.

    ``positions``: the inputs (by position) ``fn`` can take as fixed.  Where each of them is a
    constant of the plan the node runs in (an initializer, a value folded at planning or by
    the shape specializer) or an absent optional input (None), the run loop calls
    ``bind(*values)`` once, when it lays that plan out (:mod:`onnxkit.runtime.loop`); the
    function it returns is called instead of ``fn``, with the same arguments (the constants
    still passed: the same objects ``bind`` saw), and must compute what ``fn`` computes,
    failing where ``fn`` fails, by name, at run time.  ``bind`` returns None to keep ``fn``;
    it should not raise: one that refuses its constants (:data:`REFUSALS`) keeps ``fn``, and
    any other exception is a bug, logged on ``onnxkit.run`` at WARNING (``fn`` is kept too).
    Plans where an input is not constant (an enclosing graph's value, a graph input) call
    ``fn``.  Returns ``fn``."""
    return declare_traits(fn, bind_constants=(bind, positions))


def needs_scope(fn: Callable) -> Callable:
    """Mark a node function as taking the enclosing scope first (for subgraph evaluation):
    the run loop calls it as ``fn(scope, *inputs)``.  Returns ``fn``."""
    return declare_traits(fn, needs_scope=True)


def host_only(factory: Callable) -> Callable:
    """Gone (one way to register a kernel): a portable kernel that needs numpy values is
    registered ``KernelTable.register(op_type, *since_versions, host_only=True)``.  Raises an
    :class:`~onnxkit.errors.OnnxkitError` saying so."""
    raise OnnxkitError(f"host_only({getattr(factory, '__qualname__', factory)!r}) is gone: register the kernel "
                       "with KernelTable.register(op_type, *since_versions, host_only=True), the one way to "
                       "declare a portable kernel that needs numpy values")


def offers_epilogue(fn: Callable, fuse: Callable, inputs: Optional[int] = None) -> Callable:
    """Declare that the node function ``fn`` can fold a following Relu / Add / Clip into itself.

    ``fuse(ops)`` returns the fused function or None (the protocol and when the pass applies:
    :mod:`onnxkit.runtime.optimizer.epilogue`); ``inputs``: how many inputs the fused function
    takes before Add's other operand (``fn``'s optional trailing inputs counted; None: the
    node's).  Returns ``fn``."""
    return declare_traits(fn, fuse_epilogue=fuse, epilogue_inputs=inputs)


def reports_bodies(fn: Callable, bodies: Callable) -> Callable:
    """Declare how the node function ``fn`` reports which body it runs.

    ``bodies()`` returns ``{key: body}`` for the input-shape keys ``fn`` has decided on so far:
    ``key`` a short text naming the inputs' shapes and dtypes, ``body`` a short name of the
    computation chosen for them (``"winograd"``, ``"planes"`` (compiled), ``"columns"`` (numpy
    im2col + BLAS), ``"portable"``, ...).  It must be cheap, must not raise, and must not change
    what ``fn`` computes.  Returns ``fn``."""
    return declare_traits(fn, bodies=bodies)


def bodies_of(fn: Callable) -> dict:
    """``{key: body}`` as ``fn`` reports it (:func:`reports_bodies`); ``{}`` where it reports none
    or its report fails (a report never breaks the caller: its failure is logged on
    ``onnxkit.run`` at WARNING, with the traceback)."""
    report = traits_of(fn).bodies
    if report is None:
        return {}
    try:
        return {str(k): str(v) for k, v in dict(report()).items()}
    except Exception as exc:  # noqa: BLE001
        # Broad: a report is a kernel's (plugin code's) diagnostics, read by describe() and
        # repr(plan), which must not break; reports_bodies says it must not raise, so one that
        # does is a bug of the kernel: logged with the function and the traceback, read as none.
        get_logger("run").warning("the body report of %s raised %s: %s; it reads as none",
                                  getattr(fn, "__qualname__", fn), type(exc).__name__, exc, exc_info=exc)
        return {}


@records.define(eq=False)
class NodeContext:
    """Everything a kernel factory may know about its node, fixed when the session is planned.

    ``attributes``: ``{name: value}`` with the schema's defaults filled in for attributes the
    node does not carry (IR values: ``float``/``int``/``bytes``/lists/``Tensor``/``Graph``/...).
    ``input_types`` / ``output_types``: one entry per input / output of the node, its *declared*
    type (:class:`onnxkit.ir.Type`) or None: a graph input's, output's or ``value_info``'s
    declaration (of the graph holding the node, or of the enclosing graph that defines an
    input the node reads), an initializer's tensor type (element type and extents); an
    unnamed optional input or output has None.  Made from the planner's graphs on first read
    (no inference runs for them); :meth:`input_type` / :meth:`output_type` add what inference
    gives.
    ``opset_version``: the version of the node's domain the model imports; ``since_version``:
    the definition it is bound to (Clause 5.3.2).

    **Constants.**  :meth:`is_constant` / :meth:`constant` say which inputs are constants of
    the plan the node is planned in, and :meth:`default` which are defaults (with the plan's
    own value), decided when the node is planned: a factory reads them and may keep what it
    derives from a constant input, or from the default object while that is what comes back
    (a convolution's weights in its product layout), across runs.  A kernel never infers it
    from its arrays (read-only flags, views): a caller may write what it feeds between runs.

    Capabilities beyond the node itself: :attr:`xp` / :meth:`to_host` / :meth:`from_host` /
    :meth:`dtype` (the backend's arrays), :meth:`subgraph` (a compiled GRAPH attribute),
    :meth:`rng` (the random stream), and for operators that compile part of their graph
    (Gradient): :attr:`enclosing_graph`, :attr:`opset_imports`, :meth:`definition`,
    :meth:`compile`.  The planner and the registry stay private.
    """

    node: Any
    domain: str
    op_type: str
    since_version: int
    opset_version: int
    schema: Any
    attributes: dict
    backend: Any
    _input_types: Optional[list] = records.field(default=None, alias="input_types")
    _output_types: Optional[list] = records.field(default=None, alias="output_types")
    seed: Optional[int] = None
    limits: Any = None
    #: The graph holding the node, the planner compiling it and the operator set imports in
    #: force there (private: kernels use the capabilities below).
    _graph: Any = records.field(default=None, alias="_graph")
    _planner: Any = records.field(default=None, alias="_planner")
    _opsets: Optional[dict] = records.field(default=None, alias="_opsets")
    _xp: Any = records.field(default=None, alias="_xp")
    _subgraphs: dict = records.field(factory=dict, alias="_subgraphs")
    _rng: Any = records.field(default=None, alias="_rng")
    #: ``{input position: value}`` of the inputs that are plan constants (the value None where
    #: it is held on another backend than the node's: a node planned on the fallback)
    _constants: dict = records.field(factory=dict, alias="_constants")
    #: ``{input position: value}`` of the inputs that are defaults (None: held on another backend)
    _defaults: dict = records.field(factory=dict, alias="_defaults")
    #: the names visible where the node is planned (a ``plan.Visible`` chain): its declarations
    _visible: Any = records.field(default=None, alias="_visible")
    #: ``{id: value}`` of the values a variant of the plan holds (the planner's, filled as it folds)
    _held: Any = records.field(default=None, alias="_held")
    __repr__ = record_methods.REPR

    @property
    def input_types(self) -> list:
        """The declared type of each input (see the class docstring), made on first read."""
        types = self._input_types
        if types is None:
            types = self._input_types = self._declared(self.node.input, False)
        return types

    @input_types.setter
    def input_types(self, types: list) -> None:
        self._input_types = types

    @property
    def output_types(self) -> list:
        """The declared type of each output (see the class docstring), made on first read."""
        types = self._output_types
        if types is None:
            types = self._output_types = self._declared(self.node.output, True)
        return types

    @output_types.setter
    def output_types(self, types: list) -> None:
        self._output_types = types

    def _declared(self, names, outputs: bool) -> list:
        visible = self._visible
        if visible is None:
            return [None] * len(names)
        if outputs:  # a node's outputs are names of its own graph
            declared = visible.declared()
            return [declared.get(n) if n else None for n in names]
        return [declared_type(visible, n) if n else None for n in names]

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def num_inputs(self) -> int:
        return len(self.node.input)

    @property
    def num_outputs(self) -> int:
        return len(self.node.output)

    def output_requested(self, i: int) -> bool:
        """True if the node names output ``i`` (an unnamed optional output may be skipped, 7.3.3)."""
        return i < len(self.node.output) and bool(self.node.output[i])

    def holds(self, value) -> bool:
        """Whether ``value`` is an object a variant of the plan holds as a constant: a value the
        planner computed for the plan that folds the defaults (the variant that serves the runs
        that feed none, :class:`~onnxkit.runtime.graph_plan.GraphPlan`'s ``folded``), found by
        identity.  Such an object is the plan's, never written and never a value a caller
        feeds, so a kernel may keep what it derives from an input while that input *is* it —
        an input :meth:`is_constant` could not declare when the node was planned (it is a node
        output of the plan as given)."""
        held = self._held
        return held is not None and held.get(id(value)) is value

    def is_constant(self, i: int) -> bool:
        """Whether input ``i`` is a *constant of the plan*: the same value at every run of the
        plan the node is planned in, decided at planning.  True for an initializer that is not
        a graph input (of the node's graph or of an enclosing graph, read from a subgraph) and
        for a value the planner folded (computed once at planning from such constants).  False
        for an unnamed (absent) input, a graph input, an initializer that is also a graph input
        (a default, IR >= 4: a caller may feed it), a node output computed at run time and an
        enclosing graph's value that is not one of its constants.  Values the run-time shape
        specializer folds later are not declared (their kernels were made for the plan
        before).  A kernel may keep what it derives from a constant input across runs (checking
        that the same object comes back: a plan variant may hold an equal copy); it derives
        again, each call, from an input that is not one."""
        return i in self._constants

    def constant(self, i: int) -> Any:
        """The value of constant input ``i`` as the planner holds it (:meth:`is_constant`), or
        None: not a constant, or one held on another backend than this node's (a node planned
        on the fallback gets its constants converted when it runs)."""
        return self._constants.get(i)

    def default(self, i: int) -> Any:
        """The value the plan gives input ``i`` at a run that does not feed it, where the input
        is a *default* (an initializer that is also a graph input, of the node's graph or an
        enclosing one), else None (also for one held on another backend than this node's).  Not
        a constant (:meth:`is_constant` is False): a run may feed another value.  The object
        itself is the plan's and is never written, and no value a caller feeds is that object:
        a kernel may keep what it derives from an input while it *is* this object."""
        return self._defaults.get(i)

    def input_type(self, i: int):
        """The type of input ``i``: declared (:attr:`input_types`), else what inference gives
        (run once per planning, on the first call that needs it), else None."""
        return self._type_of(self.input_types, self.node.input, i)

    def output_type(self, i: int):
        """The type of output ``i``: declared (:attr:`output_types`), else what inference gives
        (run once per planning, on the first call that needs it), else None."""
        return self._type_of(self.output_types, self.node.output, i)

    def _type_of(self, declared: list, names, i: int):
        t = declared[i] if 0 <= i < len(declared) else None
        if t is not None or not (0 <= i < len(names)) or not names[i] or self._planner is None:
            return t
        return self._planner.inferred_type(names[i], self._graph)

    def has_attr(self, name: str) -> bool:
        """True if the node itself carries attribute ``name`` (not only the schema default)."""
        return any(a.name == name for a in self.node.attribute)

    def attr(self, name: str, default: Any = None) -> Any:
        """The attribute's value: the node's, else the schema default, else ``default``."""
        v = self.attributes.get(name)
        return default if v is None else v

    def attr_str(self, name: str, default: Optional[str] = None) -> Optional[str]:
        """A STRING attribute decoded as UTF-8."""
        v = self.attr(name)
        if v is None:
            return default
        return v.decode("utf-8", "surrogateescape") if isinstance(v, (bytes, bytearray)) else str(v)

    def attr_tensor(self, name: str) -> Optional[np.ndarray]:
        """A TENSOR attribute as a numpy array."""
        v = self.attr(name)
        return None if v is None else v.numpy()

    def subgraph(self, name: str):
        """The compiled subgraph of GRAPH attribute ``name`` (a :class:`~onnxkit.runtime.plan.GraphPlan`)."""
        try:
            return self._subgraphs[name]
        except KeyError:
            raise KeyError(f"node {self.node.name!r} ({self.op_type}) has no subgraph attribute {name!r}") from None

    # -- the backend's arrays --------------------------------------------------------------
    @property
    def xp(self):
        """The array namespace of the backend the node runs on (array API standard)."""
        if self._xp is None:
            xp = self.backend.xp() if self.backend is not None and hasattr(self.backend, "xp") else None
            if xp is None:
                self.fail(f"backend {getattr(self.backend, 'name', '?')!r} declares no array namespace")
            self._xp = xp
        return self._xp

    def to_host(self, value) -> np.ndarray:
        """A value of the backend as a numpy array (its contents on the host)."""
        conv = getattr(self.backend, "to_numpy", None)
        return np.asarray(value if conv is None else conv(value))

    def ints(self, value) -> list:
        """An integer tensor's elements as Python ints, in row-major order (a shape, axes...)."""
        return [int(v) for v in self.to_host(value).reshape(-1).tolist()]

    def from_host(self, array):
        """A numpy array as a value of the backend (the array itself on a host backend)."""
        conv = getattr(self.backend, "asarray", None)
        return array if conv is None else conv(array)

    def dtype(self, np_dtype):
        """The backend namespace's dtype for a numpy dtype; fails naming the node if it has none."""
        np_dtype = np.dtype(np_dtype)
        dt = self.backend.dtype_of(np_dtype) if hasattr(self.backend, "dtype_of") else np_dtype
        if dt is None:
            self.fail(f"element type {np_dtype} has no dtype on backend {getattr(self.backend, 'name', '?')!r}")
        return dt

    # -- compiling part of the graph (Gradient) ----------------------------------------------
    @property
    def enclosing_graph(self):
        """The graph holding this node (None where unknown)."""
        return self._graph

    @property
    def opset_imports(self) -> dict:
        """``{domain: version}`` of the operator set imports in force at this node (a copy)."""
        return dict(self._opsets or {})

    def definition(self, domain: str, op_type: str):
        """The definition (OpSchema) a node ``domain::op_type`` binds to here, or None."""
        version = (self._opsets or {}).get(normalize_domain(domain))
        if version is None or self._planner is None:
            return None
        return self._planner.registry.bind(normalize_domain(domain), op_type, version)

    def compile(self, graph, name: str = ""):
        """Compile ``graph`` (an :class:`onnxkit.ir.Graph`) with this node's operator set imports
        on this node's backend; returns a plan whose ``run(inputs)`` evaluates it."""
        if self._planner is None or self._opsets is None:
            self.fail("this node cannot compile a graph (no planner)")
        return self._planner.compile_graph(graph, dict(self._opsets), frozenset(), name=name or f"{self.op_type}.graph")

    def rng(self) -> np.random.Generator:
        """A generator seeded from the ``seed`` attribute if present, else the session's seed."""
        if self._rng is None:
            seed = self.attr("seed")
            seed = self.seed if seed is None else int(np.float32(seed).view(np.uint32))
            self._rng = np.random.default_rng(seed)
        return self._rng

    def fail(self, message: str):
        """Raise an evaluation error naming this node."""
        from ..errors import EvaluationError

        raise EvaluationError(f"node {self.node.name!r} ({self.op_type}): {message}", node=self.node.name,
                              op_type=self.op_type)
