"""Shape classes: which extents of a session's feeds vary across runs, and the class of a signature.

A *signature* is the element type and shape of every fed tensor, in input order, None for an
input not fed (:func:`~onnxkit.runtime.optimizer.specialize.signature`).  Its *class* is the
signature with each extent seen to vary replaced by a dimension variable of its own: one
specialized plan (:mod:`.specialize`) serves every signature of a class.
"""

from __future__ import annotations

from typing import Optional

from . import class_masks

#: extents an input axis may take in specialized plans of their own before it varies
VARIANTS = 2
#: signatures whose class is remembered (the table is emptied when full)
KEYS_KEPT = 256
#: the dimension variable of a varying extent (input position, axis) in a shape class's types
VARYING = "onnxkit_varying_{}_{}"


class ShapeClasses:
    """Which extents of the feeds vary across runs, and the shape class of a signature.

    The extents seen at each axis of each input position (per element type and rank) are
    counted; an axis seen with more than :data:`VARIANTS` extents *varies* from then on.  The
    class of a signature is the signature with each varying extent replaced by a dimension
    variable of its own (:data:`VARYING`, the input position and axis): one specialized plan
    serves every signature of a class.  A program alternating between a few shapes keeps a plan
    specialized for each; a feed whose extents keep changing (a decoder's growing KV cache, OCR
    line widths, a server's batch sizes) costs planning only until its axes are seen to vary —
    a bounded number of plans, never one per run.  An axis never stops varying.  Not
    thread-safe: the :class:`Specializer` calls it under its lock."""

    __slots__ = ("seen", "varying", "_log", "_keys", "_names", "_classes", "_masks", "_mask")

    def __init__(self, log=None):
        self._names: dict = {}       # (input position, axis) -> its variable's name (VARYING)
        self.seen: dict = {}         # (input position, dtype, rank, axis) -> extents seen there
        self.varying: set = set()    # (input position, axis) seen with more than VARIANTS extents
        self._log = log
        self._keys: dict = {}        # signature -> its class, while no further axis varies
        self._classes: set = set()   # the classes :meth:`_classify` gave while no further axis varies
        self._masks: tuple = ()      # (input position, ((axis, variable), ...)) of each position that varies
        self._mask = None            # :attr:`_masks` compiled (:func:`.class_masks.compiled`), made when first asked

    def key(self, sig: tuple) -> tuple:
        """The class of ``sig``: ``sig`` itself while no extent of it varies.

        A signature not met before whose varying extents replaced by their variables give a class
        :meth:`_classify` gave since the last axis began to vary is of that class without
        classifying it: every other extent of it is one of that earlier signature's, all seen, so
        classifying would note nothing (a decoder's new past length each token costs that one
        replacement)."""
        key = self._keys.get(sig)
        if key is None:
            masked = self._masked(sig) if self._masks else None
            if masked is not None and masked in self._classes:
                key = masked
            else:
                before = len(self.varying)
                key = self._classify(sig)
                if len(self.varying) != before or len(self._keys) >= KEYS_KEPT:
                    self._keys.clear()
                    self._classes.clear()
                    self._masks, self._mask = self._mask_table(), None
                self._classes.add(key)
            self._keys[sig] = key
        return key

    def copy(self) -> "ShapeClasses":
        """A copy of what this instance has seen (the extents, the varying axes and their
        variables; ``log`` not carried): a later plan's specializer starts from it."""
        other = ShapeClasses()
        other.seen = {k: set(v) for k, v in self.seen.items()}
        other.varying = set(self.varying)
        other._names = dict(self._names)
        other._masks, other._mask = other._mask_table() if other.varying else (), None
        return other

    def _mask_table(self) -> tuple:
        by_position: dict = {}
        for k, a in sorted(self.varying):
            by_position.setdefault(k, []).append((a, self._names.get((k, a)) or self._names.setdefault((k, a), VARYING.format(k, a))))
        return tuple((k, tuple(axes)) for k, axes in sorted(by_position.items()))

    def _masked(self, sig: tuple) -> Optional[tuple]:
        """``sig`` with each varying extent replaced by its variable (what :meth:`_classify` returns
        when it notes nothing new); None where a position that varies is past the signature's end.
        Through the mask compiled for the first signature laid out as ``sig`` is (:mod:`.class_masks`)."""
        mask = self._mask
        if mask is None:
            mask = self._mask = class_masks.compiled(self._masks, sig)
        got = mask(sig)
        return class_masks.masked(self._masks, sig) if got is class_masks.AGAIN else got

    def _classify(self, sig: tuple) -> tuple:
        for k, s in enumerate(sig):
            if s is None:
                continue
            dtype, shape = s
            for axis, d in enumerate(shape):
                if (k, axis) in self.varying:
                    continue
                extents = self.seen.setdefault((k, dtype, len(shape), axis), set())
                if d not in extents:
                    extents.add(d)
                    if len(extents) > VARIANTS:
                        self.varying.add((k, axis))
                        if self._log is not None:
                            self._log(k, axis, sorted(extents))
        varying = self.varying
        if not varying:
            return sig
        names = self._names
        return tuple(s if s is None else (s[0], tuple(names.get((k, a)) or names.setdefault((k, a), VARYING.format(k, a))
                                                       if (k, a) in varying else d for a, d in enumerate(s[1])))
                     for k, s in enumerate(sig))
