"""``onnxruntime.transformers``: the helpers client libraries and onnxruntime's own test helpers
import from onnxruntime's transformer tools: :mod:`.io_binding_helper` (``TypeHelper`` for
HuggingFace optimum; ``CudaSession``, ``GpuBinding``, ``GpuBindingManager``, ``IOBindingHelper``).
onnxruntime's graph tools in this package (``optimizer``, ``onnx_model``, ``fusion_options``,
``float16``, ``benchmark_helper``, the model converters) rewrite models with onnx and are not
provided: importing one under ``install_as_onnxruntime`` is a ``ModuleNotFoundError`` naming onnxkit."""
