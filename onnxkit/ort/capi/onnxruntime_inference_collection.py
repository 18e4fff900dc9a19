"""``onnxruntime.capi.onnxruntime_inference_collection``: the Python classes of onnxruntime's
API (the same objects as ``onnxruntime.X``) and :func:`check_and_normalize_provider_args`."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from ...runtime import InferenceSession, IOBinding, OrtValue  # noqa: F401
from ...runtime.devices import OrtDevice, OrtMemoryInfo  # noqa: F401
from ...runtime.lora_files import AdapterFormat  # noqa: F401
from ...runtime.sparse import SparseTensor  # noqa: F401

Session = InferenceSession


def check_and_normalize_provider_args(providers, provider_options, available_provider_names):
    """onnxruntime's normalization of ``providers`` / ``provider_options``: ``([name], [{str: str}])``.

    A provider given twice is dropped (with a ``UserWarning``); one not in
    ``available_provider_names`` is warned about; malformed arguments raise ``ValueError``."""
    if providers is None:
        return [], []
    names, options = [], []

    def add(name, opts):
        if name in names:
            warnings.warn(f"Duplicate provider '{name}' encountered, ignoring.", UserWarning, stacklevel=3)
            return
        if name not in available_provider_names:
            warnings.warn(f"Specified provider '{name}' is not in available provider names."
                          f"Available providers: '{', '.join(available_provider_names)}'", UserWarning, stacklevel=3)
        names.append(name)
        options.append({str(k): str(v) for k, v in opts.items()})

    if not isinstance(providers, Sequence) or isinstance(providers, str):
        raise ValueError("'providers' should be a sequence of provider names or (name, options) pairs")
    if provider_options is not None:
        if not isinstance(provider_options, Sequence) or isinstance(provider_options, str):
            raise ValueError("'provider_options' should be a sequence of dicts")
        if len(providers) != len(provider_options):
            raise ValueError("'providers' and 'provider_options' should be the same length if both are given")
        if not all(isinstance(p, str) for p in providers):
            raise ValueError("Only string values for 'providers' are supported if 'provider_options' is given")
        if not all(isinstance(o, dict) for o in provider_options):
            raise ValueError("'provider_options' values must be dicts")
        for name, opts in zip(providers, provider_options):
            add(name, opts)
        return names, options
    for p in providers:
        if isinstance(p, str):
            add(p, {})
        elif isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], dict):
            add(p[0], p[1])
        else:
            raise ValueError(f"'providers' values must be names or (name, options dict) pairs, not {p!r}")
    return names, options
