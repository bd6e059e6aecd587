// k5sk twin: k5 + split-K. gridDim.z = S slices of K, kslice elements each (a multiple of 32);
// CTA (x, y, z) runs k5's phases over k in [z*kslice, min(K, (z+1)*kslice)) and writes its
// tile of the M x N matrix at C + z*M*N with the alpha and beta it is given (the host passes
// the call's C, alpha, beta when S == 1, else the workspace, 1 and 0, then splitk_reduce.cu).
// A warp whose 8 rows all lie at or past M skips the multiply (a warp is one ty: uniform).
#include "outer_product.cuh"

extern "C" __global__ void k5sk(int M, int N, int K, int kslice, float alpha, const float* __restrict__ A,
                                const float* __restrict__ B, float beta, float* __restrict__ C) {
    const u32 z = blockIdx.z;
    const u32 k_lo = z * u32(kslice);                 // < K < 2^31: the sums below cannot wrap
    const u32 k_hi = min(u32(K), k_lo + u32(kslice));
    k5_twin::multiply<true>(M, N, K, k_lo, k_hi, alpha, A, B, beta, C + u64(z) * u32(M) * u32(N));
}
