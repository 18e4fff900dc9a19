"""Score a Ray Dataset with an onnxkit model: ``map_batches`` on a pool of actors.

    import ray
    from onnxkit.integrations import ray as okray

    ds = ray.data.read_parquet("features/")
    scored = okray.score_dataset(ds, "model.onnx", columns=["f0", "f1", "f2"], num_workers=4)
    scored.write_parquet("scores/")

Each actor of the pool is one :class:`OnnxkitPredictor`: it builds its session once, in its
constructor, from the model's octets (a :class:`~onnxkit.integrations.ModelPayload`), and
scores every batch it is given with it.  ``threads`` is both the CPUs Ray reserves per actor
and the cap on the actor's compute threads (BLAS, torch).

Needs ``pip install "onnxkit[ray]"``.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

try:
    import ray.data
except ImportError as exc:
    raise ImportError(f'onnxkit.integrations.ray needs Ray Data: pip install "onnxkit[ray]" ({exc})') from exc

from ._scoring import DEFAULT_BATCH_SIZE, ModelPayload, feeds_from_columns, make_payload, score, session_for

__all__ = ["OnnxkitPredictor", "score_dataset"]


class OnnxkitPredictor:
    """A callable class for ``Dataset.map_batches``: one session per actor, built in ``__init__``.

    A batch is a ``{column: numpy array}`` mapping; the result holds the requested outputs (as
    they come, ``(n, ...)``) and the ``keep_columns`` of the batch unchanged.  See
    :func:`onnxkit.integrations._scoring.feeds_from_columns` for how columns feed the inputs.
    """

    def __init__(self, payload: ModelPayload, columns: Optional[Sequence[str]] = None,
                 input_column: Optional[str] = None, outputs: Optional[Sequence[str]] = None,
                 keep_columns: Sequence[str] = (), batch_size: int = DEFAULT_BATCH_SIZE):
        self.session = session_for(payload)
        self.columns = list(columns) if columns is not None else None
        self.input_column = input_column
        self.outputs = list(outputs) if outputs is not None else None
        self.keep_columns = list(keep_columns)
        self.batch_size = batch_size

    def __call__(self, batch: dict) -> dict:
        names = self.columns
        if names is None and self.input_column is None:
            names = [c for c in batch if c not in self.keep_columns]
        feed = feeds_from_columns(self.session, batch, names, self.input_column)
        out = score(self.session, feed, self.outputs, self.batch_size)
        for c in self.keep_columns:
            out[c] = np.asarray(batch[c])
        return out


def score_dataset(ds: "ray.data.Dataset", model: Any, *, columns: Optional[Sequence[str]] = None,
                  input_column: Optional[str] = None, outputs: Optional[Sequence[str]] = None,
                  keep_columns: Sequence[str] = (), batch_size: int = DEFAULT_BATCH_SIZE, num_workers: int = 1,
                  threads: int = 1, backend: str = "cpu", **session_options) -> "ray.data.Dataset":
    """A lazy Ray Dataset of the model's outputs for every row of ``ds``.

    ``model``: a path, octets, an :class:`onnxkit.ir.Model` or a ModelPayload.  ``columns``:
    feature columns stacked into the model's single input (default: every column but
    ``keep_columns``), or fed by name to a model with one input per column; ``input_column``:
    a column of tensors that is the single input as it is.  ``batch_size``: rows per batch Ray
    hands an actor (and per run).  ``num_workers``: actors in the pool; ``threads``: CPUs and
    compute threads per actor.  Other keywords go to InferenceSession.
    """
    payload = model if isinstance(model, ModelPayload) else make_payload(
        model, backend=backend, threads=threads, **session_options)
    return ds.map_batches(
        OnnxkitPredictor,
        fn_constructor_kwargs={"payload": payload, "columns": columns, "input_column": input_column,
                               "outputs": outputs, "keep_columns": tuple(keep_columns), "batch_size": batch_size},
        batch_size=batch_size, batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=num_workers),
        num_cpus=threads,
    )
