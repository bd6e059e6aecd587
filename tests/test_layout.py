"""Pure host logic of the native levels: the swizzle, the super-tile decode and choice, and an
emulation of one block of the swizzled mma.sync levels (v8's and v10's shipped tiles): shared
layout + ldmatrix + mma.sync fragment mapping + epilogue (no GPU needed).

The formulas the kernels use:
  swizzle:   chunk c (16 B) of 128-byte row r lives at byte r*128 + ((c ^ (r % 8)) * 16)
  SWIZZLE_128B (TMA, 1024-byte aligned destination): offset o -> o ^ (((o >> 7) & 7) << 4)
The first is the second applied to the linear offset r*128 + c*16, which is what makes v10's
TMA tiles readable by v8's ldmatrix code unchanged.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numba_gemm.hgemm import _common as cm
from numba_gemm.hgemm import v8_mma, v9_supertile, v10_tma

V8_TILE, V9_TILE, V10_TILE = v8_mma.CONFIG, v9_supertile.CONFIG, v10_tma.CONFIG

# ---------------------------------------------------------------------------- swizzle


@given(st.integers(0, 4095))
def test_swizzle_is_a_bijection_within_each_8_row_period(period):
    rows = range(8 * period, 8 * period + 8)
    offsets = {cm.swizzle128(r, c) for r in rows for c in range(8)}
    base = 8 * period * 128
    assert offsets == {base + 16 * i for i in range(64)}


@given(st.integers(0, 4095), st.integers(0, 7))
def test_swizzle_keeps_rows_in_place_and_spreads_a_column_over_all_banks(row, chunk):
    off = cm.swizzle128(row, chunk)
    assert off // 128 == row                           # only the chunk moves, within its row
    first = row - row % 8
    groups = {(cm.swizzle128(r, chunk) % 128) // 16 for r in range(first, first + 8)}
    assert len(groups) == 8                             # an ldmatrix column: 8 distinct bank groups


@given(st.integers(0, 2**20 - 1), st.integers(0, 7), st.integers(0, 15))
def test_swizzle_matches_tma_swizzle_128b(row, chunk, byte):
    linear = row * 128 + chunk * 16 + byte
    assert cm.tma_swizzle_128b(linear) == cm.swizzle128(row, chunk) + byte


def test_tma_swizzle_128b_known_values():
    # row 1: chunk 0 <-> 1; row 7, chunk 0 -> chunk 7; period of 1024 bytes
    assert cm.tma_swizzle_128b(128) == 144
    assert cm.tma_swizzle_128b(7 * 128) == 7 * 128 + 7 * 16
    assert cm.tma_swizzle_128b(1024 + 128 + 16) == 1024 + 128


@given(st.integers(0, 1023), st.integers(0, 3))
def test_xor_walk_equals_fresh_swizzle(lane_row, kk):
    # the kernels precompute swizzle(row, h) and step k by XOR kk*32 (two chunks)
    for h in (0, 1):
        assert cm.swizzle128(lane_row, h) ^ (kk * 32) == cm.swizzle128(lane_row, 2 * kk + h)


# ---------------------------------------------------------------------------- super-tiles

grids = st.tuples(st.integers(1, 40), st.integers(1, 40), st.integers(1, 48), st.integers(1, 48))


@settings(max_examples=300)
@given(grids)
def test_supertile_decode_visits_every_tile_exactly_once(g):
    grid_m, grid_n, sm, sn = g
    seen = [cm.supertile_decode(b, grid_m, grid_n, sm, sn) for b in range(grid_m * grid_n)]
    assert sorted(seen) == [(m, n) for m in range(grid_m) for n in range(grid_n)]


@given(st.integers(1, 30), st.integers(1, 30), st.integers(1, 8), st.integers(1, 8))
def test_supertile_decode_stays_inside_one_supertile(grid_m, grid_n, sm, sn):
    # consecutive blocks fill one super-tile before moving on: each appears in one run
    tiles = [cm.supertile_decode(b, grid_m, grid_n, sm, sn) for b in range(grid_m * grid_n)]
    runs = [(m // sm, n // sn) for m, n in tiles]
    heads = [t for i, t in enumerate(runs) if i == 0 or runs[i - 1] != t]
    assert len(heads) == len(set(heads))


def test_one_row_of_full_width_supertiles_is_row_major():
    # super_m = 1, super_n = grid_n: v9's decode gives v8's order (native/tile_order.cuh)
    grid_m, grid_n = 5, 7
    order = [cm.supertile_decode(b, grid_m, grid_n, 1, grid_n) for b in range(grid_m * grid_n)]
    assert order == [(m, n) for m in range(grid_m) for n in range(grid_n)]


def test_supertile_decode_matches_the_seed_example():
    # seed: 16 x 2 super-tiles of 64 x 128 tiles, n fastest inside
    assert cm.supertile_decode(0, 64, 128, 16, 2) == (0, 0)
    assert cm.supertile_decode(1, 64, 128, 16, 2) == (0, 1)
    assert cm.supertile_decode(2, 64, 128, 16, 2) == (1, 0)
    assert cm.supertile_decode(32, 64, 128, 16, 2) == (0, 2)
    assert cm.supertile_decode(64 * 32, 64, 128, 16, 2) == (16, 0)


shapes = st.tuples(st.integers(1, 40000), st.integers(1, 40000), st.integers(1, 200000))


@settings(max_examples=300)
@given(shapes, st.sampled_from([40, 50, 60, 64, 96]).map(lambda mb: mb * 2**20))
def test_choose_supertile_respects_the_l2_rule(shape, l2):
    M, N, K = shape
    bm, bn = V9_TILE.bm, V9_TILE.bn
    sm, sn = cm.choose_supertile(M, N, K, bm, bn, l2)
    grid_m, grid_n = cm.cdiv(M, bm), cm.cdiv(N, bn)
    assert 1 <= sm <= grid_m and 1 <= sn <= grid_n
    budget = l2 // 2
    ws = cm.supertile_working_set(sm, sn, bm, bn, K)
    if (sm, sn) != (1, 1):
        assert ws <= budget
        # largest SM first: one more row would break the rule or the grid
        assert sm == grid_m or cm.supertile_working_set(sm + 1, 1, bm, bn, K) > budget
        assert sn == grid_n or cm.supertile_working_set(sm, sn + 1, bm, bn, K) > budget
    else:
        assert ws <= budget or cm.supertile_working_set(1, 1, bm, bn, K) > budget


def test_choose_supertile_h200_8192():
    assert (V9_TILE.bm, V9_TILE.bn) == (128, 128)
    sm, sn = v9_supertile.tile_order(8192, 8192, 8192, l2_bytes=60 * 2**20)
    # A panel 128x8192 fp16 = 2 MiB, B panel 2 MiB, budget 30 MiB: 14 rows of A + 1 column of B
    assert (sm, sn) == (14, 1)
    # 4096: both panels 1 MiB: 29 rows of A fit beside one B column
    assert v9_supertile.tile_order(4096, 4096, 4096, l2_bytes=60 * 2**20) == (29, 1)
    # v10's 128x256 tile: B panels are 4 MiB at 8192, so 13 rows
    assert v10_tma.tile_order(8192, 8192, 8192, l2_bytes=60 * 2**20) == (13, 1)


# ---------------------------------------------------------------------------- block emulation
# A numpy model of one block of the swizzled mma.sync levels for a given TileConfig: the
# loader's cp.async destinations (native/v8_mma.cu with cp_async_loader.cuh), TMA's
# SWIZZLE_128B boxes (v10_tma.cu), the ldmatrix lane addresses and the PTX fragment layouts
# of ldmatrix(.trans) and mma.m16n8k16 (mma_stage.cuh), and the epilogue mapping
# (epilogue.cuh). It must reproduce A @ B exactly. Run for the tiles v8 (and v9) and v10 ship.

EMULATED = [(V8_TILE, "cp.async"), (V10_TILE, "cp.async"), (V10_TILE, "tma")]   # v9 = v8's tile


def _swz(r, c):
    return r * 128 + ((c ^ (r & 7)) << 4)


def _load_stage_cp_async(t, A, B, m0, n0, k0):
    """Shared bytes of one stage as the tile's threads write them (zero-fill past the edges)."""
    M, K = A.shape
    N = B.shape[1]
    T, a_bytes, b_panel = t.threads, t.bm * 128, 64 * 128
    a_iters, a_step = t.bm * 8 // T, T // 8
    cpr = t.bn // 8
    b_iters, b_step = 64 * cpr // T, T // cpr
    sm = np.zeros(t.stage_bytes, np.uint8)
    for tid in range(T):
        a_r, a_c = tid // 8, tid % 8
        for i in range(a_iters):
            row, col = m0 + a_r + a_step * i, k0 + a_c * 8
            chunk = A[row, col:col + 8] if row < M and col < K else np.zeros(8, A.dtype)
            dst = _swz(a_r, a_c) + i * a_step * 128
            sm[dst:dst + 16] = chunk.view(np.uint8)
        b_r, b_nc = tid // cpr, tid % cpr
        for i in range(b_iters):
            row, col = k0 + b_r + b_step * i, n0 + b_nc * 8
            chunk = B[row, col:col + 8] if row < K and col < N else np.zeros(8, B.dtype)
            dst = (a_bytes + (b_nc // 8) * b_panel + _swz(b_r, b_nc % 8) + i * b_step * 128) ^ (((i * b_step) & 7) << 4)
            sm[dst:dst + 16] = chunk.view(np.uint8)
    return sm


def _load_stage_tma(t, A, B, m0, n0, k0):
    """The same stage as TMA with SWIZZLE_128B writes it: linear boxes, then the swizzle."""
    M, K = A.shape
    N = B.shape[1]
    a_bytes, b_panel = t.bm * 128, 64 * 128
    swizzle = np.vectorize(cm.tma_swizzle_128b)
    pad = np.zeros((M + t.bm, K + t.bk + 64), A.dtype)
    pad[:M, :K] = A
    boxA = np.ascontiguousarray(pad[m0:m0 + t.bm, k0:k0 + t.bk]).view(np.uint8).ravel()
    padB = np.zeros((K + t.bk, N + t.bn + 64), B.dtype)
    padB[:K, :N] = B
    sm = np.zeros(t.stage_bytes, np.uint8)
    sm[swizzle(np.arange(boxA.size))] = boxA
    for p in range(t.bn // 64):
        box = np.ascontiguousarray(padB[k0:k0 + t.bk, n0 + 64 * p:n0 + 64 * p + 64]).view(np.uint8).ravel()
        sm[a_bytes + p * b_panel + swizzle(np.arange(box.size))] = box
    return sm


LOADERS = {"cp.async": _load_stage_cp_async, "tma": _load_stage_tma}


def _ldmatrix_x4(sm, addrs, trans):
    """regs[lane][i] = the two b16 values of matrix i that lane receives (PTX ldmatrix)."""
    mats = [np.stack([sm[a:a + 16].view(np.float16) for a in addrs[8 * i:8 * i + 8]]) for i in range(4)]
    regs = np.zeros((32, 4, 2), np.float16)
    for t in range(32):
        for i in range(4):
            if trans:
                regs[t, i] = mats[i][2 * (t % 4):2 * (t % 4) + 2, t // 4]
            else:
                regs[t, i] = mats[i][t // 4, 2 * (t % 4):2 * (t % 4) + 2]
    return regs


def _mma(acc, a, b0, b1):
    """acc[lane][4] += A(16x16) @ B(16x8) with PTX m16n8k16 fragment layouts."""
    Am = np.zeros((16, 16))
    Bm = np.zeros((16, 8))
    for t in range(32):
        g, q = t // 4, t % 4
        Am[g, 2 * q:2 * q + 2] = a[t, 0]
        Am[g + 8, 2 * q:2 * q + 2] = a[t, 1]
        Am[g, 2 * q + 8:2 * q + 10] = a[t, 2]
        Am[g + 8, 2 * q + 8:2 * q + 10] = a[t, 3]
        Bm[2 * q:2 * q + 2, g] = b0[t]
        Bm[2 * q + 8:2 * q + 10, g] = b1[t]
    D = Am @ Bm
    for t in range(32):
        g, q = t // 4, t % 4
        acc[t] += [D[g, 2 * q], D[g, 2 * q + 1], D[g + 8, 2 * q], D[g + 8, 2 * q + 1]]


def _emulate_block(t, A, B, m0, n0, loader):
    M, K = A.shape
    N = B.shape[1]
    C = np.full((M, N), np.nan)
    wm_, wn_ = t.warp_tile
    MT, NT = wm_ // 16, wn_ // 8
    warps = t.threads // 32
    a_bytes, b_panel = t.bm * 128, 64 * 128
    acc = np.zeros((warps, MT, NT, 32, 4))           # warp, i, j, lane, e
    for k0 in range(0, K, t.bk):
        sm = loader(t, A, B, m0, n0, k0)
        for warp in range(warps):
            wm, wn = warp // t.warps_n, warp % t.warps_n
            col0 = wn * wn_
            a_lane = [wm * wm_ * 128 + _swz(l % 16, l // 16) for l in range(32)]
            b_lane = [a_bytes + (col0 // 64) * b_panel + _swz(l % 8 + 8 * ((l // 8) % 2), (col0 % 64) // 8 + l // 16)
                      for l in range(32)]
            for kk in range(t.bk // 16):
                af = [_ldmatrix_x4(sm, [(a + i * 16 * 128) ^ (kk * 32) for a in a_lane], False) for i in range(MT)]
                bf = [_ldmatrix_x4(sm, [(b + kk * 16 * 128 + (j // 4) * b_panel) ^ ((j % 4) * 32) for b in b_lane], True)
                      for j in range(NT // 2)]
                for i in range(MT):
                    for j in range(NT // 2):
                        _mma(acc[warp, i, 2 * j], af[i], bf[j][:, 0], bf[j][:, 1])
                        _mma(acc[warp, i, 2 * j + 1], af[i], bf[j][:, 2], bf[j][:, 3])
    for warp in range(warps):
        wm, wn = warp // t.warps_n, warp % t.warps_n
        for lane in range(32):
            g, q = lane // 4, lane % 4
            for i in range(MT):
                for h in range(2):
                    row = m0 + wm * wm_ + i * 16 + g + 8 * h
                    for j in range(NT):
                        col = n0 + wn * wn_ + j * 8 + 2 * q
                        for e in range(2):
                            if row < M and col + e < N:
                                C[row, col + e] = acc[warp, i, j, lane, 2 * h + e]
    return C


@pytest.mark.parametrize("t,loader", EMULATED, ids=lambda x: x if isinstance(x, str) else x.label().replace(" ", "_"))
def test_block_emulation_reproduces_the_product(t, loader):
    rng = np.random.default_rng(7)
    M, N, K = t.bm - 28, t.bn - 56, 72   # one ragged block, two K tiles (the second one partial)
    A = rng.integers(-3, 4, (M, K)).astype(np.float16)
    B = rng.integers(-3, 4, (K, N)).astype(np.float16)
    C = _emulate_block(t, A, B, 0, 0, LOADERS[loader])
    np.testing.assert_array_equal(C, A.astype(np.float64) @ B.astype(np.float64))


@pytest.mark.parametrize("t", [V8_TILE, V10_TILE], ids=lambda t: t.label().replace(" ", "_"))
def test_cp_async_and_tma_write_identical_shared_bytes(t):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((300, 200)).astype(np.float16)
    B = rng.standard_normal((200, 520)).astype(np.float16)
    for m0, n0, k0 in [(0, 0, 0), (128, 256, 64), (256, 512, 192)]:
        np.testing.assert_array_equal(_load_stage_cp_async(t, A, B, m0, n0, k0), _load_stage_tma(t, A, B, m0, n0, k0))


# ---------------------------------------------------------------------------- other tiles
# The kernel's loader and ldmatrix formulas for a general TileConfig (native/v8_mma.cu,
# cp_async_loader.cuh, mma_stage.cuh),
# transcribed: every chunk of a stage is written exactly once at its swizzled place, and each
# warp's B ldmatrix addresses (XOR walk, panel steps) are the swizzled chunks of its columns.

TILES = [V10_TILE, V8_TILE,
         cm.TileConfig(bm=128, bn=128, warps_m=2, warps_n=4), cm.TileConfig(bm=256, bn=128, warps_m=4, warps_n=4),
         cm.TileConfig(bm=128, bn=256, warps_m=2, warps_n=8), cm.TileConfig(bm=64, bn=256, warps_m=1, warps_n=2),
         cm.TileConfig(bm=128, bn=256, warps_m=1, warps_n=2, stages=3)]


@pytest.mark.parametrize("t", TILES, ids=lambda t: t.label().replace(" ", "_"))
def test_general_loader_writes_each_chunk_once_at_its_swizzled_place(t):
    assert t.problems() == []
    T = t.threads
    a_bytes, b_panel = t.bm * 128, 64 * 128
    a_iters, a_step = t.bm * 8 // T, T // 8
    cpr = t.bn // 8
    b_iters, b_step = 64 * cpr // T, T // cpr
    seen = {}
    for tid in range(T):
        a_r, a_c = tid // 8, tid % 8
        for i in range(a_iters):
            seen[cm.swizzle128(a_r, a_c) + i * a_step * 128] = ("A", a_r + a_step * i, a_c)
        b_r, b_nc = tid // cpr, tid % cpr
        b_dst = a_bytes + (b_nc // 8) * b_panel + cm.swizzle128(b_r, b_nc % 8)
        for i in range(b_iters):
            off = (b_dst + i * b_step * 128) ^ (((i * b_step) & 7) << 4)
            row = b_r + b_step * i
            assert off == a_bytes + (b_nc // 8) * b_panel + cm.swizzle128(row, b_nc % 8)
            seen[off] = ("B", row, b_nc)
    assert len(seen) == (t.bm * 8 + 64 * cpr) == t.stage_bytes // 16


@pytest.mark.parametrize("t", TILES, ids=lambda t: t.label().replace(" ", "_"))
def test_general_b_ldmatrix_addresses(t):
    wm, wn = t.warp_tile
    a_bytes, b_panel = t.bm * 128, 64 * 128
    for warp_n in range(t.warps_n):
        col0 = warp_n * wn
        for lane in range(32):
            krow = lane % 8 + 8 * ((lane // 8) % 2)
            b_thr = a_bytes + (col0 // 64) * b_panel + cm.swizzle128(krow, (col0 % 64) // 8 + lane // 16)
            for kk in range(4):
                for j in range(wn // 16):
                    got = (b_thr + kk * 16 * 128 + (j // 4) * b_panel) ^ ((j % 4) * 32)
                    col = col0 + 16 * j + 8 * (lane // 16)          # first column of the lane's row
                    want = a_bytes + (col // 64) * b_panel + cm.swizzle128(kk * 16 + krow, (col % 64) // 8)
                    assert got == want, (t.label(), warp_n, lane, kk, j)
