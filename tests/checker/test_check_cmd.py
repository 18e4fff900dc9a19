"""``onnxkit check``: exit status 0 / 1 / 2, the text form and the JSON form."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import catalogue  # noqa: E402

from onnxkit.api import to_bytes  # noqa: E402
from onnxkit.checker import check_model  # noqa: E402
from onnxkit.cli import main  # noqa: E402


def write(tmp_path, m, name="model.onnx"):
    p = tmp_path / name
    p.write_bytes(m if isinstance(m, bytes) else to_bytes(m))
    return str(p)


def test_valid_model_exits_0(tmp_path, capsys):
    path = write(tmp_path, catalogue.relu())
    assert main(["check", path]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{path}: 0 errors, 0 warnings"]


def test_warnings_only_exit_0(tmp_path, capsys):
    path = write(tmp_path, catalogue.custom_domain_op())
    assert main(["check", path]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and "warning:" in out[0] and "[unknown-domain, Clause 5.3.2, 16.1]" in out[0]
    assert out[1] == f"{path}: 0 errors, 1 warning"


def test_invalid_model_exits_1_one_line_per_diagnostic(tmp_path, capsys):
    m = catalogue.model(catalogue.graph([catalogue.node("Relu", ["P"], ["T"]), catalogue.node("Relux", ["T"], ["Y"])],
                                        [catalogue.vi("X")], [catalogue.vi("Y")]))
    path = write(tmp_path, m)
    assert main(["check", path]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"{path}: graph 'main' / node 0 (Relu) / input 0 'P': error: input 0 'P' is not defined in this "
                      "graph or an enclosing one [undefined-value, Clause 5.4.2, 7.5, 10.2]")
    assert out[1].startswith(f"{path}: graph 'main' / node 1 (Relux): error: ")
    assert out[1].endswith("[unknown-operator, Clause 10.2, 10.4]")
    assert out[2] == f"{path}: 2 errors, 0 warnings"


def test_json_form(tmp_path, capsys):
    m = catalogue.model(catalogue.graph([catalogue.node("LeakyRelu", ["X"], ["Y"], alpha=2)], [catalogue.vi("X")],
                                        [catalogue.vi("Y")]), opsets=(("", 17), ("com.acme", 1)))
    m.graph.node.append(catalogue.node("Foo", ["X"], ["Z"], domain="com.acme"))
    path = write(tmp_path, m)
    assert main(["check", path, "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"errors", "warnings", "diagnostics"}
    assert doc["errors"] == 1 and doc["warnings"] == 1
    assert doc == check_model(path).to_json()
    for d in doc["diagnostics"]:
        assert set(d) == {"severity", "code", "clause", "message", "location"}
    (err,) = [d for d in doc["diagnostics"] if d["severity"] == "error"]
    assert err["code"] == "attribute-wrong-type" and err["clause"] == "7.3.1"
    assert err["location"] == "graph 'main' / node 0 (LeakyRelu) / attribute 'alpha'"


def test_json_valid(tmp_path, capsys):
    path = write(tmp_path, catalogue.relu())
    assert main(["check", "--format", "json", path]) == 0
    assert json.loads(capsys.readouterr().out) == {"errors": 0, "warnings": 0, "diagnostics": []}


def test_decode_fault_is_an_error_not_a_crash(tmp_path, capsys):
    path = write(tmp_path, to_bytes(catalogue.relu()) + b"\x0b")
    assert main(["check", path, "--format", "json"]) == 2  # undecodable: exit 2 (docs/cli.md)
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert [d["code"] for d in doc["diagnostics"]] == ["decode-error"]
    assert "truncated" in captured.err or "not an ONNX model" in captured.err
    assert "byte" in doc["diagnostics"][0]["location"]


def test_missing_file_exits_2(tmp_path, capsys):
    assert main(["check", str(tmp_path / "nope.onnx")]) == 2
    captured = capsys.readouterr()
    assert "does not exist" in captured.err and captured.out == ""


def test_directory_exits_2(tmp_path, capsys):
    assert main(["check", str(tmp_path)]) == 2
    assert "directory" in capsys.readouterr().err


def test_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["check"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["check", "x.onnx", "--format", "xml"])
    assert exc.value.code == 2


def test_open_external(tmp_path, capsys):
    path = write(tmp_path, catalogue.add_w(catalogue.external_tensor([("location", "w.bin")])))
    assert main(["check", path]) == 0  # not opened: the reference itself is well formed
    capsys.readouterr()
    assert main(["check", path, "--open-external", "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [d["code"] for d in doc["diagnostics"]] == ["external-unresolved"]
    (tmp_path / "w.bin").write_bytes(b"\0" * 8)
    assert main(["check", path, "--open-external"]) == 0


def test_console_script(tmp_path):
    """The installed entry point, as a user runs it."""
    path = write(tmp_path, catalogue.relu_two_inputs())
    proc = subprocess.run([sys.executable, "-m", "onnxkit", "check", path, "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["diagnostics"][0]["code"] == "input-arity"


def test_the_documented_code_table_is_the_catalogue():
    from pathlib import Path

    from onnxkit.checker.codes import RECLASSIFIED, document, markdown

    doc = (Path(__file__).resolve().parents[2] / "docs" / "diagnostics.md").read_text()
    assert doc == document()
    assert markdown() in doc and len(RECLASSIFIED) == 20


def test_the_statement_page_states_one_line_per_reclassified_code():
    from pathlib import Path

    from onnxkit.checker.codes import RECLASSIFIED

    page = (Path(__file__).resolve().parents[2] / "docs" / "conformance.md").read_text()
    assert "Validation policy (Clause 10.5)" in page
    lines = page.splitlines()
    assert len(RECLASSIFIED) == 20
    for code in RECLASSIFIED:
        assert sum(ln.startswith(f"- `{code}`: ") for ln in lines) == 1, code


def test_every_error_is_in_one_group_of_the_audit():
    """The validation policy's audit: each code that stays an error says why (codes.KEPT_ERRORS)."""
    from onnxkit.checker.codes import CODES, KEPT_ERRORS, RECLASSIFIED

    kept = [c for _, codes in KEPT_ERRORS for c in codes]
    assert len(kept) == len(set(kept))
    assert set(kept) == {c for c, row in CODES.items() if row.severity == "error"}
    assert not set(kept) & set(RECLASSIFIED)
