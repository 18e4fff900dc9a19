"""Growth tests (issue #18): doubling a hostile input about doubles the cost.

Each pattern is measured at size n and 2n: time as the best of a few runs, in CPU seconds of this
process (so another process taking the core does not count) and, for the decoder, peak traced memory.  A linear cost
gives a ratio near 2, a quadratic one near 4; the bound is 3, with sizes chosen so one run
takes tens of milliseconds.  No absolute time is asserted (those are benchmarks' business).
"""

from __future__ import annotations

import gc
import time
import tracemalloc

import pytest

import hostile
from onnxkit.checker import check_model
from onnxkit.limits import Limits
from onnxkit.registry import get_registry
from onnxkit.runtime.plan import Planner
from onnxkit.wire import decode_message

BOUND = 3.0
#: Every count limit out of the way: growth, not refusal, is measured here.
OPEN = Limits(max_nodes=10 ** 8, max_tensors=10 ** 8, max_messages=10 ** 9, max_function_depth=10 ** 6)


def best_time(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return min(times)


def peak_bytes(fn) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def time_ratio(make, n: int, run) -> float:
    small, large = make(n), make(2 * n)
    run(small)  # warm caches (registry, plans)
    for _ in range(3):  # another try absorbs a burst of load on a shared machine
        ratio = best_time(lambda: run(large)) / best_time(lambda: run(small))
        if ratio < BOUND:
            break
    return ratio


DECODER_PATTERNS = {
    # name: (builder of octets from n, message, n for time, n for memory: traced runs are slow)
    "nested-repeated-type": (lambda n: hostile.nested_repeated_type(45, n), "TypeProto", 100, 20),
    "repeated-graph": (hostile.repeated_graph, "ModelProto", 4_000, 500),
    "empty-nodes": (hostile.empty_nodes, "ModelProto", 8_000, 1_000),
    "empty-initializers": (hostile.empty_initializers, "ModelProto", 4_000, 500),
}
# (pytest -s prints the ratio each test measured)


@pytest.mark.parametrize("name", sorted(DECODER_PATTERNS))
def test_decoder_time_grows_linearly(name):
    make, message, n, _ = DECODER_PATTERNS[name]
    ratio = time_ratio(make, n, lambda data: decode_message(data, message, OPEN))
    print(f"decoder time {name}: x{ratio:.2f}")
    assert ratio < BOUND, f"{name}: doubling the input multiplied decoding time by {ratio:.2f}"


@pytest.mark.parametrize("name", sorted(DECODER_PATTERNS))
def test_decoder_memory_grows_linearly(name):
    make, message, _, n = DECODER_PATTERNS[name]
    small, large = make(n), make(2 * n)
    ratio = peak_bytes(lambda: decode_message(large, message, OPEN)) / peak_bytes(lambda: decode_message(small, message, OPEN))
    print(f"decoder memory {name}: x{ratio:.2f}")
    assert ratio < BOUND, f"{name}: doubling the input multiplied peak decoding memory by {ratio:.2f}"


def test_nested_merge_is_linear_in_octets():
    # 12.3.2 merges: every occurrence decoded once - the octets read are a small multiple of the input
    data = hostile.nested_repeated_type(45, 200)
    t = best_time(lambda: decode_message(data, "TypeProto"))
    per_octet = t / len(data)
    assert per_octet < 20e-6, f"{per_octet * 1e9:.0f} ns per octet: merging re-reads earlier copies"


def test_function_chain_check_grows_linearly():
    ratio = time_ratio(hostile.function_chain, 150, lambda m: check_model(m, limits=OPEN))
    print(f"function chain check: x{ratio:.2f}")
    assert ratio < BOUND, f"checking a chain of functions: doubling it multiplied the time by {ratio:.2f}"


def test_checker_grows_linearly_in_nodes():
    ratio = time_ratio(hostile.relu_chain, 1_000, lambda m: check_model(m))
    print(f"checker node chain: x{ratio:.2f}")
    assert ratio < BOUND, f"checking a node chain: doubling it multiplied the time by {ratio:.2f}"


def test_planner_grows_linearly_in_nodes():
    registry = get_registry()
    ratio = time_ratio(hostile.relu_chain, 2_000, lambda m: Planner(m, registry, "cpu").compile_model())
    print(f"planner node chain: x{ratio:.2f}")
    assert ratio < BOUND, f"planning a node chain: doubling it multiplied the time by {ratio:.2f}"
