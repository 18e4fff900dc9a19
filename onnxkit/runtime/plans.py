"""Every plan of one session, and the one place where a run's plan is chosen.

A session's runs are served by one of these plans, chosen per run by one key:

* the *tier*: the cold plan (numpy bodies where a kernel deferred a costly setup:
  :mod:`onnxkit.runtime.bodies`) until its record is due, then the warm plan, made once between
  two runs (a run in progress keeps the plan it started with);
* the *defaults fed*: under IR version < 4 the optimizer may have read an initializer that is
  also an input as a constant; a run that feeds one runs the model as given (the *plain* plan,
  made on first need);
* the *shape class* of the feeds (:class:`~onnxkit.runtime.optimizer.specialize.ShapeClasses`):
  the specializer's plan of that class, where the ``specialize`` pass is on; the cold plan is not
  specialized while a warm plan will replace it.

Inside a plan, :class:`~onnxkit.runtime.plan.GraphPlan` itself picks its folded-defaults variant
while no default is fed.  :class:`PlanSet` owns the plans, the specializer and the identities of
the values they keep (an output that is one is copied before it is handed out); the session asks
it for nothing but :meth:`PlanSet.run`.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Optional

from .bodies import planning_cold
from .optimizer.specialize import signature
from .plan import Planner, kept_value_ids


class PlanSet:
    """The plans of one session on one backend (see the module docstring).

    ``model``: the optimized model the plans run; ``given``: the model as given (for the plain
    plan); ``plan``: the first plan, planned cold under ``cold`` (a
    :class:`~onnxkit.runtime.bodies.FirstRun`, None when the session plans warm); ``level`` / ``disabled``: the optimization level and the passes switched off
    (parsed once by the session); ``consumed``: positions of the inputs whose initializer the
    optimizer read as a constant; ``host_arrays``: whether the backend's values are numpy
    arrays (only those are specialized); ``log(part, level, msg, *args)``: the session's log."""

    def __init__(self, model, given, registry, backend_name: str, planner_args: dict, plan, cold,
                 level: int, disabled: frozenset, consumed: list, host_arrays: bool, log: Callable):
        self.model, self.given, self.registry, self.backend_name = model, given, registry, backend_name
        self.planner_args, self.level, self.disabled = planner_args, level, disabled
        self.consumed, self.host_arrays, self.log = consumed, host_arrays, log
        self.cold = cold
        self._lock = threading.Lock()
        self.plain = None
        with planning_cold(cold):
            self._passes(plan)
            self.kept_ids = kept_value_ids(plan)
            self.plan = plan
            self.specializer = self._specializer_for()

    # -- making plans ---------------------------------------------------------------------------
    def _passes(self, plan) -> None:
        """The plan passes of the optimizer's table (``onehot``, ``epilogue``) on ``plan``."""
        from .optimizer import run_plan_passes

        run_plan_passes(plan, self.level, self.disabled,
                        lambda name, counted: self.log("plan", 20, "%s: %s", name, counted))

    def _specializer_for(self):
        """The :class:`~onnxkit.runtime.optimizer.specialize.Specializer` of the current plan, or
        None when the ``specialize`` pass is off or cannot apply (values that are not numpy
        arrays, a graph that reads its own structure)."""
        from .optimizer import plan_pass_on, reads_its_graph
        from .optimizer.specialize import Specializer

        if not plan_pass_on("specialize", self.level, self.disabled):
            return None
        if not self.host_arrays or reads_its_graph(self.model.graph):
            return None
        names = [vi.name for vi in self.model.graph.input]

        def varies(position: int, axis: int, extents) -> None:
            self.log("plan", 20, "specialize: input %r axis %d varies across runs (%s): its plans serve every "
                     "extent there", names[position] if position < len(names) else position, axis, extents)

        return Specializer(self.model, self.plan, self.registry, self.planner_args.get("limits"), log=varies)

    def _plain_for(self, values: list):
        """The optimized plan, or, when a run feeds an IR < 4 input whose initializer the
        optimizer read as a constant, the plan of the model as given (made on first need)."""
        if not any(values[i] is not None for i in self.consumed):
            return self.plan
        if self.plain is None:
            plain = Planner(self.given, self.registry, self.backend_name, **self.planner_args).compile_model()
            self._passes(plain)
            self.kept_ids = self.kept_ids | kept_value_ids(plain)
            self.plain = plain
        return self.plain

    def _promote(self, cold) -> None:
        """Replace the cold plan (and its specializer) by a warm one, once, between runs."""
        with self._lock:
            if self.cold is not cold:
                return
            if cold.deferred:
                self.log("plan", 20, "planning again with the bodies the cold plan deferred (runs spent %.3f s on it, "
                         "setup estimated at %.3f s): %s", cold.spent, cold.cost, ", ".join(cold.deferred))
                planner = Planner(self.model, self.registry, self.backend_name, **self.planner_args)
                plan = planner.compile_model()
                self._passes(plan)
                self.kept_ids = self.kept_ids | kept_value_ids(plan)
                self.plain, self.plan = None, plan
                self.specializer = self._specializer_for()
            self.cold = None

    def promote(self) -> None:
        """Make the warm plan now (a long-running program's state, for tests and tools)."""
        if self.cold is not None:
            self._promote(self.cold)

    # -- running ----------------------------------------------------------------------------------
    def run(self, values: list, runner: Callable, sig: Optional[tuple] = None) -> list:
        """Run ``values`` (the feeds by input position) on the plan their key chooses, through
        ``runner(plan, values)`` (the session's: threads, profiling); ``sig``: the feeds'
        signature where the caller has it."""
        cold = self.cold
        if cold is not None:
            if not cold.due():
                start = time.perf_counter()
                try:
                    with planning_cold(cold):
                        return self._run(values, runner, sig, specialize=not cold.deferred)
                finally:
                    cold.ran_for(time.perf_counter() - start)
            self._promote(cold)
        return self._run(values, runner, sig, specialize=True)

    def _run(self, values: list, runner: Callable, sig, specialize: bool) -> list:
        plan = self._plain_for(values) if self.consumed else self.plan
        spec = self.specializer if specialize else None
        recording = False
        if spec is not None and plan is self.plan:
            if sig is None:
                sig = signature(values)
            if sig is not None:
                plan, recording = spec.plan_for(sig)
        outs = runner(plan, values)
        if recording:
            special = spec.complete(sig, plan)
            if special is not None:  # its folded values are kept: outputs that are one are copied
                self.kept_ids = self.kept_ids | kept_value_ids(special)
        return outs
