// k2 twin: k1 with threadIdx.x on COLUMNS: a warp reads 32 adjacent floats of B (and one
// broadcast of A). Grid x over columns; the same K loop as k1.
#include "sgemm.cuh"
#include "tile.cuh"

static_assert(BLOCK_X == TILE_N && BLOCK_Y == TILE_M, "k2: one thread per element, x along the columns");

extern "C" __global__ void k2(SGEMM_ARGS) {
    const u32 col = blockIdx.x * TILE_N + threadIdx.x;
    const u32 row = blockIdx.y * TILE_M + threadIdx.y;
    if (row < u32(M) && col < u32(N)) {
        float acc = 0.0f;
        for (u64 k = 0; k < u64(K); ++k) acc += A[u64(row) * u64(K) + k] * B[k * u64(N) + col];
        twin::store_c(C, u64(row) * u64(N) + col, acc, alpha, beta);
    }
}
