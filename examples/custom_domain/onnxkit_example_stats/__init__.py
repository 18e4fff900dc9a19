"""An example domain package for onnxkit (README, "Writing your own domain package").

Domain ``org.onnxkit.example.stats``, operator set version 1, three operators:

* ``MakeHistogram(x: tensor(float)) -> h: opaque(org.onnxkit.example.stats, Histogram)``,
  attribute ``bins`` (int, default 10): the histogram of all elements of ``x``;
* ``HistogramQuantile(h: opaque(...Histogram), q: tensor(float)) -> tensor(float)``: the
  quantiles ``q`` (in [0, 1]) estimated from the histogram, same shape as ``q``;
* ``Standardize(x: tensor(float|double)) -> tensor``, attribute ``epsilon`` (float, default
  1e-6): ``(x - mean) / sqrt(var + epsilon)`` over all elements, written once for every backend.

The histogram passes between them as a value of an opaque type of this domain
(Clause 6.8.4): onnxkit carries it as a :class:`Histogram` object and ascribes no meaning to it.
"""

DOMAIN = "org.onnxkit.example.stats"
