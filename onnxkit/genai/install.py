"""``install_as_onnxruntime_genai()``: ``import onnxruntime_genai`` gives :mod:`onnxkit.genai` for
the rest of the process (``onnxruntime_genai.X`` -> ``onnxkit.genai.X``, a name onnxkit lacks --
``onnxruntime_genai.models.builder`` -- a ``ModuleNotFoundError`` naming onnxkit, never part of the
real package); :func:`uninstall` undoes it.  :func:`shim_dir` / :func:`child_environment`: the
folder put first on ``PYTHONPATH`` so that child Python processes stand in too (with an
``onnxruntime-genai`` distribution record of :data:`~onnxkit.genai.version.GENAI_API_VERSION`).

The machinery is onnxruntime's stand-in's (:class:`onnxkit.ort.install.StandIn`)."""

from __future__ import annotations

from ..ort.install import StandIn
from .version import GENAI_API_VERSION

ALIAS = "onnxruntime_genai"
TARGET = "onnxkit.genai"
ENVIRON = "ONNXKIT_AS_ONNXRUNTIME_GENAI"


_GENAI = StandIn(ALIAS, TARGET, "install_as_onnxruntime_genai", "onnxruntime-genai", GENAI_API_VERSION, ENVIRON)


def installed() -> bool:
    """Whether onnxkit stands in for onnxruntime_genai in this process."""
    return _GENAI.installed()


def install_as_onnxruntime_genai() -> None:
    """From now on ``import onnxruntime_genai`` (and its submodules) gives :mod:`onnxkit.genai`.

    Idempotent.  onnxruntime_genai modules imported before are replaced in :data:`sys.modules`
    (objects taken from them earlier stay what they were)."""
    _GENAI.install()


def uninstall() -> None:
    """Undo :func:`install_as_onnxruntime_genai`: ``import onnxruntime_genai`` finds the real one (if any)."""
    _GENAI.uninstall()


def shim_dir(directory=None) -> str:
    """A folder (new temporary one unless ``directory``) holding an ``onnxruntime_genai`` package
    that installs the stand-in when imported, and an ``onnxruntime-genai`` distribution record."""
    return _GENAI.shim_dir(directory)


def child_environment(env=None, directory=None) -> dict:
    """``env`` (default :data:`os.environ`) with :func:`shim_dir`'s folder first on ``PYTHONPATH``."""
    return _GENAI.child_environment(env, directory)
