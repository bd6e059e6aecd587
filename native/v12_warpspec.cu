// v12 = v11 + warp specialisation: a producer warpgroup that only loads, two consumer
// warpgroups that only multiply, and setmaxnreg moving registers from the first to the others.
//
// C (M x N, fp32) = alpha * A (M x K) @ B (K x N) + beta * C; A, B fp16 or bf16, row-major.
//
// Tile: 128 x 256 x 64, 4 stages of 48 KB (v11's), 384 threads = 3 warpgroups:
//   warpgroup 0, the producer: one thread loops over the K tiles, waits until empty[s] says
//     both consumers released stage s, announces the stage's bytes on full[s] and issues the
//     TMA boxes (A 128 x 64, B up to 4 panels of 64 x 64). It never multiplies, so the stage
//     pipeline runs STAGES deep (v11's producer, which also computed, refilled 2 behind).
//   warpgroups 1 and 2, the consumers: rows 0-63 and 64-127 of the tile, v11's loop: wait
//     full[s], fence, 4 x wgmma m64n256k16, commit, wait_group 1, release the previous stage.
// Registers: __launch_bounds__(384, 1) caps every thread at 168 at entry (65536 / 384, rounded
// down to 8). The producer needs few: setmaxnreg.dec to PRODUCER_REGS; each consumer takes
// setmaxnreg.inc to CONSUMER_REGS (128 accumulators + descriptors, addresses, epilogue):
// 128 * 40 + 256 * 232 = 64,512 <= 65,536. Each role is one branch of a single if/else, as
// setmaxnreg requires (ptxas warns C7508 when it has to ignore it; the tests read the log).
//
// Barriers: full[s] (1 arrival + transaction bytes), empty[s] (8 arrivals: lane 0 of each
// consumer warp). The first pass over the stages does not wait on empty.
// Edges as in v10/v11: TMA zero-fills boxes past M and K; B panels wholly right of N are not
// loaded (stale shared memory reaches only accumulator columns >= N, never stored).
#include "wgmma.cuh"
#include "wgmma_tile.cuh"
#include "tensor_map.cuh"
#include "tile_order.cuh"

namespace v12 {

using namespace wgt;   // BM, BN, BK, STAGES, CONSUMERS, THREADS, A_BYTES, B_PANEL, STAGE_BYTES (-DHG_*)
constexpr int CONSUMER_WARPS = 4 * CONSUMERS;
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
static_assert(PRODUCER, "warpgroup 0 is the producer");
static_assert(BN == 256, "written for 64 x 256 per consumer (acc[128], store_acc_64x256)");
static_assert(128 * PRODUCER_REGS + 128 * CONSUMERS * CONSUMER_REGS <= 65536, "register file");

template <typename T>
__device__ __forceinline__ void block_tile(const CUtensorMap* tm_a, const CUtensorMap* tm_b,
                                           float* __restrict__ C, int M, int N, int K, float alpha,
                                           float beta, bool vec_c, int bm, int bn, char* smem_raw) {
    const int tid = threadIdx.x, lane = tid % 32;
    const int wg = warpgroup_index();
    const int m0 = bm * BM, n0 = bn * BN;

    const u32 raw = smem_u32(smem_raw);
    const u32 base = (raw + 1023u) & ~1023u;
    const u32 full = base + STAGES * STAGE_BYTES;
    const u32 empty = full + STAGES * 8;

    if (tid == 0) init_stage_ring<STAGES>(tm_a, tm_b, full, empty, CONSUMER_WARPS);
    __syncthreads();
    // a dependent launch: the set-up above may run beside the previous kernel's last CTAs,
    // nothing global is touched before it has finished
    wait_for_previous_grid();
    let_next_grid_start();

    const int k_tiles = (K + BK - 1) / BK;
    if (wg == 0) {
        // ---- producer warpgroup
        setmaxnreg_dec<PRODUCER_REGS>();
        if (tid == 0) {
            const int b_panels = min(BN / 64, (N - n0 + 63) / 64);
            const u32 stage_tx = A_BYTES + b_panels * B_PANEL;
            for (int f = 0; f < k_tiles; ++f) {
                const int s = f % STAGES;
                // the (f / STAGES)-th refill of stage s needs its previous tile released
                if (f >= STAGES) mbar_wait(empty + 8 * s, ((f / STAGES) - 1) & 1);
                const u32 st = base + s * STAGE_BYTES, bar = full + 8 * s;
                mbar_arrive_expect_tx(bar, stage_tx);
                tma_load_2d(st, tm_a, f * BK, m0, bar);
                for (int p = 0; p < b_panels; ++p)
                    tma_load_2d(st + A_BYTES + p * B_PANEL, tm_b, n0 + 64 * p, f * BK, bar);
            }
        }
    } else {
        // ---- consumer warpgroups 1, 2: rows 64 (wg - 1) .. + 63 of the tile
        setmaxnreg_inc<CONSUMER_REGS>();
        const int c = wg - 1;
        float acc[128];
        #pragma unroll
        for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
        const u64 desc_a0 = smem_desc_sw128(base + c * 64 * 128, 16, 1024);
        const u64 desc_b0 = smem_desc_sw128(base + A_BYTES, B_PANEL, 1024);
        for (int kt = 0; kt < k_tiles; ++kt) {
            const int s = kt % STAGES;
            mbar_wait(full + 8 * s, (kt / STAGES) & 1);
            const u64 so = (u64)((s * STAGE_BYTES) >> 4);
            wgmma_k64<T>(acc, desc_a0 + so, desc_b0 + so);
            wgmma_wait<1>();                   // stage kt-1's wgmma have read their operands
            if (kt > 0 && lane == 0) mbar_arrive(empty + 8 * ((kt - 1) % STAGES));
        }
        wgmma_wait<0>();
        store_acc_64x256(acc, C, M, N, (long long)m0 + 64 * c, n0, tid % 128, alpha, beta, vec_c);
    }
}

}  // namespace v12

#define V12_ARGS const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b, \
    float* __restrict__ C, int M, int N, int K, float alpha, float beta, int vec_c, int super_m,     \
    int super_n

template <typename T>
__device__ __forceinline__ void v12_entry(const CUtensorMap* tm_a, const CUtensorMap* tm_b,
                                          float* C, int M, int N, int K, float alpha, float beta,
                                          int vec_c, int super_m, int super_n) {
    extern __shared__ char smem[];
    const int grid_m = (M + v12::BM - 1) / v12::BM, grid_n = (N + v12::BN - 1) / v12::BN;
    int bm, bn;
    tile_supertile(blockIdx.x, grid_m, grid_n, super_m, super_n, bm, bn);
    v12::block_tile<T>(tm_a, tm_b, C, M, N, K, alpha, beta, vec_c, bm, bn, smem);
}

extern "C" __global__ void __launch_bounds__(v12::THREADS, 1) v12_warpspec_f16(V12_ARGS) {
    v12_entry<__half>(&tm_a, &tm_b, C, M, N, K, alpha, beta, vec_c, super_m, super_n);
}
extern "C" __global__ void __launch_bounds__(v12::THREADS, 1) v12_warpspec_bf16(V12_ARGS) {
    v12_entry<__nv_bfloat16>(&tm_a, &tm_b, C, M, N, K, alpha, beta, vec_c, super_m, super_n);
}
