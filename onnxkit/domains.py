"""The default domain's two spellings (Clause 5.3.2): '' and 'ai.onnx' name the same domain.

:func:`is_default_domain` is the one test for it, :func:`normalize_domain` the one key form
('' for it), :func:`display_domain` the one name messages give it ('ai.onnx').  This module
imports nothing, so every other one (the error types, the schema model, the registry) can use
it; :mod:`onnxkit.registry` and :mod:`onnxkit.plugin` re-export the functions.  No other code
of onnxkit/ or of a plugin spells ``"ai.onnx"`` or compares a domain with its spellings
(tests/structure/test_one_way.py scans for it, with an exact allow-list).

:func:`opset_map` is the one ``{domain: version}`` of a model's or a function's operator set
imports in that key form (the same test scans for inline copies).
"""

from __future__ import annotations

from typing import Iterable, Mapping, Optional

#: The default domain's written name.
DEFAULT_DOMAIN = "ai.onnx"


def is_default_domain(domain: Optional[str]) -> bool:
    """True for the default domain, whether written '', 'ai.onnx' or left unset (None)."""
    return domain in (None, "", DEFAULT_DOMAIN)


def normalize_domain(domain: Optional[str]) -> str:
    """'' for the default domain, whether written '' or 'ai.onnx'; any other domain as it is."""
    return "" if is_default_domain(domain) else domain


def display_domain(domain: Optional[str]) -> str:
    """The domain as messages name it: 'ai.onnx' for the default domain however written."""
    return DEFAULT_DOMAIN if is_default_domain(domain) else domain


def opset_map(opset_import: Iterable, outer: Optional[Mapping[str, int]] = None) -> dict:
    """``{domain: version}`` of operator set imports (``model.opset_import``, a function's): the
    domain in :func:`normalize_domain`'s form, the version an ``int``; a domain imported twice
    keeps its last version (the checker reports the repetition).  ``outer``: the imports in
    force around them (a function's body sees its caller's, its own replacing them)."""
    out = dict(outer) if outer else {}
    for o in opset_import:
        out[normalize_domain(o.domain)] = int(o.version)
    return out
