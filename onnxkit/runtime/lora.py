"""onnxruntime's LoRA adapters: :class:`LoraAdapter` (an adapter loaded for
:meth:`RunOptions.add_active_adapter`) and how an active one is applied; the files are read
and written with :class:`~onnxkit.runtime.lora_files.AdapterFormat`, their format by
:mod:`onnxkit.runtime.adapter_format`.

How an active adapter is applied, as onnxruntime 1.32's Python binding does it: :meth:`InferenceSession.run`
and :meth:`~InferenceSession.run_with_ort_values` feed each parameter of each active adapter as
the model input of the parameter's name (typically an input whose initializer is its default,
so the adapter overrides that default).  Where a name is given twice, the first active adapter's
value is used and a feed of that name is ignored (onnxruntime's feeds are filled adapters first
and later values of a name already there are dropped).  A parameter that names no input of the
model is refused like any feed of an unknown name.  ``run_async``, ``run_with_iobinding`` and
``run_with_ortvaluevector`` do not apply adapters (a warning on the ``onnxkit.run`` logger says
so, as onnxruntime's does).
"""

from __future__ import annotations

from ..errors import OnnxkitError, OnnxkitTypeError
from .adapter_format import read_adapter, read_adapter_file


class LoraAdapter:
    """A LoRA adapter to activate for a run (:meth:`RunOptions.add_active_adapter`):
    ``LoraAdapter()`` then :meth:`Load` (a file, memory-mapped) or :meth:`LoadFromArray`.
    An adapter never loaded has no parameters (activating it changes nothing, as in onnxruntime)."""

    def __init__(self):
        self._parameters: dict = {}
        self._loaded = False

    def Load(self, file_path) -> None:  # noqa: N802 (onnxruntime's name)
        """Memory-map the adapter file ``file_path``."""
        got = read_adapter_file(file_path, "LoraAdapter.Load")
        self._parameters, self._loaded = got.parameters, True

    def LoadFromArray(self, data) -> None:  # noqa: N802 (onnxruntime's C API CreateLoraAdapterFromArray)
        """The adapter from the bytes of an adapter file (they are copied)."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise OnnxkitError(f"LoraAdapter.LoadFromArray: expected bytes, got {type(data).__name__}")
        got = read_adapter(bytes(data), "LoraAdapter.LoadFromArray")
        self._parameters, self._loaded = got.parameters, True

    def _feeds(self) -> dict:
        """``{name: array}`` of the parameters (read-only arrays; none before a load)."""
        return self._parameters

    def __repr__(self) -> str:
        return f"LoraAdapter({sorted(self._parameters) if self._loaded else 'not loaded'})"


def check_adapter(adapter) -> None:
    """Raise :class:`~onnxkit.errors.OnnxkitTypeError` unless ``adapter`` is a :class:`LoraAdapter`."""
    if not isinstance(adapter, LoraAdapter):
        raise OnnxkitTypeError(f"add_active_adapter: expected a LoraAdapter, got {type(adapter).__name__}")


def with_adapters(input_feed, run_options):
    """``input_feed`` with the parameters of ``run_options``' active adapters added (see the
    module docstring for which value a name gets); ``input_feed`` itself when none is active."""
    adapters = getattr(run_options, "_active_adapters", None)
    if not adapters:
        return input_feed
    from collections.abc import Mapping

    if not isinstance(input_feed, Mapping):
        return input_feed  # the session's own check reports it
    merged = dict(input_feed)
    taken: set = set()
    for adapter in adapters:
        for name, value in adapter._feeds().items():
            if name not in taken:
                merged[name] = value
                taken.add(name)
    return merged
