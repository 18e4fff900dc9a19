"""A catalogue of models for the validator: invalid ones, each breaking ONE rule, and valid ones.

Every model is built with onnxkit's own IR and written with onnxkit's writer
(:func:`onnxkit.api.to_bytes`); a few are octets built by hand where the fault is in the
encoding itself.  Faults the Python IR cannot express directly (a mandatory field absent,
a reserved or deprecated field present, a value field that does not match the type) are
written through the IR's wire record (``_wire``), which the writer honours: that is how a
decoded model with the same fault round-trips.

:data:`INVALID` and :data:`VALID` list :class:`Case` objects.  For an invalid case, ``code``
is the code the validator must report, and ``also`` the other error codes it may report
(the same fault seen from another rule); a case whose ``code`` is a warning must produce
no error at all beyond ``also``.  A valid case must produce no error; its ``warnings`` must
be reported.
"""

from __future__ import annotations

from catalogue_build import *  # noqa: F401,F403  (in this order: the cases register as they are defined)
from catalogue_invalid_model import *  # noqa: F401,F403
from catalogue_invalid_graph import *  # noqa: F401,F403
from catalogue_invalid_data import *  # noqa: F401,F403
from catalogue_invalid_functions import *  # noqa: F401,F403
from catalogue_valid import *  # noqa: F401,F403
from catalogue_build import INVALID, VALID  # noqa: F401
