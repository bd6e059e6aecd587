// v11sl = v11sk with the reduction moved into the GEMM kernel: the S slices of an output tile
// are one thread-block cluster, and they add their partials through distributed shared memory.
// One launch, no workspace.
//
// C (M x N, fp32) = alpha * A (M x K) @ B (K x N) + beta * C; A, B fp16 or bf16, row-major.
//
// Grid (tiles * S): the cluster (S, 1, 1) of CTAs S*t .. S*t + S-1 computes output tile t (v9's
// super-tile order over the tiles), CTA rank z of the cluster the K tiles [z * per, min((z + 1)
// * per, ceil(K / 64))) with v11's K loop. S = 1: v11's register epilogue writes C. S > 1:
//   1. each CTA parks its fp32 partial (BM x BN) in its own shared memory, over the stages the
//      K loop no longer needs (rows padded by 8 floats: a warp's 8 rows fall in 2 wavefronts);
//   2. cluster barrier (release / acquire): every partial of the tile is in place;
//   3. CTA z takes rows [z * BM / S, (z + 1) * BM / S) of the tile and adds, for each element, the
//      S partials in the order 0, 1, ..., S-1 (native/parked_sum.cuh; ld.shared::cluster from
//      CTA r), then C = alpha * sum + beta * C with row-contiguous stores - the same order, and
//      so the same bits, every run; no float atomics, nothing left behind for the next call;
//   4. cluster barrier again: no CTA leaves (freeing its shared memory) while another reads it.
// S <= 8, the portable cluster size: the S CTAs of a tile are co-scheduled on one GPC.
#include "wgmma_tma_loop.cuh"
#include "tile_order.cuh"
#include "parked_sum.cuh"

namespace v11sl {
using namespace wgt;   // BM, BN, BK, STAGES, THREADS (-DHG_*)
constexpr int ROW = BN + 8;                                   // floats per parked row
static_assert(BM * ROW * 4 <= STAGES * STAGE_BYTES, "the partial fits over the stages");

// Park this warpgroup's accumulators (store_acc_64xN's layout) at rows 64 wg .. of the tile.
__device__ __forceinline__ void park(const float (&d)[BN / 2], u32 tile, int wg, int wg_thread) {
    const int warp = wg_thread / 32, lane = wg_thread % 32, g = lane / 4, q = lane % 4;
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
        const u32 row = tile + 4u * (64 * wg + 16 * warp + g + 8 * h) * ROW;
        #pragma unroll
        for (int j = 0; j < BN / 8; ++j)
            st_shared_v2(row + 4u * (8 * j + 2 * q), d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
    }
}

}  // namespace v11sl

#define V11SL_ARGS const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b, \
    float* __restrict__ C, int M, int N, int K, float alpha, float beta, int vec_c, int super_m,   \
    int super_n, int per, int S

template <typename T>
__device__ __forceinline__ void v11sl_entry(const CUtensorMap* tm_a, const CUtensorMap* tm_b,
                                            float* C, int M, int N, int K, float alpha, float beta,
                                            int vec_c, int super_m, int super_n, int per, int S) {
    extern __shared__ char smem[];
    const int grid_m = (M + v11sl::BM - 1) / v11sl::BM, grid_n = (N + v11sl::BN - 1) / v11sl::BN;
    int bm, bn;
    tile_supertile(blockIdx.x / S, grid_m, grid_n, super_m, super_n, bm, bn);
    const int z = S > 1 ? (int)cluster_ctarank() : 0, m0 = bm * v11sl::BM, n0 = bn * v11sl::BN;
    const u32 tile = (smem_u32(smem) + 1023u) & ~1023u;      // the stages' base (wgmma_tma_loop)
    tma_wgmma::k_loop<T>(tm_a, tm_b, N, K, m0, n0, z * per, per, smem,
                         [&](const float (&acc)[v11sl::BN / 2], int wg, int wg_thread) {
                             if (S == 1) {
                                 store_acc_64xN<v11sl::BN>(acc, C, M, N, (long long)m0 + 64 * wg, n0,
                                                           wg_thread, alpha, beta, vec_c);
                                 return;
                             }
                             __syncthreads();                // every warpgroup is past its last stage
                             v11sl::park(acc, tile, wg, wg_thread);
                             cluster_sync();
                             const int r0 = z * v11sl::BM / S, r1 = (z + 1) * v11sl::BM / S;
                             sum_parked_rows<v11sl::BN / 2, v11sl::ROW, v11sl::THREADS>(
                                 tile, S, r0, r1, C, M, N, m0, n0, alpha, beta, vec_c);
                             cluster_sync();
                         });
}

extern "C" __global__ void __launch_bounds__(v11sl::THREADS, 1) v11sl_splitk_f16(V11SL_ARGS) {
    v11sl_entry<__half>(&tm_a, &tm_b, C, M, N, K, alpha, beta, vec_c, super_m, super_n, per, S);
}
extern "C" __global__ void __launch_bounds__(v11sl::THREADS, 1) v11sl_splitk_bf16(V11SL_ARGS) {
    v11sl_entry<__nv_bfloat16>(&tm_a, &tm_b, C, M, N, K, alpha, beta, vec_c, super_m, super_n, per, S);
}
