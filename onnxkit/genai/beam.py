"""Beam search, as onnxruntime-genai's CPU beam search and its beam scorer choose.

Contract (``num_beams`` n > 1, rows ``batch * n``, row ``b * n + j`` beam j of batch b):

* Scores start at 0 for each batch's first beam and -1e9 for the others (so the first step,
  whose rows are copies of one prompt, picks from one beam).
* A step: each row's logits (after the penalties) become log-softmax plus the beam's score;
  per batch the ``2n`` best (beam, token) pairs of the ``n * vocab`` candidates, best first.
  Walking them: an end-of-sequence token among the first n candidates closes a hypothesis (the
  beam's sequence, scored ``score / length ** length_penalty``; a batch keeps its n best);
  other tokens extend the next beams until n are chosen.  A batch with n hypotheses is done
  (``early_stopping``), or without it once its best candidate cannot beat its worst
  hypothesis; a done batch's rows take ``pad_token_id`` (beam index 0, as genai does).
* The sequences are the chosen beams' sequences plus the chosen tokens; ``finalize`` adds
  every open beam (its score) to its batch's hypotheses, and sequence ``i`` is hypothesis
  ``i % num_return_sequences`` of batch ``i // num_return_sequences``.
"""

from __future__ import annotations

import numpy as np


class Hypotheses:
    """The n best finished sequences of one batch, best first."""

    def __init__(self, n: int, length_penalty: float):
        self.n, self.length_penalty = n, np.float32(length_penalty)
        self.items: list = []  # (score, sequence)
        self.done = False

    def add(self, sequence: np.ndarray, sum_logprobs) -> None:
        score = np.float32(sum_logprobs) / np.power(np.float32(len(sequence)), self.length_penalty, dtype=np.float32)
        if len(self.items) == self.n and score <= self.items[-1][0]:
            return
        if len(self.items) == self.n:
            self.items.pop()
        at = len(self.items)
        while at > 0 and score > self.items[at - 1][0]:
            at -= 1
        self.items.insert(at, (score, sequence.copy()))

    def can_improve(self, best_sum_logprobs, length: int) -> bool:
        current = np.float32(best_sum_logprobs) / np.power(np.float32(length), self.length_penalty, dtype=np.float32)
        return self.items[-1][0] < current


class BeamScorer:
    """The beams of ``batch`` batches of ``n`` (see the module's contract)."""

    def __init__(self, batch: int, n: int, search: dict, eos: tuple, pad: int):
        self.batch, self.n, self.eos, self.pad = batch, n, eos, pad
        self.early_stopping = bool(search["early_stopping"])
        self.hyps = [Hypotheses(n, search["length_penalty"]) for _ in range(batch)]
        self.scores = np.zeros(batch * n, np.float32)
        self.scores.reshape(batch, n)[:, 1:] = np.float32(-1e9)
        self.tokens = np.zeros(batch * n, np.int32)
        self.indices = np.zeros(batch * n, np.int32)
        self.not_done = batch
        self.finalized = False

    def is_done(self) -> bool:
        return self.not_done == 0

    def step(self, logits: np.ndarray, sequences: np.ndarray, length: int) -> None:
        """Choose the next beams from ``logits`` ``(batch * n, vocab)`` (penalties applied) and
        the ``sequences`` ``(batch * n, max_length)`` of ``length`` tokens."""
        n, vocab = self.n, logits.shape[1]
        scores = logits.astype(np.float32)
        scores = scores - scores.max(axis=1, keepdims=True)
        scores = scores - np.log(np.exp(scores).sum(axis=1, keepdims=True, dtype=np.float32))
        scores = scores + self.scores[:, None]
        k = 2 * n
        next_scores = np.zeros(self.batch * k, np.float32)
        next_tokens = np.zeros(self.batch * k, np.int32)
        next_indices = np.zeros(self.batch * k, np.int32)
        for b in range(self.batch):
            flat = scores[b * n:(b + 1) * n].reshape(-1)
            top = np.argsort(-flat, kind="stable")[:k]
            next_scores[b * k:(b + 1) * k] = flat[top]
            next_tokens[b * k:(b + 1) * k] = top % vocab
            next_indices[b * k:(b + 1) * k] = top // vocab
        self._process(sequences, length, next_scores, next_tokens, next_indices)

    def _process(self, sequences, length, next_scores, next_tokens, next_indices) -> None:
        n, k = self.n, 2 * self.n
        for b, hyp in enumerate(self.hyps):
            rows = slice(b * n, (b + 1) * n)
            if hyp.done:
                self.scores[rows], self.tokens[rows], self.indices[rows] = 0.0, self.pad, 0
                continue
            chosen = 0
            for j in range(k):
                token, score = int(next_tokens[b * k + j]), next_scores[b * k + j]
                row = b * n + int(next_indices[b * k + j])
                if token in self.eos:
                    if j < n:
                        hyp.add(sequences[row, :length], score)
                else:
                    at = b * n + chosen
                    self.scores[at], self.tokens[at], self.indices[at] = score, token, row
                    chosen += 1
                if chosen == n:
                    break
            if len(hyp.items) < n:
                continue
            if not self.early_stopping:
                window = next_scores[b * n:b * n + k]  # genai reads the candidates from b * n
                if hyp.can_improve(window.max(), length):
                    continue
            hyp.done = True
            self.not_done -= 1

    def finalize(self, sequences: np.ndarray, length: int) -> None:
        if self.finalized:
            return
        for b, hyp in enumerate(self.hyps):
            if hyp.done:
                continue
            for j in range(self.n):
                hyp.add(sequences[b * self.n + j, :length], self.scores[b * self.n + j])
        self.finalized = True

    def sequence(self, index: int, num_return_sequences: int) -> np.ndarray:
        batch, beam = divmod(index, num_return_sequences)
        return self.hyps[batch].items[beam][1]
