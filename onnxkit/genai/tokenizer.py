"""``og.Tokenizer`` and ``og.TokenizerStream``, from the model folder's ``tokenizer.json`` read
with the ``tokenizers`` library (``pip install onnxkit-core[genai]``).

Contract (onnxruntime-genai's tokenizer, options ``add_special_tokens`` false and
``skip_special_tokens`` true unless ``update_options`` changes them):

* ``encode(text)``: int32 ids; special tokens written in the text are recognised; the
  post-processor's added tokens (a BOS, say) only with ``add_special_tokens``.
* ``decode(ids)``: the text, special tokens left out.
* ``encode_batch(texts)``: a ``(len(texts), longest)`` int32 :class:`~onnxkit.genai.tensors.Tensor`,
  each row padded on the right with the model's ``pad_token_id``; ``decode_batch`` decodes rows.
* ``TokenizerStream.decode(token)``: the text the token completes, ``""`` while it only begins
  a character (a UTF-8 sequence split over tokens) or is a skipped special token.
* Byte-level BPE tokenizers (``tokenizer.json``'s decoder ``ByteLevel``) and SentencePiece-style
  BPE ones (a decoder step replacing ``▁``) are decoded byte by byte as onnxruntime-extensions
  does: ``decode`` stops at the first byte sequence that is not UTF-8 and ends with U+FFFD
  there; the stream drops each such sequence (a lead byte's length of bytes) and keeps one
  still incomplete for the next token.  SentencePiece pieces: ``▁`` is a space, ``<0xNN>`` a
  byte, and (with a decoder step stripping a space) a piece's leading space is dropped right
  after a special token only.  Other tokenizers are decoded by the ``tokenizers`` library, the
  stream giving the text a token adds once it no longer ends in U+FFFD.
* ``apply_chat_template(messages, template_str=None, tools=None, add_generation_prompt=True)``:
  ``messages`` a JSON list; the template (``template_str``, else the folder's
  ``tokenizer_config.json`` ``chat_template`` or ``chat_template.jinja``) rendered with Jinja2
  (``messages``, ``tools``, ``add_generation_prompt``, ``bos_token``, ``eos_token``).
"""

from __future__ import annotations

import json
import os

import numpy as np

from .errors import GenaiError, not_supported
from .tensors import Tensor

_OPTIONS = ("add_special_tokens", "skip_special_tokens")


def _library():
    try:
        import tokenizers
    except ImportError:
        raise not_supported("og.Tokenizer without the 'tokenizers' library: "
                            "pip install 'onnxkit-core[genai]' (or 'tokenizers>=0.20')") from None
    return tokenizers


def _byte_decoder() -> dict:
    """GPT-2's byte-level alphabet: printable bytes stand for themselves, the others for 256+."""
    table, extra = {}, 256
    for b in range(256):
        if b < 33 or 127 <= b < 161 or b == 173:
            table[chr(extra)] = b
            extra += 1
        else:
            table[chr(b)] = b
    return table


_BYTES = _byte_decoder()
#: UTF-8 sequence length by the high four bits of its first byte (onnxruntime-extensions' rule)
_UTF8_LEN = (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4)


def _valid(chunk: bytes) -> bool:
    try:
        text = chunk.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return text not in ("\ufffe", "\uffff")


def _first_invalid(data: bytes) -> int:
    """Where ``data`` stops being UTF-8 (-1: it is UTF-8 to the end)."""
    i = 0
    while i < len(data):
        n = _UTF8_LEN[data[i] >> 4]
        if i + n > len(data) or not _valid(data[i:i + n]):
            return i
        i += n
    return -1


def _decoding(spec: dict) -> tuple:
    """(mode, dummy_prefix): mode ``"byte"`` (byte-level BPE), ``"spm"`` (SentencePiece-style BPE)
    or ``"lib"`` (the tokenizers library decodes); dummy_prefix: a decoder step strips a space."""
    decoder = spec.get("decoder") or {}
    parts = (decoder.get("decoders") or []) if decoder.get("type") == "Sequence" else [decoder]
    if (spec.get("model") or {}).get("type") != "BPE":
        return "lib", False
    if any(p.get("type") == "ByteLevel" for p in parts):
        return "byte", False
    if any(p.get("type") == "Replace" and (p.get("pattern") or {}).get("String") == "\u2581" for p in parts):
        return "spm", any(p.get("type") == "Strip" and p.get("content") == " " for p in parts)
    return "lib", False


def _flag(name: str, value) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise GenaiError(f"Invalid tokenizer option value for {name}: {value!r} (true or false)")


class Tokenizer:
    """onnxruntime-genai's ``Tokenizer(model)`` (see the module's contract)."""

    def __init__(self, model):
        from .generator import Model

        if not isinstance(model, Model):
            raise GenaiError(f"Tokenizer: expected an og.Model, got {type(model).__name__}")
        s = model._settings
        self._settings = s
        path = os.path.join(s.folder, "tokenizer.json")
        if not os.path.isfile(path):
            raise not_supported(f"a tokenizer without tokenizer.json (looked in {s.folder!r})")
        library = _library()
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            spec = json.loads(text)
        except (OSError, ValueError) as e:
            raise GenaiError(f"Tokenizer: cannot read {path!r}: {e}") from None
        try:
            self._tok = library.Tokenizer.from_str(text)
        except Exception as e:  # the tokenizers library raises a plain Exception for a spec it refuses
            raise GenaiError(f"Tokenizer: the tokenizers library refuses {path!r}: {e}") from None
        self._mode, self._dummy_prefix = _decoding(spec)
        added = spec.get("added_tokens") or []
        self._added = {int(t["id"]): t.get("content", "") for t in added}
        self._special = {int(t["id"]) for t in added if t.get("special")}
        self._suffix = (spec.get("model") or {}).get("end_of_word_suffix") or ""
        self._vocab_size = self._tok.get_vocab_size(with_added_tokens=False)
        self._unk = ((spec.get("model") or {}).get("unk_token")) or ""
        self._config = {}
        config_path = os.path.join(s.folder, "tokenizer_config.json")
        if os.path.isfile(config_path):
            try:
                with open(config_path, encoding="utf-8") as fh:
                    self._config = json.load(fh)
            except (OSError, ValueError) as e:
                raise GenaiError(f"Tokenizer: {config_path!r} is not valid JSON: {e}") from None
        self._options = {"add_special_tokens": False, "skip_special_tokens": True}
        self._clean_up = bool(self._config.get("clean_up_tokenization_spaces", False))
        eos = self._config.get("eos_token")
        eos = eos.get("content") if isinstance(eos, dict) else eos
        self._eos_id = self._tok.token_to_id(eos) if isinstance(eos, str) else None
        self._model_config = model._config.data["model"]

    # -- ids --
    @property
    def bos_token_id(self) -> int:
        return self._settings.bos_token_id

    @property
    def eos_token_ids(self) -> np.ndarray:
        return np.array(self._settings.eos_token_id, np.int32)

    @property
    def pad_token_id(self) -> int:
        return self._settings.pad_token_id

    def _named(self, name: str) -> int:
        value = self._model_config.get(name)
        if value is None:
            raise GenaiError(f"{name} is not defined for this model")
        return int(value)

    bot_token_id = property(lambda self: self._named("bot_token_id"))
    eot_token_id = property(lambda self: self._named("eot_token_id"))
    bor_token_id = property(lambda self: self._named("bor_token_id"))
    eor_token_id = property(lambda self: self._named("eor_token_id"))

    def to_token_id(self, text: str) -> int:
        token = self._tok.token_to_id(str(text))
        return -1 if token is None else int(token)

    def update_options(self, **options) -> None:
        for name, value in options.items():
            if name not in _OPTIONS:
                raise GenaiError(f"Invalid tokenizer option key: {name}")
            self._options[name] = _flag(name, value)

    # -- text --
    def encode(self, text: str) -> np.ndarray:
        if not isinstance(text, str):
            raise GenaiError(f"Tokenizer.encode: expected a str, got {type(text).__name__}")
        ids = self._tok.encode(text, add_special_tokens=self._options["add_special_tokens"]).ids
        return np.array(ids, np.int32)

    def _token_bytes(self, token: int, last_special: bool) -> tuple:
        """(bytes, special) of one token decoded after a special token or not (byte-level and
        SentencePiece-style modes); a skipped special or unknown id gives no bytes."""
        special = token in self._special
        if special and self._options["skip_special_tokens"]:
            return b"", True
        if token in self._added:
            data = self._added[token].encode("utf-8")
        elif not 0 <= token < self._vocab_size and self._mode == "byte":
            return b"", special
        elif self._mode == "byte":
            piece = self._tok.id_to_token(token) or ""
            data = b"".join(bytes([_BYTES[c]]) if c in _BYTES else c.encode("utf-8") for c in piece)
        else:
            piece = (self._tok.id_to_token(token) or "") if 0 <= token < self._vocab_size else ""
            if not piece:
                data = self._unk.encode("utf-8")
            elif len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
                data = bytes([int(piece[3:5], 16)])
            else:
                data = piece.replace("\u2581", " ").encode("utf-8")
            if data.startswith(b" ") and last_special and self._dummy_prefix:
                data = data[1:]
            return data, special
        if self._suffix and data.endswith(self._suffix.encode("utf-8")):
            data = data[:-len(self._suffix.encode("utf-8"))] + b" "
        return data, special

    def decode(self, tokens) -> str:
        ids = np.asarray(tokens).reshape(-1)
        if ids.size and ids.dtype.kind not in "iu":
            raise GenaiError(f"Tokenizer.decode: token ids must be integers, got {ids.dtype}")
        if self._mode != "lib":
            data, last = b"", False
            for t in ids:
                piece, last = self._token_bytes(int(t), last)
                data += piece
            bad = _first_invalid(data)
            return data.decode("utf-8") if bad < 0 else data[:bad].decode("utf-8") + "\ufffd"
        return self._tok.decode([int(t) for t in ids], skip_special_tokens=self._options["skip_special_tokens"])

    def encode_batch(self, texts) -> Tensor:
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise GenaiError("Tokenizer.encode_batch: expected a list of str")
        rows = [self.encode(t) for t in texts]
        width = max((len(r) for r in rows), default=0)
        out = np.full((len(rows), width), self._settings.pad_token_id, np.int32)
        for i, r in enumerate(rows):
            out[i, :len(r)] = r
        return Tensor(out)

    def decode_batch(self, tokens) -> list:
        array = tokens.as_numpy() if isinstance(tokens, Tensor) else np.asarray(tokens)
        if array.ndim != 2:
            raise GenaiError(f"Tokenizer.decode_batch: expected a 2-D tensor of token ids, got shape {array.shape}")
        return [self.decode(row) for row in array]

    def create_stream(self) -> "TokenizerStream":
        return TokenizerStream(self)

    # -- chat --
    def _template(self) -> str:
        template = self._config.get("chat_template")
        if isinstance(template, list):  # named templates: the default one
            template = next((t.get("template") for t in template if t.get("name") == "default"), None)
        jinja_file = os.path.join(self._settings.folder, "chat_template.jinja")
        if not template and os.path.isfile(jinja_file):
            with open(jinja_file, encoding="utf-8") as fh:
                template = fh.read()
        if not template:
            raise GenaiError("Empty chat template.")
        return template

    def apply_chat_template(self, messages: str, *, template_str: str = None, tools: str = None,
                            add_generation_prompt: bool = True) -> str:
        try:
            import jinja2
            import jinja2.sandbox
        except ImportError:
            raise not_supported("Tokenizer.apply_chat_template without the 'jinja2' library (pip install jinja2)") from None
        try:
            parsed = json.loads(messages)
            tool_list = json.loads(tools) if tools else None
        except (TypeError, ValueError) as e:
            raise GenaiError(f"apply_chat_template: messages / tools must be JSON: {e}") from None

        def raise_exception(message):
            raise GenaiError(f"apply_chat_template: the template refused: {message}")

        env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = raise_exception
        env.filters.setdefault("tojson", lambda v, indent=None: json.dumps(v, ensure_ascii=False, indent=indent))

        def token(name):
            value = self._config.get(name)
            return value.get("content", "") if isinstance(value, dict) else (value or "")

        try:
            return env.from_string(template_str or self._template()).render(
                messages=parsed, tools=tool_list, add_generation_prompt=bool(add_generation_prompt),
                bos_token=token("bos_token"), eos_token=token("eos_token"))
        except jinja2.TemplateError as e:
            raise GenaiError(f"apply_chat_template: {e}") from None


class TokenizerStream:
    """onnxruntime-genai's ``TokenizerStream``: ``decode(token)`` gives the text one more token
    adds (see the module's contract)."""

    def __init__(self, tokenizer: Tokenizer):
        self._tokenizer = tokenizer
        self._ids: list = []
        self._pending = b""  # bytes of a character not complete yet (byte-level and SentencePiece modes)
        self._last_special = False
        self._first = True
        self._prefix = 0   # start of the window decoded for context
        self._read = 0     # tokens up to here have given their text

    def decode(self, token) -> str:
        if isinstance(token, (np.ndarray, list, tuple)):
            token = np.asarray(token).reshape(-1)
            if token.size != 1:
                raise GenaiError("TokenizerStream.decode: one token id at a time")
            token = token[0]
        if self._tokenizer._mode != "lib":
            return self._decode_bytes(int(token))
        self._ids.append(int(token))
        decode = self._tokenizer.decode
        before = decode(self._ids[self._prefix:self._read])
        after = decode(self._ids[self._prefix:])
        if len(after) <= len(before) or after.endswith("\ufffd"):
            return ""
        self._prefix, self._read = self._read, len(self._ids)
        return after[len(before):]

    def _decode_bytes(self, token: int) -> str:
        tok = self._tokenizer
        piece, special = tok._token_bytes(token, self._last_special)
        if tok._clean_up and special:  # onnxruntime-extensions' spacing of special tokens
            if self._first and not self._last_special:
                piece = b" " + piece
            if token != tok._eos_id:
                piece += b" "
        self._first, self._last_special = False, special
        data = self._pending + piece
        out, i = [], 0
        while i < len(data):
            n = _UTF8_LEN[data[i] >> 4]
            if i + n > len(data):
                break
            if _valid(data[i:i + n]):
                out.append(data[i:i + n].decode("utf-8"))
            i += n
        self._pending = data[i:]
        return "".join(out)
