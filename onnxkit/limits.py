"""Documented resource limits (Clause 12.5, 15.4).

One :class:`Limits` object carries every limit onnxkit enforces; the defaults are
:data:`DEFAULT_LIMITS` and docs/decisions.md lists them.  Exceeding a limit raises
:class:`onnxkit.errors.LimitExceeded` naming the limit, never a MemoryError or a hang.
"""

from __future__ import annotations

import os

from onnxkit import records
from onnxkit import record_methods

from .errors import LimitExceeded

GiB = 1 << 30
MiB = 1 << 20


def physical_memory() -> int:
    """The machine's physical memory in octets (16 GiB when the system does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):  # pragma: no cover - non-POSIX
        return 16 * GiB


@records.frozen
class Limits:
    #: Largest encoded model, and largest single embedded message, in octets (12.5).
    max_message_bytes: int = 2 * GiB
    #: Deepest nesting of embedded messages the decoder follows (12.5, 15.4).
    max_nesting_depth: int = 100
    #: Largest tensor a declared shape may describe, in octets (15.4).
    max_tensor_bytes: int = 16 * GiB
    #: Largest extent of one dimension (15.4).
    max_dim_extent: int = 1 << 40
    #: Deepest nesting of subgraphs (15.4).
    max_subgraph_depth: int = 32
    #: Most iterations one Loop node may run (15.4).
    max_loop_iterations: int = 10_000_000
    #: Largest external data file (15.4).
    max_external_file_bytes: int = 1 << 40
    # -- counts: what a small input may make the decoder, checker and planner build (12.5, 15.4) --
    #: Most messages of every kind one decoded input may hold (each becomes an object).
    max_messages: int = 8_000_000
    #: Most NodeProto messages one input may hold, all graphs and functions together.
    max_nodes: int = 1_000_000
    #: Most TensorProto messages one input may hold (initializers, attribute tensors, ...).
    max_tensors: int = 1_000_000
    #: Deepest chain of model-local function calls (a function calling a function, ...) (8.4, 15.4).
    max_function_depth: int = 32
    #: Most calls of model-local functions one model expands, every nesting level counted: a
    #: chain in which each function calls the next twice doubles per level (8.4, 15.4).
    max_function_calls: int = 100_000

    # -- computed values (evaluation; see onnxkit.runtime.budget) ---------------------------
    #: Most bytes the size-checked values of one run hold at once (default: 3/4 of physical memory).
    max_run_bytes: int = records.field(factory=lambda: physical_memory() * 3 // 4)
    #: Largest single computed value, in octets, refused before it is allocated (default: half
    #: of physical memory, never more than ``max_tensor_bytes`` nor ``max_run_bytes``).
    max_value_bytes: int = records.field(default=records.Factory(
        lambda self: min(physical_memory() // 2, self.max_tensor_bytes, self.max_run_bytes), takes_self=True))
    #: Most elements of one computed sequence (a list of values costs ~100 octets per element).
    max_sequence_length: int = 1 << 24
    #: Longest single computed string element, in octets.
    max_string_bytes: int = 256 * MiB
    __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH

    def check(self, name: str, value: int, where: str = "") -> None:
        """Raise :class:`LimitExceeded` if ``value`` exceeds the limit ``name``."""
        maximum = getattr(self, name)
        if value > maximum:
            at = f" at {where}" if where else ""
            raise LimitExceeded(f"{name} exceeded{at}: {value} > {maximum} (Clause 15.4; see onnxkit.limits)",
                                limit=name, value=value, maximum=maximum, path=where)


DEFAULT_LIMITS = Limits()
