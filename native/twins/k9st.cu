// k9st twin: stream-K on k9's loop (unrolled_buffers.cuh), over tiles_n tiles across N and all
// of M's. CTA b < whole: tile b over all of K.
// CTA whole + c: K tiles [start(c), start(c + 1)) of the stream tiles (whole .. tiles-1) laid end
// to end, start(c) = floor(c * n / ctas) = c*q + c*r / ctas; a segment per output tile it meets,
// each k9's loop over that part of the tile's K. A whole tile: k9's epilogue into C. Part of one:
// its raw sum into slot s + c of P (tile-local, TM x TN), then the tile's last CTA to arrive
// (splitk_in_kernel.cuh) adds the parts in order of c and writes C with alpha and beta, in a
// loop over the thread's float4s of C (as _warptile.parts_to_c): one launch.
#include "splitk_in_kernel.cuh"
#include "unrolled_buffers.cuh"

#define K9ST_ARGS int M, int N, int K, int tiles_n, int whole, float alpha, const float* __restrict__ A, \
                  const float* __restrict__ B, float beta, float* __restrict__ C, float* __restrict__ P, \
                  unsigned* counters

// first K tile of stream CTA c (k9st_streamk.share_start), and the CTA whose share holds K tile x
__device__ __forceinline__ u32 share_start(u32 c, u32 q, u32 r, u32 ctas) { return c * q + c * r / ctas; }
__device__ __forceinline__ u32 owner(u32 x, u32 q, u32 r, u32 ctas) {
    u32 c = min(x / q, ctas - 1);
    while (share_start(c, q, r, ctas) > x) --c;
    return c;
}

// the CTA's plan in shared memory, as the Numba kernel's (k9st_streamk.IT ... CTAS): read once a
// segment, so that none of it holds a register through k9's loop
enum { IT, END, ITERS, TILES_N, WHOLE, CTA, Q, R, CTAS, PLAN_WORDS };

template <bool AV, bool BV>
__device__ __forceinline__ void k9st_body(K9ST_ARGS) {
    constexpr u32 TILE = wt::TM * wt::TN;
    __shared__ u32 plan[PLAN_WORDS];
    const u32 m = M, n = N, k = K, tid = threadIdx.y * 32 + threadIdx.x;
    if (tid == 0) {
        const u32 iters = (k + wt::TK - 1) / wt::TK, tiles = u32(tiles_n) * ((m + wt::TM - 1) / wt::TM);
        const u32 w = whole, ctas = gridDim.x - w, n_it = (tiles - w) * iters, q = n_it / ctas, r = n_it - q * ctas;
        const u32 b = blockIdx.x, c = b - min(b, w);
        const u32 it = b < w ? b * iters : w * iters + share_start(c, q, r, ctas);
        const u32 end = b < w ? it + iters : w * iters + share_start(c + 1, q, r, ctas);
        const u32 words[PLAN_WORDS] = {it, end, iters, u32(tiles_n), w, c, q, r, ctas};
        for (int i = 0; i < PLAN_WORDS; ++i) plan[i] = words[i];
    }
    __syncthreads();
    while (plan[IT] < plan[END]) {
        u32 it = plan[IT], tile = it / plan[ITERS], first = tile * plan[ITERS];
        u32 stop = min(plan[END], first + plan[ITERS]);
        u32 am, bn;
        float acc[wt::THREAD_M][wt::THREAD_N] = {};
        wt::k9_loop<AV, BV>(A, B, m, n, k, (it - first) * wt::TK, min(k, (stop - first) * wt::TK),
                            tile / plan[TILES_N] * wt::TM, tile % plan[TILES_N] * wt::TN, am, bn, acc);
        const u32 iters = plan[ITERS];
        it = plan[IT], tile = it / iters, first = tile * iters, stop = min(plan[END], first + iters);
        const u32 row0 = tile / plan[TILES_N] * wt::TM, col0 = tile % plan[TILES_N] * wt::TN;
        if (it == first && stop == first + iters) {
            wt::epilogue<BV>(C, acc, alpha, beta, row0, col0, am, bn, m, n);
        } else {
            const u32 q = plan[Q], r = plan[R], ctas = plan[CTAS], s = tile - plan[WHOLE], x0 = s * iters;
            const u32 lo = owner(x0, q, r, ctas), parts = owner(x0 + iters - 1, q, r, ctas) - lo + 1;
            wt::epilogue<BV>(P + u64(s + plan[CTA]) * TILE, acc, 1.f, 0.f, 0, 0, am, bn, wt::TM, wt::TN);
            if (twin::arrive_at(counters, s, tid, parts)) {
#pragma unroll 1   // a loop, as the Numba level's: acc is not read
                for (int g = 0; g < wt::THREAD_M * wt::SUB_N; ++g) {
                    const int i = g / wt::SUB_N;
                    const u32 tr = am + i / 4 * wt::M_STEP + i % 4, tc = bn + g % wt::SUB_N * wt::N_STEP;
                    const u32 row = row0 + tr, col = col0 + tc;
                    const u64 off = u64(row) * n + col;
                    float v[4];
                    twin::sum_slices4(P, u64(s + lo) * TILE + tr * wt::TN + tc, TILE, parts, row < m, col, n, v);
                    const float4 out = beta == 0.f ? twin::ax4(alpha, v)
                                                   : twin::axpby4(alpha, v, beta, twin::load4<BV>(C, off, row < m, col, n));
                    twin::store4<BV>(C, off, row < m, col, n, out);
                }
            }
        }
        __syncthreads();                    // every thread has read plan[IT]
        if (tid == 0) plan[IT] = stop;
        __syncthreads();
    }
}

#ifndef K9ST_BODY_ONLY   // k8es.cu: the body for its interior, under its own kernel name
#define K9ST_KERNEL(NAME, AV, BV) \
    WT_KERNEL NAME(K9ST_ARGS) { k9st_body<AV, BV>(M, N, K, tiles_n, whole, alpha, A, B, beta, C, P, counters); }
K9ST_KERNEL(k9st, true, true)
K9ST_KERNEL(k9st_edge, false, false)
K9ST_KERNEL(k9st_bc, false, true)      // K % 4 != 0
K9ST_KERNEL(k9st_a, true, false)       // N % 4 != 0
#endif
