"""``onnxruntime.backend``: onnx's backend API (``onnx.backend.base``) on onnxkit.

``prepare(model, device="CPU", **session_options)`` -> a :class:`BackendRep` whose
``run(inputs)`` evaluates (inputs: one array, a list in input order, or a dict by name);
``run(model, inputs, device)`` (also ``run_model``) does both; ``supports_device(device)``:
``"CPU"``, and ``"CUDA"``/``"GPU"`` where CUDA is; ``is_compatible(model, device)``: whether
every operator of the model has a kernel here.  ``model`` is a path, the model's octets, an
:class:`onnxkit.ir.Model`, or any object with ``SerializeToString()`` (an onnx ``ModelProto``).
Keyword arguments set the :class:`SessionOptions` fields of the same name.
"""

from .backend import BackendRep, OnnxRuntimeBackend, is_compatible, prepare, run, run_model, run_node, supports_device  # noqa: F401
