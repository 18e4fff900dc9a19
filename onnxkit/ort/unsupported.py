"""onnxruntime features that cannot mean anything in onnxkit, each a clear ``NotImplementedError``.

The model compiler (:class:`ModelCompiler`, EP context models and their data), model packages
(:class:`ModelPackage` and its context and option classes), device synchronization streams
(:class:`OrtSyncStream`) and the native description of external initializers are features of
onnxruntime's native execution providers; onnxkit evaluates the model as it is.  Creating one
raises, naming the feature."""

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


class ModelCompiler(_Unsupported):
    feature = "model compilation (onnxruntime.ModelCompiler, EP context models)"


class OrtEpContextData(_Unsupported):
    feature = "EP context data (onnxruntime.OrtEpContextData, compiled EP context models)"


class OrtEpContextDataBuffer(_Unsupported):
    feature = "EP context data buffers (onnxruntime.OrtEpContextDataBuffer, compiled EP context models)"


class OrtSyncStream(_Unsupported):
    feature = "device synchronization streams (onnxruntime.OrtSyncStream; onnxkit's gpu backend uses torch's stream)"


class OrtExternalInitializerInfo(_Unsupported):
    feature = "the native external-initializer description (onnxruntime.OrtExternalInitializerInfo)"


class ModelPackage(_Unsupported):
    feature = "model packages (onnxruntime.ModelPackage)"


class ModelPackageContext(_Unsupported):
    feature = "model packages (onnxruntime.ModelPackageContext)"


class ModelPackageComponentContext(_Unsupported):
    feature = "model packages (onnxruntime.ModelPackageComponentContext)"


class ModelPackageOptions(_Unsupported):
    feature = "model packages (onnxruntime.ModelPackageOptions)"


class ModelPackageWriteMode(_Unsupported):
    feature = "model packages (onnxruntime.ModelPackageWriteMode)"
