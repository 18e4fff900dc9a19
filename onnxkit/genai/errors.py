"""The errors :mod:`onnxkit.genai` raises on purpose.

onnxruntime-genai raises ``RuntimeError`` for a call it refuses; both classes here are
``RuntimeError`` too (through :class:`onnxkit.errors.OnnxkitError`), so a program's
``except RuntimeError`` keeps working."""

from __future__ import annotations

from ..errors import OnnxkitError


class GenaiError(OnnxkitError):
    """A genai call refused: a bad argument, a call in the wrong state, a configuration that is
    not valid.  The message names what and where."""


class GenaiNotSupported(GenaiError, NotImplementedError):
    """Something onnxruntime-genai offers that onnxkit's stand-in does not (docs/genai.md lists
    them); the message names the feature."""


def not_supported(what: str) -> GenaiNotSupported:
    """The error for ``what``, with where to read what is supported."""
    return GenaiNotSupported(f"onnxkit.genai does not support {what} (see docs/genai.md for what it supports)")
