// v11sk = v11 + split-K: blockIdx.y picks a slice of K, so a shape with few output tiles still
// puts a CTA on (nearly) every SM.
//
// C (M x N, fp32) = alpha * A (M x K) @ B (K x N) + beta * C; A, B fp16 or bf16, row-major.
//
// Grid (tiles, S): blockIdx.x is v11's output tile (super-tile order), blockIdx.y = z the K
// slice: K tiles [z * per, min((z + 1) * per, ceil(K / 64))), never empty (the host's
// numba_gemm.splitk.effective_splits). The K loop is v11's (wgmma_tma_loop.cuh). The epilogue
// writes to out + z * M * N (row stride N, masked to M, N):
//   S > 1: out is the fp32 workspace and the host passes alpha = 1, beta = 0, so slice z holds
//          its raw partial sums (1 * x is exact, C is not read); numba_gemm.splitk.reduce then
//          adds the S slices in the fixed order z = 0, 1, ... and applies alpha, beta once.
//   S = 1: out is C, with the caller's alpha and beta - v11 in one launch, no workspace.
// Tile from -DHG_* (wgmma_tile.cuh): BM = 128 (two consumer warpgroups) or 64 (one, 128
// threads) for M <= 64, where a 128-row tile would multiply 64 rows of zero-filled A.
#include "wgmma_tma_loop.cuh"
#include "tile_order.cuh"

namespace v11sk {
using namespace wgt;   // BM, BN, BK, STAGES, THREADS (-DHG_*)
}

#define V11SK_ARGS const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b, \
    float* __restrict__ out, int M, int N, int K, float alpha, float beta, int vec_c, int super_m,   \
    int super_n, int per

template <typename T>
__device__ __forceinline__ void v11sk_entry(const CUtensorMap* tm_a, const CUtensorMap* tm_b,
                                            float* out, int M, int N, int K, float alpha, float beta,
                                            int vec_c, int super_m, int super_n, int per) {
    extern __shared__ char smem[];
    const int grid_m = (M + v11sk::BM - 1) / v11sk::BM, grid_n = (N + v11sk::BN - 1) / v11sk::BN;
    int bm, bn;
    tile_supertile(blockIdx.x, grid_m, grid_n, super_m, super_n, bm, bn);
    const int z = blockIdx.y, m0 = bm * v11sk::BM, n0 = bn * v11sk::BN;
    float* slice = out + (long long)z * M * N;           // 64-bit: S * M * N may pass 2^31
    tma_wgmma::k_loop<T>(tm_a, tm_b, N, K, m0, n0, z * per, per, smem,
                         [&](const float (&acc)[v11sk::BN / 2], int wg, int wg_thread) {
                             store_acc_64xN<v11sk::BN>(acc, slice, M, N, (long long)m0 + 64 * wg, n0,
                                                       wg_thread, alpha, beta, vec_c);
                         });
}

extern "C" __global__ void __launch_bounds__(v11sk::THREADS, 1) v11sk_splitk_f16(V11SK_ARGS) {
    v11sk_entry<__half>(&tm_a, &tm_b, out, M, N, K, alpha, beta, vec_c, super_m, super_n, per);
}
extern "C" __global__ void __launch_bounds__(v11sk::THREADS, 1) v11sk_splitk_bf16(V11SK_ARGS) {
    v11sk_entry<__nv_bfloat16>(&tm_a, &tm_b, out, M, N, K, alpha, beta, vec_c, super_m, super_n, per);
}
