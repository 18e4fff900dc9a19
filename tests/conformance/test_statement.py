"""``onnxkit conformance statement`` (Annex A): generated from the code, embedded in docs/conformance.md,
summarized in the README (both written by ``python tools/update_statement.py``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from onnxkit.cli import main
from onnxkit.registry import build_registry
from onnxkit.statement import build_statement, embedded_in, render_markdown

ROOT = Path(__file__).resolve().parents[2]
STATEMENT_PAGE = ROOT / "docs" / "conformance.md"
README = ROOT / "README.md"
sys.path.insert(0, str(ROOT / "tools"))
try:
    import update_statement
finally:
    sys.path.remove(str(ROOT / "tools"))


def test_the_docs_embed_exactly_what_the_command_prints(capsys):
    embedded = embedded_in(STATEMENT_PAGE.read_text())
    assert embedded is not None, "docs/conformance.md has lost its conformance-statement markers"
    printed = render_markdown(build_statement(build_registry()))
    assert embedded == printed, "docs/conformance.md's statement is stale: run `python tools/update_statement.py`"
    assert main(["conformance", "statement"]) == 0
    assert capsys.readouterr().out == printed


def test_the_readme_summarizes_the_statement():
    embedded = update_statement.embedded_summary(README.read_text())
    assert embedded is not None, "the README has lost its statement-summary markers"
    printed = render_markdown(build_statement(build_registry()))
    assert embedded == update_statement.summary(printed), \
        "the README's statement summary is stale: run `python tools/update_statement.py`"
    rows = embedded.splitlines()[2:]
    assert len(rows) == len(update_statement.SUMMARY_ITEMS) == 3
    assert any("node 1,884 / 1,884 on `cpu`" in r for r in rows), rows  # the figure a newcomer looks for first
    assert "details below" not in embedded


def test_every_item_of_table_a1_is_there():
    st = build_statement(build_registry())
    assert st["implementation"]["name"] == "onnxkit" and st["implementation"]["plugins"]
    assert st["ir_versions"]["read"] == [1, 14]
    assert set(st["operators"]) == {"cpu", "gpu"}
    cpu = {d["domain"]: d for d in st["operators"]["cpu"]}
    assert cpu["ai.onnx"]["definitions"] == 629 and cpu["ai.onnx"]["unsupported"] == []
    assert {t["type"] for t in st["tolerances"]} >= {"FLOAT", "DOUBLE", "FLOAT16", "BFLOAT16", "INT64"}
    assert st["test_package"]["lines"] and st["divergences"] and st["positions"]
    assert {r["limit"] for r in st["limits"]} >= {"max_message_bytes", "max_tensor_bytes"}
    assert all(r["meaning"] for r in st["limits"]), "a limit without its `#:` comment in onnxkit/limits.py"
    assert st["validation_policy"]["errors"] > 0


def test_one_backend_and_json(capsys):
    assert main(["conformance", "statement", "--backend", "cpu", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data["operators"]) == ["cpu"]
    assert main(["conformance", "statement", "--backend", "no-such-backend"]) == 2


def test_an_uninstalled_domain_is_not_claimed():
    reg = build_registry(exclude=["onnxkit-ml"])
    domains = {d["domain"] for d in build_statement(reg, ["cpu"])["operators"]["cpu"]}
    assert "ai.onnx.ml" not in domains
