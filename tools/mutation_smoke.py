"""Mutation smoke check: plant known bugs one at a time and show the test suite kills each.

Each mutant is a small textual patch of one source file (the ``old`` text must occur exactly
once).  For each, the repository is copied to a temporary folder, the patch applied there (the
working tree is never touched), and a targeted subset of the tests run against the copy; the
mutant is *killed* when pytest reports failing tests, *survived* when they all pass, and an
*error* when pytest could not run them (collection error, no tests).  The ONNX 1-3 vectors are
shared with the working tree (``$ONNXKIT_VECTORS``), made first if missing.

    python tools/mutation_smoke.py              # every mutant
    python tools/mutation_smoke.py conv-ceil    # the mutants whose name contains a word
    python tools/mutation_smoke.py --baseline   # first check each test subset passes unmutated

Exit status 0 when every mutant selected is killed.  It needs the test extras (onnx, torch) and
takes a few minutes; it is not part of ``pytest``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PLUGINS = ("default_domain", "ml_domain", "cpu_backend", "gpu_backend")
CPU_NODE_GATE = "tests/test_conformance.py::test_vectors_on_cpu_show_the_stated_figures[node]"
GPU_NODE_GATE = "tests/test_conformance_gpu.py::test_vectors_on_gpu_show_the_stated_figures[node]"
#: the qdq pass's tests, the corpus model left out (it quantizes a corpus model the copy would rebuild)
QDQ_TESTS = ("tests/test_opt_qdq.py", "-k", "not corpus")


@dataclass(frozen=True)
class Mutant:
    """A planted bug: replace ``old`` by ``new`` in ``path``; ``tests`` (pytest arguments) must fail."""

    name: str
    path: str
    old: str
    new: str
    tests: tuple


MUTANTS = (
    Mutant("conv-ceil-mode", "plugins/default_domain/onnxkit_default_domain/inference/nn_geometry.py",
           "if (o - 1) * s >= d + begin[i]:",
           "if (o - 1) * s > d + begin[i]:",
           (CPU_NODE_GATE, GPU_NODE_GATE, "plugins/gpu_backend/tests/test_nn.py", "plugins/cpu_backend/tests/test_nn.py")),
    Mutant("stft-frame-count", "plugins/default_domain/onnxkit_default_domain/inference/signal.py",
           "frames = (signal_length - frame_length) // step + 1 if known else None",
           "frames = (signal_length - frame_length) // step if known else None",
           (CPU_NODE_GATE, "plugins/cpu_backend/tests/test_misc_kernels.py")),
    Mutant("integer-division", "plugins/default_domain/onnxkit_default_domain/kernels/elementwise.py",
           "return q + xp.astype(fix, q.dtype)",
           "return q",
           ("plugins/gpu_backend/tests/test_elementwise.py",
            "plugins/default_domain/tests/test_kernels_elementwise.py")),
    Mutant("broadcast-alignment", "onnxkit/shapes.py",
           "padded = [(1,) * (rank - len(s)) + s for s in shapes]",
           "padded = [s + (1,) * (rank - len(s)) for s in shapes]",
           ("tests/test_types.py", "tests/inference/test_rules.py")),
    Mutant("varint-ten-octets", "onnxkit/wire/reader.py",
           "if shift >= 70:",
           "if shift > 70:",
           ("tests/test_wire_rules.py",)),
    Mutant("packed-varint-ten-octets", "onnxkit/wire/varint.py",
           "if longest > 10:",
           "if longest > 11:",
           ("tests/test_wire_rules.py",)),
    Mutant("external-parent-directory", "onnxkit/storage.py",
           'if ".." in parts:',
           'if "..." in parts:',
           ("tests/test_external.py", "tests/test_external_model.py")),
    Mutant("duplicate-definition", "onnxkit/checker/structure.py",
           "if name in defined:",
           "if name in statements:",
           ("tests/checker",)),
    Mutant("duplicate-node-name", "onnxkit/checker/structure.py",
           "if n.name in node_names:",
           "if n.name in producer:",
           ("tests/checker",)),
    Mutant("feed-integer-range", "onnxkit/runtime/feeds.py",
           "bad = lo if lo < bounds[0] else (hi if hi > bounds[1] else None)",
           "bad = lo if lo < bounds[0] else None",
           ("tests/test_feed_conversion.py",)),
    Mutant("feed-integer-range-boundary", "onnxkit/runtime/feeds.py",
           "bad = lo if lo < bounds[0] else (hi if hi > bounds[1] else None)",
           "bad = lo if lo <= bounds[0] else (hi if hi > bounds[1] else None)",
           ("tests/test_feed_conversion.py",)),
    Mutant("iobinding-type-check", "onnxkit/runtime/ortvalue.py",
           "if got != self._np_dtype():",
           "if got.itemsize != self._np_dtype().itemsize:",
           ("tests/test_binding_profiling.py",)),
    # -- the graph optimizer's rules (issue 29: near misses, declared shapes, IR < 4 overrides) --
    Mutant("opt-scalar-rank", "onnxkit/runtime/optimizer/patterns.py",
           "return c.ndim == 0 or (typed[1] is not None and c.ndim <= len(typed[1]))",
           "return True",
           ("tests/test_opt_near_misses.py",)),
    Mutant("opt-scalar-unknown-rank", "onnxkit/runtime/optimizer/patterns.py",
           "(typed[1] is not None and c.ndim <= len(typed[1]))",
           "(typed[1] is None or c.ndim <= len(typed[1]))",
           ("tests/test_opt_near_misses.py",)),
    Mutant("opt-scalar-dtype", "onnxkit/runtime/optimizer/patterns.py",
           "or c.dtype != ELEMENT_TYPES[typed[0]].dtype:",
           "or c.dtype.kind != 'f':",
           ("tests/test_opt_near_misses.py",)),
    Mutant("opt-scalar-tolerance", "onnxkit/runtime/optimizer/patterns.py",
           "SCALAR_RTOL = 1e-6",
           "SCALAR_RTOL = 1e-2",
           ("tests/test_opt_near_misses.py", "tests/test_opt_gelu.py")),
    Mutant("opt-fuse-override", "onnxkit/runtime/optimizer/rules.py",
           "    for c in list(match.constants) + list(read):\n        view.read_constant(c)\n    label",
           "    for c in list(match.constants) + list(read):\n        view.constant(c)\n    label",
           ("tests/test_opt_near_misses.py",)),
    Mutant("opt-gelu-divisor-rank", "onnxkit/runtime/optimizer/rules.py",
           "keeps_shape(view, view.constant(c), subject)",
           "keeps_shape(view, view.constant(c), c)",
           ("tests/test_opt_near_misses.py", "tests/test_opt_gelu.py")),
    Mutant("opt-rule-closed", "onnxkit/runtime/optimizer/rules.py",
           "            if out and any(u.slot < 0 or (id(u.item), u.slot) not in edges for u in view.index.uses(out)):",
           "            if False:",
           ("tests/test_opt_gelu.py", "tests/test_opt_rules.py")),
    Mutant("opt-rule-divisor", "onnxkit/runtime/optimizer/rules.py",
           "target = 1.0 / p.value if inverted else p.value",
           "target = p.value",
           ("tests/test_opt_gelu.py", "tests/test_opt_rules.py")),
    Mutant("opt-rule-scalar-divisor", "onnxkit/runtime/optimizer/rules.py",
           "bind={p.bind: 1.0 / c if inverted else c}",
           "bind={p.bind: c}",
           ("tests/test_opt_rules.py",)),
    Mutant("usedef-set-input", "onnxkit/runtime/usedef.py",
           "            v.uses = [u for u in v.uses if not (u.item is item and u.slot == slot)]",
           "            pass",
           ("tests/test_opt_usedef.py",)),
    Mutant("opt-hardswish-divisor-rank", "onnxkit/runtime/optimizer/hardswish.py",
           "lambda view, match: float_input(view, match[\"x\"]), subject=\"x\"),)",
           "lambda view, match: float_input(view, match[\"x\"])),)",
           ("tests/test_opt_near_misses.py", "tests/test_opt_hardswish.py")),
    Mutant("opt-attention-scalar-rank", "onnxkit/runtime/optimizer/attention.py",
           "RULES = (Rule(\"attention\", PATTERN, _rewrite, _fits, subject=\"q\"),)",
           "RULES = (Rule(\"attention\", PATTERN, _rewrite, _fits),)",
           ("tests/test_opt_near_misses.py", "tests/test_opt_attention.py")),
    Mutant("opt-channel-affine-last-axis", "onnxkit/runtime/optimizer/channel_affine.py",
           "if shape is None or len(shape) != rank - 1 or",
           "if shape is None or len(shape) > rank - 1 or",
           ("tests/test_opt_near_misses.py", "tests/test_opt_channel_affine.py")),
    Mutant("opt-channel-affine-scalar-rank", "onnxkit/runtime/optimizer/channel_affine.py",
           "if value.size == 1 and value.ndim <= rank:",
           "if value.size == 1:",
           ("tests/test_opt_near_misses.py", "tests/test_opt_channel_affine.py")),
    Mutant("opt-channel-affine-override", "onnxkit/runtime/optimizer/channel_affine.py",
           "        view.read_constant(name)\n    node = match",
           "        view.constant(name)\n    node = match",
           ("tests/test_opt_near_misses.py", "tests/test_opt_channel_affine.py")),
    Mutant("opt-identity-override", "onnxkit/runtime/optimizer/identity.py",
           "view.read_constant(node.input[2])",
           "view.constant(node.input[2])",
           ("tests/test_opt_near_misses.py", "tests/test_opt_identity.py")),
    Mutant("opt-declared-types", "onnxkit/runtime/optimizer/view.py",
           "infer_model(undeclared(self.model), self.registry)",
           "infer_model(self.model, self.registry)",
           ("tests/test_opt_near_misses.py", "tests/test_opt_matmul_add.py")),
    Mutant("opt-constant-of-shape-override", "onnxkit/runtime/optimizer/view.py",
           "(list(node.input[:1]) if node is not None and node.op_type == \"ConstantOfShape\" else [])",
           "[]",
           ("tests/test_opt_near_misses.py",)),
    Mutant("opt-matmul-add-rank", "onnxkit/runtime/optimizer/matmul_add.py",
           "or typed[1] is None or len(typed[1]) != 2:",
           "or typed[1] is None:",
           ("tests/test_opt_near_misses.py", "tests/test_opt_matmul_add.py")),
    Mutant("opt-matmul-add-override", "onnxkit/runtime/optimizer/matmul_add.py",
           "view.read_constant(c_name)",
           "view.constant(c_name)",
           ("tests/test_opt_near_misses.py", "tests/test_opt_matmul_add.py")),
    Mutant("opt-conv-bn-override", "onnxkit/runtime/optimizer/conv_bn.py",
           "        view.read_constant(n)\n    s = scale",
           "        view.constant(n)\n    s = scale",
           ("tests/test_opt_conv_bn.py",)),
    Mutant("opt-cast-own-type", "onnxkit/runtime/optimizer/cast.py",
           'and typed[0] == match.root.attr("to")',
           'and typed[0] != 0',
           ("tests/test_opt_cast.py",)),
    Mutant("opt-transpose-composition", "onnxkit/runtime/optimizer/transpose.py",
           "return [p[i] for i in q]",
           "return [q[i] for i in p]",
           ("tests/test_opt_transpose.py",)),
    Mutant("opt-gelu-tanh-cubic", "onnxkit/runtime/optimizer/gelu.py",
           "_CUBE = AnyOf((0.044715 * x * x * x, 0.044715 * op.Pow(x, 3.0)))",
           "_CUBE = AnyOf((0.044715 * x * x * x, 0.044715 * op.Pow(x, 2.0)))",
           ("tests/test_opt_gelu.py",)),
    Mutant("opt-reshape-override", "onnxkit/runtime/optimizer/reshape.py",
           "view.read_constant(second.input[1])",
           "view.constant(second.input[1])",
           ("tests/test_opt_near_misses.py", "tests/test_opt_reshape.py")),
    Mutant("budget-boundary-value", "onnxkit/runtime/budget.py",
           "        if nbytes > limits.max_value_bytes:",
           "        if nbytes >= limits.max_value_bytes:",
           ("tests/test_budget.py",)),
    Mutant("budget-boundary-run", "onnxkit/runtime/budget.py",
           "if self.live + nbytes > limits.max_run_bytes:",
           "if self.live + nbytes >= limits.max_run_bytes:",
           ("tests/test_budget.py",)),
    Mutant("budget-gemm-guard", "onnxkit/runtime/budget.py",
           '"Gemm": "gemm", ',
           "",
           ("tests/test_budget_guards.py",)),
    Mutant("budget-ml-guard", "onnxkit/runtime/budget.py",
           '    elif not default:\n        kind = "value"\n',
           "    elif not default:\n        return None\n",
           ("tests/test_budget_domains.py",)),
    Mutant("budget-zipmap-guard", "plugins/ml_domain/onnxkit_ml/kernels/mapping.py",
           "        return rows * (key_bytes + 8 * len(labels)), rows",
           "        return rows * (key_bytes + 8 * len(labels)), 0",
           ("tests/test_budget_domains.py",)),
    Mutant("budget-image-guard", "plugins/default_domain/onnxkit_default_domain/kernels/image.py",
           "    return declares_output_bytes(run, size)",
           "    return run",
           ("tests/test_budget_domains.py",)),
    Mutant("budget-after-check", "onnxkit/runtime/loop.py",
           "    if guard is not None and guard.after:",
           "    if False:",
           ("tests/test_budget_domains.py",)),
    # issue 29 items 2, 7, 8 and the aliasing promise: specialization, weight caches, save targets,
    # the run loop's lifetimes, a compiled kernel
    Mutant("specialize-output-copy", "onnxkit/runtime/optimizer/specialize.py",
           "_set(known, step, _kept(seen[1]))",
           "_set(known, step, seen[1])",
           ("tests/test_shape_specialization.py::test_an_output_the_recording_run_returned_is_not_the_folded_constant",
            "tests/test_shape_specialization.py::"
            "test_the_specialized_plan_keeps_its_own_copy_of_what_the_recording_run_computed",
            "tests/test_output_aliasing.py", "-k", "not corpus")),
    # issue 33: specialization on the shared use-def index (aliases collapsed and dead steps dropped through it)
    Mutant("specialize-alias-read-by-name", "onnxkit/runtime/optimizer/inline.py",
           "                and all(u.slot >= 0 for u in index.uses(s.outputs[0])):",
           "                and True:",
           ("tests/test_opt_inline.py", "tests/test_shape_specialization.py")),
    Mutant("specialize-live-through-index", "onnxkit/runtime/optimizer/specialize.py",
           "or node.op_type in FAILS_ON_VALUES or any(index.use_count(n) for n in step.outputs if n)",
           "or node.op_type in FAILS_ON_VALUES or any(n in keep for n in step.outputs if n)",
           ("tests/test_opt_inline.py", "tests/test_shape_specialization.py")),
    # issue 33: the plan passes on the shared step index
    Mutant("epilogue-consumer-taken-twice", "onnxkit/runtime/optimizer/epilogue.py",
           "if c is None or id(c) in taken or not plain_default(c)",
           "if c is None or not plain_default(c)",
           ("tests/test_opt_epilogue.py",)),
    Mutant("onehot-shared-cast", "onnxkit/runtime/optimizer/epilogue.py",
           "if s is None or index.use_count(name) != 1 or s.node.op_type != op_type",
           "if s is None or s.node.op_type != op_type",
           ("tests/test_opt_onehot.py",)),
    Mutant("onehot-infinite-weights", "onnxkit/runtime/optimizer/onehot.py",
           "if iota.shape[-1] != w.shape[0] or not np.isfinite(w).all():",
           "if iota.shape[-1] != w.shape[0]:",
           ("tests/test_opt_onehot.py",)),
    Mutant("conv-fold-override", "onnxkit/runtime/optimizer/patterns.py",
           "    w = view.read_constant(w_name)",
           "    w = view.constant(w_name)",
           ("tests/test_opt_conv_bn.py", "tests/test_opt_channel_affine.py", "tests/test_opt_near_misses.py")),
    Mutant("folded-value-view", "onnxkit/runtime/plan.py",
           "        if value.base is not None:\n            value = value.copy()\n        value.flags.writeable = False",
           "        value = value.view()\n        value.flags.writeable = False",
           ("plugins/cpu_backend/tests/test_weight_caches.py", "tests/test_output_aliasing.py", "-k", "not corpus")),
    Mutant("conv-weight-cache-readonly", "plugins/cpu_backend/onnxkit_cpu/overrides/conv.py",
           "    return unchanging(v) or np.may_share_memory(derived, v)",
           "    return not v.flags.writeable or np.may_share_memory(derived, v)",
           ("plugins/cpu_backend/tests/test_weight_caches.py",)),
    Mutant("weight-cache-base-chain", "plugins/cpu_backend/onnxkit_cpu/overrides/_plans.py",
           "            if base.flags.writeable:\n                return False\n            base = base.base",
           "            base = base.base",
           ("plugins/cpu_backend/tests/test_weight_caches.py",)),
    Mutant("rnn-weight-cache", "plugins/cpu_backend/onnxkit_cpu/overrides/rnn.py",
           "self.kept = unchanging(W) and unchanging(R) and (B is None or unchanging(B))",
           "self.kept = True",
           ("plugins/cpu_backend/tests/test_weight_caches.py",)),
    Mutant("save-target-regular-file", "onnxkit/api.py",
           "if st is not None and not stat.S_ISREG(st.st_mode):",
           "if st is not None and stat.S_ISDIR(st.st_mode):",
           ("tests/test_save_targets.py",)),
    Mutant("save-temp-cleanup", "onnxkit/api.py",
           "        if made:  # whatever failed",
           "        if False:  # whatever failed",
           ("tests/test_save_targets.py",)),
    Mutant("lifetimes-one-step-early", "onnxkit/runtime/plan.py",
           "            last = max(at[id(u.item)] for u in uses)\n",
           "            last = max(at[id(u.item)] for u in uses) - 1\n",
           ("tests/test_runtime.py", "tests/test_output_aliasing.py", "-k", "not corpus")),
    Mutant("compiled-maxpool-wide-kernel", "plugins/cpu_backend/onnxkit_cpu/compiled/pool.py",
           "                for t in range(3, kw_n):\n                    tt = u(t) * d_u\n"
           "                    for i in range(ow_u):\n                        va, vb = yf[yo + i], buf[s_u * i + tt]",
           "                for t in range(4, kw_n):\n                    tt = u(t) * d_u\n"
           "                    for i in range(ow_u):\n                        va, vb = yf[yo + i], buf[s_u * i + tt]",
           ("plugins/cpu_backend/tests/test_compiled_pool.py",)),
    # -- cpu quantization fast paths (issue 32 item 2): each killed by its own test file
    Mutant("quant-matmul-exactness-bound", "plugins/cpu_backend/onnxkit_cpu/overrides/quantization.py",
           "    if amax * prepared.l1 > FLOAT32_EXACT:\n        return None\n    af = a.astype(F32)",
           "    if amax * prepared.l1 > 64 * FLOAT32_EXACT:\n        return None\n    af = a.astype(F32)",
           ("plugins/cpu_backend/tests/test_quantized_matmul.py",)),
    Mutant("quant-conv-exactness-bound", "plugins/cpu_backend/onnxkit_cpu/overrides/quantized_conv.py",
           "    if amax * prepared.l1 > FLOAT32_EXACT:",
           "    if amax * prepared.l1 > 64 * FLOAT32_EXACT:",
           ("plugins/cpu_backend/tests/test_quantized_conv.py",)),
    Mutant("quant-weight-cache-zero-point", "plugins/cpu_backend/onnxkit_cpu/overrides/quantization.py",
           "return b is self.b and unchanging(b) and zero_point_key(zp) == self.zp",
           "return b is self.b and unchanging(b)",
           ("plugins/cpu_backend/tests/test_quantized_matmul.py",)),
    Mutant("quant-quantize-ties", "plugins/cpu_backend/onnxkit_cpu/compiled/quantized.py",
           "r = np.rint(x[p, c, q] / sc) + zc",
           "r = np.floor(x[p, c, q] / sc + np.float32(0.5)) + zc",
           ("plugins/cpu_backend/tests/test_quantized_linear.py",)),
    Mutant("quant-quantize-nan", "plugins/cpu_backend/onnxkit_cpu/compiled/quantized.py",
           "                elif r != r:\n                    r = zc\n                y[p, c, q] = r",
           "                y[p, c, q] = r",
           ("plugins/cpu_backend/tests/test_quantized_linear.py",)),
    Mutant("quant-dequantize-zero-point", "plugins/cpu_backend/onnxkit_cpu/compiled/quantized.py",
           "y[p, c, q] = (np.float32(x[p, c, q]) - zc) * sc",
           "y[p, c, q] = np.float32(x[p, c, q]) * sc - zc * sc",
           ("plugins/cpu_backend/tests/test_quantized_linear.py",)),
    Mutant("quant-dynamic-range-nan", "plugins/cpu_backend/onnxkit_cpu/compiled/quantized.py",
           "        if v - v != 0:            # NaN or an infinity",
           "        if v - v > 0:            # NaN or an infinity",
           ("plugins/cpu_backend/tests/test_quantized_linear.py",)),
    Mutant("quant-requantize-per-channel", "plugins/cpu_backend/onnxkit_cpu/compiled/quantized.py",
           "            k = mult[m]\n",
           "            k = mult[0]\n",
           ("plugins/cpu_backend/tests/test_quantized_conv.py",)),
    Mutant("quant-requant-parameters-cache", "plugins/cpu_backend/onnxkit_cpu/overrides/quantized_conv.py",
           "    if all(v is None or unchanging(v) for v in given):",
           "    if True:",
           ("plugins/cpu_backend/tests/test_quantized_conv.py",)),
    Mutant("quant-columns-padding", "plugins/cpu_backend/onnxkit_cpu/compiled/quantized.py",
           "                            if xx < 0 or xx >= w:\n                                cols[n, row, base + b] = 0.0",
           "                            if xx < 0 or xx >= w:\n                                cols[n, row, base + b] = -zp",
           ("plugins/cpu_backend/tests/test_quantized_conv.py",)),
    Mutant("quant-qlinear-binary-op", "plugins/cpu_backend/onnxkit_cpu/compiled/quantized.py",
           "w = u + v if op == 0 else u * v",
           "w = u + v",
           ("plugins/cpu_backend/tests/test_quantized_microsoft.py",)),
    Mutant("quant-dynamic-matmul-range-zero", "plugins/cpu_backend/onnxkit_cpu/overrides/quantized_microsoft.py",
           "lo, hi = np.float32(min(float(lo_x), 0.0)), np.float32(max(float(hi_x), 0.0))",
           "lo, hi = np.float32(float(lo_x)), np.float32(max(float(hi_x), 0.0))",
           ("plugins/cpu_backend/tests/test_quantized_microsoft.py",)),
    # issue 33 items 3 and 4: the plugin surface, no import cycle, which body a node runs
    Mutant("traits-legacy-attribute-ignored", "onnxkit/kernel_traits.py",
           "        if legacy:",
           "        if False:",
           ("tests/test_plugin_surface.py",)),
    Mutant("surface-host-import", "plugins/default_domain/onnxkit_default_domain/kernels/cast.py",
           "from onnxkit.plugin.narrow import convert, from_codes",
           "from onnxkit.narrow import convert, from_codes",
           ("tests/test_plugin_surface.py",)),
    Mutant("import-cycle-hidden-in-a-function", "onnxkit/ir/tensor.py",
           "        return tensor_to_numpy(self)",
           "        from ..api import load  # noqa: F401\n        return tensor_to_numpy(self)",
           ("tests/test_import_cycles.py",)),
    Mutant("conv-body-report", "plugins/cpu_backend/onnxkit_cpu/overrides/conv.py",
           "        kinds[key] = p.kind",
           "        kinds[key] = \"portable\"",
           ("tests/test_node_bodies.py",)),
    # issue 32 item 1: cold start (lazy kernel families, no numpy.f2py, numpy bodies on the first run)
    Mutant("kernel-index-entry-dropped", "plugins/cpu_backend/onnxkit_cpu/overrides/_kernel_index.py",
           "    ('', 'Conv', (1, 11, 22), 'conv', 'onnxkit_cpu.overrides.conv', False),\n",
           "",
           ("tests/test_kernel_index.py",)),
    Mutant("namespace-clones-f2py", "plugins/cpu_backend/onnxkit_cpu/plugin.py",
           '_NOT_ARRAY_API = frozenset({"f2py", ',
           '_NOT_ARRAY_API = frozenset({',
           ("tests/test_kernel_index.py",)),
    # issue 32 item 1: one inference per session where the declarations add nothing; lazy schema data
    Mutant("declarations-used-not-noted", "onnxkit/inference/engine.py",
           "            if problems or merged != t:\n                self.declarations_used = True",
           "            if problems:\n                self.declarations_used = True",
           ("tests/inference/test_declarations_used.py", "tests/test_optimizer_session.py")),
    Mutant("undeclared-types-ignore-reads", "onnxkit/inference/__init__.py",
           "        if names_read_inside(model.graph, outputs=False) & self.declared_names.keys():\n            return None\n",
           "",
           ("tests/inference/test_declarations_used.py",)),
    Mutant("undeclared-types-keep-declared", "onnxkit/inference/__init__.py",
           "        return {**self.graph(\"\"), **self.declared_names}",
           "        return self.graph(\"\")",
           ("tests/inference/test_declarations_used.py", "tests/test_optimizer_session.py")),
    Mutant("declared-names-in-subgraphs-kept", "onnxkit/inference/engine.py",
           "                if scope is not self._top:\n                    self.declared_names = None\n                elif",
           "                if",
           ("tests/inference/test_declarations_used.py",)),
    Mutant("view-constant-cache-by-name", "onnxkit/runtime/optimizer/view.py",
           "        hit = self._arrays.get(id(t))\n        if hit is not None and hit[0] is t:",
           "        hit = self._arrays.get(t.name)\n        if hit is not None:",
           ("tests/test_opt_usedef.py",)),
    # issue 32 item 1: records (onnxkit.records) instead of attrs
    Mutant("record-eq-ignores-custom", "onnxkit/records.py",
           "    return {' and '.join(terms + custom) or 'True'}",
           "    return {' and '.join(terms) or 'True'}",
           ("tests/test_records.py",)),
    Mutant("record-hash-of-mutable", "onnxkit/records.py",
           "            ns[\"__hash__\"] = _lazy(\"__hash__\", _make_hash) if is_frozen else None",
           "            ns[\"__hash__\"] = _lazy(\"__hash__\", _make_hash)",
           ("tests/test_records.py",)),
    Mutant("record-factory-shared", "onnxkit/records.py",
           "            env[f\"_f{i}\"] = d.factory\n",
           "            env[f\"_f{i}\"] = d.factory if d.takes_self else (lambda shared: lambda: shared)(d.factory())\n",
           ("tests/test_records.py",)),
    Mutant("record-evolve-drops-private", "onnxkit/records.py",
           "        if f.init and f.alias not in changes:",
           "        if f.init and f.alias not in changes and not f.name.startswith(\"_\"):",
           ("tests/test_records.py",)),
    Mutant("schema-inventory-shared-wrong", "onnxkit/schema.py",
           "            current.update((k[1], k) for k in introduced.get(v, ()))\n            out.append((domain, v, dict(current)))",
           "            current.update((k[1], k) for k in introduced.get(v, ()))\n            out.append((domain, v, current))",
           ("plugins/default_domain/tests/test_schemas.py",)),
    # issue 32 item 1: inference functions and ai.onnx.ml kernels loaded when a model needs them
    Mutant("function-index-entry-dropped", "plugins/default_domain/onnxkit_default_domain/inference/_function_index.py",
           "    ('', 'Conv', (1, 11, 22), 'nn', 'onnxkit_default_domain.inference.nn'),\n",
           "",
           ("tests/test_kernel_index.py",)),
    Mutant("lazy-function-drops-result", "onnxkit/plugin/lazy.py",
           "        return self.resolve()(*args, **kwargs)",
           "        self.resolve()(*args, **kwargs)",
           ("tests/test_kernel_index.py",)),
    Mutant("ml-kernels-not-host-only", "plugins/ml_domain/onnxkit_ml/kernels/__init__.py",
           "        host_only(factory)",
           "        pass",
           ("tests/test_kernel_index.py",)),
    Mutant("attention-blocked-guard", "plugins/cpu_backend/onnxkit_cpu/overrides/attention.py",
           "                        if bad.any():",
           "                        if False:",
           ("plugins/cpu_backend/tests/test_blocked_attention.py", "plugins/cpu_backend/tests/test_blocked_softmax32.py")),
    Mutant("attention-blocked-mask-rows", "plugins/cpu_backend/onnxkit_cpu/overrides/attention.py",
           "                        s += mask[b, h, r0:r1]",
           "                        s += mask[b, h, :r1 - r0]",
           ("plugins/cpu_backend/tests/test_blocked_attention.py",)),
    Mutant("ln-pairwise-shared-stack", "plugins/cpu_backend/onnxkit_cpu/compiled/norm.py",
           "_pairwise(x, r, 0, n, starts, counts, sums)",
           "_pairwise(x, r, 0, n, starts, starts, sums)",
           ("plugins/cpu_backend/tests/test_compiled_norm_act.py",)),
    Mutant("attention-softmax32-ln2-split", "plugins/cpu_backend/onnxkit_cpu/compiled/attention.py",
           "    r = (v - k * _LN2_HI32) - k * _LN2_LO32",
           "    r = v - k * _LN2_HI32",
           ("plugins/cpu_backend/tests/test_blocked_softmax32.py",)),
    Mutant("attention-softmax32-guard", "plugins/cpu_backend/onnxkit_cpu/compiled/attention.py",
           "        if guard and tot != tot:",
           "        if False:",
           ("plugins/cpu_backend/tests/test_blocked_softmax32.py",)),
    Mutant("first-run-compiles", "plugins/cpu_backend/onnxkit_cpu/compiled/__init__.py",
           "                return None\n        if not enabled():",
           "        if not enabled():",
           ("tests/test_first_run_bodies.py",)),
    Mutant("first-run-never-switches", "onnxkit/runtime/session.py",
           "            if cold.deferred:",
           "            if False:",
           ("tests/test_first_run_bodies.py",)),
    Mutant("cold-first-run-specialized", "onnxkit/runtime/session.py",
           "specialize=not cold.deferred)",
           "specialize=True)",
           ("tests/test_first_run_bodies.py",)),
    Mutant("tiered-ignores-cost", "onnxkit/runtime/bodies.py",
           "not self.tiered or self.spent >= self.cost)",
           "not self.tiered or True)",
           ("tests/test_first_run_bodies.py",)),
    Mutant("tiered-setup-counted-per-deferral", "onnxkit/runtime/bodies.py",
           "self._setups[key] = max(self._setups.get(key, 0.0), float(seconds))",
           "self._setups[key] = self._setups.get(key, 0.0) + float(seconds)",
           ("tests/test_first_run_bodies.py",)),
    Mutant("tiered-later-runs-not-cold", "onnxkit/runtime/session.py",
           "                    with planning_cold(cold):\n                        return self._evaluate_plan(",
           "                    with planning_cold(None if cold.ran else cold):\n                        return self._evaluate_plan(",
           ("tests/test_first_run_bodies.py",)),
    Mutant("tiered-second-policy-tiered", "onnxkit/runtime/bodies.py",
           'FirstRun(tiered=policy == "tiered")',
           "FirstRun(tiered=True)",
           ("tests/test_first_run_bodies.py",)),
    # the pad_conv pass (a zero constant Pad folded into Conv's pads)
    Mutant("pad-conv-any-mode", "onnxkit/runtime/optimizer/pad_conv.py",
           'or _text(pad.attr("mode", "constant")) != "constant" or',
           "or",
           ("tests/test_opt_pad_conv.py",)),
    Mutant("pad-conv-channel-pads", "onnxkit/runtime/optimizer/pad_conv.py",
           "    if pads[0] or pads[1] or pads[rank] or pads[rank + 1]:",
           "    if False:",
           ("tests/test_opt_pad_conv.py",)),
    Mutant("pad-conv-ends-from-begins", "onnxkit/runtime/optimizer/pad_conv.py",
           "[own[spatial + i] + ends[i] for i in range(spatial)]",
           "[own[spatial + i] + begins[i] for i in range(spatial)]",
           ("tests/test_opt_pad_conv.py",)),
    Mutant("pad-conv-negative-zero", "onnxkit/runtime/optimizer/pad_conv.py",
           "        and not bool(np.signbit(value.reshape(())))",
           "        and True",
           ("tests/test_opt_pad_conv.py",)),
    Mutant("pad-conv-auto-pad-kept", "onnxkit/runtime/optimizer/pad_conv.py",
           'if a.name not in ("pads", "auto_pad")]',
           'if a.name not in ("pads",)]',
           ("tests/test_opt_pad_conv.py",)),
    Mutant("pad-conv-constants-unread", "onnxkit/runtime/optimizer/pad_conv.py",
           "            view.read_constant(name)",
           "            view.constant(name)",
           ("tests/test_opt_pad_conv.py",)),
    Mutant("computed-constant-unbounded", "onnxkit/runtime/optimizer/computed.py",
           "                                              > MAX_ELEMENTS or np.any(args[0] < 0)):",
           "                                              > 10 ** 12 or np.any(args[0] < 0)):",
           ("tests/test_opt_pad_conv.py",)),
    Mutant("computed-constant-from-inputs", "onnxkit/runtime/optimizer/computed.py",
           "        if got is None:\n            return None\n        args.append(got[0])",
           "        if got is None:\n            got = (np.array([4], np.int64), set())\n        args.append(got[0])",
           ("tests/test_opt_pad_conv.py",)),
    Mutant("clip-absent-bound-unclipped", "plugins/default_domain/onnxkit_default_domain/kernels/elementwise.py",
           '        limit = _float_limits(x.dtype)[0 if which == "min" else 1]',
           "        limit = None",
           ("plugins/default_domain/tests/test_kernels_elementwise.py",)),
    Mutant("pool-whole-short-window", "plugins/cpu_backend/onnxkit_cpu/overrides/pool.py",
           " and all(k >= b + n for k, b, n in zip(a.kernel, begin, shape[2:]))",
           "",
           ("plugins/cpu_backend/tests/test_pool_whole.py",)),
    Mutant("pool-whole-pads-always-counted", "plugins/cpu_backend/onnxkit_cpu/overrides/pool.py",
           "            d = average_divisor(list(shape[2:]), a, out, begin, end, include_pad)",
           "            d = average_divisor(list(shape[2:]), a, out, begin, end, True)",
           ("plugins/cpu_backend/tests/test_pool_whole.py",)),
    # the epilogue pass's Clip (Relu6 into the cpu Conv)
    Mutant("epilogue-clip-runtime-bound", "onnxkit/runtime/optimizer/epilogue.py",
           'if n and (type(v) is not np.ndarray or v.size != 1 or v.dtype.kind not in "fiu"):',
           'if n and v is not None and (v.size != 1 or v.dtype.kind not in "fiu"):',
           ("plugins/cpu_backend/tests/test_conv_clip_epilogue.py",)),
    Mutant("conv-clip-after-compiled-add", "plugins/cpu_backend/onnxkit_cpu/overrides/conv_epilogue.py",
           "return y if clip is None else own_clip(y)",
           "return y",
           ("plugins/cpu_backend/tests/test_conv_clip_epilogue.py",)),
    Mutant("conv-clip-bound-dtype", "plugins/cpu_backend/onnxkit_cpu/overrides/conv_epilogue.py",
           "        if y.dtype != dt:\n            return fn(y)\n",
           "",
           ("plugins/cpu_backend/tests/test_conv_clip_epilogue.py",)),
    Mutant("pool-whole-zero-sign", "plugins/cpu_backend/onnxkit_cpu/overrides/pool.py",
           "                if padded and not self.is_max:",
           "                if False:",
           ("plugins/cpu_backend/tests/test_pool_whole.py",)),
    # the cpu memory arena (glibc's malloc thresholds)
    Mutant("arena-ignores-environment", "onnxkit/runtime/arena.py",
           "    if any(name in os.environ for name in TUNABLES):",
           "    if False:",
           ("tests/test_arena.py",)),
    Mutant("arena-ignores-option", "onnxkit/runtime/session.py",
           "        if so.enable_cpu_mem_arena:\n            keep_freed_memory()",
           "        if True:\n            keep_freed_memory()",
           ("tests/test_arena.py",)),
    # issue 32 item 2 / issue 33: the qdq pass's rules (QDQ groups on integer kernels)
    Mutant("qdq-bias-scale-unchecked", "onnxkit/runtime/optimizer/qdq.py",
           "    if not np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=BIAS_SCALE_RTOL, atol=0.0):",
           "    if False:",
           QDQ_TESTS),
    Mutant("qdq-weight-axis-unchecked", "onnxkit/runtime/optimizer/qdq.py",
           "        if found is None or (not found.per_tensor and found.axis != axis):",
           "        if found is None:",
           QDQ_TESTS),
    Mutant("qdq-shared-dq-removed", "onnxkit/runtime/optimizer/qdq.py",
           "        if dq is not None and view.holds(dq) and view.use_count(dq.output[0]) == 0:",
           "        if dq is not None and view.holds(dq):",
           QDQ_TESTS),
    Mutant("qdq-drop-other-parameters", "onnxkit/runtime/optimizer/qdq.py",
           "    if found is None or not found[0][0].same_as(found[1]):",
           "    if found is None:",
           QDQ_TESTS),
    Mutant("qdq-same-ignores-zero-point-type", "onnxkit/runtime/optimizer/qdq.py",
           "        return (self.per_tensor and other.per_tensor and self.zero_value.dtype == other.zero_value.dtype",
           "        return (self.per_tensor and other.per_tensor",
           QDQ_TESTS),
    Mutant("qdq-relu-any-zero-point", "onnxkit/runtime/optimizer/qdq.py",
           "    if node.op_type == \"Relu\" and int(x.zero_value.reshape(-1)[0]) != RANGES[x.zero_value.dtype][0]:",
           "    if False:",
           QDQ_TESTS),
    Mutant("qdq-conv-weight-zero-point-for-x", "onnxkit/runtime/optimizer/qdq.py",
           "    inputs = [x.q, x.scale, x.zero, w.q, w.scale, w.zero, y.scale, y.zero] + ([bias] if bias else [])",
           "    inputs = [x.q, x.scale, w.zero, w.q, w.scale, w.zero, y.scale, y.zero] + ([bias] if bias else [])",
           QDQ_TESTS),
    Mutant("qdq-conv-bias-dropped", "onnxkit/runtime/optimizer/qdq.py",
           "    inputs = [x.q, x.scale, x.zero, w.q, w.scale, w.zero, y.scale, y.zero] + ([bias] if bias else [])",
           "    inputs = [x.q, x.scale, x.zero, w.q, w.scale, w.zero, y.scale, y.zero]",
           QDQ_TESTS),
    Mutant("qdq-microsoft-assumed", "onnxkit/runtime/optimizer/qdq.py",
           "    return registry.operator_set(MICROSOFT, 1) is not None",
           "    return True",
           QDQ_TESTS),
    Mutant("qlinear-binary-broadcast-swapped", "plugins/cpu_backend/onnxkit_cpu/overrides/quantized_microsoft.py",
           "            a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)",
           "            a, b = np.broadcast_to(b, shape), np.broadcast_to(a, shape)",
           ("plugins/cpu_backend/tests/test_quantized_microsoft.py",)),
    Mutant("qlinear-matmul-requantize-bias", "plugins/cpu_backend/onnxkit_cpu/overrides/quantization.py",
           "            requantize(acc.reshape(rows, n, 1), np.zeros(n), np.ascontiguousarray(",
           "            requantize(acc.reshape(rows, n, 1), np.ones(n), np.ascontiguousarray(",
           ("plugins/cpu_backend/tests/test_quantized_matmul.py",)),
    Mutant("blas-libs-found-once", "onnxkit/runtime/threads.py",
           "if _blas_libs is None or loaded != _modules_seen:",
           "if _blas_libs is None:",
           ("tests/test_threads.py",)),
    # issue 32 item 1, round two (cold start)
    Mutant("gc-pause-not-paused", "onnxkit/runtime/gc_pause.py",
           "            gc.disable()",
           "            pass",
           ("tests/test_gc_pause.py",)),
    Mutant("gc-pause-left-young", "onnxkit/runtime/gc_pause.py",
           "                if gc.get_freeze_count() == 0:",
           "                if False:",
           ("tests/test_gc_pause.py",)),
    Mutant("gc-pause-thaws-program-freeze", "onnxkit/runtime/gc_pause.py",
           "                if gc.get_freeze_count() == 0:",
           "                if True:",
           ("tests/test_gc_pause.py",)),
    Mutant("entry-scan-no-shadowing", "onnxkit/entry_scan.py",
           "            if key in seen:\n                continue\n",
           "",
           ("tests/test_entry_scan.py",)),
    Mutant("lazy-api-module-for-name", "plugins/default_domain/onnxkit_default_domain/api.py",
           "value = module if attr is None else getattr(module, attr)",
           "value = module",
           ("tests/test_lazy_api.py",)),
    Mutant("resize-rows-drop-taps", "plugins/cpu_backend/onnxkit_cpu/compiled/resize.py",
           "                    out[c] = out[c] + src[c] * wt",
           "                    out[c] = src[c] * wt",
           ("plugins/cpu_backend/tests/test_resize_fast.py",)),
    Mutant("resize-cols-two-taps-one-source", "plugins/cpu_backend/onnxkit_cpu/compiled/resize.py",
           "out[j] = src[i0[j]] * w0[j] + src[i1[j]] * w1[j]",
           "out[j] = src[i0[j]] * w0[j] + src[i0[j]] * w1[j]",
           ("plugins/cpu_backend/tests/test_resize_fast.py",)),
    Mutant("resize-pick-cols-first-only", "plugins/cpu_backend/onnxkit_cpu/compiled/resize.py",
           "                out[j] = src[idx[j]]",
           "                out[j] = src[idx[0]]",
           ("plugins/cpu_backend/tests/test_resize_fast.py",)),
    Mutant("resize-fast-ignores-extrapolation", "plugins/cpu_backend/onnxkit_cpu/overrides/resize.py",
           "            if extrap is not None:\n                return False",
           "            if False:\n                return False",
           ("plugins/cpu_backend/tests/test_resize_fast.py",)),
)


def _copy_tree(destination: Path) -> Path:
    """The repository's sources copied under ``destination`` (no .git, caches or build outputs)."""
    target = destination / "repo"
    shutil.copytree(REPO, target, ignore=shutil.ignore_patterns(".git", ".cache", "__pycache__", "*.egg-info",
                                                                  ".pytest_cache", ".hypothesis", "build"))
    return target


def _apply(tree: Path, mutant: Mutant) -> None:
    source = tree / mutant.path
    text = source.read_text(encoding="utf-8")
    found = text.count(mutant.old)
    if found != 1:
        raise SystemExit(f"mutant {mutant.name}: {mutant.old!r} occurs {found} times in {mutant.path}, not once")
    source.write_text(text.replace(mutant.old, mutant.new), encoding="utf-8")


def _environment(tree: Path, vectors: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree)] + [str(tree / "plugins" / p) for p in PLUGINS])
    env["ONNXKIT_VECTORS"] = str(vectors)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_tests(tree: Path, vectors: Path, tests: tuple) -> tuple[int, list[str], float]:
    """pytest's exit status, the failing test ids and the seconds it took, for ``tests`` in ``tree``."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", *tests],
                          cwd=tree, env=_environment(tree, vectors), capture_output=True, text=True)
    failed = re.findall(r"^FAILED (\S+)", proc.stdout, flags=re.M)
    return proc.returncode, failed, time.perf_counter() - start


def _vectors() -> Path:
    sys.path.insert(0, str(REPO / "tests"))
    from onnx_vectors import ensure_vectors

    return ensure_vectors()


def main(argv: list[str]) -> int:
    baseline = "--baseline" in argv
    words = [a for a in argv if not a.startswith("--")]
    chosen = [m for m in MUTANTS if not words or any(w in m.name for w in words)]
    vectors = _vectors()
    survivors = 0
    with tempfile.TemporaryDirectory(prefix="onnxkit-mutants-") as tmp:
        pristine = _copy_tree(Path(tmp))
        if baseline:
            for tests in sorted({m.tests for m in chosen}):
                rc, failed, seconds = run_tests(pristine, vectors, tests)
                if rc != 0:
                    print(f"baseline fails ({rc}) for {' '.join(tests)}: {failed[:5]}")
                    return 2
            print("baseline: every test subset passes unmutated")
        for mutant in chosen:
            tree = Path(tmp) / mutant.name
            shutil.copytree(pristine, tree)
            _apply(tree, mutant)
            rc, failed, seconds = run_tests(tree, vectors, mutant.tests)
            verdict = "killed" if rc == 1 and failed else ("survived" if rc == 0 else f"error (pytest exit {rc})")
            survivors += verdict != "killed"
            print(f"{mutant.name:28} {verdict:9} {seconds:6.1f} s  {mutant.path}: {mutant.old!r} -> {mutant.new!r}")
            for test in failed[:8]:
                print(f"    failed: {test}")
            if len(failed) > 8:
                print(f"    ... and {len(failed) - 8} more")
            shutil.rmtree(tree)
    print(f"{len(chosen) - survivors} of {len(chosen)} mutants killed")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
