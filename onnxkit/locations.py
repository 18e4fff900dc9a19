"""Lazy locations: a path of small tuples, rendered only when a diagnostic is printed.

A location such as ``graph 'main' / node 3 (F) / body of local::F / node 0 (G)`` is kept as
a chain ``(parent, segment)``: extending it costs one small object whatever its depth, and
no level embeds the rendering (or the ``repr``) of the one above it, so a chain of *n*
levels costs O(n) to build and O(n) characters to print (Clause 10: a diagnostic says where).

A :class:`Location` compares, hashes, formats and answers the common ``str`` methods as
its rendering does, so it stands wherever a location string is expected.
"""

from __future__ import annotations

__all__ = ["Location", "extend"]

SEPARATOR = " / "


class Location:
    """One segment under ``parent`` (a Location, a string or None); rendered on demand, once."""

    __slots__ = ("parent", "segment", "_text")

    def __init__(self, parent, segment: str):
        self.parent = parent
        self.segment = segment
        self._text = None

    def render(self) -> str:
        """The location as text, outermost first, joined by ``' / '`` (cached)."""
        if self._text is None:
            parts = []
            node = self
            while isinstance(node, Location):
                if node._text is not None:
                    parts.append(node._text)
                    break
                parts.append(node.segment)
                node = node.parent
            else:
                if node:
                    parts.append(str(node))
            self._text = SEPARATOR.join(p for p in reversed(parts) if p)
        return self._text

    def depth(self) -> int:
        """How many segments the chain holds (strings above it count as one)."""
        n, node = 0, self
        while isinstance(node, Location):
            n, node = n + 1, node.parent
        return n + (1 if node else 0)

    def __str__(self) -> str:
        return self.render()

    def __repr__(self) -> str:
        return repr(self.render())

    def __format__(self, spec: str) -> str:
        return format(self.render(), spec)

    def __eq__(self, other) -> bool:
        if isinstance(other, (Location, str)):
            return self.render() == str(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.render())

    def __bool__(self) -> bool:
        return bool(self.segment) or bool(self.parent)

    def __len__(self) -> int:
        return len(self.render())

    def __contains__(self, text) -> bool:
        return str(text) in self.render()

    def __add__(self, other) -> str:
        return self.render() + str(other)

    def __radd__(self, other) -> str:
        return str(other) + self.render()

    def __getattr__(self, name):  # startswith, split, endswith, ...: as the rendered text
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.render(), name)


def extend(parent, segment: str) -> Location:
    """``parent / segment`` as a :class:`Location` (``parent`` a Location, a string or None)."""
    return Location(parent, segment)
