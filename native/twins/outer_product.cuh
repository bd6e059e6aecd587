// k5's body (numba_gemm/sgemm/k5_outer.py's multiply in CUDA C), shared by the k5 and k5sk twins:
// an 8 x 4 register outer product per thread (8 A values and 4 B values, columns tx + 32j, per
// k: 32 FMAs), block 32 x 4, tile 32 x 128 x 32, over the K range [k_lo, k_end) into the M x N
// matrix at C. k5 is (0, K); k5sk a slice, its partials at C + z*M*N.
#pragma once
#include "sgemm.cuh"
#include "tile.cuh"

namespace k5_twin {

constexpr int TILE = TILE_K, CF = THREAD_M, TN = THREAD_N;   // a thread: CF rows x TN columns TILE apart
static_assert(TILE_M == TILE && TILE_N == TILE * TN && BLOCK_X == TILE && BLOCK_Y * CF == TILE,
              "k5: a TILE x TILE A tile loaded one row per thread and r, B TN tiles across");

// k_lo: a multiple of TILE; loads at or past k_end give zeros. SKIP_IDLE_WARPS: a warp whose
// CF rows all lie at or past M skips the multiply (a warp is one ty: uniform); it still loads.
template <bool SKIP_IDLE_WARPS>
__device__ __forceinline__ void multiply(int M, int N, int K, u32 k_lo, u32 k_end, float alpha,
                                         const float* __restrict__ A, const float* __restrict__ B,
                                         float beta, float* __restrict__ C) {
    __shared__ __align__(16) float As[TILE][TILE];
    __shared__ __align__(16) float Bs[TILE][TILE * TN];
    const u32 tx = threadIdx.x, ty = threadIdx.y;
    const u32 i0 = ty * CF;
    const u32 row0 = blockIdx.y * TILE + i0;
    const u32 b_col = blockIdx.x * (TILE * TN) + tx;
    const u32 m = M, n = N, k = K;
    const bool busy = !SKIP_IDLE_WARPS || row0 < m;
    float acc[CF][TN], a_reg[CF], b_reg[TN];
#pragma unroll
    for (int r = 0; r < CF; ++r)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[r][j] = 0.0f;
    u64 a_off = u64(row0) * k + tx + k_lo;
    u64 b_off = u64(k_lo + i0) * n + b_col;
    for (u32 ph = k_lo; ph < k_end; ph += TILE, a_off += TILE, b_off += u64(TILE) * n) {
        const u32 a_col = ph + tx, b_row = ph + i0;
#pragma unroll
        for (int r = 0; r < CF; ++r) {
            const u32 ir = i0 + r;
            As[ir][tx] = (row0 + r < m && a_col < k_end) ? A[a_off + u64(r) * k] : 0.0f;
            const bool b_ok = b_row + r < k_end;
            const u64 b = b_off + u64(r) * n;
#pragma unroll
            for (int j = 0; j < TN; ++j)
                Bs[ir][j * TILE + tx] = (b_ok && b_col + j * TILE < n) ? B[b + j * TILE] : 0.0f;
        }
        __syncthreads();
        if (busy) {
#pragma unroll
            for (int kk = 0; kk < TILE; ++kk) {
#pragma unroll
                for (int r = 0; r < CF; ++r) a_reg[r] = As[i0 + r][kk];
#pragma unroll
                for (int j = 0; j < TN; ++j) b_reg[j] = Bs[kk][j * TILE + tx];
#pragma unroll
                for (int r = 0; r < CF; ++r)
#pragma unroll
                    for (int j = 0; j < TN; ++j) acc[r][j] += a_reg[r] * b_reg[j];
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < CF; ++r) {
        if (row0 + r >= m) continue;
        const u64 c_row = u64(row0 + r) * n;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const u32 col = b_col + j * TILE;
            if (col < n) twin::store_c(C, c_row + col, acc[r][j], alpha, beta);
        }
    }
}

}  // namespace k5_twin
