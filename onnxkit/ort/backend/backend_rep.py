"""``BackendRep``: a prepared model (onnx's backend API) around an :class:`InferenceSession`."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import OnnxkitError
from ...runtime import RunOptions

#: The RunOptions fields ``BackendRep.run`` sets from its keyword arguments (onnxruntime's
#: backend allows the same): ``terminate`` and ``training_mode`` are refused, a keyword naming
#: no RunOptions field is ignored.
ALLOWED_RUN_OPTIONS = frozenset({"log_severity_level", "log_verbosity_level", "logid", "only_execute_path_to_fetches"})


def run_options(kwargs: dict) -> RunOptions:
    """RunOptions with the allowed fields of ``kwargs`` set; an :class:`OnnxkitError` (a
    ``RuntimeError``) naming a RunOptions field that is not permitted.  ``run_options=`` given
    as a RunOptions is used as it is."""
    given = kwargs.get("run_options")
    if isinstance(given, RunOptions):
        return given
    ro = RunOptions()
    for k, v in kwargs.items():
        if k in ALLOWED_RUN_OPTIONS:
            setattr(ro, k, v)
        elif hasattr(ro, k) and not k.startswith("_"):
            raise OnnxkitError(f"onnxruntime.backend: RunOptions field {k!r} is not permitted through the "
                               f"backend API (permitted: {', '.join(sorted(ALLOWED_RUN_OPTIONS))})")
    return ro


class BackendRep:
    """``run(inputs)``: ``inputs`` is one value (the single input), a list or tuple in input
    order, or a dict by input name; returns the outputs, in graph order, as a list."""

    def __init__(self, session):
        self._session = session

    @property
    def session(self):
        return self._session

    def run(self, inputs: Any, **kwargs) -> list:
        names = [i.name for i in self._session.get_inputs()]
        if isinstance(inputs, dict) and set(inputs) <= set(names) and all(isinstance(k, str) for k in inputs):
            feed = inputs
        elif isinstance(inputs, (list, tuple)) and (len(names) > 1 or all(isinstance(v, np.ndarray) for v in inputs)):
            if len(inputs) != len(names):
                raise OnnxkitError(f"BackendRep.run: {len(inputs)} inputs given, the model has {len(names)}: {names}")
            feed = dict(zip(names, inputs))
        elif isinstance(inputs, (list, tuple)) and len(inputs) == 1 and isinstance(inputs[0], dict):
            feed = {names[0]: inputs[0]}
        else:
            if len(names) != 1:
                raise OnnxkitError(f"BackendRep.run: one value given, the model has {len(names)} inputs: {names}")
            feed = {names[0]: inputs}
        return self._session.run(None, feed, run_options(kwargs))
