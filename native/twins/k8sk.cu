// k8sk twin: k8 + split-K. gridDim.z = S slices of K, kslice elements each (a multiple of
// WT_TK); CTA (x, y, z) runs k8's double-buffered loop over k in [z*kslice, min(K, (z+1)*kslice))
// and writes its tile of the M x N matrix at C + z*M*N with the alpha and beta it is given:
// the host passes the call's C, alpha and beta when S == 1, else the workspace, 1 and 0, and
// then reduces the slices in order (splitk_reduce.cu).
#include "double_buffer.cuh"

#define SPLITK_ARGS int M, int N, int K, int kslice, float alpha, const float* __restrict__ A, \
                    const float* __restrict__ B, float beta, float* __restrict__ C

template <bool AV, bool BV>
__device__ __forceinline__ void k8sk_body(SPLITK_ARGS) {
    const u32 z = blockIdx.z;
    const u32 k_lo = z * u32(kslice);                 // < K < 2^31: the sums below cannot wrap
    const u32 k_hi = min(u32(K), k_lo + u32(kslice));
    wt::double_buffered<AV, BV>(M, N, K, k_lo, k_hi, alpha, A, B, beta, C + u64(z) * u32(M) * u32(N));
}

#define SPLITK_KERNEL(NAME, AV, BV) \
    WT_KERNEL NAME(SPLITK_ARGS) { k8sk_body<AV, BV>(M, N, K, kslice, alpha, A, B, beta, C); }
SPLITK_KERNEL(k8sk, true, true)
SPLITK_KERNEL(k8sk_edge, false, false)
SPLITK_KERNEL(k8sk_bc, false, true)      // K % 4 != 0
SPLITK_KERNEL(k8sk_a, true, false)       // N % 4 != 0
