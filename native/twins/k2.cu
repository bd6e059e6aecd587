// k2 twin: k1 with threadIdx.x on COLUMNS: a warp reads 32 adjacent floats of B. Grid x over
// columns. K loop as k1.
#include "sgemm.cuh"

extern "C" __global__ void k2(SGEMM_ARGS) {
    const u32 col = blockIdx.x * 32 + threadIdx.x;
    const u32 row = blockIdx.y * 32 + threadIdx.y;
    if (row < u32(M) && col < u32(N)) {
        u64 a = u64(row) * u32(K), b = col;
        float acc = 0.0f;
        u32 k = 0;
        for (; k < (u32(K) & 3u); ++k, ++a, b += u32(N)) acc += A[a] * B[b];
        for (; k != u32(K); k += 4, a += 4) {
            acc += A[a] * B[b];     b += u32(N);
            acc += A[a + 1] * B[b]; b += u32(N);
            acc += A[a + 2] * B[b]; b += u32(N);
            acc += A[a + 3] * B[b]; b += u32(N);
        }
        twin::store_c(C, u64(row) * u32(N) + col, acc, alpha, beta);
    }
}
