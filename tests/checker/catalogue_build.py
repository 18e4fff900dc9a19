"""The catalogue's building blocks (:mod:`catalogue`): :class:`Case`, the registering decorators
:func:`bad` / :func:`good` that fill :data:`INVALID` and :data:`VALID`, and the model builders the
section modules share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from onnxkit import ir
from onnxkit.dtypes import DataType
from onnxkit.limits import DEFAULT_LIMITS, Limits

F, I64, B, S = DataType.FLOAT, DataType.INT64, DataType.BOOL, DataType.STRING


@dataclass
class Case:
    name: str
    build: Callable
    code: Optional[str] = None
    also: tuple = ()
    warnings: tuple = ()
    limits: Limits = DEFAULT_LIMITS
    files: dict = field(default_factory=dict)  # written beside model.onnx; the case is checked by path
    path: bool = False
    open_external: bool = False
    oracle: bool = False  # valid case that onnx.checker must accept too
    encode: bool = True  # False: checked as the IR object itself, not its octets
    registry: object = None  # None: the installed plugins


INVALID: list = []
VALID: list = []


def bad(code, also=(), **kw):
    def deco(fn):
        INVALID.append(Case(fn.__name__, fn, code, tuple(also), **kw))
        return fn
    return deco


def good(warnings=(), **kw):
    def deco(fn):
        VALID.append(Case(fn.__name__, fn, None, (), tuple(warnings), **kw))
        return fn
    return deco


# -- builders -------------------------------------------------------------------------------------

def vi(name, elem=F, shape=(2,)):
    return ir.ValueInfo(name=name, type=ir.tensor_type(elem, shape))


def node(op, inputs, outputs, name="", domain="", **attrs):
    return ir.Node(input=list(inputs), output=list(outputs), name=name, op_type=op, domain=domain,
                   attribute=[ir.Attribute.make(k, v) for k, v in attrs.items()])


def tensor(name, values, dtype=np.float32):
    return ir.Tensor.from_numpy(np.asarray(values, dtype=dtype), name=name)


def graph(nodes=(), inputs=(), outputs=(), inits=(), name="main", **kw):
    return ir.Graph(node=list(nodes), name=name, input=list(inputs), output=list(outputs), initializer=list(inits), **kw)


def model(g=None, ir_version=10, opsets=(("", 17),), **kw):
    return ir.Model(ir_version=ir_version, opset_import=[ir.OperatorSetId(d, v) for d, v in opsets], graph=g,
                    producer_name="onnxkit-tests", **kw)


def relu(**kw):
    """The base model: Y = Relu(X), X and Y float [2]."""
    return model(graph([node("Relu", ["X"], ["Y"])], [vi("X")], [vi("Y")]), **kw)


def relu_graph(name="main", **kw):
    return graph([node("Relu", ["X"], ["Y"])], [vi("X")], [vi("Y")], name=name, **kw)


def if_node(then_g, else_g, outputs=("Y",), cond="C"):
    return ir.Node(input=[cond], output=list(outputs), op_type="If",
                   attribute=[ir.Attribute.make("then_branch", then_g), ir.Attribute.make("else_branch", else_g)])


def branch(name, nodes=(), outputs=("Y",), out_type=None):
    return graph(nodes, [], [ir.ValueInfo(name=o, type=out_type) for o in outputs], name=name)


def ref_attr(name, ref, atype):
    return ir.Attribute(name=name, type=atype, ref_attr_name=ref)


def raw_field(tag, wire_type, payload: bytes) -> bytes:
    """A field's octets (key and value), for wire records."""
    from onnxkit.wire.varint import encode_varint

    key = encode_varint((tag << 3) | wire_type)
    if wire_type == 2:
        return key + encode_varint(len(payload)) + payload
    return key + payload


def loop_model(body_inits=(), ir_version=10):
    body = graph([node("Identity", ["cond"], ["cond_out"]), node("Relu", ["v"], ["v_out"])],
                 [vi("iter", I64, ()), vi("cond", B, ()), vi("v")], [vi("cond_out", B, ()), vi("v_out")],
                 inits=body_inits, name="body")
    loop = ir.Node(input=["M", "C", "X"], output=["Y"], op_type="Loop", attribute=[ir.Attribute.make("body", body)])
    return model(graph([loop], [vi("M", I64, ()), vi("C", B, ()), vi("X")], [vi("Y")]), ir_version=ir_version)


def fn(name, inputs, outputs, nodes, domain="com.acme", attributes=(), attribute_proto=(), opsets=(("", 17),),
       overload=""):
    return ir.Function(name=name, domain=domain, input=list(inputs), output=list(outputs), node=list(nodes),
                       attribute=list(attributes), attribute_proto=list(attribute_proto), overload=overload,
                       opset_import=[ir.OperatorSetId(d, v) for d, v in opsets])


def with_init(t, **kw):
    """The base model plus one (unused) initializer ``t``."""
    g = relu_graph()
    g.initializer.append(t)
    return model(g, **kw)


def external_tensor(entries, raw=None, dims=(2,), location=1):
    return ir.Tensor(dims=list(dims), data_type=F, name="W", raw_data=raw, data_location=location,
                     external_data=[ir.StringStringEntry(k, v) for k, v in entries])


def add_w(w, x_shape=(2,)):
    """Y = Add(X, W) with W an initializer."""
    return model(graph([node("Add", ["X", "W"], ["Y"])], [vi("X", F, x_shape)], [vi("Y", F, x_shape)], [w]))
