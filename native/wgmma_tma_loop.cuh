// wgmma_tma_loop.cuh - v11's K loop, shared by v11 (all of K) and v11sk (one K slice): a
// BM x BN block tile, thread 0 issuing the TMA loads while it computes, BM / 64 warpgroups
// each accumulating its 64 x BN with wgmma (BN / 2 fp32 per thread); the accumulators are left
// in registers for the level's epilogue.
//
// Per stage a warpgroup waits full[s] -> wgmma.fence -> 4 wgmma (k = 0, 16, 32, 48) ->
// commit_group -> wait_group 1 (the previous stage's group is done, this one keeps running) ->
// lane 0 of each warp arrives on empty[previous stage]. Thread 0 refills the stage read
// TMA_LAG iterations ago. Edges: TMA zero-fills boxes past M and K; B panels wholly right of N
// are not loaded (their stale shared memory only reaches accumulator columns >= N, which the
// epilogue never stores: column n of D reads only column n of B).
#pragma once

#include "wgmma.cuh"
#include "wgmma_tile.cuh"
#include "tensor_map.cuh"

#ifndef HG_TMA_LAG
#error "compile with -DHG_TMA_LAG (numba_gemm.hgemm._wgmma.WgmmaTile.defines())"
#endif

namespace tma_wgmma {

using namespace wgt;   // BM, BN, BK, STAGES, THREADS, A_BYTES, B_PANEL, STAGE_BYTES (-DHG_*)
constexpr int TMA_LAG = HG_TMA_LAG, WARPS = THREADS / 32;
static_assert(!PRODUCER, "thread 0 loads and computes: no producer warpgroup");
static_assert(TMA_LAG >= 1 && TMA_LAG < STAGES, "refill a stage read 1..STAGES-1 iterations ago");
static_assert(TMA_LAG >= 2, "the stage read at kt-1 is released only after wait_group 1 at kt");

// acc (this warpgroup's rows m0 + 64 wg .. + 63, columns n0 .. n0 + BN - 1) = the product over K
// tiles kt0 .. min(kt0 + per, ceil(K / 64)) - 1 (BK = 64 each), then epilogue(acc, wg,
// thread in warpgroup); v11: kt0 = 0, per = INT_MAX. An empty range gives zeros. (The
// accumulators stay local here and the epilogue is a callback: returning them through a
// reference, or an unsigned thread index, changed v11's SASS.)
template <typename T, typename Epilogue>
__device__ __forceinline__ void k_loop(const CUtensorMap* tm_a, const CUtensorMap* tm_b, int N,
                                       int K, int m0, int n0, int kt0, int per, char* smem_raw,
                                       Epilogue epilogue) {
    const int tid = threadIdx.x, lane = tid % 32;
    const int wg = warpgroup_index();

    const u32 raw = smem_u32(smem_raw);
    const u32 base = (raw + 1023u) & ~1023u;        // swizzle atoms on 1024-byte boundaries
    const u32 full = base + STAGES * STAGE_BYTES;   // full[s] at full + 8s
    const u32 empty = full + STAGES * 8;            // empty[s] at empty + 8s

    const int b_panels = min(BN / 64, (N - n0 + 63) / 64);
    const u32 stage_tx = A_BYTES + b_panels * B_PANEL;

    if (tid == 0) init_stage_ring<STAGES>(tm_a, tm_b, full, empty, WARPS);
    __syncthreads();
    // a dependent launch: the set-up above may run beside the previous kernel's last CTAs,
    // nothing global is touched before it has finished
    wait_for_previous_grid();
    let_next_grid_start();

    const int k_tiles = min(per, (K + BK - 1) / BK - kt0);
    auto issue = [&](int f) {   // tid 0 only: K tile kt0 + f into stage f % STAGES
        const int s = f % STAGES;
        const u32 st = base + s * STAGE_BYTES, bar = full + 8 * s;
        const int k = (kt0 + f) * BK;               // kt0 + f < ceil(K / 64): k < K < 2^31
        mbar_arrive_expect_tx(bar, stage_tx);
        tma_load_2d(st, tm_a, k, m0, bar);
        for (int p = 0; p < b_panels; ++p)
            tma_load_2d(st + A_BYTES + p * B_PANEL, tm_b, n0 + 64 * p, k, bar);
    };
    if (tid == 0)
        for (int f = 0; f < STAGES - TMA_LAG && f < k_tiles; ++f) issue(f);

    float acc[BN / 2];
    #pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;

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
        wgmma_k64<T, BN>(acc, desc_a0 + so, desc_b0 + so);   // fence, 4 wgmma, commit
        wgmma_wait<1>();                   // stage kt-1's wgmma have read their operands
        if (kt > 0 && lane == 0) mbar_arrive(empty + 8 * ((kt - 1) % STAGES));
    }
    wgmma_wait<0>();
    epilogue(acc, wg, tid % 128);
}

}  // namespace tma_wgmma
