"""The ONNX 1-3 test package through onnxkit's codec.

* every model file (``*.onnx``) decodes, and ``save(load(b)) == b`` octet for octet;
* every value file (``*.pb``) reads through :func:`onnxkit.load_value` to the value
  ``onnx.numpy_helper`` gives (``to_array`` / ``to_list`` / ``to_dict`` / ``to_optional``), the
  message being chosen from the declared type of the matching graph input or output of the
  model in the same case folder; and decodes and re-encodes octet for octet.

The package is generated once from the installed ``onnx`` (``tests/onnx_vectors.py``).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import numpy_helper  # noqa: E402

from onnxkit import api  # noqa: E402
from onnxkit.wire import decode_message, encode_message  # noqa: E402

ORACLE = {  # TypeProto member -> (message the file holds, onnx's reader of it)
    "tensor_type": ("TensorProto", lambda b: numpy_helper.to_array(onnx.TensorProto.FromString(b))),
    "sequence_type": ("SequenceProto", lambda b: numpy_helper.to_list(onnx.SequenceProto.FromString(b))),
    "map_type": ("MapProto", lambda b: numpy_helper.to_dict(onnx.MapProto.FromString(b))),
    "optional_type": ("OptionalProto", lambda b: numpy_helper.to_optional(onnx.OptionalProto.FromString(b))),
}


def _models(root: Path) -> list:
    return sorted(root.rglob("*.onnx"))


def _values(root: Path) -> list:
    return sorted(root.rglob("*.pb"))


def _owner(pb: Path):
    """``(model file, 'input'|'output', index)`` of a value file.

    ``<case>/test_data_set_N/input_K.pb`` belongs to ``<case>/model.onnx``;
    ``light/light_X_output_K.pb`` to ``light/light_X.onnx``.
    """
    if pb.parent.name.startswith("test_data_set"):
        io, k = pb.stem.split("_")
        return pb.parent.parent / "model.onnx", io, int(k)
    m = re.fullmatch(r"(.+)_(input|output)_(\d+)", pb.stem)
    assert m, f"cannot tell which model {pb} belongs to"
    return pb.parent / f"{m.group(1)}.onnx", m.group(2), int(m.group(3))


def _same(got, want, where="") -> list:
    """Differences between onnxkit's value and onnx's (STRING elements: onnxkit gives bytes, onnx str)."""
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [f"{where}: list {type(got).__name__} of {len(got) if hasattr(got, '__len__') else '?'} != {len(want)}"]
        return [d for i, (g, w) in enumerate(zip(got, want)) for d in _same(g, w, f"{where}[{i}]")]
    if isinstance(want, dict):
        if not isinstance(got, dict) or list(got) != list(want):
            return [f"{where}: dict keys {list(got) if isinstance(got, dict) else got!r} != {list(want)}"]
        return [d for k in want for d in _same(got[k], want[k], f"{where}[{k!r}]")]
    if want is None:
        return [] if got is None else [f"{where}: {type(got).__name__} where onnx gives None"]
    if not isinstance(got, np.ndarray):
        return [f"{where}: {type(got).__name__} where onnx gives an array"]
    want = np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return [f"{where}: {got.dtype}{got.shape} != {want.dtype}{want.shape}"]
    if want.dtype == object:
        w = [s.encode("utf-8") if isinstance(s, str) else s for s in want.ravel()]
        return [] if list(got.ravel()) == w else [f"{where}: string elements differ"]
    # octet comparison: exact for NaN payloads, -0.0, and the 8/6/4-bit float types
    return [] if np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes() else [f"{where}: values differ"]


def test_models_round_trip(onnx_vectors_dir, tmp_path):
    files = _models(onnx_vectors_dir)
    out = tmp_path / "out.onnx"
    decoded = exact = saved = 0
    failures = []
    for path in files:
        data = path.read_bytes()
        try:
            model = api.load(path)
        except Exception as exc:  # noqa: BLE001 -- reported below with the file
            failures.append(f"{path.relative_to(onnx_vectors_dir)}: load: {type(exc).__name__}: {exc}")
            continue
        decoded += 1
        if api.to_bytes(model) == data:
            exact += 1
        else:
            failures.append(f"{path.relative_to(onnx_vectors_dir)}: to_bytes(load(b)) != b")
        api.save(model, out)
        if out.read_bytes() == data:
            saved += 1
        else:
            failures.append(f"{path.relative_to(onnx_vectors_dir)}: save(load(b)) != b")
    print(f"\nONNX 1-3 models: {len(files)} found, {decoded} decoded, {exact} to_bytes exact, {saved} save exact")
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:50])
    assert len(files) > 2000
    assert decoded == exact == saved == len(files)


def test_values_match_onnx(onnx_vectors_dir):
    files = _values(onnx_vectors_dir)
    models: dict = {}
    counts: dict = {}
    matched = exact = 0
    failures = []
    for pb in files:
        rel = pb.relative_to(onnx_vectors_dir)
        model_path, io, k = _owner(pb)
        if model_path not in models:
            models[model_path] = (onnx.load(str(model_path), load_external_data=False), api.load(model_path))
        proto, mine = models[model_path]
        vi = (proto.graph.input if io == "input" else proto.graph.output)[k]
        my_vi = (mine.graph.input if io == "input" else mine.graph.output)[k]
        assert my_vi.name == vi.name
        member = vi.type.WhichOneof("value")
        message, oracle = ORACLE[member]
        counts[message] = counts.get(message, 0) + 1
        data = pb.read_bytes()
        want = oracle(data)
        try:
            got = api.load_value(pb, message=message)
            got_by_type = api.load_value(data, type=my_vi.type)
        except Exception as exc:  # noqa: BLE001
            failures.append(f"{rel}: load_value: {type(exc).__name__}: {exc}")
            continue
        diffs = _same(got, want, str(rel)) + _same(got_by_type, want, f"{rel} (by type)")
        if diffs:
            failures.extend(diffs)
        else:
            matched += 1
        if encode_message(decode_message(data, message), message) == data:
            exact += 1
        else:
            failures.append(f"{rel}: {message} does not re-encode octet for octet")
    print(f"\nONNX 1-3 value files: {len(files)} found, {matched} equal to onnx.numpy_helper, "
          f"{exact} re-encoded exactly; by message: {dict(sorted(counts.items()))}")
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:50])
    assert len(files) > 6000
    assert matched == exact == sum(counts.values()) == len(files)
    # the package exercises more than tensors: sequences and optionals are among the files
    assert counts.get("SequenceProto", 0) > 0 and counts.get("OptionalProto", 0) > 0


def test_value_guess_without_hint(onnx_vectors_dir):
    """``load_value`` without a hint guesses the message.  Every wrong guess must be a file whose
    octets are genuinely ambiguous: an OptionalProto holding a tensor or sequence (tags 2, 3/5) is
    octet for octet a SequenceProto holding one element, so no reader can tell them apart."""
    files = _values(onnx_vectors_dir)
    protos: dict = {}
    right, ambiguous, wrong = 0, [], []
    for pb in files:
        model_path, io, k = _owner(pb)
        if model_path not in protos:
            protos[model_path] = onnx.load(str(model_path), load_external_data=False).graph
        g = protos[model_path]
        message, oracle = ORACLE[(g.input if io == "input" else g.output)[k].type.WhichOneof("value")]
        data = pb.read_bytes()
        rel = str(pb.relative_to(onnx_vectors_dir))
        if not _same(api.load_value(data), oracle(data), rel):
            right += 1
            continue
        as_seq = onnx.SequenceProto.FromString(data)
        if message == "OptionalProto" and as_seq.SerializeToString() == data and len(as_seq.ListFields()) > 0:
            ambiguous.append(rel)
        else:
            wrong.append(rel)
    print(f"\nONNX 1-3 value files without a hint: {right} of {len(files)} guessed right, "
          f"{len(ambiguous)} optionals indistinguishable from one-element sequences")
    assert not wrong, wrong[:20]
    assert right + len(ambiguous) == len(files)
    assert right > 6000
