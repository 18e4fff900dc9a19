"""onnxkit.records: the IR, options, schemas and plan bookkeeping are attrs classes, and keep the
behaviours their callers rely on (frozen, eq, hash, evolve, validators, converters, aliases)."""

import copy
import enum
import importlib
import inspect
import pickle
import pkgutil
import weakref

import attrs
import numpy as np
import pytest

from onnxkit import records


def test_records_is_attrs_own_api_and_no_machinery_of_its_own():
    assert records.define is attrs.define and records.frozen is attrs.frozen and records.field is attrs.field
    assert records.evolve is attrs.evolve and records.fields is attrs.fields and records.has is attrs.has
    assert records.Factory is attrs.Factory and records.NOTHING is attrs.NOTHING
    assert records.cmp_using is attrs.cmp_using and records.asdict is attrs.asdict
    assert records.FrozenInstanceError is attrs.exceptions.FrozenInstanceError
    own = [n for n, v in vars(records).items() if inspect.isfunction(v) or inspect.isclass(v)]
    assert all(getattr(vars(records)[n], "__module__", "").startswith(("attr", "attrs")) for n in own), own


#: classes of onnxkit.ir that are not records: an enum and two namespaces of wire constants
_IR_CONSTANTS = {"AttributeType", "ValueKind", "DataLocation"}


def _ir_classes() -> dict:
    import onnxkit.ir as ir

    found = {}
    for info in pkgutil.iter_modules(ir.__path__):
        module = importlib.import_module(f"onnxkit.ir.{info.name}")
        for name in dir(module):
            obj = getattr(module, name)  # a lazily defined class is defined by the look-up
            if inspect.isclass(obj) and obj.__module__.startswith("onnxkit.ir"):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def test_every_ir_record_class_is_an_attrs_class():
    classes = _ir_classes()
    not_attrs = {q.rsplit(".", 1)[1] for q, c in classes.items() if not attrs.has(c)}
    assert not_attrs == _IR_CONSTANTS, not_attrs
    records_ = [c for c in classes.values() if attrs.has(c)]
    assert len(records_) >= 35  # every message of Annex B with a class of its own
    for cls in records_:
        assert "__slots__" in cls.__dict__ and "__attrs_attrs__" in cls.__dict__, cls
    import onnxkit.ir as ir

    assert attrs.has(ir.Model) and attrs.has(ir.Tensor) and attrs.has(ir.TensorType) and attrs.has(ir.Node)
    assert issubclass(ir.AttributeType, enum.IntEnum)


def test_records_beyond_the_ir_are_attrs_classes_too():
    from onnxkit.kernel_traits import KernelTraits
    from onnxkit.limits import Limits
    from onnxkit.runtime.kernel import NodeContext
    from onnxkit.runtime.options import NodeArg
    from onnxkit.schema import OpSchema
    from onnxkit.wire.schema import MessageSpec

    for cls in (Limits, KernelTraits, NodeContext, NodeArg, OpSchema, MessageSpec):
        assert attrs.has(cls), cls


# -- the behaviours callers rely on, on classes made like onnxkit's ------------------------------------

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


def _positive(inst, attribute, value):
    if value <= 0:
        raise ValueError(f"{attribute.name} must be positive, got {value}")


@records.define
class Checked:
    n: int = records.field(default=1, validator=_positive)
    size: int = records.field(default="3", converter=int)
    half: float = records.field(default=records.Factory(lambda self: self.size / 2, takes_self=True))


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

    def __attrs_post_init__(self):
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


def test_a_private_field_without_an_alias_takes_its_name_less_the_underscore():
    @records.define
    class P:
        _rng: int = 0
    assert P(rng=5)._rng == 5
    assert [f.alias for f in records.fields(P)] == ["rng"]


def test_validators_and_converters_run_on_init_and_on_assignment():
    assert Checked(2).n == 2
    with pytest.raises(ValueError, match="n must be positive, got 0"):
        Checked(0)
    c = Checked()
    with pytest.raises(ValueError, match="got -1"):
        c.n = -1
    assert (c.size, c.half) == (3, 1.5)  # the default converted; a factory taking self sees it
    c.size = "8"
    assert c.size == 8


def test_eq_compares_fields_of_the_same_class_only():
    assert Point(1, tags=[2]) == Point(1, tags=[2])
    assert Point(1) != Point(2)
    assert Point(1, _wire="a") == Point(1, _wire="b")  # eq=False
    assert Point(1, note="a") != Point(1, note="b")
    assert Base() != Derived(a=1, c=3)  # another class
    assert (Point(1) == (1, 0)) is False


def test_frozen_records_refuse_assignment_and_hash_mutable_ones_do_not():
    assert hash(Key("a", 1)) == hash(Key("a", 1, cache=object()))
    assert len({Key("a", 1), Key("a", 1), Key("b", 1)}) == 2
    with pytest.raises(TypeError):
        hash(Base())
    k = Key("a")
    with pytest.raises(records.FrozenInstanceError):
        k.version = 2
    with pytest.raises(AttributeError):  # FrozenInstanceError is an AttributeError
        del k.domain


def test_evolve_keys_changes_by_init_argument_and_copies_the_rest():
    p = Point(1, tags=[1], _wire="w", note="n")
    e = records.evolve(p, y=5)
    assert (e.x, e.y, e.tags, e._wire, e.note) == (1, 5, [1], "w", "n") and p.y == 0
    assert records.evolve(p, _wire="v")._wire == "v"
    assert records.evolve(Key("a", 1), version=2) == Key("a", 2)
    assert records.evolve(Hooked([1]), items=[1, 2]).count == 2  # made by __init__: the hook runs


def test_inheritance_order_redefinition_super_and_post_init():
    assert [f.name for f in records.fields(Derived)] == ["b", "c", "a"]
    d = Derived()
    assert (d.a, d.b, d.c, d.total()) == (10, 2, 3, 15)  # zero-argument super() in the slotted class
    assert Hooked([1, 2, 3]).count == 3


def test_repr_skips_hidden_fields():
    assert repr(Point(1, 2)) == "Point(x=1, y=2, tags=[], note='')"


def test_methods_a_class_defines_are_kept():
    @records.define
    class Own:
        a: int = 0

        def __eq__(self, other):
            return True

        def __repr__(self):
            return "own"
    assert Own(1) == Own(2) and repr(Own()) == "own"


@pytest.mark.parametrize("obj", [Point(1, tags=[2], note="n"), Key("a", 3), Derived(b=7), Checked(4)])
def test_pickle_and_copy(obj):
    for clone in (pickle.loads(pickle.dumps(obj)), copy.copy(obj), copy.deepcopy(obj)):
        assert clone == obj and type(clone) is type(obj)


def test_slotted_and_weak_referenceable():
    p = Point(1)
    assert weakref.ref(p)() is p
    with pytest.raises(AttributeError):
        p.not_a_field = 1


# -- the IR's own behaviours --------------------------------------------------------------------------

def test_ir_objects_evolve_compare_and_pickle():
    from onnxkit import ir
    n = ir.Node(op_type="Relu", input=["x"], output=["y"])
    assert records.evolve(n, output=["z"]).output == ["z"] and n.output == ["y"]
    assert n == ir.Node(op_type="Relu", input=["x"], output=["y"])
    assert n != ir.Node(op_type="Relu", input=["x"], output=["z"])
    assert pickle.loads(pickle.dumps(n)) == n
    with pytest.raises(TypeError):
        hash(n)


def test_tensor_contents_compare_by_value_whatever_holds_them():
    """Packed arrays compare by value (a list equals the array of its values), octets by content
    (the reader's zero-copy memoryview equals the bytes a user wrote): a two-argument equality
    through attrs.cmp_using, not attrs' key function."""
    from onnxkit import ir
    a = ir.Tensor(dims=[2], data_type=1, float_data=np.array([1.0, 2.0], np.float32))
    assert a == ir.Tensor(dims=[2], data_type=1, float_data=[1.0, 2.0])
    assert a != ir.Tensor(dims=[2], data_type=1, float_data=[1.0, 3.0])
    assert a != ir.Tensor(dims=[2], data_type=1, float_data=[1.0])
    raw = bytes(range(100))
    for n in (4, 100):  # the short and the long comparison
        t = ir.Tensor(dims=[n], data_type=2, raw_data=raw[:n])
        assert t == ir.Tensor(dims=[n], data_type=2, raw_data=memoryview(raw)[:n])
        assert t != ir.Tensor(dims=[n], data_type=2, raw_data=raw[:n - 1] + b"\xff")
        assert t != ir.Tensor(dims=[n], data_type=2)  # None: absent, unlike any octets


def test_a_decoded_model_equals_the_model_encoded():
    from onnxkit import api, ir
    from onnxkit.wire.reader import decode_message
    t = ir.Tensor(name="w", dims=[3], data_type=1, raw_data=np.arange(3, dtype=np.float32).tobytes())
    g = ir.Graph(name="g", node=[ir.Node(op_type="Relu", input=["w"], output=["y"])], initializer=[t])
    m = ir.Model(ir_version=8, graph=g, opset_import=[ir.OperatorSetId(domain="", version=17)])
    back = decode_message(api.to_bytes(m), "ModelProto")
    assert isinstance(back.graph.initializer[0].raw_data, memoryview)
    assert back == m


def test_schemas_run_their_post_init_hook():
    from onnxkit.wire.schema import MESSAGES

    spec = MESSAGES["OperatorSetIdProto"]
    assert set(spec.by_name) == {"domain", "version"} and spec.by_tag[1].name == "domain"
