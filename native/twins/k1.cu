// k1 twin: one thread per element of C, threadIdx.x walking ROWS (the seed's bug: a warp's
// loads of A are K floats apart). Grid x over rows; the textbook K loop, 64-bit offsets.
#include "sgemm.cuh"
#include "tile.cuh"

static_assert(BLOCK_X == TILE_M && BLOCK_Y == TILE_N, "k1: one thread per element, x down the rows");

extern "C" __global__ void k1(SGEMM_ARGS) {
    const u32 row = blockIdx.x * TILE_M + threadIdx.x;
    const u32 col = blockIdx.y * TILE_N + threadIdx.y;
    if (row < u32(M) && col < u32(N)) {
        float acc = 0.0f;
        for (u64 k = 0; k < u64(K); ++k) acc += A[u64(row) * u64(K) + k] * B[k * u64(N) + col];
        twin::store_c(C, u64(row) * u64(N) + col, acc, alpha, beta);
    }
}
