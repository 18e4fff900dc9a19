"""Batch scoring beyond one process, on existing engines.

* :mod:`onnxkit.integrations.dask` — a Dask DataFrame (``map_partitions``) or Array
  (``map_blocks``), on any Dask scheduler or cluster (``pip install "onnxkit[dask]"``);
* :mod:`onnxkit.integrations.ray` — a Ray Dataset with ``map_batches`` on a pool of actors
  (``pip install "onnxkit[ray]"``).

Both ship the model as its octets plus keyword options (a :class:`ModelPayload`), never a
session: each worker process builds one :class:`onnxkit.InferenceSession` from them the first
time it needs it and keeps it, keyed by the model's SHA-256 (:func:`session_for`), so a
session is created once per worker, never per batch.  Rows are scored in batches of at most
``batch_size``; every row's result is the one a single-process ``InferenceSession.run`` gives.

This package imports neither Dask nor Ray; its submodules do, and say which extra to install
when they are missing.
"""

from ._scoring import ModelPayload, cached_sessions, make_payload, session_for

__all__ = ["ModelPayload", "make_payload", "session_for", "cached_sessions"]
