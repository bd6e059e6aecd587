// k8sk twin: k8 + split-K. gridDim.z = S slices of K, kslice elements each (a multiple of
// WT_TK); CTA (x, y, z) runs k8's double-buffered loop over k in [z*kslice, min(K, (z+1)*kslice))
// and writes its tile of the M x N matrix at C + z*M*N with the alpha and beta it is given:
// the host passes the call's C, alpha and beta when S == 1, else the workspace, 1 and 0, and
// then reduces the slices in order (splitk_reduce.cu).
#include "warptile.cuh"

#define SPLITK_ARGS int M, int N, int K, int kslice, float alpha, const float* __restrict__ A, \
                    const float* __restrict__ B, float beta, float* __restrict__ C

template <bool AV, bool BV>
__device__ __forceinline__ void k8sk_body(SPLITK_ARGS) {
    __shared__ __align__(16) float As[2][wt::TK][wt::AS];
    __shared__ __align__(16) float Bs[2][wt::TK][wt::TN];
    const u32 lane = threadIdx.x, warp = threadIdx.y, tid = warp * 32 + lane;
    const u32 m = M, n = N, k = K, z = blockIdx.z;
    const u32 row0 = blockIdx.y * wt::TM, col0 = blockIdx.x * wt::TN;
    const u32 k_lo = z * u32(kslice);                 // < K < 2^31: the sums below cannot wrap
    const u32 k_hi = min(k, k_lo + u32(kslice));
    wt::Loader l = wt::loader<BV>(tid, row0, col0, k, n);
    l.a_off += k_lo;
    l.b_off += u64(k_lo) * n;
    const u32 am = warp / wt::WARPS_N * wt::WM + lane / wt::LANES_N * 4;
    const u32 bn = warp % wt::WARPS_N * wt::WN + lane % wt::LANES_N * 4;
    float4 ra[wt::A_LOADS], rb[wt::B_LOADS];
    float acc[wt::THREAD_M][wt::THREAD_N] = {};
    // loads checked against K, as k8's: the last phase's prefetch reads the next slice's first
    // tile (inside the matrix) into the buffer that is not read again
    wt::load_tiles<AV, BV>(A, B, ra, rb, l, k_lo, row0, col0, m, n, k);
    wt::store_tiles<BV>(As[0], Bs[0], ra, rb, l);
    __syncthreads();
    u32 buf = 0;
#pragma unroll 1   // as the Numba level's while loop: one phase per trip
    for (u32 ph = k_lo; ph < k_hi; ph += wt::TK) {
        l.a_off += wt::TK;
        l.b_off += u64(wt::TK) * n;
        wt::load_tiles<AV, BV>(A, B, ra, rb, l, ph + wt::TK, row0, col0, m, n, k);
        wt::compute(As[buf], Bs[buf], am, bn, acc);
        buf ^= 1;
        wt::store_tiles<BV>(As[buf], Bs[buf], ra, rb, l);
        __syncthreads();
    }
    wt::epilogue<BV>(C + u64(z) * m * n, acc, alpha, beta, row0, col0, am, bn, m, n);
}

#define SPLITK_KERNEL(NAME, AV, BV) \
    WT_KERNEL NAME(SPLITK_ARGS) { k8sk_body<AV, BV>(M, N, K, kslice, alpha, A, B, beta, C); }
SPLITK_KERNEL(k8sk, true, true)
SPLITK_KERNEL(k8sk_edge, false, false)
SPLITK_KERNEL(k8sk_bc, false, true)      // K % 4 != 0
SPLITK_KERNEL(k8sk_a, true, false)       // N % 4 != 0
