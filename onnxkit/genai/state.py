"""The decoder's state: one onnxkit :class:`~onnxkit.InferenceSession` fed tokens, the attention
mask, position ids and the key/value cache, the way onnxruntime-genai feeds a decoder-only model.

Contract (onnxruntime-genai's DefaultPositionInputs, DefaultKeyValueCache and Logits):

* ``input_ids`` are ``(batch, n)`` of the model's integer type; ``attention_mask`` (when the model
  has it) is 1 for every token but the trailing ``pad_token_id`` run of each row in the first
  run (batch 1: all ones), then grows by a column of ones per run; ``position_ids`` (when the
  model has it) count from 0 (batch 1: ``total - n .. total - 1`` every run; batch > 1: pads 0,
  then the last real token's position plus one per step).
* The cache: with ``past_present_share_buffer`` (and one beam) every past is a zero buffer of
  ``max_length`` positions, ``(batch, kv_heads, max_length, head_size)`` (heads and last extent
  as the model's past input declares them where it does: a quantized cache packs a head into
  fewer bytes; of its element type), and each run's present
  is fed back as the next past (the model writes into it, the mask says how much is valid);
  without it the first past has 0 positions and each present (one position longer per token)
  becomes the next past.
* The logits given back are ``(batch, vocab)`` float32: of the last real token of each row in a
  run of several tokens, of the one token otherwise.
* ``rewind(k)``: the cache and mask forget everything from position ``k`` on (``k`` 0: back to
  the first run).
"""

from __future__ import annotations

import os
import warnings
import weakref

import numpy as np

from ..errors import ConformanceWarning

from .config import Settings
from .errors import GenaiError, not_supported

_NUMPY = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
          "tensor(bfloat16)": None, "tensor(int32)": np.int32, "tensor(int64)": np.int64,
          "tensor(int8)": np.int8, "tensor(uint8)": np.uint8}
#: sessions whose shared-buffer dimension warning has been filtered once (see DecoderState.run)
_QUIETED: "weakref.WeakSet" = weakref.WeakSet()
_PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}
#: session_options keys of genai_config.json that do not change what onnxkit computes.
_HARMLESS_OPTIONS = ("log_id", "log_severity_level", "log_verbosity_level", "enable_profiling", "profile_file_prefix",
                     "enable_cpu_mem_arena", "enable_mem_pattern", "disable_cpu_ep_fallback", "disable_quant_qdq",
                     "enable_quant_qdq_cleanup", "ep_context_enable", "ep_context_embed_mode", "ep_context_file_path",
                     "use_env_allocators", "config_entries", "graph_optimization_level", "intra_op_num_threads",
                     "inter_op_num_threads", "execution_mode", "provider_options")


def open_session(s: Settings):
    """The onnxkit session of the decoder ``s`` names, with its session options (threads and
    optimisation level; logging and memory options have no effect on onnxkit)."""
    from .. import runtime

    opts = s.session_options
    for key in opts:
        if key not in _HARMLESS_OPTIONS:
            raise not_supported(f"genai_config.json model.decoder.session_options.{key}")
    providers = []
    for entry in opts.get("provider_options") or []:
        for name in entry:
            if name.lower() not in _PROVIDERS:
                raise not_supported(f"execution provider {name!r} (genai_config.json provider_options; onnxkit: cpu, cuda)")
            providers.append(_PROVIDERS[name.lower()])
    providers.append("CPUExecutionProvider")
    so = runtime.SessionOptions()
    for key in ("intra_op_num_threads", "inter_op_num_threads"):
        if key in opts:
            setattr(so, key, int(opts[key]))
    level = opts.get("graph_optimization_level")
    if level is not None:
        so.graph_optimization_level = getattr(runtime.GraphOptimizationLevel, str(level))
    providers = list(dict.fromkeys(providers))
    if s.model_bytes is not None:  # add_model_data: external data still beside genai_config.json
        return runtime.InferenceSession(s.model_bytes, sess_options=so, providers=providers, base_dir=s.folder)
    return runtime.InferenceSession(os.path.join(s.folder, s.filename), sess_options=so, providers=providers)


class DecoderState:
    """The inputs and cache of one generator (see the module's contract)."""

    def __init__(self, session, s: Settings, batch_size: int, max_length: int, share_buffer: bool, beams: int = 1):
        self.session, self.s, self.max_length, self.share = session, s, max_length, share_buffer
        self.beams, self.batch = beams, batch_size * beams  # rows: each batch's beams, one after another
        types = {i.name: i.type for i in session.get_inputs()}
        names = s.input_names
        self.kv_in = [(names["past_key_names"] % i, names["past_value_names"] % i) for i in range(s.num_hidden_layers)]
        self.kv_out = [(s.output_names["present_key_names"] % i, s.output_names["present_value_names"] % i)
                       for i in range(s.num_hidden_layers)]
        managed = {names["input_ids"], names["attention_mask"], names["position_ids"], *[n for p in self.kv_in for n in p]}
        self.extra: dict = {}
        self.unfed = [n for n in types if n not in managed]
        if names["input_ids"] not in types:
            raise GenaiError(f"the decoder has no input {names['input_ids']!r} (genai_config.json model.decoder.inputs"
                             f".input_ids); its inputs: {', '.join(types)}")
        missing = [n for p in self.kv_in for n in p if n not in types]
        if missing:
            raise GenaiError(f"the decoder has no input {missing[0]!r} for num_hidden_layers={s.num_hidden_layers} "
                             "(genai_config.json model.decoder)")
        outputs = {o.name for o in session.get_outputs()}
        for name in [s.output_names["logits"], *[n for p in self.kv_out for n in p]]:
            if name not in outputs:
                raise GenaiError(f"the decoder has no output {name!r} (genai_config.json model.decoder.outputs)")
        self.ids_type = self._int_type(types[names["input_ids"]], names["input_ids"])
        self.mask_name = names["attention_mask"] if names["attention_mask"] in types else None
        self.pos_name = names["position_ids"] if names["position_ids"] in types else None
        self.mask_type = self._int_type(types[self.mask_name], self.mask_name) if self.mask_name else None
        self.pos_type = self._int_type(types[self.pos_name], self.pos_name) if self.pos_name else None
        kv_type = types[self.kv_in[0][0]] if self.kv_in else "tensor(float)"
        # heads and the last extent as the model declares them where it does (a quantized cache
        # packs head_size into fewer bytes), else genai_config.json's
        declared = {i.name: i.shape for i in session.get_inputs()}.get(self.kv_in[0][0] if self.kv_in else "") or []
        fixed = [d if isinstance(d, int) else None for d in declared] if len(declared) == 4 else [None] * 4
        self.kv_heads = fixed[1] or s.num_key_value_heads
        self.kv_width = fixed[3] or s.head_size
        self.kv_type = _NUMPY.get(kv_type)
        if self.kv_type is None:
            raise not_supported(f"a key/value cache of type {kv_type}")
        self.last_feeds: dict = {}
        self.last_outputs: dict = {}
        self.reset()

    @staticmethod
    def _int_type(t: str, name: str):
        if t not in ("tensor(int32)", "tensor(int64)"):
            raise not_supported(f"decoder input {name!r} of type {t} (genai feeds int32 or int64)")
        return _NUMPY[t]

    def reset(self) -> None:
        """Back to before the first run."""
        length = self.max_length if self.share else 0
        shape = (self.batch, self.kv_heads, length, self.kv_width)
        self.kv = [(np.zeros(shape, self.kv_type), np.zeros(shape, self.kv_type)) for _ in self.kv_in]
        self.mask = None
        self.next_pos = None
        self.length = 0

    def rewind(self, index: int) -> None:
        """Forget positions ``index`` and later (0: :meth:`reset`)."""
        if index == 0:
            self.reset()
            return
        if not self.share:
            self.kv = [(k[:, :, :index].copy(), v[:, :, :index].copy()) for k, v in self.kv]
        if self.mask is not None:
            self.mask = self.mask[:, :index]
        self.length = index

    def _positions(self, tokens: np.ndarray, total: int) -> dict:
        b, n = tokens.shape
        pad = self.s.pad_token_id
        feeds = {}
        first = self.mask is None
        if first and b > 1:
            real = tokens != pad
            # a row's trailing pad run is 0 in the mask (genai scans each row from its end)
            last = np.array([np.flatnonzero(r)[-1] if r.any() else -1 for r in real])
            mask = (np.arange(n)[None, :] <= last[:, None]).astype(np.int64)
            positions = np.where(mask == 1, np.arange(n)[None, :], 0)
            self.next_pos = np.maximum(last, 0)
        elif first or b == 1:
            mask = np.ones((b, total), np.int64)
            positions = np.broadcast_to(np.arange(total - n, total), (b, n))
            self.next_pos = np.full(b, total - 1)
        else:
            if n != 1:
                raise GenaiError("batch_size > 1: after the first append_tokens one token per row per step "
                                 "(onnxruntime-genai: continuous decoding needs batch_size 1)")
            mask = np.concatenate([self.mask, np.ones((b, total - self.mask.shape[1]), np.int64)], axis=1)
            self.next_pos = self.next_pos + 1
            positions = self.next_pos[:, None]
        self.mask = mask
        if self.mask_name:
            feeds[self.mask_name] = np.ascontiguousarray(mask, self.mask_type)
        if self.pos_name:
            feeds[self.pos_name] = np.ascontiguousarray(positions, self.pos_type)
        return feeds

    def run(self, tokens: np.ndarray, total: int, beam_indices=None) -> np.ndarray:
        """Run the decoder on ``tokens`` ``(rows, n)``, the sequence ``total`` long with them; the
        ``(rows, vocab)`` float32 logits of each row's last real token.  With beams the first run
        takes ``(batch, n)`` and repeats each row for its beams; ``beam_indices`` (later runs)
        gives each row the cache of the row it continues."""
        s = self.s
        if self.unfed and any(name not in self.extra for name in self.unfed):
            missing = [name for name in self.unfed if name not in self.extra]
            raise not_supported(f"decoder input {missing[0]!r} (genai's generator feeds input_ids, attention_mask, "
                                "position_ids and the past key/values; others only through set_model_input)")
        first = self.mask is None
        places = self._positions(tokens, total)
        if first and self.beams > 1:
            tokens = np.repeat(tokens, self.beams, axis=0)
            places = {k: np.repeat(v, self.beams, axis=0) for k, v in places.items()}
            self.mask = np.repeat(self.mask, self.beams, axis=0)
            if self.next_pos is not None:
                self.next_pos = np.repeat(self.next_pos, self.beams, axis=0)
        elif beam_indices is not None:
            self.kv = [(k[beam_indices], v[beam_indices]) for k, v in self.kv]
        b, n = tokens.shape
        feeds = {s.input_names["input_ids"]: np.ascontiguousarray(tokens, self.ids_type), **places}
        for (kn, vn), (k, v) in zip(self.kv_in, self.kv):
            feeds[kn], feeds[vn] = k, v
        feeds.update(self.extra)
        names = [s.output_names["logits"], *[x for p in self.kv_out for x in p]]
        if self.share and self.session not in _QUIETED:
            # the shared buffer is max_length long where the model declares the present as long as
            # the mask: genai's convention, not a fault of the model worth a warning (the session
            # reports a kind once, so only its first shared-buffer run needs the filter)
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", ".*dimension-variable-conflict", ConformanceWarning)
                values = self.session.run(names, feeds)
            _QUIETED.add(self.session)
        else:
            values = self.session.run(names, feeds)
        self.last_feeds = feeds
        self.last_outputs = dict(zip(names, values))
        logits = np.asarray(values[0])
        presents = values[1:]
        self.kv = [(np.asarray(presents[2 * i]), np.asarray(presents[2 * i + 1])) for i in range(len(self.kv_in))]
        self.length = total
        if logits.ndim == 3 and logits.shape[1] > 1:
            if b > 1:
                real = tokens != s.pad_token_id
                last = np.array([np.flatnonzero(r)[-1] if r.any() else 0 for r in real])
            else:
                last = np.full(b, n - 1)
            logits = logits[np.arange(b), last]
        return np.asarray(logits, np.float32).reshape(b, -1)
