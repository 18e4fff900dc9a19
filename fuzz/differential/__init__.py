"""A differential fuzzer of onnxkit's optimizer passes and the cpu backend's fast paths.

Random *valid* models (built with ``onnx.helper``: this is tooling, not runtime code) full of
the patterns the passes rewrite and their near misses are run by four evaluators:

* onnxkit with its default options (every pass on),
* onnxkit with ``graph_optimization_level = ORT_DISABLE_ALL``,
* onnxruntime with its optimizer off (``ORT_DISABLE_ALL``): the oracle,
* ``onnx.reference.ReferenceEvaluator``: the tie-break where onnxkit and onnxruntime disagree
  (or where onnxruntime cannot run the model).

Modules: :mod:`.build` (graph builder, feeds, the metadata a saved model carries),
:mod:`.patterns` and :mod:`.fastpaths` (the model families), :mod:`.oracle` (running and
comparing one model), :mod:`.exclusions` (the known oracle disagreements, with reasons),
:mod:`.minimize` (delta debugging of a failure), :mod:`.driver` (seeded runs, many models,
several processes).  ``python tools/fuzz_differential.py --help`` is the command line.

Everything is deterministic per seed: model ``k`` of seed ``s`` is built from
``numpy.random.default_rng([s, k])``.
"""
