"""The rest of onnxruntime's ``InferenceSession`` surface, as a base class of
:class:`onnxkit.runtime.session.InferenceSession`.

* Constructor keywords onnxruntime takes (:data:`ORT_KEYWORDS`): ``read_config_from_model``
  (also the ``ORT_LOAD_CONFIG_FROM_MODEL=1`` environment variable): the model's ``ort_config``
  metadata entry, JSON ``{"session_options": {field: value}}``, sets those fields of a copy of
  the session options; ``disabled_optimizers`` (onnxruntime's optimizer names: kept, reported
  by :meth:`get_session_options`, onnxkit's passes are switched off with the
  ``session.disable_passes`` entry); ``enable_fallback`` (kept).
* What the session options carry into the model, applied to a copy of it before validation:
  free dimension overrides (by variable name and by denotation: the dimension becomes that
  extent, in the inputs and wherever the variable appears in the outputs), initializers given
  with ``add_initializer`` (replace the model's of that name) and external initializers given
  in memory (``add_external_initializers``: the tensor; ``..._from_files_in_memory``: the
  contents of a data file, read at each reference's offset and length).
* The optimized model's external data (``optimized_model_filepath`` with the session config
  entries ``session.optimized_model_external_initializers_file_name`` and
  ``..._min_size_in_bytes``).
* ``set_providers`` (plans again on the providers given), ``run_async`` (a thread that calls
  ``callback(outputs, user_data, error_message)``; like ``run_with_ortvaluevector`` it does not
  apply active LoRA adapters, as onnxruntime, and warns so), memory infos and devices of inputs and
  outputs, ``get_provider_graph_assignment_info`` and ``_model_path`` / ``_model_bytes`` /
  ``_sess`` as onnxruntime's wrapper has them.
"""

from __future__ import annotations

import copy
import os
import threading

from onnxkit import records
import numpy as np

from .. import ir
from ..errors import OnnxkitError
from ..log import get_logger
from ..status import OrtStatusError
from .options import SessionOptions, normalize_providers
from .ortvalue import OrtValueVector  # noqa: F401  (defined beside OrtValue; named here as before)

#: onnxruntime's constructor keywords that are not onnxkit's own.
ORT_KEYWORDS = ("read_config_from_model", "disabled_optimizers", "enable_fallback")

#: ``ort_config`` fields a model may set and how to read them.
_CONFIG_FIELDS = {"intra_op_num_threads": int, "inter_op_num_threads": int, "execution_mode": int,
                  "graph_optimization_level": int, "enable_profiling": bool, "log_severity_level": int,
                  "log_verbosity_level": int, "enable_mem_pattern": bool, "enable_cpu_mem_arena": bool,
                  "use_deterministic_compute": bool, "optimized_model_filepath": str}

#: The session config entry that makes :meth:`OrtSessionSurface.get_provider_graph_assignment_info` answer.
RECORD_ASSIGNMENT_KEY = "session.record_ep_graph_assignment_info"


class OrtEpAssignedSubgraph:
    """Nodes one provider runs: ``ep_name`` and ``get_nodes()``."""

    def __init__(self, ep_name: str, nodes: list):
        self.ep_name = ep_name
        self._nodes = list(nodes)

    def get_nodes(self) -> list:
        return list(self._nodes)

    def __repr__(self) -> str:
        return f"OrtEpAssignedSubgraph({self.ep_name}, {[n.name for n in self._nodes]})"


EXT_FILE_KEY = "session.optimized_model_external_initializers_file_name"
EXT_MIN_KEY = "session.optimized_model_external_initializers_min_size_in_bytes"


class OrtSessionSurface:
    """onnxruntime's session methods that :class:`InferenceSession` gets from here."""

    # -- construction ------------------------------------------------------------------------
    def _ort_prepare(self, path_or_bytes, options: dict) -> None:
        """Take onnxruntime's keywords out of ``options``; read the model's ``ort_config``."""
        from .defaults import DEFAULTS

        read = options.pop("read_config_from_model", None)
        if options.get("seed") is None and DEFAULTS["seed"] is not None:
            options["seed"] = DEFAULTS["seed"]
        self._disabled_optimizers = list(options.pop("disabled_optimizers", None) or [])
        self._enable_fallback = bool(options.pop("enable_fallback", True))
        pools = DEFAULTS["global_threads"]
        if pools is not None:
            if getattr(self._sess_options, "use_per_session_threads", True):
                raise OnnxkitError("global thread pools were set (set_global_thread_pool_sizes): a session must "
                                   "then set SessionOptions.use_per_session_threads = False")
            if not self._sess_options.intra_op_num_threads:
                self._sess_options = copy.copy(self._sess_options)
                self._sess_options.intra_op_num_threads = pools[0]
        if read is None:
            read = os.environ.get("ORT_LOAD_CONFIG_FROM_MODEL", "0") == "1"
        self._model_path = os.fspath(path_or_bytes) if isinstance(path_or_bytes, (str, os.PathLike)) else None
        self._model_bytes = bytes(path_or_bytes) if isinstance(path_or_bytes, (bytes, bytearray, memoryview)) \
            else None
        if read and not isinstance(path_or_bytes, ir.Model):
            from ..api import load

            model = load(path_or_bytes, external_data="never", limits=options.get("limits") or _limits(self))
            self._sess_options = apply_ort_config(self._sess_options, model)
        elif read:
            self._sess_options = apply_ort_config(self._sess_options, path_or_bytes)

    def _providers_from_options(self, providers, provider_options) -> tuple:
        """The providers of a session created without ``providers``: those added to the session
        options (``add_provider`` / ``add_provider_for_devices``), else those of the devices the
        selection delegate returns, else by the selection policy (PREFER_GPU, MAX_PERFORMANCE:
        CUDA first where it is available); ``(providers, provider_options)`` unchanged otherwise."""
        if providers is not None:
            return providers, provider_options
        so = self._sess_options
        added = list(getattr(so, "_providers", []))
        if added:
            return [name for name, _ in added], [opts for _, opts in added]
        delegate = getattr(so, "_selection_delegate", None)
        if delegate is not None:
            from .devices import get_ep_devices

            devices = get_ep_devices()
            chosen = delegate(devices, {}, {}, len(devices))
            names = list(dict.fromkeys(getattr(d, "ep_name", None) for d in chosen or []))
            if not names or None in names:
                raise OnnxkitError(f"the provider selection delegate returned {chosen!r}: expected a non-empty list "
                                   "of the OrtEpDevice objects it was given")
            return names, None
        policy = so._config.get("session.provider_selection_policy")
        if policy in ("3", "4"):   # OrtExecutionProviderDevicePolicy.PREFER_GPU, MAX_PERFORMANCE
            from .providers import get_available_providers

            return get_available_providers(), None
        return providers, provider_options

    def _ort_model(self, model: ir.Model) -> ir.Model:
        """The model with what the session options carry applied (a copy where anything is)."""
        so = self._sess_options
        by_name = dict(getattr(so, "_free_dims", {}))
        by_denotation = dict(getattr(so, "_free_dims_denotation", {}))
        inits = dict(getattr(so, "_initializers", {}))
        files = dict(getattr(so, "_external_files", {}))
        if not (by_name or by_denotation or inits or files) or model.graph is None:
            return model
        g = model.graph
        if by_name or by_denotation:
            g = override_free_dimensions(g, by_name, by_denotation)
        if inits or files:
            g = records.evolve(g, initializer=[_supplied(t, inits, files) for t in g.initializer])
        return records.evolve(model, graph=g)

    def _save_optimized(self, model: ir.Model, path: str) -> None:
        """Write the optimized model; its initializers of at least the configured size go to the
        configured external file when ``session.optimized_model_external_initializers_file_name`` is set."""
        from ..api import save

        cfg = self._sess_options._config
        location = cfg.get(EXT_FILE_KEY)
        if not location:
            save(model, path)
            return
        try:
            threshold = int(cfg.get(EXT_MIN_KEY, "1024"))
        except ValueError:
            raise OnnxkitError(f"session config {EXT_MIN_KEY} must be an integer, not {cfg[EXT_MIN_KEY]!r}") from None
        save(model, path, external_data=True, size_threshold=max(threshold, 1), location=location)

    # -- providers ---------------------------------------------------------------------------
    def set_providers(self, providers=None, provider_options=None) -> None:
        """Plan the session again on ``providers`` (onnxruntime's order rules, as at creation);
        an unknown provider name raises, naming it, and leaves the session as it was."""
        normalize_providers(providers, provider_options)  # shape errors first
        from .providers import choose_backends

        choose_backends(None, providers or ["CPUExecutionProvider"], provider_options, self.registry,
                        lambda *a: None)
        model = self._model_bytes if self._model_path is None and self._model_bytes is not None else self.model
        options = dict(self._onnxkit_options)
        options.pop("backend", None)
        self._providers_arg = (providers, provider_options)
        self._setup(self._model_path or model, providers, provider_options, **options)

    def get_provider_graph_assignment_info(self) -> list:
        """Which provider runs which node: one :class:`OrtEpAssignedSubgraph` per node of the
        model, in graph order (onnxruntime's CPU provider also reports one subgraph per node),
        naming the session's first provider or the provider of the node's fallback.  Only when
        the session was made with the config entry ``session.record_ep_graph_assignment_info``
        = ``"1"`` (as in onnxruntime); otherwise an :class:`~onnxkit.errors.OnnxkitError`
        (onnxruntime's ``Fail``)."""
        from . import surface_records
        from .options import provider_of

        if self._sess_options._config.get(RECORD_ASSIGNMENT_KEY) != "1":
            raise OnnxkitError(f"Session configuration entry '{RECORD_ASSIGNMENT_KEY}' must be set to \"1\" "
                               "when the session is made for get_provider_graph_assignment_info to report "
                               "which provider runs each node")
        fallen = {f.node: provider_of(getattr(f, "runs_on", "cpu")) for f in getattr(self, "fallbacks", [])}
        first = self.get_providers()[0]
        out = []
        for i, n in enumerate(self.model.graph.node):
            name = n.name or f"{n.op_type}_{i}"
            node = surface_records.OrtEpAssignedNode(name=n.name, domain=n.domain or "", op_type=n.op_type)
            out.append(OrtEpAssignedSubgraph(fallen.get(name, first), [node]))
        return out

    # -- description -------------------------------------------------------------------------
    def _memory_infos(self, names) -> list:
        from .devices import memory_info_of

        device = "cuda" if self._torch and getattr(self.backend, "device", "").endswith("cuda") else "cpu"
        return [memory_info_of(device) for _ in names]

    def get_input_memory_infos(self) -> list:
        """Where each input (``get_inputs()`` order) is expected: an :class:`OrtMemoryInfo`."""
        return self._memory_infos(self.get_inputs())

    def get_output_memory_infos(self) -> list:
        return self._memory_infos(self.get_outputs())

    def _ep_devices(self, names) -> list:
        from .devices import get_ep_devices

        mine = [d for d in get_ep_devices() if d.ep_name == self.get_providers()[0]] or get_ep_devices()[:1]
        return [mine[0] for _ in names]

    def get_input_epdevices(self) -> list:
        """The :class:`OrtEpDevice` each input is consumed on."""
        return self._ep_devices(self.get_inputs())

    def get_output_epdevices(self) -> list:
        return self._ep_devices(self.get_outputs())

    @property
    def _sess(self):
        """onnxruntime's native session object, as its tests reach it: feeds first, names second."""
        return NativeSession(self)

    def _reset_session(self, providers, provider_options) -> None:
        self.set_providers(providers, provider_options)

    # -- running -----------------------------------------------------------------------------
    def run_async(self, output_names, input_feed, callback, user_data, run_options=None) -> None:
        """Run on another thread; then ``callback(outputs, user_data, '')``, or
        ``callback([], user_data, message)`` when the run fails."""
        if not callable(callback):
            raise OnnxkitError("run_async: callback must be callable(outputs, user_data, error_message)")
        run_options = _without_adapters(run_options, "run_async")

        def work():
            try:
                outs = self.run(output_names, input_feed, run_options)
            except OrtStatusError as exc:  # a refusal (onnxkit's errors are all status errors): the callback hears of it
                callback([], user_data, str(exc) or type(exc).__name__)
                return
            except Exception as exc:  # noqa: BLE001
                # Broad: on this thread nobody else can catch it (the callback would never be
                # called).  Not a status error, so a bug: logged on onnxkit.run with the traceback,
                # and the callback hears of it, as onnxruntime's does.
                get_logger("run").warning("run_async: the run raised %s: %s", type(exc).__name__, exc, exc_info=exc)
                callback([], user_data, str(exc) or type(exc).__name__)
                return
            callback(outs, user_data, "")

        threading.Thread(target=work, name="onnxkit-run-async", daemon=True).start()

    def run_with_ortvaluevector(self, run_options, feed_names, feeds, fetch_names, fetches, fetch_devices) -> None:
        """onnxruntime's lowest-overhead run: ``feeds`` are OrtValues in ``feed_names``' order;
        the outputs named by ``fetch_names`` are appended to ``fetches`` (an ``OrtValueVector``,
        emptied first); ``fetch_devices`` (where onnxruntime should place each output) must
        name as many devices as there are fetches, and the outputs stay where the session
        computes them."""
        feed_names, feeds, fetch_names = list(feed_names), list(feeds), list(fetch_names)
        if len(feed_names) != len(feeds):
            raise OnnxkitError(f"run_with_ortvaluevector: {len(feed_names)} feed names but {len(feeds)} feeds")
        if fetch_devices is not None and len(list(fetch_devices)) not in (0, len(fetch_names)):
            raise OnnxkitError(f"run_with_ortvaluevector: {len(list(fetch_devices))} fetch devices for "
                               f"{len(fetch_names)} fetch names")
        run_options = _without_adapters(run_options, "run_with_ortvaluevector")
        outs = self.run_with_ort_values(fetch_names, dict(zip(feed_names, feeds)), run_options)
        del fetches[:]
        fetches.extend(outs)

    def create_ortvalue_from_shape_and_type(self, shape, element_type, device_type: str, device_id: int = 0,
                                            vendor_id: int = -1):
        """A zero-filled OrtValue of ``shape`` and ``element_type`` (a numpy type or an ONNX
        element type number) on ``device_type`` (onnxkit allocates with numpy or torch, not
        with a session allocator; the value is not tied to this session)."""
        from .ortvalue import OrtValue

        if isinstance(element_type, int) and not isinstance(element_type, bool):
            from ..dtypes import element_type as element_type_of

            element_type = element_type_of(element_type, "create_ortvalue_from_shape_and_type").dtype
        return OrtValue.ortvalue_from_shape_and_type(shape, element_type, device_type, device_id)

    def release_captured_graph(self, graph_annotation_id: int = 0) -> None:
        """A no-op: onnxkit captures no device graphs (onnxruntime's providers without captured
        graphs treat it as one too)."""

    def set_ep_dynamic_options(self, options: dict) -> None:
        """onnxruntime passes these to its providers at run time; onnxkit's backends take no
        dynamic options, so they are checked (string keys and values) and kept, changing nothing
        (:attr:`ep_dynamic_options`)."""
        if not isinstance(options, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                    for k, v in options.items()):
            raise OnnxkitError("set_ep_dynamic_options: options must be a dict of str to str")
        self.ep_dynamic_options = {**getattr(self, "ep_dynamic_options", {}), **options}

    def get_tuning_results(self) -> list:
        """onnxruntime's kernel tuning results: onnxkit tunes nothing, so none."""
        return []

    def set_tuning_results(self, results, error_on_invalid: bool = False) -> None:
        """Accepted and ignored (onnxkit has no tunable kernels); with ``error_on_invalid`` an
        entry naming a provider this session does not run on is refused."""
        if error_on_invalid:
            for r in results or []:
                ep = r.get("ep") if isinstance(r, dict) else None
                if ep is not None and ep not in self.get_providers():
                    raise OnnxkitError(f"Cannot find execution provider {ep}")


class NativeSession:
    """onnxruntime's native session (``InferenceSession._sess``) as its tests use it: feeds
    first, output names second; values are :class:`OrtValue`."""

    def __init__(self, session):
        self._session = session

    def run_with_ort_values(self, feeds, output_names, run_options=None) -> list:
        return OrtValueVector(self._session.run_with_ort_values(output_names, feeds, run_options))

    def run_with_iobinding(self, iobinding, run_options=None) -> None:
        iobinding._run(run_options)

    def run(self, output_names, feeds, run_options=None) -> list:
        return self._session.run(output_names, feeds, run_options)

    def __getattr__(self, name):
        return getattr(self._session, name)


def _without_adapters(run_options, what: str):
    """``run_options`` without active LoRA adapters (a copy, with a warning on ``onnxkit.run``,
    where it has some): onnxruntime applies them in ``run`` and ``run_with_ort_values`` only."""
    if not getattr(run_options, "_active_adapters", None):
        return run_options
    get_logger("run").warning("%s has active adapters specified, but won't have an effect", what)
    out = copy.copy(run_options)
    out._active_adapters = []
    return out


def _limits(sess):
    so = sess._sess_options
    from ..limits import DEFAULT_LIMITS

    return so.limits if getattr(so, "limits", None) is not None else DEFAULT_LIMITS


def apply_ort_config(so: SessionOptions, model: ir.Model) -> SessionOptions:
    """A copy of ``so`` with the fields of ``model``'s ``ort_config`` metadata JSON set."""
    entry = next((p.value for p in model.metadata_props if p.key == "ort_config"), None)
    if entry is None:
        return so
    import json  # a model carrying ort_config metadata only

    try:
        cfg = json.loads(entry)
    except ValueError as exc:
        raise OnnxkitError(f"the model's ort_config metadata is not JSON: {exc}") from None
    fields = cfg.get("session_options", {}) if isinstance(cfg, dict) else None
    if not isinstance(fields, dict):
        raise OnnxkitError("the model's ort_config metadata must be {\"session_options\": {field: value}}")
    out = copy.copy(so)
    out._config = dict(so._config)
    for key, value in fields.items():
        conv = _CONFIG_FIELDS.get(key)
        if conv is None:
            raise OnnxkitError(f"the model's ort_config sets {key!r}, not a session option onnxkit reads; "
                               f"known: {sorted(_CONFIG_FIELDS)}")
        setattr(out, key, conv(value))
    return out


def _fixed(t, by_name: dict, by_denotation: dict, names: dict):
    """``t`` (a tensor type) with overridden dimensions fixed; ``names`` collects variable -> extent."""
    if not isinstance(t, ir.TensorType) or t.shape is None:
        return t
    dims, changed = [], False
    for d in t.shape.dim:
        value = None
        if d.denotation and d.denotation in by_denotation:
            value = by_denotation[d.denotation]
        elif d.dim_param is not None and d.dim_param in by_name:
            value = by_name[d.dim_param]
        elif d.dim_param is not None and d.dim_param in names:
            value = names[d.dim_param]
        if value is None:
            dims.append(d)
            continue
        if d.is_static and d.dim_value != value:
            raise OnnxkitError(f"free dimension override {value} contradicts the declared extent {d.dim_value}")
        if d.dim_param is not None:
            names[d.dim_param] = value
        dims.append(ir.Dim(dim_value=int(value), denotation=d.denotation))
        changed = True
    return records.evolve(t, shape=ir.Shape(dims)) if changed else t


def override_free_dimensions(g: ir.Graph, by_name: dict, by_denotation: dict) -> ir.Graph:
    """``g`` with the inputs' dimensions named (or denoted) in the overrides fixed, and the
    same variables fixed in the outputs."""
    names: dict = {}
    inputs = [records.evolve(vi, type=_fixed(vi.type, by_name, by_denotation, names)) for vi in g.input]
    outputs = [records.evolve(vi, type=_fixed(vi.type, {}, {}, names)) for vi in g.output]
    return records.evolve(g, input=inputs, output=outputs)


def _supplied(t, inits: dict, files: dict):
    """Initializer ``t``, or the value the session options supply for it."""
    from ..ir.tensor import numpy_to_tensor

    if t.name in inits:
        return numpy_to_tensor(inits[t.name], t.name, t.data_type)
    if t.is_external:
        ref = {e.key: e.value for e in t.external_data}
        data = files.get(ref.get("location"))
        if data is not None:
            from ..dtypes import ELEMENT_TYPES

            et = ELEMENT_TYPES.get(t.data_type)
            if et is None or et.dtype is None or et.tag == 8:
                raise OnnxkitError(f"initializer {t.name!r}: external data of element type {t.data_type} "
                                   "cannot be given in memory")
            offset = int(ref.get("offset", 0))
            count = int(np.prod(t.dims, dtype=np.int64))
            length = int(ref.get("length", count * np.dtype(et.dtype).itemsize))
            if offset < 0 or offset + length > len(data) or length != count * np.dtype(et.dtype).itemsize:
                raise OnnxkitError(f"initializer {t.name!r}: offset {offset} and length {length} do not fit the "
                                   f"{len(data)} octets given for {ref.get('location')!r}")
            arr = np.frombuffer(data, dtype=et.dtype, count=count, offset=offset).reshape(t.dims)
            return numpy_to_tensor(arr, t.name, t.data_type)
    return t


def __getattr__(name):
    """:class:`OrtEpAssignedNode`, defined in :mod:`.surface_records` on first use."""
    if name == "OrtEpAssignedNode":
        from . import surface_records

        return surface_records.OrtEpAssignedNode
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
