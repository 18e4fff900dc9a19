"""The garbage collector is paused while a session is built, and restored after (onnxkit.runtime.gc_pause)."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest

import onnxkit
from onnxkit.runtime import session as session_module
from onnxkit.runtime.gc_pause import collection_paused

DIGITS = str(Path(__file__).resolve().parents[2] / "examples" / "digits.onnx")


@pytest.fixture
def collector_on():
    """The collector on for the test, and as it was afterwards."""
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def _spy_validate(monkeypatch) -> list:
    """Record ``gc.isenabled()`` whenever the session's checker step runs."""
    seen = []
    original = session_module.InferenceSession._validate

    def validate(self):
        seen.append(gc.isenabled())
        return original(self)

    monkeypatch.setattr(session_module.InferenceSession, "_validate", validate)
    return seen


def test_session_built_with_collector_off_and_restored(collector_on, monkeypatch):
    seen = _spy_validate(monkeypatch)
    onnxkit.InferenceSession(DIGITS)
    assert seen == [False]
    assert gc.isenabled()


def test_collector_left_off_when_the_program_turned_it_off(collector_on, monkeypatch):
    seen = _spy_validate(monkeypatch)
    gc.disable()
    onnxkit.InferenceSession(DIGITS)
    assert seen == [False] and not gc.isenabled()


def test_collector_restored_when_the_session_fails(collector_on):
    with pytest.raises(onnxkit.OnnxkitError):
        onnxkit.InferenceSession(b"\x08\x07\x3a\x02\x12\x00 not a model")
    assert gc.isenabled()


def test_nested_and_concurrent_pauses_restore_once_at_the_outermost_exit(collector_on):
    inner_entered, release = threading.Event(), threading.Event()
    states = []

    def other():
        with collection_paused():
            inner_entered.set()
            release.wait(10)
            states.append(gc.isenabled())

    with collection_paused():
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
        worker = threading.Thread(target=other)
        worker.start()
        assert inner_entered.wait(10)
    assert not gc.isenabled()  # the other thread's pause is still open
    release.set()
    worker.join(10)
    assert states == [False] and gc.isenabled()


class _Cycle:
    def __init__(self):
        self.me = self


def test_what_the_pause_made_is_not_young_and_its_cyclic_garbage_is_still_freed(collector_on):
    import weakref

    with collection_paused():
        junk = [_Cycle() for _ in range(5000)]  # far beyond the young generation's threshold
        probe = weakref.ref(junk[0])
        del junk
    assert gc.get_count()[0] < gc.get_threshold()[0]  # moved on, not left to a young collection
    assert probe() is not None  # a cycle: reference counting alone does not free it
    gc.collect()
    assert probe() is None


def test_objects_the_program_froze_stay_frozen(collector_on):
    # Identity, not the freeze count: a frozen temporary (a frame's locals, pytest's own objects)
    # may be freed by reference counting meanwhile, which lowers the count by itself.
    sentinel = [object()]  # a tracked container, frozen below and meant to stay frozen
    gc.freeze()
    try:
        assert gc.get_freeze_count() > 0
        assert not any(o is sentinel for o in gc.get_objects())  # the permanent generation is not listed
        with collection_paused():
            junk = [[] for _ in range(1000)]
        assert gc.isenabled() and gc.get_freeze_count() > 0
        assert not any(o is sentinel for o in gc.get_objects())  # still frozen, not moved back
        del junk
    finally:
        gc.unfreeze()
    assert any(o is sentinel for o in gc.get_objects())


def test_importing_the_runtime_runs_no_collection():
    import subprocess
    import sys

    code = ("import gc, sys, onnxkit\nassert 'onnxkit.runtime.session' not in sys.modules\nstarts = []\n"
            "gc.callbacks.append(lambda phase, info: starts.append(phase) if phase == 'start' else None)\n"
            "import onnxkit.runtime\nprint(len(starts), gc.isenabled())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["0", "True"]
