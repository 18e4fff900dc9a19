"""What every check shares: the report, the model's IR version and imports, locations.

A :class:`Context` is made once per :func:`onnxkit.checker.check_model` call.  Checks
call :meth:`Context.emit` with a code of :mod:`onnxkit.checker.codes`; the severity and
clause come from the catalogue.

Locations read like a path, outermost first, joined by ``' / '``::

    graph 'main' / node 3 'conv1' (Conv) / attribute 'kernel_shape'
    graph 'main' / node 5 'loop' (Loop) / attribute 'body' / graph 'body' / node 0 (Add) / input 1 'x'
    function 'com.acme::Gelu' / node 2 (Mul)

The helpers here build each component so that every module writes them the same way.

A location need not be a string: inference hands the checker lazy
:class:`~onnxkit.locations.Location` chains for what it finds inside function bodies (a path
of small tuples, rendered only when a diagnostic is printed), so no level of a deep chain of
calls embeds the text of the level above it.  :func:`extend` builds one; :meth:`Context.emit`
keeps whichever it is given.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ..diagnostics import Report, diagnostic
from ..limits import Limits
from ..locations import Location
from ..registry import normalize_domain
from .codes import CODES

#: The IR version this validator checks against (Clause 14.1.2).
CURRENT_IR = 14

#: Element type tags and the IR version that introduced each (Table 12); older tags are in every version.
ELEM_TYPE_IR = {17: 9, 18: 9, 19: 9, 20: 9, 21: 10, 22: 10, 23: 11, 24: 12, 25: 13, 26: 13, 27: 14, 28: 14}


def extend(parent, segment: str) -> Location:
    """``parent / segment`` as a lazy location (O(1), whatever the depth of ``parent``)."""
    return Location(parent, segment)


def q(name: Any) -> str:
    """A name quoted for a location or message."""
    return f"'{name}'"


def join(*parts: str) -> str:
    return " / ".join(p for p in parts if p)


def graph_label(graph) -> str:
    return f"graph {q(graph.name)}"


def op_label(node) -> str:
    d = normalize_domain(node.domain)
    return f"{d}::{node.op_type}" if d else node.op_type


def node_label(index: int, node) -> str:
    name = f" {q(node.name)}" if node.name else ""
    return f"node {index}{name} ({op_label(node)})"


def function_label(fn) -> str:
    d = normalize_domain(fn.domain)
    ident = f"{d}::{fn.name}" if d else fn.name
    if fn.overload:
        ident += f":{fn.overload}"
    return f"function {q(ident)}"


def function_key(domain: str, name: str, overload: str = "") -> tuple:
    """The identity of a function (Clause 8.4): (domain, name, overload), the domain normalised."""
    return (normalize_domain(domain), name, overload or "")


class Context:
    """State shared by the checks of one model.

    ``ir``: the IR version the model is checked against (its own, or 14 where it is
    missing, invalid or newer).  ``opsets``: the model's imports, ``{domain: version}``
    (domain normalised, '' = ai.onnx).  ``functions``: model-local functions by identity.
    ``known_types``: the hook through which inference (Clause 9) supplies value types, keyed
    by ``name`` or by ``(graph location, name)``; see :mod:`onnxkit.checker`.
    """

    def __init__(self, model, *, registry, limits: Limits, open_external: bool = False,
                 known_types: Optional[Mapping] = None, base_dir: Optional[str] = None):
        self.model = model
        self.registry = registry
        self.limits = limits
        self.open_external = open_external
        self.known_types = known_types or {}
        self.base_dir = base_dir
        self.report = Report()
        self.ir = CURRENT_IR
        self.opsets: dict = {}
        self.functions: dict = {}
        #: domains no plugin provides, and (domain, version) pairs no plugin provides
        self.unchecked_domains: set = set()
        self._features: set = set()
        self._allowed_cache: dict = {}
        self._constrained_cache: dict = {}  # definition key -> its type variables (typecheck)
        self._domains = None
        #: (domain, op_type, since_version) -> the attribute values its plugin accepts beyond it
        self.beyond: dict = {}

    # -- reporting -------------------------------------------------------------------------
    def emit(self, code: str, message: str, location="") -> None:
        """Record one condition under ``code`` (severity and clause from the catalogue);
        ``location`` a string or a lazy :class:`~onnxkit.locations.Location`, kept as given."""
        row = CODES[code]
        self.report.diagnostics.append(diagnostic(row.severity, code, row.clause, message, location))

    def feature(self, what: str, introduced: int, location: str) -> None:
        """Report (once per feature) a use of something introduced after the model's IR version."""
        if self.ir >= introduced or what in self._features:
            return
        self._features.add(what)
        self.emit("ir-version-feature", f"{what} was introduced at IR version {introduced}, but the model declares "
                  f"IR version {self.ir}", location)

    # -- questions -------------------------------------------------------------------------
    def domain_known(self, domain: str) -> bool:
        """True if some installed plugin provides an operator set of ``domain``."""
        if self._domains is None:
            self._domains = {d for d, _ in self.registry.operator_sets}
        return domain in self._domains

    def known_type(self, graph_location: str, name: str):
        """The type the hook supplies for ``name`` in the graph at ``graph_location``, or None."""
        kt = self.known_types
        if not kt:
            return None
        t = kt.get((graph_location, name))
        return t if t is not None else kt.get(name)
