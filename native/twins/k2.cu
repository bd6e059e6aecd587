// k2 twin: k1 with threadIdx.x on COLUMNS: a warp reads 32 adjacent floats of B (and one
// broadcast of A). Grid x over columns; the same K loop as k1.
#include "sgemm.cuh"

extern "C" __global__ void k2(SGEMM_ARGS) {
    const u32 col = blockIdx.x * 32 + threadIdx.x;
    const u32 row = blockIdx.y * 32 + threadIdx.y;
    if (row < u32(M) && col < u32(N)) {
        float acc = 0.0f;
        for (u64 k = 0; k < u64(K); ++k) acc += A[u64(row) * u64(K) + k] * B[k * u64(N) + col];
        twin::store_c(C, u64(row) * u64(N) + col, acc, alpha, beta);
    }
}
