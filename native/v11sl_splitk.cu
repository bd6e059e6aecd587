// v11sl = v11sk with the reduction moved into the GEMM kernel: the last CTA of each output tile
// to finish its K slice adds the tile's S partials and writes C. One launch instead of two.
//
// C (M x N, fp32) = alpha * A (M x K) @ B (K x N) + beta * C; A, B fp16 or bf16, row-major.
//
// Grid (tiles, S) as v11sk: blockIdx.x the output tile (super-tile order), blockIdx.y = z the K
// slice, K tiles [z * per, min((z + 1) * per, ceil(K / 64))). With S = 1 the epilogue writes C
// (v11). With S > 1 every CTA
//   1. writes its raw fp32 partial to ws + z * M * N (masked to M, N), as v11sk does;
//   2. makes it visible to the GPU (__threadfence), then thread 0 takes a ticket from the tile's
//      counter (atomicAdd): the CTA that draws S - 1 arrived last, every partial is written;
//   3. the last CTA resets the counter to 0 (no other CTA of this launch touches it again, so
//      the next call and a graph replay find it zero) and, in its accumulator registers, adds
//      the tile's partials in the order z = 0, 1, ..., S - 1 - its own included, read back
//      from the workspace, so the order (and the bits) never depend on which slice came last -
//      then applies alpha and beta once with the v11 epilogue. No float atomics.
// The partials of a tile are read by one CTA right after they were written: they come from L2
// (__ldcg, which skips the SM's L1, where nothing of them can be stale but nothing is needed).
// The counters (one int per tile, zeroed when allocated) live beside the partials
// (numba_gemm.workspace).
#include "wgmma_tma_loop.cuh"
#include "tile_order.cuh"

namespace v11sl {
using namespace wgt;   // BM, BN, BK, STAGES, THREADS (-DHG_*)

// d (this thread's accumulators of rows row0 .. row0 + 63, columns col0 .. col0 + BN - 1, in
// store_acc_64xN's layout) = sum over z = 0 .. S - 1 of ws[z], in that order. N % 8 == 0 (TMA's
// rule for 2-byte inputs), so a pair whose first column is inside N is inside N.
__device__ __forceinline__ void sum_partials(float (&d)[BN / 2], const float* __restrict__ ws,
                                             int S, int M, int N, long long row0, long long col0,
                                             int wg_thread) {
    constexpr int NB = BN / 8;
    const int warp = wg_thread / 32, lane = wg_thread % 32, g = lane / 4, q = lane % 4;
    const long long MN = (long long)M * N;
    for (int z = 0; z < S; ++z) {
        #pragma unroll
        for (int h = 0; h < 2; ++h) {
            const long long row = row0 + 16 * warp + g + 8 * h;
            if (row >= M) continue;
            const float* p = ws + z * MN + row * N;
            #pragma unroll
            for (int j = 0; j < NB; ++j) {
                const long long col = col0 + 8 * j + 2 * q;
                if (col >= N) continue;
                const float2 v = __ldcg(reinterpret_cast<const float2*>(p + col));
                float& x = d[4 * j + 2 * h];
                float& y = d[4 * j + 2 * h + 1];
                x = z == 0 ? v.x : x + v.x;
                y = z == 0 ? v.y : y + v.y;
            }
        }
    }
}
}  // namespace v11sl

#define V11SL_ARGS const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b, \
    float* __restrict__ C, int M, int N, int K, float alpha, float beta, int vec_c, int super_m,   \
    int super_n, int per, float* __restrict__ ws, int* __restrict__ counters

template <typename T>
__device__ __forceinline__ void v11sl_entry(const CUtensorMap* tm_a, const CUtensorMap* tm_b,
                                            float* C, int M, int N, int K, float alpha, float beta,
                                            int vec_c, int super_m, int super_n, int per, float* ws,
                                            int* counters) {
    extern __shared__ char smem[];
    __shared__ int last;
    const int grid_m = (M + v11sl::BM - 1) / v11sl::BM, grid_n = (N + v11sl::BN - 1) / v11sl::BN;
    int bm, bn;
    tile_supertile(blockIdx.x, grid_m, grid_n, super_m, super_n, bm, bn);
    const int z = blockIdx.y, S = gridDim.y, m0 = bm * v11sl::BM, n0 = bn * v11sl::BN;
    tma_wgmma::k_loop<T>(tm_a, tm_b, N, K, m0, n0, z * per, per, smem,
                         [&](float (&acc)[v11sl::BN / 2], int wg, int wg_thread) {
                             const long long row0 = (long long)m0 + 64 * wg;
                             if (S > 1) {
                                 float* slice = ws + (long long)z * M * N;   // 64-bit: S*M*N may pass 2^31
                                 store_acc_64xN<v11sl::BN>(acc, slice, M, N, row0, n0, wg_thread,
                                                           1.0f, 0.0f, true);
                                 __threadfence();
                                 __syncthreads();
                                 if (threadIdx.x == 0) {
                                     last = atomicAdd(counters + blockIdx.x, 1) == S - 1;
                                     if (last) counters[blockIdx.x] = 0;
                                 }
                                 __syncthreads();
                                 if (!last) return;
                                 __threadfence();
                                 v11sl::sum_partials(acc, ws, S, M, N, row0, n0, wg_thread);
                             }
                             store_acc_64xN<v11sl::BN>(acc, C, M, N, row0, n0, wg_thread, alpha,
                                                       beta, vec_c);
                         });
}

extern "C" __global__ void __launch_bounds__(v11sl::THREADS, 1) v11sl_splitk_f16(V11SL_ARGS) {
    v11sl_entry<__half>(&tm_a, &tm_b, C, M, N, K, alpha, beta, vec_c, super_m, super_n, per, ws, counters);
}
extern "C" __global__ void __launch_bounds__(v11sl::THREADS, 1) v11sl_splitk_bf16(V11SL_ARGS) {
    v11sl_entry<__nv_bfloat16>(&tm_a, &tm_b, C, M, N, K, alpha, beta, vec_c, super_m, super_n, per, ws, counters);
}
