"""``onnxruntime.capi``: onnxruntime's native layer, as onnxkit provides it (pure Python)."""
