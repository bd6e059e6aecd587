// k9sk twin: k9's loop (unrolled_buffers.cuh) over slice z of K, kslice elements each (a
// multiple of WT_TK): CTA (x, y, z) multiplies k in [z*kslice, min(K, (z+1)*kslice)). S == 1:
// k9's epilogue into C. S > 1: its raw sum into slice z of P, then the last CTA of the tile to
// arrive (splitk_in_kernel.cuh) adds the S partials in slice order and writes C with alpha and
// beta, in a loop over the thread's float4s of C (as _warptile.slices_to_c): one launch.
#include "splitk_in_kernel.cuh"
#include "unrolled_buffers.cuh"

#define K9SK_ARGS int M, int N, int K, int kslice, float alpha, const float* __restrict__ A, \
                  const float* __restrict__ B, float beta, float* __restrict__ C, float* __restrict__ P, \
                  unsigned* counters

template <bool AV, bool BV>
__device__ __forceinline__ void k9sk_body(K9SK_ARGS) {
    const u32 m = M, n = N, k = K, z = blockIdx.z, S = gridDim.z;
    const u32 k_lo = z * u32(kslice);                 // < K < 2^31: the sums below cannot wrap
    const u32 k_hi = min(k, k_lo + u32(kslice));
    const u32 row0 = blockIdx.y * wt::TM, col0 = blockIdx.x * wt::TN;
    u32 am, bn;
    float acc[wt::THREAD_M][wt::THREAD_N] = {};
    wt::k9_loop<AV, BV>(A, B, m, n, k, k_lo, k_hi, row0, col0, am, bn, acc);
    if (S == 1) {
        wt::epilogue<BV>(C, acc, alpha, beta, row0, col0, am, bn, m, n);
        return;
    }
    const u64 mn = u64(m) * n;
    wt::epilogue<BV>(P + z * mn, acc, 1.f, 0.f, row0, col0, am, bn, m, n);   // the raw sum: 1*x is x
    if (!twin::arrive(counters, threadIdx.y * 32 + threadIdx.x, S)) return;
#pragma unroll 1   // a loop, as the Numba level's: acc is not read
    for (int g = 0; g < wt::THREAD_M * wt::SUB_N; ++g) {
        const int i = g / wt::SUB_N;
        const u32 row = row0 + am + i / 4 * wt::M_STEP + i % 4;
        const u32 col = col0 + bn + g % wt::SUB_N * wt::N_STEP;
        const u64 off = u64(row) * n + col;
        float s[4];
        twin::sum_slices4(P, off, mn, S, row < m, col, n, s);
        const float4 out = beta == 0.f ? twin::ax4(alpha, s)
                                       : twin::axpby4(alpha, s, beta, twin::load4<BV>(C, off, row < m, col, n));
        twin::store4<BV>(C, off, row < m, col, n, out);
    }
}

#define K9SK_KERNEL(NAME, AV, BV) \
    WT_KERNEL NAME(K9SK_ARGS) { k9sk_body<AV, BV>(M, N, K, kslice, alpha, A, B, beta, C, P, counters); }
K9SK_KERNEL(k9sk, true, true)
K9SK_KERNEL(k9sk_edge, false, false)
K9SK_KERNEL(k9sk_bc, false, true)      // K % 4 != 0
K9SK_KERNEL(k9sk_a, true, false)       // N % 4 != 0
