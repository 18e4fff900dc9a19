"""Invalid models of the catalogue: inference (Clause 9.4), tensors, external data."""

from __future__ import annotations

import numpy as np

from onnxkit import ir
from onnxkit.dtypes import DataType

from catalogue_build import (
    add_w, bad, external_tensor, F, graph, I64, model, node, relu_graph, S, tensor, vi, with_init,
)


# ================================================================== INVALID: inference (Clause 9.4)

@bad("inferred-type-mismatch")
def cast_declared_as_another_type():
    # Cast's output may be int32 by its constraint, but `to` says FLOAT: inference contradicts the declaration
    return model(graph([node("Cast", ["X"], ["Y"], to=int(F))], [vi("X", I64)], [vi("Y", DataType.INT32)]))


@bad("inferred-shape-mismatch")
def relu_declared_with_another_shape():
    return model(graph([node("Relu", ["X"], ["Y"])], [vi("X", F, (2, 3))], [vi("Y", F, (3, 2))]))


@bad("inference-error")
def matmul_inner_extents_differ():
    return model(graph([node("MatMul", ["A", "B"], ["Y"])], [vi("A", F, (2, 3)), vi("B", F, (4, 5))],
                       [vi("Y", F, (2, 5))]))


def _registry_with_custom_domain(infer=None):
    """The installed plugins plus a domain 'com.example.infer' whose op may lack inference."""
    import types

    from onnxkit import hookimpl
    from onnxkit.registry import build_registry
    from onnxkit.schema import FormalParameter, OperatorSet, OpSchema

    schema = OpSchema(domain="com.example.infer", name="Thing", since_version=1,
                      inputs=(FormalParameter("x", "tensor(float)"),), outputs=(FormalParameter("y", "tensor(float)"),),
                      min_input=1, max_input=1, min_output=1, max_output=1)
    plugin = types.SimpleNamespace()

    def onnxkit_operator_sets():
        return [OperatorSet("com.example.infer", 1, {"Thing": schema})]

    plugin.onnxkit_operator_sets = hookimpl(onnxkit_operator_sets)
    if infer is not None:
        def onnxkit_inference_functions():
            return {("com.example.infer", "Thing", 1): infer}

        plugin.onnxkit_inference_functions = hookimpl(onnxkit_inference_functions)
    return build_registry(extra=[("example-infer", plugin)])


def _thing_model():
    return model(graph([node("Thing", ["X"], ["Y"], domain="com.example.infer")], [vi("X")], [vi("Y")]),
                 opsets=(("", 17), ("com.example.infer", 1)))


@bad("no-inference-function", registry=_registry_with_custom_domain())
def custom_op_without_inference():
    return _thing_model()


def _broken_inference(ctx):
    raise RuntimeError("this inference function is broken")


@bad("inference-function-failed", registry=_registry_with_custom_domain(_broken_inference))
def custom_op_with_failing_inference():
    return _thing_model()


# ================================================================== INVALID: tensors

@bad("tensor-storage-conflict")
def raw_and_typed():
    return with_init(ir.Tensor(dims=[1], data_type=F, name="W", raw_data=b"\0\0\0\0", float_data=[1.0]))


@bad("string-raw-data")
def string_in_raw_data():
    return with_init(ir.Tensor(dims=[1], data_type=S, name="W", raw_data=b"ab"))


@bad("tensor-wrong-field")
def float_in_int64_data():
    return with_init(ir.Tensor(dims=[2], data_type=F, name="W", int64_data=[1, 2]))


@bad("tensor-size-mismatch")
def raw_too_short():
    return with_init(ir.Tensor(dims=[3], data_type=F, name="W", raw_data=b"\0" * 8))


@bad("tensor-size-mismatch")
def typed_too_short():
    return with_init(ir.Tensor(dims=[3], data_type=F, name="W", float_data=[1.0, 2.0]))


@bad("tensor-size-mismatch")
def attribute_tensor_too_long():
    t = ir.Tensor(dims=[1], data_type=F, float_data=[1.0, 2.0])
    return model(graph([node("Constant", [], ["Y"], value=t)], [], [vi("Y", F, (1,))]))


@bad("nonzero-padding")
def int4_padding_set():
    return with_init(ir.Tensor(dims=[1], data_type=DataType.INT4, name="W", raw_data=b"\xf1"))


@bad("invalid-data-location")
def data_location_2():
    return with_init(ir.Tensor(dims=[1], data_type=F, name="W", raw_data=b"\0\0\0\0", data_location=2))


@bad("tensor-segment")
def segmented_tensor():
    return with_init(ir.Tensor(dims=[2], data_type=F, name="W", float_data=[1.0], segment=ir.Segment(0, 1)))


def sparse(values, indices, dims, index_dtype=np.int64):
    return ir.SparseTensor(values=tensor("S", values), indices=tensor("", indices, index_dtype), dims=list(dims))


def with_sparse(sp):
    g = relu_graph()
    g.sparse_initializer.append(sp)
    return model(g)


@bad("sparse-tensor-invalid")
def sparse_values_2d():
    sp = sparse([1.0, 2.0], [0, 1], [4])
    sp.values = tensor("S", [[1.0, 2.0]])
    return with_sparse(sp)


@bad("sparse-tensor-invalid")
def sparse_float_indices():
    return with_sparse(sparse([1.0, 2.0], [0.0, 1.0], [4], np.float32))


@bad("sparse-index-out-of-range")
def sparse_index_7_of_4():
    return with_sparse(sparse([1.0, 2.0], [1, 7], [4]))


# ================================================================== INVALID: external data

@bad("external-with-embedded-data")
def external_and_raw():
    return add_w(external_tensor([("location", "w.bin")], raw=b"\0" * 8))


@bad("external-data-not-external")
def references_without_external_location():
    return add_w(external_tensor([("location", "w.bin")], raw=b"\0" * 8, location=0))


@bad("external-unknown-key")
def external_unknown_key():
    return add_w(external_tensor([("location", "w.bin"), ("compression", "zstd")]))


@bad("external-path-traversal")
def external_parent_directory():
    return add_w(external_tensor([("location", "../w.bin")]))


@bad("external-absolute-path")
def external_absolute_path():
    return add_w(external_tensor([("location", "/etc/passwd")]))


@bad("external-missing-location")
def external_without_location():
    return add_w(external_tensor([("offset", "0")]))


@bad("external-size-mismatch")
def external_length_wrong():
    return add_w(external_tensor([("location", "w.bin"), ("length", "7")]))


@bad("external-duplicate-key")
def external_location_twice():
    return add_w(external_tensor([("location", "w.bin"), ("location", "v.bin")]))


@bad("external-invalid-location")
def external_location_with_nul():
    return add_w(external_tensor([("location", "w\x00.bin")]))


@bad("external-bad-offset")
def external_negative_offset():
    return add_w(external_tensor([("location", "w.bin"), ("offset", "-1")]))


@bad("external-bad-length")
def external_length_not_a_number():
    return add_w(external_tensor([("location", "w.bin"), ("length", "eight")]))


@bad("external-bad-checksum")
def external_checksum_not_sha1():
    return add_w(external_tensor([("location", "w.bin"), ("checksum", "md5:0")]))


@bad("external-unsupported-type")
def external_string_tensor():
    t = ir.Tensor(dims=[1], data_type=S, name="W", data_location=1,
                  external_data=[ir.StringStringEntry("location", "w.bin")])
    return with_init(t)


@bad("external-unresolved", path=True, open_external=True)
def external_file_missing():
    return add_w(external_tensor([("location", "w.bin")]))


@bad("external-short-file", files={"w.bin": b"\0" * 4}, open_external=True)
def external_file_short():
    return add_w(external_tensor([("location", "w.bin"), ("offset", "0"), ("length", "8")]))


@bad("external-checksum-mismatch", files={"w.bin": b"\0" * 8}, open_external=True)
def external_checksum_wrong():
    return add_w(external_tensor([("location", "w.bin"), ("checksum", "0" * 40)]))
