"""onnxkit's loggers: the standard :mod:`logging` module, never ``print``.

The top logger is ``onnxkit``; each part logs to a child: ``onnxkit.load`` (decoding),
``onnxkit.check`` (validation findings, the validation policy's warnings), ``onnxkit.plan``
(binding and folding), ``onnxkit.run`` (runs, profiling, providers) and ``onnxkit.plugins``
(plugin faults).  The library only adds a :class:`logging.NullHandler`, so nothing reaches a
terminal unless the application configures logging (``logging.basicConfig(level=...)``) or
calls :func:`set_default_logger_severity`; ``onnxkit -v`` does that for the command line.

onnxruntime's severities map onto :mod:`logging` levels: 0 verbose -> DEBUG, 1 info -> INFO,
2 warning -> WARNING, 3 error -> ERROR, 4 fatal -> CRITICAL; -1 (onnxruntime's default of
``SessionOptions.log_severity_level``) means the default severity, the one
:func:`set_default_logger_severity` last set (2 until then).  Where the effective severity is
3 or more, onnxkit's :class:`~onnxkit.errors.ConformanceWarning` lines are not issued through
:mod:`warnings` (they still go to the ``onnxkit.check`` logger), as onnxruntime prints no
warning then.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

ROOT = "onnxkit"
PARTS = ("load", "check", "plan", "run", "plugins")

#: onnxruntime severity (``log_severity_level``) -> :mod:`logging` level (logging's DEBUG,
#: INFO, WARNING, ERROR, CRITICAL).
SEVERITY_LEVELS = {0: 10, 1: 20, 2: 30, 3: 40, 4: 50}

_handler_added = threading.Event()


def get_logger(part: str = "") -> logging.Logger:
    """The logger ``onnxkit`` (``part=''``) or its child ``onnxkit.<part>``.

    :mod:`logging` is imported by the first call, which also adds the library's
    :class:`logging.NullHandler` to ``onnxkit``: every record onnxkit logs goes through a logger
    this function gave, so the handler is there before the first one (a session that logs
    nothing imports no :mod:`logging`, as onnxruntime's process does not)."""
    import logging

    if not _handler_added.is_set():
        with _HANDLER_LOCK:
            if not _handler_added.is_set():
                logging.getLogger(ROOT).addHandler(logging.NullHandler())
                _handler_added.set()
    return logging.getLogger(f"{ROOT}.{part}" if part else ROOT)


_HANDLER_LOCK = threading.Lock()


#: The default severity (onnxruntime's default logger), set by :func:`set_default_logger_severity`.
_DEFAULT = {"severity": 2, "verbosity": 0}


def effective_severity(severity) -> int:
    """``severity`` (0..4), or the default severity where it is -1 (or None)."""
    if severity is None or (isinstance(severity, int) and severity == -1):
        return _DEFAULT["severity"]
    return int(severity)


def severity_to_level(severity: int) -> int:
    """The :mod:`logging` level of an onnxruntime severity (0..4, -1 the default); raises
    :class:`~onnxkit.errors.OnnxkitError` otherwise."""
    from .errors import OnnxkitError

    try:
        return SEVERITY_LEVELS[effective_severity(severity)]
    except (KeyError, TypeError, ValueError):
        raise OnnxkitError(f"log severity level must be 0 (verbose) .. 4 (fatal), not {severity!r}") from None


def quiet(severity) -> bool:
    """Whether warnings are silenced at ``severity`` (3 error or above, -1 the default's)."""
    try:
        return effective_severity(severity) >= 3
    except (TypeError, ValueError):
        return False


def set_default_logger_severity(severity: int) -> None:
    """onnxruntime's ``set_default_logger_severity``: the default severity (sessions whose
    ``log_severity_level`` is -1 follow it) and the level of the ``onnxkit`` logger."""
    level = severity_to_level(severity)
    if int(severity) != -1:
        _DEFAULT["severity"] = int(severity)
    get_logger().setLevel(level)


def set_default_logger_verbosity(verbosity: int) -> None:
    """onnxruntime's ``set_default_logger_verbosity`` (the VLOG level of verbose records): kept;
    onnxkit's verbose records are all at DEBUG, shown from severity 0."""
    _DEFAULT["verbosity"] = int(verbosity)


#: (registry id, fault) pairs already logged: each fault is logged once, not once per session.
_LOGGED_FAULTS: set = set()


def log_plugin_faults(registry) -> None:
    """Log each fault of ``registry`` once on ``onnxkit.plugins`` (a warning per fault)."""
    for fault in getattr(registry, "faults", ()):
        key = (id(registry), str(fault))
        if key not in _LOGGED_FAULTS:
            _LOGGED_FAULTS.add(key)
            get_logger("plugins").warning("%s", fault)
