"""Score a Dask DataFrame or Array with an onnxkit model, partition by partition.

    import dask.dataframe as dd
    from onnxkit.integrations import dask as okdask

    ddf = dd.read_parquet("features/")
    scored = okdask.score_dataframe(ddf, "model.onnx", columns=["f0", "f1", "f2"], batch_size=4096)
    scored.to_parquet("scores/")

The model travels to the workers once, as one task holding its octets (a
:class:`~onnxkit.integrations.ModelPayload`); each worker process builds its session from it
the first time and keeps it (:func:`onnxkit.integrations.session_for`).  Any scheduler works:
threads, processes, or a ``distributed`` cluster (``LocalCluster``, a cloud deployment...).
``threads`` caps the compute threads (BLAS, torch) inside each worker process; the number of
tasks a worker runs at once is the cluster's ``threads_per_worker``.

Needs ``pip install "onnxkit[dask]"``.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

try:
    import dask
    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd
except ImportError as exc:
    raise ImportError(f'onnxkit.integrations.dask needs Dask: pip install "onnxkit[dask]" ({exc})') from exc

from ..errors import OnnxkitError
from ._scoring import DEFAULT_BATCH_SIZE, ModelPayload, feeds_from_columns, make_payload, output_columns, score, \
    session_for

__all__ = ["score_dataframe", "score_array", "score_partition", "score_block"]


def _payload(model, backend, threads, session_options) -> ModelPayload:
    return model if isinstance(model, ModelPayload) else make_payload(model, backend=backend, threads=threads,
                                                                     **session_options)


def _shipped(payload: ModelPayload):
    """The payload as one graph key, named by its digest: shipped once, not embedded in every task."""
    return dask.delayed(payload, name=f"onnxkit-model-{payload.digest}", traverse=False)


def score_partition(frame: "pd.DataFrame", payload: ModelPayload, columns: Optional[Sequence[str]] = None,
                    outputs: Optional[Sequence[str]] = None, batch_size: int = DEFAULT_BATCH_SIZE) -> "pd.DataFrame":
    """Score one pandas partition: the output columns (:func:`~onnxkit.integrations._scoring.output_columns`),
    on the partition's index.  Runs on the worker with the worker's cached session."""
    sess = session_for(payload)
    data = {c: frame[c].to_numpy() for c in (columns if columns is not None else frame.columns)}
    result = score(sess, feeds_from_columns(sess, data, columns), outputs, batch_size)
    return pd.DataFrame(output_columns(result), index=frame.index)


def score_dataframe(df: "dd.DataFrame", model: Any, *, columns: Optional[Sequence[str]] = None,
                    outputs: Optional[Sequence[str]] = None, batch_size: int = DEFAULT_BATCH_SIZE,
                    threads: Optional[int] = None, backend: str = "cpu", meta: Any = None,
                    **session_options) -> "dd.DataFrame":
    """A lazy Dask DataFrame of the model's outputs for every row of ``df``, partition-wise.

    ``model``: a path, octets, an :class:`onnxkit.ir.Model` or a ModelPayload.  ``columns``: the
    feature columns (default: all), stacked into the single input of the model in that order,
    or, for a model with one input per column, fed by name.  ``outputs``: the outputs to keep
    (default: all; tensors only).  A ``(n, k)`` output becomes columns ``name_0 .. name_{k-1}``.
    ``batch_size``: rows per run within a partition.  ``meta``: the result's empty frame; by
    default found by scoring one row of zeros here.  Other keywords go to InferenceSession.
    """
    payload = _payload(model, backend, threads, session_options)
    cols = list(columns) if columns is not None else list(df.columns)
    if meta is None:
        probe = pd.DataFrame({c: np.zeros(1, dtype=df.dtypes[c]) for c in cols})
        meta = score_partition(probe, payload, cols, outputs, batch_size).iloc[:0]
    return df.map_partitions(score_partition, _shipped(payload), cols, outputs, batch_size, meta=meta,
                             enforce_metadata=False)


def score_block(block: np.ndarray, payload: ModelPayload, output: Optional[str] = None,
                batch_size: int = DEFAULT_BATCH_SIZE) -> np.ndarray:
    """Score one block of rows (axis 0 = rows; the block is the model's single input)."""
    sess = session_for(payload)
    (vi,) = sess.get_inputs()
    name = output if output is not None else sess.get_outputs()[0].name
    return score(sess, feeds_from_columns(sess, {vi.name: block}, input_column=vi.name), [name], batch_size)[name]


def score_array(arr: "da.Array", model: Any, *, output: Optional[str] = None, batch_size: int = DEFAULT_BATCH_SIZE,
                threads: Optional[int] = None, backend: str = "cpu", **session_options) -> "da.Array":
    """A lazy Dask Array of one output (default: the first) of a single-input model, block-wise.

    Axis 0 holds the rows; ``arr`` is rechunked so that only axis 0 is split.  The output's
    trailing shape and element type are found by scoring one row of zeros here.
    """
    payload = _payload(model, backend, threads, session_options)
    if arr.ndim == 0:
        raise OnnxkitError("score_array needs rows along axis 0, got a 0-d array")
    arr = arr.rechunk({i: -1 for i in range(1, arr.ndim)})
    probe = score_block(np.zeros((1, *arr.shape[1:]), dtype=arr.dtype), payload, output, batch_size)
    tail = probe.shape[1:]
    return da.map_blocks(score_block, arr, _shipped(payload), output, batch_size, dtype=probe.dtype,
                         chunks=(arr.chunks[0], *((t,) for t in tail)),
                         drop_axis=list(range(1, arr.ndim)), new_axis=list(range(1, 1 + len(tail))),
                         meta=np.empty((0,) * (1 + len(tail)), probe.dtype))
