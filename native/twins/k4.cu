// k4 twin: k3 + each thread computes 8 rows of one column: block 32 x 4, one shared load of
// B reused by 8 FMAs.
#include "sgemm.cuh"
#include "tile.cuh"

constexpr int TILE = TILE_K, CF = THREAD_M;      // CF rows of one column per thread
static_assert(TILE_M == TILE && TILE_N == TILE && THREAD_N == 1 && BLOCK_X == TILE &&
              BLOCK_Y * CF == TILE, "k4: k3's square tile, a thread's CF rows down one column");

extern "C" __global__ void k4(SGEMM_ARGS) {
    __shared__ __align__(16) float As[TILE][TILE];
    __shared__ __align__(16) float Bs[TILE][TILE];
    const u32 tx = threadIdx.x, ty = threadIdx.y;
    const u32 col = blockIdx.x * TILE + tx;
    const u32 i0 = ty * CF;
    const u32 row0 = blockIdx.y * TILE + i0;
    const u32 m = M, n = N, k = K;
    float acc[CF];
#pragma unroll
    for (int r = 0; r < CF; ++r) acc[r] = 0.0f;
    const u64 a_row0 = u64(row0) * k;
    for (u32 ph = 0; ph < k; ph += TILE) {
        const u32 a_col = ph + tx;
        u64 a = a_row0 + a_col;
        u64 b = u64(ph + i0) * n + col;
#pragma unroll
        for (int r = 0; r < CF; ++r) {
            const u32 ir = i0 + r;
            As[ir][tx] = (row0 + r < m && a_col < k) ? A[a] : 0.0f;
            Bs[ir][tx] = (ph + ir < k && col < n) ? B[b] : 0.0f;
            a += k;
            b += n;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) {
            const float b_val = Bs[kk][tx];
#pragma unroll
            for (int r = 0; r < CF; ++r) acc[r] += As[i0 + r][kk] * b_val;
        }
        __syncthreads();
    }
    if (col < n) {
#pragma unroll
        for (int r = 0; r < CF; ++r)
            if (row0 + r < m) twin::store_c(C, u64(row0 + r) * n + col, acc[r], alpha, beta);
    }
}
