"""Generative decoding, prefill and per token: onnxkit vs onnxruntime 1.32 and onnxruntime-genai 0.18.

Models (random weights, seeded; no download), kept under ``.cache/genai_models`` / ``.cache/decoders``:

* ``genai-<size>-<precision>``: LlamaForCausalLM built by onnxruntime-genai's model builder
  (``tests/generative/genai_models.py``'s recipe: GroupQueryAttention with rotary inside,
  SkipSimplifiedLayerNormalization, packed or separate MatMul / MatMulNBits) at
  :data:`SIZES` ``tiny`` (hidden 128, 4 layers), ``small`` (hidden 256, 4 layers) and
  ``smollm`` (SmolLM-135M's configuration: 30 layers, hidden 576, intermediate 1536, 9 heads over
  3 K/V heads, vocabulary 49,152), precision ``fp32`` or ``int4`` (block 32, accuracy_level 4);
* ``torch-<size>``: the same configurations exported by ``benchmarks/decoder.py`` (torch's
  TorchScript exporter, opset 17, eager attention: ~600 plain ONNX nodes at ``tiny``).

Runtimes, stepping token by token in turn (interleaved; the order rotates every token):

* ``onnxkit`` and ``ort``: one ``InferenceSession`` each on the same loop: a ``--prompt``-token
  prefill (an empty past), then one token a run, the presents fed back as the next pasts (the
  cache grows one position a token), greedy;
* ``genai``: onnxruntime-genai's own ``Generator`` (its shared max-length KV buffer, greedy) and
  ``okgenai``: onnxkit's stand-in ``onnxkit.genai.Generator`` over the same folder (genai models
  only; ``--no-generators`` leaves both out).

One thread each (onnxkit ``intra_op_num_threads=1``; onnxruntime one intra-op and one inter-op
thread; the generators' ``genai_config.json`` session options the same) or ``--threads default``.
Every configuration runs in its own process (a fresh session, an empty in-process state; numba's
on-disk cache is kept), under ``ONNXKIT_FIRST_RUN`` ``tiered`` (the default policy: the session
starts on its cold plan and promotes itself) and ``warm`` (``--policy`` picks one).

Printed per model and configuration, ms: the prefill (the median of :data:`PREFILL_REPEATS` runs
of the prompt on a fresh sequence after the tokens), the median over tokens 11-30 (``early``)
and over the last 20 (``late``, near token ``--tokens``), the slowest token, the sum over every
token (``tokens``: what the first-run policy's timing decides), the step after which onnxkit's
warm plan's setup had begun and the first step on it, each runtime's
ratio to ``ort``, late/early, and whether the tokens generated are equal; the conditions first
(date, CPUs, load, BLAS, versions).  ``--json FILE`` keeps the raw results.

Run: ``python benchmarks/generate.py [-m genai-small-fp32 ...] [--tokens 500] [--policy warm]
[--threads default] [--build-only]``.  Needs torch, transformers, onnxruntime, onnxruntime-genai.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "generative"))
sys.path.insert(0, str(ROOT / "benchmarks"))

#: name -> LlamaConfig keywords (the genai builder's and the torch export's models alike)
SIZES = {
    "tiny": dict(vocab_size=1024, hidden_size=128, intermediate_size=256, num_hidden_layers=4,
                 num_attention_heads=4, num_key_value_heads=2),
    "small": dict(vocab_size=2048, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                  num_attention_heads=8, num_key_value_heads=4),
    "smollm": dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                   num_attention_heads=9, num_key_value_heads=3),
}
MODELS = [f"genai-{s}-{p}" for s in SIZES for p in ("fp32", "int4")] + [f"torch-{s}" for s in SIZES]
DEFAULT_MODELS = ["genai-tiny-fp32", "genai-small-fp32", "genai-smollm-fp32", "genai-smollm-int4", "torch-tiny",
                  "torch-small"]
EARLY = slice(11, 31)
#: runs of the prompt again after the tokens (interleaved); "prefill" is their median (the first
#: of them may record a new shape class on the warm plan)
PREFILL_REPEATS = 3


# ----------------------------------------------------------------------------------------------- models
def build_genai(size: str, precision: str) -> Path:
    """The genai builder's folder of ``SIZES[size]`` at ``precision`` (built once, recipe-keyed)."""
    import genai_models as gm

    r = {"arch": "llama", "config_class": "LlamaConfig", "precision": precision, "seed": gm.SEED,
         "vocab": gm.VOCAB, "builder": gm._builder_version(), "extra_options": {},
         "config": {**SIZES[size], "max_position_embeddings": 2048, "bos_token_id": 1, "eos_token_id": 2,
                    "tie_word_embeddings": False}}
    key = gm._key(r)
    out = gm.CACHE / f"bench-{size}-{precision}"
    stamp = out / "recipe.json"
    if stamp.exists() and json.loads(stamp.read_text()).get("key") == key and (out / "model.onnx").exists():
        return out
    work = gm.CACHE / f".work-bench-{size}-{precision}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    (work / "hf").mkdir(parents=True)
    try:
        gm._checkpoint(r, work / "hf")
        cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(work / "hf"), "-o",
               str(work / "onnx"), "-p", precision, "-e", "cpu", "-c", str(work / "cache")]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TQDM_DISABLE": "1"}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
        if done.returncode or not (work / "onnx" / "model.onnx").exists():
            raise gm.BuildError(f"builder failed for {size} {precision}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        (work / "onnx" / "recipe.json").write_text(json.dumps({"key": key, "recipe": r}, indent=1))
        shutil.rmtree(out, ignore_errors=True)
        os.replace(work / "onnx", out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def model_path(name: str) -> Path:
    """The model.onnx of ``name`` (one of :data:`MODELS`), built or exported if absent."""
    kind, size, *rest = name.split("-")
    if kind == "genai":
        return build_genai(size, rest[0]) / "model.onnx"
    import decoder

    decoder.SIZES[f"gen-{size}"] = SIZES[size]
    return decoder.export_llama(ROOT / ".cache" / "decoders" / f"llama_gen-{size}.onnx", f"gen-{size}")


ONE_THREAD = {"model": {"decoder": {"session_options": {"intra_op_num_threads": 1, "inter_op_num_threads": 1}}}}


# ----------------------------------------------------------------------------------------------- steppers
class SessionStepper:
    """Greedy decoding on an onnxruntime-style session: the prompt, then one token a run."""

    def __init__(self, sess, prompt: np.ndarray, head_dim: int):
        self.sess, self.prompt, self.head_dim = sess, prompt, head_dim
        ins = {i.name: i for i in sess.get_inputs()}
        self.out_names = [o.name for o in sess.get_outputs()]
        self.pasts = [n for n in ins if "past" in n]
        present = {n.replace("past_key_values.", "present.").replace("past.", "present."): n for n in self.pasts}
        self.fed_by = {k: present[n] for k, n in enumerate(self.out_names) if n in present}
        self.position = "position_ids" in ins
        self.kv_type = np.float16 if "float16" in ins[self.pasts[0]].type else np.float32
        shape = ins[self.pasts[0]].shape
        self.feed = {n: np.zeros((1, int(shape[1]), 0, head_dim), self.kv_type) for n in self.pasts}
        self.total = 0
        self.next = prompt[None, :].astype(np.int64)
        self.tokens: list = []

    def step(self) -> float:
        n = self.next.shape[1]
        self.total += n
        self.feed["input_ids"] = self.next
        self.feed["attention_mask"] = np.ones((1, self.total), np.int64)
        if self.position:
            self.feed["position_ids"] = np.arange(self.total - n, self.total, dtype=np.int64)[None, :]
        t0, c0 = time.perf_counter(), time.thread_time()
        outs = self.sess.run(None, self.feed)
        elapsed = time.perf_counter() - t0, time.thread_time() - c0
        nxt = int(outs[0][0, -1].argmax())
        self.tokens.append(nxt)
        self.next = np.array([[nxt]], np.int64)
        for k, name in self.fed_by.items():
            self.feed[name] = outs[k]
        return elapsed

    def again(self) -> "SessionStepper":
        """A fresh sequence on the same session (its next step a prefill of the same prompt)."""
        return SessionStepper(self.sess, self.prompt, self.head_dim)


class GeneratorStepper:
    """Greedy decoding by a genai ``Generator`` (``module``: onnxruntime_genai or onnxkit.genai)."""

    def __init__(self, module, folder: Path, prompt: np.ndarray, max_length: int, threads: str):
        self.module, self.max_length = module, max_length
        config = module.Config(str(folder))
        if threads == "1":
            config.overlay(json.dumps(ONE_THREAD))
        self.model = module.Model(config)
        self._start(prompt)

    def _start(self, prompt) -> None:
        module, max_length = self.module, self.max_length
        params = module.GeneratorParams(self.model)
        params.set_search_options(max_length=max_length, do_sample=False)
        self.gen = module.Generator(self.model, params)
        self.prompt = prompt.astype(np.int32)
        self.tokens: list = []
        self.first = True

    def step(self) -> float:
        t0, c0 = time.perf_counter(), time.thread_time()
        if self.first:
            self.gen.append_tokens(self.prompt)
            self.first = False
        else:
            self.gen.generate_next_token()
        elapsed = time.perf_counter() - t0, time.thread_time() - c0
        self.tokens.append(int(np.asarray(self.gen.get_next_tokens()).reshape(-1)[0]))
        return elapsed

    def again(self) -> "GeneratorStepper":
        """A fresh generator on the same model (its next step a prefill of the same prompt)."""
        fresh = GeneratorStepper.__new__(GeneratorStepper)
        fresh.module, fresh.max_length, fresh.model = self.module, self.max_length, self.model
        fresh._start(self.prompt)
        return fresh


# ----------------------------------------------------------------------------------------------- one configuration
def run_one(name: str, tokens: int, prompt_len: int, threads: str, generators: bool) -> dict:
    """Time every runtime on ``name`` in this process (the policy comes from the environment)."""
    import onnxruntime as ort

    import onnxkit

    path = model_path(name)
    prompt = np.random.default_rng(0).integers(3, 100, prompt_len)
    so, oso = onnxkit.SessionOptions(), ort.SessionOptions()
    if threads == "1":
        so.intra_op_num_threads = 1
        oso.intra_op_num_threads = oso.inter_op_num_threads = 1
    t0 = time.perf_counter()
    mine = onnxkit.InferenceSession(str(path), so)
    setup = {"onnxkit": time.perf_counter() - t0}
    t0 = time.perf_counter()
    theirs = ort.InferenceSession(str(path), oso, providers=["CPUExecutionProvider"])
    setup["ort"] = time.perf_counter() - t0
    cfg = SIZES[name.split("-")[1]]
    head = cfg["hidden_size"] // cfg["num_attention_heads"]
    steppers = {"onnxkit": SessionStepper(mine, prompt, head), "ort": SessionStepper(theirs, prompt, head)}
    if generators and name.startswith("genai"):
        import onnxruntime_genai

        import onnxkit.genai

        for key, module in (("genai", onnxruntime_genai), ("okgenai", onnxkit.genai)):
            t0 = time.perf_counter()
            steppers[key] = GeneratorStepper(module, path.parent, prompt, prompt_len + tokens + 1, threads)
            setup[key] = time.perf_counter() - t0
    times: dict = {k: [] for k in steppers}
    order = list(steppers)
    switched = None  # the first step onnxkit's session ran on its warm plan (None: never)
    began = None  # the step after which its warm plan's setup had begun (None: never)
    for t in range(tokens + 1):  # step 0: the prefill
        turn = order[t % len(order):] + order[:t % len(order)]
        for k in turn:
            times[k].append(steppers[k].step())
        if switched is None and mine._cold is None:
            switched = t
        if began is None and (mine._plans._setup is not None or mine._cold is None):
            began = t
    setup_run = getattr(mine._plans._setup, "times", None)  # began, child ended, ended (perf_counter)
    for _ in range(PREFILL_REPEATS):  # the prefill again, on the warmed-up session: the steady-state prompt cost
        for k in order:
            times[k].append(steppers[k].again().step())
    ref = steppers["ort"].tokens
    for k in ("genai", "okgenai"):  # a generator picks token i in its call after the run computing it
        if k in steppers:
            steppers[k].tokens = steppers[k].tokens[1:]
    return {"model": name, "policy": os.environ.get("ONNXKIT_FIRST_RUN", "tiered"), "threads": threads,
            "tokens": tokens, "prompt": prompt_len, "times": times, "setup": setup,
            "same": {k: _upto_eos(s.tokens) == _upto_eos(ref[:len(s.tokens)]) for k, s in steppers.items()},
            "planned": getattr(getattr(mine, "_specializer", None), "planned", None), "switched": switched, "began": began,
            "warm_setup_s": None if not setup_run or setup_run[2] is None else
            [round(setup_run[1] - setup_run[0], 2), round(setup_run[2] - setup_run[1], 2)]}


def _upto_eos(tokens: list, eos: int = 2) -> list:
    """The tokens up to and including the first end-of-sequence token (the generators stop there)."""
    return tokens[:tokens.index(eos) + 1] if eos in tokens else tokens


def summarize(r: dict, clock: int = 0) -> dict:
    """Per runtime: prefill, early and late medians, the slowest token (ms) of wall time
    (``clock`` 0) or of the calling thread's CPU time (1)."""
    out = {}
    for k, ts in r["times"].items():
        ms = [x[clock] * 1e3 for x in ts]
        # ms[0]: the session's first run (the prefill); the last PREFILL_REPEATS: the prefill again
        steps = ms[1:-PREFILL_REPEATS]
        out[k] = dict(first=ms[0], prefill=statistics.median(ms[-PREFILL_REPEATS:]), early=statistics.median(steps[EARLY]),
                      late=statistics.median(steps[-20:]), worst=max(steps), total=sum(steps))
    return out


# ----------------------------------------------------------------------------------------------- conditions, table
def conditions(threads: str) -> str:
    """The line of conditions printed first: date, CPUs, load, BLAS, versions."""
    from importlib.metadata import version

    blas = "unknown"
    try:
        from threadpoolctl import threadpool_info

        blas = "; ".join(f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')}"
                         for i in threadpool_info() if i.get("user_api") == "blas")
    except ImportError:
        pass
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    vers = ", ".join(f"{p} {version(p)}" for p in ("onnxkit-core", "onnxruntime", "onnxruntime-genai", "numpy",
                                                   "numba", "torch", "transformers") if _has(p))
    return (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs ({cpu}), "
            f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())}, BLAS {blas} "
            f"({'OPENBLAS_NUM_THREADS=1' if threads == '1' else 'its default threads'}), Python {platform.python_version()},"
            f" {vers}")


def _has(dist: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        version(dist)
        return True
    except PackageNotFoundError:
        return False


def print_result(r: dict) -> None:
    s = summarize(r, 1 if r["threads"] == "1" else 0)
    base = s["ort"]
    same = "equal" if all(r["same"].values()) else "DIFFER " + ",".join(k for k, v in r["same"].items() if not v)
    print(f"{r['model']} policy {r['policy']} threads {r['threads']}: prompt {r['prompt']}, {r['tokens']} tokens, "
          f"tokens {same}, onnxkit plans {r['planned']}, setup began after step {r.get('began')}, warm from step "
          f"{r.get('switched')} (setup s: child, "
          f"warm tier {r.get('warm_setup_s')}); {'thread CPU' if r['threads'] == '1' else 'wall'} ms")
    print(f"  {'runtime':8s} {'first':>8s} {'prefill':>8s} {'x':>5s} {'early':>8s} {'x':>5s} {'late':>8s} {'x':>5s} {'late/early':>10s}"
          f" {'worst':>8s} {'setup s':>8s} {'tokens':>9s} {'x':>5s}")
    for k, v in s.items():
        print(f"  {k:8s} {v['first']:8.1f} {v['prefill']:8.2f} {v['prefill'] / base['prefill']:5.2f} {v['early']:8.3f} "
              f"{v['early'] / base['early']:5.2f} {v['late']:8.3f} {v['late'] / base['late']:5.2f} "
              f"{v['late'] / v['early']:10.2f} {v['worst']:8.1f} {r['setup'][k]:8.2f} {v['total']:9.1f} "
              f"{v['total'] / base['total']:5.2f}")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-m", "--model", choices=MODELS, action="append")
    parser.add_argument("--tokens", type=int, default=500)
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--policy", choices=("tiered", "warm"), action="append")
    parser.add_argument("--threads", choices=("1", "default"), default="1")
    parser.add_argument("--no-generators", action="store_true")
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child: run this model, print JSON
    args = parser.parse_args()
    if args.one:
        print("RESULT " + json.dumps(run_one(args.one, args.tokens, args.prompt, args.threads,
                                             not args.no_generators)))
        return 0
    models = args.model or DEFAULT_MODELS
    if args.build_only:
        for m in models:
            t0 = time.perf_counter()
            print(m, model_path(m), f"{time.perf_counter() - t0:.1f}s", flush=True)
        return 0
    print(conditions(args.threads))
    print(f"ms; first = the session's first run (the {args.prompt}-token prompt: planning, loading, compiling "
          f"included), prefill = the median of {PREFILL_REPEATS} runs of the same prompt again after the tokens; early = median of tokens 11-30, late = of the last "
          f"20; x = ratio to ort (onnxruntime InferenceSession, same loop); one thread: the calling thread's CPU "
          f"time (every runtime computes in it; on a shared machine its wall time mostly measures the others' "
          f"load; --json keeps both)", flush=True)
    results = []
    for m in models:
        model_path(m)
        for policy in args.policy or ("tiered", "warm"):
            env = {**os.environ, "ONNXKIT_FIRST_RUN": policy}
            if args.threads == "1":
                env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
            cmd = [sys.executable, __file__, "--one", m, "--tokens", str(args.tokens), "--prompt", str(args.prompt),
                   "--threads", args.threads] + (["--no-generators"] if args.no_generators else [])
            done = subprocess.run(cmd, capture_output=True, text=True, env=env)
            line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
            if done.returncode or not line:
                print(f"{m} {policy}: FAILED\n{done.stderr[-3000:]}")
                continue
            r = json.loads(line[-1][7:])
            results.append(r)
            print_result(r)
    if args.json:
        args.json.write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
