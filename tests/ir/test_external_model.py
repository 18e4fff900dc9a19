"""External data at model level: iter_tensors, attach, externalize, storage plugins (Clause 13)."""

from __future__ import annotations

import hashlib
import mmap
import os
import zipfile

import numpy as np
import pytest

import onnxkit
from onnxkit import external
from onnxkit.errors import ExternalDataError, LimitExceeded
from onnxkit.external import ExternalDataOptions, attach, externalize, iter_tensors, read_external
from onnxkit.ir import (Attribute, Function, Graph, Model, Node, OperatorSetId, SparseTensor, StringStringEntry as E,
                        Tensor, TrainingInfo)
from onnxkit.registry import build_registry
from onnxkit.storage import ExternalRefError, LocalFileStorage, Storage, StorageFile, check_location


def raw(name, array, data_type):
    array = np.ascontiguousarray(array)
    return Tensor(name=name, dims=list(array.shape), data_type=data_type, raw_data=array.tobytes())


def ext(name, location, dims, data_type=1, base_dir=None, **keys):
    entries = [E("location", location)] + [E(k, str(v)) for k, v in keys.items()]
    return Tensor(name=name, dims=list(dims), data_type=data_type, data_location=1, external_data=entries,
                  base_dir=base_dir)


BIG_A = np.arange(3000, dtype=np.float32).reshape(30, 100)  # 12000 octets
BIG_B = np.arange(1500, dtype=np.int64)  # 12000 octets
SMALL = np.arange(4, dtype=np.float32)  # 16 octets: stays embedded


def sample_model() -> Model:
    """A model with tensors everywhere iter_tensors must look."""
    sub = Graph(name="then", initializer=[raw("sub_init", np.ones(3, np.float32), 1)],
                node=[Node(op_type="Constant", output=["c2"], attribute=[Attribute.make("value", raw("sub_const", SMALL, 1))])])
    sparse = SparseTensor(values=raw("sp_values", np.ones(2, np.float32), 1), indices=raw("sp_idx", np.array([0, 3]), 7),
                          dims=[5])
    graph = Graph(
        name="main",
        initializer=[raw("a", BIG_A, 1), raw("small", SMALL, 1)],
        sparse_initializer=[sparse],
        node=[Node(op_type="Constant", output=["c"], attribute=[Attribute.make("value", raw("b", BIG_B, 7))]),
              Node(op_type="If", input=["cond"], output=["y"],
                   attribute=[Attribute.make("then_branch", sub), Attribute.make("ts", [raw("t1", SMALL, 1)])])],
    )
    fn = Function(name="f", domain="local", node=[Node(op_type="Constant", output=["k"],
                                                       attribute=[Attribute.make("value", raw("fn_const", SMALL, 1))])],
                  attribute_proto=[Attribute.make("alpha", raw("fn_default", SMALL, 1))])
    training = TrainingInfo(initialization=Graph(name="init", initializer=[raw("ti_init", SMALL, 1)]),
                            algorithm=Graph(name="algo", initializer=[raw("ti_algo", SMALL, 1)]))
    return Model(ir_version=10, opset_import=[OperatorSetId("", 21)], graph=graph, functions=[fn],
                 training_info=[training])


ALL_NAMES = {"a", "small", "sp_values", "sp_idx", "b", "sub_init", "sub_const", "t1", "fn_const", "fn_default",
             "ti_init", "ti_algo"}


def test_iter_tensors_finds_every_tensor_once():
    m = sample_model()
    names = [t.name for t in iter_tensors(m)]
    assert sorted(names) == sorted(ALL_NAMES)
    assert names[:2] == ["a", "small"]
    m.graph.initializer.append(m.graph.initializer[0])  # the same object twice: yielded once
    assert len(list(iter_tensors(m))) == len(ALL_NAMES)
    assert [t.name for t in iter_tensors(m.graph.node[1])] == ["sub_init", "sub_const", "t1"]


def test_iter_tensors_deep_nesting_does_not_recurse():
    g = Graph(name="leaf", initializer=[raw("deep", SMALL, 1)])
    for i in range(3000):
        g = Graph(name=f"g{i}", node=[Node(op_type="If", attribute=[Attribute.make("then_branch", g)])])
    assert [t.name for t in iter_tensors(g)] == ["deep"]


# -- attach (the loader's call) --------------------------------------------------------------------

def test_attach_sets_base_dir_everywhere(tmp_path):
    m = sample_model()
    attach(m, tmp_path)
    assert m.base_dir == str(tmp_path)
    assert all(t.base_dir == str(tmp_path) for t in iter_tensors(m))


def test_attach_makes_base_dir_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    m = sample_model()
    attach(m, ".")
    assert m.graph.initializer[0].base_dir == str(tmp_path)


def with_external(tmp_path, t):
    m = sample_model()
    m.graph.initializer.append(t)
    return m


def test_lazy_attach_checks_references_without_opening(tmp_path):
    m = with_external(tmp_path, ext("e", "missing.bin", [4]))
    attach(m, tmp_path, ExternalDataOptions(mode="lazy"))  # the file is not opened
    with pytest.raises(ExternalRefError) as info:
        read_external(m.graph.initializer[-1])
    assert info.value.code == "not-found"
    for bad, code in ((ext("e", "../x.bin", [4]), "path-traversal"), (ext("e", "x.bin", [4], foo=1), "unknown-key"),
                      (ext("e", "/abs.bin", [4]), "absolute-path")):
        with pytest.raises(ExternalRefError) as info:
            attach(with_external(tmp_path, bad), tmp_path)
        assert info.value.code == code
    with pytest.raises(LimitExceeded):
        attach(with_external(tmp_path, ext("e", "x.bin", [1 << 40])), tmp_path)


def test_eager_attach_opens_and_verifies(tmp_path):
    (tmp_path / "w.bin").write_bytes(SMALL.tobytes())
    good = hashlib.sha1(SMALL.tobytes()).hexdigest()
    attach(with_external(tmp_path, ext("e", "w.bin", [4], checksum=good)), tmp_path, ExternalDataOptions(mode="eager"))
    for t, code in ((ext("e", "missing.bin", [4]), "not-found"), (ext("e", "w.bin", [4], checksum="1" * 40),
                                                                 "checksum-mismatch"),
                    (ext("e", "w.bin", [5]), "size-mismatch")):
        with pytest.raises(ExternalRefError) as info:
            attach(with_external(tmp_path, t), tmp_path, ExternalDataOptions(mode="eager"))
        assert info.value.code == code


def test_never_mode_refuses_then_opt_in(tmp_path):
    (tmp_path / "w.bin").write_bytes(SMALL.tobytes())
    m = with_external(tmp_path, ext("e", "../bad-but-unchecked.bin", [4]))
    attach(m, tmp_path, ExternalDataOptions(mode="never"))  # nothing checked or resolved
    t = m.graph.initializer[-1]
    with pytest.raises(ExternalRefError) as info:
        read_external(t)
    assert info.value.code == "resolution-disabled" and "disabled" in str(info.value)
    t.external_data = [E("location", "w.bin")]
    attach(m, tmp_path, ExternalDataOptions(mode="lazy"))  # the explicit opt-in step (15.5)
    assert bytes(read_external(t)) == SMALL.tobytes()


def test_attach_options_are_remembered_for_the_tensor(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "w.bin").write_bytes(SMALL.tobytes())
    m = with_external(tmp_path, ext("e", "../shared/w.bin", [4]))
    with pytest.raises(ExternalRefError):
        attach(m, tmp_path / "model")
    attach(m, tmp_path / "model", ExternalDataOptions(allow_outside=True))
    assert bytes(read_external(m.graph.initializer[-1])) == SMALL.tobytes()  # no options passed: remembered


def test_other_refusals(tmp_path):
    (tmp_path / "w.bin").write_bytes(SMALL.tobytes())
    cases = [
        (raw("r", SMALL, 1), "not-external"),
        (ext("e", "w.bin", [4], base_dir=None), "no-base-dir"),
        (Tensor(name="s", dims=[1], data_type=8, data_location=1, external_data=[E("location", "w.bin")],
                base_dir=str(tmp_path)), "unsupported-type"),
        (Tensor(name="both", dims=[4], data_type=1, data_location=1, external_data=[E("location", "w.bin")],
                raw_data=SMALL.tobytes(), base_dir=str(tmp_path)), "embedded-and-external"),
    ]
    for t, code in cases:
        with pytest.raises(ExternalRefError) as info:
            read_external(t)
        assert info.value.code == code, info.value
    with pytest.raises(ValueError):
        ExternalDataOptions(mode="sometimes")


def test_tensor_numpy_reads_external_lazily(tmp_path):
    (tmp_path / "w.bin").write_bytes(BIG_A.tobytes())
    t = ext("e", "w.bin", BIG_A.shape, base_dir=str(tmp_path))
    arr = t.numpy()
    assert np.array_equal(arr, BIG_A) and not arr.flags.writeable


# -- externalize --------------------------------------------------------------------------------------

def test_externalize_round_trip_aligned(tmp_path):
    m = sample_model()
    before = [(t.name, t.data_location, bytes(t.raw_data)) for t in iter_tensors(m)]
    out = externalize(m, tmp_path / "model.onnx")
    assert [(t.name, t.data_location, bytes(t.raw_data)) for t in iter_tensors(m)] == before  # untouched
    moved = {t.name: t for t in iter_tensors(out) if t.is_external}
    assert set(moved) == {"a", "b"}
    data = tmp_path / "model.onnx.data"
    assert data.exists()
    for t in moved.values():
        ref = external.parse_reference(t)
        assert ref.location == "model.onnx.data" and ref.offset % mmap.ALLOCATIONGRANULARITY == 0
        assert ref.length == 12000 and t.raw_data is None and t.base_dir == str(tmp_path)
    assert np.array_equal(np.frombuffer(read_external(moved["a"]), np.float32).reshape(30, 100), BIG_A)
    assert np.array_equal(np.frombuffer(read_external(moved["b"]), np.int64), BIG_B)
    assert external.parse_reference(moved["a"]).offset == 0
    page = mmap.ALLOCATIONGRANULARITY
    assert external.parse_reference(moved["b"]).offset == -(-12000 // page) * page  # rounded up to the page
    small = [t for t in iter_tensors(out) if not t.is_external]
    assert len(small) == len(ALL_NAMES) - 2 and all(t.raw_data is not None for t in small)


def test_externalize_threshold_location_align_checksum(tmp_path):
    out = externalize(sample_model(), tmp_path / "m.onnx", size_threshold=16, location="weights/all.bin", align=64,
                      checksum=True)
    moved = [t for t in iter_tensors(out) if t.is_external]
    assert len(moved) == 10  # every tensor of 16 octets or more
    content = (tmp_path / "weights" / "all.bin").read_bytes()
    digest = hashlib.sha1(content).hexdigest()
    for t in moved:
        ref = external.parse_reference(t)
        assert ref.offset % 64 == 0 and ref.checksum == digest and ref.location == "weights/all.bin"
        assert bytes(read_external(t)) == content[ref.offset:ref.offset + ref.length]
    names = {t.name: t for t in iter_tensors(out)}
    assert np.array_equal(np.frombuffer(read_external(names["a"]), np.float32), BIG_A.ravel())


def test_externalize_rewrites_already_external_tensors(tmp_path):
    first = externalize(sample_model(), tmp_path / "one" / "m.onnx")
    second = externalize(first, tmp_path / "two" / "m.onnx", size_threshold=1 << 30)
    moved = {t.name: t for t in iter_tensors(second) if t.is_external}
    assert set(moved) == {"a", "b"} and moved["a"].base_dir == str(tmp_path / "two")
    os.remove(tmp_path / "one" / "m.onnx.data")
    assert np.array_equal(np.frombuffer(read_external(moved["b"]), np.int64), BIG_B)


def test_externalize_over_its_own_source_keeps_readers_valid(tmp_path):
    first = externalize(sample_model(), tmp_path / "m.onnx")
    a = next(t for t in iter_tensors(first) if t.name == "a")
    view = read_external(a)
    externalize(first, tmp_path / "m.onnx", align=1)  # same data file: replaced atomically
    assert np.array_equal(np.frombuffer(view, np.float32), BIG_A.ravel())


def test_externalize_typed_storage_and_nothing_to_move(tmp_path):
    t = Tensor(name="typed", dims=[2000], data_type=1, float_data=np.arange(2000, dtype=np.float32))
    m = Model(ir_version=10, graph=Graph(initializer=[t]))
    out = externalize(m, tmp_path / "m.onnx")
    moved = out.graph.initializer[0]
    assert moved.is_external and moved.float_data.size == 0 and t.float_data.size == 2000
    assert np.array_equal(moved.numpy(), np.arange(2000, dtype=np.float32))
    out = externalize(Model(graph=Graph(initializer=[raw("s", SMALL, 1)])), tmp_path / "n.onnx")
    assert not out.graph.initializer[0].is_external and not (tmp_path / "n.onnx.data").exists()


def test_externalize_refuses_bad_locations(tmp_path):
    for loc in ("../x.data", "/tmp/x.data"):
        with pytest.raises(ExternalRefError):
            externalize(sample_model(), tmp_path / "m.onnx", location=loc)


def test_write_refuses_symlinked_directory(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "model").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "model" / "weights")
    with pytest.raises(ExternalRefError) as info:
        LocalFileStorage().write(tmp_path / "model", "weights/x.bin", [b"abc"])
    assert info.value.code == "symlink" and os.listdir(tmp_path / "elsewhere") == []


def test_write_does_not_write_through_a_hard_link(tmp_path):
    (tmp_path / "outside.bin").write_bytes(b"keep")
    (tmp_path / "model").mkdir()
    os.link(tmp_path / "outside.bin", tmp_path / "model" / "x.bin")
    assert LocalFileStorage().write(tmp_path / "model", "x.bin", [b"new", memoryview(b"data")]) == 7
    assert (tmp_path / "outside.bin").read_bytes() == b"keep"
    assert (tmp_path / "model" / "x.bin").read_bytes() == b"newdata"


# -- storage plugins: the hook is real ---------------------------------------------------------------

class ZipStorage(Storage):
    """External data as members of a zip archive (``base`` is the archive path)."""

    name = "zip"

    def open(self, base, location, *, allow_outside=False, tensor=""):
        member = "/".join(check_location(location, tensor=tensor))  # the same syntax rules (13.2)
        with zipfile.ZipFile(base) as z:
            try:
                info = z.getinfo(member)
            except KeyError:
                raise ExternalRefError("not-found", f"no member {member!r} in {base}", tensor=tensor,
                                       location=location) from None
            data = z.read(info)
        return StorageFile.from_buffer(data, key=("zip", str(base), member, info.CRC, info.file_size),
                                       description=f"{base}!{member}")


class ZipPlugin:
    @onnxkit.hookimpl
    def onnxkit_storage(self):
        return [ZipStorage()]


def test_storage_plugin_through_the_hook(tmp_path):
    archive = tmp_path / "weights.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("w/a.bin", BIG_A.tobytes())
    reg = build_registry(extra=[("zipstore", ZipPlugin())], entry_points=True)
    assert isinstance(reg.storages["file"], LocalFileStorage) and reg.owner[("onnxkit_storage", "file")] == "local_storage"
    assert reg.owner[("onnxkit_storage", "zip")] == "zipstore"
    t = ext("a", "w/a.bin", BIG_A.shape, base_dir=str(archive),
            checksum=hashlib.sha1(BIG_A.tobytes()).hexdigest())
    assert np.array_equal(np.frombuffer(read_external(t, storage=reg.storages["zip"]), np.float32), BIG_A.ravel())
    with pytest.raises(ExternalDataError):  # the local storage cannot open an archive member
        read_external(t)
    with pytest.raises(ExternalRefError) as info:
        read_external(ext("a", "../w/a.bin", BIG_A.shape, base_dir=str(archive)), storage=reg.storages["zip"])
    assert info.value.code == "path-traversal"
    with pytest.raises(ExternalRefError) as info:
        read_external(t, storage="no-such-storage")
    assert info.value.code == "unknown-storage"


def test_local_storage_comes_through_the_hook():
    reg = build_registry(include=["local_storage"], entry_points=True)
    assert list(reg.storages) == ["file"] and not reg.faults
    assert reg.provided_by("local_storage")["storages"] == ["file"]


# -- save / load (the lead's codec) ---------------------------------------------------------------------

def test_save_load_round_trip_with_external_data(tmp_path):
    api = pytest.importorskip("onnxkit.api")
    m = sample_model()
    path = tmp_path / "model.onnx"
    api.save(m, path, external_data=True, checksum=True)
    assert (tmp_path / "model.onnx.data").exists() and path.stat().st_size < 12000
    for mode in ("lazy", "eager"):
        back = api.load(path, external_data=mode)
        got = {t.name: t for t in iter_tensors(back)}
        assert got["a"].is_external and got["b"].is_external and not got["small"].is_external
        assert np.array_equal(got["a"].numpy(), BIG_A) and np.array_equal(got["b"].numpy(), BIG_B)
        assert np.array_equal(got["small"].numpy(), SMALL)
    never = api.load(path, external_data="never")
    with pytest.raises(ExternalDataError):
        next(t for t in iter_tensors(never) if t.name == "a").numpy()


def test_interoperates_with_the_onnx_package(tmp_path):
    api = pytest.importorskip("onnxkit.api")
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    # onnx writes, onnxkit reads.
    g = helper.make_graph([helper.make_node("Identity", ["a"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [30, 100])],
                          initializer=[numpy_helper.from_array(BIG_A, "a"), numpy_helper.from_array(BIG_B, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    onnx.save_model(m, str(tmp_path / "theirs.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="theirs.data", size_threshold=1024)
    back = api.load(tmp_path / "theirs.onnx", external_data="eager")
    got = {t.name: t for t in iter_tensors(back)}
    assert got["a"].is_external and np.array_equal(got["a"].numpy(), BIG_A)
    assert np.array_equal(got["b"].numpy(), BIG_B)
    # onnxkit writes, onnx reads.
    api.save(sample_model(), tmp_path / "ours.onnx", external_data=True)
    theirs = onnx.load(str(tmp_path / "ours.onnx"))
    arrays = {t.name: numpy_helper.to_array(t) for t in theirs.graph.initializer}
    assert np.array_equal(arrays["a"], BIG_A) and np.array_equal(arrays["small"], SMALL)
