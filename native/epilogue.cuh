// epilogue.cuh - C = alpha * acc + beta * C for the mma.sync levels (v8, v9, v10), straight from
// the accumulator registers: no round trip through shared memory.
//
// Accumulator (i, j) of a warp holds rows g, g+8 and columns 2q, 2q+1 of its 16 x 8 mma tile
// (g = lane/4, q = lane%4). Masked at the matrix edge; float2 stores when C's rows allow
// (vec_c: 8-byte aligned base, N even); beta == 0 never reads C.
#pragma once

#include "tile_config.cuh"

namespace hg {

__device__ __forceinline__ void store_tile(const float (&acc)[MT][NT][4], float* __restrict__ C,
                                           int M, int N, int m0, int n0, int warp_m, int warp_n,
                                           int lane, float alpha, float beta, bool vec_c) {
    const int g = lane / 4, q = lane % 4;
    #pragma unroll
    for (int i = 0; i < MT; ++i) {
        #pragma unroll
        for (int h = 0; h < 2; ++h) {
            const long long row = (long long)m0 + warp_m * WM + i * 16 + g + 8 * h;
            if (row >= M) continue;
            float* crow = C + row * N;
            #pragma unroll
            for (int j = 0; j < NT; ++j) {
                const long long col = (long long)n0 + warp_n * WN + j * 8 + 2 * q;
                float v0 = alpha * acc[i][j][2 * h], v1 = alpha * acc[i][j][2 * h + 1];
                if (vec_c && col + 1 < N) {
                    float2* c2 = reinterpret_cast<float2*>(crow + col);
                    if (beta != 0.0f) {
                        const float2 old = *c2;
                        v0 += beta * old.x;
                        v1 += beta * old.y;
                    }
                    *c2 = make_float2(v0, v1);
                } else {
                    if (col < N) crow[col] = beta != 0.0f ? v0 + beta * crow[col] : v0;
                    if (col + 1 < N) crow[col + 1] = beta != 0.0f ? v1 + beta * crow[col + 1] : v1;
                }
            }
        }
    }
}

}  // namespace hg
