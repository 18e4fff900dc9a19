"""onnxkit-gpu: the ``gpu`` backend (torch; CUDA when present, torch's CPU device otherwise)."""
