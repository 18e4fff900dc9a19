"""Process-wide defaults onnxruntime's module functions set, read by sessions created later.

``seed``: :func:`onnxruntime.set_seed`'s seed, used by a session not given ``seed=``;
``global_threads``: ``(intra, inter)`` of ``set_global_thread_pool_sizes``, used by a session
whose config entry ``session.use_per_session_threads`` is ``"0"``.
"""

from __future__ import annotations

DEFAULTS: dict = {"seed": None, "global_threads": None}
