"""The validator over the ONNX 1-3 test package: every model there is valid, so no error.

The node vectors (1,884 models), simple/, pytorch-converted/, pytorch-operator/ and
light/ are each checked in full.  A vector that genuinely violates a rule of Part 1 is
not a reason to weaken a check: it goes into :data:`ALLOWED`, with the reason, and the
test then requires exactly those codes for it.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from onnxkit.checker import check_model

#: Vectors that violate a rule of Part 1, by folder-relative path: {path: {code: reason}}.
#: Empty at onnx 1.23.2: every vector of the package conforms.
ALLOWED: dict = {}

#: Warnings the package is known to raise, by code: each conforms but leans on something open.
EXPECTED_WARNINGS = {
    # test_if_opt carries Optional's `type` attribute in AttributeProto.tp, which Annex B
    # marks deprecated (a consumer ignores it).
    "deprecated-field": {"node/test_if_opt/model.onnx"},
}


@pytest.fixture(scope="module")
def root(request) -> Path:
    for name in ("vectors", "onnx_vectors_dir"):  # the shared session fixture of tests/conftest.py
        try:
            return Path(request.getfixturevalue(name))
        except pytest.FixtureLookupError:
            continue
    pytest.importorskip("onnx")
    from onnx_vectors import ensure_vectors

    return ensure_vectors()


def _check_all(root: Path, pattern: str):
    paths = sorted(root.glob(pattern))
    failures, warnings = [], {}
    for p in paths:
        rel = p.relative_to(root).as_posix()
        report = check_model(str(p))
        allowed = ALLOWED.get(rel, {})
        errors = [d for d in report.errors if d.code not in allowed]
        if errors or set(allowed) - report.codes():
            failures.append(f"{rel}:\n" + "\n".join(f"    {d}" for d in errors)
                            + "".join(f"\n    allow-listed {c} no longer reported" for c in set(allowed) - report.codes()))
        for d in report.warnings:
            warnings.setdefault(d.code, set()).add(rel)
    return paths, failures, warnings


def _assert_warnings(warnings: dict, folder: str):
    for code, paths in warnings.items():
        expected = {p for p in EXPECTED_WARNINGS.get(code, set()) if p.startswith(folder)}
        assert paths == expected, f"unexpected {code} warnings: {sorted(paths - expected)[:10]}"


def test_node_vectors(root):
    start = time.process_time()  # CPU seconds: the bound holds however busy the machine is
    paths, failures, warnings = _check_all(root, "node/*/model.onnx")
    elapsed = time.process_time() - start
    assert len(paths) == 1884
    assert not failures, f"{len(failures)} node vectors have errors:\n" + "\n".join(failures[:20])
    _assert_warnings(warnings, "node/")
    assert elapsed < 60, f"checking the node vectors took {elapsed:.1f} CPU seconds"


@pytest.mark.parametrize("folder,pattern,count", [
    ("simple", "simple/*/model.onnx", 23),
    ("pytorch-converted", "pytorch-converted/*/model.onnx", 82),
    ("pytorch-operator", "pytorch-operator/*/model.onnx", 35),
    ("light", "light/*.onnx", 9),
])
def test_model_vectors(root, folder, pattern, count):
    paths, failures, warnings = _check_all(root, pattern)
    assert len(paths) == count
    assert not failures, f"{len(failures)} {folder} models have errors:\n" + "\n".join(failures[:20])
    _assert_warnings(warnings, folder + "/")


def test_vector_ir_versions_are_varied(root):
    """The package exercises the per-IR-version rules: IR 3 models (initializers as inputs) to IR 14."""
    from onnxkit.api import load

    versions = {load(str(p), external_data="never").ir_version for p in sorted(root.glob("node/*/model.onnx"))}
    versions |= {load(str(p), external_data="never").ir_version for p in sorted(root.glob("light/*.onnx"))}
    assert {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14} <= versions


def test_mutated_vector_is_caught(root):
    """A vector with one fault injected: the fault is reported, nothing else."""
    from onnxkit.api import load, to_bytes

    m = load(str(root / "node" / "test_conv_with_strides_padding" / "model.onnx"), external_data="never")
    conv = next(n for n in m.graph.node if n.op_type == "Conv")
    conv.attribute.append(conv.attribute[0])            # an attribute given twice
    conv.input += ["B", "extra"]                        # 4 inputs to Conv (2..3), both undefined
    codes = [d.code for d in check_model(to_bytes(m)).errors]
    assert sorted(codes) == ["duplicate-attribute", "input-arity", "undefined-value", "undefined-value"]


def test_corrupted_vectors_never_crash(root):
    """Decoded octets always give a report: 1,500 vectors with random octets overwritten."""
    import random

    paths = sorted(root.glob("node/*/model.onnx"))
    rng = random.Random(20240)
    found = set()
    for _ in range(1500):
        data = bytearray(rng.choice(paths).read_bytes())
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        found |= check_model(bytes(data)).codes()
    assert "decode-error" in found and len(found) > 10
