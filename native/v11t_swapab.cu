// v11t = v11sl on the transposed product: C^T = B^T A^T, so that a skinny M lands on wgmma's N.
//
// C (M x N, fp32) = alpha * A (M x K) @ B (K x N) + beta * C; A, B fp16 or bf16, row-major; M <= 32.
//
// v11sl at M = 16 runs m64n64k16 on a 64-row A tile of which 48 rows are TMA's zero fill: 3/4 of
// the tensor work and of A's shared memory carry nothing. Here the roles swap. Each warpgroup
// owns 64 columns of N (wgmma's M) and the CTA's MT rows of M are wgmma's N (16 or 32):
//   wgmma A operand: a 64 k-row x 64 n panel of B, exactly as TMA writes it for v11 (SWIZZLE_128B,
//     n contiguous) - now M-major, imm-trans-a = 1: LBO unused (one 128-byte panel), SBO = 1024
//     (next 8 k rows), k step +16 rows = +2048 bytes.
//   wgmma B operand: a box of MT rows of A x 64 k, v11's A box with MT rows - K-major,
//     imm-trans-b = 0: SBO = 1024 (next 8 rows), k step +32 bytes.
// So a stage is NT / 64 panels of B (8 KB each) + MT x 128 bytes of A, every byte of it used; the
// accumulators are MT / 2 fp32 per thread, and the stages left in shared memory go to depth: the
// skinny products are memory-bound, and STAGES - TMA_LAG loads are in flight per CTA.
//
// Grid (tiles * S): MT >= M (the host's rule), so tile t is columns t * NT .. of all M rows; the
// cluster (S, 1, 1) of CTAs S*t .. S*t + S-1 computes tile t, CTA rank z the K tiles
// [z * per, min((z + 1) * per, ceil(K / 64))) - v11sl's split. After the K loop each CTA parks
// its partial transposed (row m of the tile holds C's row: float pairs along n, rows padded by 4
// floats so a warp's stores fall in 32 banks), then CTA z sums rows of the tile over the S
// partials in the order 0, 1, ..., S-1 (distributed shared memory) and writes C = alpha * sum +
// beta * C with row-contiguous pair stores - fixed order, same bits every run, no atomics.
// S = 1 takes the same path inside the CTA (a __syncthreads for the cluster barrier).
//
// Edges: TMA zero-fills A's rows past M and k past K; B panels wholly right of N are not loaded
// (their stale shared memory reaches only accumulator rows n >= N, never stored).
#include "wgmma.cuh"
#include "tensor_map.cuh"
#include "parked_sum.cuh"

#if !defined(SW_MT) || !defined(SW_NT) || !defined(SW_STAGES) || !defined(SW_TMA_LAG)
#error "compile with the level's tile as -DSW_* options (numba_gemm.hgemm.v11t_swapab.SwapTile.defines())"
#endif

namespace v11t {

constexpr int MT = SW_MT, NT = SW_NT, BK = 64, STAGES = SW_STAGES, TMA_LAG = SW_TMA_LAG;
constexpr int WARPGROUPS = NT / 64, THREADS = 128 * WARPGROUPS, WARPS = THREADS / 32;
constexpr u32 B_PANEL = BK * 128;                          // 64 k-rows x 64 n
constexpr u32 A_BYTES = MT * 128;                          // MT rows x 64 k
constexpr u32 STAGE_BYTES = WARPGROUPS * B_PANEL + A_BYTES;
constexpr int ROW = NT + 4;                                // floats per parked row of the tile
static_assert(MT == 16 || MT == 32, "wgmma N of 16 or 32: past M = 32 v11sl's tile is at least half full");
static_assert(NT == 64 || NT == 128, "one or two warpgroups of 64 columns of N");
static_assert(STAGE_BYTES % 1024 == 0, "stages on swizzle-atom boundaries");
static_assert(2 <= TMA_LAG && TMA_LAG < STAGES, "refill a stage read 2..STAGES-1 iterations ago");
static_assert(MT * ROW * 4 <= STAGES * STAGE_BYTES, "the parked partial fits over the stages");

// acc = this warpgroup's 64 (n) x MT (m) block of the transposed tile over the K tiles
// kt0 .. min(kt0 + per, ceil(K / 64)) - 1 (at least one), then epilogue(acc); thread 0 loads
// while it computes. v11's loop with the operands swapped; as there, the accumulators stay local
// and the epilogue is a callback.
template <typename T, typename Epilogue>
__device__ __forceinline__ void k_loop(const CUtensorMap* tm_a, const CUtensorMap* tm_b, int N, int K,
                                       int n0, int kt0, int per, u32 base, Epilogue epilogue) {
    const int tid = threadIdx.x, lane = tid % 32, wg = tid / 128;
    const u32 full = base + STAGES * STAGE_BYTES, empty = full + STAGES * 8;
    const int b_panels = min(WARPGROUPS, (N - n0 + 63) / 64);
    const u32 stage_tx = b_panels * B_PANEL + A_BYTES;
    if (tid == 0) init_stage_ring<STAGES>(tm_a, tm_b, full, empty, WARPS);
    __syncthreads();
    // a dependent launch: the set-up above may run beside the previous kernel's last CTAs,
    // nothing global is touched before it has finished (the next one may start once every CTA
    // is past its K loop: at the start, its CTAs slowed this one's at M = 64, an H100 loop
    // 0.5 us longer instead of 1.3 us shorter; docs/RESULTS.md)
    wait_for_previous_grid();

    const int k_tiles = min(per, (K + BK - 1) / BK - kt0);
    auto issue = [&](int f) {   // tid 0 only: K tile kt0 + f into stage f % STAGES
        const int s = f % STAGES, k = (kt0 + f) * BK;
        const u32 st = base + s * STAGE_BYTES, bar = full + 8 * s;
        mbar_arrive_expect_tx(bar, stage_tx);
        for (int p = 0; p < b_panels; ++p) tma_load_2d(st + p * B_PANEL, tm_b, n0 + 64 * p, k, bar);
        tma_load_2d(st + WARPGROUPS * B_PANEL, tm_a, k, 0, bar);   // all M rows
    };
    if (tid == 0)
        for (int f = 0; f < STAGES - TMA_LAG && f < k_tiles; ++f) issue(f);

    float acc[MT / 2];
    #pragma unroll
    for (int i = 0; i < MT / 2; ++i) acc[i] = 0.0f;
    const u64 desc_b0 = smem_desc_sw128(base + wg * B_PANEL, B_PANEL, 1024);      // wgmma's A
    const u64 desc_a0 = smem_desc_sw128(base + WARPGROUPS * B_PANEL, 16, 1024);  // wgmma's B

    // k_tiles >= 1 (the host never plans an empty slice), so the loop runs at least once: with a
    // path around it, the zero-filled accumulators meet the wgmma results after it and ptxas
    // serialises every wgmma (C7515)
    int kt = 0;
    do {
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
        wgmma_fence();
        #pragma unroll
        for (int kk = 0; kk < 4; ++kk)
            wgmma_m64nNk16<0, 1>(acc, desc_b0 + so + ((kk * 2048) >> 4), desc_a0 + so + ((kk * 32) >> 4), T());
        wgmma_commit();
        wgmma_wait<1>();                   // stage kt-1's wgmma have read their operands
        if (kt > 0 && lane == 0) mbar_arrive(empty + 8 * ((kt - 1) % STAGES));
    } while (++kt < k_tiles);
    wgmma_wait<0>();
    let_next_grid_start();
    epilogue(acc);
}

// Park the warpgroup's accumulators transposed: D[n][m] (thread t: n = 16 (t/32) + (t%32)/4 (+8),
// m = 8j + 2 (t%4) + 0..1) at row m, column 64 wg + n of the tile. As floats: a bit-cast to
// st_shared_b32 made ptxas serialise the wgmma (C7514).
__device__ __forceinline__ void park(const float (&d)[MT / 2], u32 tile, int wg, int wg_thread) {
    const int warp = wg_thread / 32, lane = wg_thread % 32, g = lane / 4, q = lane % 4;
    #pragma unroll
    for (int j = 0; j < MT / 8; ++j)
        #pragma unroll
        for (int i = 0; i < 4; ++i) {
            const u32 m = 8 * j + 2 * q + (i & 1), n = 64 * wg + 16 * warp + g + 8 * (i >> 1);
            st_shared_f32(tile + 4u * (m * ROW + n), d[4 * j + i]);
        }
}

}  // namespace v11t

#define V11T_ARGS const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b, \
    float* __restrict__ C, int M, int N, int K, float alpha, float beta, int vec_c, int per, int S

template <typename T>
__device__ __forceinline__ void v11t_entry(const CUtensorMap* tm_a, const CUtensorMap* tm_b, float* C,
                                           int M, int N, int K, float alpha, float beta, int vec_c,
                                           int per, int S) {
    using namespace v11t;
    extern __shared__ char smem[];
    const int n0 = (blockIdx.x / S) * NT;                   // MT >= M: a tile holds all of M
    const int z = S > 1 ? (int)cluster_ctarank() : 0;
    const u32 base = (smem_u32(smem) + 1023u) & ~1023u;     // swizzle atoms on 1024-byte boundaries
    k_loop<T>(tm_a, tm_b, N, K, n0, z * per, per, base, [&](const float (&acc)[MT / 2]) {
        __syncthreads();                                    // every warpgroup is past its last stage
        park(acc, base, threadIdx.x / 128, threadIdx.x % 128);
        if (S > 1) cluster_sync(); else __syncthreads();
        sum_parked_rows<NT / 2, ROW, THREADS>(base, S, z * MT / S, (z + 1) * MT / S, C, M, N, 0, n0,
                                              alpha, beta, vec_c);
        if (S > 1) cluster_sync();                          // partners may still read this CTA
    });
}

extern "C" __global__ void __launch_bounds__(v11t::THREADS, 1) v11t_swapab_f16(V11T_ARGS) {
    v11t_entry<__half>(&tm_a, &tm_b, C, M, N, K, alpha, beta, vec_c, per, S);
}
extern "C" __global__ void __launch_bounds__(v11t::THREADS, 1) v11t_swapab_bf16(V11T_ARGS) {
    v11t_entry<__nv_bfloat16>(&tm_a, &tm_b, C, M, N, K, alpha, beta, vec_c, per, S);
}
