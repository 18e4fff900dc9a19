"""Which definitions of each installed operator set a backend evaluates (Annex A, Clause 4.4).

A definition ``(domain, op_type, since_version)`` is *evaluated* on a backend at operator set
version ``v`` when the backend has a kernel for exactly it, or when Part 2 gives it a function
body applicable at ``v`` whose every node is itself evaluated (Clause 8.4), or — on a backend
that declares a ``fallback`` — when the fallback backend evaluates it (a per-node fallback,
:mod:`onnxkit.runtime.fallback`): the same rules the planner binds by, asked of the registry
instead of a model.
"""

from __future__ import annotations

from typing import Optional

from ..domains import opset_map
from ..registry import display_domain, normalize_domain


class Coverage:
    """Answers "is this definition evaluated on ``backend``?" for a registry, memoised."""

    def __init__(self, registry, backend: str):
        self.registry = registry
        self.backend = backend
        self._memo: dict = {}
        fallback = getattr(registry.backends.get(backend), "fallback", None)
        self._fallback = Coverage(registry, fallback) if fallback in registry.backends and fallback != backend else None

    def how(self, domain: str, op_type: str, version: int, _depth: int = 0) -> Optional[str]:
        """``'kernel'``, ``'function'`` (through its Part 2 body), ``'fallback'`` (on the fallback
        backend), or None (not supported)."""
        domain = normalize_domain(domain)
        key = (domain, op_type, version)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = None  # a body reaching itself is not evaluated
        schema = self.registry.bind(domain, op_type, version)
        result = None
        if schema is not None:
            if self.registry.kernel(self.backend, domain, op_type, schema.since_version) is not None:
                result = "kernel"
            elif schema.has_function and _depth < 16:
                body = schema.function_body_for(version)
                if body is not None and self._body_ok(body, domain, version, _depth):
                    result = "function"
            if result is None and self._fallback is not None and self._fallback.how(domain, op_type, version):
                result = "fallback"
        self._memo[key] = result
        return result

    def _body_ok(self, body, domain: str, version: int, depth: int) -> bool:
        opsets = opset_map(body.opset_import)
        opsets.setdefault(domain, version)
        for node in body.node:
            d = normalize_domain(node.domain)
            if d not in opsets or self.how(d, node.op_type, opsets[d], depth + 1) in (None, "fallback"):
                return False
        return True


def operator_coverage(registry, backend: str) -> list:
    """Per domain: definitions in all, evaluated by kernel / function body / the fallback, and the rest.

    Returns ``[{"domain", "versions", "definitions", "kernel", "function", "fallback", "unsupported":
    [{"operator", "since_version", "opset_versions": [first, last]}]}]``, where a definition
    counts as unsupported for the operator set versions in which it is in force and not
    evaluated.
    """
    cov = Coverage(registry, backend)
    out = []
    for domain, versions in registry.domains().items():
        in_force: dict = {}            # (op, since) -> [versions where it is in force]
        for v in versions:
            for schema in registry.operator_set(domain, v):
                in_force.setdefault((schema.name, schema.since_version), []).append(v)
        counts = {"kernel": 0, "function": 0, "fallback": 0}
        unsupported = []
        for (op, since), vs in sorted(in_force.items()):
            hows = [cov.how(domain, op, v) for v in vs]
            missing = [v for v, h in zip(vs, hows) if h is None]
            if missing:
                unsupported.append({"operator": op, "since_version": since, "opset_versions": [missing[0], missing[-1]]})
            else:
                counts[next(h for h in ("kernel", "function", "fallback") if h in hows)] += 1
        out.append({"domain": display_domain(domain), "versions": [versions[0], versions[-1]],
                    "definitions": len(in_force), **counts, "unsupported": unsupported})
    return out
