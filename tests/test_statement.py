"""``onnxkit conformance statement`` (Annex A): generated from the code, embedded in the README."""

from __future__ import annotations

import json
from pathlib import Path

from onnxkit.cli import main
from onnxkit.registry import build_registry
from onnxkit.statement import build_statement, embedded_in, render_markdown

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_embeds_exactly_what_the_command_prints(capsys):
    embedded = embedded_in(README.read_text())
    assert embedded is not None, "the README has lost its conformance-statement markers"
    printed = render_markdown(build_statement(build_registry()))
    assert embedded == printed, "the README's conformance statement is stale: run `python tools/update_statement.py`"
    assert main(["conformance", "statement"]) == 0
    assert capsys.readouterr().out == printed


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
