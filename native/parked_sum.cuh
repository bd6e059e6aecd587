// parked_sum.cuh - the last step of a split-K tile reduced inside its cluster (v11sl, v11t).
//
// Each of the S CTAs of the cluster has parked its fp32 partial of the output tile in its own
// shared memory, rows of ROW floats, and a cluster barrier has passed. Rows [r0, r1) of the tile
// are summed here over the S partials in rank order 0, 1, ..., S-1 (the same bits every run, no
// float atomics) and written as C = alpha * sum + beta * C.
//
// Every load is a trip to another SM's shared memory (mapa + ld.shared::cluster). A thread
// loads the partials of PARKED_PER pairs before it adds or stores any, so PARKED_PER * S loads
// are in flight together; a pair at a time, each thread waited out one trip per pair.
#pragma once

#include "cluster.cuh"
#include "c_element.cuh"

constexpr int PARKED_MAX_S = 8;   // the portable cluster size
constexpr int PARKED_PER = 4;     // pairs a thread loads before it adds

// PAIRS float pairs per tile row; the tile's row r is C's row m0 + r, its column c C's n0 + c.
// S = 1 (v11t launches a lone CTA without a cluster): rank 0 is the CTA itself.
// N % 8 == 0 (TMA's rule for 2-byte inputs): a pair starting inside N ends inside N.
template <int PAIRS, int ROW, int THREADS>
__device__ __forceinline__ void sum_parked_rows(u32 tile, int S, int r0, int r1, float* __restrict__ C,
                                                int M, int N, long long m0, long long n0,
                                                float alpha, float beta, bool vec_c) {
    const int n = (r1 - r0) * PAIRS;
    for (int i0 = threadIdx.x; i0 < n; i0 += PARKED_PER * THREADS) {
        float2 p[PARKED_PER][PARKED_MAX_S];
        #pragma unroll
        for (int u = 0; u < PARKED_PER; ++u) {
            const int i = min(i0 + u * THREADS, n - 1);   // past the end: a parked pair, unused
            const u32 at = tile + 4u * ((r0 + i / PAIRS) * ROW + 2 * (i % PAIRS));
            #pragma unroll
            for (int z = 0; z < PARKED_MAX_S; ++z)
                if (z < S) p[u][z] = ld_cluster_f2(at, z);
        }
        #pragma unroll
        for (int u = 0; u < PARKED_PER; ++u) {
            const int i = i0 + u * THREADS;
            const long long row = m0 + r0 + i / PAIRS, col = n0 + 2 * (i % PAIRS);
            if (i >= n || row >= M || col >= N) continue;
            float2 s = p[u][0];
            #pragma unroll
            for (int z = 1; z < PARKED_MAX_S; ++z)
                if (z < S) {
                    s.x += p[u][z].x;
                    s.y += p[u][z].y;
                }
            axpby_pair(C + row * N + col, s, alpha, beta, vec_c);
        }
    }
}
