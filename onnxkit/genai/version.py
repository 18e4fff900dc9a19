"""The onnxruntime-genai release whose Python API :mod:`onnxkit.genai` follows."""

GENAI_API_VERSION = "0.18.0"
