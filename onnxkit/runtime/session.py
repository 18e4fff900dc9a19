"""``InferenceSession``: evaluate a model (Clause 8) with onnxruntime's Python API.

    sess = onnxkit.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    outputs = sess.run(None, {"X": x})                        # list, in graph output order
    [(i.name, i.type, i.shape) for i in sess.get_inputs()]

The constructor is onnxruntime's, ``InferenceSession(path_or_bytes, sess_options=None,
providers=None, provider_options=None, **onnxkit_options)``; the onnxkit options are
``backend`` (overrides ``providers``; a str second argument is read as it too), ``registry``,
``seed``, ``limits``, ``validate`` and ``external_data``.  Creating a session loads the model,
validates it (15.5), binds every node and raises :class:`UnsupportedOperatorError` listing
*every* operator it cannot evaluate (4.4, 16.1) — never halfway through a run.  ``run``
checks the feed against the declared inputs (element type, rank, static extents, and each
dimension variable bound to one extent across all inputs, 6.5.2); an initializer that is also
an input is a default that may be overridden (:meth:`get_overridable_initializers`), one
that is not is a constant that may not be fed (7.2).  Outputs are fresh arrays: they alias
neither a feed nor anything the session keeps.  A session pickles as its model's bytes and
options, and plans again when unpickled.

The validation policy (:mod:`onnxkit.runtime.policy`): a checker error refuses the model; a
warning is reported once and the model runs, unless ``strict=True`` (Clause 8.6 to the
letter).  A dimension variable fed with two extents, and an output contradicting its declared
type or shape, are likewise warnings by default and errors under ``strict``.  STRING values
go in as ``str`` or ``bytes`` and come out as ``str`` (:mod:`onnxkit.runtime.strings`).
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from onnxkit import records
import numpy as np

from .. import ir
from ..dtypes import ELEMENT_TYPES, from_numpy_dtype
from ..ir.types import type_string
from ..errors import LimitExceeded, OnnxkitError, UnsupportedOperatorError, ValidationError
from ..limits import DEFAULT_LIMITS, Limits
from ..log import get_logger, log_plugin_faults, quiet, severity_to_level
from ..registry import get_registry
from .arena import keep_freed_memory
from .bodies import cold_record, planning_cold
from .checked import CheckedSignatures
from .gc_pause import collection_paused
from .feed_table import FeedTable
from .feeds import InputError, coerce_feed, fresh_outputs, is_torch_backend, to_backend, to_host
from .options import SessionOptions, missing_backend_message, provider_of
from .plan import Planner
from .plans import PlanSet
from .policy import Bindings, OutputCheck, Reporter, admit, read_as_onnxruntime
from .providers import choose_backends
from .session_ort import OrtSessionSurface
from .state import Profiler, RunState, check_profile_prefix
from .strings import to_octets, to_text
from .threads import SPLIT_KERNELS_KEY, blas_limit, calls_products, operators_of, splits_kernels, uses_blas

if TYPE_CHECKING:
    from .surface_records import ModelMetadata, NodeArg

__all__ = ["InferenceSession", "InputError", "NodeArg", "run_model"]


def _arg(vi: ir.ValueInfo) -> NodeArg:
    from .surface_records import NodeArg

    t = vi.type
    shape = None
    if isinstance(t, (ir.TensorType, ir.SparseTensorType)) and t.shape is not None:
        shape = list(t.shape.values)
    elif isinstance(t, (ir.MapType, ir.SequenceType, ir.OptionalType)):
        shape = []  # onnxruntime: a map, sequence or optional has the empty shape
    return NodeArg(vi.name, type_string(t), shape, t)


class InferenceSession(OrtSessionSurface):
    """Evaluates one model on one backend.  Planned once; ``run`` may be called many times.

    ``path_or_bytes``: a file path, the model's octets, or an :class:`onnxkit.ir.Model`.
    ``sess_options``: a :class:`SessionOptions`.  ``providers``: onnxruntime provider names
    in order of preference (or ``(name, options)`` pairs); the first whose backend is
    installed and can evaluate every operator is used, ``CPUExecutionProvider`` last of all
    (onnxruntime's fallback).  A name that is neither an onnxruntime provider nor an onnxkit
    backend raises :class:`OnnxkitError`.

    ``own_data`` (default True): the session keeps copies of what it reads from the model
    file and from external data files, so rewriting or truncating them under a live session
    cannot change results or fault (SIGBUS).  ``own_data=False`` keeps zero-copy views of the
    mapped files instead (less memory; the files must then not change while the session lives).
    With ``own_data`` the session also keeps an aligned copy of each tensor of the model whose
    octets do not start at a multiple of its element size (raw data sits at any offset of a
    model file; numpy's fast loops and BLAS skip unaligned data).
    ``allow_outside``: passed to :func:`onnxkit.load` (Clause 15.3) when the model is a path.
    """

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **onnxkit_options):
        if isinstance(sess_options, str):  # InferenceSession(model, "gpu"): onnxkit's positional backend
            onnxkit_options.setdefault("backend", sess_options)
            sess_options = None
        if sess_options is not None and not isinstance(sess_options, SessionOptions):
            raise OnnxkitError(f"sess_options must be an onnxkit.SessionOptions, not {type(sess_options).__name__}")
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        self._ort_prepare(path_or_bytes, onnxkit_options)  # onnxruntime's keywords (session_ort)
        providers, provider_options = self._providers_from_options(providers, provider_options)
        self._providers_arg = (providers, provider_options)
        self._onnxkit_options = dict(onnxkit_options)
        with collection_paused():  # the collector would run ~85 times here and free little (gc_pause)
            self._setup(path_or_bytes, providers, provider_options, **onnxkit_options)

    def _setup(self, model, providers, provider_options, backend: Optional[str] = None, *, registry=None,
               seed: Optional[int] = None, limits: Optional[Limits] = None, validate: bool = True,
               external_data: str = "lazy", base_dir: Optional[str] = None, strict: bool = False,
               allow_outside: bool = False, own_data: bool = True) -> None:
        from ..api import load

        so = self._sess_options
        self._log_level = severity_to_level(so.log_severity_level)
        if so.enable_cpu_mem_arena:
            keep_freed_memory()  # freed buffers reused, not mapped afresh each run (:mod:`.arena`)
        limits = limits if limits is not None else (so.limits if so.limits is not None else DEFAULT_LIMITS)
        self._profile_lock = threading.Lock()  # end_profiling from several threads: one writes the trace
        self._profiler = Profiler(check_profile_prefix(so.profile_file_prefix), "") if so.enable_profiling else None
        begin = self._profiler.now_us() if self._profiler else 0.0
        t0 = time.perf_counter()
        if not isinstance(model, ir.Model):
            if isinstance(model, (bytearray, memoryview)):
                model = bytes(model)
            # own_data: the file is read, not mapped, so rewriting or truncating it cannot reach the session
            model = load(model, external_data=external_data, limits=limits, base_dir=base_dir,
                         allow_outside=allow_outside, copy=own_data)
            self._log("load", 20, "loaded model %r (%d nodes) in %.1f ms", model.graph.name if model.graph else "",
                      len(model.graph.node) if model.graph else 0, (time.perf_counter() - t0) * 1e3)
        model = self._ort_model(model)  # free dimension overrides, initializers from the options
        if self._profiler:
            self._profiler.session_event("model_loading", begin)
        self.model = model
        self.registry = registry or get_registry()
        log_plugin_faults(self.registry)
        self.limits = limits
        self.strict = strict
        if model.graph is None:
            raise ValidationError([], "the model has no graph (Clause 5.3.1)")
        inferred = self._validate() if validate else None
        self._fallback = True
        # what onnxruntime accepts, read as it reads it (the checker warned of each; strict refused them)
        model = self.model = read_as_onnxruntime(model, self.registry, limits)
        from .optimizer import session_disabled

        #: the passes off: ``session.disable_passes``'s, and the opt-in passes ``session.enable_passes`` does not name
        self._disabled = session_disabled(so._config.get("session.disable_passes"), so._config.get("session.enable_passes"))
        #: what the graph optimizer did (:mod:`onnxkit.runtime.optimizer`); ``.model`` is planned
        self.optimized = self._optimize(model, inferred)
        planner_args = dict(seed=seed, limits=limits, own_data=own_data)
        cold = cold_record()  # the cold first run's record (:mod:`.bodies`): None when the session plans warm
        candidates = choose_backends(backend, providers, provider_options, self.registry, self._log)
        plan = None
        for i, (name, options) in enumerate(candidates):
            if name not in self.registry.backends:
                raise OnnxkitError(missing_backend_message(name, self.registry.backends))
            t0 = time.perf_counter()
            planner = Planner(self.optimized.model, self.registry, name, **planner_args)
            try:
                with planning_cold(cold):
                    plan = planner.compile_model()
            except UnsupportedOperatorError as exc:
                if i + 1 == len(candidates):
                    raise
                self._log("run", 30, "backend %r cannot evaluate %d operator(s); falling back to %r",
                          name, len(exc.operators), candidates[i + 1][0])
                continue
            self._log("plan", 20, "planned %d steps on %r in %.1f ms", len(plan.steps), name,
                      (time.perf_counter() - t0) * 1e3)
            self.backend_name, self._provider_options = name, options
            #: The nodes planned on the backend's fallback: ``(node, op_type, domain, version, why,
            #: runs_on)`` tuples (:class:`~onnxkit.runtime.fallback.Fallback`); empty on ``cpu``.
            self.fallbacks = list(planner.fallbacks)
            break
        self.backend = self.registry.backends[self.backend_name]
        self._host_arrays = bool(getattr(self.backend, "host_arrays", False))
        self._torch = is_torch_backend(self.backend)
        if self._profiler:
            self._profiler.provider = provider_of(self.backend_name)
            self._profiler.session_event("session_initialization", begin)
        g = model.graph
        init_names = {t.name for t in g.initializer} | {s.values.name for s in g.sparse_initializer if s.values}
        self._inputs = [vi for vi in g.input]
        self._feedable = {vi.name: vi for vi in g.input}
        self._required = [vi.name for vi in g.input if vi.name not in init_names]
        self._constants = init_names - set(self._feedable)
        self._outputs = [vi.name for vi in g.output]
        #: outputs declared sparse tensors, returned as onnxruntime returns them (sparse.coo_of_dense)
        self._sparse_outputs = frozenset(vi.name for vi in g.output if isinstance(vi.type, ir.SparseTensorType))
        self._reporter = Reporter(strict, so.log_severity_level)
        self._output_check = OutputCheck(g.output, self._reporter)
        self._checked = CheckedSignatures([vi.name for vi in g.input], self._outputs, self._output_check,
                                          self._reporter)
        #: the feed checks of a new signature in one pass (None: the full checks every time)
        self._feed_table = FeedTable.of(self._inputs, self._required) if self._host_arrays and not self._torch else None
        consumed = self.optimized.consumed_defaults
        #: every plan of the session and the choice of one per run (:mod:`.plans`)
        self._plans = PlanSet(self.optimized.model, model, self.registry, self.backend_name, planner_args, plan, cold,
                              int(so.graph_optimization_level), self._disabled,
                              [i for i, vi in enumerate(self._inputs) if vi.name in consumed], self._host_arrays,
                              self._log)
        self._threads = int(so.intra_op_num_threads or 0)
        operators = operators_of(model)
        self._uses_blas = uses_blas(model, self.registry, operators)  # no BLAS user anywhere: nothing to limit per run
        #: whether kernels split their own loops across the run's threads (threads.splits_kernels)
        self._split_kernels = splits_kernels(so._config.get(SPLIT_KERNELS_KEY),
                                             calls_products(model, self.registry, operators))
        if so.optimized_model_filepath:
            try:
                from .optimizer.portable import FORMAT_KEY, saved_form

                self._save_optimized(saved_form(self.optimized.model, so._config.get(FORMAT_KEY)),
                                     so.optimized_model_filepath)
            except OnnxkitError as exc:  # onnxkit.save refused the target, or writing it failed
                raise OnnxkitError(f"SessionOptions.optimized_model_filepath: {exc}") from None

    @property
    def plan(self):
        """The plan the session's runs are served from (:class:`~onnxkit.runtime.plans.PlanSet`
        chooses, per run, this plan, its IR < 4 plain variant or a specialized one of it)."""
        return self._plans.plan

    @property
    def _specializer(self):
        return self._plans.specializer

    @property
    def _cold(self):
        return self._plans.cold

    def wait_for_warm_plan(self, timeout: Optional[float] = None) -> bool:
        """Wait for the warm plan that a promotion sets up in the background (the ``tiered``
        first-run policy: :mod:`onnxkit.runtime.plans`) and serve the next runs from it.  True
        when the session's runs are served by its warm plan from now on (also where it plans warm
        from the start or was switched already); False when it is still on its cold plan: no
        setup has started yet (its runs have not spent the estimate), the setup failed (reported
        by a ``RuntimeWarning``), or ``timeout`` seconds passed first.  A run in progress keeps
        the plan it started with."""
        return self._plans.wait_warm(timeout)

    def _optimize(self, model: ir.Model, inferred=None):
        """The graph optimizer at the session's level, on a copy of ``model`` (never ``model``
        itself); ``inferred``: the checker's inference result, where it gives the undeclared types."""
        from .optimizer import optimize

        so = self._sess_options
        t0 = time.perf_counter()
        types = inferred.undeclared_types(model) if inferred is not None else None
        if types is None and inferred is not None:  # the view infers without the declarations, reusing these results
            types = inferred
        result = optimize(model, int(so.graph_optimization_level), self.registry, self._disabled, types)
        if result.changed:
            self._log("plan", 20, "graph optimizer: %s in %.1f ms",
                      ", ".join(f"{k} {v}" for k, v in result.rewrites.items() if v), (time.perf_counter() - t0) * 1e3)
        return result

    def _log(self, part: str, level: int, msg: str, *args) -> None:
        """Log on ``onnxkit.<part>`` when ``level`` reaches the session's ``log_severity_level``."""
        if level >= self._log_level:
            log = get_logger(part)
            if log.isEnabledFor(level):
                log.log(level, msg, *args)

    def _validate(self):
        """Check the model (Clause 10) under the validation policy; returns the checker's
        inference result (None where it ran none), which the optimizer reads."""
        from ..checker import check_model

        inferred = []
        report = check_model(self.model, registry=self.registry, limits=self.limits, on_inference=inferred.append)
        over = [d for d in report.errors if d.code == "limit-exceeded"]
        if over:  # a documented limit refuses the model: the error says which (15.4)
            raise LimitExceeded(f"the model is refused: {over[0]}", limit=_limit_named(over[0].message),
                                path=str(over[0].location))
        for d in report.warnings:
            self._log("check", 20, "%s", d)
        admit(report, self.strict, quiet(self._sess_options.log_severity_level))  # refuses, or reports the warnings once (the validation policy)
        return inferred[-1] if inferred else None

    # -- onnxruntime-style description -----------------------------------------------------
    def get_inputs(self) -> list:
        """The inputs a caller must supply: graph inputs without an initializer (IR >= 4 style)."""
        required = set(self._required)
        return [_arg(vi) for vi in self._inputs if vi.name in required]

    def get_overridable_initializers(self) -> list:
        """Graph inputs that have an initializer: defaults a caller may override (7.2).

        As onnxruntime, none for a model of IR version < 4, where every initializer had to be
        listed as an input (the session still accepts a fed value for one)."""
        if self.model.ir_version < 4:
            return []
        required = set(self._required)
        return [_arg(vi) for vi in self._inputs if vi.name not in required]

    def get_outputs(self) -> list:
        return [_arg(vi) for vi in self.model.graph.output]

    def get_modelmeta(self) -> ModelMetadata:
        from .surface_records import ModelMetadata

        m = self.model
        return ModelMetadata(producer_name=m.producer_name, graph_name=m.graph.name, domain=m.domain,
                             description=m.doc_string, graph_description=m.graph.doc_string,
                             version=m.model_version, custom_metadata_map={p.key: p.value for p in m.metadata_props})

    def get_providers(self) -> list:
        """The provider (backend) the session runs on: ``['CPUExecutionProvider']`` for ``cpu``."""
        return [provider_of(self.backend_name)]

    def get_provider_options(self) -> dict:
        """``{provider: {option: str}}`` of the provider in use."""
        return {provider_of(self.backend_name): dict(self._provider_options)}

    def get_session_options(self) -> SessionOptions:
        return self._sess_options

    def disable_fallback(self) -> None:
        """Kept for onnxruntime compatibility: the backend was chosen when the session was created."""
        self._fallback = False

    def enable_fallback(self) -> None:
        self._fallback = True

    # -- running ------------------------------------------------------------------------------
    def run(self, output_names: Optional[Sequence[str]], input_feed: Mapping[str, Any], run_options=None) -> list:
        """Evaluate; returns the requested outputs (all when ``output_names`` is None or empty)
        in order, as fresh writable numpy arrays (sequences as lists, maps as dicts)."""
        if run_options is not None and getattr(run_options, "_active_adapters", None):
            from .lora import with_adapters

            input_feed = with_adapters(input_feed, run_options)  # LoRA adapters: onnxkit.runtime.lora
        seen = self._checked.seen(input_feed) if self._host_arrays else None
        key = entry = None
        if seen is not None:
            values, key, entry = seen
        if entry is None:  # not a signature seen before: the feed checks
            passed = self._feed_table.check(input_feed) if self._feed_table is not None else None
            if passed is None:
                values, bindings = self._feed_values(input_feed)
                return self._fetch(output_names, self._evaluate(values, run_options), host=True, feeds=values,
                                   bindings=bindings)
            # a new signature that passes every feed check (a decoder's growing past)
            values, bindings = passed[0], Bindings(self._reporter, InputError)
            bindings.extents = passed[1]
            entry = self._checked.remember(values, bindings, key)
            if entry is None:  # not remembered (a value that is not a numeric numpy array)
                return self._fetch(output_names, self._evaluate(values, run_options), host=True, feeds=values,
                                   bindings=bindings)
        # a signature that passed every feed check (just now, or before: then not checked again)
        outs = self._evaluate(values, run_options, key)
        if not output_names and not self._sparse_outputs:
            fetched = self._checked.fetch(outs, values, entry, self._plans.kept_ids)
            if fetched is not None:
                return fetched
        return self._fetch(output_names, outs, host=True, feeds=values, bindings=entry.bindings())

    def run_with_ort_values(self, output_names, input_dict_ort_values, run_options=None) -> list:
        """Like :meth:`run` with :class:`OrtValue` feeds; returns a list of :class:`OrtValue`
        (on the gpu backend their tensors stay on the device)."""
        from .ortvalue import OrtValue

        if run_options is not None and getattr(run_options, "_active_adapters", None):
            from .lora import with_adapters

            input_dict_ort_values = with_adapters(input_dict_ort_values, run_options)
        values, bindings = self._feed_values(input_dict_ort_values)
        outs = self._evaluate(values, run_options)
        return [OrtValue(v) for v in self._fetch(output_names, outs, host=not self._torch, feeds=values,
                                                 bindings=bindings)]

    def io_binding(self):
        """An :class:`IOBinding` of this session (see :meth:`run_with_iobinding`)."""
        from .ortvalue import IOBinding

        return IOBinding(self)

    def run_with_iobinding(self, iobinding, run_options=None) -> None:
        """Run with the inputs bound to ``iobinding``; its outputs are set on it."""
        iobinding._run(run_options)

    def _feed_values(self, input_feed) -> tuple:
        """The feed checked against the declared inputs, converted to the backend, in input order,
        and the dimension variables it bound (:class:`~onnxkit.runtime.policy.Bindings`)."""
        if not isinstance(input_feed, Mapping):
            raise InputError(f"input_feed must be a dict {{input name: value}}, got {type(input_feed).__name__}; "
                             f"inputs: {[n for n in self._required]}")
        for name in input_feed:
            if name in self._constants:
                raise InputError(f"{name!r} is a constant of the model (an initializer that is not an input) "
                                 "and cannot be fed (Clause 7.2)")
            if name not in self._feedable:
                raise InputError(f"{name!r} is not an input of the model; inputs: {[vi.name for vi in self._inputs]}")
        missing = [n for n in self._required if n not in input_feed]
        if missing:
            raise InputError(f"missing input(s) {missing}: Required inputs ({missing}) are missing from input feed "
                             f"({list(input_feed)}) (Clause 8.1)")
        bindings = Bindings(self._reporter, InputError)
        conv = self.backend.asarray or (lambda a: a)
        values = []
        for vi in self._inputs:
            if vi.name in input_feed:
                checked, actual = coerce_feed(vi.name, input_feed[vi.name], vi.type, self._torch)
                v = _check_value(vi.name, checked, vi.type, bindings, self.limits)
                values.append(to_backend(v if actual is None else actual, conv))
            else:
                values.append(None)
        if self._host_arrays:
            self._checked.remember(values, bindings)
        return values, bindings

    def _evaluate(self, values: list, run_options, sig=None) -> list:
        """The outputs of a run of ``values`` (by input position) on the plan the session's
        :class:`~onnxkit.runtime.plans.PlanSet` chooses (``sig``: the feeds' signature, where known)."""
        return self._plans.run(values, lambda plan, vals: self._run_in_threads(plan, vals, run_options), sig)

    def _run_in_threads(self, plan, values: list, run_options) -> list:
        """Run ``plan`` with BLAS limited to ``intra_op_num_threads`` (:mod:`onnxkit.runtime.threads`)."""
        if not self._uses_blas:
            return self._run_plan(plan, values, run_options)
        with blas_limit(self._threads, self._split_kernels):
            return self._run_plan(plan, values, run_options)

    def _run_plan(self, plan, values: list, run_options) -> list:
        profiler = self._profiler
        if run_options is None and profiler is None:
            return plan.run(values)
        begin = profiler.now_us() if profiler else 0.0
        t0 = time.perf_counter()
        outs = plan.run(values, state=RunState(run_options, profiler))
        if profiler:
            profiler.session_event("model_run", begin)
        self._log("run", 10, "run %s took %.2f ms", getattr(run_options, "logid", "") or "", (time.perf_counter() - t0) * 1e3)
        return outs

    def _fetch(self, output_names, outs: list, host: bool, feeds: Sequence = (), bindings=None) -> list:
        """The outputs asked for, by name; on the host, each the caller's own (see ``fresh_outputs``),
        STRING elements as ``str``, checked against their declarations (the validation policy)."""
        wanted = self._outputs if not output_names else list(output_names)
        by_name = dict(zip(self._outputs, outs))
        result = []
        for n in wanted:
            if n not in by_name:
                raise InputError(f"{n!r} is not an output of the model; outputs: {self._outputs}")
            v = by_name[n]
            if n in self._sparse_outputs:  # on the host whatever the backend, as onnxruntime's SparseTensor
                from .sparse import SparseTensor, coo_of_dense

                dense = v if isinstance(v, SparseTensor) else to_text(to_host(v, self.backend.to_numpy))
                result.append(coo_of_dense(dense))
                continue
            result.append(to_text(to_host(v, self.backend.to_numpy)) if host else v)
        if not host:  # device tensors: one the session keeps (a constant, a default) or a feed, or a view, is cloned
            return _fresh_tensors(result, self._plans.kept_ids | {id(v) for v in feeds if v is not None})
        if bindings is not None and self._output_check.checks:
            self._output_check(wanted, result, bindings)
        return fresh_outputs(result, self._plans.kept_ids, feeds)

    # -- profiling ----------------------------------------------------------------------------
    def end_profiling(self) -> str:
        """Write the Chrome trace of this session and stop profiling; returns its file name
        (``''`` when profiling was not enabled or has stopped: of calls from several threads at
        once, one writes the trace and the others return ``''``, as onnxruntime's later calls)."""
        with self._profile_lock:
            profiler, self._profiler = self._profiler, None
        if profiler is None:
            return ""
        path = profiler.write(os.getcwd())
        self._log("run", 20, "profile written to %s (%d events)", path, len(profiler.events))
        return path

    def get_profiling_start_time_ns(self) -> int:
        """Wall-clock time (ns since the epoch) at which profiling started; 0 when it is off."""
        profiler = self._profiler
        return profiler.start_wall_ns if profiler else 0

    # -- pickling and display -----------------------------------------------------------------
    def __reduce__(self):
        from ..api import to_bytes

        options = dict(self._onnxkit_options)
        if options.get("registry") is get_registry():
            del options["registry"]
        if options.get("registry") is not None:
            raise OnnxkitError("a session built with its own registry= cannot be pickled (plugins are modules); "
                               "register the plugins in the receiving process and build the session there")
        options.setdefault("backend", self.backend_name)
        options["base_dir"] = self.model.base_dir
        return (_restore, (to_bytes(self.model), self._sess_options, self._providers_arg, options))

    def __repr__(self) -> str:
        def sig(vi):
            t = vi.type
            return f"{vi.name}: {t}" if t is not None else vi.name

        ins = ", ".join(sig(vi) for vi in self._inputs if vi.name in set(self._required))
        outs = ", ".join(sig(vi) for vi in self.model.graph.output)
        name = self.model.graph.name or "graph"
        return (f"InferenceSession({name!r}, provider={self.get_providers()[0]}, inputs=[{ins}], "
                f"outputs=[{outs}], steps={len(self.plan.steps)})")


def _restore(data: bytes, sess_options, providers_arg, options):
    """Unpickle a session: load the model bytes and plan again."""
    providers, provider_options = providers_arg
    return InferenceSession(data, sess_options, providers, provider_options, **options)


def _limit_named(message: str) -> str:
    """The name of the :class:`Limits` field a ``limit-exceeded`` diagnostic names, or ''."""
    return next((f.name for f in records.fields(Limits) if f.name in message), "")


def _fresh_tensors(values: list, kept_ids: frozenset) -> list:
    """Device outputs (torch tensors) the caller may write without reaching a later run, a feed or
    another output: as ``fresh_outputs`` for host arrays, a kept value, a feed, a view or a
    repeated tensor is cloned (a tensor kept by the session must not be handed out: an
    OrtValue's ``to_torch()`` shares its memory)."""
    seen: set = set()
    out = []
    for v in values:
        tensor = hasattr(v, "clone") and hasattr(v, "_base")
        if tensor and (id(v) in kept_ids or id(v) in seen or v._base is not None):
            v = v.clone()
        seen.add(id(v))
        out.append(v)
    return out


def _as_array(name, value) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (np.generic, int, float, bool, complex, str, bytes)):
        return np.asarray(value)
    raise InputError(f"input {name!r}: expected a numpy array, got {type(value).__name__}")


def _check_value(name, value, t, bindings: Bindings, limits: Limits):
    """Check one fed value against its declared type (6.5.2: variables bound consistently)."""
    if t is None or isinstance(t, (ir.UndefinedType, ir.OpaqueType)):
        return value
    if isinstance(t, ir.OptionalType):
        return None if value is None else _check_value(name, value, t.elem_type, bindings, limits)
    if isinstance(t, ir.SequenceType):
        if not isinstance(value, (list, tuple)):
            raise InputError(f"input {name!r}: expected a sequence (list), got {type(value).__name__}")
        return [_check_value(f"{name}[{i}]", v, t.elem_type, bindings, limits) for i, v in enumerate(value)]
    if isinstance(t, ir.MapType):
        if not isinstance(value, dict):
            raise InputError(f"input {name!r}: expected a map (dict), got {type(value).__name__}")
        return {k: _check_value(f"{name}[{k!r}]", v, t.value_type, bindings, limits) for k, v in value.items()}
    if isinstance(t, ir.SparseTensorType):
        return value
    arr = _as_array(name, value)
    want = ELEMENT_TYPES.get(t.elem_type)
    if want is not None:
        if want.tag == 8:
            if arr.dtype.kind == "V":  # numpy.void elements: their octets, as onnxruntime reads them
                arr = np.array([bytes(x.tobytes()) for x in arr.ravel()], dtype=object).reshape(arr.shape)
            if arr.dtype.kind not in "OUS":
                raise InputError(f"input {name!r}: declared tensor(string), got dtype {arr.dtype}")
            arr = to_octets(arr)
        else:
            try:
                got = from_numpy_dtype(arr.dtype)
            except OnnxkitError:
                got = None
            if got is None or got.tag != want.tag:
                raise InputError(f"input {name!r}: declared {type_string(t)}, got numpy dtype {arr.dtype}")
    if t.shape is not None:
        dims = t.shape.values
        if len(dims) != arr.ndim:
            raise InputError(f"input {name!r}: declared rank {len(dims)} {list(dims)}, got shape {list(arr.shape)}")
        for axis, (d, n) in enumerate(zip(dims, arr.shape)):
            if isinstance(d, int) and d != n:
                raise InputError(f"input {name!r}: axis {axis} must be {d}, got shape {list(arr.shape)}")
            if isinstance(d, str):
                bindings.bind(d, n, f"input {name!r} axis {axis}")
    return arr


def run_model(model, inputs: Mapping[str, Any], backend: str = "cpu", **kwargs) -> dict:
    """One-shot: evaluate ``model`` on ``inputs``; returns ``{output name: value}``."""
    sess = InferenceSession(model, backend=backend, **kwargs)
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, inputs)))


def __getattr__(name):
    """:class:`NodeArg` (and :class:`ModelMetadata`), defined in :mod:`.surface_records` on first use."""
    if name in ("NodeArg", "ModelMetadata"):
        from . import surface_records

        return getattr(surface_records, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
