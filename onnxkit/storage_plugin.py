"""The host's own storage plugin (entry point ``local_storage``): the local filesystem.

Registered through the same ``onnxkit_storage`` hook as any third-party storage, so the
registry's ``storages['file']`` is :class:`onnxkit.storage.LocalFileStorage` (Clause 15.3).
"""

from __future__ import annotations

from .hookspecs import hookimpl
from .storage import LocalFileStorage


@hookimpl
def onnxkit_storage():
    return [LocalFileStorage()]
