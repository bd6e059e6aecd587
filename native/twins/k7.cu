// k7 twin: warp tiling (see warptile.cuh). Per phase: load, barrier, multiply, barrier.
#include "warptile.cuh"

template <bool AV, bool BV>
__device__ __forceinline__ void k7_body(SGEMM_ARGS) {
    __shared__ __align__(16) float As[wt::TK][wt::AS];   // As[k][m]: A transposed
    __shared__ __align__(16) float Bs[wt::TK][wt::TN];
    const u32 lane = threadIdx.x, warp = threadIdx.y, tid = warp * 32 + lane;
    const u32 m = M, n = N, k = K;
    const u32 row0 = blockIdx.y * wt::TM, col0 = blockIdx.x * wt::TN;
    wt::Loader l = wt::loader<BV>(tid, row0, col0, k, n);
    const u32 am = warp / wt::WARPS_N * wt::WM + lane / wt::LANES_N * 4;
    const u32 bn = warp % wt::WARPS_N * wt::WN + lane % wt::LANES_N * 4;
    float4 ra[wt::A_LOADS], rb[wt::B_LOADS];
    float acc[wt::THREAD_M][wt::THREAD_N] = {};
#pragma unroll 1   // as the Numba level's while loop: one phase per trip
    for (u32 ph = 0; ph < k; ph += wt::TK) {
        wt::load_tiles<AV, BV>(A, B, ra, rb, l, ph, row0, col0, m, n, k);
        wt::store_tiles<BV>(As, Bs, ra, rb, l);
        __syncthreads();
        wt::compute(As, Bs, am, bn, acc);
        __syncthreads();
        l.a_off += wt::TK;
        l.b_off += u64(wt::TK) * n;
    }
    wt::epilogue<BV>(C, acc, alpha, beta, row0, col0, am, bn, m, n);
}

WARPTILE_KERNELS(k7, k7_body)
