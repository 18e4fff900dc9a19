"""Python's cyclic garbage collector paused while a session is built.

Building a session allocates many small objects (the model's nodes, the checker's and the
inference's records, the plan's steps) and frees few of them, so the collector runs again and
again (dozens of collections on a BERT encoder, a sizeable share of building its session) and
finds little to free.  :func:`collection_paused` switches it off for the duration of a ``with``
block and restores it afterwards:

* the collector is switched back on when the block exits, normally or by an exception, and
  only if it was on when the outermost block began (a program that disabled it keeps it off);
* nested and concurrent blocks (sessions built in several threads) share one pause: the first
  to enter switches it off, the last to leave restores it;
* what the block made is not then examined by a young-generation collection (which would
  traverse it all and find it all alive): when the collector is restored and no object is
  frozen, the objects the block made are moved to the oldest generation (``gc.freeze()`` then
  ``gc.unfreeze()``: two list splices, no traversal), as the session's long-lived objects would be
  after two collections.  Nothing is lost: cyclic garbage among them is freed by the next full
  collection, and reference counting frees everything else as usual.  A program that froze
  objects itself (``gc.get_freeze_count() > 0``, e.g. before forking) keeps them frozen: then
  the collector is simply switched back on.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0  # blocks now inside collection_paused()
_restore = False  # whether the outermost block found the collector on


@contextmanager
def collection_paused():
    """A ``with`` block during which the cyclic garbage collector does not run (see the module)."""
    global _depth, _restore
    with _lock:
        if _depth == 0:
            _restore = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _restore:
                if gc.get_freeze_count() == 0:
                    gc.freeze()  # everything tracked to the permanent generation ...
                    gc.unfreeze()  # ... and back into the oldest one, uncounted by the young one
                gc.enable()
