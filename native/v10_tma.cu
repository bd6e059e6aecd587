// v10 = v9 with loads by TMA and an mbarrier pipeline instead of cp.async + __syncthreads - and
// a bigger tile. v10 changes two things:
//   1. loads and synchronisation: one thread issues TMA copies (cp.async.bulk.tensor.2d) and
//      per-stage full/empty mbarriers replace the block-wide barrier;
//   2. tile: 128 x 256 x 64 with 4 stages and 8 warps (2 x 4) of 64 x 64, one block per SM,
//      instead of v9's 128 x 128 x 64, 3 stages, 4 warps, two blocks per SM (with TMA doing the
//      loads this is the tile sweep's best for v10; on v9's tile TMA is worth less).
// The tile order (super-tiles, tile_order.cuh), the ldmatrix/mma code (mma_stage.cuh) and the
// epilogue (epilogue.cuh) are v9's, unchanged.
//
// C (M x N, fp32) = alpha * A (M x K) @ B (K x N) + beta * C; A, B fp16 or bf16, row-major.
//
// Shipped tile (numba_gemm/hgemm/v10_tma.py CONFIG, -DHG_* options, tile_config.cuh): 128 x 256
// x 64, 4 stages of 48 KB (197,696 bytes of dynamic shared memory with the alignment slack and
// the barriers), 256 threads = 8 warps as 2 (m) x 4 (n), each warp 64 x 64 of C.
//
// One thread (tid 0) issues, per stage, one TMA for the BM x 64 A box and one per 64 x 64 B
// panel (up to BN/64). TMA writes them with SWIZZLE_128B, byte for byte the layout v9 wrote with
// cp.async, so the ldmatrix/mma code is unchanged; it also zero-fills whatever part of a box
// lies outside the matrix, so there is no edge code in the loads. Each stage has two mbarriers:
//   full[s]  (1 arrival + transaction bytes): tid 0 arrives with expect_tx(bytes of the stage);
//            TMA completes the bytes; the phase flips when the whole stage has landed.
//   empty[s] (one arrival per warp): lane 0 of each warp arrives when the warp has read the stage.
// There is no __syncthreads in the K loop: a warp waits only for the stage it is about to read,
// and the producer waits only for the stage it is about to overwrite.
//
// Refill distance (-DHG_TMA_LAG, shipped 2): at iteration kt tid 0 refills the stage read at
// kt-2 (tile kt+STAGES-2), not the one read at kt-1: the other warps have long finished kt-2,
// so the producer (which also computes, in warp 0) practically never waits, and two tiles are
// in flight ahead of the one being multiplied (STAGES = 4). HG_TMA_LAG=1 refills the stage read
// at kt-1 instead: one more tile in flight, but warp 0 then waits for the slowest warp's kt-1.
//
// The tensor maps are built on the host (numba_gemm.runtime.tma) and passed by value as
// __grid_constant__ parameters (tensor_map.cuh). Requirements (checked on the host before
// launch): 16-byte aligned base, rows a multiple of 16 bytes (K % 8 == 0 and N % 8 == 0 for
// 2-byte types), inner box exactly 128 bytes (the swizzle span the XOR walk assumes).
#include "ptx.cuh"
#include "tile_config.cuh"
#include "mma_stage.cuh"
#include "epilogue.cuh"
#include "tile_order.cuh"
#include "tensor_map.cuh"

#ifndef HG_TMA_LAG
#error "compile with -DHG_TMA_LAG (numba_gemm.hgemm._common.TileConfig.defines(tma=True))"
#endif

namespace hg {

constexpr int TMA_LAG = HG_TMA_LAG;
static_assert(TMA_LAG >= 1 && TMA_LAG < STAGES, "refill a stage read 1..STAGES-1 iterations ago");
static_assert(BM <= 256, "A is loaded as one box of BM rows (TMA boxes are at most 256)");

// Dynamic shared memory the host must give: STAGES * STAGE_BYTES + 1024 (alignment slack)
// + the barriers (2 * STAGES * 8 bytes).

template <typename T>
__device__ __forceinline__ void block_tile_tma(const CUtensorMap* tm_a, const CUtensorMap* tm_b,
                                               float* __restrict__ C, int M, int N, int K,
                                               float alpha, float beta, bool vec_c, int bm, int bn,
                                               char* smem_raw) {
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
    const int m0 = bm * BM, n0 = bn * BN;

    // SWIZZLE_128B boxes must start on 1024-byte boundaries; stages are STAGE_BYTES apart.
    const u32 raw = smem_u32(smem_raw);
    const u32 base = (raw + 1023u) & ~1023u;
    const u32 full = base + STAGES * STAGE_BYTES;   // full[s] at full + 8s
    const u32 empty = full + STAGES * 8;            // empty[s] at empty + 8s

    // B panels wholly right of N are not loaded: their columns are never stored, and only
    // those columns read them. Fewer bytes, and no box that lies entirely outside the tensor.
    const int b_panels = min(BN / 64, (N - n0 + 63) / 64);
    const u32 stage_tx = A_BYTES + b_panels * B_PANEL;

    if (tid == 0) init_stage_ring<STAGES>(tm_a, tm_b, full, empty, THREADS / 32);
    __syncthreads();

    const int k_tiles = (K + BK - 1) / BK;
    // [excerpt:v10-pipeline]
    auto issue = [&](int f) {   // tid 0 only: load K tile f into stage f % STAGES
        const int s = f % STAGES;
        const u32 st = base + s * STAGE_BYTES, bar = full + 8 * s;
        mbar_arrive_expect_tx(bar, stage_tx);
        tma_load_2d(st, tm_a, f * BK, m0, bar);
        for (int p = 0; p < b_panels; ++p)
            tma_load_2d(st + A_BYTES + p * B_PANEL, tm_b, n0 + 64 * p, f * BK, bar);
    };

    if (tid == 0)
        for (int f = 0; f < STAGES - TMA_LAG && f < k_tiles; ++f) issue(f);

    float acc[MT][NT][4];
    zero_acc(acc);

    const u32 a_lane = a_lane_offset(warp_m, lane), b_lane = b_lane_offset(warp_n, lane);

    for (int kt = 0; kt < k_tiles; ++kt) {
        if (tid == 0) {
            const int f = kt + STAGES - TMA_LAG;
            if (f < k_tiles) {
                // the (f / STAGES)-th fill of its stage needs the previous read of it released
                if (f >= STAGES) mbar_wait(empty + 8 * (f % STAGES), ((f / STAGES) - 1) & 1);
                issue(f);
            }
        }
        __syncwarp();
        const int s = kt % STAGES;
        mbar_wait(full + 8 * s, (kt / STAGES) & 1);
        const u32 st = base + s * STAGE_BYTES;
        mma_stage<T>(acc, st + a_lane, st + b_lane);
        __syncwarp();                      // every lane's ldmatrix of stage s is done
        if (lane == 0) mbar_arrive(empty + 8 * s);
    }
    // [/excerpt]

    store_tile(acc, C, M, N, m0, n0, warp_m, warp_n, lane, alpha, beta, vec_c);
}

}  // namespace hg

#define V10_ARGS const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b, \
    float* __restrict__ C, int M, int N, int K, float alpha, float beta, int vec_c, int super_m,     \
    int super_n

template <typename T>
__device__ __forceinline__ void v10_entry(const CUtensorMap* tm_a, const CUtensorMap* tm_b,
                                          float* C, int M, int N, int K, float alpha, float beta,
                                          int vec_c, int super_m, int super_n) {
    extern __shared__ char smem[];
    const int grid_m = (M + hg::BM - 1) / hg::BM, grid_n = (N + hg::BN - 1) / hg::BN;
    int bm, bn;
    tile_supertile(blockIdx.x, grid_m, grid_n, super_m, super_n, bm, bn);
    hg::block_tile_tma<T>(tm_a, tm_b, C, M, N, K, alpha, beta, vec_c, bm, bn, smem);
}

extern "C" __global__ void __launch_bounds__(hg::THREADS, hg::MIN_BLOCKS) v10_tma_f16(V10_ARGS) {
    v10_entry<__half>(&tm_a, &tm_b, C, M, N, K, alpha, beta, vec_c, super_m, super_n);
}
#ifndef HG_NO_BF16
extern "C" __global__ void __launch_bounds__(hg::THREADS, hg::MIN_BLOCKS) v10_tma_bf16(V10_ARGS) {
    v10_entry<__nv_bfloat16>(&tm_a, &tm_b, C, M, N, K, alpha, beta, vec_c, super_m, super_n);
}
#endif
