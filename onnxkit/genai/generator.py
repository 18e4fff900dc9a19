"""``og.Model``, ``og.GeneratorParams`` and ``og.Generator`` on an onnxkit session.

Contract (onnxruntime-genai's Generator and greedy search, a batch of rows; beam search's
choices are :mod:`onnxkit.genai.beam`'s, its rows each batch's beams, its sequences the
scorer's hypotheses, and it neither rewinds nor appends twice):

* ``append_tokens(tokens)`` appends ``tokens`` (flat, or ``(batch_size, n)``; a ``Tensor`` too)
  to every row and runs the decoder on them (in ``chunk_size`` pieces on the first run when
  ``chunk_size`` is set); refused when empty, when the sequence would pass ``max_length``, or a
  second time with ``batch_size > 1``.
* ``generate_next_token()`` runs the decoder on the last chosen tokens if their logits are not
  computed yet, applies the penalties and chooses (:mod:`onnxkit.genai.search`).  A row that
  chose an end-of-sequence token takes ``pad_token_id`` from then on; the token is appended to
  the rows unless that choice finished every row.  ``is_done()`` is true once every row chose an
  end-of-sequence token or the sequence is ``max_length`` long (and never while logits computed
  by ``append_tokens`` wait to be used).
* ``rewind_to(k)`` shortens the sequence to ``k`` tokens (batch 1, or ``k`` 0); the next
  ``generate_next_token`` feeds the token that was at position ``k`` again, as genai does.
* ``get_output(name)`` / ``get_input(name)``: the decoder's last output / input of that name.
"""

from __future__ import annotations

import numpy as np

from .config import Config, Settings, search_value, settings
from .errors import GenaiError, not_supported
from .beam import BeamScorer
from .search import BEAM, choose, method, penalize
from .state import DecoderState, open_session


class Model:
    """onnxruntime-genai's ``Model(config_or_folder)``: the decoder of a model folder (its
    ``genai_config.json``) opened as an onnxkit session."""

    def __init__(self, config):
        self._config = config if isinstance(config, Config) else Config(config)
        self._settings: Settings = settings(self._config)
        self._session = open_session(self._settings)

    @property
    def type(self) -> str:
        return self._settings.type

    @property
    def device_type(self) -> str:
        return "CPU"

    def create_multimodal_processor(self):
        raise not_supported("Model.create_multimodal_processor (multimodal models)")

    def create_streaming_processor(self):
        raise not_supported("Model.create_streaming_processor (speech models)")


class GeneratorParams:
    """onnxruntime-genai's ``GeneratorParams(model)``: the search options a generator starts from,
    the model's ``search`` section changed by ``set_search_options(**options)``."""

    def __init__(self, model: Model):
        if not isinstance(model, Model):
            raise GenaiError(f"GeneratorParams: expected an og.Model, got {type(model).__name__}")
        self.model = model
        self.search = dict(model._settings.search)

    def set_search_options(self, **options) -> None:
        for name, value in options.items():
            self.search[name] = search_value(name, value)
        if "max_length" in options and not self.search["max_length"]:
            self.search["max_length"] = self.model._settings.context_length

    def get_search_options(self) -> dict:
        return {n: (v if isinstance(v, bool) else float(v)) for n, v in sorted(self.search.items())
                if n != "blank_penalty"}

    def set_guidance(self, *args, **kwargs):
        raise not_supported("GeneratorParams.set_guidance (constrained decoding)")

    def set_speculative_options(self, *args, **kwargs):
        raise not_supported("GeneratorParams.set_speculative_options (speculative decoding)")

    def get_speculative_options(self, *args, **kwargs):
        raise not_supported("GeneratorParams.get_speculative_options (speculative decoding)")


def _tokens(value) -> np.ndarray:
    from .tensors import Tensor

    if isinstance(value, Tensor):
        value = value.as_numpy()
    array = np.asarray(value)
    if array.dtype.kind not in "iu" and array.size:
        raise GenaiError(f"append_tokens: token ids must be integers, got {array.dtype}")
    return array.astype(np.int32)


class Generator:
    """onnxruntime-genai's ``Generator(model, params)`` (see the module's contract)."""

    def __init__(self, model: Model, params: GeneratorParams):
        if not isinstance(model, Model) or not isinstance(params, GeneratorParams):
            raise GenaiError("Generator(model, params): expected an og.Model and an og.GeneratorParams")
        s = model._settings
        search = dict(params.search)
        self.model, self.s, self.search = model, s, search
        self.batch, self.max_length = search["batch_size"], search["max_length"]
        if self.max_length == 0:
            raise GenaiError("search max_length is 0")
        if self.max_length > s.context_length or self.max_length < 0:
            raise GenaiError(f"max_length ({self.max_length}) cannot be greater than model context_length "
                             f"({s.context_length})" if self.max_length > 0 else f"max_length {self.max_length} < 0")
        if not 1 <= self.batch <= 32:
            raise GenaiError(f"batch_size ({self.batch}) must be in [1, 32]")
        vocab = s.vocab_size or None
        for e in s.eos_token_id:
            if vocab and not 0 <= e < vocab:
                raise GenaiError(f"eos_token_id ({e}) must be in range [0, {vocab}) (vocab_size)")
        self.kind = method(search, vocab or 1 << 31)
        seed = search["random_seed"]
        self.rng = np.random.default_rng(None if seed == -1 else seed)
        self.beams = search["num_beams"]
        self.rows = self.batch * self.beams
        self.scorer = BeamScorer(self.batch, self.beams, search, s.eos_token_id, s.pad_token_id) \
            if self.kind == BEAM else None
        share = bool(search["past_present_share_buffer"]) and self.beams == 1  # genai: one beam only
        self.state = DecoderState(model._session, s, self.batch, self.max_length, share, self.beams)
        cold = getattr(model._session, "_cold", None)
        if cold is not None:  # the first-run policy: about one run a token follows (its forecast, FirstRun.expect)
            cold.expect(self.max_length)
        self.sequences = np.zeros((self.rows, self.max_length), np.int32)
        self.length = 0
        self.next_tokens = np.zeros(self.rows, np.int32)
        self._reset_done()
        self.logits = None
        self.computed = False
        self.rewound = False

    # -- search bookkeeping (genai's GreedySearch_Cpu) --
    def _reset_done(self) -> None:
        self.done = False
        self.eos_seen = np.zeros(self.batch, bool)
        self.not_done = self.batch

    def _set_next(self, row: int, token: int) -> None:
        self.next_tokens[row] = token
        if token in self.s.eos_token_id and not self.eos_seen[row]:
            self.eos_seen[row] = True
            self.not_done -= 1
            if self.not_done == 0:
                self.done = True

    def _append_next(self) -> None:
        self.sequences[:, self.length] = self.next_tokens
        self.length += 1
        if self.length == self.max_length:
            self.done = True

    def _search_append(self, tokens: np.ndarray) -> None:
        if self.scorer is not None:  # the prompt copied to every beam
            n = tokens.shape[1]
            self.sequences[:, self.length:self.length + n] = np.repeat(tokens, self.beams, axis=0)
            self.length += n
            self.done = False
            return
        for j in range(tokens.shape[1]):
            for row in range(self.batch):
                self._set_next(row, int(tokens[row, j]))
            self._append_next()
        self._reset_done()

    def _compute(self, tokens: np.ndarray, first: bool) -> None:
        chunk = self.search["chunk_size"]
        n = tokens.shape[1]
        if first and chunk and chunk > 0 and n > chunk:
            start = self.length - n
            for i in range(0, n, chunk):
                piece = tokens[:, i:i + chunk]
                if i and self.beams > 1:  # the first piece's run spread the rows over the beams
                    piece = np.repeat(piece, self.beams, axis=0)
                self.logits = self.state.run(piece, start + i + piece.shape[1])
        else:
            self.logits = self.state.run(tokens, self.length)
        self.computed = True

    # -- the API --
    def append_tokens(self, tokens) -> None:
        ids = _tokens(tokens)
        if ids.size == 0:
            raise GenaiError("input_ids is empty")
        if ids.size % self.batch:
            raise GenaiError(f"append_tokens: {ids.size} token ids do not split into batch_size={self.batch} rows")
        ids = ids.reshape(self.batch, -1)
        if ids.shape[1] + self.length > self.max_length:
            raise GenaiError(f"input_ids size ({ids.size}) + current sequence length ({self.length}) exceeds max "
                             f"length ({self.max_length})")
        if self.length and self.batch > 1:
            raise GenaiError("AppendTokens can only be called once for batch_size > 1. To call AppendTokens again, "
                             "use RewindToLength(0)")
        if self.length and self.scorer is not None:
            raise not_supported("append_tokens a second time with beam search (continuous decoding of beams)")
        first = self.state.mask is None
        self._search_append(ids)
        self.computed = False
        self._compute(ids, first)
        self.rewound = False

    def is_done(self) -> bool:
        if self.computed:
            return False
        if self.scorer is not None:
            return self.scorer.is_done() or self.length == self.max_length
        return bool(self.done)

    def generate_next_token(self) -> None:
        if self.length >= self.max_length:
            raise GenaiError(f"GenerateNextToken called with sequence length already at max_length ({self.max_length})")
        if self.length == 0 and not self.computed:
            raise GenaiError("GenerateNextToken called with no prior state. Please call AppendTokens, SetLogits, or "
                             "SetInputs before calling GenerateNextToken.")
        if self.scorer is not None:
            self._beam_step()
            return
        if not self.computed:
            tokens = self.next_tokens.copy()[:, None]
            if self.rewound:
                self._search_append(tokens)
            self._compute(tokens, False)
        self.computed = False
        self.rewound = False
        logits = np.array(self.logits, np.float32, copy=True).reshape(self.batch, -1)
        for row in range(self.batch):
            if self.eos_seen[row]:
                self.next_tokens[row] = self.s.pad_token_id
                continue
            line = logits[row]
            penalize(line, self.sequences[row, :self.length], self.search, self.s.eos_token_id)
            self._set_next(row, choose(line, self.kind, self.search, self.rng))
        if not self.done:
            self._append_next()

    def _beam_step(self) -> None:
        """One step of beam search (onnxkit.genai.beam): run the chosen beams' tokens, each row
        on the cache of the beam it continues, choose, and grow the chosen sequences."""
        if not self.computed:
            self.logits = self.state.run(self.next_tokens.copy()[:, None], self.length, self.scorer.indices)
        self.computed = False
        logits = np.array(self.logits, np.float32, copy=True).reshape(self.rows, -1)
        for row in range(self.rows):
            penalize(logits[row], self.sequences[row, :self.length], self.search, self.s.eos_token_id)
        self.scorer.step(logits, self.sequences, self.length)
        grown = self.sequences[self.scorer.indices]
        grown[:, self.length] = self.scorer.tokens
        self.sequences = grown
        self.next_tokens = self.scorer.tokens.copy()
        self.length += 1

    def get_next_tokens(self) -> np.ndarray:
        return self.next_tokens.copy()

    def get_sequence(self, index: int) -> np.ndarray:
        if self.scorer is not None:
            count = self.batch * self.search["num_return_sequences"]
            if not 0 <= index < count:
                raise GenaiError(f"get_sequence: index {index} is out of range ({count} sequences)")
            self.scorer.finalize(self.sequences, self.length)
            return self.scorer.sequence(index, self.search["num_return_sequences"]).copy()
        if not 0 <= index < self.batch:
            raise GenaiError(f"get_sequence: index {index} is out of range (batch_size {self.batch})")
        return self.sequences[index, :self.length].copy()

    def token_count(self) -> int:
        return self.length

    def get_logits(self) -> np.ndarray:
        if self.logits is None:
            raise GenaiError("get_logits: no logits yet (call append_tokens first)")
        if not self.computed:
            self._compute(self.next_tokens.copy()[:, None], False)
        return self.logits.reshape(self.rows, 1, -1).copy()

    def set_logits(self, logits) -> None:
        array = np.asarray(logits, np.float32)
        if self.logits is not None and array.size != self.logits.size:
            raise GenaiError(f"set_logits: {array.size} values for logits of {self.logits.size}")
        self.logits = array.reshape(self.rows, -1).copy()
        self.computed = True

    def rewind_to(self, new_length: int) -> None:
        if new_length > self.length:
            raise GenaiError("Cannot rewind to a length greater than the current sequence length")
        if new_length == self.length:
            return
        if self.batch > 1 and new_length != 0:
            raise GenaiError("RewindToLength must be called with new_length=0 when batch_size > 1")
        if self.scorer is not None:
            raise GenaiError("RewindToLength is not supported with beam search")
        self._reset_done()
        self.next_tokens[:] = self.sequences[:, new_length] if new_length > 0 else 0
        self.length = new_length
        self.state.rewind(new_length)
        self.computed = False
        self.rewound = True

    def get_output(self, name: str) -> np.ndarray:
        if name not in self.state.last_outputs:
            raise GenaiError(f"get_output: no output {name!r} of the last run"
                             + ("" if self.state.last_outputs else " (the decoder has not run yet)"))
        return np.array(self.state.last_outputs[name])

    def get_input(self, name: str) -> np.ndarray:
        if name not in self.state.last_feeds:
            raise GenaiError(f"get_input: no input {name!r} of the last run")
        return np.array(self.state.last_feeds[name])

    def set_model_input(self, name: str, value) -> None:
        from .tensors import Tensor

        if name not in self.state.unfed:
            raise GenaiError(f"set_model_input: {name!r} is not a decoder input the generator leaves to the caller "
                             f"(those: {', '.join(self.state.unfed) or 'none'})")
        self.state.extra[name] = value.as_numpy() if isinstance(value, Tensor) else np.asarray(value)

    def set_inputs(self, named_tensors) -> None:
        raise GenaiError(f"Please use generator.append_tokens for {self.s.type}. SetInputs is not supported for this "
                         "model type.")

    def _unsupported(name: str, what: str):
        def call(self, *args, **kwargs):
            raise not_supported(f"Generator.{name} ({what})")
        call.__name__ = name
        return call

    set_active_adapter = _unsupported("set_active_adapter", "LoRA adapters")
    set_runtime_option = _unsupported("set_runtime_option", "run options")
    snapshot_state = _unsupported("snapshot_state", "state snapshots")
    set_hidden_states = _unsupported("set_hidden_states", "speculative decoding")
    get_speculative_stats = _unsupported("get_speculative_stats", "speculative decoding")
    del _unsupported

