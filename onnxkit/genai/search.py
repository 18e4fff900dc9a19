"""Choosing the next token from a row of logits, by onnxruntime-genai's search options.

Contract (onnxruntime-genai's greedy CPU search and its sampling-method choice):

* :func:`method`: greedy (beam search with ``num_beams`` > 1, :mod:`onnxkit.genai.beam`) when
  ``do_sample`` is false, ``top_k`` is 1 or ``temperature`` is 0; otherwise top-k then top-p when
  ``0 < top_p < 1`` and ``top_k > 1``, top-k when ``top_k > 1``, top-p otherwise.  Refused:
  ``num_beams`` outside [1, 32], ``num_return_sequences`` outside [1, num_beams]; sampling with
  ``num_beams != 1``, ``top_p`` outside [0, 1], a negative ``top_k`` or one above the vocabulary.
* :func:`penalize` changes the row in place before the choice, in genai's order: while the
  sequence is shorter than ``min_length`` every end-of-sequence token gets the lowest float;
  ``repetition_penalty`` p divides the logit of each distinct token of the sequence by p (a
  negative one is multiplied by p); ``no_repeat_ngram_size`` n gives the lowest float to each
  token that would repeat an n-gram of the sequence.
* :func:`choose`: greedy is the first index of the largest logit; sampling draws from the
  softmax of ``logits / temperature`` over the top ``top_k`` tokens and/or the smallest set of
  most likely tokens whose probability reaches ``top_p``, with the generator's
  :class:`numpy.random.Generator` (``random_seed`` seeds it; -1 a random seed).  genai's own
  random stream is not reproduced: a seed gives the same tokens run to run on onnxkit, not the
  tokens onnxruntime-genai draws with that seed.
"""

from __future__ import annotations

import numpy as np

from .errors import GenaiError, not_supported

GREEDY, TOP_K, TOP_P, TOP_K_TOP_P, BEAM = "greedy", "top_k", "top_p", "top_k_top_p", "beam"
LOWEST = np.finfo(np.float32).min


def method(search: dict, vocab_size: int) -> str:
    """The sampling method ``search`` selects (see the module's contract)."""
    beams = search["num_beams"]
    if not 1 <= beams <= 32:
        raise GenaiError(f"num_beams ({beams}) must be in [1, 32]")
    if not 1 <= search["num_return_sequences"] <= beams:
        raise GenaiError(f"num_return_sequences ({search['num_return_sequences']}) must be in [1, {beams}]")
    if not search["do_sample"] or search["top_k"] == 1 or search["temperature"] == 0:
        return BEAM if beams > 1 else GREEDY
    if beams != 1:
        raise GenaiError("TopK and TopP cannot be used with a beam search")
    top_k, top_p = search["top_k"], search["top_p"]
    if top_p < 0.0 or top_p > 1.0:
        raise GenaiError("top_p must be between 0.0 and 1.0")
    if top_k < 0:
        raise GenaiError("top_k must be 0 or greater")
    if top_k > vocab_size:
        raise GenaiError(f"top_k ({top_k}) must be less than or equal to vocab_size ({vocab_size})")
    if 0.0 < top_p < 1.0 and top_k > 1:
        return TOP_K_TOP_P
    return TOP_K if top_k > 1 else TOP_P


def penalize(row: np.ndarray, sequence: np.ndarray, search: dict, eos: tuple) -> None:
    """Apply min_length, repetition_penalty and no_repeat_ngram_size to ``row`` (in place)."""
    vocab = row.shape[0]
    if len(sequence) < search["min_length"]:
        for e in eos:
            if 0 <= e < vocab:
                row[e] = LOWEST
    penalty = np.float32(search["repetition_penalty"])
    if penalty != 1.0 and len(sequence):
        seen = np.unique(sequence[(sequence >= 0) & (sequence < vocab)])
        scores = row[seen]
        row[seen] = np.where(scores < 0, scores * penalty, scores / penalty)
    n = search["no_repeat_ngram_size"]
    if n > 0 and len(sequence) >= n:
        prefix = list(sequence[len(sequence) - n + 1:]) if n > 1 else []
        for start in range(len(sequence) - n + 1):
            if list(sequence[start:start + n - 1]) == prefix:
                banned = int(sequence[start + n - 1])
                if 0 <= banned < vocab:
                    row[banned] = LOWEST


def _sample(row: np.ndarray, top_k: int, top_p: float, temperature: float, rng: np.random.Generator) -> int:
    order = np.argsort(-row, kind="stable")
    if top_k > 0:
        order = order[:top_k]
    scores = row[order].astype(np.float64) / temperature
    probs = np.exp(scores - scores.max())
    probs /= probs.sum()
    if 0.0 < top_p < 1.0:
        keep = int(np.searchsorted(np.cumsum(probs), top_p) + 1)
        order, probs = order[:keep], probs[:keep] / probs[:keep].sum()
    elif top_p == 0.0 and top_k == 0:
        order, probs = order[:1], np.ones(1)
    return int(order[rng.choice(len(order), p=probs)])


def choose(row: np.ndarray, kind: str, search: dict, rng: np.random.Generator) -> int:
    """The next token of one row by ``kind`` (:func:`method`)."""
    if kind == GREEDY:
        return int(np.argmax(row))
    if kind == TOP_K:
        return _sample(row, search["top_k"], 1.0, search["temperature"], rng)
    if kind == TOP_P:
        return _sample(row, 0, search["top_p"], search["temperature"], rng)
    return _sample(row, search["top_k"], search["top_p"], search["temperature"], rng)
