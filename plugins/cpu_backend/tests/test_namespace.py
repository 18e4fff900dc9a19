"""The cpu backend's array namespace (onnxkit_cpu.namespace): array-api-compat's numpy namespace,
its clone of numpy imported only when a name it defines itself is looked up.

Oracles: array-api-compat's own module (the names, the objects, astype / asarray's results and
refusals) and numpy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import array_api_compat
import array_api_compat.numpy as compat
import numpy as np
import pytest

from onnxkit_cpu import namespace as ns

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "digits.onnx"


def _release() -> str:
    return ".".join(array_api_compat.__version__.split(".")[:2])


def test_the_wrapped_names_are_the_installed_release_s_own():
    """Every name of array_api_compat.numpy outside WRAPPED is numpy's own object there, so the
    namespace's numpy answer is the clone's; on another release line the namespace takes every
    name from the clone."""
    missing = object()
    own = {n for n in dir(compat) if getattr(compat, n) is not getattr(np, n, missing)}
    if _release() == ns.WRAPPED_VERSION:
        assert own == ns.WRAPPED
        assert ns._known_release() is True
    else:
        assert ns._known_release() is False


def test_every_name_is_the_clone_s_object_or_answers_as_it_does():
    xp = ns.numpy_namespace()
    for name in sorted({n for n in dir(compat) if not n.startswith("__")} | ns.WRAPPED):
        if name in ns.OWN and "array_api_compat.numpy" not in sys.modules:
            continue
        got, want = getattr(xp, name), getattr(compat, name)
        assert got is want or (name in ns.OWN and callable(got)), name
    assert xp.strings is np.strings and xp.random is np.random        # numpy's names the clone leaves out
    assert array_api_compat.is_numpy_namespace(xp)
    with pytest.raises(AttributeError):
        xp.__no_such_dunder__
    with pytest.raises(AttributeError):
        xp.no_such_name_anywhere


_ARRAYS = [np.arange(12, dtype=np.float32).reshape(3, 4), np.arange(12, dtype=np.int64).reshape(3, 4)[:, ::2],
           np.array(2.5, np.float64), np.array([True, False]), np.zeros((0, 3), np.float16)]
_DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_, np.uint8]


def _outcome(fn, *args, **kwargs):
    try:
        out = fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 (the refusal itself is compared)
        return ("raised", type(exc))
    return ("value", out)


def _same(a, b, source=None):
    assert a[0] == b[0], (a, b)
    if a[0] == "raised":
        assert a[1] is b[1]
        return
    x, y = a[1], b[1]
    assert type(x) is type(y) and x.dtype == y.dtype and x.shape == y.shape
    np.testing.assert_array_equal(x, y)
    if isinstance(source, np.ndarray):
        assert np.shares_memory(x, source) == np.shares_memory(y, source)


@pytest.mark.parametrize("copy", [True, False])
@pytest.mark.parametrize("device", [None, "cpu", "gpu"])
def test_astype_is_array_api_compat_s(copy, device):
    for x in _ARRAYS:
        for dt in _DTYPES:
            _same(_outcome(ns.astype, x, dt, copy=copy, device=device),
                  _outcome(compat.astype, x, dt, copy=copy, device=device), x)


@pytest.mark.parametrize("copy", [None, True, False])
@pytest.mark.parametrize("device", [None, "cpu", "gpu"])
def test_asarray_is_array_api_compat_s(copy, device):
    sources = [*_ARRAYS, [1, 2, 3], [[1.5, 2.0]], 7, 2.5, True, np.float32(3)]
    for x in sources:
        for dt in [None, *_DTYPES]:
            _same(_outcome(ns.asarray, x, dtype=dt, copy=copy, device=device),
                  _outcome(compat.asarray, x, dtype=dt, copy=copy, device=device), x)
    # keywords array-api-compat passes on to numpy.array
    x = np.arange(6).reshape(2, 3)
    _same(_outcome(ns.asarray, x, order="F"), _outcome(compat.asarray, x, order="F"), x)
    assert ns.asarray(x, order="F").flags.f_contiguous


@pytest.mark.parametrize("device", [None, "cpu", "gpu"])
def test_the_creation_functions_are_array_api_compat_s(device):
    for args in [(5,), (2, 9), (2, 9, 3), (0.5, 3.0, 0.75), (9, 2, -2), (3, None)]:
        for dt in [None, np.float32, np.int32, np.int64]:
            _same(_outcome(ns.arange, *args, dtype=dt, device=device),
                  _outcome(compat.arange, *args, dtype=dt, device=device))
    _same(_outcome(ns.arange, 1, stop=4, step=2, device=device), _outcome(compat.arange, 1, stop=4, step=2,
                                                                          device=device))
    for x in _ARRAYS:
        for dt in [None, *_DTYPES]:
            _same(_outcome(ns.zeros_like, x, dtype=dt, device=device),
                  _outcome(compat.zeros_like, x, dtype=dt, device=device))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)[:, ::-1]
    _same(_outcome(ns.zeros_like, x, order="C"), _outcome(compat.zeros_like, x, order="C"))
    assert ns.zeros_like(x, order="K").strides == compat.zeros_like(x, order="K").strides


def test_permute_dims_and_take_along_axis_are_array_api_compat_s():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for axes in [(0, 1, 2), (2, 0, 1), (1, 2, 0), (0, 1), (0, 0, 1)]:
        _same(_outcome(ns.permute_dims, x, axes), _outcome(compat.permute_dims, x, axes), x)
        _same(_outcome(ns.permute_dims, x, axes=axes), _outcome(compat.permute_dims, x, axes=axes), x)
    idx = np.argsort(-x, axis=-1)[..., :2]
    for kw in [{}, {"axis": -1}, {"axis": 2}, {"axis": 0}, {"axis": None}]:
        _same(_outcome(ns.take_along_axis, x, idx, **kw), _outcome(compat.take_along_axis, x, idx, **kw))
    rows = np.argsort(x, axis=0)[:1]
    _same(_outcome(ns.take_along_axis, x, rows, axis=0), _outcome(compat.take_along_axis, x, rows, axis=0))
    _same(_outcome(ns.take_along_axis, x, rows), _outcome(compat.take_along_axis, x, rows))   # axis -1: refused alike


_CHILD = r"""
import json, sys
import numpy as np
import onnxkit
out = {}
s = onnxkit.InferenceSession(sys.argv[1])
y = s.run(None, {"image": np.zeros((1, 1, 8, 8), np.float32)})[0]
out["sum"] = float(y.sum())
out["after_run"] = "array_api_compat.numpy" in sys.modules
from onnxkit_cpu.plugin import _namespace
xp = _namespace()
out["same_object"] = xp is s.registry.backends["cpu"].xp()
if sys.argv[2] == "namespace":      # a name array-api-compat defines, looked up first
    got = xp.unique_values
else:                               # a kernel reaching array-api-compat's numpy on its own
    import array_api_compat
    array_api_compat.array_namespace(np.ones(2))
    got = xp.unique_values
compat = sys.modules["array_api_compat.numpy"]
out["wrapped"] = got is compat.unique_values
out["f2py"] = "numpy.f2py" in sys.modules
out["testing"] = "numpy.testing" in sys.modules
out["loader"] = type(compat.__loader__).__name__
out["rest"] = compat.random is np.random
out["linalg"] = xp.linalg is compat.linalg
out["finder_left"] = any(type(f).__name__ == "_CloneFinder" for f in sys.meta_path)
print("RESULT " + json.dumps(out))
"""


@pytest.mark.parametrize("first", ["namespace", "import"])
def test_a_fresh_session_on_the_example_imports_no_clone_and_a_later_import_is_the_clone(first):
    env = {k: v for k, v in os.environ.items() if k not in ("ONNXKIT_PLUGINS", "ONNXKIT_FIRST_RUN")}
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(EXAMPLE), first], capture_output=True, text=True,
                          env=env, timeout=300)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, proc.stderr[-3000:]
    out = json.loads(line[7:])
    assert out["sum"] == pytest.approx(1.0, abs=1e-5)                     # softmax probabilities
    known = _release() == ns.WRAPPED_VERSION
    assert out["after_run"] is (not known)                                 # astype alone: no clone
    assert out["same_object"] is True
    assert out["wrapped"] is True                                          # array-api-compat's own function
    assert out["f2py"] is False and out["testing"] is False               # imported as the clone
    assert out["loader"] != "_CloneLoader"                                 # the real loader left on it
    assert out["rest"] is True and out["linalg"] is True
    assert out["finder_left"] is False


def test_the_installed_release_is_read_without_importing_array_api_compat():
    """The namespace's release check reads array-api-compat's ``__version__`` from its file when
    the package is not imported yet (a fresh process), the same string the package gives."""
    import array_api_compat

    code = ("import sys; from onnxkit_cpu import namespace as n; "
            "print(n._installed_release(), 'array_api_compat' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [array_api_compat.__version__, "False"]


def test_device_of_answers_as_array_api_compat_does():
    """onnxkit_default_domain's device_of: array-api-compat's device for numpy arrays and scalars
    (answered without it) and for torch tensors (asked of it)."""
    import array_api_compat
    import torch

    from onnxkit_default_domain.api import device_of

    for x in (np.zeros((2, 3), np.float32), np.float32(1.0), np.zeros((), np.int64)[()], np.arange(3)[::2]):
        assert device_of(x) == array_api_compat.device(x) == "cpu"
    t = torch.zeros(3)
    assert device_of(t) == array_api_compat.device(t)
    code = ("import sys, numpy as np; from onnxkit_default_domain.api import device_of; "
            "print(device_of(np.zeros(2)), device_of(np.float32(1)), 'array_api_compat' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["cpu", "cpu", "False"]   # numpy's answer without array-api-compat
