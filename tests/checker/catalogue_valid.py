"""Valid models of the catalogue (each must pass with no error; its warnings reported)."""

from __future__ import annotations

import hashlib
import numpy as np

from onnxkit import ir
from onnxkit.dtypes import DataType
from onnxkit.ir import AttributeType, WireInfo

from catalogue_build import (
    add_w, B, bad, branch, external_tensor, F, fn, good, graph, I64, if_node, loop_model, model, node,
    ref_attr, relu, relu_graph, tensor, vi, with_init,
)
from catalogue_invalid_model import custom_domain_op
from catalogue_invalid_data import sparse
from catalogue_invalid_functions import with_devices


# ================================================================== VALID

@good(oracle=True)
def relu_ir10():
    return relu()


@good(oracle=True)
def ir3_initializers_are_inputs():
    w = tensor("W", [1.0, 2.0, 3.0])
    g = graph([node("Add", ["X", "W"], ["Y"], broadcast=1)], [vi("X", F, (2, 3)), vi("W", F, (3,))],
              [vi("Y", F, (2, 3))], [w])
    return model(g, ir_version=3, opsets=(("", 6),))


@bad("repeated-opset-import")
def import_twice_at_one_version():
    # skl2onnx writes the default domain twice at one version: harmless, a warning only
    return relu(opsets=(("", 17), ("ai.onnx", 17)))


@good()
def ir1_attribute_without_type():
    a = ir.Attribute(name="alpha", type=AttributeType.FLOAT, value=0.5, _wire=WireInfo(absent=frozenset({"type"})))
    g = graph([ir.Node(input=["X"], output=["Y"], op_type="LeakyRelu", attribute=[a])], [vi("X")], [vi("Y")])
    return model(g, ir_version=1, opsets=())


@good(oracle=True)
def ir4_constant_initializer():
    return add_w(tensor("W", [1.0, 2.0]))


@good(oracle=True)
def ir4_input_with_default():
    g = graph([node("Add", ["X", "W"], ["Y"])], [vi("X"), vi("W")], [vi("Y")], [tensor("W", [1.0, 2.0])])
    return model(g, ir_version=4, opsets=(("", 9),))


@good(oracle=True)
def if_with_outer_scope():
    then_g = branch("then", [node("Relu", ["X"], ["T"])], ["T"], ir.tensor_type(F, [2]))
    else_g = branch("else", [node("Abs", ["X"], ["E"])], ["E"], ir.tensor_type(F, [2]))
    return model(graph([if_node(then_g, else_g)], [vi("X"), vi("C", B, ())], [vi("Y")]), ir_version=8,
                 opsets=(("", 13),))


@good(oracle=True)
def loop_with_carried_value():
    return loop_model()


@good()
def loop_body_initializer_after_supplied_inputs():
    body = graph([node("Identity", ["cond"], ["cond_out"]), node("Add", ["v", "k"], ["v_out"])],
                 [vi("iter", I64, ()), vi("cond", B, ()), vi("v"), vi("k")], [vi("cond_out", B, ()), vi("v_out")],
                 inits=[tensor("k", [1.0, 1.0])], name="body")
    loop = ir.Node(input=["M", "C", "X"], output=["Y"], op_type="Loop", attribute=[ir.Attribute.make("body", body)])
    return model(graph([loop], [vi("M", I64, ()), vi("C", B, ()), vi("X")], [vi("Y")]))


@good(oracle=True)
def scan_sum():
    body = graph([node("Add", ["acc", "x"], ["acc_out"]), node("Identity", ["acc_out"], ["y"])],
                 [vi("acc", F, (2,)), vi("x", F, (2,))], [vi("acc_out", F, (2,)), vi("y", F, (2,))], name="scan_body")
    scan = ir.Node(input=["I", "X"], output=["S", "Y"], op_type="Scan",
                   attribute=[ir.Attribute.make("body", body), ir.Attribute.make("num_scan_inputs", 1)])
    return model(graph([scan], [vi("I", F, (2,)), vi("X", F, (3, 2))], [vi("S", F, (2,)), vi("Y", F, (3, 2))]))


@good(oracle=True)
def local_function_with_default_and_overload():
    const = ir.Node(input=[], output=["c"], op_type="Constant",
                    attribute=[ref_attr("value_float", "alpha", AttributeType.FLOAT)])
    f = fn("Scale", ["x"], ["y"], [const, node("Mul", ["x", "c"], ["y"])], attributes=[],
           attribute_proto=[ir.Attribute.make("alpha", 1.0)], overload="v1")
    call = node("Scale", ["X"], ["Y"], domain="com.acme", alpha=2.0)
    call.overload = "v1"
    return model(graph([call], [vi("X")], [vi("Y")]), opsets=(("", 17), ("com.acme", 1)), functions=[f])


@good(oracle=True)
def sequences():
    g = graph([node("SequenceConstruct", ["X", "X"], ["Q"]), node("SequenceAt", ["Q", "i"], ["Y"])],
              [vi("X")], [vi("Y"), ir.ValueInfo(name="Q", type=ir.SequenceType(ir.tensor_type(F, [2])))],
              [tensor("i", 1, np.int64)])
    return model(g, opsets=(("", 17),))


@good(oracle=True)
def maps():
    m_type = ir.MapType(I64, ir.tensor_type(F))
    g = graph([node("CastMap", ["M"], ["Y"], domain="ai.onnx.ml")], [ir.ValueInfo(name="M", type=m_type)],
              [vi("Y", F, (1, "N"))])
    return model(g, opsets=(("", 17), ("ai.onnx.ml", 3)))


@good(oracle=True)
def optionals():
    g = graph([node("Optional", ["X"], ["O"]), node("OptionalHasElement", ["O"], ["Y"])], [vi("X")],
              [vi("Y", B, ())], value_info=[ir.ValueInfo(name="O", type=ir.OptionalType(ir.tensor_type(F, [2])))])
    return model(g, ir_version=8, opsets=(("", 18),))


@good(oracle=True)
def sparse_initializer_and_attribute():
    sp = sparse([1.0, 2.0], [0, 3], [4])
    g = graph([node("Constant", [], ["K"], sparse_value=sparse([5.0], [[1, 1]], [2, 2])), node("Relu", ["X"], ["Y"])],
              [vi("X", F, (4,))], [vi("Y", F, (4,)), vi("K", F, (2, 2))])
    g.sparse_initializer.append(sp)
    return model(g, ir_version=8)


@good(files={"w.bin": np.asarray([1.0, 2.0], np.float32).tobytes()}, open_external=True)
def external_data():
    data = np.asarray([1.0, 2.0], np.float32).tobytes()
    return add_w(external_tensor([("location", "w.bin"), ("offset", "0"), ("length", "8"),
                                  ("checksum", hashlib.sha1(data).hexdigest())]))


@good(oracle=True)
def cast_to_float8_ir9():
    return model(graph([node("Cast", ["X"], ["Y"], to=int(DataType.FLOAT8E4M3FN))], [vi("X")],
                       [vi("Y", DataType.FLOAT8E4M3FN)]), ir_version=9, opsets=(("", 19),))


@good()
def devices_and_metadata_ir11():
    c = ir.DeviceConfiguration(name="c", num_devices=2, device=["d0", "d1"])
    spec = ir.ShardingSpec(tensor_name="X", device=[0, 1], sharded_dim=[
        ir.ShardedDim(axis=0, simple_sharding=[ir.SimpleShardedDim(dim_value=2, num_shards=2)])])
    m = with_devices([c], [ir.NodeDeviceConfiguration(configuration_id="c", sharding_spec=[spec])])
    m.metadata_props = [ir.StringStringEntry("model_author", "onnxkit"),
                        ir.StringStringEntry("Image.BitmapPixelFormat", "Rgb8")]
    m.graph.node[0].metadata_props = [ir.StringStringEntry("note", "a")]
    return m


@good(oracle=True)
def constant_broadcast():
    g = graph([node("Constant", [], ["K"], value=tensor("", [1.0, 2.0, 3.0])), node("Add", ["X", "K"], ["Y"])],
              [vi("X", F, ("N", 3))], [vi("Y", F, ("N", 3))])
    return model(g)


@good(warnings=("unknown-domain",))
def custom_domain_node():
    return custom_domain_op()


@good(oracle=True)
def narrow_types_ir13():
    g = relu_graph()
    g.initializer += [ir.Tensor(dims=[3], data_type=DataType.INT4, name="W4", raw_data=b"\x21\x03"),
                      ir.Tensor(dims=[3], data_type=DataType.INT2, name="W2", raw_data=b"\x39")]
    return model(g, ir_version=13, opsets=(("", 25),))


@good()
def float6_ir14():
    g = relu_graph()
    g.initializer.append(ir.Tensor(dims=[2], data_type=DataType.FLOAT6E2M3, name="W6", int32_data=[1, 2]))
    return model(g, ir_version=14, opsets=(("", 25),))


@good()
def training_info():
    m = with_init(tensor("W", [1.0]))
    algo = graph([node("Add", ["W", "W"], ["W_new"])], [], [vi("W_new", F, (1,))], name="algorithm")
    m.training_info = [ir.TrainingInfo(algorithm=algo, update_binding=[ir.StringStringEntry("W", "W_new")])]
    return m


@good(oracle=True)
def unsupplied_optional_input():
    g = graph([node("Clip", ["X", "", "hi"], ["Y"])], [vi("X")], [vi("Y")], [tensor("hi", 6.0)])
    return model(g)
