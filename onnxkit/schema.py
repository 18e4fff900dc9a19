"""Operator definitions and operator sets: the host's form of an ONNX 1-2 definition.

Part 1 defines no operator (Clause 4.6); it fixes the *form* an operator definition takes
and how a model binds to one.  That form is here:

* :class:`OpSchema` - one definition, identified by ``(domain, name, since_version)``
  (Clause 14.3): its formal inputs and outputs (7.3), attributes (7.4), type constraints,
  deprecation (14.5) and, where ONNX 1-2 defines the operator as a function (8.4), its
  function body.
* :class:`OperatorSet` - the complete inventory of one ``(domain, version)`` (5.3.2):
  for every operator, the definition with the greatest ``since_version <= version``.
  Deprecated definitions stay in the inventory (14.5).

The plugins that carry ONNX 1-2 (``onnxkit-default-domain``, ``onnxkit-ml``) ship their
definitions as generated data (gzip'd JSON, see :func:`load_schema_data`); the generators
read ``onnx.defs`` at build time, onnxkit never imports ``onnx`` at run time.

Conventions: ``domain`` is '' for ai.onnx everywhere.  Type strings are those of ONNX 1-2:
``'tensor(float)'``, ``'seq(tensor(int64))'``, ``'optional(tensor(float))'``,
``'map(int64, tensor(float))'``, ``'sparse_tensor(float)'``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Optional

from onnxkit import records
from onnxkit import record_methods

from .domains import display_domain, normalize_domain
from .schema_codec import _b64decode, _gunzip, _json_loads
from .ir.attribute import Attribute, AttributeType

#: The format tag the plugins' generators write (:func:`encode_schema_document`).
DATA_FORMAT = "onnxkit-schemas/2"
#: Every format tag :func:`load_schema_data` reads: /1 is one JSON document; /2 a header line
#: listing the keys, then one definition per line (decoded when looked up).
DATA_FORMATS = ("onnxkit-schemas/1", DATA_FORMAT)

#: ``max_input`` / ``max_output`` of a definition whose last parameter is variadic.
UNBOUNDED = 2**31 - 1

OPTIONS = ("single", "optional", "variadic")


@records.frozen
class FormalParameter:
    """One formal input or output of an operator (Clause 7.3).

    ``type_str`` is a type parameter of the definition (``'T'``, bound by a
    :class:`TypeConstraint`) or a fixed type string (``'tensor(int64)'``).
    ``option``: ``'single'`` (exactly one), ``'optional'`` (may be left unsupplied,
    7.3.3) or ``'variadic'`` (the last parameter only; ``min_arity`` or more values, 7.3.2).
    ``is_homogeneous`` (variadic only): every value in that position has the same type.
    """

    name: str
    type_str: str
    option: str = "single"
    is_homogeneous: bool = True
    min_arity: int = 1
    __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH

    @property
    def is_optional(self) -> bool:
        return self.option == "optional"

    @property
    def is_variadic(self) -> bool:
        return self.option == "variadic"


@records.frozen
class AttributeDef:
    """One attribute of an operator (Clause 7.4).

    ``type`` is an :class:`~onnxkit.ir.AttributeType`.  ``default_value`` is ``None`` when
    the definition gives no default (always so for a ``required`` attribute); otherwise the
    value in the convention of :class:`onnxkit.ir.Attribute`: ``float`` / ``int`` /
    ``bytes`` for FLOAT / INT / STRING, lists of those for the plural types, IR objects
    (Tensor, Graph, ...) for the message kinds.
    """

    name: str
    type: AttributeType
    required: bool = False
    default_value: Any = records.field(default=None, hash=False)
    __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH

    @property
    def has_default(self) -> bool:
        return self.default_value is not None

    def default_attribute(self) -> Optional[Attribute]:
        """The default as an IR :class:`~onnxkit.ir.Attribute` (what a node without it means), or None."""
        if self.default_value is None:
            return None
        value = list(self.default_value) if isinstance(self.default_value, tuple) else self.default_value
        return Attribute(name=self.name, type=int(self.type), value=value)


@records.frozen
class TypeConstraint:
    """The types a type parameter may be bound to: ``allowed_types`` are type strings."""

    type_param: str
    allowed_types: tuple = ()
    __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH


@records.frozen
class OpSchema:
    """One operator definition of ONNX 1-2, identified by ``(domain, name, since_version)`` (14.3).

    ``inputs`` / ``outputs``: :class:`FormalParameter` tuples in positional order.
    ``min_input`` .. ``max_input`` (and the same for outputs) bound the number of values a
    node may supply in those positions, :data:`UNBOUNDED` where the last one is variadic.
    Left out, they are derived from ``inputs`` / ``outputs`` (every position up to the last
    ``single`` one is required, a variadic last one needs its ``min_arity``); given, they must
    satisfy ``0 <= min <= max`` (else ``ValueError``).
    ``attributes``: ``{name: AttributeDef}``.  ``type_constraints``: :class:`TypeConstraint`
    tuple.  ``deprecated``: marked deprecated at ``since_version``; still evaluated (14.5).
    ``support_level``: 'common' or 'experimental'.

    Function bodies (Clause 8.4): ``function_bodies`` holds ``(opset_version, octets)``
    pairs, each an encoded FunctionProto (doc strings removed) usable from that version of
    the definition's domain on; :meth:`function_body_for` picks the right one and decodes it.
    ``has_context_dependent_function``: the body depends on the node (attribute values,
    input types) and is built per call site; onnxkit records the fact only, the bodies are
    not carried (ONNX 1-2 builds them in code).
    """

    domain: str
    name: str
    since_version: int
    deprecated: bool = False
    inputs: tuple = ()
    outputs: tuple = ()
    attributes: Mapping = records.field(factory=dict, hash=False)
    type_constraints: tuple = ()
    min_input: Optional[int] = None
    max_input: Optional[int] = None
    min_output: Optional[int] = None
    max_output: Optional[int] = None
    support_level: str = "common"
    function_bodies: tuple = records.field(default=(), hash=False, repr=False)
    has_context_dependent_function: bool = False
    context_dependent_function_versions: tuple = ()
    _decoded: dict = records.field(factory=dict, init=False, eq=False, hash=False, repr=False, alias="_decoded")
    __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH

    def __attrs_post_init__(self) -> None:
        for kind, params in (("input", self.inputs), ("output", self.outputs)):
            low, high = _arity(params)
            lo = low if getattr(self, f"min_{kind}") is None else getattr(self, f"min_{kind}")
            hi = high if getattr(self, f"max_{kind}") is None else getattr(self, f"max_{kind}")
            if not 0 <= lo <= hi:
                raise ValueError(f"{display_domain(self.domain)}::{self.name}-{self.since_version}: min_{kind} {lo} "
                                 f"and max_{kind} {hi} are not 0 <= min <= max")
            object.__setattr__(self, f"min_{kind}", lo)
            object.__setattr__(self, f"max_{kind}", hi)

    # -- identity -----------------------------------------------------------------------
    @property
    def op_type(self) -> str:
        return self.name

    @property
    def key(self) -> tuple:
        """``(domain, name, since_version)``, the key of the registry's tables."""
        return (self.domain, self.name, self.since_version)

    def __str__(self) -> str:
        return f"{display_domain(self.domain)}::{self.name}-{self.since_version}"

    # -- signature ----------------------------------------------------------------------
    def attribute(self, name: str) -> Optional[AttributeDef]:
        return self.attributes.get(name)

    def type_constraint(self, type_param: str) -> Optional[TypeConstraint]:
        for tc in self.type_constraints:
            if tc.type_param == type_param:
                return tc
        return None

    def allowed_types(self, param: FormalParameter) -> tuple:
        """The type strings ``param`` admits: its constraint's, or its own fixed type string."""
        tc = self.type_constraint(param.type_str)
        return tc.allowed_types if tc is not None else (param.type_str,)

    def input_at(self, index: int) -> Optional[FormalParameter]:
        """The formal input a node's input at ``index`` binds to (a variadic last one absorbs the rest)."""
        return _param_at(self.inputs, index)

    def output_at(self, index: int) -> Optional[FormalParameter]:
        return _param_at(self.outputs, index)

    # -- function bodies ----------------------------------------------------------------
    @property
    def has_function(self) -> bool:
        """True where ONNX 1-2 gives a (context-independent) function body."""
        return bool(self.function_bodies)

    @property
    def function_opset_versions(self) -> tuple:
        """The domain versions from which each stored body applies, ascending."""
        return tuple(v for v, _ in self.function_bodies)

    def function_body_bytes(self, opset_version: Optional[int] = None) -> Optional[bytes]:
        """The encoded body for a model importing ``opset_version`` of the domain.

        The body with the greatest version <= ``opset_version`` (all bodies when None: the
        latest).  None when no body applies: a body written with operators of a later
        version is not usable at an earlier one.
        """
        best = None
        for v, data in self.function_bodies:
            if opset_version is None or v <= opset_version:
                best = data
        return best

    def function_body_for(self, opset_version: Optional[int] = None):
        """:meth:`function_body_bytes` decoded to an IR :class:`~onnxkit.ir.Function` (cached), or None."""
        best_v = None
        for v, _ in self.function_bodies:
            if opset_version is None or v <= opset_version:
                best_v = v
        if best_v is None:
            return None
        fn = self._decoded.get(best_v)
        if fn is None:
            from .wire import decode_message  # the codec is imported on first use

            fn = decode_message(dict(self.function_bodies)[best_v], "FunctionProto")
            self._decoded[best_v] = fn
        return fn

    @property
    def function_body(self):
        """The latest function body as an IR :class:`~onnxkit.ir.Function`, or None (as ``onnx``'s ``function_body``)."""
        return self.function_body_for(None)


def _arity(params: tuple) -> tuple:
    """``(min, max)`` values a node may supply for ``params``: every position up to the last
    ``single`` one (a variadic last one counts its ``min_arity``), and all of them
    (:data:`UNBOUNDED` after a variadic one)."""
    low = 0
    for i, p in enumerate(params):
        if p.option == "single":
            low = i + 1
        elif p.option == "variadic":
            low = i + p.min_arity if p.min_arity else low
    high = UNBOUNDED if params and params[-1].option == "variadic" else len(params)
    return low, high


def _param_at(params: tuple, index: int) -> Optional[FormalParameter]:
    if index < 0:
        return None
    if index < len(params):
        return params[index]
    if params and params[-1].option == "variadic":
        return params[-1]
    return None


class OperatorSet:
    """The inventory of one operator set ``(domain, version)`` (Clause 5.3.2, 14.3).

    ``schemas`` maps each op_type to the definition in force at ``version``: the one with
    the greatest ``since_version <= version``.  Iteration yields the :class:`OpSchema`
    objects sorted by op_type.  ``schemas`` may also be a zero-argument callable returning
    that mapping; it is then built on first use.
    """

    __slots__ = ("domain", "version", "_schemas", "_factory")

    def __init__(self, domain: str, version: int, schemas=None):
        self.domain = normalize_domain(domain)
        self.version = int(version)
        if callable(schemas) and not isinstance(schemas, Mapping):
            self._schemas, self._factory = None, schemas
        elif isinstance(schemas, _Inventory):  # schema data's: each definition built when asked for
            self._schemas, self._factory = schemas, None
        else:
            self._schemas, self._factory = dict(schemas or {}), None

    @property
    def schemas(self) -> Mapping:
        if self._schemas is None:
            self._schemas = dict(self._factory())
            self._factory = None
        return self._schemas

    def get(self, op_type: str) -> Optional[OpSchema]:
        """The definition ``op_type`` binds to in this operator set, or None."""
        return self.schemas.get(op_type)

    def __getitem__(self, op_type: str) -> OpSchema:
        return self.schemas[op_type]

    def __contains__(self, op_type) -> bool:
        return op_type in self.schemas

    def __iter__(self) -> Iterator[OpSchema]:
        s = self.schemas
        return iter([s[k] for k in sorted(s)])

    def __len__(self) -> int:
        return len(self.schemas)

    def op_types(self) -> list:
        return sorted(self.schemas)

    def introduced(self) -> list:
        """Definitions new at this version (``since_version == version``), sorted by op_type."""
        return [s for s in self if s.since_version == self.version]

    def __repr__(self) -> str:
        n = "?" if self._schemas is None else len(self._schemas)
        return f"OperatorSet({display_domain(self.domain)} v{self.version}, {n} operators)"


class _Inventory(Mapping):
    """``{op_type: OpSchema}`` of one operator set of :class:`SchemaData`: ``index`` maps each
    op_type to its definition's key, and a definition is built on first access (a session
    reads the few dozen its model uses, not the 634 of ai.onnx)."""

    __slots__ = ("_index", "_make")

    def __init__(self, index: dict, make):
        self._index, self._make = index, make

    def __getitem__(self, op_type: str) -> OpSchema:
        return self._make(self._index[op_type])

    def __contains__(self, op_type) -> bool:
        return op_type in self._index

    def __iter__(self):
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


def _inventories(keys: Iterable[tuple], versions: Mapping[str, tuple]) -> list:
    """``(domain, version, {name: key})`` of every operator set: ``versions`` maps domain ->
    ``(first, last)``; the inventory of version v holds, per operator, the key of its definition
    with the greatest ``since_version <= v`` (a version that introduces nothing has the inventory
    of the one before it).  Deprecated definitions stay (Clause 14.5)."""
    by_domain: dict = {}
    for key in keys:
        by_domain.setdefault(key[0], {}).setdefault(key[2], []).append(key)
    out = []
    for domain, (first, last) in sorted(versions.items()):
        introduced = by_domain.get(domain, {})
        unknown = [v for v in introduced if v > last]
        if unknown:
            raise ValueError(f"domain {display_domain(domain)!r}: definitions at versions {sorted(unknown)} beyond its last version {last}")
        current: dict = {}
        for v in sorted(introduced):
            if v < first:
                current.update((k[1], k) for k in introduced[v])
        for v in range(first, last + 1):
            current.update((k[1], k) for k in introduced.get(v, ()))
            out.append((domain, v, dict(current)))
    return out


def build_operator_sets(definitions: Iterable[OpSchema], versions: Mapping[str, tuple]) -> list:
    """Every operator set of every domain (:func:`_inventories`) from ``definitions``."""
    by_key = {d.key: d for d in definitions}
    return [OperatorSet(domain, v, {name: by_key[k] for name, k in index.items()})
            for domain, v, index in _inventories(by_key, versions)]


# -- the generated data ----------------------------------------------------------------
class SchemaData:
    """What :func:`load_schema_data` read: the definitions and each domain's version range.

    ``keys``: every definition's ``(domain, name, since_version)``, in the data's order.
    A definition's :class:`OpSchema` is built from its row when first asked for
    (:meth:`definition`, an operator set's lookup); ``definitions`` builds them all."""

    def __init__(self, rows: list, versions: Mapping, source: str = "", keys: Optional[list] = None):
        """``rows``: the definitions' records (dicts), or, with ``keys``, their JSON texts in
        the keys' order (each decoded when its definition is first asked for)."""
        if keys is None:
            self._rows = {(e["domain"], e["name"], int(e["since_version"])): e for e in rows}
        else:
            if len(keys) != len(rows):
                raise ValueError(f"schema data lists {len(keys)} keys but holds {len(rows)} definitions")
            self._rows = {(d, n, int(v)): text for (d, n, v), text in zip(keys, rows)}
        self._made: dict = {}
        self.keys = tuple(self._rows)
        self.versions = versions
        self.source = source

    def definition(self, key: tuple) -> OpSchema:
        """The definition of ``(domain, name, since_version)`` (KeyError where the data has none)."""
        made = self._made.get(key)
        if made is None:
            row = self._rows[key]
            made = self._made[key] = _definition(_json_loads(row) if isinstance(row, (bytes, str)) else row)
        return made

    @property
    def definitions(self) -> tuple:
        """Every definition, in the data's order."""
        return tuple(self.definition(k) for k in self.keys)

    def operator_sets(self) -> list:
        return [OperatorSet(domain, v, _Inventory(index, self.definition))
                for domain, v, index in _inventories(self.keys, self.versions)]


@functools.lru_cache(maxsize=None)
def packaged_schema_data(package: str, filename: str = "schemas_data.json.gz") -> SchemaData:
    """The schema data file ``filename`` of ``package``, read once per process.

    A package imported from a folder by the standard finder has the file beside its
    ``__init__``: read there, without importing importlib.resources (which imports tempfile,
    zipfile, pathlib... in a fresh process); any other loader (a zip, a custom finder) reads it
    through importlib.resources."""
    import importlib
    import os
    from importlib.machinery import SourceFileLoader, SourcelessFileLoader

    module = importlib.import_module(package)
    spec = getattr(module, "__spec__", None)
    if spec is not None and isinstance(spec.loader, (SourceFileLoader, SourcelessFileLoader)) and spec.origin:
        try:
            with open(os.path.join(os.path.dirname(spec.origin), filename), "rb") as fh:
                return load_schema_data(fh.read())
        except FileNotFoundError:
            pass  # importlib.resources says so in its own words below
    from importlib import resources

    return load_schema_data(resources.files(package).joinpath(filename).read_bytes())


def load_schema_data(data: bytes) -> SchemaData:
    """Decode the gzip'd schema data written by the plugins' ``tools/generate_schemas.py``.

    The document (``format`` one of :data:`DATA_FORMATS`)::

        {"format": ..., "source": "onnx 1.23.2", "domains": {"": [1, 28], ...},
         "definitions": [{"domain", "name", "since_version", "deprecated", "support_level",
                          "inputs"/"outputs": [[name, type_str, option, is_homogeneous, min_arity]],
                          "min_input", "max_input", "min_output", "max_output",
                          "attributes": [[name, type, required(, default)]],
                          "type_constraints": [[param, [type, ...]]],
                          "function_bodies": {version: base64 FunctionProto},
                          "has_context_dependent_function", "context_dependent_function_versions"}]}

    Attribute defaults are plain JSON: numbers, latin-1 strings for STRING octets, lists,
    and ``{"message": "TensorProto", "b64": ...}`` for message-valued ones.  Format /1 is this
    document as one JSON text; /2 (:func:`encode_schema_document`) is a header line (the document
    without ``definitions``, plus ``keys``: each definition's ``[domain, name, since_version]``)
    and then each definition's JSON on a line of its own, so a process decodes only the
    definitions it looks up.
    """
    doc, lines = _document(data)
    if doc.get("format") not in DATA_FORMATS:
        raise ValueError(f"schema data has format {doc.get('format')!r}, expected one of {DATA_FORMATS}")
    versions = {d: (int(r[0]), int(r[1])) for d, r in doc["domains"].items()}
    if lines is not None:
        return SchemaData(lines, versions, doc.get("source", ""), keys=doc["keys"])
    return SchemaData(doc["definitions"], versions, doc.get("source", ""))


def _document(data: bytes) -> tuple:
    """``(document, definition lines)``: format /2's header and its undecoded lines, or a format
    /1 document whole and None."""
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data)
    first, _, rest = data.partition(b"\n")
    try:
        doc = _json_loads(first)
    except ValueError:  # /1 written over several lines
        return _json_loads(data), None
    if not isinstance(doc, dict) or "keys" not in doc:
        return (doc if not rest.strip() else _json_loads(data)), None
    lines = rest.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    return doc, lines


def encode_schema_document(doc: dict) -> bytes:
    """The format /2 text of a schema document (uncompressed; the generators gzip it): the
    header line, then one compact ASCII JSON line per definition, in the document's order."""
    import json

    header = {k: v for k, v in doc.items() if k != "definitions"}
    header["format"] = DATA_FORMAT
    header["keys"] = [[e["domain"], e["name"], int(e["since_version"])] for e in doc["definitions"]]
    lines = [json.dumps(header, separators=(",", ":"), ensure_ascii=True)]
    lines += [json.dumps(e, separators=(",", ":"), ensure_ascii=True) for e in doc["definitions"]]
    return ("\n".join(lines) + "\n").encode("ascii")


def decode_schema_document(data: bytes) -> dict:
    """The whole document of schema data in either format, definitions decoded (what a
    generator's staleness test compares with what it would write)."""
    doc, lines = _document(data)
    if lines is not None:
        doc = {k: v for k, v in doc.items() if k != "keys"}
        doc["definitions"] = [_json_loads(line) for line in lines]
    return doc


#: equal tuples of type strings and equal formal parameters, shared between the definitions built
_SHARED: dict = {}


def _shared(value):
    return _SHARED.setdefault(value, value)


def _definition(e: dict) -> OpSchema:
    """The :class:`OpSchema` of one row of schema data (:func:`load_schema_data`'s layout)."""
    attributes = {}
    for row in e.get("attributes", ()):
        atype = AttributeType(row[1])
        default = _default_from_json(atype, row[3]) if len(row) > 3 else None
        attributes[row[0]] = AttributeDef(row[0], atype, bool(row[2]), default)

    def params(rows):
        return tuple(_shared(FormalParameter(r[0], r[1], r[2], bool(r[3]), int(r[4]))) for r in rows)

    return OpSchema(
        domain=e["domain"], name=e["name"], since_version=int(e["since_version"]),
        deprecated=bool(e.get("deprecated", False)),
        inputs=params(e.get("inputs", ())), outputs=params(e.get("outputs", ())),
        attributes=attributes,
        type_constraints=tuple(TypeConstraint(p, _shared(tuple(ts))) for p, ts in e.get("type_constraints", ())),
        min_input=e.get("min_input", 0), max_input=e.get("max_input", 0),
        min_output=e.get("min_output", 0), max_output=e.get("max_output", 0),
        support_level=e.get("support_level", "common"),
        function_bodies=tuple(sorted((int(v), _b64decode(b)) for v, b in e.get("function_bodies", {}).items())),
        has_context_dependent_function=bool(e.get("has_context_dependent_function", False)),
        context_dependent_function_versions=tuple(e.get("context_dependent_function_versions", ())),
    )


_SCALAR_DEFAULT = {AttributeType.FLOAT: float, AttributeType.INT: int,
                   AttributeType.STRING: lambda s: s.encode("latin-1")}
_LIST_DEFAULT = {AttributeType.FLOATS: float, AttributeType.INTS: int,
                 AttributeType.STRINGS: lambda s: s.encode("latin-1")}


def _default_from_json(atype: AttributeType, value):
    if atype in _SCALAR_DEFAULT:
        return _SCALAR_DEFAULT[atype](value)
    if atype in _LIST_DEFAULT:
        conv = _LIST_DEFAULT[atype]
        return tuple(conv(v) for v in value)
    if isinstance(value, list):
        return tuple(_message(v) for v in value)
    return _message(value)


def _message(value):
    if isinstance(value, dict) and "b64" in value:
        from .wire import decode_message  # message-valued defaults are rare; decode on load

        return decode_message(_b64decode(value["b64"]), value["message"])
    raise ValueError(f"cannot read attribute default {value!r}")
