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
                         cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]))
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_a_session_on_the_example_imports_only_the_families_it_plans():
    loaded = set(_after_a_run_of_the_example(
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('onnxkit_default_domain.kernels.'))))").split())
    assert "onnxkit_default_domain.kernels.conv" in loaded  # the cpu Conv override's helpers
    assert not {f"onnxkit_default_domain.kernels.{f}" for f in UNUSED_BY_DIGITS} & loaded, loaded


def test_every_published_name_resolves_to_its_module_object():
    from onnxkit_default_domain.kernels import conv, pool, shape

    assert set(api._PUBLISHED) == set(api.__all__) and len(api.__all__) == 107
    assert api.conv is conv and api.make_conv is conv.make_conv
    assert api.max_pool_padding is pool._lowest and api.WIDENED_ONLY_VERSIONS is shape._LATEST
    assert set(api.__all__) <= set(dir(api))


def test_an_unpublished_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="no attribute '_hidden'"):
        api._hidden  # noqa: B018
    with pytest.raises(ImportError):
        exec("from onnxkit_default_domain.api import not_published", {})


#: the most record classes (attrs classes, about 0.45 ms each to define) a session on the example may define:
#: 70 before the seldom-carried IR messages and the rule passes without a root in its graph were left out, 56
#: before the model-local functions, training information, sparse tensors, the external-data options and the
#: registry's fault and opaque-type records were
SESSION_RECORD_CLASSES = 42
#: modules a session on the example does not import: the seldom-carried IR messages, model-local functions and
#: training information, sparse tensors, test data's values, the external-data modules (the example has no
#: external tensor), the registry's fault and opaque-type records, the diagnostics' record (the example's check
#: finds nothing), and the rule passes whose roots
#: (QuantizeLinear, Mul / Div, MatMul) its graph does not have
NOT_ON_THE_EXAMPLE_PATH = ("onnxkit.ir.seldom", "onnxkit.ir.function", "onnxkit.ir.sparse", "onnxkit.ir.data",
                           "onnxkit.external", "onnxkit.external_read", "onnxkit.checker.external",
                           "onnxkit.registry_records", "onnxkit.diagnostic_record",
                           "onnxkit.runtime.optimizer.qdq", "onnxkit.runtime.optimizer.gelu",
                           "onnxkit.runtime.optimizer.hardswish", "onnxkit.runtime.optimizer.attention")


def test_a_session_defines_few_record_classes_and_decodes_few_schema_definitions():
    """The cold-start costs issues 32 and 42 bounded stay bounded: records are attrs classes (issue 42
    item 8), so attrs is imported, but a session on the example defines only the record classes on its
    path (none of the modules above), and of the 634 ai.onnx definitions it decodes only those its
    operator sets are asked for."""
    printed = _after_a_run_of_the_example(
        "attrs_loaded = int('attr' in sys.modules)\n"
        "n = sum(1 for name, m in list(sys.modules.items()) if name.startswith('onnxkit') and m is not None\n"
        "        for c in vars(m).values()\n"
        "        if isinstance(c, type) and c.__module__ == name and '__attrs_attrs__' in c.__dict__)\n"
        f"late = [m for m in {NOT_ON_THE_EXAMPLE_PATH!r} if m in sys.modules]\n"
        "from onnxkit.schema import packaged_schema_data\n"
        "data = packaged_schema_data('onnxkit_default_domain')\n"
        "print(attrs_loaded, n, len(data._made), len(data.keys), ','.join(late) or '-')")
    attrs_loaded, classes, made, keys, late = printed.split()
    assert attrs_loaded == "1" and late == "-", printed
    assert 30 < int(classes) <= SESSION_RECORD_CLASSES, printed
    assert int(keys) == 634 and 0 < int(made) < 60, printed


@pytest.mark.parametrize("name", ["qdq", "gelu", "hardswish", "attention"])
def test_a_rule_pass_imported_on_demand_names_every_op_type_its_rules_start_at(name):
    """The optimizer imports these passes only for a graph with a node their rules can start at
    (``_on_roots``): the op types it names are exactly those of the rules' roots (a Mul root matches a
    Div too, :func:`~onnxkit.runtime.optimizer.rules.apply_rules`), so no rewrite is skipped."""
    import importlib

    from onnxkit.runtime import optimizer

    lazy = next(p for p in optimizer.PASSES if p.name == name).run
    module = importlib.import_module(f"onnxkit.runtime.optimizer.{name}")
    rules = tuple(module.RULES) + tuple(getattr(module, "ACTIVE", ()))
    roots = {t for r in rules for t in (("Mul", "Div") if r.pattern.op_type == "Mul" else (r.pattern.op_type,))}
    assert lazy.module == name and lazy.roots == roots, (lazy.roots, roots)
