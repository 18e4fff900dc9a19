"""The names visible at a point of a graph being planned (Clause 5.4.3), and what the plan holds
for them: constants and defaults, declared types.  Read by the planner and by a kernel's
:class:`~onnxkit.runtime.kernel.NodeContext` (``is_constant``, ``input_types``); imports nothing
of either.
"""

from __future__ import annotations

from .. import ir

class Visible:
    """The names visible at a point of a graph: its own ``names`` and those of ``outer`` (5.4.3).

    A view, made in constant time: ``names`` is the graph's live set of defined names, so a
    planner builds no per-node copy (the copy made planning quadratic in the node count).
    Supports ``in`` only; ``outer`` is another :class:`Visible` or any container.
    """

    __slots__ = ("names", "outer", "constants", "backend", "graph", "inits", "defaults", "_declared")

    def __init__(self, names, outer=(), constants=None, backend=None, graph=None, inits=None, defaults=None):
        self.names = names
        self.outer = outer
        #: name -> value: the graph's constants (initializers not inputs, and the values folded
        #: so far: the planner folds each step as it plans it)
        self.constants = constants
        self.backend = backend      # the backend those constants are values of
        self.graph = graph          # the ir.Graph (None where unknown)
        self.inits = inits or {}    # name -> the graph's Tensor / SparseTensor initializer
        self.defaults = defaults    # name -> value: the graph's defaults (initializers that are inputs)
        self._declared = None       # name -> declared ir.Type of the graph, made on first need

    def declared(self) -> dict:
        """``{name: Type}`` declared in the graph: its inputs', outputs' and ``value_info``'s
        types (initializers: :func:`declared_type`)."""
        types = self._declared
        if types is None:
            types = {}
            g = self.graph
            if g is not None:
                for vi in (*g.value_info, *g.output, *g.input):  # an input's declaration wins
                    if vi.name and vi.type is not None:
                        types[vi.name] = vi.type
            self._declared = types
        return types

    def initializer_type(self, name: str):
        """The tensor type (element type and extents) of the graph's initializer ``name`` as
        nodes read it (a sparse one dense), or None."""
        t = self.inits.get(name)
        if t is None:
            return None
        if ir.is_a(t, "SparseTensor"):
            return ir.tensor_type(int(t.values.data_type), [int(d) for d in t.dims])
        return ir.tensor_type(int(t.data_type), [int(d) for d in t.dims])

    def __contains__(self, name) -> bool:
        return name in self.names or name in self.outer


_NOT_CONSTANT = object()


def declared_constant(visible, name: str):
    """``(constant, value, backend)`` where ``name``, read at a point of a graph whose visible
    names are ``visible`` (a chain of :class:`Visible`), is a value the plan holds: a constant of
    that graph or of an enclosing one (``constant`` True: initializers not inputs, values folded
    so far) or a default (False: an initializer that is also an input, which a caller may
    feed), else None.  The innermost graph defining ``name`` decides, as :func:`outer_constant`;
    unlike it, a value held on another backend counts (its values do not change either)."""
    v = visible
    while isinstance(v, Visible):
        if v.constants is not None and name in v.constants:
            return True, v.constants[name], v.backend
        if v.defaults and name in v.defaults:
            return False, v.defaults[name], v.backend
        if name in v.names:
            return None
        v = v.outer
    return None


def declared_type(visible, name: str):
    """The declared type of ``name`` read at a point of a graph (a :class:`Visible` chain): the
    declaration (input, output, ``value_info``) of the innermost graph defining it, else that
    graph's initializer's tensor type (element type and extents); None where none is declared."""
    v = visible
    while isinstance(v, Visible):
        t = v.declared().get(name)
        if t is not None:
            return t
        if name in v.names:
            return v.initializer_type(name)
        v = v.outer
    return None


def outer_constant(visible, name: str, backend: str):
    """The value of ``name`` where an enclosing graph (a chain of :class:`Visible`) holds it as
    a constant of ``backend``, else :data:`_NOT_CONSTANT`.  The innermost graph defining
    ``name`` decides: a name an inner graph defines otherwise (an input, a node output)
    shadows an outer constant."""
    v = visible
    while isinstance(v, Visible):
        if v.constants is not None and name in v.constants:
            return v.constants[name] if v.backend == backend else _NOT_CONSTANT
        if name in v.names:
            return _NOT_CONSTANT
        v = v.outer
    return _NOT_CONSTANT
