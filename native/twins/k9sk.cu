// k9sk twin: k9's loop (unrolled_buffers.cuh) over slice z of K, kslice elements each (a
// multiple of WT_TK): CTA (x, y, z) multiplies k in [z*kslice, min(K, (z+1)*kslice)). S == 1:
// k9's epilogue into C. S > 1: its raw sum into slice z of P, one part of the thread tile's
// rows at a time (parts = min(S, THREAD_M), the rows i with i % parts == part; CTA z starts at
// part z % parts), each part counted on its own counter (splitk_in_kernel.cuh, S per tile).
// The last CTA to park a part adds that part's S partials in slice order and writes C with
// alpha and beta, after its parking loop, in a loop over the part's float4s of C (as
// _warptile.rows_to_c): one launch.
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
    const u32 parts = min(S, u32(wt::THREAD_M));
    const u32 tile = blockIdx.y * gridDim.x + blockIdx.x, tid = threadIdx.y * 32 + threadIdx.x;
    u32 part = z;
    while (part >= parts) part -= parts;              // z mod parts, without a division
    u32 mine = 0;                                     // the parts this CTA was the last to park
#pragma unroll 1
    for (u32 step = 0; step < parts; ++step) {
        u32 rows = 0;                                 // the part's rows as a bit mask
        for (u32 i = part; i < wt::THREAD_M; i += parts) rows |= 1u << i;
        wt::epilogue_rows<BV>(P + z * mn, acc, rows, row0, col0, am, bn, m, n);
        if (twin::arrive_at(counters, tile * S + part, tid, S)) mine |= 1u << part;
        if (++part == parts) part = 0;
    }
#pragma unroll 1   // loops, as the Numba level's, after the parking loop: acc is not read
    for (u32 q = 0; q < parts; ++q) {
        if (!(mine >> q & 1u)) continue;
#pragma unroll 1
        for (u32 i = q; i < wt::THREAD_M; i += parts) {
            const u32 row = row0 + am + (i >> 2) * wt::M_STEP + (i & 3);
            for (int j4 = 0; j4 < wt::SUB_N; ++j4) {
                const u32 col = col0 + bn + j4 * wt::N_STEP;
                const u64 off = u64(row) * n + col;
                float s[4];
                twin::sum_slices4(P, off, mn, S, row < m, col, n, s);
                const float4 out = beta == 0.f ? twin::ax4(alpha, s)
                                               : twin::axpby4(alpha, s, beta, twin::load4<BV>(C, off, row < m, col, n));
                twin::store4<BV>(C, off, row < m, col, n, out);
            }
        }
    }
}

#define K9SK_KERNEL(NAME, AV, BV) \
    WT_KERNEL NAME(K9SK_ARGS) { k9sk_body<AV, BV>(M, N, K, kslice, alpha, A, B, beta, C, P, counters); }
K9SK_KERNEL(k9sk, true, true)
K9SK_KERNEL(k9sk_edge, false, false)
K9SK_KERNEL(k9sk_bc, false, true)      // K % 4 != 0
K9SK_KERNEL(k9sk_a, true, false)       // N % 4 != 0
