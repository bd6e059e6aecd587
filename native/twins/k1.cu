// k1 twin: one thread per element of C, threadIdx.x walking ROWS (the seed's bug: a warp's
// loads of A are 32 rows apart). Grid x over rows. K loop: K % 4 single steps, then by 4.
#include "sgemm.cuh"

extern "C" __global__ void k1(SGEMM_ARGS) {
    const u32 row = blockIdx.x * 32 + threadIdx.x;
    const u32 col = blockIdx.y * 32 + threadIdx.y;
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
