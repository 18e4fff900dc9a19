"""The rules of Clause 9 (and 6.5.2, 6.6.4, 8.4) as the inference engine applies them."""

from __future__ import annotations

import numpy as np
import pytest

from onnxkit import ir
from onnxkit.dtypes import DataType
from onnxkit.errors import ValidationError
from onnxkit.inference import infer_model, infer_shapes
from onnxkit.registry import get_registry

F, D, I64 = int(DataType.FLOAT), int(DataType.DOUBLE), int(DataType.INT64)


def vi(name, elem=F, shape=None):
    return ir.ValueInfo(name=name, type=None if elem is None else ir.TensorType(elem, shape))


def node(op, inputs, outputs, domain="", **attrs):
    return ir.Node(input=list(inputs), output=list(outputs), op_type=op, domain=domain,
                   attribute=[ir.Attribute.make(k, v) for k, v in attrs.items()])


def const(name, array):
    return ir.Tensor.from_numpy(np.asarray(array), name=name)


def model(nodes, inputs, outputs, initializers=(), value_info=(), opset=18, functions=(), extra_opsets=()):
    g = ir.Graph(node=list(nodes), name="g", input=list(inputs), output=list(outputs),
                 initializer=list(initializers), value_info=list(value_info))
    ops = [ir.OperatorSetId("", opset), *extra_opsets]
    return ir.Model(ir_version=10, opset_import=ops, graph=g, functions=list(functions))


def shape_of(result, name, path=""):
    t = result.type_of(name, path)
    assert t is not None, f"{name} not inferred"
    return None if t.shape is None else list(t.shape.values)


# -- 9.3: symbolic dimensions ---------------------------------------------------------------------

def test_concat_of_static_and_variable_is_a_fresh_variable():
    m = model([node("Concat", ["x", "y"], ["z"], axis=1)], [vi("x", F, [2, 5]), vi("y", F, [2, "N"])], [vi("z")])
    r = infer_model(m)
    z = shape_of(r, "z")
    assert z[0] == 2
    assert isinstance(z[1], str)          # a variable, not unknown ...
    assert z[1] not in ("N", "N+5")       # ... and neither N nor N + 5
    assert not r.errors


def test_concat_of_static_extents_adds_them():
    m = model([node("Concat", ["x", "y"], ["z"], axis=0)], [vi("x", F, [5, 3]), vi("y", F, [7, 3])], [vi("z")])
    assert shape_of(infer_model(m), "z") == [12, 3]


def test_fresh_variables_are_distinct_and_unused_in_the_model():
    m = model([node("Concat", ["x", "y"], ["z"], axis=0), node("Concat", ["x", "y"], ["w"], axis=0)],
              [vi("x", F, ["unk__1"]), vi("y", F, [3])], [vi("z"), vi("w")])
    r = infer_model(m)
    a, b = shape_of(r, "z")[0], shape_of(r, "w")[0]
    assert isinstance(a, str) and isinstance(b, str)
    assert len({a, b, "unk__1"}) == 3


def test_add_of_same_variable_keeps_it():
    m = model([node("Add", ["x", "y"], ["z"])], [vi("x", F, ["N", 3]), vi("y", F, ["N", 3])], [vi("z")])
    assert shape_of(infer_model(m), "z") == ["N", 3]


@pytest.mark.parametrize("a, b, expected", [
    (["N"], ["M"], [None]),       # could be N or M: never equated (6.6.4, 9.3)
    (["N"], [1], ["N"]),          # 1 stretches
    ([1], ["M"], ["M"]),
    (["N"], [3], [3]),
    ([None], ["N"], [None]),
    (["N", 1], [4], ["N", 4]),
])
def test_broadcasting_with_variables(a, b, expected):
    m = model([node("Mul", ["x", "y"], ["z"])], [vi("x", F, a), vi("y", F, b)], [vi("z")])
    r = infer_model(m)
    assert shape_of(r, "z") == expected
    assert not r.errors


def test_broadcasting_static_clash_is_an_error():
    m = model([node("Add", ["x", "y"], ["z"])], [vi("x", F, [3]), vi("y", F, [4])], [vi("z")])
    r = infer_model(m)
    assert "inference-error" in {d.code for d in r.errors}


def test_matmul_never_equates_variables():
    m = model([node("MatMul", ["a", "b"], ["c"])], [vi("a", F, ["B", "M", "K"]), vi("b", F, ["K", "N"])], [vi("c")])
    assert shape_of(infer_model(m), "c") == ["B", "M", "N"]


def test_subgraph_variable_is_the_outer_variable():
    then_g = ir.Graph(node=[node("Identity", ["x"], ["t"])], name="then", output=[vi("t", None)])
    else_g = ir.Graph(node=[node("Relu", ["x"], ["e"])], name="else", output=[vi("e", None)])
    n = ir.Node(input=["c"], output=["y"], op_type="If", name="if1",
                attribute=[ir.Attribute.make("then_branch", then_g), ir.Attribute.make("else_branch", else_g)])
    m = model([n], [vi("c", int(DataType.BOOL), []), vi("x", F, ["N", 4])], [vi("y")])
    r = infer_model(m)
    assert shape_of(r, "t", "if1.then_branch") == ["N", 4]
    assert shape_of(r, "y") == ["N", 4]


def test_if_branches_that_differ_give_unknown_extents():
    then_g = ir.Graph(node=[node("Identity", ["x"], ["t"])], name="then", output=[vi("t", None)])
    else_g = ir.Graph(node=[node("Identity", ["w"], ["e"])], name="else", output=[vi("e", None)])
    n = ir.Node(input=["c"], output=["y"], op_type="If",
                attribute=[ir.Attribute.make("then_branch", then_g), ir.Attribute.make("else_branch", else_g)])
    m = model([n], [vi("c", int(DataType.BOOL), []), vi("x", F, ["N", 4]), vi("w", F, ["M", 4])], [vi("y")])
    assert shape_of(infer_model(m), "y") == [None, 4]


def test_loop_carried_growth_is_unknown_not_wrong():
    body = ir.Graph(
        node=[node("Identity", ["cond_in"], ["cond_out"]), node("Concat", ["acc_in", "x"], ["acc_out"], axis=0)],
        name="body", input=[vi("i", I64, []), vi("cond_in", int(DataType.BOOL), []), vi("acc_in", None)],
        output=[vi("cond_out", None), vi("acc_out", None)])
    n = ir.Node(input=["trip", "cond", "acc0"], output=["acc"], op_type="Loop", attribute=[ir.Attribute.make("body", body)])
    m = model([n], [vi("trip", I64, []), vi("cond", int(DataType.BOOL), []), vi("acc0", F, [2, 3]), vi("x", F, [1, 3])],
              [vi("acc")])
    r = infer_model(m)
    acc = shape_of(r, "acc")
    assert len(acc) == 2 and acc[1] == 3 and not isinstance(acc[0], int)
    assert not r.errors


# -- 9.4: unknown is never a failure; contradictions are reported -----------------------------------

def test_unknown_never_fails():
    m = model([node("Relu", ["x"], ["a"]), node("Add", ["a", "b"], ["c"]), node("Reshape", ["c", "s"], ["d"]),
               node("NoSuchOp", ["d"], ["e"]), node("Relu", ["e"], ["f"])],
              [vi("x", F, None), vi("b", None), vi("s", I64, None)], [vi("f", F, None)])
    r = infer_model(m)
    assert not r.errors
    assert r.type_of("e") is None
    assert "unknown-operator" in {d.code for d in r.warnings}
    out = infer_shapes(m, strict=True)  # nothing to contradict: no exception
    assert out.graph.node == m.graph.node


def test_declared_shape_contradiction_is_reported():
    m = model([node("Relu", ["x"], ["y"]), node("Relu", ["y"], ["z"])], [vi("x", F, [2, 3])], [vi("z", F, [2, 3])],
              value_info=[vi("y", F, [2, 4])])
    r = infer_model(m)
    assert not r.errors and [d.code for d in r.warnings] == ["inferred-shape-mismatch"]  # a stale declaration
    with pytest.raises(ValidationError):
        infer_shapes(m, strict=True)


def test_declared_type_contradiction_is_reported():
    m = model([node("Cast", ["x"], ["y"], to=I64)], [vi("x", F, [2])], [vi("y", D, [2])])
    r = infer_model(m)
    assert [d.code for d in r.errors] == ["inferred-type-mismatch"]


def test_declared_rank_contradiction_is_reported():
    m = model([node("Relu", ["x"], ["y"])], [vi("x", F, ["N", 3])], [vi("y", F, ["N"])])
    assert [d.code for d in infer_model(m).warnings] == ["inferred-shape-mismatch"]


def test_declaration_with_other_variable_is_not_a_contradiction():
    m = model([node("Relu", ["x"], ["y"])], [vi("x", F, ["N", 3])], [vi("y", F, ["M", None])])
    assert not infer_model(m).errors


# -- constant propagation -------------------------------------------------------------------------

def test_shape_gather_concat_reshape_gives_a_static_shape():
    nodes = [
        node("Shape", ["x"], ["s"]),
        node("Gather", ["s", "i0"], ["d0"], axis=0),
        node("Unsqueeze", ["d0", "ax"], ["d0u"]),
        node("Concat", ["d0u", "minus1"], ["target"], axis=0),
        node("Reshape", ["x", "target"], ["y"]),
    ]
    inits = [const("i0", np.array(0, dtype=np.int64)), const("ax", np.array([0], dtype=np.int64)),
             const("minus1", np.array([-1], dtype=np.int64))]
    m = model(nodes, [vi("x", F, [2, 3, 4])], [vi("y")], inits)
    r = infer_model(m)
    assert shape_of(r, "y") == [2, 12]
    # with a variable batch the variable goes through and -1 is still resolved
    m = model(nodes, [vi("x", F, ["N", 3, 4])], [vi("y")], inits)
    assert shape_of(infer_model(m), "y") == ["N", 12]


def test_constant_and_constant_of_shape():
    nodes = [
        node("Constant", [], ["c"], value=const("", np.array([2, 3], dtype=np.int64))),
        node("Mul", ["c", "two"], ["c2"]),
        node("ConstantOfShape", ["c2"], ["z"]),
        node("Range", ["zero", "ten", "two_s"], ["r"]),
        node("Size", ["z"], ["n"]),
        node("Cast", ["n"], ["nf"], to=F),
    ]
    inits = [const("two", np.array([2], dtype=np.int64)), const("zero", np.array(0, dtype=np.int64)),
             const("ten", np.array(10, dtype=np.int64)), const("two_s", np.array(2, dtype=np.int64))]
    m = model(nodes, [], [vi("z"), vi("r"), vi("nf")], inits)
    r = infer_model(m)
    assert shape_of(r, "z") == [4, 6]
    assert shape_of(r, "r") == [5]
    assert r.type_of("nf").elem_type == F and shape_of(r, "nf") == []


def test_graph_input_with_initializer_is_not_a_constant():
    # an initializer that is also an input is only a default (7.2): its value is not propagated
    nodes = [node("Reshape", ["x", "s"], ["y"])]
    m = model(nodes, [vi("x", F, [2, 6]), vi("s", I64, [2])], [vi("y")], [const("s", np.array([3, 4], dtype=np.int64))])
    assert shape_of(infer_model(m), "y") == [None, None]


# -- functions (8.4): inferred polymorphically ------------------------------------------------------

def _local_function():
    return ir.Function(name="AddRelu", domain="local", input=["a", "b"], output=["out"],
                       node=[node("Add", ["a", "b"], ["s"]), node("Relu", ["s"], ["out"])],
                       opset_import=[ir.OperatorSetId("", 18)])


def test_local_function_is_inferred_per_call():
    nodes = [node("AddRelu", ["x", "x"], ["y"], domain="local"), node("AddRelu", ["u", "v"], ["w"], domain="local")]
    m = model(nodes, [vi("x", F, [3]), vi("u", D, ["N", 1]), vi("v", D, [4])], [vi("y"), vi("w")],
              functions=[_local_function()], extra_opsets=[ir.OperatorSetId("local", 1)])
    r = infer_model(m)
    assert r.type_of("y") == ir.TensorType(F, [3])
    assert r.type_of("w") == ir.TensorType(D, ["N", 4])


def test_function_attribute_references_are_substituted():
    fn = ir.Function(name="Cat", domain="local", input=["a", "b"], output=["out"], attribute=["axis"],
                     node=[ir.Node(input=["a", "b"], output=["out"], op_type="Concat",
                                   attribute=[ir.Attribute(name="axis", type=2, ref_attr_name="axis")])],
                     opset_import=[ir.OperatorSetId("", 18)])
    m = model([node("Cat", ["x", "x"], ["y"], domain="local", axis=1)], [vi("x", F, [2, 3])], [vi("y")],
              functions=[fn], extra_opsets=[ir.OperatorSetId("local", 1)])
    assert shape_of(infer_model(m), "y") == [2, 6]


class _Without:
    """A registry without some inference functions (to exercise the fallbacks)."""

    def __init__(self, registry, drop):
        self._r = registry
        self.inference = {k: v for k, v in registry.inference.items() if k[1] not in drop}

    def bind(self, *args):
        return self._r.bind(*args)


def test_schema_function_body_is_the_fallback():
    m = model([node("SwiGLU", ["a", "b"], ["y"])], [vi("a", F, ["N", 8]), vi("b", F, ["N", 8])], [vi("y")], opset=28)
    r = infer_model(m, _Without(get_registry(), {"SwiGLU"}))
    assert r.type_of("y") == ir.TensorType(F, ["N", 8])
    assert not r.warnings


def test_missing_inference_function_is_a_warning():
    m = model([node("Transpose", ["x"], ["y"]), node("Relu", ["y"], ["z"])], [vi("x", F, [2])], [vi("z", F, [2])])
    r = infer_model(m, _Without(get_registry(), {"Transpose"}))
    assert r.type_of("y") is None
    assert "no-inference-function" in {d.code for d in r.warnings}
    assert not r.errors


def test_every_definition_has_an_inference_function():
    reg = get_registry()
    missing = [s for (d, v), opset in reg.operator_sets.items() if d in ("", "ai.onnx.preview", "ai.onnx.preview.training")
               for s in opset if s.key not in reg.inference]
    assert not missing, sorted({str(s) for s in missing})


# -- infer_shapes -----------------------------------------------------------------------------------

def test_infer_shapes_annotates_intermediates_and_subgraphs():
    then_g = ir.Graph(node=[node("Relu", ["x"], ["t1"]), node("Neg", ["t1"], ["t"])], name="then", output=[vi("t", None)])
    else_g = ir.Graph(node=[node("Neg", ["x"], ["e"])], name="else", output=[vi("e", None)])
    n = ir.Node(input=["c"], output=["y"], op_type="If", name="if1",
                attribute=[ir.Attribute.make("then_branch", then_g), ir.Attribute.make("else_branch", else_g)])
    m = model([node("Abs", ["x0"], ["x"]), n], [vi("c", int(DataType.BOOL), []), vi("x0", F, ["N"])], [vi("y", F, ["N"])])
    out = infer_shapes(m)
    assert {v.name: v.type for v in out.graph.value_info} == {"x": ir.TensorType(F, ["N"])}
    then_out = out.graph.node[1].attribute[0].value
    assert {v.name for v in then_out.value_info} == {"t1"}
    assert then_out.output[0].type == ir.TensorType(F, ["N"])
    assert m.graph.value_info == [] and then_g.value_info == []  # the input model is unchanged
    from onnxkit.api import load, to_bytes

    again = load(to_bytes(out))
    assert {v.name for v in again.graph.value_info} == {"x"}


# -- the context an inference function of a plugin receives -------------------------------------

def _custom_registry(fn):
    """The installed plugins plus one defining com.example::Widen-1 with inference function ``fn``."""
    import types

    from onnxkit import hookimpl
    from onnxkit.ir import AttributeType
    from onnxkit.registry import build_registry
    from onnxkit.schema import AttributeDef, FormalParameter, OperatorSet, OpSchema, TypeConstraint

    schema = OpSchema(domain="com.example", name="Widen", since_version=1,
                      inputs=(FormalParameter("X", "T"), FormalParameter("S", "tensor(int64)", "optional")),
                      outputs=(FormalParameter("Y", "T"), FormalParameter("N", "tensor(int64)", "optional")),
                      attributes={"factor": AttributeDef("factor", AttributeType.INT, False, 2)},
                      type_constraints=(TypeConstraint("T", ("tensor(float)", "tensor(double)")),),
                      min_input=1, max_input=2, min_output=1, max_output=2)
    mod = types.SimpleNamespace()

    def onnxkit_operator_sets():
        return [OperatorSet("com.example", 1, {"Widen": schema})]

    def onnxkit_inference_functions():
        return {("com.example", "Widen", 1): fn}

    mod.onnxkit_operator_sets = hookimpl(onnxkit_operator_sets)
    mod.onnxkit_inference_functions = hookimpl(onnxkit_inference_functions)
    return build_registry(extra=[("widen-test", mod)])


def test_plugin_inference_function_sees_the_context():
    from onnxkit.inference.common import constraint_type, dims_of, elem_of, tensor

    seen = {}

    def widen(ctx):
        seen.update(factor=ctx.attr("factor"), given=ctx.has_attr("factor"), n_in=ctx.num_inputs, n_out=ctx.num_outputs,
                    opset=ctx.opset_version, since=ctx.since_version, has_s=ctx.has_input(1),
                    s=None if ctx.constant(1) is None else ctx.constant(1).tolist(), t=constraint_type(ctx, 0))
        d = dims_of(ctx.input_type(0))
        last = d[-1] * ctx.attr("factor") if isinstance(d[-1], int) else ctx.fresh_dim()
        ctx.set_output(0, tensor(elem_of(ctx.input_type(0)), d[:-1] + [last]))
        ctx.set_output(1, tensor(I64, [1]), np.array([7], dtype=np.int64))

    nodes = [node("Widen", ["x", "s"], ["y", "n"], domain="com.example"),
             node("Widen", ["z"], ["w"], domain="com.example", factor=3),
             node("Reshape", ["x", "n"], ["r"])]
    m = model(nodes, [vi("x", F, ["B", 7]), vi("z", D, [2, "K"])], [vi("y"), vi("w", None), vi("r")],
              [const("s", np.array([1, 2], dtype=np.int64))], extra_opsets=[ir.OperatorSetId("com.example", 1)])
    r = infer_model(m, _custom_registry(widen))
    assert not r.diagnostics
    assert shape_of(r, "y") == ["B", 14]
    assert r.type_of("r") == ir.TensorType(F, [7])    # the value set by the function was propagated
    w = shape_of(r, "w")
    assert w[0] == 2 and isinstance(w[1], str) and w[1] != "K"
    assert seen["factor"] == 3 and seen["given"] and seen["n_in"] == 1 and seen["opset"] == 1 and seen["since"] == 1
    assert not seen["has_s"] and seen["t"] == ir.TensorType(D)


def test_a_raising_inference_function_leaves_its_outputs_unknown():
    def broken(ctx):
        raise ZeroDivisionError("bug")

    m = model([node("Widen", ["x"], ["y"], domain="com.example"), node("Relu", ["y"], ["z"])], [vi("x", F, [2])],
              [vi("z")], extra_opsets=[ir.OperatorSetId("com.example", 1)])
    r = infer_model(m, _custom_registry(broken))
    assert r.type_of("y") is None and not r.errors
    assert "inference-function-failed" in {d.code for d in r.warnings}


def test_symbolic_values_through_equal_where_and_reduce_prod():
    # the exporters' pattern: Expand(x, Where(Equal(shape, -1), 1, shape)); and a size as ReduceProd of a shape
    nodes = [
        node("Shape", ["y"], ["s"]),
        node("Equal", ["s", "minus1"], ["is_m1"]),
        node("Where", ["is_m1", "one", "s"], ["target"]),
        node("Expand", ["x", "target"], ["e"]),
        node("Shape", ["z"], ["zs"]),
        node("ReduceProd", ["zs"], ["n"], keepdims=1),
        node("Reshape", ["z", "n"], ["flat"]),
    ]
    inits = [const("minus1", np.array([-1], dtype=np.int64)), const("one", np.array([1], dtype=np.int64))]
    m = model(nodes, [vi("x", F, [1, 1]), vi("y", F, ["N", 5]), vi("z", F, [2, 3, 4])], [vi("e"), vi("flat")], inits)
    r = infer_model(m)
    assert shape_of(r, "e") == ["N", 5]
    assert shape_of(r, "flat") == [24]


def test_cli_infer_prints_the_table_and_writes_value_info(tmp_path, capsys):
    from onnxkit.api import load, save
    from onnxkit.cli import main

    m = model([node("Relu", ["x"], ["a"]), node("Concat", ["a", "x"], ["y"], axis=0)], [vi("x", F, ["N", 3])],
              [vi("y", F, None)])
    src, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    save(m, src)
    assert main(["infer", str(src), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "tensor(float)[N, 3]" in text and "a" in text
    written = load(out)
    assert [(v.name, str(v.type)) for v in written.graph.value_info] == [("a", "tensor(float)[N, 3]")]
    assert written.graph.output[0].type.shape is not None  # the output's shape filled in


def test_cli_infer_exit_status_on_contradiction(tmp_path, capsys):
    from onnxkit.api import save
    from onnxkit.cli import main

    m = model([node("Relu", ["x"], ["y"])], [vi("x", F, [2])], [vi("y", F, [3])])
    save(m, tmp_path / "m.onnx")
    assert main(["infer", str(tmp_path / "m.onnx"), "-q"]) == 0  # a contradicted shape is a warning
    assert "inferred-shape-mismatch" in capsys.readouterr().out
    assert main(["infer", str(tmp_path / "m.onnx"), "-q", "--strict"]) == 1


def test_contradiction_severities_are_the_checker_table():
    from onnxkit.checker.codes import CODES
    from onnxkit.inference.engine import CONTRADICTION_SEVERITY

    assert CONTRADICTION_SEVERITY == {c: CODES[c].severity for c in CONTRADICTION_SEVERITY}
    assert CONTRADICTION_SEVERITY == {"inferred-type-mismatch": "error", "inferred-shape-mismatch": "warning"}
