"""Annex B, as printed in the spec, against ``onnxkit.wire.schema.MESSAGES``.

The tables are parsed from the text of ``onnx-part1-core.txt`` (``$ONNXKIT_SPEC``, a file or
a folder holding it, else ``<repo>/../shared/spec/``), and every message and field of the
codec's table is compared with them: name, tag, wire type, type, obligation and packed form.
``onnx``'s protobuf descriptors are a second, independent oracle for tags and types.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from onnxkit.wire import schema as S

REPO = Path(__file__).resolve().parents[2]
SPEC_NAME = "onnx-part1-core.txt"

SCALARS = {"int32", "int64", "uint64", "float", "double", "string", "bytes"}
OBLIGATION = {"mandatory": S.MANDATORY, "optional": S.OPTIONAL, "repeated": S.REPEATED,
              "repeated, packed": S.REPEATED, "one of the group": S.ONEOF, "deprecated": S.DEPRECATED}


def _spec_path() -> Path:
    env = os.environ.get("ONNXKIT_SPEC")
    candidates = []
    if env:
        p = Path(env)
        candidates += [p / SPEC_NAME, p] if p.is_dir() else [p]
    candidates.append(REPO.parent / "shared" / "spec" / SPEC_NAME)
    for c in candidates:
        if c.is_file():
            return c
    pytest.skip(f"spec text not found (looked at {', '.join(map(str, candidates))}); set ONNXKIT_SPEC")


def _parse_annex_b(text: str):
    """``(messages, enums, groups, reserved, stated)`` from the text of Annex B.

    messages: ``{name: [(field, tag, wire_type, type, obligation)]}`` in table order;
    enums: ``{name: {value name: number}}``; groups: ``{message: {group: [members]}}``;
    reserved: ``{message: (tags, names)}``; stated: the counts B.1 states.
    """
    start = text.index("Annex B\n(normative)")
    end = text.index("Annex C\n(informative)", start)
    annex = text[start:end]
    messages, enums, groups, reserved = {}, {}, {}, {}
    lines = annex.splitlines()
    i = 0
    current = None
    while i < len(lines):
        line = lines[i]
        m = re.match(r"Table B\.\d+ — Fields of `([^`]+)`$", line)
        e = re.match(r"Table B\.\d+ — Values of `([^`]+)`$", line)
        if m:
            current = m.group(1)
            assert lines[i + 1].split("\t") == ["Field", "Tag", "Wire type", "Type", "Obligation"], lines[i + 1]
            rows = []
            i += 2
            while i < len(lines) and lines[i].strip():
                cells = lines[i].split("\t")
                assert len(cells) == 5, f"{current}: malformed row {lines[i]!r}"
                name, tag, wt, typ, obl = cells
                rows.append((name.strip("`"), int(tag), int(wt), typ.strip("`"), obl))
                i += 1
            assert current not in messages, f"message {current} tabled twice"
            messages[current] = rows
            continue
        if e:
            enum = e.group(1)
            assert lines[i + 1].split("\t") == ["Name", "Value"], lines[i + 1]
            values = {}
            i += 2
            while i < len(lines) and lines[i].strip():
                n, v = lines[i].split("\t")
                values[n.strip("`")] = int(v)
                i += 1
            enums[enum] = values
            continue
        g = re.match(r"Exactly one of (.+) SHALL be present, being the group (\w+)\.$", line)
        if g:
            assert current is not None
            groups.setdefault(current, {})[g.group(2)] = [x.strip() for x in g.group(1).split(",")]
        r = re.match(r"Tags and names reserved in (\S+), which SHALL NOT be used: (.+)\.$", line)
        if r:
            tags, names = set(), set()
            for part in re.split(r"[;,]", r.group(2)):
                part = part.strip()
                if part.startswith('"'):
                    names.add(part.strip('"'))
                elif " to " in part:
                    a, b = part.split(" to ")
                    tags.update(range(int(a), int(b) + 1))
                else:
                    tags.add(int(part))
            reserved[r.group(1)] = (tags, names)
        i += 1
    stated = re.search(r"This annex states the message definitions of the serialized form: (\d+) messages and (\d+) fields",
                       annex)
    mandatory = re.search(r"NOTE (\d+) of the (\d+) fields are mandatory", annex)
    return messages, enums, groups, reserved, {
        "messages": int(stated.group(1)), "fields": int(stated.group(2)),
        "mandatory": int(mandatory.group(1)), "fields_again": int(mandatory.group(2))}


@pytest.fixture(scope="module")
def annex():
    return _parse_annex_b(_spec_path().read_text(encoding="utf-8"))


def _resolve(type_name: str, message: str, messages, enums):
    """A table's type cell as (kind, message-or-enum name): nested names resolve in the enclosing message."""
    if type_name in SCALARS:
        return type_name, None
    outer = message.split(".")[0]
    for cand in (f"{message}.{type_name}", f"{outer}.{type_name}", type_name):
        if cand in messages:
            return "message", cand
        if cand in enums:
            return "enum", cand
    raise AssertionError(f"{message}: type {type_name!r} names neither a message nor an enumeration")


def test_counts(annex):
    messages, enums, _, _, stated = annex
    nfields = sum(len(r) for r in messages.values())
    print(f"\nAnnex B: {len(messages)} message tables, {nfields} fields, {len(enums)} enumerations")
    assert len(messages) == 33
    assert nfields == 166 == stated["fields"] == stated["fields_again"]
    # B.1 counts 35 "messages": the 33 tabled messages and the two top-level enumerations (B.2.1, B.2.29).
    assert stated["messages"] == 35 == len(messages) + sum(1 for e in enums if "." not in e)
    assert sum(1 for rows in messages.values() for r in rows if r[4] == "mandatory") == stated["mandatory"] == 23
    assert len(S.MESSAGES) == 33
    assert sum(len(m.fields) for m in S.MESSAGES.values()) == 166


def test_same_messages(annex):
    messages = annex[0]
    assert set(S.MESSAGES) == set(messages)


def test_fields_agree(annex):
    messages, enums, groups, _, _ = annex
    problems = []
    for mname, rows in messages.items():
        spec = S.MESSAGES[mname]
        assert [f.name for f in spec.fields] == [r[0] for r in rows], f"{mname}: field list or order differs"
        for name, tag, wt, typ, obl in rows:
            f = spec.by_name[name]
            kind, target = _resolve(typ, mname, messages, enums)
            packed = obl == "repeated, packed"
            want_wt = 2 if packed else {"int32": 0, "int64": 0, "uint64": 0, "enum": 0, "float": 5, "double": 1,
                                        "string": 2, "bytes": 2, "message": 2}[kind]
            got = (f.tag, f.kind, f.msg if kind == "message" else None, f.label, f.packed,
                   2 if f.packed else f.wire_type)
            want = (tag, kind, target if kind == "message" else None, OBLIGATION[obl], packed, wt)
            if got != want:
                problems.append(f"{mname}.{name}: schema {got} != Annex B {want}")
            if wt != want_wt:
                problems.append(f"{mname}.{name}: Annex B wire type {wt} does not fit type {typ} ({want_wt})")
            if f.label == S.ONEOF:
                members = groups.get(mname, {}).get(f.group)
                if members is None or name not in members:
                    problems.append(f"{mname}.{name}: group {f.group!r} is not Annex B's ({groups.get(mname)})")
        for group, members in groups.get(mname, {}).items():
            assert sorted(f.name for f in spec.fields if f.group == group) == sorted(members), (mname, group)
        assert len({f.tag for f in spec.fields}) == len(spec.fields), f"{mname}: a tag is used twice"
    assert not problems, "\n".join(problems)


def test_packed_only_where_annex_b_says(annex):
    messages = annex[0]
    packed = {(m, r[0]) for m, rows in messages.items() for r in rows if r[4] == "repeated, packed"}
    assert packed == {(m, f.name) for m, spec in S.MESSAGES.items() for f in spec.fields if f.packed}
    assert packed == {("TensorProto", n) for n in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data")}
    # and write_order is increasing tag order (12.3.2)
    for spec in S.MESSAGES.values():
        assert [f.tag for f in spec.write_order] == sorted(f.tag for f in spec.fields)


def test_reserved_tags_unused(annex):
    reserved = annex[3]
    assert set(reserved) == {"AttributeProto", "GraphProto", "TypeProto.Opaque", "FunctionProto"}
    for mname, (tags, names) in reserved.items():
        spec = S.MESSAGES[mname]
        assert not tags & set(spec.by_tag), (mname, tags & set(spec.by_tag))
        assert not names & set(spec.by_name), (mname, names & set(spec.by_name))
    assert reserved["AttributeProto"] == ({12, 16, 17, 18, 19}, {"v"})


def test_enums(annex):
    enums = annex[1]
    assert {k: len(v) for k, v in enums.items()} == S.ENUMS
    from onnxkit.ir import AttributeType
    from onnxkit.dtypes import DataType

    assert {a.name: int(a) for a in AttributeType} == enums["AttributeProto.AttributeType"]
    assert {d.name: int(d) for d in DataType} == enums["TensorProto.DataType"]


# -- second oracle: onnx's protobuf descriptors ------------------------------------------------

def _descriptor(message: str):
    onnx = pytest.importorskip("onnx")
    obj = onnx
    for part in message.split("."):
        obj = getattr(obj, part)
    return obj.DESCRIPTOR


def _pb_kind(fd):
    from google.protobuf.descriptor import FieldDescriptor as FD

    return {FD.TYPE_INT32: "int32", FD.TYPE_INT64: "int64", FD.TYPE_UINT64: "uint64", FD.TYPE_FLOAT: "float",
            FD.TYPE_DOUBLE: "double", FD.TYPE_STRING: "string", FD.TYPE_BYTES: "bytes", FD.TYPE_ENUM: "enum",
            FD.TYPE_MESSAGE: "message"}[fd.type]


@pytest.mark.parametrize("message", sorted(S.MESSAGES))
def test_against_protobuf_descriptor(message):
    d = _descriptor(message)
    spec = S.MESSAGES[message]
    assert {fd.name: fd.number for fd in d.fields} == {f.name: f.tag for f in spec.fields}
    for fd in d.fields:
        f = spec.by_name[fd.name]
        assert _pb_kind(fd) == f.kind, (message, fd.name)
        if f.kind == "message":
            assert fd.message_type.full_name == f"onnx.{f.msg}", (message, fd.name)
        assert fd.is_repeated == f.repeated, (message, fd.name)
        assert bool(fd.is_packed) == f.packed, (message, fd.name)
        oneof = fd.containing_oneof
        assert (oneof.name if oneof is not None else None) == f.group, (message, fd.name)


def test_enums_against_protobuf():
    onnx = pytest.importorskip("onnx")
    from onnxkit.ir import AttributeType

    assert {v.name: v.number for v in onnx.AttributeProto.AttributeType.DESCRIPTOR.values} == \
        {a.name: int(a) for a in AttributeType}
    assert len(onnx.TensorProto.DataType.DESCRIPTOR.values) == S.ENUMS["TensorProto.DataType"]
    assert len(onnx.Version.DESCRIPTOR.values) == S.ENUMS["Version"]
