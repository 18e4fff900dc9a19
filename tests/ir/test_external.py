"""External data: Table 11 references and the Table 14 threats (Clauses 13, 15.3, 15.4).

Tensors are built directly and files live in pytest's tmp_path: ``model/`` is the model
directory, ``outside/secret.bin`` a sentinel whose content must never be returned.
"""

from __future__ import annotations

import hashlib
import mmap
import os

import numpy as np
import pytest

from onnxkit.errors import ExternalDataError, LimitExceeded
from onnxkit.external import ExternalDataOptions, parse_reference, read_external
from onnxkit.ir import StringStringEntry as E
from onnxkit.ir import Tensor
from onnxkit.limits import Limits
from onnxkit import storage as storage_mod
from onnxkit.storage import ExternalRefError, LocalFileStorage, check_location

SECRET = b"SECRET!!" * 2  # 16 octets: exactly what a FLOAT[4] tensor needs
DATA = np.arange(4, dtype=np.float32)


@pytest.fixture
def dirs(tmp_path):
    model = tmp_path / "model"
    outside = tmp_path / "outside"
    model.mkdir()
    outside.mkdir()
    (outside / "secret.bin").write_bytes(SECRET)
    (model / "w.bin").write_bytes(DATA.tobytes())
    return model, outside


def ext(base, location="w.bin", dims=(4,), data_type=1, name="w", **keys):
    entries = [E("location", location)] + [E(k, str(v)) for k, v in keys.items()]
    return Tensor(name=name, dims=list(dims), data_type=data_type, data_location=1, external_data=entries,
                  base_dir=str(base))


def refused(code, tensor, **kw):
    with pytest.raises(ExternalDataError) as info:
        out = read_external(tensor, **kw)
        assert bytes(out) != SECRET
    assert info.value.code == code, str(info.value)
    return info.value


# -- reading -------------------------------------------------------------------------------------

def test_read_is_zero_copy_read_only_memory_map(dirs):
    model, _ = dirs
    mv = read_external(ext(model))
    assert isinstance(mv, memoryview) and mv.readonly
    assert isinstance(mv.obj, mmap.mmap)  # a view of the map, not a copy
    assert np.array_equal(np.frombuffer(mv, np.float32), DATA)


def test_several_tensors_in_one_file_by_offset_and_length(dirs):
    model, _ = dirs
    a, b = np.arange(3, dtype=np.int64), np.array([7, 8], dtype=np.int16)
    (model / "both.bin").write_bytes(a.tobytes() + b"\0" * 8 + b.tobytes())
    ta = ext(model, "both.bin", dims=[3], data_type=7, offset=0, length=24)
    tb = ext(model, "both.bin", dims=[2], data_type=5, offset=32)  # length: to the end of the file
    assert np.array_equal(np.frombuffer(read_external(ta), np.int64), a)
    assert np.array_equal(np.frombuffer(read_external(tb), np.int16), b)


def test_location_in_a_subdirectory_and_backslash_separator(dirs):
    model, _ = dirs
    (model / "sub" / "deeper").mkdir(parents=True)
    (model / "sub" / "deeper" / "x.bin").write_bytes(DATA.tobytes())
    for loc in ("sub/deeper/x.bin", "sub\\deeper\\x.bin", "./sub//deeper/x.bin"):
        assert bytes(read_external(ext(model, loc))) == DATA.tobytes()


def test_narrow_type_size_is_ceil_of_bits(dirs):
    model, _ = dirs
    (model / "i4.bin").write_bytes(b"\x21\x43\x65\x07")  # 7 INT4 elements: 4 octets (6.3.4 example)
    assert len(read_external(ext(model, "i4.bin", dims=[7], data_type=22))) == 4
    refused("size-mismatch", ext(model, "i4.bin", dims=[9], data_type=22))


def test_empty_tensor_and_empty_file(dirs):
    model, _ = dirs
    (model / "empty.bin").write_bytes(b"")
    assert len(read_external(ext(model, "empty.bin", dims=[0]))) == 0


# -- Table 11 (13.2) -------------------------------------------------------------------------------

def test_unknown_key_refused(dirs):
    model, _ = dirs
    err = refused("unknown-key", ext(model, basepath="x"))
    assert "basepath" in str(err) and "Table 11" in str(err) and "'w'" in str(err)


def test_duplicate_key_refused(dirs):
    model, _ = dirs
    t = ext(model)
    t.external_data.append(E("location", "../outside/secret.bin"))
    refused("duplicate-key", t)


def test_missing_or_empty_location_refused(dirs):
    model, _ = dirs
    t = ext(model)
    t.external_data = [E("offset", "0")]
    refused("missing-location", t)
    refused("missing-location", ext(model, ""))


@pytest.mark.parametrize("value", ["-1", "1.5", " 3", "+3", "0x10", "", "1e3", "٣", "9" * 30])
def test_offset_and_length_must_be_non_negative_integers(dirs, value):
    model, _ = dirs
    refused("bad-offset", ext(model, offset=value))
    refused("bad-length", ext(model, length=value))


def test_parse_reference_fields(dirs):
    model, _ = dirs
    digest = hashlib.sha1(DATA.tobytes()).hexdigest().upper()
    ref = parse_reference(ext(model, offset=0, length=16, checksum=digest))
    assert (ref.location, ref.offset, ref.length, ref.checksum) == ("w.bin", 0, 16, digest.lower())
    assert parse_reference(ext(model)).offset is None
    with pytest.raises(ExternalRefError) as info:
        parse_reference(ext(model, checksum="abc"))
    assert info.value.code == "bad-checksum"


# -- path traversal and absolute paths (Table 14 row 1; 13.2, 15.3) -------------------------------

@pytest.mark.parametrize("loc", ["../outside/secret.bin", "sub/../../outside/secret.bin", "..\\outside\\secret.bin",
                                 "./../outside/secret.bin", "..", "sub/.."])
def test_parent_directory_component_refused(dirs, loc):
    model, _ = dirs
    err = refused("path-traversal", ext(model, loc))
    assert "15.3" in str(err) and repr(loc) in str(err)


@pytest.mark.parametrize("loc", ["/etc/passwd", "\\etc\\passwd", "C:\\Windows\\x.bin", "C:x.bin", "c:/x.bin",
                                 "\\\\server\\share\\x.bin", "//server/share/x.bin"])
def test_absolute_paths_refused(dirs, loc):
    model, _ = dirs
    refused("absolute-path", ext(model, loc))


def test_absolute_path_to_the_secret_refused(dirs):
    model, outside = dirs
    refused("absolute-path", ext(model, str(outside / "secret.bin")))


def test_nul_byte_refused(dirs):
    model, _ = dirs
    refused("invalid-location", ext(model, "w.bin\0../../etc/passwd"))


def test_canonical_containment_layer(dirs, monkeypatch):
    # A layer behind the syntax and link checks: the canonical path must stay inside (15.3).
    model, outside = dirs
    real = os.path.realpath
    monkeypatch.setattr(storage_mod.os.path, "realpath",
                        lambda p: str(outside / "secret.bin") if p.endswith("w.bin") else real(p))
    refused("outside-directory", ext(model))


# -- symbolic links (Table 14 row 2) --------------------------------------------------------------

def test_symlink_last_component_refused(dirs):
    model, outside = dirs
    os.symlink(outside / "secret.bin", model / "link.bin")
    err = refused("symlink", ext(model, "link.bin"))
    assert "last component" in str(err)


def test_symlink_to_a_file_inside_is_refused_too(dirs):
    model, _ = dirs
    os.symlink("w.bin", model / "alias.bin")
    refused("symlink", ext(model, "alias.bin"))


def test_symlink_middle_component_refused(dirs):
    model, outside = dirs
    os.symlink(outside, model / "sub")
    err = refused("symlink", ext(model, "sub/secret.bin"))
    assert "'sub'" in str(err)


def test_symlink_deep_middle_component_refused(dirs):
    model, outside = dirs
    (model / "a").mkdir()
    os.symlink(outside, model / "a" / "b")
    refused("symlink", ext(model, "a/b/secret.bin"))


# -- hard links (Table 14 row 3) ------------------------------------------------------------------

def test_hard_link_refused(dirs):
    model, outside = dirs
    os.link(outside / "secret.bin", model / "hard.bin")
    err = refused("hardlink", ext(model, "hard.bin"))
    assert "2 hard links" in str(err)


# -- the file changed between resolution and open (15.3, fourth paragraph) ------------------------

def _swap_hook(monkeypatch, action):
    calls = []

    def hook(self, resolution):
        calls.append(resolution)
        action()

    monkeypatch.setattr(LocalFileStorage, "_before_open", hook)
    return calls


def test_file_replaced_between_resolution_and_open(dirs, monkeypatch):
    model, outside = dirs

    def swap():  # a different file (one link, regular) takes the resolved name
        (model / "evil.bin").write_bytes(SECRET)
        os.replace(model / "evil.bin", model / "w.bin")

    calls = _swap_hook(monkeypatch, swap)
    refused("file-changed", ext(model))
    assert calls and calls[0][-1][0] == "w.bin"


def test_file_replaced_by_symlink_between_resolution_and_open(dirs, monkeypatch):
    model, outside = dirs

    def swap():
        os.unlink(model / "w.bin")
        os.symlink(outside / "secret.bin", model / "w.bin")

    _swap_hook(monkeypatch, swap)
    refused("symlink", ext(model))


def test_directory_replaced_by_symlink_between_resolution_and_open(dirs, monkeypatch):
    model, outside = dirs
    (model / "sub").mkdir()
    (model / "sub" / "secret.bin").write_bytes(DATA.tobytes())

    def swap():
        os.rename(model / "sub", model / "old")
        os.symlink(outside, model / "sub")

    _swap_hook(monkeypatch, swap)
    refused("symlink", ext(model, "sub/secret.bin"))


def test_directory_replaced_by_another_directory(dirs, monkeypatch):
    model, outside = dirs
    (model / "sub").mkdir()
    (model / "sub" / "x.bin").write_bytes(DATA.tobytes())

    def swap():
        os.rename(model / "sub", model / "old")
        (model / "sub").mkdir()
        (model / "sub" / "x.bin").write_bytes(SECRET)

    _swap_hook(monkeypatch, swap)
    refused("file-changed", ext(model, "sub/x.bin"))


def test_file_removed_between_resolution_and_open(dirs, monkeypatch):
    model, _ = dirs
    _swap_hook(monkeypatch, lambda: os.unlink(model / "w.bin"))
    refused("file-changed", ext(model))


# -- what is opened ---------------------------------------------------------------------------------

def test_not_found_and_not_regular(dirs):
    model, _ = dirs
    refused("not-found", ext(model, "nope.bin"))
    (model / "d").mkdir()
    refused("not-regular", ext(model, "d"))
    refused("not-found", ext(model, "w.bin/x"))


def test_fifo_is_refused_without_blocking(dirs):
    model, _ = dirs
    os.mkfifo(model / "pipe")
    refused("not-regular", ext(model, "pipe"))


# -- short files, sizes, checksums (13.2, 13.3, 15.4) ------------------------------------------------

def test_file_shorter_than_offset_plus_length(dirs):
    model, _ = dirs
    err = refused("short-file", ext(model, offset=8, length=16))
    assert "24" in str(err)
    refused("short-file", ext(model, offset=1000))


def test_length_must_match_what_dims_need(dirs):
    model, _ = dirs
    refused("size-mismatch", ext(model, length=12))
    refused("size-mismatch", ext(model, dims=[3]))  # to the end of the file: 16 octets, 12 needed


def test_checksum_verified(dirs):
    model, _ = dirs
    good = hashlib.sha1(DATA.tobytes()).hexdigest()
    assert bytes(read_external(ext(model, checksum=good))) == DATA.tobytes()
    err = refused("checksum-mismatch", ext(model, checksum="0" * 40))
    assert "13.3" in str(err) and good in str(err)


def test_checksum_covers_the_whole_file_and_is_hashed_once(dirs, monkeypatch):
    model, _ = dirs
    content = DATA.tobytes() + DATA.tobytes()[::-1]
    (model / "two.bin").write_bytes(content)
    digest = hashlib.sha1(content).hexdigest()
    calls = []
    real = hashlib.sha1

    def counting(*a):
        calls.append(1)
        return real(*a)

    import onnxkit.external as ext_mod

    monkeypatch.setattr(hashlib, "sha1", counting)  # the module onnxkit.external imports when it hashes
    a = ext(model, "two.bin", name="a", offset=0, length=16, checksum=digest)
    b = ext(model, "two.bin", name="b", offset=16, length=16, checksum=digest)
    read_external(a), read_external(b), read_external(a)
    assert len(calls) == 1
    # New contents under the same name (a new file, as an editor or a producer writes it):
    # a new identity, so hashed again, and refused.  (In-place rewrites within one
    # timestamp tick of the filesystem are a documented limit of the cache.)
    (model / "new.bin").write_bytes(bytes(32))
    os.replace(model / "new.bin", model / "two.bin")
    refused("checksum-mismatch", a)
    assert len(calls) == 2


# -- resource bounds (Table 14 row 4; 15.4) ---------------------------------------------------------

def test_declared_tensor_far_larger_than_memory_refused_before_allocation(dirs):
    model, _ = dirs
    # 2**40 FLOAT elements = 4 TiB; the file does not even exist: the limit is checked first.
    with pytest.raises(LimitExceeded) as info:
        read_external(ext(model, "does-not-exist.bin", dims=[1 << 40]))
    assert info.value.limit == "max_tensor_bytes" and info.value.code == "limit-exceeded"
    assert "'w'" in str(info.value)
    with pytest.raises(LimitExceeded) as info:
        read_external(ext(model, dims=[(1 << 40) + 1], data_type=2))
    assert info.value.limit == "max_dim_extent"


def test_huge_declared_size_with_generous_limits_is_checked_against_the_file(dirs):
    model, _ = dirs
    big = ExternalDataOptions(limits=Limits(max_tensor_bytes=1 << 50))
    refused("short-file", ext(model, dims=[1 << 40], length=4 << 40), options=big)
    refused("size-mismatch", ext(model, dims=[1 << 40]), options=big)


def test_external_file_size_limit(dirs):
    model, _ = dirs
    with open(model / "sparse.bin", "wb") as f:
        f.truncate(1 << 20)
    opts = ExternalDataOptions(limits=Limits(max_external_file_bytes=1000))
    with pytest.raises(LimitExceeded) as info:
        read_external(ext(model, "sparse.bin", dims=[4], offset=0, length=16), options=opts)
    assert info.value.limit == "max_external_file_bytes"


# -- outside the model directory: only with the explicit option (15.3) --------------------------------

def test_allow_outside_admits_a_sibling_directory(dirs):
    model, outside = dirs
    t = ext(model, "../outside/secret.bin")
    refused("path-traversal", t)
    allow = ExternalDataOptions(allow_outside=True)
    assert bytes(read_external(t, options=allow)) == SECRET
    assert bytes(read_external(ext(model, str(outside / "secret.bin")), options=allow)) == SECRET


def test_allow_outside_still_refuses_links(dirs):
    model, outside = dirs
    allow = ExternalDataOptions(allow_outside=True)
    os.symlink(outside / "secret.bin", outside / "link.bin")
    refused("symlink", ext(model, "../outside/link.bin"), options=allow)
    os.link(outside / "secret.bin", outside / "hard.bin")
    refused("hardlink", ext(model, "../outside/secret.bin"), options=allow)
    refused("invalid-location", ext(model, "../x\0"), options=allow)


ATTACKS = {
    "parent": lambda m, o: "../outside/secret.bin",
    "parent-backslash": lambda m, o: "..\\outside\\secret.bin",
    "parent-after-sub": lambda m, o: ((m / "sub").mkdir(), "sub/../../outside/secret.bin")[1],
    "absolute": lambda m, o: str(o / "secret.bin"),
    "symlink-last": lambda m, o: (os.symlink(o / "secret.bin", m / "l.bin"), "l.bin")[1],
    "symlink-relative": lambda m, o: (os.symlink("../outside/secret.bin", m / "l.bin"), "l.bin")[1],
    "symlink-middle": lambda m, o: (os.symlink(o, m / "d"), "d/secret.bin")[1],
    "symlink-chain": lambda m, o: (os.symlink(o, m / "d"), os.symlink("d/secret.bin", m / "l"), "l")[2],
    "hardlink": lambda m, o: (os.link(o / "secret.bin", m / "h.bin"), "h.bin")[1],
    "dotdot-alone": lambda m, o: "..",
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_nothing_outside_the_model_directory_is_ever_read(dirs, attack):
    model, outside = dirs
    loc = ATTACKS[attack](model, outside)
    t = ext(model, loc)
    with pytest.raises(ExternalDataError) as info:
        out = read_external(t)
        pytest.fail(f"read {bytes(out)!r}")
    assert SECRET.decode() not in str(info.value)
    with pytest.raises(ExternalDataError):
        LocalFileStorage().open(str(model), loc)


def test_check_location_components():
    assert check_location("a/./b\\c.bin") == ["a", "b", "c.bin"]
    assert check_location("../x", allow_outside=True) == ["..", "x"]
    with pytest.raises(ExternalRefError) as info:
        check_location("C:\\x", allow_outside=True)
    assert info.value.code == "absolute-path"
