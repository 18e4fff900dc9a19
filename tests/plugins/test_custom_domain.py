"""The example domain package (examples/custom_domain): registered in-process, evaluated end to end."""

import importlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from onnxkit import ir
from onnxkit.cli.unsupported_cmd import unsupported_operators
from onnxkit.errors import UnsupportedOperatorError
from onnxkit.registry import build_registry
from onnxkit.runtime import InferenceSession

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_domain"
DOMAIN = "org.onnxkit.example.stats"


@pytest.fixture(scope="module")
def stats_plugin():
    sys.path.insert(0, str(EXAMPLE))
    try:
        yield importlib.import_module("onnxkit_example_stats.plugin")
    finally:
        sys.path.remove(str(EXAMPLE))


def stats_model() -> ir.Model:
    A = ir.Attribute.make
    graph = ir.Graph(
        node=[ir.Node(["x"], ["h"], name="hist", op_type="MakeHistogram", domain=DOMAIN, attribute=[A("bins", 4)]),
              ir.Node(["h", "q"], ["y"], name="quant", op_type="HistogramQuantile", domain=DOMAIN)],
        name="stats",
        input=[ir.ValueInfo("x", ir.tensor_type(1, ["N"])), ir.ValueInfo("q", ir.tensor_type(1, [3]))],
        output=[ir.ValueInfo("y", ir.tensor_type(1, [3]))],
        value_info=[ir.ValueInfo("h", ir.OpaqueType(DOMAIN, "Histogram"))],
    )
    return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21), ir.OperatorSetId(DOMAIN, 1)], graph=graph)


def test_a_registered_domain_package_evaluates_its_operators(stats_plugin):
    reg = build_registry(extra=[("example_stats", stats_plugin)])
    assert not reg.faults
    assert (DOMAIN, "Histogram") in reg.opaque_types
    sess = InferenceSession(stats_model(), registry=reg)
    x = np.array([0, 1, 2, 3, 4, 5, 6, 7], dtype=np.float32)
    (y,) = sess.run(None, {"x": x, "q": np.array([0.0, 0.5, 1.0], dtype=np.float32)})
    # 4 equal bins over [0, 7], two values each: the median is the middle edge, 3.5
    np.testing.assert_allclose(y, [0.0, 3.5, 7.0])
    assert y.dtype == np.float32


def test_without_the_package_its_operators_are_unsupported_and_listed_once():
    model = stats_model()
    model.graph.node.append(ir.Node(["y"], ["z"], name="again", op_type="HistogramQuantile", domain=DOMAIN))
    with pytest.raises(UnsupportedOperatorError) as info:
        InferenceSession(model, registry=build_registry(), validate=False)
    listed = [(d, op) for d, op, _, _ in info.value.operators]
    assert sorted(listed) == [(DOMAIN, "HistogramQuantile"), (DOMAIN, "MakeHistogram")]
    assert all("no installed plugin provides this operator set" in why for *_, why in info.value.operators)
    assert len(unsupported_operators(model, registry=build_registry())) == 2


def test_onnxkit_unsupported_cli_exits_1_and_lists_them(tmp_path):
    import onnxkit

    path = tmp_path / "stats.onnx"
    onnxkit.save(stats_model(), path)
    out = subprocess.run([sys.executable, "-m", "onnxkit", "unsupported", str(path)], capture_output=True, text=True)
    assert out.returncode == 1
    assert "MakeHistogram" in out.stdout and "HistogramQuantile" in out.stdout and DOMAIN in out.stdout


def test_the_domain_package_infers_its_types(stats_plugin):
    from onnxkit.inference import infer_shapes

    reg = build_registry(extra=[("example_stats", stats_plugin)])
    model = stats_model()
    model.graph.value_info.clear()
    inferred = infer_shapes(model, registry=reg)
    types = {vi.name: vi.type for vi in inferred.graph.value_info}
    assert types["h"] == ir.OpaqueType(DOMAIN, "Histogram")


def test_the_package_is_pip_installable_and_listed_by_onnxkit_plugins(tmp_path):
    # build the distribution's metadata the way pip does, without touching the environment
    import shutil

    source = tmp_path / "src"  # a copy: building leaves metadata beside the sources
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    wheel = next(tmp_path.glob("onnxkit_example_stats-*.whl"))
    import zipfile

    with zipfile.ZipFile(wheel) as z:
        eps = z.read(next(n for n in z.namelist() if n.endswith("entry_points.txt"))).decode()
    assert "[onnxkit]" in eps and "example_stats = onnxkit_example_stats.plugin" in eps


def standardize_model() -> ir.Model:
    """Standardize, then a histogram of the result and its quantiles: one tensor operator and two
    operators passing an opaque value."""
    A = ir.Attribute.make
    graph = ir.Graph(
        node=[ir.Node(["x"], ["s"], name="std", op_type="Standardize", domain=DOMAIN, attribute=[A("epsilon", 0.0)]),
              ir.Node(["s"], ["h"], name="hist", op_type="MakeHistogram", domain=DOMAIN, attribute=[A("bins", 4)]),
              ir.Node(["h", "q"], ["y"], name="quant", op_type="HistogramQuantile", domain=DOMAIN)],
        name="standardize",
        input=[ir.ValueInfo("x", ir.tensor_type(1, ["N"])), ir.ValueInfo("q", ir.tensor_type(1, [3]))],
        output=[ir.ValueInfo("s", ir.tensor_type(1, ["N"])), ir.ValueInfo("y", ir.tensor_type(1, [3]))],
    )
    return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21), ir.OperatorSetId(DOMAIN, 1)], graph=graph)


@pytest.mark.parametrize("provider", ["CPUExecutionProvider", "gpu"])
def test_the_domain_kernels_run_on_both_backends_without_backend_code(stats_plugin, provider):
    """The example's kernels are written once: Standardize runs on the gpu backend itself (torch),
    the two opaque-value operators run on the host, listed as per-node fallbacks on gpu."""
    reg = build_registry(extra=[("example_stats", stats_plugin)])
    assert not reg.faults
    sess = InferenceSession(standardize_model(), registry=reg, providers=[provider])
    x = np.array([1, 2, 3, 4, 5, 6, 7, 8], dtype=np.float32)
    s, y = sess.run(None, {"x": x, "q": np.array([0.0, 0.5, 1.0], dtype=np.float32)})
    expected = (x - x.mean()) / x.std()
    np.testing.assert_allclose(s, expected, rtol=1e-6)
    np.testing.assert_allclose(y, [expected[0], 0.0, expected[-1]], atol=1e-6)
    fell_back = {fb.node for fb in sess.fallbacks}
    if provider == "CPUExecutionProvider":
        assert sess.get_providers()[0] == "CPUExecutionProvider" and fell_back == set()
    else:
        assert fell_back == {"hist", "quant"}        # the opaque values live on the host


def test_the_example_imports_only_the_plugin_surface():
    """A plugin author needs one module: onnxkit.plugin."""
    import ast

    for path in (EXAMPLE / "onnxkit_example_stats").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("onnxkit"):
                assert node.module == "onnxkit.plugin", f"{path.name} imports {node.module}"
