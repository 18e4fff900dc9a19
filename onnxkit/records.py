"""Record classes: slotted classes with generated ``__init__``, ``__eq__``, ``__hash__`` and ``__repr__``.

onnxkit's IR, options, schemas and plan bookkeeping are records.  They were attrs classes; this
module replaces attrs because of what a class costs at import: a session's import path defines
about 85, attrs takes about 0.5 ms to define one (dataclasses 0.34 ms), and ``import attrs``
itself takes about 15 ms.  Defining a record costs 0.03 ms; its methods are compiled when first used, so
a class that is instantiated and compared costs 0.19 ms in all (``benchmarks/records.py``).

The spelling follows attrs, so that attrs users read it at once:

    @records.define                      # mutable; eq compares field by field; unhashable
    class Node:
        op_type: str = ""                 # a default
        input: list = records.field(factory=list)
        _wire: object = records.field(default=None, eq=False, repr=False, alias="_wire")

    @records.frozen                       # immutable and hashable (hash of the eq fields)

Contract:

* Fields are the annotated class attributes, in order, after those of record base classes (a
  redefined field keeps the subclass's definition, at the subclass's place).  A field without
  a default is a required ``__init__`` argument; ``kw_only`` ones are keyword-only.
* ``__init__`` takes each ``init`` field under its ``alias`` (default: the name less leading
  underscores), applies ``converter``, sets the slot, then calls each ``validator(instance,
  field, value)``, then ``__post_init__()`` when the class has one.  On a mutable record,
  assigning a field with a converter or validator runs them too (as attrs does).
* ``__eq__`` is True for instances of the same class whose eq fields are equal (a field's ``eq``
  may be a two-argument function used instead of ``==``); other classes give NotImplemented.
* A frozen record refuses assignment with :class:`FrozenInstanceError` and hashes its eq fields
  (those with ``hash`` not False); a mutable one with eq is unhashable.
* Methods a class defines itself (``__init__``, ``__eq__``, ``__hash__``, ``__repr__``) are kept.
* Records pickle and copy (``__getstate__`` / ``__setstate__``) and are weak-referenceable.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

__all__ = ["NOTHING", "Factory", "Field", "FrozenInstanceError", "asdict", "define", "evolve", "field",
           "fields", "frozen", "has"]


class _Nothing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NOTHING"

    def __bool__(self) -> bool:
        return False


#: The absence of a default (a required field), and ``__init__``'s marker for "not given".
NOTHING = _Nothing()


class FrozenInstanceError(AttributeError):
    """Raised on assigning or deleting a field of a frozen record."""


class Factory:
    """A default made per instance: ``factory()``, or ``factory(self)`` with ``takes_self``
    (called after the fields before it are set)."""

    __slots__ = ("factory", "takes_self")

    def __init__(self, factory: Callable, takes_self: bool = False):
        self.factory = factory
        self.takes_self = takes_self


class Field:
    """One field of a record, as :func:`fields` gives it."""

    __slots__ = ("name", "default", "validator", "converter", "eq", "hash", "repr", "init", "kw_only", "alias")

    def __init__(self, default=NOTHING, validator=None, converter=None, eq: Any = True, hash: Optional[bool] = None,
                 repr: Any = True, init: bool = True, kw_only: bool = False, alias: Optional[str] = None, name: str = ""):
        self.name, self.default, self.validator, self.converter = name, default, validator, converter
        self.eq, self.hash, self.repr, self.init, self.kw_only, self.alias = eq, hash, repr, init, kw_only, alias

    def _named(self, name: str) -> "Field":
        return Field(self.default, self.validator, self.converter, self.eq, self.hash, self.repr, self.init,
                     self.kw_only, self.alias or name.lstrip("_"), name)

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, default={self.default!r}, alias={self.alias!r})"


def field(*, default=NOTHING, factory: Optional[Callable] = None, validator: Optional[Callable] = None,
          converter: Optional[Callable] = None, eq: Any = True, hash: Optional[bool] = None, repr: Any = True,
          init: bool = True, kw_only: bool = False, alias: Optional[str] = None) -> Any:
    """Declare a field: ``default`` or ``factory`` (a callable of no argument), and the options above.

    ``eq``: True, False (not compared) or a function ``eq(a, b) -> bool``; ``repr``: True, False
    (not shown) or a function giving the text of the value."""
    if factory is not None:
        if default is not NOTHING:
            raise TypeError("give a field default or factory, not both")
        default = Factory(factory)
    return Field(default, validator, converter, eq, hash, repr, init, kw_only, alias)


def define(maybe_cls=None, *, frozen: bool = False, eq: bool = True, repr: bool = True):
    """Make the decorated class a record (mutable unless ``frozen``); usable with or without arguments."""
    def wrap(cls):
        return _build(cls, frozen, eq, repr)
    return wrap if maybe_cls is None else wrap(maybe_cls)


def frozen(maybe_cls=None, *, eq: bool = True, repr: bool = True):
    """``define(frozen=True)``."""
    return define(maybe_cls, frozen=True, eq=eq, repr=repr)


def has(cls) -> bool:
    """Whether ``cls`` is a record class."""
    return isinstance(cls, type) and "__record_fields__" in cls.__dict__


def fields(cls) -> tuple:
    """The :class:`Field` s of record class ``cls``, in ``__init__`` order."""
    try:
        return cls.__dict__["__record_fields__"]
    except (AttributeError, KeyError):
        raise TypeError(f"{cls!r} is not a record class") from None


def evolve(inst, **changes):
    """A copy of ``inst`` with ``changes`` (keyed by ``__init__`` argument name) applied, made by ``__init__``."""
    cls = type(inst)
    for f in fields(cls):
        if f.init and f.alias not in changes:
            changes[f.alias] = getattr(inst, f.name)
    return cls(**changes)


def asdict(inst) -> dict:
    """``{name: value}`` of every field, records, lists, tuples and dicts within converted too."""
    def conv(v):
        if has(type(v)):
            return asdict(v)
        if isinstance(v, (list, tuple)):
            return type(v)(conv(x) for x in v)
        if isinstance(v, dict):
            return {conv(k): conv(x) for k, x in v.items()}
        return v
    return {f.name: conv(getattr(inst, f.name)) for f in fields(type(inst))}


# -- building a class ----------------------------------------------------------------------------------------

def _build(cls, is_frozen: bool, eq: bool, repr_: bool):
    own = cls.__dict__
    if "__slots__" in own:
        raise TypeError(f"{cls.__qualname__}: a record class declares no __slots__ (the decorator makes them)")
    inherited: dict = {}
    for base in reversed(cls.__mro__[1:]):
        for f in base.__dict__.get("__record_fields__", ()):
            inherited[f.name] = f
    mine = {}
    for name in own.get("__annotations__", {}):
        value = own.get(name, NOTHING)
        f = value if isinstance(value, Field) else Field(value)
        mine[name] = f._named(name)
    for name in mine:
        inherited.pop(name, None)
    all_fields = tuple(inherited.values()) + tuple(mine.values())
    seen_default = False
    for f in all_fields:
        if f.init and not f.kw_only:
            if f.default is NOTHING and seen_default:
                raise TypeError(f"{cls.__qualname__}: field {f.name!r} without a default follows one with a default")
            seen_default = seen_default or f.default is not NOTHING

    ns = {k: v for k, v in own.items() if k not in mine and k not in ("__dict__", "__weakref__")}
    base_slots = {s for b in cls.__mro__[1:] for s in b.__dict__.get("__slots__", ())}
    weak = any(hasattr(b, "__weakref__") for b in cls.__mro__[1:] if b is not object)
    ns["__slots__"] = tuple(n for n in mine if n not in base_slots) + (() if weak else ("__weakref__",))
    ns["__record_fields__"] = all_fields
    ns["__record_frozen__"] = is_frozen = is_frozen or getattr(cls, "__record_frozen__", False)
    ns["__match_args__"] = tuple(f.name for f in all_fields if f.init and not f.kw_only)
    if "__init__" not in own:
        ns["__init__"] = _lazy("__init__", _make_init)
    if eq and "__eq__" not in own:
        ns["__eq__"] = _lazy("__eq__", _make_eq)
        if "__hash__" not in own:
            ns["__hash__"] = _lazy("__hash__", _make_hash) if is_frozen else None
    if repr_ and "__repr__" not in own:
        ns["__repr__"] = _repr
    if is_frozen:
        ns["__setattr__"] = ns["__delattr__"] = _frozen_setattr
    elif any(f.converter or f.validator for f in all_fields):
        ns["__record_checked__"] = {f.name: f for f in all_fields if f.converter or f.validator}
        ns["__setattr__"] = _checked_setattr
    ns.setdefault("__getstate__", _getstate)
    ns.setdefault("__setstate__", _setstate)
    new = type(cls)(cls.__name__, cls.__bases__, ns)
    _fix_class_cells(cls, new)
    return new


def _lazy(name: str, make: Callable) -> Callable:
    """A method that compiles the class's own version on first call, installs it and calls it."""
    def method(self, *args, **kwargs):
        cls = _owner(type(self), name, method)
        real = make(cls)
        setattr(cls, name, real)
        return real(self, *args, **kwargs)
    method.__name__ = name
    return method


def _owner(cls, name: str, method) -> type:
    for c in cls.__mro__:
        if c.__dict__.get(name) is method:
            return c
    raise AssertionError(f"{name} of {cls!r}")  # pragma: no cover - only reachable through the owner


def _compile(cls, name: str, src: str, env: dict) -> Callable:
    ns: dict = {}
    exec(compile(src, f"<record {cls.__module__}.{cls.__qualname__}.{name}>", "exec"), env, ns)
    fn = ns[name]
    fn.__qualname__ = f"{cls.__qualname__}.{name}"
    return fn


def _make_init(cls) -> Callable:
    env: dict = {"NOTHING": NOTHING, "_set": object.__setattr__}
    params, kw, body, checks = [], [], [], []
    for i, f in enumerate(fields(cls)):
        d, arg = f.default, f.alias
        if isinstance(d, Factory):
            env[f"_f{i}"] = d.factory
            make = f"_f{i}(self)" if d.takes_self else f"_f{i}()"
            value = f"{make} if {arg} is NOTHING else {arg}" if f.init else make
            default = "NOTHING"
        else:
            env[f"_d{i}"] = d
            value = arg if f.init else f"_d{i}"
            default = None if d is NOTHING else f"_d{i}"
        if f.init:
            (kw if f.kw_only else params).append(arg if default is None else f"{arg}={default}")
        if f.converter is not None:
            env[f"_c{i}"] = f.converter
            value = f"_c{i}({value})"
        if f.init or d is not NOTHING:
            body.append(f"    _set(self, {f.name!r}, {value})")
        if f.validator is not None:
            env[f"_v{i}"], env[f"_a{i}"] = f.validator, f
            checks.append(f"    _v{i}(self, _a{i}, self.{f.name})")
    if hasattr(cls, "__post_init__"):
        checks.append("    self.__post_init__()")
    sig = ", ".join(["self"] + params + (["*"] + kw if kw else []))
    src = f"def __init__({sig}):\n" + "\n".join(body + checks or ["    pass"]) + "\n"
    return _compile(cls, "__init__", src, env)


def _make_eq(cls) -> Callable:
    env: dict = {}
    plain, custom = [], []
    for i, f in enumerate(fields(cls)):
        if f.eq is True:
            plain.append(f.name)
        elif callable(f.eq):
            env[f"_e{i}"] = f.eq
            custom.append(f"_e{i}(self.{f.name}, other.{f.name})")
    terms = []
    if plain:
        terms.append("(" + "".join(f"self.{n}, " for n in plain) + ") == (" + "".join(f"other.{n}, " for n in plain) + ")")
    src = ("def __eq__(self, other):\n    if other.__class__ is not self.__class__:\n        return NotImplemented\n"
           f"    return {' and '.join(terms + custom) or 'True'}\n")
    return _compile(cls, "__eq__", src, env)


def _make_hash(cls) -> Callable:
    names = [f.name for f in fields(cls) if f.eq is not False and f.hash is not False]
    src = f"def __hash__(self):\n    return hash(({hash(cls.__qualname__)}, {''.join(f'self.{n}, ' for n in names)}))\n"
    return _compile(cls, "__hash__", src, {})


def _repr(self) -> str:
    parts = []
    for f in fields(type(self)):
        if f.repr is False:
            continue
        v = getattr(self, f.name, NOTHING)
        parts.append(f"{f.name}={f.repr(v) if callable(f.repr) else repr(v)}")
    return f"{type(self).__qualname__}({', '.join(parts)})"


def _frozen_setattr(self, name, value=None):
    raise FrozenInstanceError(f"{type(self).__qualname__} is frozen: cannot change {name!r}")


def _checked_setattr(self, name, value):
    f = type(self).__record_checked__.get(name)
    if f is not None and f.converter is not None:
        value = f.converter(value)
    object.__setattr__(self, name, value)
    if f is not None and f.validator is not None:
        f.validator(self, f, value)


def _getstate(self) -> tuple:
    return tuple(getattr(self, f.name, NOTHING) for f in type(self).__record_fields__)


def _setstate(self, state) -> None:
    for f, v in zip(type(self).__record_fields__, state):
        if v is not NOTHING:
            object.__setattr__(self, f.name, v)


def _fix_class_cells(old, new) -> None:
    """Point ``__class__`` cells (zero-argument ``super()``) of the methods at the rebuilt class."""
    for item in new.__dict__.values():
        fn = getattr(item, "__func__", None) or getattr(item, "fget", None) or item
        closure = getattr(fn, "__closure__", None)
        code = getattr(fn, "__code__", None)
        if not closure or code is None:
            continue
        for name, cell in zip(code.co_freevars, closure):
            if name == "__class__" and cell.cell_contents is old:
                cell.cell_contents = new
