"""onnxkit_default_domain.api publishes its names lazily: an override that needs Conv's helpers
does not import every portable family (issue 32 item 1)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import onnxkit_default_domain.api as api

#: portable families the bundled example (Conv, Relu, MaxPool, Flatten, Gemm, Softmax) does not use
UNUSED_BY_DIGITS = ("cast", "indexing", "norm", "quantization", "reduction", "resize", "rnn", "selection")


def _after_a_run_of_the_example(code: str) -> str:
    """What ``code`` prints in a fresh process after one session on the example has run."""
    prelude = ("import sys, numpy as np, onnxkit\n"
               "s = onnxkit.InferenceSession('examples/digits.onnx')\n"
               "s.run(None, {'image': np.zeros((1, 1, 8, 8), np.float32)})\n")
    out = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=300,
                         cwd=str(__import__("pathlib").Path(__file__).resolve().parent.parent))
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_a_session_on_the_example_imports_only_the_families_it_plans():
    loaded = set(_after_a_run_of_the_example(
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('onnxkit_default_domain.kernels.'))))").split())
    assert "onnxkit_default_domain.kernels.conv" in loaded  # the cpu Conv override's helpers
    assert not {f"onnxkit_default_domain.kernels.{f}" for f in UNUSED_BY_DIGITS} & loaded, loaded


def test_every_published_name_resolves_to_its_module_object():
    from onnxkit_default_domain.kernels import conv, pool, shape

    assert set(api._PUBLISHED) == set(api.__all__) and len(api.__all__) == 96
    assert api.conv is conv and api.make_conv is conv.make_conv
    assert api.max_pool_padding is pool._lowest and api.WIDENED_ONLY_VERSIONS is shape._LATEST
    assert set(api.__all__) <= set(dir(api))


def test_an_unpublished_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="no attribute '_hidden'"):
        api._hidden  # noqa: B018
    with pytest.raises(ImportError):
        exec("from onnxkit_default_domain.api import not_published", {})


def test_a_session_imports_no_attrs_and_decodes_few_schema_definitions():
    """The cold-start costs issue 32 removed stay removed: attrs (about 0.5 ms to define a class) is not
    imported, and of the 634 ai.onnx definitions a session on the example decodes only those its
    operator sets are asked for."""
    printed = _after_a_run_of_the_example(
        "from onnxkit.schema import packaged_schema_data\n"
        "data = packaged_schema_data('onnxkit_default_domain')\n"
        "print(int('attrs' in sys.modules or 'attr' in sys.modules), len(data._made), len(data.keys))")
    attrs_loaded, made, keys = map(int, printed.split())
    assert attrs_loaded == 0 and keys == 634 and 0 < made < 60, printed
