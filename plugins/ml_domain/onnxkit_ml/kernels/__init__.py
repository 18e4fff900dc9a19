"""Kernels of the ai.onnx.ml domain (numpy), one module per operator family.

``linear.py`` (LinearClassifier, LinearRegressor), ``svm.py`` (SVMClassifier, SVMRegressor),
``trees.py`` (TreeEnsemble, TreeEnsembleClassifier, TreeEnsembleRegressor),
``preprocessing.py`` (ArrayFeatureExtractor, Binarizer, FeatureVectorizer, Imputer,
Normalizer, OneHotEncoder, Scaler) and ``mapping.py`` (CastMap, CategoryMapper,
DictVectorizer, LabelEncoder, ZipMap).  Each exposes ``KERNELS``, an
:class:`onnxkit.plugin.KernelTable` keyed by ``("ai.onnx.ml", op_type, since_version)``;
:func:`all_kernels` gives them (modules whose name starts with ``_`` hold shared helpers), each
imported when a node is first planned with it (:mod:`onnxkit.plugin.lazy`).  Every one is
registered ``host_only=True``: they compute on numpy arrays (maps, strings, tree traversal on
the host), so a backend whose values are not numpy runs these nodes on its fallback (cpu).
"""

from __future__ import annotations

from onnxkit.plugin import lazy_family_tables


def all_kernels() -> dict:
    """Every kernel of every family module of this package, each imported when a node is first
    planned with it (the generated ``_kernel_index.py``, which carries their ``host_only``;
    tests/plugins/test_kernel_index.py keeps it equal to the modules' ``KERNELS``: regenerate with
    ``python tools/kernel_index.py``)."""
    from ._kernel_index import ENTRIES

    return lazy_family_tables(__name__, ENTRIES)
