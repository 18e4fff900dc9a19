"""``onnxruntime.transformers``: the helpers client libraries import from onnxruntime's
transformer tools (HuggingFace optimum: :mod:`.io_binding_helper`)."""
