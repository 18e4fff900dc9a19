"""CPU kernels of the ai.onnx.ml domain, one module per operator family.

``linear.py`` (LinearClassifier, LinearRegressor), ``svm.py`` (SVMClassifier, SVMRegressor),
``trees.py`` (TreeEnsemble, TreeEnsembleClassifier, TreeEnsembleRegressor),
``preprocessing.py`` (ArrayFeatureExtractor, Binarizer, FeatureVectorizer, Imputer,
Normalizer, OneHotEncoder, Scaler) and ``mapping.py`` (CastMap, CategoryMapper,
DictVectorizer, LabelEncoder, ZipMap).  Each exposes ``KERNELS``, an
:class:`onnxkit.runtime.KernelTable` keyed by ``("ai.onnx.ml", op_type, since_version)``;
:func:`all_kernels` merges them (modules whose name starts with ``_`` hold shared helpers).
"""

from __future__ import annotations

import importlib
import pkgutil


def family_modules() -> list:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def all_kernels() -> dict:
    table: dict = {}
    for family in family_modules():
        module = importlib.import_module(f"{__name__}.{family}")
        for key, factory in module.KERNELS.items():
            if key in table:
                raise RuntimeError(f"kernel {key} is defined in two families ({family} and another)")
            table[key] = factory
    return table
