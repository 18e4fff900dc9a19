"""Which backend a session runs on, from onnxkit's ``backend`` option or onnxruntime's providers.

onnxruntime's rules, adapted to onnxkit running a whole model on one backend: providers are
tried in the order given; one whose backend is not installed (``CUDAExecutionProvider``
without onnxkit-gpu), or an onnxruntime provider onnxkit has no backend for (TensorRT,
OpenVINO, ...), is skipped with a warning on ``onnxkit.run``; ``CPUExecutionProvider`` is
always the last resort.  A name that is neither an onnxruntime provider nor an onnxkit backend
is an error.  When a backend cannot evaluate every operator the session falls back to the next.
"""

from __future__ import annotations

from ..errors import OnnxkitError
from .options import PROVIDERS, missing_backend_message, normalize_providers

#: onnxruntime providers onnxkit has no backend for: skipped, as onnxruntime skips unavailable ones.
ORT_ONLY_PROVIDERS = frozenset({
    "TensorrtExecutionProvider", "ROCMExecutionProvider", "MIGraphXExecutionProvider", "OpenVINOExecutionProvider",
    "DnnlExecutionProvider", "DmlExecutionProvider", "CoreMLExecutionProvider", "NnapiExecutionProvider",
    "QNNExecutionProvider", "XnnpackExecutionProvider", "WebGpuExecutionProvider", "AzureExecutionProvider",
    "ACLExecutionProvider", "ArmNNExecutionProvider", "VitisAIExecutionProvider", "CANNExecutionProvider",
    "TvmExecutionProvider", "RknpuExecutionProvider", "SNPEExecutionProvider", "JsExecutionProvider",
})


def choose_backends(backend, providers, provider_options, registry, log) -> list:
    """``[(backend name, provider options)]`` to try, in order.  ``log(part, level, msg, *args)``."""
    installed = registry.backends
    if backend is not None:
        if backend not in installed:
            raise OnnxkitError(missing_backend_message(backend, installed))
        return [(backend, {})]
    wanted = normalize_providers(providers, provider_options)
    out: list = []
    for name, options in wanted:
        if name in PROVIDERS:
            b = PROVIDERS[name]
        elif name in installed:
            b = name  # an onnxkit backend named directly
        elif name in ORT_ONLY_PROVIDERS:
            log("run", 30, "provider %r is not available in onnxkit; skipped", name)
            continue
        else:
            known = sorted(set(PROVIDERS) | set(installed))
            raise OnnxkitError(f"no provider {name!r}: nothing installed provides it; known providers: {known}")
        if b not in installed:
            log("run", 30, "provider %r is not available (%s); skipped", name, missing_backend_message(b, installed))
            continue
        if all(b != seen for seen, _ in out):
            out.append((b, options))
    if not any(b == "cpu" for b, _ in out) and "cpu" in installed:
        out.append(("cpu", {}))
    if not out:
        raise OnnxkitError(missing_backend_message("cpu", installed))
    return out
