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


#: The SessionOptions fields ``prepare`` sets from its keyword arguments (onnxruntime's backend
#: allows the same ones): none of them writes a file.  A keyword naming another SessionOptions
#: field (``optimized_model_filepath``, ``profile_file_prefix``, ``enable_profiling``, ...) is
#: refused; a keyword that names no field is ignored, as onnxruntime's backend does.
ALLOWED_SESSION_OPTIONS = frozenset({
    "enable_cpu_mem_arena", "enable_mem_pattern", "enable_mem_reuse", "execution_mode", "execution_order",
    "graph_optimization_level", "inter_op_num_threads", "intra_op_num_threads", "log_severity_level",
    "log_verbosity_level", "logid", "use_deterministic_compute", "use_per_session_threads",
})


def session_options(kwargs: dict) -> SessionOptions:
    """SessionOptions with the allowed fields of ``kwargs`` set (see :data:`ALLOWED_SESSION_OPTIONS`);
    an :class:`~onnxkit.errors.OnnxkitError` (a ``RuntimeError``) naming a field that is not permitted."""
    so = SessionOptions()
    for k, v in kwargs.items():
        if k in ALLOWED_SESSION_OPTIONS:
            setattr(so, k, v)
        elif hasattr(so, k):
            raise OnnxkitError(f"onnxruntime.backend: SessionOptions field {k!r} is not permitted through the "
                               f"backend API (permitted: {', '.join(sorted(ALLOWED_SESSION_OPTIONS))})")
    return so


def prepare(model, device: str = "CPU", **kwargs) -> BackendRep:
    """A :class:`BackendRep` of ``model`` (a path, octets, a ModelProto, an InferenceSession or
    a BackendRep) on ``device``; ``kwargs``: see :func:`session_options`."""
    if isinstance(model, BackendRep):
        return model
    if isinstance(model, InferenceSession):
        return BackendRep(model)
    if not supports_device(device):
        raise OnnxkitError(f"onnxruntime.backend: device {device!r} is not available here")
    so = session_options(kwargs)
    return BackendRep(InferenceSession(_octets(model), so, providers=_providers(device)))


def run(model, inputs, device: str = "CPU", **kwargs) -> list:
    """``prepare(model, device, **kwargs).run(inputs, **kwargs)``: the keywords go to both, each
    taking the fields it allows."""
    return prepare(model, device, **kwargs).run(inputs, **kwargs)


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
