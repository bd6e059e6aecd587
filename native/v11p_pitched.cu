// v11p = v11 on copies of A and B whose rows start on 16-byte boundaries: the shapes TMA
// refuses (K or N not a multiple of 8 for 2-byte types) get v11's TMA + wgmma pipeline after
// one copy of each operand, instead of v11r's register-staged loads.
//
// C (M x N, fp32) = alpha * A (M x K) @ B (K x N) + beta * C; A, B fp16 or bf16, row-major.
//
// v11p_repitch copies a rows x cols matrix of 16-bit values into rows `pitch` elements apart
// (pitch = cols rounded up to 8: 16 bytes), the pad columns zero. Each thread writes 16 bytes
// of one destination row, reading its 8 source elements one by one (a source row starts at any
// 2-byte address); a warp reads 512 contiguous bytes. The copies' tensor maps keep the true
// extents (K, N) with the padded row stride, so TMA zero-fills past K and N as for v11, and the
// GEMM kernel is v11's, unchanged; C (any N) is written by v11's register epilogue, masked, with
// scalar stores where its rows are not 8-byte aligned.
#include "wgmma_tma_loop.cuh"
#include "tile_order.cuh"

extern "C" __global__ void v11p_repitch(const unsigned short* __restrict__ src, int rows, int cols,
                                        unsigned short* __restrict__ dst, int pitch) {
    const int chunks = pitch / 8;                           // 16-byte chunks per destination row
    const long long n = (long long)rows * chunks;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const long long r = i / chunks;
        const int c0 = (int)(i % chunks) * 8;
        const unsigned short* s = src + r * cols;
        unsigned int w[4];
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            const unsigned int lo = c0 + 2 * j < cols ? s[c0 + 2 * j] : 0u;
            const unsigned int hi = c0 + 2 * j + 1 < cols ? s[c0 + 2 * j + 1] : 0u;
            w[j] = lo | hi << 16;
        }
        *reinterpret_cast<uint4*>(dst + r * pitch + c0) = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

namespace v11p {
using namespace wgt;   // BM, BN, BK, STAGES, THREADS (-DHG_*, wgmma_tile.cuh)
}

#define V11P_ARGS const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b, \
    float* __restrict__ C, int M, int N, int K, float alpha, float beta, int vec_c, int super_m,    \
    int super_n

template <typename T>
__device__ __forceinline__ void v11p_entry(const CUtensorMap* tm_a, const CUtensorMap* tm_b,
                                           float* C, int M, int N, int K, float alpha, float beta,
                                           int vec_c, int super_m, int super_n) {
    extern __shared__ char smem[];
    const int grid_m = (M + v11p::BM - 1) / v11p::BM, grid_n = (N + v11p::BN - 1) / v11p::BN;
    int bm, bn;
    tile_supertile(blockIdx.x, grid_m, grid_n, super_m, super_n, bm, bn);
    const int m0 = bm * v11p::BM, n0 = bn * v11p::BN;
    tma_wgmma::k_loop<T>(tm_a, tm_b, N, K, m0, n0, 0, 0x7fffffff, smem,
                         [&](const float (&acc)[v11p::BN / 2], int wg, int wg_thread) {
                             store_acc_64xN<v11p::BN>(acc, C, M, N, (long long)m0 + 64 * wg, n0,
                                                      wg_thread, alpha, beta, vec_c);
                         });
}

extern "C" __global__ void __launch_bounds__(v11p::THREADS, 1) v11p_wgmma_f16(V11P_ARGS) {
    v11p_entry<__half>(&tm_a, &tm_b, C, M, N, K, alpha, beta, vec_c, super_m, super_n);
}
extern "C" __global__ void __launch_bounds__(v11p::THREADS, 1) v11p_wgmma_bf16(V11P_ARGS) {
    v11p_entry<__nv_bfloat16>(&tm_a, &tm_b, C, M, N, K, alpha, beta, vec_c, super_m, super_n);
}
