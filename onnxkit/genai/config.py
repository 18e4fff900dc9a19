"""``og.Config`` and the settings read from a model folder's ``genai_config.json``.

:class:`Config` is onnxruntime-genai's ``Config``: the JSON of ``<folder>/genai_config.json``
that a program may change before building a ``Model`` (``overlay`` a JSON object merged key by
key, the provider calls, ``add_model_data``).  :func:`settings` turns a config into the
:class:`Settings` the generator reads, refusing what onnxkit does not run with
:class:`~onnxkit.genai.errors.GenaiNotSupported` naming it.

The fields and defaults are onnxruntime-genai's (its ``config.h``): ``search.max_length`` 0 or
absent means ``model.context_length``; ``top_k`` 50, ``top_p`` 0, ``temperature`` 1,
``repetition_penalty`` 1, ``random_seed`` -1 (a random seed); ``eos_token_id`` one id or a list.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from typing import Optional

from .errors import GenaiError, not_supported

CONFIG_NAME = "genai_config.json"

#: ``search`` options: name -> (kind, default); kind ``int``, ``float`` or ``bool`` (genai's Search_Element).
SEARCH_OPTIONS = {
    "do_sample": (bool, False), "min_length": (int, 0), "max_length": (int, 0), "batch_size": (int, 1),
    "num_beams": (int, 1), "num_return_sequences": (int, 1), "repetition_penalty": (float, 1.0),
    "top_k": (int, 50), "top_p": (float, 0.0), "temperature": (float, 1.0), "early_stopping": (bool, True),
    "no_repeat_ngram_size": (int, 0), "diversity_penalty": (float, 0.0), "length_penalty": (float, 1.0),
    "past_present_share_buffer": (bool, False), "random_seed": (int, -1), "chunk_size": (int, 0),
    "blank_penalty": (float, 0.0),
}

#: model types that are not one decoder fed tokens (onnxruntime-genai runs them with other pipelines).
NOT_DECODER_TYPES = ("whisper", "marian-ssru", "phi3v", "phi4mm", "gemma3", "qwen2_5_vl", "fara", "lfm2",
                     "decoder-pipeline", "nemotron_speech", "parakeet", "qwen3_5", "qwen3_vl")
#: sections of ``model`` that belong to such pipelines.
NOT_DECODER_SECTIONS = ("encoder", "vision", "speech", "embedding", "encoder_decoder_init", "joiner")
#: keys of ``model.decoder`` that change how the cache or the inputs work in ways onnxkit does not follow.
NOT_DECODER_KEYS = ("pipeline", "kv_cache_quantization")
#: ``model.decoder.sliding_window`` switches that make genai slide the cache or the inputs itself
#: (without them the model's attention keeps the window, and the cache is fed as usual).
SLIDING = ("slide_key_value_cache", "slide_inputs")
#: ``model.decoder.inputs`` / ``outputs`` names this generator feeds or reads.
KNOWN_INPUTS = ("input_ids", "attention_mask", "position_ids", "past_key_names", "past_value_names")


def _load(path: str) -> dict:
    if not isinstance(path, (str, os.PathLike)):
        raise GenaiError(f"Config / Model: expected a model folder path, got {type(path).__name__}")
    folder = os.fspath(path)
    file = os.path.join(folder, CONFIG_NAME) if os.path.isdir(folder) else folder
    if not os.path.isfile(file):
        raise GenaiError(f"Config / Model: no {CONFIG_NAME} in {folder!r}")
    try:
        with open(file, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as e:
        raise GenaiError(f"Config / Model: {file!r} is not valid JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise GenaiError(f"Config / Model: {file!r} has no 'model' object")
    return data


def merge(base: dict, patch: dict) -> dict:
    """``base`` with ``patch`` merged into it key by key (objects merged, other values replaced);
    ``base`` is changed and returned."""
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


class Config:
    """onnxruntime-genai's ``Config(path)``: ``path`` a model folder holding ``genai_config.json``.

    ``overlay(json)`` merges a JSON object into the configuration; ``clear_providers`` /
    ``append_provider(name)`` / ``set_provider_option(name, key, value)`` edit the decoder's
    ``session_options.provider_options``; ``add_model_data(filename, data)`` gives a model file's
    bytes in memory (``remove_model_data`` forgets them).  The hardware-device calls are kept
    and have no effect (onnxkit runs on the CPU)."""

    def __init__(self, config_path):
        self.path = os.fspath(config_path) if isinstance(config_path, (str, os.PathLike)) else config_path
        self.data = _load(config_path)
        self.folder = self.path if os.path.isdir(self.path) else os.path.dirname(self.path)
        self.model_data: dict = {}

    def overlay(self, json_text: str) -> None:
        try:
            patch = json.loads(json_text)
        except (TypeError, ValueError) as e:
            raise GenaiError(f"Config.overlay: not a JSON object: {e}") from None
        if not isinstance(patch, dict):
            raise GenaiError("Config.overlay: not a JSON object")
        merge(self.data, patch)

    def _providers(self) -> list:
        options = self.data["model"].setdefault("decoder", {}).setdefault("session_options", {})
        return options.setdefault("provider_options", [])

    def clear_providers(self) -> None:
        self._providers().clear()

    def append_provider(self, provider: str) -> None:
        providers = self._providers()
        if not any(provider in p for p in providers):
            providers.append({str(provider): {}})

    def set_provider_option(self, provider: str, key: str, value: str) -> None:
        providers = self._providers()
        for entry in providers:
            if provider in entry:
                entry[provider][str(key)] = str(value)
                return
        providers.append({str(provider): {str(key): str(value)}})

    def add_model_data(self, model_filename: str, obj) -> None:
        self.model_data[str(model_filename)] = bytes(obj)

    def remove_model_data(self, model_filename: str) -> None:
        if self.model_data.pop(str(model_filename), None) is None:
            raise GenaiError(f"Config.remove_model_data: no model data was added for {model_filename!r}")

    def _hardware(self, *args) -> None:
        """Device selection: onnxkit's stand-in runs on the CPU, the call has no effect."""

    set_decoder_provider_options_hardware_device_type = _hardware
    set_decoder_provider_options_hardware_device_id = _hardware
    set_decoder_provider_options_hardware_vendor_id = _hardware
    clear_decoder_provider_options_hardware_device_type = _hardware
    clear_decoder_provider_options_hardware_device_id = _hardware
    clear_decoder_provider_options_hardware_vendor_id = _hardware

    @staticmethod
    def from_package_ep(*args, **kwargs):
        raise not_supported("Config.from_package_ep (execution-provider packages)")


@dataclasses.dataclass
class Settings:
    """What the generator reads from a configuration (names of genai_config.json)."""

    folder: str
    type: str
    filename: str
    model_bytes: Optional[bytes]
    input_names: dict
    output_names: dict
    num_hidden_layers: int
    num_key_value_heads: int
    head_size: int
    vocab_size: int
    context_length: int
    eos_token_id: tuple
    pad_token_id: int
    bos_token_id: int
    session_options: dict
    search: dict


def _int(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise GenaiError(f"genai_config.json: {where} must be an integer, is {value!r}")
    return int(value)


def search_value(name: str, value, where: str = "set_search_options"):
    """``value`` as search option ``name`` takes it (genai's rules: an int option truncates a
    float only when whole, a bool option takes a bool)."""
    if name not in SEARCH_OPTIONS:
        raise GenaiError(f"{where}: {name!r} is not a search option (known: {', '.join(SEARCH_OPTIONS)})")
    kind = SEARCH_OPTIONS[name][0]
    if kind is bool:
        if not isinstance(value, bool):
            raise GenaiError(f"{where}: {name} takes a bool, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GenaiError(f"{where}: {name} takes a number, got {value!r}")
    return _int(value, f"search.{name}") if kind is int else float(value)


def settings(config: Config) -> Settings:
    """The :class:`Settings` of ``config``; a configuration onnxkit does not run is refused with
    :class:`~onnxkit.genai.errors.GenaiNotSupported` naming the type, section or key."""
    model = config.data["model"]
    mtype = str(model.get("type", ""))
    if mtype in NOT_DECODER_TYPES:
        raise not_supported(f"model type {mtype!r} (genai_config.json model.type): only decoder-only language models")
    for section in NOT_DECODER_SECTIONS:
        if section in model:
            raise not_supported(f"genai_config.json model.{section} (a {section} model beside the decoder)")
    decoder = model.get("decoder")
    if not isinstance(decoder, dict) or not decoder.get("filename"):
        raise GenaiError("genai_config.json: model.decoder.filename is missing")
    for key in NOT_DECODER_KEYS:
        if key in decoder:
            raise not_supported(f"genai_config.json model.decoder.{key}")
    window = decoder.get("sliding_window")
    if window is not None:
        for key in SLIDING:
            if not isinstance(window, dict) or window.get(key, True):
                raise not_supported(f"genai_config.json model.decoder.sliding_window.{key} true (a cache or inputs "
                                    "slid by the generator)")
    inputs = {"input_ids": "input_ids", "attention_mask": "attention_mask", "position_ids": "position_ids",
              "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value"}
    outputs = {"logits": "logits", "present_key_names": "present.%d.key", "present_value_names": "present.%d.value"}
    inputs.update(decoder.get("inputs") or {})
    outputs.update(decoder.get("outputs") or {})
    for key in ("past_names", "present_names", "past_key_values_length", "past_sequence_length",
                "total_sequence_length", "cache_indirection", "encoder_hidden_states", "inputs_embeds"):
        if key in inputs or key in outputs:
            raise not_supported(f"genai_config.json model.decoder inputs/outputs {key!r}")
    eos = model.get("eos_token_id", [])
    eos = tuple(_int(e, "model.eos_token_id") for e in (eos if isinstance(eos, list) else [eos]))
    context_length = _int(model.get("context_length", 0), "model.context_length")
    search = {name: default for name, (_, default) in SEARCH_OPTIONS.items()}
    for name, value in (config.data.get("search") or {}).items():
        if name in SEARCH_OPTIONS:
            search[name] = search_value(name, value, "genai_config.json search")
    if not search["max_length"]:
        search["max_length"] = context_length
    heads = decoder.get("num_key_value_heads", decoder.get("num_attention_heads"))
    filename = str(decoder["filename"])
    return Settings(
        folder=config.folder, type=mtype, filename=filename, model_bytes=config.model_data.get(filename),
        input_names=inputs, output_names=outputs,
        num_hidden_layers=_int(decoder.get("num_hidden_layers", 0), "model.decoder.num_hidden_layers"),
        num_key_value_heads=_int(heads or 0, "model.decoder.num_key_value_heads"),
        head_size=_int(decoder.get("head_size", 0), "model.decoder.head_size"),
        vocab_size=_int(model.get("vocab_size", 0), "model.vocab_size"), context_length=context_length,
        eos_token_id=eos, pad_token_id=_int(model.get("pad_token_id", 0), "model.pad_token_id"),
        bos_token_id=_int(model.get("bos_token_id", 0), "model.bos_token_id"),
        session_options=dict(decoder.get("session_options") or {}), search=search)
