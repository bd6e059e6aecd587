// pingpong.cuh - the ping-pong schedule of v12 and v13: one producer warpgroup streams the K
// tiles of a CTA's list of output tiles through one stage ring, and two consumer warpgroups
// take the tiles in turn (consumer 0: tiles 0, 2, 4, ...; consumer 1: tiles 1, 3, 5, ...), each
// computing a whole BM x BN tile. While one consumer's wgmma run, the other stores its tile:
// the epilogue no longer stops the tensor cores.
//
// Tile (-DHG_*, HG_PINGPONG=1): BM x BN x 64 per consumer, 128 x 128 (two m64n128k16 per k16
// step, rows 0-63 and 64-127 of the A box) or 64 x 256 (one m64n256k16): 128 fp32 accumulators
// per thread either way. A stage holds one K tile of one consumer's tile: A (BM x 64) and BN/64
// B panels; the ring runs on across tiles, so the producer fills the next tile's stages while a
// consumer still works on this one.
//
// The order barrier. The ring is shared, so a consumer may only start waiting on full[s] once
// the other consumer has waited on every earlier use of s: a parity wait two phases early
// would pass on the wrong use of the stage. Two named barriers make the turns: consumer c waits
// on bar.sync (1 + c) before its tile's first full[s] wait, and the other consumer arrives on it
// (bar.arrive) right after issuing its tile's last wgmma, before wgmma.wait_group 0. So the
// tensor cores get the next tile's wgmma as soon as the last ones of this tile are queued, and
// the consumer that arrived goes on to wait for its wgmma and store its tile. A consumer arrives
// only when the other has a next tile, so no barrier is left half-arrived at exit.
//
// Barriers: full[s] (1 arrival + the stage's bytes), empty[s] (4 arrivals: lane 0 of each warp
// of the consumer that read the stage). Registers: __launch_bounds__(384, 1) caps every thread
// at 168; setmaxnreg moves them from the producer (40) to the consumers (232):
// 128 * 40 + 256 * 232 = 64,512 <= 65,536. Each role is one branch of one if/else.
// Edges: TMA zero-fills boxes past M and K; B panels wholly right of N are not loaded (their
// stale shared memory reaches only accumulator columns >= N, never stored); the epilogue masks
// edge tiles (store_acc_64). K == 0 is safe: no stage is waited on or released, C = beta C.
//
// Clusters (HG_CLUSTER = 2: v14). The two CTAs of a cluster walk tile lists that differ only in
// the tile row (rank r takes row 2 pm + r of the same column bn), so every stage of one holds
// the same B K-tile as the same stage of the other. CTA r loads B panels r, r + 2, ... with
// .multicast::cluster into both CTAs, and its own A: per stage each CTA reads 16 KB of A and
// half of B from L2 instead of all of it. Each full[s] expects the whole stage (its A, both
// halves of B; the partner's half may land before this CTA's producer armed the phase - the
// transaction count may go negative, which the mbarrier allows). empty[s] counts the consumer
// warps of both CTAs, because a producer's multicast overwrites stage s in both: each consumer
// warp arrives on its own and on its partner's empty[s] (remote arrivals, .release.cta: they
// need only follow the warp's own wgmma reads of the stage, complete at wgmma.wait_group;
// .release.cluster would cost a MEMBAR.ALL.GPU per arrival). A cluster barrier after the
// set-up (no remote arrival before the partner's barriers exist) and one before exit (no CTA
// leaves while its partner may still arrive on its barriers or multicast into it). A CTA whose
// tile row lies past M still runs for its half of B: it loads rows 0.. of A and stores nothing.
#pragma once

#include "wgmma.cuh"
#include "wgmma_tile.cuh"
#include "cluster.cuh"
#include "tensor_map.cuh"

#ifndef HG_CLUSTER
#error "compile with -DHG_CLUSTER (numba_gemm.hgemm._wgmma.WgmmaTile.defines())"
#endif

namespace pingpong {

using namespace wgt;   // BM, BN, BK, STAGES, M64, THREADS, A_BYTES, B_PANEL, STAGE_BYTES (-DHG_*)
constexpr int NB = BN / 8;                 // n8 blocks of a consumer's accumulator rows
constexpr int CLUSTER = HG_CLUSTER;        // CTAs along M sharing B by multicast
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
static_assert(PINGPONG && PRODUCER && THREADS == 384, "a producer and two ping-pong consumers");
static_assert(128 * PRODUCER_REGS + 256 * CONSUMER_REGS <= 65536, "register file");
static_assert(CLUSTER == 1 || (CLUSTER == 2 && BN / 64 >= 2), "B's panels split between 1 or 2 CTAs");

// Named barriers 1 and 2 (0 is __syncthreads), 256 threads each: the 128 of the consumer that
// waits for its turn and the 128 of the one that hands it over.
__device__ __forceinline__ void turn_wait(int c) {
    asm volatile("bar.sync %0, 256;\n" :: "r"(1 + c) : "memory");
}
__device__ __forceinline__ void turn_hand_over(int c) {   // to the other consumer, 1 - c
    asm volatile("bar.arrive %0, 256;\n" :: "r"(2 - c) : "memory");
}

// One k16 step of a consumer's tile: M64 wgmma of 64 x BN (A's row block m is 64 rows =
// 8 swizzle atoms = 8 KB further on).
template <typename T>
__device__ __forceinline__ void wgmma_k16(float (&acc)[M64][4 * NB], u64 desc_a, u64 desc_b) {
    #pragma unroll
    for (int m = 0; m < M64; ++m) {
        if constexpr (BN == 256)
            wgmma_m64n256k16(acc[m], desc_a + ((m * 64 * 128) >> 4), desc_b, T());
        else
            wgmma_m64n128k16(acc[m], desc_a + ((m * 64 * 128) >> 4), desc_b, T());
    }
}

// C = alpha A B + beta C over this CTA's tiles: tiles.count() of them, tile i at
// tiles.get(i, bm, bn) (block coordinates in BM x BN units).
template <typename T, typename Tiles>
__device__ __forceinline__ void run(const CUtensorMap* tm_a, const CUtensorMap* tm_b,
                                    float* __restrict__ C, int M, int N, int K, float alpha,
                                    float beta, bool vec_c, const Tiles& tiles, char* smem_raw) {
    const int tid = threadIdx.x, wg = tid / 128, lane = tid % 32;
    const int count = tiles.count(), k_tiles = (K + BK - 1) / BK;

    const u32 raw = smem_u32(smem_raw);
    const u32 base = (raw + 1023u) & ~1023u;        // swizzle atoms on 1024-byte boundaries
    const u32 full = base + STAGES * STAGE_BYTES;   // full[s] at full + 8s
    const u32 empty = full + STAGES * 8;            // empty[s] at empty + 8s

    if (tid == 0) {
        prefetch_tmap(tm_a);
        prefetch_tmap(tm_b);
        #pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full + 8 * s, 1);
            mbar_init(empty + 8 * s, 4 * CLUSTER);
        }
        fence_barrier_init();
        fence_proxy_async();
    }
    if constexpr (CLUSTER > 1) cluster_sync(); else __syncthreads();

    if (wg == 0) {
        // ---- producer warpgroup: one thread streams every K tile of every tile, in turn order
        setmaxnreg_dec<PRODUCER_REGS>();
        if (tid == 0) {
            u32 it = 0;                             // position in the ring, over all tiles
            for (int i = 0; i < count; ++i) {
                int bm, bn;
                tiles.get(i, bm, bn);
                const int m0 = bm * BM < M ? bm * BM : 0, n0 = bn * BN;   // (a row past M: any box)
                const int b_panels = min(BN / 64, (N - n0 + 63) / 64);
                const u32 stage_tx = A_BYTES + b_panels * B_PANEL;       // own A + all of B
                for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                    const u32 s = it % STAGES, st = base + s * STAGE_BYTES, bar = full + 8 * s;
                    // the (it / STAGES)-th refill of stage s needs its previous use released
                    if (it >= STAGES) mbar_wait(empty + 8 * s, ((it / STAGES) - 1) & 1);
                    mbar_arrive_expect_tx(bar, stage_tx);
                    tma_load_2d(st, tm_a, kt * BK, m0, bar);
                    if constexpr (CLUSTER == 1) {
                        for (int p = 0; p < b_panels; ++p)
                            tma_load_2d(st + A_BYTES + p * B_PANEL, tm_b, n0 + 64 * p, kt * BK, bar);
                    } else {
                        for (int p = cluster_ctarank(); p < b_panels; p += CLUSTER)
                            tma_load_2d_multicast(st + A_BYTES + p * B_PANEL, tm_b, n0 + 64 * p,
                                                  kt * BK, bar, (1u << CLUSTER) - 1);
                    }
                }
            }
        }
    } else {
        // ---- consumer warpgroups 1, 2: every other tile, a whole tile each
        setmaxnreg_inc<CONSUMER_REGS>();
        const int c = wg - 1;
        const u64 desc_a0 = smem_desc_sw128(base, 16, 1024);
        const u64 desc_b0 = smem_desc_sw128(base + A_BYTES, B_PANEL, 1024);
        auto release = [&](u32 s) {     // every producer that writes stage s may refill it
            if (lane == 0) {
                if constexpr (CLUSTER == 1) {
                    mbar_arrive(empty + 8 * s);
                } else {
                    #pragma unroll
                    for (u32 r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(empty + 8 * s, r);
                }
            }
        };
        float acc[M64][4 * NB];
        for (int i = c; i < count; i += 2) {
            int bm, bn;
            tiles.get(i, bm, bn);
            #pragma unroll
            for (int m = 0; m < M64; ++m)
                #pragma unroll
                for (int j = 0; j < 4 * NB; ++j) acc[m][j] = 0.0f;
            if (i > 0) turn_wait(c);
            u32 it = (u32)i * (u32)k_tiles;         // the ring position of this tile's first K tile
            for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                const u32 s = it % STAGES;
                mbar_wait(full + 8 * s, (it / STAGES) & 1);
                const u64 so = (u64)((s * STAGE_BYTES) >> 4);
                wgmma_fence();
                #pragma unroll
                for (int kk = 0; kk < 4; ++kk)      // A: +32 bytes per k16; B: +16 rows = 2048 bytes
                    wgmma_k16<T>(acc, desc_a0 + so + ((kk * 32) >> 4), desc_b0 + so + ((kk * 2048) >> 4));
                wgmma_commit();
                wgmma_wait<1>();                    // the previous stage's wgmma have read it
                if (kt > 0) release((it - 1) % STAGES);
            }
            if (i + 1 < count) turn_hand_over(c);   // last wgmma issued: the other consumer's turn
            wgmma_wait<0>();
            if (k_tiles > 0) release((it - 1) % STAGES);
            #pragma unroll
            for (int m = 0; m < M64; ++m)
                store_acc_64<NB>(acc[m], C, M, N, (long long)bm * BM + 64 * m, (long long)bn * BN,
                                 tid % 128, alpha, beta, vec_c);
        }
    }
    if constexpr (CLUSTER > 1) cluster_sync();
}

}  // namespace pingpong
