// k8's body (numba_gemm/sgemm/k8_double_buffer.py in CUDA C), shared by the k8 and k8sk twins:
// two copies of each tile; per phase the next slice is loaded global -> registers, this one
// multiplied, the registers stored into the other buffer, then ONE barrier. Over the K range
// [k_lo, k_hi) (multiples of WT_TK, or k_hi == K) into the M x N matrix at C: k8 is (0, K), k8sk
// a slice. Loads are checked against K, as _warptile.double_buffered's: the last phase's
// prefetch reads the next range's first tile (or, past K, zeros) into the buffer not read again.
#pragma once
#include "warptile.cuh"

namespace wt {

template <bool AV, bool BV>
__device__ __forceinline__ void double_buffered(int M, int N, int K, u32 k_lo, u32 k_hi, float alpha,
                                                const float* __restrict__ A, const float* __restrict__ B,
                                                float beta, float* __restrict__ C) {
    __shared__ __align__(16) float As[2][TK][AS];
    __shared__ __align__(16) float Bs[2][TK][TN];
    const u32 lane = threadIdx.x, warp = threadIdx.y, tid = warp * 32 + lane;
    const u32 m = M, n = N, k = K;
    const u32 row0 = blockIdx.y * TM, col0 = blockIdx.x * TN;
    Loader l = loader<BV>(tid, row0, col0, k, n);
    l.a_off += k_lo;
    l.b_off += u64(k_lo) * n;
    const u32 am = warp / WARPS_N * WM + lane / LANES_N * 4;
    const u32 bn = warp % WARPS_N * WN + lane % LANES_N * 4;
    float4 ra[A_LOADS], rb[B_LOADS];
    float acc[THREAD_M][THREAD_N] = {};
    load_tiles<AV, BV>(A, B, ra, rb, l, k_lo, row0, col0, m, n, k);
    store_tiles<BV>(As[0], Bs[0], ra, rb, l);
    __syncthreads();
    u32 buf = 0;
#pragma unroll 1   // as the Numba level's while loop: one phase per trip
    for (u32 ph = k_lo; ph < k_hi; ph += TK) {
        l.a_off += TK;
        l.b_off += u64(TK) * n;
        load_tiles<AV, BV>(A, B, ra, rb, l, ph + TK, row0, col0, m, n, k);
        compute(As[buf], Bs[buf], am, bn, acc);
        buf ^= 1;
        store_tiles<BV>(As[buf], Bs[buf], ra, rb, l);
        __syncthreads();
    }
    epilogue<BV>(C, acc, alpha, beta, row0, col0, am, bn, m, n);
}

}  // namespace wt
