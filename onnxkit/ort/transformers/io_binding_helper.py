"""``onnxruntime.transformers.io_binding_helper``: the type helpers HuggingFace optimum imports
(:class:`TypeHelper`) and :class:`IOBindingHelper`, on onnxkit's sessions.  torch is imported
only by the functions that return torch types."""

from __future__ import annotations

import numpy as np

from ...dtypes import ELEMENT_TYPES
from ...errors import OnnxkitError
from ...ir.types import TensorType, type_string

#: onnxruntime type strings (``tensor(float)``) -> ONNX element type tags.
_ORT_TAGS = {type_string(TensorType(int(tag))): int(tag) for tag in ELEMENT_TYPES}


def _arg(session, name: str, outputs: bool):
    for a in (session.get_outputs() if outputs else session.get_inputs()):
        if a.name == name:
            return a
    raise OnnxkitError(f"{'output' if outputs else 'input'} {name!r} not found in the session")


class TypeHelper:
    @staticmethod
    def get_input_type(ort_session, name: str) -> str:
        return _arg(ort_session, name, False).type

    @staticmethod
    def get_output_type(ort_session, name: str) -> str:
        return _arg(ort_session, name, True).type

    @staticmethod
    def ort_type_to_onnx_type(ort_type: str) -> int:
        tag = _ORT_TAGS.get(ort_type)
        if tag is None:
            raise OnnxkitError(f"{ort_type!r} is not a tensor type string onnxkit knows")
        return tag

    @staticmethod
    def ort_type_to_numpy_type(ort_type: str):
        et = ELEMENT_TYPES.get(TypeHelper.ort_type_to_onnx_type(ort_type))
        if et is None or et.dtype is None:
            raise OnnxkitError(f"{ort_type!r} has no numpy type")
        return np.dtype(et.dtype).type if et.tag != 8 else np.str_

    @staticmethod
    def numpy_type_to_torch_type(numpy_type):
        import torch

        if np.dtype(numpy_type) == np.bool_:
            return torch.bool
        return torch.from_numpy(np.zeros(0, dtype=numpy_type)).dtype

    @staticmethod
    def torch_type_to_numpy_type(torch_type):
        from ...runtime.torch_values import torch_to_numpy_dtype

        return torch_to_numpy_dtype(torch_type).type

    @staticmethod
    def ort_type_to_torch_type(ort_type: str):
        return TypeHelper.numpy_type_to_torch_type(TypeHelper.ort_type_to_numpy_type(ort_type))

    @staticmethod
    def get_io_onnx_type_map(ort_session) -> dict:
        return {a.name: TypeHelper.ort_type_to_onnx_type(a.type)
                for a in [*ort_session.get_inputs(), *ort_session.get_outputs()]}

    @staticmethod
    def get_io_numpy_type_map(ort_session) -> dict:
        return {a.name: TypeHelper.ort_type_to_numpy_type(a.type)
                for a in [*ort_session.get_inputs(), *ort_session.get_outputs()]}

    @staticmethod
    def get_io_torch_type_map(ort_session) -> dict:
        return {a.name: TypeHelper.ort_type_to_torch_type(a.type)
                for a in [*ort_session.get_inputs(), *ort_session.get_outputs()]}


class IOBindingHelper:
    @staticmethod
    def get_outputs_from_io_binding_buffer(ort_session, output_buffers, output_shapes, return_numpy=True):
        out = []
        for o in ort_session.get_outputs():
            buf = output_buffers[o.name]
            n = int(np.prod(output_shapes[o.name]))
            v = buf[:n].reshape(output_shapes[o.name])
            out.append(v.cpu().numpy() if return_numpy and hasattr(v, "cpu") else v)
        return out
