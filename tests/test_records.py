"""onnxkit.records: the record classes the IR, options and plans are made of (the contract in its docstring)."""

import copy
import pickle
import weakref

import pytest

from onnxkit import records


@records.define
class Point:
    x: int
    y: int = 0
    tags: list = records.field(factory=list)
    _wire: object = records.field(default=None, eq=False, repr=False, alias="_wire")
    note: str = records.field(default="", kw_only=True)


@records.frozen
class Key:
    domain: str = ""
    version: int = 0
    cache: object = records.field(default=None, hash=False, eq=False)


def _approx(a, b):
    return abs(a - b) < 0.5


@records.define
class Measured:
    value: float = records.field(default=0.0, eq=_approx, repr=lambda v: f"~{v:.0f}")
    size: int = records.field(default="3", converter=int)
    half: float = records.field(default=records.Factory(lambda self: self.size / 2, takes_self=True))
    hidden: list = records.field(factory=list, init=False, eq=False)


def _positive(inst, f, value):
    if value <= 0:
        raise ValueError(f"{f.name} must be positive, got {value}")


@records.define
class Checked:
    n: int = records.field(default=1, validator=_positive)


@records.define
class Base:
    a: int = 1
    b: int = 2

    def total(self):
        return self.a + self.b


@records.define
class Derived(Base):
    c: int = 3
    a: int = 10

    def total(self):
        return super().total() + self.c


@records.define
class Hooked:
    items: list = records.field(factory=list)
    count: int = records.field(default=0, init=False)

    def __post_init__(self):
        self.count = len(self.items)


def test_init_defaults_factories_alias_and_kw_only():
    p = Point(1)
    assert (p.x, p.y, p.tags, p._wire, p.note) == (1, 0, [], None, "")
    assert Point(1).tags is not Point(1).tags  # a factory per instance
    q = Point(2, 3, ["t"], _wire="w", note="n")
    assert (q.x, q.y, q.tags, q._wire, q.note) == (2, 3, ["t"], "w", "n")
    with pytest.raises(TypeError):
        Point(1, 2, [], None, "positional note")  # note is keyword-only
    with pytest.raises(TypeError):
        Point()  # x is required
    assert Point.__match_args__ == ("x", "y", "tags", "_wire")


def test_private_field_alias_defaults_to_the_name_without_underscores():
    @records.define
    class P:
        _rng: int = 0
    assert P(rng=5)._rng == 5
    assert [f.alias for f in records.fields(P)] == ["rng"]


def test_own_slots_are_refused_at_definition():
    with pytest.raises(TypeError, match="declares no __slots__"):
        @records.define
        class Slotted:
            __slots__ = ("a",)
            a: int


def test_required_after_default_is_refused_at_definition():
    with pytest.raises(TypeError, match="without a default follows"):
        @records.define
        class Bad:
            a: int = 0
            b: int


def test_converter_factory_taking_self_and_init_false():
    m = Measured()
    assert (m.size, m.half, m.hidden) == (3, 1.5, [])
    m.size = "8"  # a mutable record converts on assignment too
    assert m.size == 8
    assert Measured(size=4).half == 2.0


def test_validator_runs_on_init_and_assignment():
    assert Checked(2).n == 2
    with pytest.raises(ValueError, match="n must be positive, got 0"):
        Checked(0)
    c = Checked()
    with pytest.raises(ValueError, match="got -1"):
        c.n = -1


def test_eq_same_class_only_custom_and_ignored_fields():
    assert Point(1, tags=[2]) == Point(1, tags=[2])
    assert Point(1) != Point(2)
    assert Point(1, _wire="a") == Point(1, _wire="b")  # eq=False
    assert Point(1, note="a") != Point(1, note="b")
    assert Measured(1.0) == Measured(1.2)  # a field's own equality
    assert Measured(1.0) != Measured(2.0)
    assert Base() != Derived(a=1, c=3)  # another class
    assert (Point(1) == (1, 0)) is False
    nan = float("nan")
    assert Point(nan) == Point(nan)  # the same object compares equal, as in a tuple


def test_hash_frozen_and_unhashable_mutable():
    assert hash(Key("a", 1)) == hash(Key("a", 1, cache=object()))
    assert len({Key("a", 1), Key("a", 1), Key("b", 1)}) == 2
    with pytest.raises(TypeError):
        hash(Base())  # mutable with eq: unhashable, though every field is hashable
    k = Key("a")
    with pytest.raises(records.FrozenInstanceError):
        k.version = 2
    with pytest.raises(AttributeError):  # FrozenInstanceError is an AttributeError
        del k.domain


def test_repr():
    assert repr(Point(1, 2)) == "Point(x=1, y=2, tags=[], note='')"
    assert repr(Measured(2.4)) == "Measured(value=~2, size=3, half=1.5, hidden=[])"


def test_inheritance_order_redefinition_and_super():
    assert [f.name for f in records.fields(Derived)] == ["b", "c", "a"]
    d = Derived()
    assert (d.a, d.b, d.c) == (10, 2, 3)
    assert d.total() == 15  # zero-argument super() works in the rebuilt class
    assert isinstance(d, Base)


def test_post_init_hook():
    assert Hooked([1, 2, 3]).count == 3


def test_evolve_fields_has_asdict():
    p = Point(1, tags=[1], _wire="w", note="n")
    e = records.evolve(p, y=5)
    assert (e.x, e.y, e.tags, e._wire, e.note) == (1, 5, [1], "w", "n")
    assert p.y == 0
    assert records.evolve(Key("a", 1), version=2) == Key("a", 2)
    assert records.has(Point) and not records.has(int) and not records.has(Point(1))
    with pytest.raises(TypeError, match="not a record class"):
        records.fields(dict)
    assert records.asdict(Derived()) == {"b": 2, "c": 3, "a": 10}

    @records.define
    class Outer:
        inner: list = records.field(factory=list)
    assert records.asdict(Outer([Base()])) == {"inner": [{"a": 1, "b": 2}]}


@pytest.mark.parametrize("obj", [Point(1, tags=[2], note="n"), Key("a", 3), Derived(b=7), Measured(2.0)])
def test_pickle_and_copy(obj):
    for clone in (pickle.loads(pickle.dumps(obj)), copy.copy(obj), copy.deepcopy(obj)):
        assert clone == obj and type(clone) is type(obj)


def test_weakref_and_slots():
    p = Point(1)
    assert weakref.ref(p)() is p
    with pytest.raises(AttributeError):
        p.not_a_field = 1


def test_methods_a_class_defines_are_kept():
    @records.define
    class Own:
        a: int = 0

        def __eq__(self, other):
            return True

        def __repr__(self):
            return "own"
    assert Own(1) == Own(2) and repr(Own()) == "own"


def test_ir_objects_are_records():
    from onnxkit import ir
    n = ir.Node(op_type="Relu", input=["x"], output=["y"])
    assert records.has(ir.Node)
    assert records.evolve(n, output=["z"]).output == ["z"] and n.output == ["y"]
    assert n == ir.Node(op_type="Relu", input=["x"], output=["y"])
    assert pickle.loads(pickle.dumps(n)) == n
