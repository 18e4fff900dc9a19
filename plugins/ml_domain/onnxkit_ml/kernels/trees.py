"""Tree ensembles of ai.onnx.ml, evaluated vectorised over the batch.

Operators and the definitions (since_versions) implemented:

* TreeEnsemble 5: nodes 0..n-1 with separate leaves (``nodes_trueleafs`` / ``nodes_falseleafs``),
  modes BRANCH_LEQ, LT, GTE, GT, EQ, NEQ and MEMBER (``membership_values``: the sets of the
  MEMBER nodes in node order, each closed by a NaN), ``aggregate_function`` AVERAGE / SUM /
  MIN / MAX, ``post_transform`` 0..4; Y has X's element type (float, double, float16).
* TreeEnsembleRegressor 1, 3, 5 and TreeEnsembleClassifier 1, 3, 5 (5 is deprecated and
  still evaluated, Clause 14.5; 3 and 5 add the ``*_as_tensor`` double attributes, which win
  over the float ones when both are given).  Y / Z are float32 (labels int64 or STRING).

Evaluation: all trees are compiled once into flat tables where each node owns two child
entries (false, true) and each leaf is an absorbing node.  Rows x trees advance one level per
step with numpy index arrays (a few gathers per level), trees grouped in chunks of similar
depth so the working set stays in cache; the leaves reached are then aggregated with one
gather of a dense [leaves, targets] table (a sparse sum for very many targets).  Thresholds
are compared in float32, or float64 when X or the thresholds are double; a NaN feature goes
to the true branch when the node's ``missing_value_tracks_true`` is set, otherwise it follows
IEEE comparison (false for all modes but NEQ).  Hit rates are ignored.

Documented choices (the specification is vague; onnxruntime's behaviour where noted):

* A target that no reached leaf votes for scores 0 plus its base value under every aggregate
  function (the reference leaves MIN/MAX at the float limits; onnxruntime gives such a target of
  a multi-target regressor 0 without its base value).
* AVERAGE divides by the number of trees.  The post transform is applied to each row of
  targets (regressors included, one target too: onnxruntime applies only PROBIT to a single
  target, the reference none but PROBIT; TreeEnsemble 5 too).
* TreeEnsembleClassifier with two labels whose votes all name one class id (the *binary case*,
  what skl2onnx and onnxmltools write for binary models) follows onnxruntime 1.32.  Let ``v``
  be the score of that class (0 for a row no vote reached), rounded to the comparison type
  (float32 for float models, as onnxruntime accumulates: a forest's probabilities summing to
  1.0000000149 give 1, not a complement of -1.5e-08).  The label is ``labels[1]`` when
  ``v > 0.5`` if every weight is >= 0, when ``v > 0`` otherwise, else ``labels[0]``.
  - class id 0, at most one base value (added to ``v`` where a vote reached the row): the
    second score is derived; Z = ``[1 - v, v]`` with weights >= 0, ``[-v, v]`` otherwise
    (NONE, SOFTMAX, SOFTMAX_ZERO); ``[σ(-v), σ(v)]`` under LOGISTIC (either sign);
    ``probit([1 - v, v])`` under PROBIT (the reference's: onnxruntime writes ``probit(v)`` in
    column 0 and leaves column 1 unset);
  - class id 0, two base values: Z = post_transform([v + base[0], 0]) (onnxruntime's reading:
    ``base[1]`` is not used);
  - class id 1, at most one base value (not used): Z = post_transform([0, v]) for a row a vote
    reached, the derived form of ``v = 0`` otherwise (onnxruntime's);
  - class id 1, two base values: Z = post_transform([base[0], v + base[1]]), the label by
    ``v + base[1]`` (onnxruntime gives ``[-base[1], base[1]]``, the votes ignored).
  Every other classifier (two labels with votes for both included) adds ``base_values`` per
  class, takes the label of the greatest raw score among the classes that got a vote (first on
  ties) and applies the post transform to Z (the reference's; onnxruntime labels a two-label
  classifier with votes for both classes 0/1 by the sign of class 1's score, not by its labels).
* In the legacy forms the root of a tree is its first node in attribute order, and trees are
  numbered by sorted tree id; weights attached to a non-leaf node are ignored.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable

from ._common import labels_from, logistic, post_transform, probit, str_list, transform_name

KERNELS = KernelTable()
ML = "ai.onnx.ml"

LEQ, LT, GTE, GT, EQ, NEQ, MEMBER = range(7)
MODE_NAMES = {"BRANCH_LEQ": LEQ, "BRANCH_LT": LT, "BRANCH_GTE": GTE, "BRANCH_GT": GT, "BRANCH_EQ": EQ,
              "BRANCH_NEQ": NEQ, "BRANCH_MEMBER": MEMBER}
_OPS = {LEQ: np.less_equal, LT: np.less, GTE: np.greater_equal, GT: np.greater, EQ: np.equal, NEQ: np.not_equal}
AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")
CHUNK_ELEMENTS = 1 << 18      # rows x trees advanced together
DENSE_LIMIT = 64 << 20        # octets of the dense leaf table


class Forest:
    """A compiled ensemble.

    Internal nodes ``0..m-1`` (``feature``, ``threshold``, ``mode``, ``missing``, children
    ``true_child`` / ``false_child`` encoded as an internal index >= 0 or ``~leaf`` < 0),
    ``members`` ({internal node: set values}), ``roots`` (one encoded reference per tree) and
    leaf votes ``(leaf, target, weight)``.
    """

    def __init__(self, fail, *, feature, threshold, mode, missing, true_child, false_child, members, roots,
                 vote_leaf, vote_target, vote_weight, n_leaves, n_targets, aggregate, cmp_dtype):
        self.fail = fail
        m = len(feature)
        self.n_trees = len(roots)
        self.n_leaves = int(n_leaves)
        self.n_targets = int(n_targets)
        self.aggregate = aggregate
        self.cmp_dtype = cmp_dtype
        self.max_feature = int(feature.max()) if m else -1
        if m and feature.min() < 0:
            fail("a node has a negative feature id")
        for name, ch in (("true", true_child), ("false", false_child)):
            if m and (ch.max(initial=-1) >= m or (~ch[ch < 0]).max(initial=-1) >= n_leaves):
                fail(f"a {name} child refers to a node or leaf that does not exist")
        # slots: internal node i -> i, leaf j -> m + j; tables hold two entries per slot
        n_slots = m + n_leaves
        slot = lambda ref: np.where(ref >= 0, ref, m + ~ref)  # noqa: E731
        child2 = np.empty(2 * n_slots, dtype=np.intp)
        child2[0:2 * m:2] = 2 * slot(false_child)
        child2[1:2 * m:2] = 2 * slot(true_child)
        child2[2 * m::2] = 2 * np.arange(m, n_slots)
        child2[2 * m + 1::2] = child2[2 * m::2]
        self.child2 = child2
        self.feat2 = np.zeros(2 * n_slots, dtype=np.intp)
        self.feat2[0:2 * m:2] = feature
        self.feat2[1:2 * m:2] = feature
        self.thr2 = np.zeros(2 * n_slots, dtype=cmp_dtype)
        self.thr2[0:2 * m:2] = threshold
        self.thr2[1:2 * m:2] = threshold
        self.leaf2 = np.zeros(2 * n_slots, dtype=np.intp)
        self.leaf2[2 * m::2] = np.arange(n_leaves)
        self.leaf2[2 * m + 1::2] = np.arange(n_leaves)
        modes = set(np.unique(mode).tolist()) if m else set()
        if modes - set(range(7)):
            fail(f"unknown node mode(s) {sorted(modes - set(range(7)))}")
        self.single_mode = next(iter(modes)) if len(modes) == 1 and MEMBER not in modes else None
        self.modes = sorted(modes)
        if self.single_mode is None and m:
            self.mode2 = np.full(2 * n_slots, -1, dtype=np.int8)
            self.mode2[0:2 * m:2] = mode
            self.mode2[1:2 * m:2] = mode
        self.has_missing = bool(m and missing.any())
        if self.has_missing:
            self.miss2 = np.zeros(2 * n_slots, dtype=bool)
            self.miss2[0:2 * m:2] = missing
            self.miss2[1:2 * m:2] = missing
        if MEMBER in modes:
            values = np.unique(np.concatenate([np.asarray(v, cmp_dtype) for v in members.values()] or [[]]))
            values = values[~np.isnan(values)].astype(cmp_dtype)
            keys = [2 * node * max(len(values), 1) + np.searchsorted(values, np.asarray(v, cmp_dtype))
                    for node, v in members.items() if len(v)]
            self.member_values = values
            self.member_keys = np.unique(np.concatenate(keys)) if keys else np.zeros(0, dtype=np.intp)
        self._chunks(roots, true_child, false_child, m)
        self._leaf_table(vote_leaf, vote_target, vote_weight, n_leaves)

    # -- compile ----------------------------------------------------------------------------
    def _chunks(self, roots, true_child, false_child, m):
        """Depth of each tree (internal levels on its longest path); trees grouped by depth."""
        roots = np.asarray(roots, dtype=np.int64)
        if roots.size and (roots.max(initial=-1) >= m or (~roots[roots < 0]).max(initial=-1) >= self.n_leaves):
            self.fail("a tree root refers to a node that does not exist")
        self.root2 = 2 * np.where(roots >= 0, roots, m + ~roots).astype(np.intp)
        depth = np.zeros(len(roots), dtype=np.int64)
        tree = np.nonzero(roots >= 0)[0]
        node = roots[tree]
        level = 0
        while node.size:
            level += 1
            if level > m:
                self.fail("the nodes do not form trees (a cycle)")
            depth[tree] = level
            t, f = true_child[node], false_child[node]
            node = np.concatenate([t[t >= 0], f[f >= 0]])
            tree = np.concatenate([tree[t >= 0], tree[f >= 0]])
            if node.size > 2 * len(roots) + m:
                pairs = np.unique(tree * (m + 1) + node)
                tree, node = pairs // (m + 1), pairs % (m + 1)
        order = np.argsort(-depth, kind="stable")
        self.order = order
        self.depth = depth

    def _leaf_table(self, vote_leaf, vote_target, vote_weight, n_leaves):
        k = self.n_targets
        if vote_target.size and (vote_target.min() < 0 or vote_target.max() >= k):
            bad = int(vote_target.max() if vote_target.max() >= k else vote_target.min())
            self.fail(f"a leaf votes for target/class {bad}, outside 0..{k - 1}")
        w = vote_weight.astype(np.float64)
        self.dense = k <= 64 and max(n_leaves, 1) * k * 9 <= DENSE_LIMIT
        agg = self.aggregate
        if self.dense:
            has = np.zeros((max(n_leaves, 1), k), dtype=bool)
            has[vote_leaf, vote_target] = True
            if agg in ("SUM", "AVERAGE"):
                val = np.zeros((max(n_leaves, 1), k))
                np.add.at(val, (vote_leaf, vote_target), w)
            elif agg == "MIN":
                val = np.full((max(n_leaves, 1), k), np.inf)
                np.minimum.at(val, (vote_leaf, vote_target), w)
            else:
                val = np.full((max(n_leaves, 1), k), -np.inf)
                np.maximum.at(val, (vote_leaf, vote_target), w)
            # one contiguous column per target (gathers and row sums stay contiguous)
            self.leaf_cols = [np.ascontiguousarray(val[:, t]) for t in range(k)]
            self.has_cols = [None if has[:n_leaves, t].all() else np.ascontiguousarray(has[:, t]) for t in range(k)]
        else:
            order = np.argsort(vote_leaf, kind="stable")
            self.vote_target, self.vote_weight = vote_target[order], w[order]
            self.vote_ptr = np.searchsorted(vote_leaf[order], np.arange(n_leaves + 1))

    # -- evaluate ---------------------------------------------------------------------------
    def _cond(self, cur, xv):
        if self.single_mode is not None:
            c = _OPS[self.single_mode](xv, self.thr2.take(cur))
        else:
            m = self.mode2.take(cur)
            t = self.thr2.take(cur)
            c = np.zeros(cur.shape, dtype=bool)
            for code in self.modes:
                if code == MEMBER:
                    sel = m == MEMBER
                    if sel.any():
                        c[sel] = self._member(cur[sel], xv[sel])
                else:
                    c |= (m == code) & _OPS[code](xv, t)
        if self.has_missing:
            c |= np.isnan(xv) & self.miss2.take(cur)
        return c

    def _member(self, cur2, x):
        values = self.member_values
        if not values.size:
            return np.zeros(x.shape, dtype=bool)
        vi = np.minimum(np.searchsorted(values, x), values.size - 1)
        found = values[vi] == x
        key = (cur2 // 2) * 2 * values.size + vi
        pos = np.minimum(np.searchsorted(self.member_keys, key), max(self.member_keys.size - 1, 0))
        return found & (self.member_keys.size > 0) & (self.member_keys[pos] == key)

    def leaves(self, x: np.ndarray, trees: np.ndarray) -> np.ndarray:
        """[N, len(trees)] leaf index reached by each row in each tree."""
        n, ncols = x.shape
        xflat = x.reshape(-1)
        cur = np.empty((n, len(trees)), dtype=np.intp)
        cur[:] = self.root2[trees]
        rowoff = (np.arange(n, dtype=np.intp) * ncols)[:, None]
        f = np.empty_like(cur)
        for _ in range(int(self.depth[trees].max(initial=0))):
            np.take(self.feat2, cur, out=f)
            f += rowoff
            c = self._cond(cur, xflat.take(f))
            cur += c
            np.take(self.child2, cur, out=cur)
        return self.leaf2.take(cur)

    def scores(self, x: np.ndarray):
        """(``[N, targets]`` aggregated votes as float64, ``[N, targets]`` whether any vote)."""
        n = x.shape[0]
        k = self.n_targets
        if self.max_feature >= x.shape[1]:
            self.fail(f"a node tests feature {self.max_feature} but X has {x.shape[1]} features")
        agg = self.aggregate
        init = {"MIN": np.inf, "MAX": -np.inf}.get(agg, 0.0)
        acc = np.full((n, k), init)
        has = np.zeros((n, k), dtype=bool)
        if n == 0 or self.n_trees == 0:
            return np.zeros((n, k)), has
        step = max(1, CHUNK_ELEMENTS // n)
        for start in range(0, self.n_trees, step):
            trees = self.order[start:start + step]
            leaf = self.leaves(x, trees)
            if self.dense:
                reduce = {"MIN": np.minimum, "MAX": np.maximum}.get(agg, np.add)
                for t in range(k):
                    reduce(acc[:, t], reduce.reduce(self.leaf_cols[t].take(leaf), axis=1), out=acc[:, t])
                    col = self.has_cols[t]
                    if col is None:
                        has[:, t] = True
                    else:
                        has[:, t] |= col.take(leaf).any(axis=1)
            else:
                self._sparse(leaf, acc, has)
        acc = np.where(has, acc, 0.0)
        if agg == "AVERAGE":
            acc /= self.n_trees
        return acc, has

    def _sparse(self, leaf, acc, has):
        n, k = acc.shape
        flat = leaf.reshape(-1)
        start, stop = self.vote_ptr[flat], self.vote_ptr[flat + 1]
        count = stop - start
        rows = np.repeat(np.repeat(np.arange(n), leaf.shape[1]), count)
        idx = np.repeat(start - np.cumsum(count) + count, count) + np.arange(count.sum())
        tgt, w = self.vote_target[idx], self.vote_weight[idx]
        key = rows * k + tgt
        has.reshape(-1)[key] = True
        if self.aggregate in ("SUM", "AVERAGE"):
            acc += np.bincount(key, weights=w, minlength=n * k).reshape(n, k)
        elif self.aggregate == "MIN":
            np.minimum.at(acc.reshape(-1), key, w)
        else:
            np.maximum.at(acc.reshape(-1), key, w)


# -- inputs -----------------------------------------------------------------------------------

def _input(ctx, x, cmp_dtype):
    if not isinstance(x, np.ndarray) or x.dtype == object or x.dtype.kind not in "fiu":
        ctx.fail(f"X must be a numeric tensor, got {getattr(x, 'dtype', type(x).__name__)}")
    if x.ndim not in (1, 2):
        ctx.fail(f"X must have rank 1 or 2, got shape {list(x.shape)}")
    x2 = x.reshape(1, -1) if x.ndim == 1 else x
    return np.ascontiguousarray(x2, dtype=cmp_dtype)


def _floats(ctx, name, dtype=np.float32):
    """A FLOATS attribute, or its ``_as_tensor`` (double) form when the node carries it."""
    known = ctx.schema is not None and name + "_as_tensor" in (ctx.schema.attributes or {})
    t = ctx.attr_tensor(name + "_as_tensor") if known else None
    if t is not None:
        return np.asarray(t).reshape(-1), True
    v = ctx.attr(name)
    return (None if v is None else np.asarray(v, dtype=dtype)), False


# -- legacy forms (TreeEnsembleRegressor / TreeEnsembleClassifier) ----------------------------

def _legacy_forest(ctx, vote_prefix: str, n_targets: int, aggregate: str, x_double: bool):
    treeids = np.asarray(ctx.attr("nodes_treeids") or [], dtype=np.int64)
    nodeids = np.asarray(ctx.attr("nodes_nodeids") or [], dtype=np.int64)
    n = len(treeids)
    modes_s = str_list(ctx.attr("nodes_modes"))
    feats = np.asarray(ctx.attr("nodes_featureids") or [], dtype=np.int64)
    values, values_double = _floats(ctx, "nodes_values")
    values = np.zeros(n) if values is None else values
    trues = np.asarray(ctx.attr("nodes_truenodeids") or [], dtype=np.int64)
    falses = np.asarray(ctx.attr("nodes_falsenodeids") or [], dtype=np.int64)
    miss = ctx.attr("nodes_missing_value_tracks_true")
    miss = np.zeros(n, dtype=bool) if not miss else np.asarray(miss, dtype=np.int64) != 0
    for name, arr in (("nodes_nodeids", nodeids), ("nodes_modes", modes_s), ("nodes_featureids", feats),
                      ("nodes_values", values), ("nodes_truenodeids", trues), ("nodes_falsenodeids", falses),
                      ("nodes_missing_value_tracks_true", miss)):
        if len(arr) != n:
            ctx.fail(f"{name} has {len(arr)} values but nodes_treeids has {n}")
    try:
        modes = np.asarray([-1 if s == "LEAF" else MODE_NAMES[s] for s in modes_s], dtype=np.int64)
    except KeyError as exc:
        ctx.fail(f"unknown node mode {exc.args[0]!r}")
    if (modes == MEMBER).any():
        ctx.fail("BRANCH_MEMBER is not a mode of this operator (TreeEnsemble 5 has it)")
    scale = int(max(nodeids.max(initial=0), trues.max(initial=0), falses.max(initial=0))) + 1
    keys = treeids * scale + nodeids
    order = np.argsort(keys, kind="stable")
    skeys = keys[order]
    if n and (np.diff(skeys) == 0).any():
        ctx.fail("a (tree id, node id) pair appears twice")

    def lookup(tree, node, what):
        k = tree * scale + node
        pos = np.minimum(np.searchsorted(skeys, k), max(n - 1, 0))
        if n == 0 or (k.size and ((skeys[pos] != k) | (node < 0) | (node >= scale)).any()):
            ctx.fail(f"{what} refers to a (tree id, node id) that is not a node")
        return order[pos]

    is_leaf = modes < 0
    internal = np.nonzero(~is_leaf)[0]
    new_index = np.empty(n, dtype=np.int64)
    new_index[internal] = np.arange(len(internal))
    leaf_nodes = np.nonzero(is_leaf)[0]
    new_index[leaf_nodes] = ~np.arange(len(leaf_nodes))
    t_pos = lookup(treeids[internal], trues[internal], "nodes_truenodeids")
    f_pos = lookup(treeids[internal], falses[internal], "nodes_falsenodeids")
    tree_ids, first = np.unique(treeids, return_index=True)
    roots = new_index[first]
    vt = np.asarray(ctx.attr(f"{vote_prefix}_treeids") or [], dtype=np.int64)
    vn = np.asarray(ctx.attr(f"{vote_prefix}_nodeids") or [], dtype=np.int64)
    vid = np.asarray(ctx.attr(f"{vote_prefix}_ids") or [], dtype=np.int64)
    vw, w_double = _floats(ctx, f"{vote_prefix}_weights")
    vw = np.zeros(0) if vw is None else vw
    if not (len(vt) == len(vn) == len(vid) == len(vw)):
        ctx.fail(f"{vote_prefix}_treeids/_nodeids/_ids/_weights must have the same length")
    vpos = lookup(vt, vn, f"{vote_prefix}_nodeids") if len(vt) else np.zeros(0, dtype=np.int64)
    on_leaf = is_leaf[vpos]
    cmp_dtype = np.float64 if (x_double or values_double) else np.float32
    forest = Forest(ctx.fail, feature=feats[internal], threshold=values[internal].astype(cmp_dtype),
                    mode=modes[internal], missing=miss[internal], true_child=new_index[t_pos],
                    false_child=new_index[f_pos], members={}, roots=roots, vote_leaf=~new_index[vpos[on_leaf]],
                    vote_target=vid[on_leaf], vote_weight=vw[on_leaf], n_leaves=len(leaf_nodes),
                    n_targets=n_targets, aggregate=aggregate, cmp_dtype=cmp_dtype)
    return forest, vid


def _cached(build):
    """Compile the forest on first call per comparison dtype (float32 / float64 inputs)."""
    forests = {}

    def get(x_double):
        if x_double not in forests:
            forests[x_double] = build(x_double)
        return forests[x_double]

    return get


@KERNELS.register("TreeEnsembleRegressor", 1, 3, 5, domain=ML, host_only=True)
def tree_ensemble_regressor(ctx):
    n_targets = ctx.attr("n_targets")
    if n_targets is None:
        ctx.fail("attribute 'n_targets' is required")
    aggregate = ctx.attr_str("aggregate_function")
    if aggregate not in AGGREGATES:
        ctx.fail(f"aggregate_function={aggregate!r} is not one of {', '.join(AGGREGATES)}")
    transform = transform_name(ctx)
    base, _ = _floats(ctx, "base_values")
    base = np.zeros(0) if base is None else base.astype(np.float64)
    if base.size not in (0, int(n_targets)):
        ctx.fail(f"base_values has {base.size} values for {n_targets} targets")
    forest = _cached(lambda dbl: _legacy_forest(ctx, "target", int(n_targets), aggregate, dbl)[0])
    forest(False)  # validate the attributes when the session is prepared

    def run(x):
        f = forest(x.dtype == np.float64)
        s, _ = f.scores(_input(ctx, x, f.cmp_dtype))
        if base.size:
            s = s + base
        return post_transform(s, transform).astype(np.float32)

    return run


def _derived(v, positive: bool, transform: str):
    """Z of a binary classifier from its one score ``v`` per row (the second score derived)."""
    if transform == "LOGISTIC":
        return np.stack([logistic(-v), logistic(v)], axis=1)
    if transform == "PROBIT":
        return probit(np.stack([1.0 - v, v], axis=1))
    return np.stack([1.0 - v if positive else -v, v], axis=1)


def _binary(s, has, cid: int, base, positive: bool, transform: str, dtype):
    """(label index, Z) of a two-label classifier whose votes all name class ``cid`` (the binary
    case of the module docstring)."""
    h = has[:, cid]
    raw = np.where(h, s[:, cid], 0.0)
    zero = np.zeros_like(raw)
    pair = None
    if cid == 0 and base.size < 2:
        v = np.where(h, raw + (base[0] if base.size else 0.0), 0.0)
    elif cid == 0:
        v = np.where(h, raw + base[0], 0.0)
        pair = (v, zero)
    elif base.size < 2:
        v = raw
        pair = (zero, v)
    else:
        v = raw + base[1]
        pair = (zero + base[0], v)
    v = v.astype(dtype).astype(np.float64)  # the score as onnxruntime holds it (float32 for float models)
    best = (v > (0.5 if positive else 0.0)).astype(np.int64)
    if pair is None:
        return best, _derived(v, positive, transform)
    z = post_transform(np.stack([np.asarray(p, np.float64).astype(dtype) for p in pair], axis=1), transform)
    if cid == 1 and base.size < 2:  # a row no vote reached: the derived form of 0
        z = np.where(h[:, None], z, _derived(zero, positive, transform))
    return best, z


@KERNELS.register("TreeEnsembleClassifier", 1, 3, 5, domain=ML, host_only=True)
def tree_ensemble_classifier(ctx):
    ints = list(ctx.attr("classlabels_int64s") or [])
    strings = str_list(ctx.attr("classlabels_strings"))
    if ints and strings:
        ctx.fail("only one of classlabels_int64s and classlabels_strings may be given")
    k = len(strings) or len(ints)
    if k == 0:
        ctx.fail("one of classlabels_int64s and classlabels_strings is required")
    transform = transform_name(ctx)
    base, _ = _floats(ctx, "base_values")
    base = np.zeros(0) if base is None else base.astype(np.float64)
    class_ids = np.asarray(ctx.attr("class_ids") or [], dtype=np.int64)
    weights, _ = _floats(ctx, "class_weights")
    positive = weights is None or bool((weights >= 0).all())
    ids = np.unique(class_ids)
    binary = k == 2 and ids.size == 1
    if binary and base.size not in (0, 1, 2):
        ctx.fail(f"base_values has {base.size} values for a binary classifier")
    if not binary and base.size not in (0, k):
        ctx.fail(f"base_values has {base.size} values for {k} classes")
    forest = _cached(lambda dbl: _legacy_forest(ctx, "class", k, "SUM", dbl)[0])
    forest(False)

    def run(x):
        f = forest(x.dtype == np.float64)
        s, has = f.scores(_input(ctx, x, f.cmp_dtype))
        if binary:
            best, z = _binary(s, has, int(ids[0]), base, positive, transform, f.cmp_dtype)
        else:
            if base.size:
                s = s + base
                has = np.ones_like(has)
            masked = np.where(has, s, -np.inf)
            best = np.argmax(masked, axis=1) if len(s) else np.zeros(0, dtype=np.int64)
            z = post_transform(s, transform)
        return labels_from(best, ints, strings), z.astype(np.float32)

    return run


# -- TreeEnsemble 5 ---------------------------------------------------------------------------

def _tensor(ctx, name, required=True):
    t = ctx.attr_tensor(name)
    if t is None and required:
        ctx.fail(f"attribute {name!r} is required")
    return None if t is None else np.asarray(t).reshape(-1)


@KERNELS.register("TreeEnsemble", 5, domain=ML, host_only=True)
def tree_ensemble(ctx):
    splits = _tensor(ctx, "nodes_splits")
    modes = _tensor(ctx, "nodes_modes").astype(np.int64)
    weights = _tensor(ctx, "leaf_weights")
    membership = _tensor(ctx, "membership_values", required=False)
    feats = np.asarray(ctx.attr("nodes_featureids") or [], dtype=np.int64)
    trues = np.asarray(ctx.attr("nodes_truenodeids") or [], dtype=np.int64)
    falses = np.asarray(ctx.attr("nodes_falsenodeids") or [], dtype=np.int64)
    tleaf = np.asarray(ctx.attr("nodes_trueleafs") or [], dtype=np.int64) != 0
    fleaf = np.asarray(ctx.attr("nodes_falseleafs") or [], dtype=np.int64) != 0
    targets = np.asarray(ctx.attr("leaf_targetids") or [], dtype=np.int64)
    roots = np.asarray(ctx.attr("tree_roots") or [], dtype=np.int64)
    miss = ctx.attr("nodes_missing_value_tracks_true")
    n = len(feats)
    miss = np.zeros(n, dtype=bool) if not miss else np.asarray(miss, dtype=np.int64) != 0
    for name, arr in (("nodes_splits", splits), ("nodes_modes", modes), ("nodes_truenodeids", trues),
                      ("nodes_falsenodeids", falses), ("nodes_trueleafs", tleaf), ("nodes_falseleafs", fleaf),
                      ("nodes_missing_value_tracks_true", miss)):
        if len(arr) != n:
            ctx.fail(f"{name} has {len(arr)} values but nodes_featureids has {n}")
    if len(targets) != len(weights):
        ctx.fail(f"leaf_targetids has {len(targets)} values but leaf_weights has {len(weights)}")
    n_targets = ctx.attr("n_targets")
    n_targets = int(n_targets) if n_targets is not None else int(targets.max(initial=-1)) + 1
    agg = int(ctx.attr("aggregate_function"))
    if not 0 <= agg < 4:
        ctx.fail(f"aggregate_function={agg} is not one of 0..3")
    transform = transform_name(ctx)
    if roots.size and (roots.min() < 0 or roots.max() >= n):
        ctx.fail("tree_roots refers to a node that does not exist")
    members = {}
    is_member = modes == MEMBER
    if is_member.any():
        if membership is None:
            ctx.fail("BRANCH_MEMBER nodes need membership_values")
        ends = np.nonzero(np.isnan(membership))[0]
        if len(ends) != int(is_member.sum()):
            ctx.fail(f"membership_values holds {len(ends)} NaN-closed sets for {int(is_member.sum())} "
                     "BRANCH_MEMBER nodes")
        starts = np.concatenate([[0], ends[:-1] + 1])
        for node, a, b in zip(np.nonzero(is_member)[0], starts, ends):
            members[int(node)] = membership[a:b]
    true_ref = np.where(tleaf, ~trues, trues)
    false_ref = np.where(fleaf, ~falses, falses)
    if roots.size:
        single = tleaf[roots] & fleaf[roots] & (trues[roots] == falses[roots])
        root_ref = np.where(single, ~trues[roots], roots)
    else:
        root_ref = roots
    out_dtype = splits.dtype
    cmp_dtype = np.float64 if splits.dtype == np.float64 else np.float32
    forest = Forest(ctx.fail, feature=feats, threshold=splits.astype(cmp_dtype), mode=modes, missing=miss,
                    true_child=true_ref, false_child=false_ref, members=members, roots=root_ref,
                    vote_leaf=np.arange(len(targets)), vote_target=targets, vote_weight=weights,
                    n_leaves=len(targets), n_targets=n_targets, aggregate=AGGREGATES[agg], cmp_dtype=cmp_dtype)

    def run(x):
        if x.dtype != out_dtype:
            ctx.fail(f"X is {x.dtype} but the splits are {out_dtype} (both are T)")
        s, _ = forest.scores(_input(ctx, x, cmp_dtype))
        return post_transform(s, transform).astype(out_dtype)

    return run
