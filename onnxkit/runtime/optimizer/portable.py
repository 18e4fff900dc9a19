"""The optimized model as a session saves it (``optimized_model_filepath``): without ai.onnxkit.

The graph passes write ai.onnxkit nodes where a model's opset has no standard operator of the
fused function (:mod:`.gelu`, :mod:`.hardswish`, :mod:`.attention`); onnxruntime and other runtimes
know no ai.onnxkit.  :func:`portable` rewrites each such node of the top-level graph as:

* ``Gelu`` (ai.onnxkit Gelu-1, the model's ai.onnx below 20): com.microsoft ``Gelu`` for
  ``approximate = "none"`` and com.microsoft ``FastGelu`` (X only) for ``"tanh"`` — onnxruntime's
  operators of the same function (Part 2's Gelu-20 formulas); FastGelu takes no float64, so a
  float64 tanh Gelu is written as its formula ``0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``
  in ai.onnx nodes;
* ``HardSwish`` (ai.onnxkit HardSwish-1, ai.onnx below 14): ``Mul(x, HardSigmoid(x, alpha = 1/6,
  beta = 0.5))`` — HardSwish's definition (Part 2) in ai.onnx operators from opset 6 (the float
  attribute alpha is 1/6 rounded to float32: within float32's rounding of float64's 1/6);
* ``Attention`` (ai.onnxkit Attention-2): ai.onnx Attention where the model imports ai.onnx 23 or
  later and ``nan_to_zero`` is 0 (onnxruntime's Attention-23 gives the unfused pattern's NaN for a
  row of -inf scores), otherwise no standard or com.microsoft operator computes it (com.microsoft
  MultiHeadAttention takes a 3-D query and no NaN guard), so the fused pattern is written back as
  ai.onnx nodes: ``Transpose(K)``, ``MatMul(Q * s, K^T * s)`` with ``s = sqrt(scale)`` a constant of
  Q's type, ``Add`` of the mask, ``Softmax`` over the last axis, ``Where(IsNaN(p), 0, p)`` for
  ``nan_to_zero = 1``, ``MatMul`` with V;
* ``LookupTable`` (ai.onnxkit LookupTable-3, :mod:`.qlut`): its ``body``'s nodes in its place (the
  region the fusion replaced, names renamed fresh, its constants new initializers): the same
  nodes, so the same results (an ai.onnxkit node of the body is rewritten in turn);
* ``Elementwise`` (ai.onnxkit Elementwise-4, :mod:`.elementwise`): its ``body``'s nodes in its
  place likewise, the body's inputs read as the node's inputs: the region the fusion replaced.

Every rewrite computes the fused node's function (within the element type's tolerance, Clause 11:
the expansions round at each node, as the unfused graph did), so the saved file runs in onnxruntime
with the optimized session's results, and in onnxkit, which fuses it again.  The session config
entry ``session.optimized_model_format`` chooses: ``portable`` (the default) or ``onnxkit`` (the
planned graph as it is, ai.onnxkit nodes kept: for onnxkit only).
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit import records

from ... import ir
from ...domains import opset_map
from ...dtypes import numpy_dtype
from ...errors import OnnxkitError
from ...registry import normalize_domain
from .patterns import FUSED_DOMAIN
from .view import GraphView

#: the session config entry choosing the saved form, and its values
FORMAT_KEY = "session.optimized_model_format"
FORMATS = ("portable", "onnxkit")
#: the element types com.microsoft FastGelu takes (float, float16, bfloat16)
_FAST_GELU_TYPES = (1, 10, 16)


def saved_form(model: ir.Model, config_value=None) -> ir.Model:
    """``model`` as written under ``session.optimized_model_format`` = ``config_value`` (None:
    ``portable``); an unknown value is refused naming the choices."""
    choice = (config_value or "portable").strip()
    if choice not in FORMATS:
        raise OnnxkitError(f"session config {FORMAT_KEY} is {choice!r}; it must be one of {list(FORMATS)}")
    return model if choice == "onnxkit" else portable(model)


def portable(model: ir.Model, registry=None) -> ir.Model:
    """``model`` with every ai.onnxkit node of its top-level graph rewritten (module docstring)
    and the ai.onnxkit import dropped; ``model`` itself if it has none."""
    if model.graph is None or not any(normalize_domain(n.domain) == FUSED_DOMAIN for n in model.graph.node):
        return model
    view = GraphView(model, registry)
    for node in list(view.node):          # the bodies first: their nodes are rewritten below
        if normalize_domain(node.domain) == FUSED_DOMAIN and node.op_type in ("LookupTable", "Elementwise"):
            _inline_body(view, node)
    for node in list(view.node):
        if normalize_domain(node.domain) != FUSED_DOMAIN:
            continue
        if node.op_type == "Gelu":
            _gelu(view, node)
        elif node.op_type == "HardSwish":
            _hard_swish(view, node)
        elif node.op_type == "Attention":
            _attention(view, node)
        else:
            raise OnnxkitError(f"node {node.name!r}: ai.onnxkit {node.op_type} has no portable form")
    out = view.finish()
    if any(normalize_domain(n.domain) == FUSED_DOMAIN for n in out.graph.node):
        return out
    kept = opset_map(out.opset_import)
    kept.pop(FUSED_DOMAIN, None)
    return records.evolve(out, opset_import=[ir.OperatorSetId(domain=d, version=v) for d, v in kept.items()])


def _node(view: GraphView, op_type: str, inputs: list, anchor: ir.Node, output=None, domain: str = "",
          **attrs) -> str:
    """A new node before ``anchor`` (its output a fresh name unless ``output``); its output's name."""
    out = output or view.fresh_name((anchor.name or anchor.output[0]) + "/" + op_type)
    attributes = [_attr(k, v) for k, v in attrs.items()]
    view.insert_before(anchor, ir.Node(input=list(inputs), output=[out], op_type=op_type, domain=domain,
                                       name=view.fresh_name((anchor.name or out) + "/" + op_type), attribute=attributes))
    return out


def _attr(name: str, value) -> ir.Attribute:
    if isinstance(value, str):
        return ir.Attribute(name=name, type=ir.AttributeType.STRING, value=value.encode())
    if isinstance(value, float):
        return ir.Attribute(name=name, type=ir.AttributeType.FLOAT, value=value)
    if isinstance(value, int):
        return ir.Attribute(name=name, type=ir.AttributeType.INT, value=value)
    return ir.Attribute(name=name, type=ir.AttributeType.INTS, value=list(value))


def _elem(view: GraphView, name: str) -> int:
    typed = view.tensor_type(name)
    if typed is None:
        raise OnnxkitError(f"the element type of {name!r} is unknown: its ai.onnxkit reader has no portable form")
    return int(typed[0])


def _constant(view: GraphView, base: str, value: float, elem: int) -> str:
    return view.add_constant(base, np.array(value, dtype=numpy_dtype(elem)), elem)


def _gelu(view: GraphView, node: ir.Node) -> None:
    x = node.input[0]
    mode = node.attr("approximate", b"none")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode == "none" or _elem(view, x) in _FAST_GELU_TYPES:
        view.replace(node, ir.Node(input=[x], output=list(node.output), op_type="Gelu" if mode == "none" else "FastGelu",
                                   domain="com.microsoft", name=node.name))
        view.require_opset("com.microsoft", 1)
        return
    elem = _elem(view, x)                      # float64 tanh: the formula in ai.onnx nodes
    cube = _node(view, "Mul", [x, _node(view, "Mul", [x, x], node)], node)
    inner = _node(view, "Add", [x, _node(view, "Mul", [cube, _constant(view, "gelu_c", 0.044715, elem)], node)], node)
    t = _node(view, "Tanh", [_node(view, "Mul", [inner, _constant(view, "gelu_k", math.sqrt(2 / math.pi), elem)],
                                   node)], node)
    half = _node(view, "Mul", [x, _constant(view, "gelu_half", 0.5, elem)], node)
    one = _node(view, "Add", [t, _constant(view, "gelu_one", 1.0, elem)], node)
    view.replace(node, ir.Node(input=[half, one], output=list(node.output), op_type="Mul", name=node.name))


def _hard_swish(view: GraphView, node: ir.Node) -> None:
    x = node.input[0]
    sig = _node(view, "HardSigmoid", [x], node, alpha=1.0 / 6.0, beta=0.5)
    view.replace(node, ir.Node(input=[x, sig], output=list(node.output), op_type="Mul", name=node.name))


def _attention(view: GraphView, node: ir.Node) -> None:
    guard = int(node.attr("nan_to_zero", 0) or 0)
    if not guard and view.version("") >= 23:
        view.replace(node, ir.Node(input=list(node.input), output=list(node.output), op_type="Attention",
                                   name=node.name, attribute=[a for a in node.attribute if a.name != "nan_to_zero"]))
        return
    q, k, v = node.input[:3]
    mask = node.input[3] if len(node.input) > 3 and node.input[3] else None
    elem = _elem(view, q)
    scale = node.attr("scale")
    if scale is None:
        dims = view.tensor_type(q)[1]
        if dims is None or not isinstance(dims[-1], int):
            raise OnnxkitError(f"node {node.name!r}: Attention's head size is unknown: no portable form")
        scale = 1.0 / math.sqrt(dims[-1])
    s = _constant(view, "attention_scale", math.sqrt(float(scale)), elem)
    kt = _node(view, "Transpose", [k], node, perm=[0, 1, 3, 2])
    scores = _node(view, "MatMul", [_node(view, "Mul", [q, s], node), _node(view, "Mul", [kt, s], node)], node)
    if mask is not None:
        scores = _node(view, "Add", [scores, mask], node)
    p = _node(view, "Softmax", [scores], node, axis=-1 if view.version("") >= 13 else 3)
    if guard:
        zero = _constant(view, "attention_zero", 0.0, elem)
        p = _node(view, "Where", [_node(view, "IsNaN", [p], node), zero, p], node)
    view.replace(node, ir.Node(input=[p, v], output=list(node.output[:1]), op_type="MatMul", name=node.name))


def _inline_body(view: GraphView, node: ir.Node) -> None:
    """``node``'s ``body`` nodes in its place, the body's inputs read as the node's."""
    body = node.attr("body")
    names = {vi.name: x for vi, x in zip(body.input, node.input)}
    names[body.output[0].name] = node.output[0]
    for t in body.initializer:
        names[t.name] = view.add_constant(t.name, t.numpy(), t.data_type)
    made = []
    for n in body.node:
        out = [names.setdefault(o, view.fresh_name(o)) if o else "" for o in n.output]
        made.append(ir.Node(input=[names[i] if i else "" for i in n.input], output=out, op_type=n.op_type,
                            domain=n.domain, name=view.fresh_name(n.name or out[0]), attribute=list(n.attribute)))
    for n in made[:-1]:
        view.insert_before(node, n)
    view.replace(node, made[-1])


__all__ = ["portable", "saved_form", "FORMAT_KEY", "FORMATS"]
