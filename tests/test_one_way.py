"""One way each (issue 42 item 6): a concept implemented once, and scans that keep it once.

1. *Is this the default domain*: :func:`onnxkit.domains.is_default_domain` (with
   :func:`~onnxkit.domains.normalize_domain` and :func:`~onnxkit.domains.display_domain`, in
   the same module) is the only code spelling ``"ai.onnx"`` or comparing a domain with ``""``.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _sources():
    """The host's modules and every plugin's package modules (not their tests or tools)."""
    files = sorted(ROOT.glob("onnxkit/**/*.py")) + sorted(ROOT.glob("plugins/*/onnxkit_*/**/*.py"))
    return [(f.relative_to(ROOT).as_posix(), ast.parse(f.read_text(encoding="utf-8"))) for f in files]


def _enclosing(tree) -> dict:
    """``{id(node): name of the innermost function or class holding it}`` ('<module>' outside any)."""
    out = {}

    def visit(node, name):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else name
            out[id(child)] = inner
            visit(child, inner)

    visit(tree, "<module>")
    return out


# -- 1. the default domain ---------------------------------------------------------------------

def _domainish(node) -> bool:
    """A value that is a domain: a name or attribute called ``*domain*`` (or ``d``), or a
    ``normalize_domain(...)`` call."""
    if isinstance(node, ast.Name):
        return "domain" in node.id or node.id == "d"
    if isinstance(node, ast.Attribute):
        return "domain" in node.attr
    if isinstance(node, ast.Call):
        f = node.func
        return (getattr(f, "id", None) or getattr(f, "attr", None)) == "normalize_domain"
    return False


def _is_str(node, value) -> bool:
    return isinstance(node, ast.Constant) and node.value == value


def default_domain_spellings(sources) -> Counter:
    """``{(file, enclosing function): count}`` of the places that spell the default domain's test
    themselves: the literal ``"ai.onnx"``, a domain compared with ``""`` (or a tuple holding it),
    a ``normalize_domain(...)`` call used as a truth value, a domain ``or`` a string literal."""
    found = Counter()
    for path, tree in sources:
        where = _enclosing(tree)
        for node in ast.walk(tree):
            hit = False
            if _is_str(node, "ai.onnx"):
                hit = True
            elif isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                if any(_domainish(o) for o in operands) and any(
                        _is_str(o, "") or (isinstance(o, ast.Tuple) and any(_is_str(e, "") for e in o.elts))
                        for o in operands):
                    hit = True
            elif isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Assert)) and isinstance(node.test, ast.Call) \
                    and _domainish(node.test):
                hit = True
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and isinstance(node.operand, ast.Call) \
                    and _domainish(node.operand):
                hit = True
            elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and _domainish(node.values[0]) \
                    and any(isinstance(v, ast.Constant) and isinstance(v.value, str) and v.value for v in node.values[1:]):
                hit = True
            if hit:
                found[(path, where.get(id(node), "<module>"))] += 1
    return found


#: The places allowed to spell it, each with its count and why.
DEFAULT_DOMAIN_ALLOWED = Counter({
    ("onnxkit/domains.py", "<module>"): 1,  # DEFAULT_DOMAIN = "ai.onnx": the one spelling
    ("onnxkit/domains.py", "is_default_domain"): 1,  # domain in (None, "", DEFAULT_DOMAIN): the one test
    # pending, files another change holds (issue 42 item 6's report): Model.opset_version
    # should compare normalize_domain(o.domain) == normalize_domain(domain) ...
    ("onnxkit/ir/graph.py", "opset_version"): 2,
    # ... and ConstantFolder.fold should test is_default_domain(node.domain)
    ("onnxkit/runtime/plan.py", "fold"): 2,  # node.domain not in ("", "ai.onnx"): the tuple and the literal
})


def test_default_domain_is_spelled_in_one_place():
    found = default_domain_spellings(_sources())
    extra = {k: v for k, v in found.items() if v > DEFAULT_DOMAIN_ALLOWED.get(k, 0)}
    assert not extra, f"spell the default domain's test with onnxkit.domains.is_default_domain: {extra}"
    assert found == DEFAULT_DOMAIN_ALLOWED, "an allowed place is gone: shrink DEFAULT_DOMAIN_ALLOWED"
    assert sum(DEFAULT_DOMAIN_ALLOWED.values()) == 6


def test_default_domain_scan_sees_each_inline_form():
    """The scan finds each form the inline copies took (else the test above proves nothing)."""
    forms = ['node.domain in ("", "ai.onnx")', 'domain or "ai.onnx"', 'normalize_domain(d) == ""',
             'if normalize_domain(domain):\n    pass', 'not normalize_domain(domain)', 'schema.domain != ""',
             'f"{d or \'ai.onnx\'}"']
    for form in forms:
        found = default_domain_spellings([("x.py", ast.parse(form))])
        assert sum(found.values()) >= 1, form
    assert not default_domain_spellings([("x.py", ast.parse("is_default_domain(node.domain)"))])


@pytest.mark.parametrize("domain, default", [(None, True), ("", True), ("ai.onnx", True), ("ai.onnx.ml", False),
                                             ("com.microsoft", False), ("ai.onnx.preview.training", False)])
def test_is_default_domain(domain, default):
    from onnxkit.domains import display_domain, is_default_domain, normalize_domain
    from onnxkit import plugin, registry

    assert is_default_domain(domain) is default
    assert normalize_domain(domain) == ("" if default else domain)
    assert display_domain(domain) == ("ai.onnx" if default else domain)
    # one function, re-exported (the host's old import and the plugins' surface)
    assert registry.is_default_domain is plugin.is_default_domain is is_default_domain
    assert registry.normalize_domain is plugin.normalize_domain is normalize_domain
