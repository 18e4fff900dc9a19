"""The backend functions (see :mod:`onnxkit.ort.backend`)."""

from __future__ import annotations

from ...errors import OnnxkitError, UnsupportedOperatorError
from ...runtime import InferenceSession, SessionOptions, get_available_providers
from .backend_rep import BackendRep


def _octets(model):
    if hasattr(model, "SerializeToString") and callable(model.SerializeToString):
        return model.SerializeToString()
    return model


def _providers(device: str) -> list:
    device = str(device).upper()
    if device == "CPU":
        return ["CPUExecutionProvider"]
    if device in ("CUDA", "GPU"):
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    raise OnnxkitError(f"onnxruntime.backend: device {device!r} is not supported (CPU, CUDA)")


def supports_device(device: str) -> bool:
    """``CPU`` always; ``CUDA`` / ``GPU`` where CUDA is available."""
    device = str(device).upper()
    if device == "CPU":
        return True
    if device in ("CUDA", "GPU"):
        return "CUDAExecutionProvider" in get_available_providers()
    return False


def prepare(model, device: str = "CPU", **kwargs) -> BackendRep:
    """A :class:`BackendRep` of ``model`` on ``device``; ``kwargs`` set SessionOptions fields."""
    if isinstance(model, InferenceSession):
        return BackendRep(model)
    if not supports_device(device):
        raise OnnxkitError(f"onnxruntime.backend: device {device!r} is not available here")
    so = SessionOptions()
    for k, v in kwargs.items():
        if not hasattr(so, k):
            raise OnnxkitError(f"onnxruntime.backend.prepare: {k!r} is not a SessionOptions field")
        setattr(so, k, v)
    return BackendRep(InferenceSession(_octets(model), so, providers=_providers(device)))


def run(model, inputs, device: str = "CPU", **kwargs) -> list:
    """``prepare(model, device, **kwargs).run(inputs)``."""
    return prepare(model, device, **kwargs).run(inputs)


run_model = run


def run_node(node, inputs, device: str = "CPU", outputs_info=None, **kwargs):
    raise NotImplementedError("onnxruntime.backend.run_node is not implemented (onnxruntime does not either): "
                              "build a one-node model and use run_model")


def is_compatible(model, device=None, **kwargs) -> bool:
    """Whether ``model`` can be prepared here (every operator has a kernel, the device exists)."""
    if device is not None and not supports_device(device):
        return False
    try:
        InferenceSession(_octets(model), providers=_providers(device or "CPU"))
    except UnsupportedOperatorError:
        return False
    return True


class OnnxRuntimeBackend:
    """onnx's ``Backend`` class form of the functions above (``OnnxRuntimeBackend.prepare`` ...)."""

    prepare = staticmethod(prepare)
    run_model = staticmethod(run_model)
    run_node = staticmethod(run_node)
    supports_device = staticmethod(supports_device)
    is_compatible = staticmethod(is_compatible)
