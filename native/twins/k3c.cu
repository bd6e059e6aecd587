// k3c twin: k3 + each block reuses its A tile for 4 column tiles of B (thread coarsening);
// the 4 partial sums rotate through p0..p3 as in the Numba level.
#include "sgemm.cuh"
#include "tile.cuh"

constexpr int TILE = TILE_K, COARSE = THREAD_N;   // COARSE column tiles of k3's TILE per block
static_assert(TILE_M == TILE && TILE_N == TILE * COARSE && BLOCK_X == TILE && BLOCK_Y == TILE &&
              THREAD_M == 1, "k3c: k3's square tile and threads, COARSE tiles across");
static_assert(COARSE == 4, "k3c: the partial sums rotate through p0..p3");

__device__ __forceinline__ void store_col(float* C, u64 c_row, u32 col, u32 n, float alpha,
                                          float beta, float acc) {
    if (col < n) twin::store_c(C, c_row + col, acc, alpha, beta);
}

extern "C" __global__ void k3c(SGEMM_ARGS) {
    __shared__ __align__(16) float As[TILE][TILE];
    __shared__ __align__(16) float Bs[TILE][TILE];
    const u32 tx = threadIdx.x, ty = threadIdx.y;
    const u32 row = blockIdx.y * TILE + ty;
    const u32 col_start = blockIdx.x * (TILE * COARSE) + tx;
    const u32 m = M, n = N, k = K;
    const u64 a_row = u64(row) * k;
    float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f, p3 = 0.0f;
    for (u32 ph = 0; ph < k; ph += TILE) {
        const u32 a_col = ph + tx, b_row = ph + ty;
        const u64 b_off = u64(b_row) * n;
        As[ty][tx] = (row < m && a_col < k) ? A[a_row + a_col] : 0.0f;
#pragma unroll
        for (int c = 0; c < COARSE; ++c) {
            const u32 col = col_start + c * TILE;
            Bs[ty][tx] = (b_row < k && col < n) ? B[b_off + col] : 0.0f;
            __syncthreads();
            float acc = 0.0f;
#pragma unroll
            for (int kk = 0; kk < TILE; ++kk) acc += As[ty][kk] * Bs[kk][tx];
            __syncthreads();
            const float t = p0 + acc;
            p0 = p1; p1 = p2; p2 = p3; p3 = t;
        }
    }
    if (row < m) {
        const u64 c_row = u64(row) * n;
        store_col(C, c_row, col_start, n, alpha, beta, p0);
        store_col(C, c_row, col_start + TILE, n, alpha, beta, p1);
        store_col(C, c_row, col_start + 2 * TILE, n, alpha, beta, p2);
        store_col(C, c_row, col_start + 3 * TILE, n, alpha, beta, p3);
    }
}
