// k8 twin: k7 + double buffering. Two copies of each tile; per phase the next slice is
// loaded global -> registers, this one multiplied, the registers stored into the other
// buffer, then ONE barrier. The last phase's loads fall outside K: all checks fail.
#include "warptile.cuh"

template <bool AV, bool BV>
__device__ __forceinline__ void k8_body(SGEMM_ARGS) {
    __shared__ __align__(16) float As[2][wt::TK][wt::AS];
    __shared__ __align__(16) float Bs[2][wt::TK][wt::TN];
    const u32 lane = threadIdx.x, warp = threadIdx.y, tid = warp * 32 + lane;
    const u32 m = M, n = N, k = K;
    const u32 row0 = blockIdx.y * wt::TM, col0 = blockIdx.x * wt::TN;
    wt::Loader l = wt::loader<BV>(tid, row0, col0, k, n);
    const u32 am = warp / wt::WARPS_N * wt::WM + lane / wt::LANES_N * 4;
    const u32 bn = warp % wt::WARPS_N * wt::WN + lane % wt::LANES_N * 4;
    float4 ra[wt::A_LOADS], rb[wt::B_LOADS];
    float acc[wt::THREAD_M][wt::THREAD_N] = {};
    wt::load_tiles<AV, BV>(A, B, ra, rb, l, 0, row0, col0, m, n, k);
    wt::store_tiles<BV>(As[0], Bs[0], ra, rb, l);
    __syncthreads();
    u32 buf = 0;
#pragma unroll 1   // as the Numba level's while loop: one phase per trip
    for (u32 ph = 0; ph < k; ph += wt::TK) {
        l.a_off += wt::TK;
        l.b_off += u64(wt::TK) * n;
        wt::load_tiles<AV, BV>(A, B, ra, rb, l, ph + wt::TK, row0, col0, m, n, k);
        wt::compute(As[buf], Bs[buf], am, bn, acc);
        buf ^= 1;
        wt::store_tiles<BV>(As[buf], Bs[buf], ra, rb, l);
        __syncthreads();
    }
    wt::epilogue<BV>(C, acc, alpha, beta, row0, col0, am, bn, m, n);
}

WARPTILE_KERNELS(k8, k8_body)
