"""Kernel capabilities: what a kernel declares beyond computing its node, as one typed record.

A kernel factory and the node function it returns may each carry a :class:`KernelTraits`,
declared through the helpers of the plugin surface (:func:`onnxkit.plugin.needs_scope`,
:func:`onnxkit.plugin.binds_constants`, :func:`onnxkit.plugin.offers_epilogue`,
:func:`onnxkit.plugin.declares_output_bytes`, ``KernelTable.register(..., host_only=True)``,
:func:`onnxkit.plugin.size_guard`, :func:`onnxkit.plugin.nondeterministic`,
:func:`onnxkit.plugin.fails_on_values`, :func:`onnxkit.plugin.calls_blas`) or :func:`declare_traits`.  The host reads them with
:func:`traits_of` (and :func:`operator_traits`) and nothing else: the registry (``host_only``),
the planner (``needs_scope``), the run loop (``bind_constants``), the size guard
(``output_bytes``, ``size_guard``), constant folding and the shape specializer
(``nondeterministic``, ``fails_on_values``), the session's BLAS thread limit (``calls_blas``),
the fallback wrapper and the ``epilogue`` plan pass
(``fuse_epilogue`` / ``epilogue_inputs``).

*Operator traits* (:data:`OPERATOR_TRAITS`: ``size_guard``, ``nondeterministic``,
``fails_on_values``) describe the operator, not one implementation of it: the domain package
that defines the operator declares them on its portable kernel factory (``onnxkit_portable_kernels``),
and the host reads them from there (:func:`operator_traits`) whichever backend's kernel runs the
node, an override included.  This is how operator knowledge stays with the operator's plugin:
the host holds no table of operator names (tests/plugins/test_host_tables.py).

A function that carries one of the former untyped capability attributes (``fn.needs_scope =
True``, ...) without traits is refused with an :class:`~onnxkit.errors.OnnxkitError` naming the
attribute and the helper that replaces it, rather than silently ignored.

This module imports nothing of onnxkit but its errors, so the registry and the runtime can both
read traits without importing each other.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from onnxkit import records
from onnxkit import record_methods

from .errors import OnnxkitError

#: The attribute a function's traits are stored under (one attribute, one type).
TRAITS_ATTRIBUTE = "__onnxkit_traits__"

#: The capability attributes kernels set before traits existed; a function carrying one of them
#: without traits is refused by :func:`traits_of` (size asserted by tests/plugins/test_plugin_surface.py).
LEGACY_ATTRIBUTES = ("bind_constants", "needs_scope", "host_only", "fuse_epilogue", "epilogue_inputs",
                     "output_bytes")


def _positions(value):
    if value is None:
        return None
    bind, positions = value
    if not callable(bind):
        raise TypeError(f"bind_constants: the binder must be callable, got {bind!r}")
    positions = tuple(int(p) for p in positions)
    if not positions or any(p < 0 for p in positions):
        raise TypeError(f"bind_constants: positions must be one or more input positions >= 0, got {positions}")
    return bind, positions


def _optional_callable(name):
    def check(_instance, _attribute, value):
        if value is not None and not callable(value):
            raise TypeError(f"{name} must be callable or None, got {value!r}")
    return check


def _optional_int(v):
    return None if v is None else int(v)


#: The size-guard kinds an operator may declare (``size_guard``), each implemented once by
#: :mod:`onnxkit.runtime.budget` (tests/plugins/test_host_tables.py asserts the two agree):
#:
#: * ``"value"``: the output extents come from input values or attributes; predicted before the
#:   kernel by the operator's inference function on the concrete inputs;
#: * bounds, which pass the common case without inference (else inference predicts):
#:   ``"broadcast"`` (equal shapes: the inputs' size; else the product of the sizes),
#:   ``"concat"`` (the sum of the sizes), ``"matmul"`` / ``"gemm"`` (|a|·|b|/K for a contraction
#:   over K; Gemm reads ``transA``), ``"gather"`` (indices x the slice of ``axis``),
#:   ``"product"`` (the product of the input sizes);
#: * estimators, for sizes that depend on data no inference function sees: ``"nonzero"`` (the
#:   count of nonzero elements), ``"sequence_split"`` (a split's count of pieces, ``axis``),
#:   ``"sequence_insert"`` / ``"sequence_construct"`` (the sequence's length),
#:   ``"sequence_concat"`` (the bytes of the sequence's tensors), ``"string_concat"`` /
#:   ``"string_split"`` (the strings' lengths; ``delimiter``), ``"unique"`` (at most the input,
#:   one int64 per element for each further output).
SIZE_GUARDS = ("value", "broadcast", "concat", "matmul", "gemm", "gather", "product", "nonzero", "sequence_split",
               "sequence_insert", "sequence_construct", "sequence_concat", "string_concat", "string_split", "unique")


def _beyond(value) -> tuple:
    rows = []
    for row in value or ():
        attribute, values, defined_from = row
        if not isinstance(attribute, str) or not attribute:
            raise TypeError(f"accepts_beyond: the attribute must be a non-empty name, got {attribute!r}")
        rows.append((attribute, tuple(sorted(values)), int(defined_from)))
    return tuple(rows)


def _size_guard(value):
    if value is not None and value not in SIZE_GUARDS:
        raise TypeError(f"size_guard must be one of {SIZE_GUARDS} or None, got {value!r}")
    return value


@records.frozen
class KernelTraits:
    """The capabilities of one kernel factory or node function (all off by default).

    Of the factory:

    * ``host_only``: a portable kernel that needs numpy itself (its values are numpy arrays):
      only backends with ``host_arrays`` get it; others run the node on their fallback.
    * ``calls_blas``: its node functions call the host's BLAS (matrix products through numpy):
      a session whose model has a node of an operator some kernel of which declares it limits
      BLAS's threads to the session's ``intra_op_num_threads`` during its runs; a session whose
      model has none skips that (:func:`onnxkit.runtime.threads.uses_blas`).

    Of the factory, describing the operator (:data:`OPERATOR_TRAITS`; read from the definition's
    portable kernel by :func:`operator_traits`, whichever kernel runs the node):

    * ``size_guard``: the kind of run-time size check its nodes need before the kernel runs
      (one of :data:`SIZE_GUARDS`; :mod:`onnxkit.runtime.budget`), for an operator whose output
      can be larger than its inputs.  None (the default): of ai.onnx, no check (the output is
      bounded by inputs that were checked or fed); of another domain, the inference function's
      prediction, and a check after the kernel returned.
    * ``nondeterministic``: equal inputs may give different outputs (Clause 8.5: the random
      generators, Dropout): its nodes are never evaluated at planning (constant folding, the
      shape specializer, computed constants) and never dropped unread.
    * ``fails_on_values``: a node may fail on its input *values* alone (integer Div and Mod by
      zero), not only on their types and shapes: the shape specializer never drops one whose
      output nothing reads.
    * ``accepts_beyond``: ``(attribute, values, defined_from)`` rows: the kernels compute
      ``attribute`` = each of ``values`` at definitions older than ``defined_from`` as that later
      definition defines it (values onnxruntime accepts there: ScatterElements' ``reduction``
      ``'max'`` at 16, defined from 18); the checker reports each such node
      (``attribute-value-beyond-definition``, a warning ``strict=True`` refuses).

    Of the node function (what the factory returns):

    * ``needs_scope``: called as ``fn(scope, *inputs)``; evaluates subgraphs in ``scope``.
    * ``bind_constants``: ``(bind, positions)``: where the inputs at ``positions`` are constants
      of the plan (or absent), the run loop calls ``bind(*values)`` once and runs the function it
      returns instead (None: keep ``fn``); see :func:`onnxkit.runtime.kernel.binds_constants`.
    * ``fuse_epilogue``: ``fuse_epilogue(ops)`` returns a function computing the node then its
      Relu / Add / Clip consumers, or None (:mod:`onnxkit.runtime.optimizer.epilogue`).
    * ``epilogue_inputs``: how many inputs the fused function takes before Add's operand (the
      node's own inputs padded with absent ones; None: as many as the node has).
    * ``output_bytes``: ``predict(*inputs)``, the outputs' sizes before the function runs
      (:func:`onnxkit.runtime.budget.declares_output_bytes`).
    * ``bodies``: ``bodies()`` returns ``{input-shape key: body}``, the body (``"winograd"``,
      ``"planes"``, ``"columns"``, ``"portable"``, ...) the function decided to run for each key
      it has seen so far (:func:`onnxkit.runtime.kernel.reports_bodies`; reported by
      :mod:`onnxkit.runtime.bodies`).
    """

    host_only: bool = records.field(default=False, converter=bool)
    needs_scope: bool = records.field(default=False, converter=bool)
    bind_constants: Optional[tuple] = records.field(default=None, converter=_positions)
    fuse_epilogue: Optional[Callable] = records.field(default=None, validator=_optional_callable("fuse_epilogue"))
    epilogue_inputs: Optional[int] = records.field(default=None, converter=_optional_int)
    output_bytes: Optional[Callable] = records.field(default=None, validator=_optional_callable("output_bytes"))
    bodies: Optional[Callable] = records.field(default=None, validator=_optional_callable("bodies"))
    size_guard: Optional[str] = records.field(default=None, converter=_size_guard)
    nondeterministic: bool = records.field(default=False, converter=bool)
    fails_on_values: bool = records.field(default=False, converter=bool)
    calls_blas: bool = records.field(default=False, converter=bool)
    accepts_beyond: tuple = records.field(default=(), converter=_beyond)
    __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH


#: The traits of a function that declares none.
NO_TRAITS = KernelTraits()

#: The traits that describe the operator rather than one kernel of it (see :func:`operator_traits`).
OPERATOR_TRAITS = ("size_guard", "nondeterministic", "fails_on_values", "accepts_beyond")

#: The traits the host reads off a factory without calling it (a lazily loaded kernel's index
#: carries them: :mod:`onnxkit.plugin.lazy`).
FACTORY_TRAITS = ("host_only", "calls_blas") + OPERATOR_TRAITS

_FIELDS = frozenset(f.name for f in records.fields(KernelTraits))


def traits_of(fn: Any) -> KernelTraits:
    """The traits ``fn`` (a factory or node function) declares; :data:`NO_TRAITS` where none.

    Raises :class:`~onnxkit.errors.OnnxkitError` for a function carrying an untyped capability
    attribute (:data:`LEGACY_ATTRIBUTES`) and no traits: declared that way it would be ignored."""
    traits = getattr(fn, TRAITS_ATTRIBUTE, None)
    if isinstance(traits, KernelTraits):
        return traits
    found = getattr(fn, "__dict__", None)
    if found:
        legacy = [a for a in LEGACY_ATTRIBUTES if a in found]
        if legacy:
            raise OnnxkitError(f"kernel {getattr(fn, '__qualname__', fn)!r} (module {getattr(fn, '__module__', '?')}) "
                               f"declares {', '.join(legacy)} as a function attribute; declare kernel capabilities "
                               "with onnxkit.plugin.declare_traits (or needs_scope, binds_constants, "
                               "offers_epilogue, declares_output_bytes, KernelTable.register(host_only=True))")
    return NO_TRAITS


def declare_traits(fn: Callable, **traits) -> Callable:
    """Add ``traits`` (fields of :class:`KernelTraits`) to what ``fn`` declares; returns ``fn``.

    Raises ``TypeError`` for an unknown trait, a value of the wrong kind, or an object that
    cannot carry attributes (wrap it in a function)."""
    unknown = sorted(set(traits) - _FIELDS)
    if unknown:
        raise TypeError(f"unknown kernel trait(s) {unknown}; known: {sorted(_FIELDS)}")
    current = getattr(fn, TRAITS_ATTRIBUTE, None)
    updated = records.evolve(current if isinstance(current, KernelTraits) else NO_TRAITS, **traits)
    try:
        setattr(fn, TRAITS_ATTRIBUTE, updated)
    except (AttributeError, TypeError):
        raise TypeError(f"{fn!r} cannot carry kernel traits; wrap it in a Python function") from None
    return fn


def operator_traits(registry, key: tuple, factory: Any = None) -> KernelTraits:
    """The operator traits (:data:`OPERATOR_TRAITS`) of the definition ``key`` (``(domain,
    op_type, since_version)``, or its schema): those its portable kernel's factory declares
    (``registry.portable``: the domain package's own declaration), else, where the definition
    has no portable kernel, those of ``factory`` (the kernel a backend runs it with).  Traits of
    one kernel (``host_only``, node-function traits) are not carried: only the operator's."""
    if not isinstance(key, tuple):
        key = key.key
    portable = getattr(registry, "portable", None) or {}
    found = portable.get(key, factory)
    if found is None:
        return NO_TRAITS
    traits = traits_of(found)
    if traits is NO_TRAITS:
        return NO_TRAITS
    declared = {name: getattr(traits, name) for name in OPERATOR_TRAITS}
    return KernelTraits(**declared) if any(declared.values()) else NO_TRAITS


def size_guard(kind: str) -> Callable:
    """Decorator: the operator of this kernel factory needs the run-time size check ``kind``
    (one of :data:`SIZE_GUARDS`) before its kernel runs; declared by the domain package on its
    portable kernel (:func:`operator_traits`).  Returns the decorator (it returns the factory)."""
    _size_guard(kind)

    def deco(factory: Callable) -> Callable:
        return declare_traits(factory, size_guard=kind)
    return deco


def nondeterministic(factory: Callable) -> Callable:
    """Mark the operator of this kernel factory as nondeterministic (Clause 8.5): never
    evaluated at planning nor dropped unread.  Returns ``factory``."""
    return declare_traits(factory, nondeterministic=True)


def fails_on_values(factory: Callable) -> Callable:
    """Mark the operator of this kernel factory as able to fail on its input values alone
    (integer division by zero): never dropped unread by the shape specializer.  Returns ``factory``."""
    return declare_traits(factory, fails_on_values=True)


def calls_blas(factory: Callable) -> Callable:
    """Mark a kernel factory whose node functions call the host's BLAS: a session running a model
    with a node of its operator limits BLAS's threads during its runs.  Returns ``factory``."""
    return declare_traits(factory, calls_blas=True)


def accepts_beyond(attribute: str, values, defined_from: int) -> Callable:
    """Decorator: the operator's kernels compute ``attribute`` = each of ``values`` (strings or
    numbers) at definitions older than ``defined_from`` too, as the definition of version
    ``defined_from`` does (what onnxruntime accepts); declared by the domain package on its
    portable kernel (:func:`operator_traits`), read by the checker, which reports each node using
    one (``attribute-value-beyond-definition``: a warning, refused under ``strict=True``).  The
    kernel itself must accept the values at those versions.  Returns the decorator."""
    row = _beyond([(attribute, values, defined_from)])

    def deco(factory: Callable) -> Callable:
        current = getattr(factory, TRAITS_ATTRIBUTE, None)
        before = current.accepts_beyond if isinstance(current, KernelTraits) else ()
        return declare_traits(factory, accepts_beyond=before + row)
    return deco
