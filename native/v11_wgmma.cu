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
#include "wgmma.cuh"
#include "wgmma_tile.cuh"
#include "tensor_map.cuh"
#include "tile_order.cuh"

#ifndef HG_TMA_LAG
#error "compile with -DHG_TMA_LAG (numba_gemm.hgemm._wgmma.WgmmaTile.defines())"
#endif

namespace v11 {

using namespace wgt;   // BM, BN, BK, STAGES, THREADS, A_BYTES, B_PANEL, STAGE_BYTES (-DHG_*)
constexpr int TMA_LAG = HG_TMA_LAG, WARPS = THREADS / 32;
static_assert(!PRODUCER, "thread 0 loads and computes: no producer warpgroup");
static_assert(TMA_LAG >= 1 && TMA_LAG < STAGES, "refill a stage read 1..STAGES-1 iterations ago");
static_assert(TMA_LAG >= 2, "the stage read at kt-1 is released only after wait_group 1 at kt");

template <typename T>
__device__ __forceinline__ void block_tile(const CUtensorMap* tm_a, const CUtensorMap* tm_b,
                                           float* __restrict__ C, int M, int N, int K, float alpha,
                                           float beta, bool vec_c, int bm, int bn, char* smem_raw) {
    const int tid = threadIdx.x, lane = tid % 32, wg = tid / 128;
    const int m0 = bm * BM, n0 = bn * BN;

    const u32 raw = smem_u32(smem_raw);
    const u32 base = (raw + 1023u) & ~1023u;        // swizzle atoms on 1024-byte boundaries
    const u32 full = base + STAGES * STAGE_BYTES;   // full[s] at full + 8s
    const u32 empty = full + STAGES * 8;            // empty[s] at empty + 8s

    const int b_panels = min(BN / 64, (N - n0 + 63) / 64);
    const u32 stage_tx = A_BYTES + b_panels * B_PANEL;

    if (tid == 0) {
        prefetch_tmap(tm_a);
        prefetch_tmap(tm_b);
        #pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full + 8 * s, 1);
            mbar_init(empty + 8 * s, WARPS);
        }
        fence_barrier_init();
        fence_proxy_async();
    }
    __syncthreads();

    const int k_tiles = (K + BK - 1) / BK;
    auto issue = [&](int f) {   // tid 0 only: K tile f into stage f % STAGES
        const int s = f % STAGES;
        const u32 st = base + s * STAGE_BYTES, bar = full + 8 * s;
        mbar_arrive_expect_tx(bar, stage_tx);
        tma_load_2d(st, tm_a, f * BK, m0, bar);
        for (int p = 0; p < b_panels; ++p)
            tma_load_2d(st + A_BYTES + p * B_PANEL, tm_b, n0 + 64 * p, f * BK, bar);
    };
    if (tid == 0)
        for (int f = 0; f < STAGES - TMA_LAG && f < k_tiles; ++f) issue(f);

    float acc[128];
    #pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;

    // Descriptors of stage 0 for this warpgroup; stage s adds its byte offset >> 4 to the start
    // address field (bits 0-13; no carry out: shared addresses < 256 KB).
    const u64 desc_a0 = smem_desc_sw128(base + wg * 64 * 128, 16, 1024);
    const u64 desc_b0 = smem_desc_sw128(base + A_BYTES, B_PANEL, 1024);

    for (int kt = 0; kt < k_tiles; ++kt) {
        if (tid == 0) {
            const int f = kt + STAGES - TMA_LAG;
            if (f < k_tiles) {
                if (f >= STAGES) mbar_wait(empty + 8 * (f % STAGES), ((f / STAGES) - 1) & 1);
                issue(f);
            }
        }
        __syncwarp();
        const int s = kt % STAGES;
        mbar_wait(full + 8 * s, (kt / STAGES) & 1);
        const u64 so = (u64)((s * STAGE_BYTES) >> 4);
        wgmma_k64<T>(acc, desc_a0 + so, desc_b0 + so);   // fence, 4 wgmma, commit
        wgmma_wait<1>();                   // stage kt-1's wgmma have read their operands
        if (kt > 0 && lane == 0) mbar_arrive(empty + 8 * ((kt - 1) % STAGES));
    }
    wgmma_wait<0>();

    store_acc_64x256(acc, C, M, N, (long long)m0 + 64 * wg, n0, tid % 128, alpha, beta, vec_c);
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
