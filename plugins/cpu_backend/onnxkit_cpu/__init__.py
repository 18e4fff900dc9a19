"""onnxkit-cpu: the ``cpu`` backend (numpy + ml_dtypes) and its ai.onnx kernels."""
