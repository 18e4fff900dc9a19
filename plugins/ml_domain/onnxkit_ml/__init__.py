"""onnxkit_ml: operator sets ai.onnx.ml 1..5 (schemas as generated data, inference functions)."""
