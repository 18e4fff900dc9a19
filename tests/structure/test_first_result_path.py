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
            "print(len(seen), gc.isenabled(), gc.get_freeze_count(), 'attr' in sys.modules)\n")
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


def test_the_example_imports_no_external_data_module_and_defines_no_function_or_sparse_class():
    """A model without external tensors loads and checks without onnxkit.external,
    onnxkit.external_read and onnxkit.checker.external (and their two record classes); a model
    without model-local functions, training graphs or sparse tensors defines neither
    onnxkit.ir.function's classes nor onnxkit.ir.sparse's; a registry without plugin faults or
    opaque types defines neither class of onnxkit.registry_records; a check that finds nothing
    defines no Diagnostic (onnxkit.diagnostic_record); the record classes come from attrs' ``attr``
    package, without the ``attrs`` namespace's modules (the same objects); the schema data's function
    bodies are decoded without the base64 module, a graph in order is read without heapq, and a model
    is read into memory without mmap (no map
    exists before mmap is imported, so the planner and the decoder ask only then), its merged
    messages' spans kept in a list (not the array module's); the schema data is read without the json
    module (by the C scanner json decodes with).  Asked
    for, they are the same
    classes by every name, keep their modules' names (so they pickle as before), and ``ir.is_a``
    answers for them without defining them.  (The default first-run policy, cold first: a warm
    plan imports numba, which imports some of these modules itself.)"""
    env = {k: v for k, v in os.environ.items() if k != "ONNXKIT_FIRST_RUN"}
    printed = _after_a_run_of_the_example(
        "print(*(m in sys.modules for m in ('onnxkit.external', 'onnxkit.external_read', 'onnxkit.checker.external', "
        "'onnxkit.ir.function', 'onnxkit.ir.sparse', 'onnxkit.registry_records', 'onnxkit.diagnostic_record', "
        "'attrs', 'base64', 'heapq', 'mmap', 'array', 'json')))\n"
        "from onnxkit import ir\n"
        "print(ir.is_a(s.model.graph, 'Function'), ir.is_a(s.model.graph.initializer[0], 'SparseTensor'), "
        "'onnxkit.ir.function' in sys.modules, 'onnxkit.ir.sparse' in sys.modules)\n"
        "import pickle, onnxkit.ir.graph as g, onnxkit.ir.tensor as t\n"
        "f, sp = ir.Function(name='f', node=[ir.Node(op_type='Relu')]), ir.SparseTensor(dims=[2, 3])\n"
        "print(ir.is_a(f, 'Function'), ir.is_a(sp, 'SparseTensor'), ir.is_a(sp, 'Function'), "
        "ir.is_a(s.model.graph.initializer[0], 'SparseTensor'), g.Function is ir.Function, "
        "g.TrainingInfo is ir.TrainingInfo, t.SparseTensor is ir.SparseTensor)\n"
        "print(ir.Function.__module__, ir.TrainingInfo.__module__, ir.SparseTensor.__module__, "
        "pickle.loads(pickle.dumps(f)) == f, pickle.loads(pickle.dumps(sp)) == sp)\n"
        "import onnxkit.diagnostics as d, onnxkit.registry as r, onnxkit.plugin as p\n"
        "w = d.warning('x-code', '9.4', 'text', 'here')\n"
        "print(type(w) is d.Diagnostic, d.Diagnostic.__module__, pickle.loads(pickle.dumps(w)) == w, str(w), "
        "p.OpaqueTypeDef is r.OpaqueTypeDef, r.PluginFault.__module__, str(r.PluginFault('a', 'b', 'c')))\n", env)
    lines = printed.splitlines()
    assert lines[0] == "False False False False False False False False False False False False False", lines
    assert lines[1] == "False False False False", lines
    assert lines[2] == "True True False False True True True", lines
    assert lines[3] == "onnxkit.ir.graph onnxkit.ir.graph onnxkit.ir.tensor True True", lines
    assert lines[4] == ("True onnxkit.diagnostics True here: warning: text [x-code, Clause 9.4] True onnxkit.registry "
                        "plugin 'a' (b): c"), lines


def test_load_records_the_base_directory_as_external_attach_does(tmp_path, monkeypatch):
    """``onnxkit.load`` of a model without external tensors sets the model's and every tensor's
    ``base_dir`` as :func:`onnxkit.external.attach` sets them (absolute; none on the tensors under
    ``external_data='never'``; none from octets), without importing the external-data modules; a
    model with an external tensor still goes through ``attach`` (its options recorded)."""
    import numpy as np

    import onnxkit
    from onnxkit import external, ir
    from onnxkit.wire import decode_message

    data = (ROOT / "examples" / "digits.onnx").read_bytes()
    (tmp_path / "digits.onnx").write_bytes(data)
    monkeypatch.chdir(tmp_path)
    for mode in ("lazy", "eager", "never"):
        for src, where in (("digits.onnx", str(tmp_path)), (data, None)):
            model = onnxkit.load(src, external_data=mode)
            reference = decode_message(data, "ModelProto")
            external.attach(reference, where, external.ExternalDataOptions(mode=mode))
            tensors = list(external.iter_tensors(model))
            assert model.base_dir == reference.base_dir == (os.path.abspath(where) if where else None)
            assert len(tensors) > 0
            assert [t.base_dir for t in tensors] == [t.base_dir for t in external.iter_tensors(reference)]
            assert {t.base_dir for t in tensors} == {None if mode == "never" or where is None else str(tmp_path)}
        relative = decode_message(data, "ModelProto")
        external.attach(relative, ".", external.ExternalDataOptions(mode=mode))  # made absolute (13.2 NOTE)
        assert relative.base_dir == str(tmp_path)
        assert {t.base_dir for t in external.iter_tensors(relative)} == {None if mode == "never" else str(tmp_path)}
    big = onnxkit.load(data)
    big.graph.initializer[0] = ir.Tensor.from_numpy(np.ones((64, 64), np.float32), name=big.graph.initializer[0].name)
    onnxkit.save(big, str(tmp_path / "ext.onnx"), external_data=True, size_threshold=8192)
    loaded = onnxkit.load(str(tmp_path / "ext.onnx"))
    ext = [t for t in external.iter_tensors(loaded) if t.is_external]
    assert len(ext) == 1 and ext[0].base_dir == str(tmp_path) and ext[0].external_options.mode == "lazy"
    assert ext[0].numpy().shape == (64, 64) and float(ext[0].numpy().sum()) == 64 * 64


def test_schema_function_bodies_decoded_by_binascii_read_as_base64_reads_them():
    """onnxkit.schema decodes base64 text with binascii alone: the octets ``base64.b64decode``
    gives for str and bytes, characters outside the alphabet discarded, and bad padding refused
    (binascii.Error) as base64 refuses it."""
    import base64
    import binascii

    from onnxkit.schema import _b64decode

    for raw in (b"", b"\x00", b"ab", b"abc", bytes(range(256)) * 3):
        text = base64.b64encode(raw)
        for form in (text, text.decode(), text[:4] + b"\n" + text[4:] + b"\n", b" " + text + b"!!"):
            assert _b64decode(form) == base64.b64decode(form) == raw
    for bad in (b"abc", "abcde", b"a"):
        with pytest.raises(binascii.Error):
            base64.b64decode(bad)
        with pytest.raises(binascii.Error):
            _b64decode(bad)
    with pytest.raises(ValueError):
        base64.b64decode("\u00e9abc")
    with pytest.raises(ValueError):
        _b64decode("\u00e9abc")


def test_the_cpu_namespace_finds_a_module_as_importlib_util_finds_it():
    """onnxkit_cpu.namespace reads array-api-compat's release from the file ``importlib.util.find_spec``
    names, found through ``sys.meta_path`` itself (importlib.util is not imported): the same origin
    for modules not imported yet, and None for a module no finder has."""
    code = ("import sys\n"
            "before = 'importlib.util' in sys.modules\n"   # (an editable install's finder may import it at start)
            "from onnxkit_cpu.namespace import _top_level_spec\n"
            "names = ('array_api_compat', 'pluggy', 'json', 'onnxkit_no_such_module')\n"
            "mine = [getattr(_top_level_spec(n), 'origin', None) for n in names]\n"
            "print(('importlib.util' in sys.modules) == before, all(n not in sys.modules for n in names[:1]))\n"
            "import importlib.util\n"
            "theirs = [getattr(importlib.util.find_spec(n), 'origin', None) for n in names]\n"
            "print(mine == theirs, mine[0] is not None, mine[-1] is None)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "True", "True", "True", "True"], out.stdout


def test_schema_data_read_by_the_json_scanner_reads_as_json_loads_reads_it():
    """onnxkit.schema reads schema data without importing json: every line of every packaged
    schema document decodes to what ``json.loads`` gives, and what the scanner declines (whitespace
    around the value, trailing text, another encoding, a malformed text) is ``json.loads``' to
    decide: the same value, or the same refusal."""
    import json
    import math

    from onnxkit.schema import _gunzip, _json_loads

    datas = [(ROOT / f"plugins/{d}/schemas_data.json.gz").read_bytes()
             for d in ("default_domain/onnxkit_default_domain", "ml_domain/onnxkit_ml", "microsoft_domain/onnxkit_microsoft")]
    n = 0
    for data in datas:
        for line in _gunzip(data).split(b"\n"):
            if line:
                assert _json_loads(line) == json.loads(line)
                n += 1
    assert n > 600
    same = ['{"a": [1, 2.5, "x", null, true, false, -0.0, 1e400, 12345678901234567890123]}', ' [1] ', '[1]\n',
            '"\\u00e9\\ud83d\\ude00"', b'{"k": "v"}', '\ufeff[1]'.encode("utf-8"), '[1]'.encode("utf-16"), "0", "[]"]
    for text in same:
        assert _json_loads(text) == json.loads(text), text
    for text in ("NaN", "[Infinity, -Infinity]"):
        got, want = _json_loads(text), json.loads(text)
        assert repr(got) == repr(want) and (text != "NaN" or math.isnan(got))
    for bad in ("[1] x", "[1,]", "{'a': 1}", "", "[1", b"\xff[1]", '"a\tb"', "\ufeff[1]"):
        with pytest.raises(ValueError) as theirs:
            json.loads(bad)
        with pytest.raises(ValueError) as ours:
            _json_loads(bad)
        assert type(ours.value) is type(theirs.value), bad

