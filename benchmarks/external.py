"""Benchmark: opening a 1 GiB external tensor is a memory map, not a read (Clause 13.2).

Creates, in a temporary folder, a model whose one FLOAT tensor of 2**28 elements lives in a
1 GiB external data file (a sparse file made with truncate), opens it with
``Tensor.numpy()`` (through ``onnxkit.external.read_external``), and prints the time to
open and the resident memory before and after: RSS does not grow by 1 GiB.  For contrast it
then reads the same file into memory (a copy), and times a SHA-1 checksum (13.3), hashed
once per file however many tensors reference it.

    python benchmarks/external.py [--size-mib 1024] [--no-copy] [--no-checksum]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import sys
import tempfile
import time


from onnxkit.external import attach, read_external
from onnxkit.ir import Graph, Model, StringStringEntry, Tensor

PAGE = os.sysconf("SC_PAGE_SIZE")
MiB = 1 << 20


def rss() -> int:
    """Resident set size now, in octets (/proc/self/statm, second field)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except OSError:  # not Linux: peak RSS is the best there is
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def fmt(n: int) -> str:
    return f"{n / MiB:9.1f} MiB"


def model_with_external(folder: str, nbytes: int, checksum: str | None = None) -> Model:
    entries = [StringStringEntry("location", "weights.bin"), StringStringEntry("offset", "0"),
               StringStringEntry("length", str(nbytes))]
    if checksum:
        entries.append(StringStringEntry("checksum", checksum))
    t = Tensor(name="w", dims=[nbytes // 4], data_type=1, data_location=1, external_data=entries)
    u = Tensor(name="w_again", dims=[nbytes // 4], data_type=1, data_location=1, external_data=list(entries))
    m = Model(ir_version=10, graph=Graph(name="bench", initializer=[t, u]))
    attach(m, folder)  # what onnxkit.load does after decoding (lazy: nothing opened yet)
    return m


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size-mib", type=int, default=1024)
    p.add_argument("--no-copy", action="store_true", help="skip the read-into-memory comparison")
    p.add_argument("--no-checksum", action="store_true", help="skip the SHA-1 timing")
    args = p.parse_args(argv)
    nbytes = args.size_mib * MiB
    with tempfile.TemporaryDirectory(prefix="onnxkit-bench-") as folder:
        path = os.path.join(folder, "weights.bin")
        with open(path, "wb") as f:
            f.truncate(nbytes)  # sparse: no disk, no page cache until read
        print(f"external data file: {path} ({fmt(nbytes).strip()}, sparse)")

        # The default storage comes from the plugin registry (hook onnxkit_storage); building
        # it loads every plugin once per process, so it is timed apart from the open.
        from onnxkit.registry import get_registry

        rb = rss()
        t0 = time.perf_counter()
        get_registry()
        print(f"registry build (once):     {(time.perf_counter() - t0) * 1e3:9.3f} ms   RSS +{fmt(rss() - rb).strip()}")
        m = model_with_external(folder, nbytes)
        tensor = m.graph.initializer[0]
        r0 = rss()
        t0 = time.perf_counter()
        arr = tensor.numpy()  # -> onnxkit.external.read_external -> memory map
        t_open = time.perf_counter() - t0
        r1 = rss()
        print(f"open (Tensor.numpy):       {t_open * 1e3:9.3f} ms   shape {arr.shape} {arr.dtype}, "
              f"writeable={arr.flags.writeable}")
        print(f"RSS before open:           {fmt(r0)}")
        print(f"RSS after open:            {fmt(r1)}   (+{fmt(r1 - r0).strip()}; "
              f"{(r1 - r0) / nbytes * 100:.3f}% of the tensor)")
        t0 = time.perf_counter()
        part = float(arr[: 16 * MiB // 4].sum())  # touch 16 MiB: only those pages become resident
        t_touch = time.perf_counter() - t0
        r2 = rss()
        print(f"touch first 16 MiB:        {t_touch * 1e3:9.3f} ms   RSS +{fmt(r2 - r1).strip()} (sum {part})")
        t0 = time.perf_counter()
        for _ in range(100):
            read_external(tensor)
        print(f"re-open x100:              {(time.perf_counter() - t0) * 1e3 / 100:9.3f} ms each")
        del arr

        if not args.no_copy:
            r3 = rss()
            t0 = time.perf_counter()
            with open(path, "rb") as f:
                copy = f.read()
            t_copy = time.perf_counter() - t0
            r4 = rss()
            print(f"read into memory (copy):   {t_copy * 1e3:9.3f} ms   RSS +{fmt(r4 - r3).strip()}")
            print(f"ratio copy/mmap open time: {t_copy / t_open:9.1f}x;  RSS growth copy/mmap: "
                  f"{(r4 - r3) / max(r1 - r0, PAGE):.0f}x")
            del copy

        if not args.no_checksum:
            with open(path, "rb") as f:
                h = hashlib.sha1()
                while chunk := f.read(64 * MiB):
                    h.update(chunk)
            digest = h.hexdigest()
            m = model_with_external(folder, nbytes, checksum=digest)
            a, b = m.graph.initializer
            t0 = time.perf_counter()
            read_external(a)
            t_first = time.perf_counter() - t0
            t0 = time.perf_counter()
            read_external(b)
            t_second = time.perf_counter() - t0
            print(f"open with SHA-1 checksum:  {t_first * 1e3:9.3f} ms (hashes {fmt(nbytes).strip()}); second tensor "
                  f"of the same file {t_second * 1e3:.3f} ms (digest cached)")
            print(f"RSS at the end:            {fmt(rss())}   (the hashed mapping is released with its last view)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
