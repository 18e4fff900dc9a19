"""Kernel capabilities: what a kernel declares beyond computing its node, as one typed record.

A kernel factory and the node function it returns may each carry a :class:`KernelTraits`,
declared through the helpers of the plugin surface (:func:`onnxkit.plugin.needs_scope`,
:func:`onnxkit.plugin.binds_constants`, :func:`onnxkit.plugin.offers_epilogue`,
:func:`onnxkit.plugin.declares_output_bytes`, ``KernelTable.register(..., host_only=True)``)
or :func:`declare_traits`.  The host reads them with :func:`traits_of` and nothing else: the
registry (``host_only``), the planner (``needs_scope``), the run loop (``bind_constants``), the
size guard (``output_bytes``), the fallback wrapper and the ``epilogue`` plan pass
(``fuse_epilogue`` / ``epilogue_inputs``).

A function that carries one of the former untyped capability attributes (``fn.needs_scope =
True``, ...) without traits is refused with an :class:`~onnxkit.errors.OnnxkitError` naming the
attribute and the helper that replaces it, rather than silently ignored.

This module imports nothing of onnxkit but its errors, so the registry and the runtime can both
read traits without importing each other.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from onnxkit import records

from .errors import OnnxkitError

#: The attribute a function's traits are stored under (one attribute, one type).
TRAITS_ATTRIBUTE = "__onnxkit_traits__"

#: The capability attributes kernels set before traits existed; a function carrying one of them
#: without traits is refused by :func:`traits_of` (size asserted by tests/test_plugin_surface.py).
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


@records.frozen
class KernelTraits:
    """The capabilities of one kernel factory or node function (all off by default).

    Of the factory:

    * ``host_only``: a portable kernel that needs numpy itself (its values are numpy arrays):
      only backends with ``host_arrays`` get it; others run the node on their fallback.

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


#: The traits of a function that declares none.
NO_TRAITS = KernelTraits()

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
