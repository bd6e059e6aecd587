// k3 twin: 32x32 tiles of A and B staged in shared memory, one element per thread per tile.
#include "sgemm.cuh"
#include "tile.cuh"

constexpr int TILE = TILE_K;
static_assert(TILE_M == TILE && TILE_N == TILE && BLOCK_X == TILE && BLOCK_Y == TILE &&
              THREAD_M == 1 && THREAD_N == 1,
              "k3: square tiles, one thread per output loading one element of each tile");

extern "C" __global__ void k3(SGEMM_ARGS) {
    __shared__ __align__(16) float As[TILE][TILE];
    __shared__ __align__(16) float Bs[TILE][TILE];
    const u32 tx = threadIdx.x, ty = threadIdx.y;
    const u32 col = blockIdx.x * TILE + tx, row = blockIdx.y * TILE + ty;
    const u32 m = M, n = N, k = K;
    const u64 a_row = u64(row) * k;
    float acc = 0.0f;
    for (u32 ph = 0; ph < k; ph += TILE) {
        const u32 a_col = ph + tx, b_row = ph + ty;
        As[ty][tx] = (row < m && a_col < k) ? A[a_row + a_col] : 0.0f;
        Bs[ty][tx] = (b_row < k && col < n) ? B[u64(b_row) * n + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc += As[ty][kk] * Bs[kk][tx];
        __syncthreads();
    }
    if (row < m && col < n) twin::store_c(C, u64(row) * n + col, acc, alpha, beta);
}
