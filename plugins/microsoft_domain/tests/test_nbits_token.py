"""MatMulNBits' token step on the cpu backend (onnxkit_cpu/overrides/nbits.py): 4-bit weights at
accuracy_level 4 and a few rows of A, by the compiled float loop over the tiled weight
(onnxkit_cpu/compiled/nbits.py) or, where the host has AVX-512 VNNI, by ``vpdpbusd``
(onnxkit_cpu/compiled/nbits_vnni*.py).

Checked differentially: the one-node model on onnxkit with each loop (a spy asserts which one
served), with the compiled loops off (the portable kernel), and on onnxruntime 1.32; the two
loops' results bit for bit (they form the same exact block sums and the same float32 epilogue);
the column tiles split across threads; the tiled weight made once per constant.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from ms_harness import nbits_model, run_ort, spied

import onnxkit


def _served_by(monkeypatch, vnni: bool, calls: list, note=lambda args: 1) -> None:
    """Plan MatMulNBits with the VNNI loop (``vnni``) or the float loop, its calls noted."""
    from onnxkit_cpu.compiled import nbits as loops
    from onnxkit_cpu.compiled import nbits_vnni
    from onnxkit_cpu.overrides import nbits as override

    monkeypatch.setenv("ONNXKIT_FIRST_RUN", "warm")
    if vnni:
        impl = nbits_vnni.get()
        if impl is None:
            pytest.skip("this host has no AVX-512 VNNI (the float loop's tests cover the product)")

        def get():
            real = nbits_vnni.get()
            return None if real is None else SimpleNamespace(
                int4_product=lambda *args: calls.append(note(args)) or real.int4_product(*args))

        monkeypatch.setattr(override, "nbits_vnni", SimpleNamespace(get=get, layout=nbits_vnni.layout))
    else:
        monkeypatch.setattr(nbits_vnni, "ENABLED", False)
        monkeypatch.setattr(override, "loops", SimpleNamespace(
            int4_product=SimpleNamespace(get=lambda: spied(loops.int4_product, calls, note)), TILE=loops.TILE))


@pytest.mark.parametrize("vnni", [False, True], ids=["float", "vnni"])
@pytest.mark.parametrize("block,zp,bias,rows,n,k", [
    (32, False, False, 1, 40, 512), (32, True, True, 1, 200, 512), (64, True, False, 3, 64, 512),
    (128, False, True, 8, 129, 512), (256, True, False, 2, 40, 512), (16, False, False, 9, 40, 512),
    (32, True, False, 1, 70, 688), (32, False, True, 2, 130, 80), (128, True, False, 1, 65, 200),
    (16, True, False, 1, 64, 24), (32, True, True, 64, 100, 576), (32, False, False, 7, 70, 96)])
def test_nbits_int4_token_rows_equal_onnxruntime_and_the_portable_kernel(vnni, block, zp, bias, rows, n, k,
                                                                         monkeypatch):
    """The compiled loop serves A of up to ROWS_MAX rows, the VNNI loop any rows (a prompt: rows
    in blocks of MR and the rest one by one; the spy counts the calls), within
    float32 rounding of onnxruntime's int8 computation and of the portable kernel's: N past a
    whole number of column tiles, K past a whole number of blocks (the last block zero-padded),
    zero points, bias."""
    from onnxkit_cpu import compiled

    model = nbits_model(n, k, block, zp, bias)
    a = np.random.default_rng(rows).standard_normal((1, rows, k)).astype(np.float32)
    calls: list = []
    _served_by(monkeypatch, vnni, calls)
    got = onnxkit.InferenceSession(model, "cpu").run(None, {"A": a})[0]
    assert len(calls) == (1 if rows <= 8 or vnni else 0)
    with compiled.disabled():
        portable = onnxkit.InferenceSession(model, "cpu").run(None, {"A": a})[0]
    assert len(calls) == (1 if rows <= 8 or vnni else 0)
    want = run_ort(model, {"A": a})[0]
    scale = np.abs(want).max()
    assert got.shape == want.shape == (1, rows, n) and got.dtype == np.float32
    assert np.abs(got - want).max() <= 4e-6 * scale
    assert np.abs(got - portable).max() <= 4e-6 * scale


@pytest.mark.parametrize("block,zp,n,k", [(32, False, 200, 512), (16, True, 70, 688), (128, True, 130, 200),
                                          (256, False, 64, 256)])
def test_nbits_vnni_loop_equals_the_float_loop_bit_for_bit(block, zp, n, k):
    """The VNNI loop and the float loop, called directly on their layouts of the same constants,
    give the same bits (both sum each block exactly; the epilogue is one expression), also for
    A with large, tiny and zero blocks; seven rows: a block of MR rows and three single ones."""
    from onnxkit_cpu import compiled
    from onnxkit_cpu.compiled import nbits as loops
    from onnxkit_cpu.compiled import nbits_vnni
    from onnxkit_cpu.overrides import nbits as override

    compiled.available()
    impl = nbits_vnni.get()
    if impl is None:
        pytest.skip("this host has no AVX-512 VNNI")
    rng = np.random.default_rng(k)
    kb = -(-k // block)
    b = rng.integers(0, 256, (n, kb, block // 2), dtype=np.uint8)
    scales = (rng.random(n * kb) + 0.01).astype(np.float32)
    z = rng.integers(0, 256, n * -(-kb // 2), dtype=np.uint8) if zp else None
    a = rng.standard_normal((7, k)).astype(np.float32)
    a[1] *= 1e4
    a[2, :block] = 0.0
    a[2, block:] *= 1e-6
    tiles = -(-n // loops.TILE)
    outs = []
    for vnni in (False, True):
        w, ws, wz = override.tile_weights(b, scales, z, n, k, block, vnni)
        out = np.empty((7, n), np.float32)
        (impl.int4_product if vnni else loops.int4_product.get())(a, block, w, ws, wz, out, 0, tiles)
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("vnni", [False, True], ids=["float", "vnni"])
def test_nbits_int4_tiles_split_across_threads_give_the_same_bits(vnni, monkeypatch):
    """Column tiles split across two intra-op threads: the same bits as one thread (each tile
    is computed whole by one call), and the tiled weight is made once per session (per constant
    B), not per run."""
    from onnxkit_cpu.overrides import nbits as override

    monkeypatch.setattr(override, "TILE_WORK", 1)
    calls: list = []
    made: list = []
    _served_by(monkeypatch, vnni, calls, lambda args: args[-2:])
    tile = override.tile_weights
    monkeypatch.setattr(override, "tile_weights", lambda *args: made.append(1) or tile(*args))
    model = nbits_model(300, 256, 32, True, False, seed=3)
    a = np.random.default_rng(1).standard_normal((1, 1, 256)).astype(np.float32)
    results = []
    for threads in (1, 2):
        so = onnxkit.SessionOptions()
        so.intra_op_num_threads = threads
        so.add_session_config_entry("session.intra_op.split_kernels", "1")
        sess = onnxkit.InferenceSession(model, so, backend="cpu")
        results += [sess.run(None, {"A": a})[0] for _ in range(2)]
    assert sorted(calls) == [(0, 2), (0, 2), (0, 5), (0, 5), (2, 5), (2, 5)], calls
    assert len(made) == 2  # once per session: each holds its own constants
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
    want = run_ort(model, {"A": a})[0]
    assert np.abs(results[0] - want).max() <= 4e-6 * np.abs(want).max()
