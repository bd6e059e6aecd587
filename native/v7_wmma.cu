// v7 - tensor cores through the WMMA API.
//
// C (M x N, fp32) = alpha * A (M x K) @ B (K x N) + beta * C; A, B fp16 or bf16, row-major.
// Block tile 128 x 128 x 32, 256 threads = 8 warps as 2 (m) x 4 (n), each warp 64 x 32 =
// 4 x 2 WMMA 16x16x16 fragments with fp32 accumulators. Global -> shared by cp.async,
// double buffered (the load of tile k+1 runs while tile k is multiplied). Shared rows are
// padded (A: 32 + 8, B: 128 + 8 halves) so the 8 rows an ldmatrix reads start in different
// banks: 80-byte and 272-byte strides put consecutive rows 16 bytes apart modulo 128.
//
// Edges: cp.async with src-size 0 zero-fills chunks past M, N or K; stores are masked.
// When a row of A or B is not 16-byte aligned (K or N not a multiple of 8, or an unaligned
// base pointer) the host passes vec_a/vec_b = 0 and those tiles are loaded element by element.
#include "ptx.cuh"
#include <mma.h>

using namespace nvcuda;

namespace v7 {

constexpr int BM = 128, BN = 128, BK = 32;
constexpr int THREADS = 256;
constexpr int WARPS_M = 2, WARPS_N = 4;
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;   // 64 x 32 per warp
constexpr int FM = WM / 16, FN = WN / 16;             // 4 x 2 fragments
constexpr int A_LD = BK + 8;                           // padded row, in elements
constexpr int B_LD = BN + 8;

typedef unsigned short bits16;   // fp16 and bf16 travel as raw 16-bit patterns

struct Smem {
    bits16 a[2][BM][A_LD];
    bits16 b[2][BK][B_LD];
};

// One 16-byte chunk (8 elements) of a tile row: async when aligned, else element-wise.
__device__ __forceinline__ void load_chunk(bits16* dst, const bits16* src_row, long long col,
                                           long long ncols, bool row_ok, bool vec,
                                           const bits16* any_valid) {
    if (vec) {
        const bool ok = row_ok && col < ncols;  // ncols % 8 == 0: a chunk is all in or all out
        cp_async16(smem_u32(dst), ok ? (const void*)(src_row + col) : (const void*)any_valid, ok ? 16 : 0);
    } else {
        #pragma unroll
        for (int e = 0; e < 8; ++e)
            dst[e] = (row_ok && col + e < ncols) ? src_row[col + e] : (bits16)0;
    }
}

template <typename T>
__device__ __forceinline__ void gemm(const bits16* __restrict__ A, const bits16* __restrict__ B,
                                     float* __restrict__ C, int M, int N, int K,
                                     float alpha, float beta, int vec_a, int vec_b) {
    __shared__ __align__(128) Smem sm;

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;

    // Each thread copies 2 chunks of A (rows tid/4 and tid/4 + 64) and 2 of B (rows tid/16, +16).
    const int a_row = tid / 4, a_col = (tid % 4) * 8;
    const int b_row = tid / 16, b_col = (tid % 16) * 8;

    auto load_tile = [&](int stage, int kt) {
        const long long k0 = (long long)kt * BK;
        #pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int r = a_row + i * 64;
            const long long gm = (long long)m0 + r;
            load_chunk(&sm.a[stage][r][a_col], A + gm * K, k0 + a_col, K, gm < M, vec_a, A);
        }
        #pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int r = b_row + i * 16;
            const long long gk = k0 + r;
            load_chunk(&sm.b[stage][r][b_col], B + gk * N, (long long)n0 + b_col, N, gk < K, vec_b, B);
        }
    };

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
    #pragma unroll
    for (int i = 0; i < FM; ++i)
        #pragma unroll
        for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    const int k_tiles = (K + BK - 1) / BK;
    load_tile(0, 0);
    cp_async_commit();
    for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt & 1;
        if (kt + 1 < k_tiles) {
            load_tile(s ^ 1, kt + 1);   // its buffer was released by the barrier ending kt-1
            cp_async_commit();
            cp_async_wait<1>();         // tile kt has landed, kt+1 may still be in flight
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        #pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> af[FM];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> bf[FN];
            #pragma unroll
            for (int i = 0; i < FM; ++i)
                wmma::load_matrix_sync(af[i], reinterpret_cast<const T*>(&sm.a[s][warp_m * WM + i * 16][kk]), A_LD);
            #pragma unroll
            for (int j = 0; j < FN; ++j)
                wmma::load_matrix_sync(bf[j], reinterpret_cast<const T*>(&sm.b[s][kk][warp_n * WN + j * 16]), B_LD);
            #pragma unroll
            for (int i = 0; i < FM; ++i)
                #pragma unroll
                for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], af[i], bf[j], acc[i][j]);
        }
        __syncthreads();   // everyone is done with buffer s before it is refilled
    }

    // Epilogue: a fragment's element-to-lane map is opaque, so each warp parks one 16x16
    // fragment at a time in shared memory (the A buffers are free now) and writes it out
    // masked, 16 lanes per row. beta == 0 never reads C.
    float* park = reinterpret_cast<float*>(&sm.a[0][0][0]) + warp * 256;
    #pragma unroll
    for (int i = 0; i < FM; ++i) {
        #pragma unroll
        for (int j = 0; j < FN; ++j) {
            wmma::store_matrix_sync(park, acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            const long long col = (long long)n0 + warp_n * WN + j * 16 + lane % 16;
            #pragma unroll
            for (int q = 0; q < 8; ++q) {
                const int r = q * 2 + lane / 16;
                const long long row = (long long)m0 + warp_m * WM + i * 16 + r;
                if (row < M && col < N) {
                    float* c = C + row * N + col;
                    const float v = alpha * park[r * 16 + lane % 16];
                    *c = beta != 0.0f ? v + beta * *c : v;
                }
            }
            __syncwarp();
        }
    }
}

}  // namespace v7

#define V7_ARGS const unsigned short* __restrict__ A, const unsigned short* __restrict__ B, \
    float* __restrict__ C, int M, int N, int K, float alpha, float beta, int vec_a, int vec_b

extern "C" __global__ void __launch_bounds__(v7::THREADS) v7_wmma_f16(V7_ARGS) {
    v7::gemm<__half>(A, B, C, M, N, K, alpha, beta, vec_a, vec_b);
}
extern "C" __global__ void __launch_bounds__(v7::THREADS) v7_wmma_bf16(V7_ARGS) {
    v7::gemm<__nv_bfloat16>(A, B, C, M, N, K, alpha, beta, vec_a, vec_b);
}
