"""Invalid models of the catalogue: functions, metadata and devices."""

from __future__ import annotations

from onnxkit import ir

from catalogue_build import bad, fn, graph, model, node, relu, vi


# ================================================================== INVALID: functions

def call_acme(op="F", functions=(), opsets=(("", 17), ("com.acme", 1))):
    g = graph([node(op, ["X"], ["Y"], domain="com.acme")], [vi("X")], [vi("Y")])
    return model(g, opsets=opsets, functions=list(functions))


@bad("duplicate-function")
def function_twice():
    f = fn("F", ["x"], ["y"], [node("Relu", ["x"], ["y"])])
    return call_acme(functions=[f, fn("F", ["x"], ["y"], [node("Abs", ["x"], ["y"])])])


@bad("function-recursion")
def mutual_recursion():
    f = fn("F", ["x"], ["y"], [node("G", ["x"], ["y"], domain="com.acme")], opsets=(("", 17), ("com.acme", 1)))
    g = fn("G", ["x"], ["y"], [node("F", ["x"], ["y"], domain="com.acme")], opsets=(("", 17), ("com.acme", 1)))
    return call_acme(functions=[f, g])


@bad("function-domain-not-imported")
def function_in_unimported_domain():
    m = relu()
    m.functions.append(fn("F", ["x"], ["y"], [node("Relu", ["x"], ["y"])], domain="com.other"))
    return m


@bad("function-opset-mismatch")
def function_imports_other_version():
    f = fn("F", ["x"], ["y"], [node("Relu", ["x"], ["y"])], opsets=(("", 16),))
    return call_acme(functions=[f])


@bad("duplicate-definition")
def function_body_ssa():
    f = fn("F", ["x"], ["y"], [node("Relu", ["x"], ["y"]), node("Abs", ["x"], ["y"])])
    return call_acme(functions=[f])


@bad("undefined-value")
def function_body_undefined():
    f = fn("F", ["x"], ["y"], [node("Relu", ["z"], ["y"])])
    return call_acme(functions=[f])


@bad("domain-not-imported")
def function_body_domain_not_imported():
    f = fn("F", ["x"], ["y"], [node("Bar", ["x"], ["y"], domain="com.bar")])
    return call_acme(functions=[f])


# ================================================================== INVALID: metadata, devices

@bad("duplicate-metadata-key")
def model_metadata_twice():
    m = relu()
    m.metadata_props = [ir.StringStringEntry("model_author", "a"), ir.StringStringEntry("model_author", "b")]
    return m


@bad("duplicate-metadata-key")
def image_keys_ignore_case():
    m = relu()
    m.graph.node[0].metadata_props = [ir.StringStringEntry("Image.ColorSpaceGamma", "SRGB"),
                                      ir.StringStringEntry("image.colorspacegamma", "Linear")]
    return m


@bad("invalid-metadata-value")
def image_pixel_format_unknown():
    m = relu()
    m.metadata_props = [ir.StringStringEntry("Image.BitmapPixelFormat", "Rgb9")]
    return m


def with_devices(configs=(), node_configs=()):
    m = relu(ir_version=11)
    m.configuration = list(configs)
    m.graph.node[0].device_configurations = list(node_configs)
    return m


@bad("unknown-device-configuration")
def node_device_not_declared():
    return with_devices([], [ir.NodeDeviceConfiguration(configuration_id="gpu")])


@bad("duplicate-device-configuration")
def device_configuration_twice():
    c = ir.DeviceConfiguration(name="c", num_devices=1, device=["d0"])
    return with_devices([c, ir.DeviceConfiguration(name="c", num_devices=1, device=["d1"])])


@bad("device-count-mismatch")
def device_count_differs():
    return with_devices([ir.DeviceConfiguration(name="c", num_devices=2, device=["d0"])])


@bad("unknown-sharding-tensor")
def sharding_names_other_value():
    c = ir.DeviceConfiguration(name="c", num_devices=2, device=["d0", "d1"])
    nc = ir.NodeDeviceConfiguration(configuration_id="c", sharding_spec=[ir.ShardingSpec(tensor_name="Q", device=[0, 1])])
    return with_devices([c], [nc])


@bad("mandatory-field-missing", also=())
def simple_sharding_without_dim():
    c = ir.DeviceConfiguration(name="c", num_devices=2, device=["d0", "d1"])
    spec = ir.ShardingSpec(tensor_name="X", device=[0, 1], sharded_dim=[
        ir.ShardedDim(axis=0, simple_sharding=[ir.SimpleShardedDim(num_shards=2)])])
    return with_devices([c], [ir.NodeDeviceConfiguration(configuration_id="c", sharding_spec=[spec])])


@bad("unknown-annotation-tensor")
def annotation_names_nothing():
    m = relu()
    m.graph.quantization_annotation = [ir.TensorAnnotation(tensor_name="Q")]
    return m


@bad("training-binding-invalid")
def training_binding_names_nothing():
    m = relu()
    m.training_info = [ir.TrainingInfo(algorithm=graph([], [], [], name="algorithm"),
                                       update_binding=[ir.StringStringEntry("Q", "R")])]
    return m
