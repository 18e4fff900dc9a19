"""What a first result on the bundled example does not import (issue 44: time to first result
after ``pip install``): each deferral pinned in a fresh process, with the condition under which
it holds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _after_a_run_of_the_example(code: str, env: dict | None = None) -> str:
    """What ``code`` prints in a fresh process after one session on the example has run (one
    intra-op thread, the BLAS limit entered: the example has a Gemm); ``env``: the process's
    environment (the test process's by default)."""
    prelude = ("import sys, numpy as np, onnxkit\n"
               "so = onnxkit.SessionOptions(); so.intra_op_num_threads = 1\n"
               "s = onnxkit.InferenceSession('examples/digits.onnx', so)\n"
               "y = s.run(None, {'image': np.zeros((1, 1, 8, 8), np.float32)})[0]\n"
               "assert y.shape == (1, 10)\n")
    out = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=300,
                         cwd=str(ROOT), env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_an_openblas_process_limits_blas_without_threadpoolctl():
    """numpy's OpenBLAS limited through its own entry points (onnxkit.runtime.threads): where every
    BLAS loaded is an OpenBLAS listed in /proc/self/maps, threadpoolctl is not imported."""
    printed = _after_a_run_of_the_example(
        "from onnxkit.runtime import threads\n"
        "print(threads._openblas_only() is not None, 'threadpoolctl' in sys.modules, s._uses_blas)\n")
    fast, imported, uses_blas = printed.split()
    assert uses_blas == "True", printed
    assert imported == ("False" if fast == "True" else "True"), printed


#: the graph passes the optimizer imports only for a graph holding the op types their rules read
GATED_PASSES = ("identity", "cast", "transpose", "reshape", "pad_conv", "conv_bn", "channel_affine", "matmul_add")
#: op types a pass rewrites beyond its rules (cast: CastLike written as Cast)
BEYOND_RULES = {"cast": {frozenset({"CastLike"})}}


def _needs_of(pattern) -> set:
    """The minimal sets of op types a match of ``pattern`` reads (an independent reading of the
    rules' pattern records: an Op needs its type and its operands' needs; AnyOf any alternative's)."""
    from onnxkit.runtime.optimizer.rules import AnyOf, Op

    if isinstance(pattern, Op):
        found = {frozenset({pattern.op_type})}
        for operand in pattern.operands:
            found = {a | b for a in found for b in _needs_of(operand)}
        return found
    if isinstance(pattern, AnyOf):
        return set().union(*(_needs_of(alt) for alt in pattern.alternatives))
    return {frozenset()}


def _minimal(sets: set) -> set:
    return {s for s in sets if not any(t < s for t in sets)}



@pytest.mark.parametrize("name", GATED_PASSES)
def test_a_gated_pass_names_exactly_the_op_types_its_rules_read(name):
    """``_on_types``'s alternatives are the minimal op-type sets of the module's rules (so no
    rewrite is skipped), and its gate opens on each of them (a Mul need met by a Div too) and on
    nothing less."""
    import importlib

    from onnxkit.runtime import optimizer

    gated = next(p for p in optimizer.PASSES if p.name == name).run
    module = importlib.import_module(f"onnxkit.runtime.optimizer.{name}")
    rules = tuple(module.RULES) + tuple(getattr(module, "ACTIVE", ()))
    derived = _minimal(set().union(*(_needs_of(r.pattern) for r in rules)) | BEYOND_RULES.get(name, set()))
    declared = {frozenset(n) for n in gated.needs}
    assert gated.module == name and declared == derived, (declared, derived)
    for need in derived:
        assert gated.meets(set(need) | {"Relu"})
        if "Mul" in need:
            assert gated.meets((set(need) - {"Mul"}) | {"Div"})
        for t in need:
            less = set(need) - {t}
            assert gated.meets(less) == any(other <= less for other in derived), (need, t)


def test_the_example_imports_no_rule_pass_and_not_the_rules_engine():
    """The example's graph (Conv, Relu, MaxPool, Flatten, Gemm, Softmax) meets no rules-based
    graph pass: neither their modules nor the rules engine and its record classes are imported."""
    printed = _after_a_run_of_the_example(
        "print(' '.join(m for m in sys.modules if m.startswith('onnxkit.runtime.optimizer.')) or '-')")
    loaded = set(printed.split())
    unwanted = {f"onnxkit.runtime.optimizer.{m}" for m in GATED_PASSES + ("rules", "patterns", "computed")}
    assert not loaded & unwanted, loaded & unwanted
    assert "onnxkit.runtime.optimizer.epilogue" in loaded   # the Conv + Relu fold is a plan pass: it runs


def test_schema_data_decompressed_by_zlib_reads_as_gzip_reads_it():
    """onnxkit.schema reads the packaged schema data without the gzip module: the same octets as
    ``gzip.decompress`` (several members, trailing zero padding), and a truncated or corrupt file
    refused (EOFError, OSError), as gzip refuses it."""
    import gzip

    from onnxkit.schema import _gunzip

    packaged = (ROOT / "plugins/default_domain/onnxkit_default_domain/schemas_data.json.gz").read_bytes()
    members = gzip.compress(b"abc") + gzip.compress(b"", mtime=0) + gzip.compress(b"def") + b"\0\0"
    for data in (packaged, members, gzip.compress(b"x" * 100_000)):
        assert _gunzip(data) == gzip.decompress(data)
    with pytest.raises(EOFError):
        _gunzip(packaged[:-3])
    with pytest.raises(EOFError):
        gzip.decompress(packaged[:-3])
    corrupt = bytearray(packaged)
    corrupt[-6] ^= 1   # the CRC
    with pytest.raises(OSError):
        gzip.decompress(bytes(corrupt))
    with pytest.raises(OSError):
        _gunzip(bytes(corrupt))


def test_a_session_on_the_example_imports_no_gzip():
    assert _after_a_run_of_the_example("print('gzip' in sys.modules)").strip() == "False"


def test_the_registry_reads_kernel_tables_as_before_its_fast_path():
    """onnxkit.registry's ``_triples`` takes plain entries on a fast path: every entry ends as the
    full checks decide (kept, normalized, or a fault naming it), the odd ones (a str subclass, a
    bool version, version 0, a non-callable) included."""
    from onnxkit.registry import _triples

    class Name(str):
        pass

    class Faults:
        def __init__(self):
            self.seen = []

        def _fault(self, plugin, hook, message):
            self.seen.append(message)

    def fn():
        return None

    table = {("", "Relu", 14): fn, ("ai.onnx", "Relu", 6): fn, ("com.microsoft", "Gelu", 1): fn,
             (Name("x.y"), "Op", 2): fn, ("", "Bool", True): fn, ("", "Zero", 0): fn, ("", "Neg", -1): fn,
             ("", "NotCallable", 3): 42, ("", "Short"): fn, ("", 5, 1): fn}
    reg = Faults()
    kept = _triples(table, "p", "onnxkit_kernels", reg)
    assert kept == [(("", "Relu", 14), fn), (("", "Relu", 6), fn), (("com.microsoft", "Gelu", 1), fn),
                    (("x.y", "Op", 2), fn), (("", "Bool", True), fn)]
    assert len(reg.seen) == 5 and sum("not callable" in m for m in reg.seen) == 1, reg.seen


def _gc_during_import(prelude: str) -> list:
    code = (prelude + "import gc, numpy, sys\n"
            "seen = []\n"
            "gc.callbacks.append(lambda phase, info: phase == 'start' and seen.append(info['generation']))\n"
            "import onnxkit\n"
            "gc.callbacks.clear()\n"
            "print(len(seen), gc.isenabled(), gc.get_freeze_count(), 'attrs' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def test_import_onnxkit_pauses_the_collector_and_restores_it():
    """``import onnxkit`` defines its record classes with the cyclic collector paused (no
    collection runs during it), switches it back on, and leaves nothing frozen; a program that
    switched the collector off, or froze objects itself, finds it so afterwards."""
    # (one collection may still run as the package's own module is found and read, before its body
    # pauses the collector; unpaused, its imports make several)
    runs, enabled, frozen, attrs = _gc_during_import("")
    assert int(runs) <= 1 and (enabled, frozen, attrs) == ("True", "0", "True")
    runs, enabled, frozen, _ = _gc_during_import("import gc; gc.disable()\n")
    assert int(runs) == 0 and (enabled, frozen) == ("False", "0")
    runs, enabled, frozen, _ = _gc_during_import("import gc; gc.freeze()\n")
    assert int(runs) <= 1 and enabled == "True" and int(frozen) > 0


def test_the_example_imports_no_array_api_compat_numpy_where_its_names_are_known():
    """The example's kernels read numpy's own names and ``astype`` through the cpu backend's
    namespace (onnxkit_cpu.namespace): array-api-compat's clone of numpy, numpy.fft and
    numpy.typing are not imported, where the installed array-api-compat is the release line whose
    names the namespace knows (otherwise it takes every name from the clone)."""
    import array_api_compat
    from onnxkit_cpu.namespace import WRAPPED_VERSION

    known = array_api_compat.__version__.split(".")[:2] == WRAPPED_VERSION.split(".")
    loaded = _after_a_run_of_the_example(
        "print(*(m in sys.modules for m in ('array_api_compat.numpy', 'numpy.fft', 'numpy.typing', 'numba')))")
    aac, fft, typing, numba = loaded.split()
    assert aac == str(not known)
    # nor array-api-compat itself where the names are known: the portable kernels ask an array's
    # device through onnxkit_default_domain's device_of, which answers "cpu" for numpy alone
    assert _after_a_run_of_the_example("print('array_api_compat' in sys.modules)").strip() == str(not known)
    if numba == "False":   # numba's own import brings numpy.fft and numpy.typing (ONNXKIT_FIRST_RUN=warm)
        assert (fft, typing) == (str(not known), str(not known))


def test_the_example_defines_no_surface_record_a_first_result_does_not_ask_for():
    """ModelMetadata, NodeArg and OrtEpAssignedNode (onnxkit.runtime.surface_records) are defined
    when a session is first asked for them, and are the same classes by every name."""
    printed = _after_a_run_of_the_example(
        "print('onnxkit.runtime.surface_records' in sys.modules)\n"
        "from onnxkit.runtime.options import NodeArg\n"
        "from onnxkit.runtime.session_ort import OrtEpAssignedNode\n"
        "import onnxkit.runtime, onnxkit.runtime.session as rs\n"
        "print(NodeArg is onnxkit.NodeArg is onnxkit.runtime.NodeArg is rs.NodeArg, "
        "onnxkit.ModelMetadata is onnxkit.runtime.ModelMetadata, OrtEpAssignedNode.__module__)\n"
        "a = s.get_inputs()[0]; print(type(a).__name__, a.name, a.type, a.shape)\n")
    lines = printed.splitlines()
    assert lines[0] == "False"
    assert lines[1] == "True True onnxkit.runtime.surface_records"
    assert lines[2] == "NodeArg image tensor(float) ['N', 1, 8, 8]"


def test_the_example_imports_neither_the_lora_nor_the_sparse_output_modules():
    """A session whose runs name no LoRA adapter and whose outputs are dense imports neither
    onnxkit.runtime.lora (with its adapter format) nor onnxkit.runtime.sparse."""
    printed = _after_a_run_of_the_example(
        "print(*(m in sys.modules for m in ('onnxkit.runtime.lora', 'onnxkit.runtime.adapter_format', "
        "'onnxkit.runtime.sparse')))").strip()
    assert printed == "False False False"


def test_the_cache_lookup_of_a_deferral_imports_no_hashlib():
    """The example's first run defers its compiled loops and asks numba's on-disk cache whether it
    holds them (onnxkit_cpu.compiled.cache_index); the digests come from CPython's built-in hash
    modules, so hashlib (and the OpenSSL it loads) stays unimported."""
    env = {k: v for k, v in os.environ.items() if k != "ONNXKIT_FIRST_RUN"}   # the default policy: cold first
    printed = _after_a_run_of_the_example(
        "print(*(m in sys.modules for m in ('onnxkit_cpu.compiled.cache_index', 'hashlib', 'numba')))", env).strip()
    assert printed == "True False False"


def test_a_session_inferring_once_imports_no_inference_reuse():
    """onnxkit.inference.reuse is imported by an inference that reuses another (the optimizer's
    view of a model whose declarations count), not by the example's session, which infers once."""
    assert _after_a_run_of_the_example("print('onnxkit.inference.reuse' in sys.modules)").strip() == "False"
