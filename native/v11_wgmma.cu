// v11 = v10 with ldmatrix + mma.sync replaced by wgmma reading the TMA tiles in place.
//
// C (M x N, fp32) = alpha * A (M x K) @ B (K x N) + beta * C; A, B fp16 or bf16, row-major.
//
// Tile (shipped): v10's 128 x 256 x 64, 4 stages of 48 KB, 256 threads - now 2 warpgroups,
// warpgroup w owning rows 64w..64w+63 of the block tile, all 256 columns: per 16-deep k step
// ONE wgmma.mma_async.m64n256k16 per warpgroup (v10: 4 ldmatrix + 4 ldmatrix.trans + 32
// mma.sync per warp). Accumulators: 64 x 256 / 128 threads = 128 fp32 per thread, as in v10.
// The tile comes from -DHG_* (wgmma_tile.cuh); BM = 64 is the same body with one warpgroup
// (128 threads, 40 KB stages): THREADS, the empty barriers' warp count and the A box follow BM.
// BN = 128 or 64 is the same body with m64n128k16 / m64n64k16, BN / 64 B panels per stage and
// BN / 2 accumulators per thread: more, smaller CTAs for shapes whose 128 x 256 tiles leave SMs
// idle (512^3 has 32 of them for 132 SMs).
//
// Operands come straight from the shared tiles TMA wrote with SWIZZLE_128B, described by
// matrix descriptors (wgmma.cuh); no ldmatrix, no fragment registers:
//   A: BM rows of 64 k (128 bytes) - K-major, 128B swizzle. 8-row atoms of 1024 bytes, so
//      SBO = 1024 (next 8 rows); LBO unused for swizzled K-major (1). The k step inside the
//      128-byte row is +32 bytes on the start address: the hardware applies the XOR on the
//      address bits, which is why every stage is 1024-byte aligned.
//   B: 4 panels of 64 k-rows x 64 n (128 bytes), 8 KB apart - N-major (imm-trans-b = 1), 128B
//      swizzle: LBO = 8192 (next 64 columns = next panel), SBO = 1024 (next 8 k rows); the
//      k step is +16 rows = +2048 bytes.
// TMA, the full/empty mbarriers and the producer thread (tid 0, which also computes) are
// v10's. What changes is the consumer: per stage a warpgroup
//   waits full[s] -> wgmma.fence -> 4 wgmma (k = 0, 16, 32, 48) -> commit_group
//   -> wait_group 1 (the PREVIOUS stage's group is done, this one keeps running)
//   -> lane 0 of each warp arrives on empty[previous stage].
// So the tensor cores always have one stage of work queued while the warp waits for the next.
//
// Edges as in v10: TMA zero-fills boxes past M and K; B panels wholly right of N are not
// loaded (their stale shared memory only reaches accumulator columns >= N, never stored:
// column n of D reads only column n of B); the epilogue masks rows and columns.
// The K loop is in wgmma_tma_loop.cuh (v11sk runs it over one K slice per CTA).
#include "wgmma_tma_loop.cuh"
#include "tile_order.cuh"

namespace v11 {

using namespace wgt;   // BM, BN, BK, STAGES, THREADS (-DHG_*, wgmma_tile.cuh)

template <typename T>
__device__ __forceinline__ void block_tile(const CUtensorMap* tm_a, const CUtensorMap* tm_b,
                                           float* __restrict__ C, int M, int N, int K, float alpha,
                                           float beta, bool vec_c, int bm, int bn, char* smem_raw) {
    const int m0 = bm * BM, n0 = bn * BN;
    tma_wgmma::k_loop<T>(tm_a, tm_b, N, K, m0, n0, 0, 0x7fffffff, smem_raw,
                         [&](const float (&acc)[BN / 2], int wg, int wg_thread) {
                             store_acc_64xN<BN>(acc, C, M, N, (long long)m0 + 64 * wg, n0,
                                                wg_thread, alpha, beta, vec_c);
                         });
}

}  // namespace v11

#define V11_ARGS const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b, \
    float* __restrict__ C, int M, int N, int K, float alpha, float beta, int vec_c, int super_m,     \
    int super_n

template <typename T>
__device__ __forceinline__ void v11_entry(const CUtensorMap* tm_a, const CUtensorMap* tm_b,
                                          float* C, int M, int N, int K, float alpha, float beta,
                                          int vec_c, int super_m, int super_n) {
    extern __shared__ char smem[];
    const int grid_m = (M + v11::BM - 1) / v11::BM, grid_n = (N + v11::BN - 1) / v11::BN;
    int bm, bn;
    tile_supertile(blockIdx.x, grid_m, grid_n, super_m, super_n, bm, bn);
    v11::block_tile<T>(tm_a, tm_b, C, M, N, K, alpha, beta, vec_c, bm, bn, smem);
}

extern "C" __global__ void __launch_bounds__(v11::THREADS, 1) v11_wgmma_f16(V11_ARGS) {
    v11_entry<__half>(&tm_a, &tm_b, C, M, N, K, alpha, beta, vec_c, super_m, super_n);
}
extern "C" __global__ void __launch_bounds__(v11::THREADS, 1) v11_wgmma_bf16(V11_ARGS) {
    v11_entry<__nv_bfloat16>(&tm_a, &tm_b, C, M, N, K, alpha, beta, vec_c, super_m, super_n);
}
