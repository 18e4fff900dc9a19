"""onnxkit_default_domain: operator sets ai.onnx 1..28, ai.onnx.preview, ai.onnx.preview.training (schemas as generated data, inference functions)."""
