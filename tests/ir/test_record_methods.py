"""onnxkit.record_methods: __repr__ / __eq__ / __hash__ compiled on first use behave as the
methods attrs generates (each case below is run on a twin class attrs makes itself)."""

import math
import pickle
import threading

import attrs
import numpy as np
import pytest

from onnxkit import record_methods, records


def _array_eq(a, b):
    return np.array_equal(np.asarray(a), np.asarray(b))


ARRAY_EQ = records.cmp_using(eq=_array_eq, require_same_type=False, class_name="ArrayEq")


def _pair(frozen: bool):
    """Two classes with the same fields: one made wholly by attrs, one with record_methods."""
    make = records.frozen if frozen else records.define

    @make
    class Attrs:
        x: int
        y: object = None
        data: object = records.field(default=None, eq=ARRAY_EQ, hash=False, repr=lambda a: f"<{0 if a is None else len(a)}>")
        hidden: object = records.field(default=None, eq=False, repr=False)
        cached: object = records.field(default=None, hash=False)
        later: object = records.field(default=7, init=False)
        note: str = records.field(default="", kw_only=True)

    @make
    class Lazy:
        x: int
        y: object = None
        data: object = records.field(default=None, eq=ARRAY_EQ, hash=False, repr=lambda a: f"<{0 if a is None else len(a)}>")
        hidden: object = records.field(default=None, eq=False, repr=False)
        cached: object = records.field(default=None, hash=False)
        later: object = records.field(default=7, init=False)
        note: str = records.field(default="", kw_only=True)
        if frozen:
            __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH
        else:
            __repr__, __eq__ = record_methods.REPR, record_methods.EQ

    return Attrs, Lazy


_CASES = [
    ((1,), (1,)), ((1,), (2,)), ((1, "a"), (1, "a")), ((1, [1, 2]), (1, [1, 2])), ((1, [1]), (1, [2])),
    ((1, None, np.arange(3)), (1, None, np.arange(3))), ((1, None, np.arange(3)), (1, None, np.arange(4))),
    ((1, None, [0, 1, 2]), (1, None, np.arange(3))),  # the key compares by value, across types
    ((1, None, None, "h1"), (1, None, None, "h2")),  # eq=False field
    ((1, None, None, None, "c1"), (1, None, None, None, "c2")),  # hash=False field (still compared)
    ((math.nan,), (math.nan,)),  # == on the field, not identity: nan != nan
]


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize("left,right", _CASES)
def test_eq_ne_and_repr_as_attrs_makes_them(frozen, left, right):
    Attrs, Lazy = _pair(frozen)
    nan = float("nan")
    left = tuple(nan if isinstance(v, float) and math.isnan(v) else v for v in left)
    right = tuple(nan if isinstance(v, float) and math.isnan(v) else v for v in right)
    a1, a2, l1, l2 = Attrs(*left), Attrs(*right), Lazy(*left), Lazy(*right)
    assert (l1 == l2) == (a1 == a2)
    assert (l1 != l2) == (a1 != a2)
    assert repr(l1).replace("Lazy(", "Attrs(") == repr(a1)
    assert repr(l2).replace("Lazy(", "Attrs(") == repr(a2)
    assert str(l1).replace("Lazy(", "Attrs(") == str(a1)
    if frozen:  # hashable where attrs' twin is, and equal records hash alike
        assert _hashes(l1) == _hashes(a1) and _hashes(l2) == _hashes(a2)
        if a1 == a2 and _hashes(a1):
            assert hash(l1) == hash(l2)


def _hashes(obj) -> bool:
    try:
        hash(obj)
    except TypeError:
        return False
    return True


def test_same_object_and_kw_only_and_other_classes():
    Attrs, Lazy = _pair(False)
    n = float("nan")
    a, lazy = Attrs(n), Lazy(n)
    assert (lazy == lazy) == (a == a)  # nan in the field: attrs compares fields, the object too
    assert Lazy(1, note="a") != Lazy(1, note="b") and Lazy(1, note="a") == Lazy(1, note="a")
    assert (Lazy(1) == Attrs(1)) is False and (Lazy(1) == (1,)) is False
    assert Lazy(1).__eq__(Attrs(1)) is NotImplemented
    assert repr(Lazy(1, note="n")) == "Lazy(x=1, y=None, data=<0>, cached=None, later=7, note='n')"


def test_mutable_records_stay_unhashable_frozen_ones_hash_by_fields():
    _, Lazy = _pair(False)
    with pytest.raises(TypeError):
        hash(Lazy(1))
    _, Frozen = _pair(True)
    assert hash(Frozen(1, "a", cached=1)) == hash(Frozen(1, "a", cached=2))  # hash=False left out
    assert len({Frozen(1, "a"), Frozen(1, "a"), Frozen(2, "a")}) == 2


def test_attrs_generates_none_of_them_and_the_first_call_puts_the_compiled_method_on_the_class():
    _, Lazy = _pair(True)
    props = Lazy.__attrs_props__
    assert not props.added_repr and not props.added_eq
    assert Lazy.__dict__["__eq__"] is record_methods.EQ and Lazy.__dict__["__repr__"] is record_methods.REPR
    assert Lazy(1) == Lazy(1)
    repr(Lazy(1))
    hash(Lazy(1))
    for name, stub in (("__eq__", record_methods.EQ), ("__repr__", record_methods.REPR),
                       ("__hash__", record_methods.HASH)):
        assert Lazy.__dict__[name] is not stub and Lazy.__dict__[name].__qualname__ == f"{Lazy.__qualname__}.{name}"


def test_a_recursive_record_prints_dots_as_attrs_does():
    Attrs, Lazy = _pair(False)
    a, lazy = Attrs(1), Lazy(1)
    a.y, lazy.y = [a], [lazy]
    assert repr(lazy).replace("Lazy(", "Attrs(") == repr(a) == "Attrs(x=1, y=[...], data=<0>, cached=None, later=7, note='')"


def test_subclasses_plain_and_records():
    _, Lazy = _pair(False)

    class Plain(Lazy):
        __slots__ = ()

    assert Plain(1) == Plain(1) and Plain(1) != Lazy(1)
    assert repr(Plain(2)).startswith("Plain(x=2,")

    @records.define
    class More(Lazy):
        z: int = 0
        __repr__, __eq__ = record_methods.REPR, record_methods.EQ

    assert More(1, z=1) != More(1, z=2) and More(1, z=3) == More(1, z=3)
    assert repr(More(1, z=4)).endswith("note='', z=4)")
    assert Lazy(1) == Lazy(1)  # the base compiled its own, over its own fields


def test_pickles_and_threads():
    from onnxkit.limits import Limits

    results = []

    def first_use():
        results.append((repr(Limits()), Limits() == Limits(), hash(Limits())))
    threads = [threading.Thread(target=first_use) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1
    assert pickle.loads(pickle.dumps(Limits(max_nodes=3))) == Limits(max_nodes=3)


def _onnxkit_classes():
    import onnxkit.runtime  # noqa: F401  (defines the session's record classes)
    from onnxkit import diagnostics, dtypes, external_read, inference, kernel_traits, limits, registry, schema, shapes
    from onnxkit.ir import attribute, base, graph, tensor, types
    from onnxkit.runtime import kernel, options, optimizer, session_ort
    from onnxkit.runtime.optimizer import rules
    from onnxkit.wire import schema as wire_schema

    found = []
    for module in (diagnostics, dtypes, external_read, inference, kernel_traits, limits, registry, schema, shapes,
                   attribute, base, graph, tensor, types, kernel, options, optimizer, session_ort, rules, wire_schema):
        for value in vars(module).values():
            if isinstance(value, type) and attrs.has(value) and value.__module__ == module.__name__:
                if any(value.__dict__.get(n) in (record_methods.REPR, record_methods.EQ, record_methods.HASH)
                       or getattr(value.__dict__.get(n), "__code__", None) is not None
                       and value.__dict__[n].__code__.co_filename.startswith("<record ")
                       for n in ("__repr__", "__eq__", "__hash__")):
                    found.append(value)
    return found


def test_onnxkit_record_classes_keep_attrs_behaviour():
    classes = _onnxkit_classes()
    assert len(classes) >= 40
    for cls in classes:
        props = cls.__attrs_props__
        if "__hash__" in cls.__dict__ and cls.__dict__["__hash__"] is None:
            assert not props.is_frozen, cls  # a mutable record: unhashable, as attrs makes it
        if props.is_frozen and cls.__dict__.get("__eq__") is not None and "__eq__" in cls.__dict__:
            assert cls.__dict__.get("__hash__") is not None, cls  # frozen and compared: hashable
