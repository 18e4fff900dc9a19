"""Which backend a session runs on, from onnxkit's ``backend`` option or onnxruntime's providers.

onnxruntime's rules, adapted to onnxkit running a whole model on one backend: providers are
tried in the order given; one whose backend is not installed (``CUDAExecutionProvider``
without onnxkit-gpu), or an onnxruntime provider onnxkit has no backend for (TensorRT,
OpenVINO, ...), is skipped with a warning on ``onnxkit.run``; ``CPUExecutionProvider`` is
always the last resort.  A name that is neither an onnxruntime provider nor an onnxkit backend
is an error.  When a backend cannot evaluate every operator the session falls back to the next.

``CUDAExecutionProvider`` is available only where CUDA is (torch sees a CUDA device, checked
once, on first need, without importing torch when it is not installed): elsewhere asking for
it falls back as onnxruntime does, with its warning (:mod:`warnings`, ``UserWarning``:
"Specified provider ... is not in available provider names").  onnxkit's gpu backend itself
(torch, on its CPU device where there is no CUDA) is asked for by its own name, ``"gpu"``.
"""

from __future__ import annotations

import functools
import warnings

from ..errors import OnnxkitError
from ..registry import get_registry
from .options import PROVIDERS, missing_backend_message, normalize_providers, provider_of

#: onnxruntime providers onnxkit has no backend for: skipped, as onnxruntime skips unavailable ones.
ORT_ONLY_PROVIDERS = frozenset({
    "TensorrtExecutionProvider", "ROCMExecutionProvider", "MIGraphXExecutionProvider", "OpenVINOExecutionProvider",
    "DnnlExecutionProvider", "DmlExecutionProvider", "CoreMLExecutionProvider", "NnapiExecutionProvider",
    "QNNExecutionProvider", "XnnpackExecutionProvider", "WebGpuExecutionProvider", "AzureExecutionProvider",
    "ACLExecutionProvider", "ArmNNExecutionProvider", "VitisAIExecutionProvider", "CANNExecutionProvider",
    "TvmExecutionProvider", "RknpuExecutionProvider", "SNPEExecutionProvider", "JsExecutionProvider",
})


@functools.lru_cache(maxsize=1)
def cuda_available() -> bool:
    """Whether torch is installed and sees a CUDA device (computed once)."""
    import importlib.util  # not at import: asked only when a session names CUDA

    if importlib.util.find_spec("torch") is None:
        return False
    try:
        import torch

        return bool(torch.cuda.is_available())
    except (ImportError, OSError, RuntimeError) as exc:  # a broken torch install (a missing library): no CUDA
        from ..log import get_logger

        get_logger("run").warning("torch is installed but cannot be used (%s: %s): CUDA is not available",
                                  type(exc).__name__, exc)
        return False


def provider_available(name: str, installed) -> bool:
    """Whether provider ``name`` can run here: its backend is installed and, for CUDA, CUDA is."""
    b = PROVIDERS.get(name, name)
    if b not in installed:
        return False
    return b != "gpu" or name != "CUDAExecutionProvider" or cuda_available()


def _unavailable(name: str, installed, log, why: str) -> None:
    log("run", 30, "provider %r is not available (%s); skipped", name, why)
    warnings.warn(f"Specified provider '{name}' is not in available provider names."
                  f"Available providers: '{', '.join(get_available_providers())}'", UserWarning, stacklevel=4)


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
            _unavailable(name, installed, log, "onnxkit has no backend for it")
            continue
        else:
            known = sorted(set(PROVIDERS) | set(installed))
            raise OnnxkitError(f"Unknown Provider Type: {name} (no provider {name!r}: nothing installed provides "
                               f"it; known providers: {known})")
        if b not in installed:
            _unavailable(name, installed, log, missing_backend_message(b, installed))
            continue
        if not provider_available(name, installed):
            _unavailable(name, installed, log, "torch sees no CUDA device; onnxkit's gpu backend is asked for as 'gpu'")
            continue
        if all(b != seen for seen, _ in out):
            out.append((b, options))
    if not any(b == "cpu" for b, _ in out) and "cpu" in installed:
        out.append(("cpu", {}))
    if not out:
        raise OnnxkitError(missing_backend_message("cpu", installed))
    return out


def get_available_providers() -> list:
    """onnxruntime's ``get_available_providers``: the providers of the installed backends
    (``CUDAExecutionProvider`` only where torch sees CUDA), CPU last but for plugins' own."""
    backends = get_registry().backends
    order = sorted(backends, key=lambda b: (b != "gpu", b != "cpu", b))
    return [provider_of(b) for b in order if b != "gpu" or cuda_available()]


def get_device() -> str:
    """onnxruntime's ``get_device``: ``'GPU'`` when the gpu backend sees CUDA, else ``'CPU'``."""
    try:
        import torch

        return "GPU" if torch.cuda.is_available() and "gpu" in get_registry().backends else "CPU"
    except ImportError:
        return "CPU"
