"""The one exception hierarchy of onnxkit.

Every error onnxkit raises on bad input derives from :class:`OnnxkitError` and says
what is wrong and where (a byte offset and message path, a graph path, a node, a plugin).

Each also derives from the onnxruntime status class (:mod:`onnxkit.status`, all
:class:`RuntimeError`) onnxruntime raises for the same fault, so code written against
onnxruntime (``except InvalidArgument:``, ``except RuntimeError:``) catches onnxkit's errors:
:class:`OnnxkitError` is a ``Fail``; an argument or feed that does not fit an
``InvalidArgument``; :class:`DecodeError` an ``InvalidProtobuf``; :class:`NoSuchFileError` a
``NoSuchFile`` (and a :class:`FileNotFoundError`); :class:`UnsupportedOperatorError` a
``NotImplemented``; :class:`ValidationError` an ``InvalidGraph``; :class:`EvaluationError` a
``RuntimeException``; :class:`PluginError` an ``EPFail``.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

from .domains import display_domain
from .status import EPFail, Fail, InvalidArgument, InvalidGraph, InvalidProtobuf, NoSuchFile, RuntimeException
from .status import NotImplemented as _NotImplemented


class OnnxkitError(Fail):
    """Base class of every error onnxkit raises on purpose (onnxruntime's ``Fail``, a ``RuntimeError``)."""


class NoSuchFileError(OnnxkitError, NoSuchFile, FileNotFoundError):
    """A model file (or another file named by the caller) does not exist."""


class OnnxkitTypeError(OnnxkitError, InvalidArgument, TypeError):
    """A value, element type or type is not one Clause 6 admits."""


class DecodeError(OnnxkitError, InvalidProtobuf, ValueError):
    """The bytes are not a valid encoding (Clause 12).

    ``offset`` is the byte offset in the input at which the fault was found, ``path`` the
    message path to the field being read, e.g. ``ModelProto.graph.node[3].attribute[0].t``.
    """

    def __init__(self, message: str, offset: Optional[int] = None, path: str = ""):
        self.reason = message
        self.offset = offset
        self.path = path
        where = []
        if path:
            where.append(path)
        if offset is not None:
            where.append(f"byte {offset}")
        super().__init__(f"{message} (at {', '.join(where)})" if where else message)


class EncodeError(OnnxkitError, ValueError):
    """The IR cannot be written as Annex B bytes (e.g. it needs a deprecated field)."""


class LimitExceeded(OnnxkitError):
    """A documented resource limit (Clause 12.5, 15.4) was exceeded; ``limit`` names it."""

    def __init__(self, message: str, limit: str, value=None, maximum=None, path: str = "", offset=None):
        self.limit = limit
        self.value = value
        self.maximum = maximum
        self.path = path
        self.offset = offset
        super().__init__(message)


class ExternalDataError(OnnxkitError):
    """An external data reference (Clause 13) cannot be resolved or is refused (Clause 15.3)."""


class PluginError(OnnxkitError, EPFail):
    """A plugin is broken: it failed to import, returned the wrong shape, or conflicts with another."""

    def __init__(self, plugin: str, message: str):
        self.plugin = plugin
        super().__init__(f"plugin {plugin!r}: {message}")


class UnsupportedOperatorError(OnnxkitError, _NotImplemented):
    """The model uses operators no installed plugin can evaluate (Clause 4.4, 16.1).

    ``operators`` lists every one, each as ``(domain, op_type, opset_version, reason)``.
    """

    def __init__(self, operators: Sequence[tuple]):
        self.operators = list(operators)
        lines = [f"  {display_domain(d)}::{op} (opset {v}): {why}" for d, op, v, why in self.operators]
        super().__init__(f"{len(self.operators)} unsupported operator(s):\n" + "\n".join(lines))


class ValidationError(OnnxkitError, InvalidGraph):
    """The model does not conform (Clause 10); ``diagnostics`` carries every finding."""

    def __init__(self, diagnostics: Iterable, message: str = "model is not valid"):
        self.diagnostics = list(diagnostics)
        shown = "\n".join(f"  {d}" for d in self.diagnostics[:20])
        more = f"\n  ... and {len(self.diagnostics) - 20} more" if len(self.diagnostics) > 20 else ""
        super().__init__(f"{message}:\n{shown}{more}" if shown else message)


class EvaluationError(OnnxkitError, RuntimeException):
    """Evaluating a node failed; names the node, its operator and why."""

    def __init__(self, message: str, node: str = "", op_type: str = ""):
        self.node = node
        self.op_type = op_type
        super().__init__(message)


#: Words of a decoding fault that mean the octets end too soon (the file is cut short).
_TRUNCATION_WORDS = ("truncated", "past the end", "runs past", "unexpected end", "ends inside")


def decode_summary(exc: DecodeError) -> str:
    """What a decoding fault means for a user, before the technical detail: ``'truncated'``
    when the octets end inside a field, else ``'not an ONNX model'``."""
    reason = (exc.reason or str(exc)).lower()
    if any(w in reason for w in _TRUNCATION_WORDS):
        return "truncated: the file ends inside a field (an incomplete download or copy?)"
    return "not an ONNX model (or a damaged one): its octets are not a ModelProto encoding"


def describe(exc: BaseException) -> str:
    """One message for a user: the error, with a plain summary first for decoding faults."""
    if isinstance(exc, DecodeError):
        return f"{decode_summary(exc)}; {exc}"
    return str(exc)


class ConformanceWarning(UserWarning):
    """A model was evaluated despite conditions that cannot change its result (the validation policy).

    Issued once per session for the checker's warnings, and once per kind for what a run finds
    (a dimension variable bound to two extents, an output contradicting its declared type or
    shape); the same one-line summary goes to the ``onnxkit.check`` logger.  ``strict=True``
    refuses instead."""
