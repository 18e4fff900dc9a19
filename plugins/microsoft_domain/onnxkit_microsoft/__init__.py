"""onnxkit_microsoft: the com.microsoft operators onnxruntime's tools and converters emit (operator set 1)."""
