"""Lazy locations (onnxkit.locations): built in O(1) per level, rendered once, string-like."""

from __future__ import annotations

import json

from onnxkit.diagnostics import warning
from onnxkit.locations import Location, extend


def test_a_location_renders_its_path_outermost_first():
    loc = extend(extend("graph 'main' / node 0 (F)", "body of local::F"), "node 0 (Relu)")
    assert str(loc) == "graph 'main' / node 0 (F) / body of local::F / node 0 (Relu)"
    assert loc == str(loc) and hash(loc) == hash(str(loc))
    assert "body of" in loc and loc.startswith("graph 'main'") and f"{loc}" == str(loc)
    assert loc.depth() == 3


def test_a_deep_chain_costs_linear_text():
    loc = "graph 'g'"
    for i in range(5000):
        loc = Location(loc, f"node 0 'x{i}' (F{i})")
    text = str(loc)
    assert len(text) < 5000 * 30 and text.count(" / ") == 5000
    assert "\\\\" not in text  # no level holds the repr of the one above


def test_a_diagnostic_with_a_lazy_location_serialises():
    d = warning("unknown-operator", "9.2", "unknown", extend("graph 'g'", "node 1 (X)"))
    assert json.loads(json.dumps(d.to_json()))["location"] == "graph 'g' / node 1 (X)"
    assert str(d).startswith("graph 'g' / node 1 (X): warning")
