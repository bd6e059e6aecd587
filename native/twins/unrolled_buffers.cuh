// unrolled_buffers.cuh - k9's loop (twin of numba_gemm/sgemm/_warptile.py, unrolled_buffers): k8
// with two phases per loop trip, so each reads and writes a fixed buffer, and the rows of A past M
// (float4 columns of B past N) clamped to the last one, so the all-float4 kernel's loads of a
// phase wholly inside K carry no check. k9 launches it on every tile, k8e on its interior,
// k9sk on slices of K.
#pragma once
#include "warptile.cuh"

namespace wt {

static_assert(A_LOADS == 1, "k9: one clamped A row per thread");
// rows are clamped, so load_tiles' row check (row0 + a_r < m) must pass: an m no row reaches
constexpr u32 NO_ROW_CHECK = 0xffffffffu;

// One phase: the loads of phase ph + TK (all-float4: unchecked when all of it lies inside K;
// otherwise checked against K alone), the multiply of buffer `rd`, the stores into buffer `wr`, one barrier.
template <bool AV, bool BV>
__device__ __forceinline__ u32 phase(const float* A, const float* B, float (*As)[TK][AS], float (*Bs)[TK][TN],
                                     float4 (&ra)[A_LOADS], float4 (&rb)[B_LOADS], Loader& l, u32 col0,
                                     u32 am, u32 bn, u32 n, u32 k, u32 ph, int rd, int wr,
                                     float (&acc)[THREAD_M][THREAD_N]) {
    const u32 nxt = ph + TK;
    l.a_off += TK;
    l.b_off += u64(TK) * n;
    if (AV && BV && nxt + TK <= k) {     // the 32-bit forms keep their checks
        ra[0] = twin::load4_in<true>(A, l.a_off);
#pragma unroll
        for (int s = 0; s < B_LOADS; ++s) rb[s] = twin::load4_in<true>(B, l.b_off + u64(s * B_ROW_STEP) * n);
    } else {
        load_tiles<AV, BV>(A, B, ra, rb, l, nxt, 0, col0, NO_ROW_CHECK, n, k);
    }
    compute(As[rd], Bs[rd], am, bn, acc);
    store_tiles<BV>(As[wr], Bs[wr], ra, rb, l);
    __syncthreads();
    return nxt;
}

// k9's loop over the K range [k_lo, k_hi) (k9: all of K; k9sk: a slice, its bounds multiples of
// TK or k_hi == K) into acc; am, bn: the thread tile's first row and column, for the epilogue.
// Loads are checked against K, not k_hi (as double_buffered's): a slice's last prefetch reads
// the next slice's first tile into the buffer that is not read again.
template <bool AV, bool BV>
__device__ __forceinline__ void k9_loop(const float* __restrict__ A, const float* __restrict__ B, u32 m,
                                        u32 n, u32 k, u32 k_lo, u32 k_hi, u32 row0, u32 col0, u32& am,
                                        u32& bn, float (&acc)[THREAD_M][THREAD_N]) {
    __shared__ __align__(16) float As[2][TK][AS];
    __shared__ __align__(16) float Bs[2][TK][TN];
    const u32 lane = threadIdx.x, warp = threadIdx.y, tid = warp * 32 + lane;
    Loader l = loader<BV>(tid, row0, col0, k, n);
    const u32 b_col = BV ? min(col0 + l.b_c, n - 4) : col0 + l.b_c;
    l.a_off = u64(min(row0 + l.a_r, m - 1)) * k + k_lo + l.a_c;
    l.b_off = u64(k_lo + l.b_r) * n + b_col;
    am = warp / WARPS_N * WM + lane / LANES_N * 4;
    bn = warp % WARPS_N * WN + lane % LANES_N * 4;
    float4 ra[A_LOADS], rb[B_LOADS];
    load_tiles<AV, BV>(A, B, ra, rb, l, k_lo, 0, col0, NO_ROW_CHECK, n, k);
    store_tiles<BV>(As[0], Bs[0], ra, rb, l);
    __syncthreads();
#pragma unroll 1   // as the Numba level's while loop: two phases per trip
    for (u32 ph = k_lo; ph < k_hi;) {
        ph = phase<AV, BV>(A, B, As, Bs, ra, rb, l, col0, am, bn, n, k, ph, 0, 1, acc);
        if (ph >= k_hi) break;
        ph = phase<AV, BV>(A, B, As, Bs, ra, rb, l, col0, am, bn, n, k, ph, 1, 0, acc);
    }
}

template <bool AV, bool BV>
__device__ __forceinline__ void k9_body(SGEMM_ARGS) {
    const u32 row0 = blockIdx.y * TM, col0 = blockIdx.x * TN;
    u32 am, bn;
    float acc[THREAD_M][THREAD_N] = {};
    k9_loop<AV, BV>(A, B, M, N, K, 0, K, row0, col0, am, bn, acc);
    epilogue<BV>(C, acc, alpha, beta, row0, col0, am, bn, M, N);
}

}  // namespace wt
