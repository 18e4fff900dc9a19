"""Record classes: onnxkit's IR, options, schemas and plan bookkeeping are attrs classes.

This module is the one place onnxkit imports attrs' class-making API from; every name is attrs'
own object, so ``records.define`` *is* ``attrs.define`` and a record class is an attrs class
(``attrs.has(cls)``), with attrs' documented behaviour::

    @records.define                      # slotted, mutable; eq compares field by field; unhashable
    class Node:
        op_type: str = ""                 # a default
        input: list = records.field(factory=list)
        _wire: object = records.field(default=None, eq=False, repr=False, alias="_wire")

    @records.frozen                       # slotted, immutable, hashable (hash of the eq fields)

What onnxkit relies on (``tests/ir/test_records.py``): slotted and weak-referenceable classes;
``__eq__`` on instances of the same class only; frozen records refuse assignment with
:class:`FrozenInstanceError` and hash; on a mutable record, assigning a field with a converter
or validator runs them (attrs' default ``on_setattr``); a private field's ``__init__`` argument is
its ``alias`` (attrs' default: the name less leading underscores); methods a class defines itself
(``__init__``, ``__eq__``, ``__repr__``) are kept (``auto_detect``); ``__attrs_post_init__`` runs
after ``__init__``; records pickle and copy.  A field compared by a two-argument function is
declared ``field(eq=records.cmp_using(eq=fn))`` (attrs' ``eq=callable`` is a *key* function).

What it costs a fresh process: ``import attrs`` and a definition time per class, since attrs
generates and compiles each class's methods as it defines it (``benchmarks/records.py`` measures
both).  So a session's path defines only the record classes it uses: the IR's seldom-carried
messages (:mod:`onnxkit.ir.seldom`) and test data's values (:mod:`onnxkit.ir.data`) are defined
on first look-up, and the optimizer imports a rule pass only for a graph with a node its rules
start at.
"""

from __future__ import annotations

# attrs' objects where its package ``attr`` defines them: the ``attrs`` namespace re-exports these
# very objects (``attrs.asdict`` is ``attr._next_gen.asdict``, not ``attr.asdict``, whose defaults
# differ), and importing the namespace too (its five submodules) is not needed for them
from attr import NOTHING, Attribute, Factory, cmp_using, define, evolve, field, fields, frozen, has
from attr.exceptions import FrozenInstanceError

try:
    from attr._next_gen import asdict
except ImportError:  # an attrs release that keeps it elsewhere: the namespace's own name
    from attrs import asdict

__all__ = ["NOTHING", "Attribute", "Factory", "FrozenInstanceError", "asdict", "cmp_using", "define", "evolve",
           "field", "fields", "frozen", "has"]
