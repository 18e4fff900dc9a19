"""Outputs are the caller's own: writing into one never changes a later run (issue 29, item 2).

``InferenceSession.run`` promises fresh writable arrays that alias neither a feed nor anything the
session keeps across runs — initializers, defaults, folded constants, the values a shape-specialized
plan folded from its recording run.  Each model here routes a constant to a graph output in one of
the ways a constant can get there (Identity of an initializer, a Constant node, an initializer that
is itself an output, an overridable default, a value folded at planning, Shape/Size -> Identity/Cast
folded by specialization, a duplicated output, a feed passed through), plus seeded random chains of
such operators.  Each runs at every optimization level (and with the ``specialize`` pass switched
off at the default level) on both backends: every output of every run is overwritten, and the
next run must return what the first returned (its copy), every output its own memory (no two
outputs, no output and a feed, no two runs share any).  The first run is also checked against
onnxruntime (optimizer off), so a model whose outputs were wrong from the start cannot pass.
Every model of the real-world corpus that onnxkit runs goes through the same writes at every
level (its correctness is test_corpus's: here only that writes never reach a later run).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from optimizer_cases import TP, helper, init, model, ort

from onnxkit import InferenceSession, SessionOptions

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib
from onnxkit.runtime.options import GraphOptimizationLevel as Level

#: (label, level, passes switched off); ``specialize`` is on from ORT_ENABLE_BASIC up
LEVELS = [("off", Level.ORT_DISABLE_ALL, ""), ("basic", Level.ORT_ENABLE_BASIC, ""),
          ("extended", Level.ORT_ENABLE_EXTENDED, ""), ("all", Level.ORT_ENABLE_ALL, ""),
          ("all-unspecialized", Level.ORT_ENABLE_ALL, "specialize")]
BACKENDS = ["cpu", "gpu"]
RUNS = 4  # the recording run, the specialized plan's, and two more


def options(level, disabled: str = "") -> SessionOptions:
    """One intra-op thread: with default threads BLAS's thread count follows the machine's load per
    run (a busy machine gets one), and a product split otherwise sums in another order, so two runs
    could differ in the last bit for a reason that is not aliasing."""
    so = SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = level
    if disabled:
        so.add_session_config_entry("session.disable_passes", disabled)
    return so


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


X = vi("X", TP.FLOAT, ["a", "b"])
W_VALUE = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
W = init("W", W_VALUE)
I64 = TP.INT64
node = helper.make_node


def _c(name, array):
    return node("Constant", [], [name], value=init(name + "_v", np.asarray(array)))


#: name -> (nodes, inputs, outputs, initializers, ir_version)
CASES = {
    "identity_of_initializer": ([node("Identity", ["W"], ["y"])], [X], [vi("y", TP.FLOAT, [2, 3])], [W], 8),
    "initializer_is_output": ([node("Relu", ["X"], ["r"])], [X], [vi("W", TP.FLOAT, [2, 3]),
                                                                   vi("r", TP.FLOAT, ["a", "b"])], [W], 8),
    "constant_node": ([_c("y", W_VALUE)], [X], [vi("y", TP.FLOAT, [2, 3])], [], 8),
    "identity_of_constant": ([_c("c", W_VALUE), node("Identity", ["c"], ["y"])], [X], [vi("y", TP.FLOAT, [2, 3])],
                             [], 8),
    "folded_at_planning": ([node("Add", ["W", "W"], ["s"]), node("Reshape", ["s", "shape"], ["y"]),
                            node("Cast", ["W"], ["z"], to=I64)], [X],
                           [vi("y", TP.FLOAT, [3, 2]), vi("z", I64, [2, 3])],
                           [W, init("shape", np.array([3, 2], np.int64))], 8),
    "overridable_default": ([node("Identity", ["W"], ["y"]), node("Relu", ["X"], ["r"])],
                            [X, vi("W", TP.FLOAT, [2, 3])], [vi("y", TP.FLOAT, [2, 3]), vi("W", TP.FLOAT, [2, 3]),
                                                              vi("r", TP.FLOAT, ["a", "b"])], [W], 8),
    "ir3_initializer_input": ([node("Mul", ["W", "W"], ["y"]), node("Identity", ["W"], ["z"])],
                              [X, vi("W", TP.FLOAT, [2, 3])], [vi("y", TP.FLOAT, [2, 3]), vi("z", TP.FLOAT, [2, 3])],
                              [W], 3),
    "shape_output": ([node("Shape", ["X"], ["y"])], [X], [vi("y", I64, [2])], [], 8),
    "shape_identity": ([node("Shape", ["X"], ["s"]), node("Identity", ["s"], ["y"])], [X], [vi("y", I64, [2])], [], 8),
    "shape_cast_same_type": ([node("Shape", ["X"], ["s"]), node("Cast", ["s"], ["y"], to=I64)], [X],
                             [vi("y", I64, [2])], [], 8),
    "shape_cast_int32": ([node("Shape", ["X"], ["s"]), node("Cast", ["s"], ["y"], to=TP.INT32)], [X],
                         [vi("y", TP.INT32, [2])], [], 8),
    "size_identity": ([node("Size", ["X"], ["s"]), node("Identity", ["s"], ["y"])], [X], [vi("y", I64, [])], [], 8),
    "shape_three_outputs": ([node("Shape", ["X"], ["s"]), node("Identity", ["s"], ["y"]),
                             node("Identity", ["s"], ["z"])], [X],
                            [vi("y", I64, [2]), vi("z", I64, [2]), vi("s", I64, [2])], [], 8),
    "shape_arithmetic": ([node("Shape", ["X"], ["s"]), node("Gather", ["s", "zero"], ["g"], axis=0),
                          node("Concat", ["s", "s"], ["y"], axis=0), node("Unsqueeze", ["g", "axes"], ["u"]),
                          node("ConstantOfShape", ["s"], ["f"], value=helper.make_tensor("v", TP.FLOAT, [1], [7.0]))],
                         [X], [vi("y", I64, [4]), vi("u", I64, [1]), vi("f", TP.FLOAT, ["a", "b"]), vi("g", I64, [])],
                         [init("zero", np.array(0, np.int64)), init("axes", np.array([0], np.int64))], 13),
    "if_on_a_constant": ([_c("cond", np.array(True)),
                          node("If", ["cond"], ["y"],
                               then_branch=helper.make_graph([node("Identity", ["W"], ["t"])], "then", [],
                                                             [vi("t", TP.FLOAT, [2, 3])]),
                               else_branch=helper.make_graph([node("Neg", ["W"], ["e"])], "else", [],
                                                             [vi("e", TP.FLOAT, [2, 3])]))],
                         [X], [vi("y", TP.FLOAT, [2, 3])], [W], 8),
    "feed_passed_through": ([node("Identity", ["X"], ["y"])], [X], [vi("y", TP.FLOAT, ["a", "b"]),
                                                                    vi("X", TP.FLOAT, ["a", "b"])], [], 8),
    "dropout_inference": ([node("Dropout", ["W"], ["y"])], [X], [vi("y", TP.FLOAT, [2, 3])], [W], 13),
}


def _scribble(v) -> None:
    """Overwrite every element of an output (in place), as a caller reusing the buffer would."""
    if isinstance(v, np.ndarray):
        assert v.flags.writeable, "an output must be the caller's writable array"
        v[...] = 99 if v.dtype.kind != "b" else True
    elif isinstance(v, list):
        for x in v:
            _scribble(x)
    elif isinstance(v, dict):
        for x in v.values():
            _scribble(x)


def _arrays(v) -> list:
    if isinstance(v, np.ndarray):
        return [v]
    if isinstance(v, list):
        return [a for x in v for a in _arrays(x)]
    if isinstance(v, dict):
        return [a for x in v.values() for a in _arrays(x)]
    return []


def _copy(v):
    if isinstance(v, list):
        return [_copy(x) for x in v]
    if isinstance(v, dict):
        return {k: _copy(x) for k, x in v.items()}
    return np.array(v, copy=True) if isinstance(v, np.ndarray) else v


def _equal(a, b) -> bool:
    if isinstance(a, np.ndarray):
        if not (isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape):
            return False
        return a.tolist() == b.tolist() if a.dtype.kind in "OSU" else a.tobytes() == b.tobytes()  # NaN bits too
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return a == b


def check_writes_do_not_reach_later_runs(sess, feeds: list, runs: int = RUNS, where: str = "") -> list:
    """Run ``sess`` ``runs`` times cycling through ``feeds``; after each run overwrite every output.
    Each run must return what the first run with that feed returned, and no output may share memory
    with another output, a feed, or an output of an earlier run.  Returns the first results."""
    first: dict = {}
    earlier: list = []
    for k in range(runs):
        i = k % len(feeds)
        feed = feeds[i]
        kept = {n: v.copy() for n, v in feed.items()}
        got = sess.run(None, feed)
        if i not in first:
            first[i] = _copy(got)
        else:
            for n, (a, b) in enumerate(zip(first[i], got)):
                assert _equal(a, b), f"{where}: run {k}, output {n}: {b!r}, the first run gave {a!r}"
        arrays = [a for v in got for a in _arrays(v)]
        for j, a in enumerate(arrays):
            others = arrays[j + 1:] + list(feed.values()) + earlier
            assert not any(np.shares_memory(a, b) for b in others), f"{where}: run {k}: output array {j} aliases"
        _scribble(got)
        assert all(np.array_equal(feed[n], kept[n]) for n in feed), f"{where}: a feed changed"
        earlier += arrays
    return [first[i] for i in sorted(first)]


def _oracle(proto: bytes, feed: dict) -> list:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(proto, so, providers=["CPUExecutionProvider"]).run(None, feed)


def _feeds(inputs) -> list:
    """Two feeds of two shapes (a second signature: a second specialized plan) for the X input;
    the overridable W is not fed (its default is used), except by ``_override_feeds``."""
    return [{"X": np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)},
            {"X": np.linspace(-2, 3, 15, dtype=np.float32).reshape(5, 3)}]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_writing_into_an_output_never_changes_a_later_run(name, backend):
    nodes, inputs, outputs, inits, ir_version = CASES[name]
    proto = model(nodes, inputs, outputs, inits, opset=17, ir_version=ir_version).SerializeToString()
    feeds = _feeds(inputs)
    expected = [_oracle(proto, f) for f in feeds]
    for label, level, disabled in LEVELS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # missing shapes of Shape outputs etc. are not this test's subject
            sess = InferenceSession(proto, options(level, disabled), backend=backend)
        where = f"{name} / {backend} / {label}"
        first = check_writes_do_not_reach_later_runs(sess, feeds, runs=2 * RUNS, where=where)
        for got, want in zip(first, expected):
            assert len(got) == len(want)
            for a, b in zip(got, want):
                assert a.dtype == b.dtype and np.array_equal(a, b), f"{where}: {a!r} where onnxruntime gives {b!r}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_ort_value_outputs_are_the_callers_own(name, backend):
    """``run_with_ort_values``: each output OrtValue's tensor (on the gpu backend the device
    tensor itself, which ``to_torch()`` shares) may be overwritten without reaching a later run."""
    from onnxkit import OrtValue

    nodes, inputs, outputs, inits, ir_version = CASES[name]
    proto = model(nodes, inputs, outputs, inits, opset=17, ir_version=ir_version).SerializeToString()
    feed = _feeds(inputs)[0]
    for label, level, disabled in (LEVELS[0], LEVELS[3]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sess = InferenceSession(proto, options(level, disabled), backend=backend)
        fed = {n: OrtValue.ortvalue_from_numpy(v.copy()) for n, v in feed.items()}
        first = None
        for run in range(3):
            got = [v.numpy().copy() for v in sess.run_with_ort_values(None, fed)] if run else None
            outs = sess.run_with_ort_values(None, fed)
            values = [v.numpy().copy() for v in outs]
            if first is None:
                first = values
            assert all(_equal(a, b) for a, b in zip(first, values)), f"{name} / {backend} / {label}: run {run}"
            assert got is None or all(_equal(a, b) for a, b in zip(first, got))
            for v in outs:
                v.to_torch().fill_(99)
        assert all(np.array_equal(fed[n].numpy(), feed[n]) for n in feed), f"{name} / {backend} / {label}: a feed changed"


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_overridden_default_is_not_kept_either(backend):
    nodes, inputs, outputs, inits, ir_version = CASES["overridable_default"]
    proto = model(nodes, inputs, outputs, inits).SerializeToString()
    w = np.full((2, 3), 4.0, np.float32)
    feeds = [{"X": np.ones((2, 2), np.float32), "W": w}, {"X": np.ones((2, 2), np.float32)}]
    for label, level, disabled in LEVELS:
        sess = InferenceSession(proto, options(level, disabled), backend=backend)
        first = check_writes_do_not_reach_later_runs(sess, feeds, runs=6, where=f"{backend}/{label}")
        assert np.array_equal(first[0][0], w) and np.array_equal(first[1][0], W_VALUE)


# -- the real-world corpus -------------------------------------------------------------------------

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
#: the corpus models onnxkit runs (expected "match"); the unsupported ones are refused at creation
CORPUS_MODELS = [name for name, outcome in tomllib.loads((CORPUS / "expected.toml").read_text())["models"].items()
                 if outcome == "match"]


@pytest.fixture(scope="module")
def corpus():
    if str(CORPUS) not in sys.path:
        sys.path.insert(0, str(CORPUS))
    from corpus_cache import ensure_corpus, load_inputs

    folder, _ = ensure_corpus(log=lambda line: print(line, file=sys.stderr))  # built once, shared with test_corpus
    return folder, load_inputs


@pytest.mark.parametrize("name", CORPUS_MODELS)
def test_corpus_model_outputs_written_into_never_reach_a_later_run(corpus, name):
    """Every output of every corpus model onnxkit runs, overwritten after each of three runs, at
    every level (the specialized plans included: the recording run, then the specialized one)."""
    folder, load_inputs = corpus
    feed = load_inputs(folder, name)
    results = []
    for label, level, disabled in LEVELS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sess = InferenceSession(str(folder / f"{name}.onnx"), options(level, disabled))
        results.append(check_writes_do_not_reach_later_runs(sess, [feed], runs=3, where=f"{name} / {label}")[0])
    assert len(results) == len(LEVELS) and all(len(r) == len(results[0]) for r in results)


# -- seeded random chains from constants to outputs -------------------------------------------------

#: one-input operators that return their input's values or shape-derived ones (the ways a kept value
#: reaches an output unchanged or is folded), as (op_type, attributes, extra constant inputs)
_UNARY = [
    ("Identity", {}, ()), ("Cast", {"to": TP.FLOAT}, ()), ("Flatten", {"axis": 0}, ()),
    ("Reshape", {}, (np.array([-1], np.int64),)), ("Unsqueeze", {}, (np.array([0], np.int64),)),
    ("Squeeze", {}, ()), ("Transpose", {}, ()), ("Expand", {}, (np.array([1], np.int64),)),
    ("Shape", {}, ()), ("Size", {}, ()), ("Relu", {}, ()), ("Neg", {}, ()),
]


def _random_model(rng) -> tuple:
    """A small model whose outputs are chains of :data:`_UNARY` operators starting from an
    initializer, a Constant node, Shape(X) or X, several intermediate values made outputs too."""
    inits, nodes, outputs = [], [], []
    typed = {}  # value name -> True if float (else int64)
    roots = []
    for k in range(int(rng.integers(1, 4))):
        kind = rng.choice(["init", "constant", "shape", "input"])
        name = f"r{k}"
        value = (rng.standard_normal(tuple(int(d) for d in rng.integers(1, 4, int(rng.integers(0, 3)))))
                 .astype(np.float32))
        if kind == "init":
            inits.append(init(name, value))
        elif kind == "constant":
            nodes.append(_c(name, value))
        elif kind == "shape":
            nodes.append(node("Shape", ["X"], [name]))
        else:
            nodes.append(node("Identity", ["X"], [name]))
        typed[name] = kind != "shape"
        roots.append(name)
    count = 0
    for root in roots:
        cur = root
        for _ in range(int(rng.integers(1, 5))):
            op, attrs, extra = _UNARY[int(rng.integers(len(_UNARY)))]
            if op in ("Relu", "Neg") and not typed[cur]:
                op, attrs, extra = "Cast", {"to": TP.FLOAT}, ()
            out = f"v{count}"
            count += 1
            names = [cur]
            for j, e in enumerate(extra):
                inits.append(init(f"{out}_c{j}", e))
                names.append(f"{out}_c{j}")
            nodes.append(node(op, names, [out], **attrs))
            typed[out] = op not in ("Shape", "Size") and (typed[cur] or op == "Cast")
            if rng.random() < 0.4:
                outputs.append(out)
            cur = out
        if cur not in outputs:
            outputs.append(cur)
        if rng.random() < 0.3 and root not in outputs:
            outputs.append(root)  # an initializer, a Constant's output or a Shape as an output itself
    outs = [vi(n, TP.FLOAT if typed[n] else I64, None) for n in outputs]
    return model(nodes, [X], outs, inits, opset=13).SerializeToString()


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_constant_chains(backend):
    rng = np.random.default_rng(29)
    tried = 0
    for case in range(24):
        proto = _random_model(rng)
        feeds = _feeds(None)
        expected = [_oracle(proto, f) for f in feeds]
        for label, level, disabled in LEVELS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sess = InferenceSession(proto, options(level, disabled), backend=backend)
            where = f"random model {case} / {backend} / {label}"
            first = check_writes_do_not_reach_later_runs(sess, feeds, runs=6, where=where)
            for got, want in zip(first, expected):
                for a, b in zip(got, want):
                    assert a.dtype == b.dtype and np.array_equal(a, b), f"{where}: {a!r} vs onnxruntime {b!r}"
            tried += 1
    assert tried == 24 * len(LEVELS)
