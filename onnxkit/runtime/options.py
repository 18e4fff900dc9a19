"""onnxruntime's option and description objects, with the same names and defaults.

:class:`SessionOptions` and :class:`RunOptions` are plain Python objects (they pickle, so a
session pickles with its options).  Fields onnxkit cannot act on are accepted and kept, and
their effect is stated on each: onnxkit plans one model on one backend, nodes in order.
Providers name backends: :data:`PROVIDERS` maps onnxruntime's provider names to onnxkit's
backends (``CPUExecutionProvider`` -> ``cpu``, ``CUDAExecutionProvider`` -> ``gpu``).
"""

from __future__ import annotations

import enum
import os
from typing import Optional

import numpy as np

from ..errors import OnnxkitError


class GraphOptimizationLevel(enum.IntEnum):
    """onnxruntime's levels.  ``ORT_DISABLE_ALL``: the graph is planned as given;
    ``ORT_ENABLE_BASIC``: the exact passes of :mod:`onnxkit.runtime.optimizer` on a copy of the
    graph; ``ORT_ENABLE_EXTENDED`` and above (the default ``ORT_ENABLE_ALL`` included): the
    fusions too.  Constants are folded at planning at every level."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    """onnxruntime's execution modes; onnxkit runs nodes in order (sequential) either way."""

    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class SessionOptions:
    """Options of an :class:`~onnxkit.InferenceSession` (onnxruntime's ``SessionOptions``).

    ``log_severity_level`` (0 verbose .. 4 fatal, default 2): the least severe record the
    session logs (see :mod:`onnxkit.log`).  ``enable_profiling`` / ``profile_file_prefix``:
    write a Chrome trace on :meth:`InferenceSession.end_profiling`.
    ``graph_optimization_level`` (:class:`GraphOptimizationLevel`, default ``ORT_ENABLE_ALL``):
    which optimizer passes rewrite a copy of the graph before planning; the session config entry
    ``session.disable_passes`` (comma-separated pass names) switches single passes off,
    ``session.enable_passes`` the opt-in ones on (:data:`onnxkit.runtime.optimizer.OPT_IN`).
    ``optimized_model_filepath``: the optimized model (the one planned) is written there.
    ``intra_op_num_threads`` (0 = the physical cores this process may use): BLAS threads during
    the session's runs, set with threadpoolctl; the setting is process-wide, so sessions with
    different counts running at the same time share one (:mod:`onnxkit.runtime.threads`).
    ``limits``: an :class:`onnxkit.Limits` for the session (onnxkit's own field).
    ``inter_op_num_threads``, ``execution_mode`` and the memory flags are kept but do not change
    evaluation (nodes run one after another).  ``log_severity_level`` -1 (onnxruntime's default)
    follows ``set_default_logger_severity``; at 3 (error) and above onnxkit's
    ``ConformanceWarning`` lines stay off stderr.

    What the options carry into the model (applied to a copy of it, before validation, by
    :mod:`onnxkit.runtime.session_ort`): ``add_free_dimension_override_by_name`` /
    ``..._by_denotation`` fix a dimension variable (or every dimension with that denotation) to
    an extent; ``add_initializer`` replaces the model's initializer of that name;
    ``add_external_initializers`` gives external initializers' values, and
    ``add_external_initializers_from_files_in_memory`` the contents of their data files.
    """

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.execution_order = 0
        self.log_severity_level = -1
        self.log_verbosity_level = 0
        self.logid = ""
        self.enable_profiling = False
        self.profile_file_prefix = "onnxruntime_profile_"
        self.optimized_model_filepath = ""
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.use_deterministic_compute = False
        self.use_per_session_threads = True
        self.limits = None
        self._config: dict = {}
        self._free_dims: dict = {}
        self._free_dims_denotation: dict = {}
        self._initializers: dict = {}
        self._external_files: dict = {}
        self._providers: list = []

    def add_session_config_entry(self, key: str, value: str) -> None:
        """Keep a configuration entry (strings, as onnxruntime); onnxkit reads ``session.disable_passes``,
        ``session.enable_passes`` and ``session.intra_op.split_kernels``."""
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key: str) -> str:
        """The entry ``key``; raises :class:`OnnxkitError` when it was never set."""
        try:
            return self._config[key]
        except KeyError:
            raise OnnxkitError(f"SessionOptions does not have configuration with key: {key}") from None

    def add_free_dimension_override_by_name(self, name: str, value: int) -> None:
        """Fix dimension variable ``name`` to extent ``value`` (the inputs declare it; a feed of
        another extent is then refused)."""
        self._free_dims[str(name)] = _extent(value, name)

    def add_free_dimension_override_by_denotation(self, denotation: str, value: int) -> None:
        """Fix every input dimension whose denotation is ``denotation`` (e.g. ``DATA_BATCH``) to ``value``."""
        self._free_dims_denotation[str(denotation)] = _extent(value, denotation)

    def add_initializer(self, name: str, value) -> None:
        """Use ``value`` (an OrtValue or array on the host) for the model's initializer ``name``."""
        self._initializers[str(name)] = _host_array(value, name)

    def add_external_initializers(self, names, values) -> None:
        """Use ``values[i]`` for the model's (external) initializer ``names[i]``."""
        names, values = list(names), list(values)
        if len(names) != len(values):
            raise OnnxkitError(f"add_external_initializers: {len(names)} names for {len(values)} values")
        for n, v in zip(names, values):
            self.add_initializer(n, v)

    def add_external_initializers_from_files_in_memory(self, file_names, buffers, lengths=None) -> None:
        """The contents of external data files, by the location the model names them with
        (``buffers``: bytes-like or numpy arrays; ``lengths``: how many octets of each to use)."""
        file_names, buffers = list(file_names), list(buffers)
        lengths = list(lengths) if lengths is not None else [None] * len(buffers)
        if not len(file_names) == len(buffers) == len(lengths):
            raise OnnxkitError("add_external_initializers_from_files_in_memory: file_names, buffers and lengths "
                               "must have one entry each")
        for name, buf, n in zip(file_names, buffers, lengths):
            data = bytes(memoryview(np.ascontiguousarray(buf) if isinstance(buf, np.ndarray) else buf).cast("B"))
            if n is not None:
                if int(n) > len(data):
                    raise OnnxkitError(f"add_external_initializers_from_files_in_memory: {name!r}: length {n} "
                                       f"exceeds the {len(data)} octets given")
                data = data[:int(n)]
            self._external_files[str(name)] = data

    def add_provider(self, provider_name: str, provider_options=None) -> None:
        """onnxruntime's explicit EP selection: a session created without ``providers`` uses the
        providers added here, in order (see :meth:`OrtSessionSurface._providers_from_options`)."""
        self._providers.append((str(provider_name), dict(provider_options or {})))

    def add_provider_for_devices(self, ep_devices, provider_options=None) -> None:
        for d in ep_devices:
            self.add_provider(getattr(d, "ep_name", str(d)), provider_options)

    def has_providers(self) -> bool:
        return bool(self._providers)

    def set_provider_selection_policy(self, policy) -> None:
        """A session created without ``providers`` (and none added) picks by this policy: PREFER_GPU
        and MAX_PERFORMANCE take CUDA first where it is available, every other policy the CPU."""
        self._config["session.provider_selection_policy"] = str(int(policy))

    def set_provider_selection_policy_delegate(self, delegate) -> None:
        """A session created without ``providers`` (and none added) calls
        ``delegate(ep_devices, model_metadata, runtime_metadata, max_selections)`` with
        :func:`~onnxkit.runtime.devices.get_ep_devices`' devices and runs on the providers of the
        devices it returns, in order."""
        if not callable(delegate):
            raise OnnxkitError("set_provider_selection_policy_delegate: the delegate must be callable")
        self._selection_delegate = delegate

    def set_ep_context_data_read_func(self, func) -> None:
        """Kept and never called: it reads the data of compiled EP context models, which onnxkit
        does not load (model compilation is not supported)."""
        if not callable(func):
            raise OnnxkitError("set_ep_context_data_read_func: the function must be callable")
        self._ep_context_read_func = func

    def clear_ep_context_data_read_func(self) -> None:
        self._ep_context_read_func = None

    def set_load_cancellation_flag(self, value: bool) -> None:
        """Kept: onnxkit loads a model in one call, there is nothing to cancel part way."""
        self._config["session.load_cancellation"] = "1" if value else "0"

    def register_custom_ops_library(self, path: str) -> None:
        """onnxruntime loads native kernels here; onnxkit's custom operators are plugins."""
        raise OnnxkitError("onnxkit does not load native custom-operator libraries "
                           f"({path}); a custom domain is an onnxkit plugin (docs/plugins.md, the plugin author's guide)")

    def __repr__(self) -> str:
        changed = {k: v for k, v in vars(self).items() if not k.startswith("_") and v != getattr(_DEFAULT_SO, k)}
        return "SessionOptions(" + ", ".join(f"{k}={v!r}" for k, v in changed.items()) + ")"


_DEFAULT_SO = SessionOptions()


def _extent(value, what) -> int:
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise OnnxkitError(f"free dimension override {what!r}: the extent must be an int, not {value!r}") from None
    if v < 0:
        raise OnnxkitError(f"free dimension override {what!r}: the extent must not be negative, got {v}")
    return v


def _host_array(value, name):
    """An initializer value as a numpy array on the host (an OrtValue's, a tensor's, an array)."""
    if hasattr(value, "numpy") and callable(value.numpy):
        value = value.numpy()
    if not isinstance(value, np.ndarray):
        raise OnnxkitError(f"initializer {name!r}: expected an OrtValue or a numpy array, got {type(value).__name__}")
    return value


class RunOptions:
    """Options of one :meth:`InferenceSession.run` (onnxruntime's ``RunOptions``).

    ``terminate``: set it to True (from another thread) to end the run in progress; it stops
    between nodes and between iterations of Loop and Scan with :class:`RunTerminated`.
    ``run_time_limit_s`` (onnxkit's own): end the run with :class:`RunTerminated` once it has
    taken longer than this many seconds (checked at the same points); None = no limit.
    ``log_severity_level`` (default 2) as for :class:`SessionOptions`; ``logid`` names the
    run in log records.
    """

    def __init__(self):
        self.terminate = False
        self.run_time_limit_s: Optional[float] = None
        self.log_severity_level = -1
        self.log_verbosity_level = 0
        self.logid = ""
        self.only_execute_path_to_fetches = False
        self._config: dict = {}
        self._active_adapters: list = []

    def add_run_config_entry(self, key: str, value: str) -> None:
        """Keep a run configuration entry; onnxkit reads none of them."""
        self._config[str(key)] = str(value)

    def get_run_config_entry(self, key: str) -> str:
        try:
            return self._config[key]
        except KeyError:
            raise OnnxkitError(f"RunOptions does not have configuration with key: {key}") from None

    def add_active_adapter(self, adapter) -> None:
        """Activate a :class:`~onnxkit.runtime.lora.LoraAdapter` for the runs given these options:
        its parameters are fed as the model inputs of their names (the rules:
        :mod:`onnxkit.runtime.lora`)."""
        from .lora import check_adapter

        check_adapter(adapter)
        self._active_adapters.append(adapter)

    def __repr__(self) -> str:
        return (f"RunOptions(terminate={self.terminate}, run_time_limit_s={self.run_time_limit_s}, "
                f"logid={self.logid!r})")


#: onnxruntime provider name -> onnxkit backend, and the distribution that installs it.
PROVIDERS = {
    "CPUExecutionProvider": "cpu",
    "CUDAExecutionProvider": "gpu",
}
BACKEND_PROVIDER = {b: p for p, b in PROVIDERS.items()}
BACKEND_DISTRIBUTIONS = {"cpu": "onnxkit-cpu", "gpu": "onnxkit-gpu"}


def provider_of(backend: str) -> str:
    """The onnxruntime provider name of an onnxkit backend (``'<name>'`` for a plugin's own)."""
    return BACKEND_PROVIDER.get(backend, backend)


def missing_backend_message(name: str, installed) -> str:
    """Why backend ``name`` is not there, naming the ``pip install`` that provides it."""
    dist = BACKEND_DISTRIBUTIONS.get(name)
    hint = f"; `pip install {dist}` provides it" if dist else ""
    chosen = os.environ.get("ONNXKIT_PLUGINS")
    if chosen is not None:
        hint += f" (ONNXKIT_PLUGINS={chosen!r} limits the plugins loaded)"
    return f"no backend {name!r}; installed: {sorted(installed)}{hint}"


def normalize_providers(providers, provider_options) -> list:
    """``[(provider name, {option: str})]`` from onnxruntime's two forms (names or (name, dict))."""
    if providers is None:
        return []
    if isinstance(providers, str):
        providers = [providers]
    out = []
    for i, p in enumerate(providers):
        opts: dict = {}
        if isinstance(p, (tuple, list)) and len(p) == 2:
            p, opts = p
        if not isinstance(p, str):
            raise OnnxkitError(f"providers[{i}] must be a provider name or (name, options), not {p!r}")
        out.append((p, dict(opts or {})))
    if provider_options is not None:
        if len(provider_options) != len(out):
            raise OnnxkitError(f"provider_options has {len(provider_options)} entries for {len(out)} providers; "
                               "give one dict per provider")
        out = [(p, {**o, **dict(extra or {})}) for (p, o), extra in zip(out, provider_options)]
    return [(p, {str(k): str(v) for k, v in o.items()}) for p, o in out]


def __getattr__(name):
    """:class:`ModelMetadata` and :class:`NodeArg`, defined in :mod:`.surface_records` on first use."""
    if name in ("ModelMetadata", "NodeArg"):
        from . import surface_records

        return getattr(surface_records, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
