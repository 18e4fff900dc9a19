"""Use-def links over a list of nodes or plan steps, kept current by every edit.

A :class:`UseDef` indexes *items* (:class:`~onnxkit.ir.Node` objects, or plan steps) by the
names they read and write: each name has a :class:`Value` that knows its producer (the item
writing it, None for a graph input, an initializer or a name nothing writes) and its uses, each
a :class:`Use`:

* ``slot >= 0``: the item lists the name as its input at that position (Clause 7.3: a node's
  inputs are positional; ``''`` is an unsupplied input and is never indexed);
* ``slot == SCOPE``: the item reads the name inside one of its subgraphs (an outer-scope
  reference, Clause 5.4.3; ``subgraph`` says which, where the item is a node);
* ``slot == OUTPUT``: the enclosing graph lists the name as an output (``item`` is None).

Edits go through the index so it stays current: :meth:`UseDef.add`, :meth:`UseDef.remove`,
:meth:`UseDef.replace`, :meth:`UseDef.set_input` and :meth:`UseDef.replace_all_uses_with`
update both the item's input list and the links; nothing is recomputed from scratch.  The index
does not order items: whoever holds the item list (the optimizer's
:class:`~onnxkit.runtime.optimizer.view.GraphView`, a plan) keeps the order.  The wire codec
is not involved: the index works on decoded objects only.

Two readers are provided: :func:`node_index` (ir.Node: ``input``, ``output``, the names read
inside its subgraphs) and :func:`step_index` (plan steps: ``inputs``, ``outputs``, ``_uses``).
"""

from __future__ import annotations

from typing import Callable, Iterable, NamedTuple, Optional

from ..functions import names_read_inside, subgraphs_of

#: the slot of a use inside a subgraph of the item (an outer-scope reference)
SCOPE = -1
#: the slot of a use as an output of the enclosing graph
OUTPUT = -2


class Use(NamedTuple):
    """One read of a value: ``item`` reads it at input ``slot`` (or ``SCOPE`` / ``OUTPUT``)."""

    item: object
    slot: int
    subgraph: object = None


class Value:
    """A name of the indexed graph: its ``producer`` (or None) and its ``uses`` (a list of :class:`Use`)."""

    __slots__ = ("name", "producer", "uses")

    def __init__(self, name: str):
        self.name = name
        self.producer = None
        self.uses: list = []

    def readers(self) -> list:
        """The items reading this value as an input, each once, in the order their uses were indexed."""
        seen, out = set(), []
        for u in self.uses:
            if u.slot >= 0 and id(u.item) not in seen:
                seen.add(id(u.item))
                out.append(u.item)
        return out

    def __repr__(self) -> str:
        return f"Value({self.name!r}, producer={getattr(self.producer, 'op_type', self.producer)!r}, uses={len(self.uses)})"


def node_scope_reads(node) -> list:
    """``[(subgraph, names)]`` for each subgraph of ``node`` (:func:`names_read_inside`)."""
    return [(sub, names_read_inside(sub)) for sub in subgraphs_of(node)]


class UseDef:
    """The use-def index of a set of items (module docstring).  ``inputs(item)`` must return the
    item's own (mutable) list of input names; ``outputs(item)`` its output names;
    ``scope_reads(item)`` ``[(subgraph, names)]`` it reads from its scope."""

    def __init__(self, items: Iterable = (), *, inputs: Callable, outputs: Callable,
                 scope_reads: Callable, graph_outputs: Iterable = ()):
        self._inputs, self._outputs, self._scope_reads = inputs, outputs, scope_reads
        self._values: dict = {}
        self._items: dict = {}
        for item in items:
            self.add(item)
        for name in graph_outputs:
            if name:
                self.value(name).uses.append(Use(None, OUTPUT))

    # -- queries ----------------------------------------------------------------------------
    def value(self, name: str) -> Value:
        """The :class:`Value` of ``name`` (made on first ask: a name nothing writes or reads yet)."""
        v = self._values.get(name)
        if v is None:
            v = self._values[name] = Value(name)
        return v

    def producer(self, name: str):
        """The item writing ``name``, or None."""
        v = self._values.get(name)
        return None if v is None else v.producer

    def uses(self, name: str) -> list:
        """The :class:`Use` list of ``name`` (empty when nothing reads it)."""
        v = self._values.get(name)
        return [] if v is None else v.uses

    def use_count(self, name: str) -> int:
        """How many reads ``name`` has: inputs, subgraph reads and graph outputs together."""
        v = self._values.get(name)
        return 0 if v is None else len(v.uses)

    def readers(self, name: str) -> list:
        """The items reading ``name`` as an input (each once)."""
        v = self._values.get(name)
        return [] if v is None else v.readers()

    def sole_reader(self, name: str):
        """The item that reads ``name`` once and is its only use (no other input, subgraph read
        or graph output), else None."""
        v = self._values.get(name)
        if v is None or len(v.uses) != 1 or v.uses[0].slot < 0:
            return None
        return v.uses[0].item

    def __contains__(self, item) -> bool:
        return id(item) in self._items

    def names(self) -> list:
        """Every indexed name (read or written)."""
        return list(self._values)

    # -- edits ------------------------------------------------------------------------------
    def add(self, item) -> None:
        """Index ``item``: it writes its outputs and reads its inputs and scope names."""
        if id(item) in self._items:
            raise ValueError(f"usedef: item {getattr(item, 'name', item)!r} is indexed already")
        self._items[id(item)] = item
        for name in self._outputs(item):
            if name:
                self.value(name).producer = item
        for slot, name in enumerate(self._inputs(item)):
            if name:
                self.value(name).uses.append(Use(item, slot))
        for sub, names in self._scope_reads(item):
            for name in names:
                self.value(name).uses.append(Use(item, SCOPE, sub))

    def remove(self, item) -> None:
        """Drop ``item``: its uses go, and the values it wrote lose their producer."""
        if self._items.pop(id(item), None) is None:
            raise ValueError(f"usedef: item {getattr(item, 'name', item)!r} is not indexed")
        for name in self._outputs(item):
            v = self._values.get(name) if name else None
            if v is not None and v.producer is item:
                v.producer = None
        read = {n for n in self._inputs(item) if n}
        for _, names in self._scope_reads(item):
            read |= set(names)
        for name in read:
            v = self._values[name]
            v.uses = [u for u in v.uses if u.item is not item]

    def replace(self, old, new) -> None:
        """``new`` in place of ``old`` (links of ``old`` dropped, ``new``'s made)."""
        self.remove(old)
        self.add(new)

    def set_input(self, item, slot: int, name: str) -> None:
        """Input ``slot`` of ``item`` reads ``name`` (``''``: unsupplied) instead of what it read."""
        inputs = self._inputs(item)
        old = inputs[slot]
        if old == name:
            return
        if old:
            v = self._values[old]
            v.uses = [u for u in v.uses if not (u.item is item and u.slot == slot)]
        inputs[slot] = name
        if name:
            self.value(name).uses.append(Use(item, slot))

    def replace_all_uses_with(self, old: str, new: str) -> int:
        """Every input reading ``old`` reads ``new`` instead; returns how many.  ``old`` must have
        no subgraph read and not be a graph output (those read it by name: ValueError)."""
        v = self._values.get(old)
        if v is None or old == new:
            return 0
        if any(u.slot < 0 for u in v.uses):
            raise ValueError(f"usedef: {old!r} is read by name (a subgraph or a graph output); it cannot be renamed")
        moved = v.uses
        v.uses = []
        target = self.value(new)
        for u in moved:
            self._inputs(u.item)[u.slot] = new
            target.uses.append(u)
        return len(moved)


def node_index(nodes: Iterable, graph_outputs: Iterable = (), scope_reads: Optional[Callable] = None) -> UseDef:
    """The :class:`UseDef` of ``ir.Node`` objects (their ``input`` lists are edited in place).
    ``scope_reads``: ``node -> [(subgraph, names)]``, by default :func:`node_scope_reads`."""
    return UseDef(nodes, inputs=lambda n: n.input, outputs=lambda n: n.output,
                  scope_reads=scope_reads or node_scope_reads, graph_outputs=graph_outputs)


def step_index(steps: Iterable, keep: Iterable = ()) -> UseDef:
    """The :class:`UseDef` of plan steps (``inputs``, ``outputs``, and ``_uses``: the names their
    subgraphs read); ``keep`` (graph outputs) indexed as ``OUTPUT`` uses."""
    return UseDef(steps, inputs=lambda s: s.inputs, outputs=lambda s: s.outputs,
                  scope_reads=lambda s: [(None, s._uses)] if s._uses else [], graph_outputs=keep)


__all__ = ["UseDef", "Value", "Use", "SCOPE", "OUTPUT", "node_index", "step_index", "names_read_inside",
           "node_scope_reads", "subgraphs_of"]
