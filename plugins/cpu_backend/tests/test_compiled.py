"""onnxkit_cpu.compiled: lazy numba compilation, and the switches that turn it off."""

import numpy as np

from onnxkit_cpu import compiled


@compiled.kernel
def _reciprocal_plus_one(x, out):
    for i in range(x.shape[0]):
        out[i] = 1 / x[i] + 1


def test_numba_is_installed_so_the_compiled_paths_are_the_ones_tested():
    # onnxkit-cpu depends on numba: a test run without it would test only the numpy bodies
    assert compiled.available()
    assert compiled.enabled()


def test_a_compiled_loop_runs_and_divides_by_zero_as_numpy():
    fn = _reciprocal_plus_one.get()
    assert fn is not None and fn is _reciprocal_plus_one.get()      # compiled once
    x = np.array([0.0, 2.0, -0.0], np.float64)
    out = np.empty_like(x)
    fn(x, out)                                                      # error_model="numpy": no exception
    assert out.tolist() == [np.inf, 1.5, -np.inf]


def test_disabled_and_the_environment_switch(monkeypatch):
    with compiled.disabled():
        assert not compiled.enabled() and _reciprocal_plus_one.get() is None
    assert compiled.enabled()
    monkeypatch.setenv("ONNXKIT_CPU_COMPILED", "0")
    assert not compiled.enabled() and _reciprocal_plus_one.get() is None
