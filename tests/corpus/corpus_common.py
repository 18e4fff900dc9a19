"""What every corpus source shares: the entry record, seeded inputs, and writing a model's files.

A *source* module (``corpus_wheels``, ``corpus_torch``, ``corpus_hf``, ``corpus_ml``,
``corpus_authored``) has ``build(out: Path) -> list[Entry]``: it writes each model as
``out/<name>.onnx`` and returns one :class:`Entry` per model, carrying the fixed input set the
test feeds to onnxkit and onnxruntime alike.  Every random draw is seeded by the model's name
(:func:`rng_for`), so two builds give the same inputs.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Entry:
    """One corpus model.

    ``name`` is unique over the corpus and names ``<name>.onnx`` in the cache; ``producer`` is
    the tool that wrote the file (with the package that shipped it, for wheel models) and
    ``producer_version`` that tool's version; ``inputs`` maps every graph input that is fed to
    its value (numpy arrays, never views).
    """

    name: str
    producer: str
    producer_version: str
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    note: str = ""


def rng_for(name: str) -> np.random.Generator:
    """A numpy generator seeded by the model's name (stable across runs and machines)."""
    return np.random.default_rng(zlib.crc32(name.encode()))


def seed_torch(name: str) -> None:
    """Seed torch's global generator by the model's name (weights built from a config)."""
    import torch

    torch.manual_seed(zlib.crc32(name.encode()))


def normal(rng: np.random.Generator, shape, dtype=np.float32) -> np.ndarray:
    """Standard-normal values of ``shape``, cast to ``dtype``."""
    return rng.standard_normal(shape).astype(dtype)


def uniform(rng: np.random.Generator, shape, dtype=np.float32) -> np.ndarray:
    """Values uniform in [0, 1) of ``shape``, cast to ``dtype`` (images)."""
    return rng.random(shape).astype(dtype)


def integers(rng: np.random.Generator, high: int, shape, dtype=np.int64) -> np.ndarray:
    """Integers uniform in [0, high) of ``shape`` (token ids, byte values)."""
    return rng.integers(0, high, shape).astype(dtype)
