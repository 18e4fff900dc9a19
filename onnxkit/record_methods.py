"""``__repr__``, ``__eq__`` and ``__hash__`` of a record class, compiled the first time they are called.

attrs compiles the methods it generates as it defines a class, and most record classes on a
session's path are never printed, compared or hashed in a given process.  A record class that
assigns these functions in its body::

    @records.frozen
    class Code:
        name: str
        ...
        __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH

is still made by attrs' own ``define`` / ``frozen``; attrs sees methods the class defines itself
(its default ``auto_detect``) and generates none of the three.  Called once, each function writes
the method attrs would have written for the class (same fields, same order, same semantics) and
puts it on the class, which every later call uses directly:

* ``__repr__``: ``ClassName(field=value, ...)`` over the fields with ``repr`` true (a callable
  ``repr`` formats its field), the class named by its ``__qualname__`` after the last ``>.``; a
  record met again inside its own repr prints ``...``;
* ``__eq__``: ``NotImplemented`` for another class; else each field with ``eq`` true compared
  with ``==`` in field order, through its ``eq_key`` where it has one, joined by ``and``
  (``!=`` is Python's inverse of it);
* ``__hash__`` (frozen records only): the hash of a per-class constant and the fields with
  ``hash`` true, or ``hash`` unset and ``eq`` true, through their ``eq_key``.

A mutable record that assigns ``__eq__`` without ``__hash__`` is unhashable, as attrs makes it.
The method is put on the class whose body assigned the function (a subclass attrs defines
separately has its own); a subclass that is not a record class inherits it.
"""

from __future__ import annotations

import threading

from attr import fields

__all__ = ["EQ", "HASH", "REPR"]

_repr_context = threading.local()


def _owner(cls: type, name: str, stub) -> type:
    """The class in ``cls``'s method resolution order whose body holds ``stub`` as ``name``."""
    for klass in cls.__mro__:
        if klass.__dict__.get(name) is stub:
            return klass
    return cls


def _compiled(cls: type, name: str, lines: list, globs: dict):
    """Compile ``lines`` (a function ``name``) for ``cls``, put it on ``cls`` and return it."""
    code = compile("\n".join(lines), f"<record {name} {cls.__module__}.{cls.__qualname__}>", "exec")
    namespace: dict = {}
    eval(code, globs, namespace)  # noqa: S307 (source made here from the class's field names)
    method = namespace[name]
    method.__qualname__ = f"{cls.__qualname__}.{name}"
    setattr(cls, name, method)
    return method


def _repr_method(cls: type):
    shown = [(a.name, a.repr, a.init) for a in fields(cls) if a.repr is not False]
    globs = {"_context": _repr_context, "AttributeError": AttributeError}
    parts = []
    for name, how, init in shown:
        value = f"self.{name}" if init else f'getattr(self, "{name}", NOTHING)'
        if how is True:
            parts.append(f"{name}={{{value}!r}}")
        else:
            globs[f"_{name}_repr"] = how
            parts.append(f"{name}={{_{name}_repr({value})}}")
    if any(not init for _, _, init in shown):
        from attr import NOTHING

        globs["NOTHING"] = NOTHING
    body = ", ".join(parts)
    lines = [
        "def __repr__(self):",
        "    try:",
        "        seen = _context.seen",
        "    except AttributeError:",
        "        seen = _context.seen = set()",
        "    if id(self) in seen:",
        "        return '...'",
        "    seen.add(id(self))",
        "    try:",
        f"        return f'{{self.__class__.__qualname__.rsplit(\">.\", 1)[-1]}}({body})'",
        "    finally:",
        "        seen.discard(id(self))",
    ]
    return _compiled(cls, "__repr__", lines, globs)


def _eq_method(cls: type):
    compared = [a for a in fields(cls) if a.eq]
    globs: dict = {"NotImplemented": NotImplemented}
    lines = ["def __eq__(self, other):",
             "    if other.__class__ is not self.__class__:",
             "        return NotImplemented"]
    terms = []
    for a in compared:
        if a.eq_key:
            globs[f"_{a.name}_key"] = a.eq_key
            terms.append(f"_{a.name}_key(self.{a.name}) == _{a.name}_key(other.{a.name})")
        else:
            terms.append(f"self.{a.name} == other.{a.name}")
    lines.append("    return (" + " and\n            ".join(terms) + ")" if terms else "    return True")
    return _compiled(cls, "__eq__", lines, globs)


def _hash_method(cls: type):
    hashed = [a for a in fields(cls) if a.hash is True or (a.hash is None and a.eq is True)]
    globs: dict = {"_type_hash": hash(f"<record {cls.__module__}.{cls.__qualname__}>")}
    items = ["_type_hash"]
    for a in hashed:
        if a.eq_key:
            globs[f"_{a.name}_key"] = a.eq_key
            items.append(f"_{a.name}_key(self.{a.name})")
        else:
            items.append(f"self.{a.name}")
    lines = ["def __hash__(self):", "    return hash((" + ", ".join(items) + ",))"]
    return _compiled(cls, "__hash__", lines, globs)


def REPR(self) -> str:  # noqa: N802 (the function a class body assigns as __repr__)
    """Compile the class's ``__repr__`` (see the module), then call it."""
    return _repr_method(_owner(type(self), "__repr__", REPR))(self)


def EQ(self, other):  # noqa: N802
    """Compile the class's ``__eq__`` (see the module), then call it."""
    return _eq_method(_owner(type(self), "__eq__", EQ))(self, other)


def HASH(self) -> int:  # noqa: N802
    """Compile the class's ``__hash__`` (see the module), then call it."""
    return _hash_method(_owner(type(self), "__hash__", HASH))(self)
