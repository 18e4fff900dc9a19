"""Kernels of the ai.onnx.ml domain (numpy), one module per operator family.

``linear.py`` (LinearClassifier, LinearRegressor), ``svm.py`` (SVMClassifier, SVMRegressor),
``trees.py`` (TreeEnsemble, TreeEnsembleClassifier, TreeEnsembleRegressor),
``preprocessing.py`` (ArrayFeatureExtractor, Binarizer, FeatureVectorizer, Imputer,
Normalizer, OneHotEncoder, Scaler) and ``mapping.py`` (CastMap, CategoryMapper,
DictVectorizer, LabelEncoder, ZipMap).  Each exposes ``KERNELS``, an
:class:`onnxkit.runtime.KernelTable` keyed by ``("ai.onnx.ml", op_type, since_version)``;
:func:`all_kernels` merges them (modules whose name starts with ``_`` hold shared helpers) and
marks every one ``host_only``: they compute on numpy arrays (maps, strings, tree traversal on
the host), so a backend whose values are not numpy runs these nodes on its fallback (cpu).
"""

from __future__ import annotations

from onnxkit.plugin import host_only, merge_family_tables


def all_kernels() -> dict:
    """Every kernel of every family module of this package, each marked ``host_only``."""
    table = merge_family_tables(__name__, __path__, "KERNELS")
    for factory in table.values():
        host_only(factory)
    return table
