// v13 = v12 + a persistent grid of 2-CTA clusters: each cluster loops over pairs of output
// tiles in super-tile order, the pair's shared B tile is loaded once and multicast to both.
//
// C (M x N, fp32, or -DHG_C16=1: A's type) = alpha * A (M x K) @ B (K x N) + beta * C; A, B fp16
// or bf16, row-major.
//
// Per CTA: v12's 128 x 256 x 64 tile, 4 stages of 48 KB, a producer warpgroup (setmaxnreg 40)
// and two wgmma consumer warpgroups (setmaxnreg 232); or, from -DHG_*, a tile of 128 x 128 (or
// 64 rows: one consumer), for shapes whose 128 x 256 tiles leave SMs idle. What changes:
//  - Persistent: the host launches as many clusters as can be resident at once (at most one
//    CTA per SM); cluster c computes pair-tiles c, c + G, c + 2G, ... (G clusters), each
//    pair-tile decoded by v9's super-tile order over the grid of pairs. The stage ring and its
//    phases run on across tiles, so the producer is already loading the next tile's first
//    stages while the consumers store this tile's C: the epilogue overlaps the loads, and no
//    block launch / barrier set-up / pipeline fill separates one tile from the next.
//  - Cluster of 2 along M: CTA rank r computes tile (2 pm + r, bn); both need the same B tile
//    (BN columns = BN / 64 panels of 64). CTA r loads panels r, r + 2, ... with
//    .multicast::cluster to both CTAs and its own A box: per stage each CTA reads half of the B
//    tile from L2 (at 128 x 256: 16 KB of A + 16 KB of B instead of 16 + 32 KB), and each of
//    its full[s] barriers expects the whole stage.
//  - empty[s] now counts the consumer warps of BOTH CTAs (16 arrivals: each warp arrives on
//    its own CTA's and on its partner's barrier), because a producer's multicast overwrites
//    stage s in both CTAs. The remote arrivals are .release.cta (cluster.cuh says why that is
//    enough). The partner's multicast may complete its bytes on full[s] before this CTA's
//    producer has armed the phase with expect_tx: the transaction count goes negative for a
//    while, which the mbarrier allows (PTX ISA, "tx-count" range), and the phase cannot
//    complete until the local arrival comes.
//  - A cluster barrier after the barrier set-up (no remote arrival before the partner's
//    barriers exist), its arrival .relaxed (the set-up is fenced to the cluster already, and a
//    .release arrival is a GPU-wide fence), and none at the end: the producer leaves only once
//    every consumer of the cluster has released the last fill of each stage, so no remote
//    arrival can reach a CTA that has left (a CTA lives until all of its threads have). A
//    barrier there cost 2.4 of 17.3 us at 4096 x 128 x 4096 on an H100: its arrival (.release,
//    MEMBAR.ALL.GPU) waits for the CTA's C stores to land before the CTA may leave
//    (docs/RESULTS.md).
//  - -DHG_CLUSTER_N=1 turns the pair to run along N: CTA rank r computes tile (bm, 2 pn + r),
//    both need the same A tile, and CTA r loads rows r BM/2 .. of it (A's tensor map has boxes
//    of BM/2 rows) with .multicast::cluster to both, and all of its own B. For narrow N, where
//    A is the big operand: at 4096 x 128 x 4096 the B-sharing pair read 154 MB through L2 where
//    cuBLAS, its pair along N, read 85 MB (ncu on an H100, docs/RESULTS.md).
//  - -DHG_CLUSTER=4 is both at once, a 2 x 2 cluster: CTA rank r computes tile (2 pm + r % 2,
//    2 pn + r / 2); the two CTAs of a tile row share its A (half of the rows each), the two of a
//    tile column its B (half of the panels each), so each operand comes from L2 half as often
//    as without a cluster. Every consumer warp releases a stage on all four CTAs' empty[s].
// Edges: a cluster's tile below M (grid_m odd) or right of N still runs its CTA, which must
// deliver its half of the shared operand: below M it loads rows 0.. of A (any in-bounds box),
// right of N no B (nor does its partner in that column), and it stores nothing. Otherwise as
// v10-v12: zero-filled boxes, unloaded panels right of N, masked epilogue.
#include "wgmma.cuh"
#include "wgmma_tile.cuh"
#include "cluster.cuh"
#include "tensor_map.cuh"
#include "tile_order.cuh"

#ifndef HG_CLUSTER             // CTAs per cluster: 1 (no multicast), 2 (a pair) or 4 (2 x 2)
#error "compile with -DHG_CLUSTER (numba_gemm.hgemm.v13_persistent.defines())"
#endif
#ifndef HG_CLUSTER_N           // 1: the pair runs along N and shares A; 0: along M, sharing B
#error "compile with -DHG_CLUSTER_N (numba_gemm.hgemm.v13_persistent.defines())"
#endif
#ifndef HG_TMA_STORE           // 1: C through shared memory and TMA stores when beta == 0
#error "compile with -DHG_TMA_STORE (numba_gemm.hgemm.v13_persistent.defines())"
#endif
#ifndef HG_C16                 // 1: C in the inputs' fp16 / bf16 (c_element.cuh); 0: fp32
#error "compile with -DHG_C16 (numba_gemm.hgemm.v13_persistent.defines())"
#endif

namespace v13 {

using namespace wgt;   // BM, BN, BK, STAGES, CONSUMERS, THREADS, A_BYTES, B_PANEL, STAGE_BYTES (-DHG_*)
constexpr int CLUSTER = HG_CLUSTER;
// CM CTAs along M share each B tile, CN CTAs along N share each A tile: CTA rank r is (r % CM, r / CM)
constexpr int CM = CLUSTER == 4 ? 2 : HG_CLUSTER_N ? 1 : CLUSTER, CN = CLUSTER / CM;
constexpr bool TMA_STORE = HG_TMA_STORE != 0, C16 = HG_C16 != 0;
constexpr u32 C_BOX_BYTES = 64 * 128;                         // 64 rows x 128 bytes of C
constexpr u32 C_BYTES = TMA_STORE ? CONSUMERS * 2 * C_BOX_BYTES : 0;   // two boxes per consumer
static_assert(CLUSTER == 1 || CLUSTER == 2 || CLUSTER == 4, "1, 2 or 2 x 2 CTAs");
static_assert(!HG_CLUSTER_N || CLUSTER == 2, "along N the pair shares A: two CTAs");
constexpr u32 A_SHARE = A_BYTES / CN;                         // the A rows one CTA loads
constexpr int CONSUMER_WARPS = 4 * CONSUMERS;
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
static_assert(PRODUCER, "warpgroup 0 is the producer");
static_assert(128 * PRODUCER_REGS + 128 * CONSUMERS * CONSUMER_REGS <= 65536, "register file");

// The tile (bm, bn) of CTA `rank` for cluster-tile t of the cluster-tiles' grid (pairs_m x pairs_n).
__device__ __forceinline__ void tile_of(int t, int pairs_m, int pairs_n, int super_m, int super_n,
                                        u32 rank, int& bm, int& bn) {
    tile_supertile(t, pairs_m, pairs_n, super_m, super_n, bm, bn);
    bm = CM * bm + rank % CM;
    bn = CN * bn + rank / CM;
}

template <typename T>
__device__ __forceinline__ void persistent(const CUtensorMap* tm_a, const CUtensorMap* tm_b,
                                           const CUtensorMap* tm_c, void* C_raw, int M,
                                           int N, int K, float alpha, float beta, bool vec_c,
                                           bool tma_c, int super_m, int super_n, char* smem_raw) {
    const int tid = threadIdx.x, lane = tid % 32;
    const int wg = warpgroup_index();
    const u32 rank = cluster_ctarank();
    const int first = cluster_id_x(), step = cluster_count_x();
    const int grid_m = (M + BM - 1) / BM, grid_n = (N + BN - 1) / BN;
    const int pairs_m = (grid_m + CM - 1) / CM, pairs_n = (grid_n + CN - 1) / CN, tiles = pairs_m * pairs_n;
    const int k_tiles = (K + BK - 1) / BK;
    using CT = typename c_type<C16, T>::type;
    CT* __restrict__ C = static_cast<CT*>(C_raw);

    // Same offsets in both CTAs (same kernel, same dynamic size): multicast and mapa rely on it.
    const u32 raw = smem_u32(smem_raw);
    const u32 base = (raw + 1023u) & ~1023u;
    const u32 cbuf = base + STAGES * STAGE_BYTES;    // the epilogue's boxes (HG_TMA_STORE)
    const u32 full = cbuf + C_BYTES;
    const u32 empty = full + STAGES * 8;
    tma_c = TMA_STORE && tma_c && beta == 0.0f;      // beta != 0 reads C: the register epilogue

    if (tid == 0) init_stage_ring<STAGES>(tm_a, tm_b, full, empty, CLUSTER * CONSUMER_WARPS);
    cluster_sync_after_init();
    // launched with programmatic dependent launch: the set-up above may run beside the previous
    // kernel's last CTAs, nothing global is touched before it has finished
    wait_for_previous_grid();
    let_next_grid_start();

    if (wg == 0) {
        // ---- producer warpgroup: one thread streams every stage of every tile of this CTA
        setmaxnreg_dec<PRODUCER_REGS>();
        if (tid == 0) {
            const u32 rm = rank % CM, rn = rank / CM;
            const unsigned short a_mask = CN == 1 ? 0 : (1u << rm) | (1u << (rm + CM));   // the CTAs of this A tile
            const unsigned short b_mask = CM == 1 ? 0 : 3u << (CM * rn);                   // the CTAs of this B tile
            // fill f of the ring may go into stage f % STAGES once every consumer of the cluster
            // has released fill f - STAGES
            auto wait_empty = [&](int f) {
                if (f >= STAGES) mbar_wait(empty + 8 * (f % STAGES), ((f / STAGES) - 1) & 1);
            };
            int it = 0;
            for (int t = first; t < tiles; t += step) {
                int bm, bn;
                tile_of(t, pairs_m, pairs_n, super_m, super_n, rank, bm, bn);
                const int n0 = bn * BN, a_row = bm < grid_m ? bm * BM : 0;
                const int b_panels = bn < grid_n ? min(BN / 64, (N - n0 + 63) / 64) : 0;
                const u32 stage_tx = A_BYTES + b_panels * B_PANEL;   // both CTAs' share + own
                for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                    const int s = it % STAGES;
                    wait_empty(it);
                    const u32 st = base + s * STAGE_BYTES, bar = full + 8 * s;
                    mbar_arrive_expect_tx(bar, stage_tx);
                    if (CN == 1) tma_load_2d(st, tm_a, kt * BK, a_row, bar);
                    else tma_load_2d_multicast(st + rn * A_SHARE, tm_a, kt * BK, a_row + rn * (BM / CN), bar,
                                               a_mask);
                    for (int p = CM == 1 ? 0 : rm; p < b_panels; p += CM) {
                        const u32 dst = st + A_BYTES + p * B_PANEL;
                        if (CM == 1) tma_load_2d(dst, tm_b, n0 + 64 * p, kt * BK, bar);
                        else tma_load_2d_multicast(dst, tm_b, n0 + 64 * p, kt * BK, bar, b_mask);
                    }
                }
            }
            // the tail: wait as for STAGES more fills, so that no consumer's release is still on
            // its way to this CTA when it leaves
            for (int f = it; f < it + STAGES; ++f) wait_empty(f);
        }
    } else {
        // ---- consumer warpgroups: rows 64 (wg - 1) .. + 63 of each tile
        setmaxnreg_inc<CONSUMER_REGS>();
        const int c = wg - 1;
        const u64 desc_a0 = smem_desc_sw128(base + c * 64 * 128, 16, 1024);
        const u64 desc_b0 = smem_desc_sw128(base + A_BYTES, B_PANEL, 1024);
        auto release = [&](int s) {        // both CTAs' producers may refill stage s after this
            if (lane == 0)
                #pragma unroll
                for (u32 r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(empty + 8 * s, r);
        };
        int it = 0;                        // the CTA's K tiles so far: K tile kt of this tile is it + kt
        float acc[BN / 2];
        for (int t = first; t < tiles; t += step) {
            int bm, bn;
            tile_of(t, pairs_m, pairs_n, super_m, super_n, rank, bm, bn);
            #pragma unroll
            for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
            int held = -1;                 // the stage this warpgroup read last, released a step later
            for (int kt = 0; kt < k_tiles; ++kt) {
                const int s = (it + kt) % STAGES;
                mbar_wait(full + 8 * s, ((it + kt) / STAGES) & 1);
                const u64 so = (u64)((s * STAGE_BYTES) >> 4);
                wgmma_k64<T, BN>(acc, desc_a0 + so, desc_b0 + so);
                wgmma_wait<1>();               // the previous stage's wgmma are done
                if (held >= 0) release(held);
                held = s;
            }
            wgmma_wait<0>();
            if (held >= 0) release(held);  // none when K == 0
            it += k_tiles;
            if (bm >= grid_m || bn >= grid_n) continue; // a pair's tile past M or N: nothing to store
            if (tma_c)
                store_acc_64xN_tma<BN, CT>(acc, tm_c, cbuf + c * 2 * C_BOX_BYTES, bm * BM + 64 * c,
                                           bn * BN, tid % 128, 1 + c, alpha);
            else
                store_acc_64xN<BN>(acc, C, M, N, (long long)bm * BM + 64 * c, (long long)bn * BN,
                                   tid % 128, alpha, beta, vec_c);
        }
        if (tma_c && tid % 128 == 0) bulk_wait<0>();   // the last stores have left shared memory
    }
}

}  // namespace v13

// C: fp32, or with HG_C16 the inputs' type. tm_c: C as boxes of 64 rows x 128 bytes (32 floats or
// 64 16-bit values), SWIZZLE_128B (read only when tma_c != 0)
#define V13_ARGS const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b, \
    const __grid_constant__ CUtensorMap tm_c, void* __restrict__ C, int M, int N, int K,              \
    float alpha, float beta, int vec_c, int super_m, int super_n, int tma_c

extern "C" __global__ void __launch_bounds__(v13::THREADS, 1) v13_persistent_f16(V13_ARGS) {
    extern __shared__ char smem[];
    v13::persistent<__half>(&tm_a, &tm_b, &tm_c, C, M, N, K, alpha, beta, vec_c, tma_c, super_m,
                            super_n, smem);
}
extern "C" __global__ void __launch_bounds__(v13::THREADS, 1) v13_persistent_bf16(V13_ARGS) {
    extern __shared__ char smem[];
    v13::persistent<__nv_bfloat16>(&tm_a, &tm_b, &tm_c, C, M, N, K, alpha, beta, vec_c, tma_c,
                                   super_m, super_n, smem);
}
