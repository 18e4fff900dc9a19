"""onnxruntime features that cannot mean anything in onnxkit, each a clear ``NotImplementedError``.

LoRA adapters (:class:`LoraAdapter`, ``AdapterFormat``) and the model compiler
(:class:`ModelCompiler`, EP context models) are features of onnxruntime's native execution
providers; onnxkit evaluates the model as it is.  Creating one raises, naming the feature."""

from __future__ import annotations

import enum


class OrtCompileApiFlags(enum.IntFlag):
    NONE = 0
    ERROR_IF_NO_NODES_COMPILED = 1
    ERROR_IF_OUTPUT_FILE_EXISTS = 2


class _Unsupported:
    feature = ""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"{self.feature} is not implemented by onnxkit (it evaluates the model as given; "
                                  "see the README's 'Standing in for onnxruntime')")


class LoraAdapter(_Unsupported):
    feature = "LoRA adapters (onnxruntime.LoraAdapter)"

    @classmethod
    def create_from_file(cls, path):
        return cls()


class AdapterFormat(_Unsupported):
    feature = "the LoRA adapter format (onnxruntime.AdapterFormat)"

    @classmethod
    def read_adapter(cls, path):
        return cls()


class ModelCompiler(_Unsupported):
    feature = "model compilation (onnxruntime.ModelCompiler, EP context models)"
