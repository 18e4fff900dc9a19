"""onnxruntime's ``AdapterFormat``: an ``.onnx_adapter`` file's versions and parameters as
:class:`~onnxkit.OrtValue` objects, read and written (the format: :mod:`onnxkit.runtime.adapter_format`)."""

from __future__ import annotations

import os

from ..errors import OnnxkitError
from .adapter_format import FORMAT_VERSION, build_adapter, read_adapter_file
from .ortvalue import OrtValue


class AdapterFormat:
    """An adapter file's contents: versions and named parameters (:class:`~onnxkit.OrtValue`).

    ``AdapterFormat()`` starts empty (format version 1, adapter and model version 0);
    :meth:`read_adapter` reads a file; :meth:`export_adapter` writes one.  The native object's
    properties (``format_version``, ``adapter_version``, ``model_version``, ``parameters``)
    and the Python wrapper's getters and setters are both here."""

    def __init__(self, adapter=None):
        self.format_version = FORMAT_VERSION
        self.adapter_version = 0
        self.model_version = 0
        self._parameters: dict = {}
        if adapter is not None:
            if not isinstance(adapter, AdapterFormat):
                raise OnnxkitError(f"AdapterFormat: expected an AdapterFormat to wrap, got {type(adapter).__name__}")
            self.format_version, self.adapter_version = adapter.format_version, adapter.adapter_version
            self.model_version, self._parameters = adapter.model_version, dict(adapter._parameters)

    @staticmethod
    def read_adapter(file_path) -> "AdapterFormat":
        """The adapter in ``file_path``; its parameters are read-only views of the mapped file."""
        got = read_adapter_file(file_path, "AdapterFormat.read_adapter")
        out = AdapterFormat()
        out.format_version, out.adapter_version, out.model_version = (
            got.format_version, got.adapter_version, got.model_version)
        out._parameters = {k: OrtValue(v) for k, v in got.parameters.items()}
        return out

    def export_adapter(self, file_path) -> None:
        """Write the parameters and versions to ``file_path`` in the adapter format (a device
        tensor is copied to the host)."""
        params = {}
        for name, value in self._parameters.items():
            params[name] = (value.numpy(), value.element_type())
        data = build_adapter(params, self.adapter_version, self.model_version)
        try:
            with open(os.fspath(file_path), "wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise OnnxkitError(f"AdapterFormat.export_adapter: cannot write {file_path!r}: "
                               f"{exc.strerror or exc}") from None

    def get_format_version(self) -> int:
        return self.format_version

    def set_adapter_version(self, adapter_version: int) -> None:
        self.adapter_version = _int32(adapter_version, "adapter_version")

    def get_adapter_version(self) -> int:
        return self.adapter_version

    def set_model_version(self, model_version: int) -> None:
        self.model_version = _int32(model_version, "model_version")

    def get_model_version(self) -> int:
        return self.model_version

    @property
    def parameters(self) -> dict:
        return dict(self._parameters)

    @parameters.setter
    def parameters(self, params: dict) -> None:
        self.set_parameters(params)

    def set_parameters(self, params: dict) -> None:
        """The parameters to export: ``{name: OrtValue}``, each holding a tensor."""
        if not isinstance(params, dict):
            raise OnnxkitError(f"AdapterFormat.set_parameters: expected a dict of name to OrtValue, got "
                               f"{type(params).__name__}")
        for name, value in params.items():
            if not isinstance(name, str) or not isinstance(value, OrtValue) or not value.is_tensor():
                raise OnnxkitError(f"AdapterFormat.set_parameters: parameter {name!r} must be a str name and an "
                                   f"OrtValue holding a tensor, got {type(value).__name__}")
        self._parameters = dict(params)

    def get_parameters(self) -> dict:
        """``{name: OrtValue}``; on an adapter read from a file, read-only views of it."""
        return dict(self._parameters)

    def __repr__(self) -> str:
        return (f"AdapterFormat(format_version={self.format_version}, adapter_version={self.adapter_version}, "
                f"model_version={self.model_version}, parameters={sorted(self._parameters)})")


def _int32(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -2**31 <= value < 2**31:
        raise OnnxkitError(f"AdapterFormat: {what} must be an int32, got {value!r}")
    return value


def _int32(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -2**31 <= value < 2**31:
        raise OnnxkitError(f"AdapterFormat: {what} must be an int32, got {value!r}")
    return value
