"""The garbage collector is paused while a session is built, and restored after (onnxkit.runtime.gc_pause)."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest

import onnxkit
from onnxkit.runtime import session as session_module
from onnxkit.runtime.gc_pause import collection_paused

DIGITS = str(Path(__file__).resolve().parent.parent / "examples" / "digits.onnx")


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
