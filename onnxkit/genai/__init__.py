"""onnxkit standing in for onnxruntime-genai: its Python API (``import onnxruntime_genai as og``)
running decoder-only language models on onnxkit's :class:`~onnxkit.InferenceSession`.

Switch a program over with ``onnxkit.install_as_onnxruntime_genai()`` before it imports
``onnxruntime_genai``, or run it unchanged with ``python -m onnxkit.genai script.py``.

Provided, with onnxruntime-genai 0.18's names and behaviour: :class:`Config`, :class:`Model`,
:class:`Tokenizer`, :class:`TokenizerStream`, :class:`GeneratorParams`, :class:`Generator`
(greedy and beam search, top-k / top-p / temperature sampling, repetition penalty, min_length,
no_repeat_ngram_size, ``random_seed``, the key/value cache shared at ``max_length`` or growing),
:class:`Tensor`, :class:`NamedTensors` and the global calls (logging, telemetry, device queries).
What is not provided (multimodal and speech models, adapters, constrained and
speculative decoding, the engine) is named by :class:`~onnxkit.genai.errors.GenaiNotSupported`
when used; docs/genai.md lists it.  This package never imports onnxruntime_genai.
"""

from __future__ import annotations

from .config import Config
from .errors import GenaiError, GenaiNotSupported, not_supported
from .generator import Generator, GeneratorParams, Model
from .install import install_as_onnxruntime_genai, uninstall  # noqa: F401
from .tensors import NamedTensors, Tensor
from .tokenizer import Tokenizer, TokenizerStream

from .version import GENAI_API_VERSION

__version__ = GENAI_API_VERSION
#: the distribution a program checks for (the real package's ``__id__``; its CUDA build says ``onnxruntime-genai-cuda``)
__id__ = "onnxruntime-genai"

_LOG_OPTIONS: dict = {}


def set_log_options(**options) -> None:
    """genai's logging switches (``enabled``, ``model_input_values``, ...): recorded; onnxkit logs
    through the ``onnxkit`` logger (:mod:`onnxkit.log`) instead of genai's dumps."""
    _LOG_OPTIONS.update(options)


def set_log_callback(callback) -> None:
    """genai's log callback: recorded (onnxkit writes no genai log lines to hand it)."""
    _LOG_OPTIONS["callback"] = callback


def enable_telemetry_events() -> None:
    """No effect: onnxkit sends no telemetry."""


def disable_telemetry_events() -> None:
    """No effect: onnxkit sends no telemetry."""


def is_cuda_available() -> bool:
    return False


def is_dml_available() -> bool:
    return False


def is_webgpu_available() -> bool:
    return False


def is_qnn_available() -> bool:
    return False


def is_openvino_available() -> bool:
    return False


def get_current_gpu_device_id() -> int:
    return 0


def set_current_gpu_device_id(device_id: int) -> None:
    if int(device_id) != 0:
        raise not_supported(f"GPU device {device_id} (onnxkit.genai runs on the CPU)")


def register_execution_provider_library(provider_name: str, path: str) -> None:
    raise not_supported(f"register_execution_provider_library({provider_name!r}) (execution-provider libraries)")


def unregister_execution_provider_library(provider_name: str) -> None:
    raise not_supported(f"unregister_execution_provider_library({provider_name!r}) (execution-provider libraries)")


def _unsupported_class(name: str, what: str) -> type:
    def __init__(self, *args, **kwargs):
        raise not_supported(f"og.{name} ({what})")

    def _static(*args, **kwargs):
        raise not_supported(f"og.{name} ({what})")

    return type(name, (), {"__init__": __init__, "open": staticmethod(_static), "open_bytes": staticmethod(_static),
                           "__doc__": f"onnxruntime-genai's {name}: not supported by onnxkit ({what})."})


Adapters = _unsupported_class("Adapters", "LoRA adapters")
Images = _unsupported_class("Images", "multimodal models")
Audios = _unsupported_class("Audios", "speech models")
MultiModalProcessor = _unsupported_class("MultiModalProcessor", "multimodal models")
StreamingProcessor = _unsupported_class("StreamingProcessor", "speech models")
MtpGenerator = _unsupported_class("MtpGenerator", "multi-token prediction")
Engine = _unsupported_class("Engine", "the batching engine")
Request = _unsupported_class("Request", "the batching engine")

__all__ = [
    "Config", "Model", "Tokenizer", "TokenizerStream", "GeneratorParams", "Generator", "Tensor", "NamedTensors",
    "GenaiError", "GenaiNotSupported", "set_log_options", "set_log_callback", "enable_telemetry_events",
    "disable_telemetry_events", "is_cuda_available", "is_dml_available", "is_webgpu_available", "is_qnn_available",
    "is_openvino_available", "get_current_gpu_device_id", "set_current_gpu_device_id",
    "register_execution_provider_library", "unregister_execution_provider_library", "Adapters", "Images", "Audios",
    "MultiModalProcessor", "StreamingProcessor", "MtpGenerator", "Engine", "Request", "GENAI_API_VERSION",
]
