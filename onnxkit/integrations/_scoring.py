"""What the Dask and Ray integrations share: the payload shipped to workers, the per-process
session cache, thread limits, and scoring a table of columns in bounded batches.

Nothing here imports Dask or Ray.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from onnxkit import records
import numpy as np

from .. import ir
from ..dtypes import ELEMENT_TYPES
from ..errors import OnnxkitError

#: Rows per ``InferenceSession.run`` call unless the caller says otherwise.
DEFAULT_BATCH_SIZE = 4096


@records.frozen(repr=False)
class ModelPayload:
    """Everything a worker needs to build a session: the model's octets and the session's options.

    ``digest`` is the SHA-256 of ``model_bytes`` (the cache key, with ``backend`` and
    ``options``); ``threads`` caps the worker's compute threads (BLAS, OpenMP, torch) when its
    session is built, ``None`` leaves them alone.  ``options`` are keyword arguments of
    :class:`onnxkit.InferenceSession` other than ``backend`` (``seed``, ``validate``, ``limits``),
    as sorted pairs so the payload is hashable.  Picklable: it is plain data.
    """

    model_bytes: bytes
    digest: str
    backend: str = "cpu"
    threads: Optional[int] = None
    options: tuple = ()

    @property
    def key(self) -> tuple:
        return (self.digest, self.backend, repr(self.options))

    def __repr__(self) -> str:
        return (f"ModelPayload(sha256={self.digest[:12]}..., {len(self.model_bytes)} bytes, backend={self.backend!r}, "
                f"threads={self.threads}, options={dict(self.options)})")


def make_payload(model: Any, *, backend: str = "cpu", threads: Optional[int] = None,
                 **session_options) -> ModelPayload:
    """A :class:`ModelPayload` for ``model``: a path, the model's octets, or an :class:`onnxkit.ir.Model`.

    The octets travel to the workers, not the file: a model whose tensors live in external data
    files must have them embedded first (``onnxkit.save(model, path)`` without ``external_data``).
    """
    if isinstance(model, ir.Model):
        from ..api import to_bytes

        data = to_bytes(model)
    elif isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
    elif isinstance(model, (str, os.PathLike)):
        try:
            with open(model, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            raise OnnxkitError(f"cannot read model {os.fspath(model)!r}: {exc}") from None
    else:
        raise OnnxkitError(f"a model is a path, bytes or an onnxkit.ir.Model, not {type(model).__name__}")
    if threads is not None and int(threads) < 1:
        raise OnnxkitError(f"threads must be at least 1, not {threads!r}")
    return ModelPayload(data, hashlib.sha256(data).hexdigest(), backend, None if threads is None else int(threads),
                        tuple(sorted(session_options.items())))


_SESSIONS: dict = {}
_LOCK = threading.Lock()
_thread_limits: list = []  # keeps threadpoolctl's limiter alive for the life of the process


def session_for(payload: ModelPayload):
    """The session of this process for ``payload``: built on first use, then reused.

    Thread-safe; a session serves concurrent ``run`` calls (each run has its own values).
    """
    with _LOCK:
        sess = _SESSIONS.get(payload.key)
        if sess is None:
            from ..runtime.session import InferenceSession

            if payload.threads is not None:
                limit_threads(payload.threads, payload.backend)
            sess = InferenceSession(payload.model_bytes, backend=payload.backend, **dict(payload.options))
            _SESSIONS[payload.key] = sess
        return sess


def cached_sessions() -> int:
    """How many sessions this process has built (one per distinct payload key)."""
    with _LOCK:
        return len(_SESSIONS)


def limit_threads(threads: int, backend: str = "cpu") -> None:
    """Cap this process's compute threads: BLAS / OpenMP pools through threadpoolctl, and torch's
    intra-op threads for the ``gpu`` backend."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a dependency of both extras
        raise OnnxkitError('threads= needs threadpoolctl: pip install "onnxkit[dask]" or "onnxkit[ray]"') from None
    _thread_limits.append(threadpool_limits(limits=threads))
    if backend == "gpu":
        import torch

        torch.set_num_threads(threads)


def _numpy_dtype(vi) -> Optional[np.dtype]:
    t = vi.ir_type
    if isinstance(t, ir.TensorType) and t.elem_type in ELEMENT_TYPES:
        return ELEMENT_TYPES[t.elem_type].dtype
    return None


def feeds_from_columns(session, columns: Mapping[str, np.ndarray], names: Optional[Sequence[str]] = None,
                       input_column: Optional[str] = None) -> dict:
    """The feed of one batch, from a mapping of column name to array (all of one length).

    * ``input_column``: the model's single input is that column as it is (e.g. images
      ``(n, 1, 8, 8)``);
    * else a model with one input gets the columns ``names`` (default: all) stacked side by side,
      ``(n, len(names))``;
    * else each input is fed from the column of its own name, as ``(n, 1)``.

    Values are converted to each input's declared element type.
    """
    inputs = session.get_inputs()
    if input_column is not None or len(inputs) == 1:
        if len(inputs) != 1:
            raise OnnxkitError(f"input_column needs a model with one input; this one has {[i.name for i in inputs]}")
        vi = inputs[0]
        if input_column is not None:
            value = np.asarray(columns[input_column])
        else:
            picked = list(names) if names is not None else list(columns)
            value = np.column_stack([np.asarray(columns[c]) for c in picked]) if picked else None
            if value is None:
                raise OnnxkitError("no columns to score")
        dtype = _numpy_dtype(vi)
        return {vi.name: value.astype(dtype, copy=False) if dtype is not None else value}
    feed = {}
    for vi in inputs:
        if vi.name not in columns:
            raise OnnxkitError(f"the model's input {vi.name!r} has no column of that name; columns: {list(columns)}")
        value = np.asarray(columns[vi.name]).reshape(-1, 1)
        dtype = _numpy_dtype(vi)
        feed[vi.name] = value.astype(dtype, copy=False) if dtype is not None else value
    return feed


def score(session, feed: Mapping[str, np.ndarray], outputs: Optional[Sequence[str]] = None,
          batch_size: int = DEFAULT_BATCH_SIZE) -> dict:
    """Run ``session`` over ``feed`` in slices of at most ``batch_size`` rows (axis 0 of every
    input); returns ``{output name: array}`` with the slices' results concatenated in order."""
    if batch_size < 1:
        raise OnnxkitError(f"batch_size must be at least 1, not {batch_size!r}")
    names = [o.name for o in session.get_outputs()] if outputs is None else list(outputs)
    n = len(next(iter(feed.values())))
    parts: dict = {name: [] for name in names}
    for start in range(0, max(n, 1), batch_size):
        batch = {k: v[start:start + batch_size] for k, v in feed.items()}
        for name, value in zip(names, session.run(names, batch)):
            if not isinstance(value, np.ndarray):
                raise OnnxkitError(f"output {name!r} is a {type(value).__name__}, not a tensor; batch scoring needs "
                                   "tensor outputs (for a skl2onnx classifier, convert with options={'zipmap': False})")
            parts[name].append(value)
    return {name: np.concatenate(vs) if len(vs) > 1 else vs[0] for name, vs in parts.items()}


def output_columns(result: Mapping[str, np.ndarray]) -> dict:
    """Flatten a result into 1-D columns: ``name`` for ``(n,)`` and ``(n, 1)``, ``name_j`` for ``(n, k)``."""
    cols = {}
    for name, value in result.items():
        if value.ndim == 1 or (value.ndim == 2 and value.shape[1] == 1):
            cols[name] = value.reshape(-1)
        elif value.ndim == 2:
            for j in range(value.shape[1]):
                cols[f"{name}_{j}"] = value[:, j]
        else:
            raise OnnxkitError(f"output {name!r} has shape {value.shape}; a table column holds 1-D or 2-D outputs "
                               "(score a Dask Array for higher ranks)")
    return cols
