// v11r = v11 with TMA replaced by the CTA's own register-staged loads: any M, N, K.
//
// C (M x N, fp32) = alpha * A (M x K) @ B (K x N) + beta * C; A, B fp16 or bf16, row-major.
//
// TMA needs 16-byte row strides and bases; v11r does not. Every thread loads its share of the
// next K tile into registers with W-byte global loads (-DHG_LOAD_A / -DHG_LOAD_B: 8, 4 or 2,
// the widest the operand's base and row length allow), zero outside M, N, K, and stores it
// into the SWIZZLE_128B layout TMA would have written (wgmma_reg_loader.cuh), so the wgmma,
// its descriptors (desc_a0, desc_b0 as in wgmma_tma_loop.cuh) and the epilogue are v11's.
// Tile from -DHG_* (wgmma_tile.cuh): 128 x 256 x 64, two consumer warpgroups, STAGES >= 3
// shared stages of 48 KB, 1024-byte aligned; no mbarriers, no producer.
//
// Per K tile kt (k_tiles = ceil(K / 64); stage s(kt) = kt % STAGES):
//   1. loads of tile kt+1 into registers            (in flight during 2. and 3.)
//   2. wgmma.fence, 4 wgmma on stage s(kt), commit  (asynchronous: the tensor cores run it)
//   3. stores of tile kt+1 into stage s(kt+1), fence.proxy.async.shared::cta
//   4. wgmma.wait_group 1                           (this warpgroup's group kt-1 is complete)
//   5. __syncthreads                                (the one barrier of the K tile)
// Tile 0 is loaded, stored and fenced before the loop, then one barrier.
//
// Hazards, and what orders each:
//   RAW shared, stores -> wgmma: tile kt+1 is stored in iteration kt (3.) by every thread,
//     each fencing its generic-proxy stores into the async proxy that wgmma reads through,
//     then barrier 5.; the wgmma of kt+1 is issued after it (2. of iteration kt+1).
//   WAR shared, wgmma -> stores: iteration kt stores stage s(kt+1) = s(kt+1-STAGES), last read
//     by tile kt+1-STAGES <= kt-2. Each warpgroup waited for its own group kt-2 in iteration
//     kt-1 (4.: at most one group, kt-1, pending), before barrier 5. of iteration kt-1, which
//     every thread passes before any store of iteration kt. Both warpgroups read the whole B
//     tile, so one warpgroup's wait_group says nothing of the other's reads: the barrier is
//     what carries it. With STAGES = 2 the stage stored in iteration kt would be the one
//     tile kt-1's wgmma may still be reading: hence STAGES >= 3 (static_assert).
//   Registers, loads -> stores: the staged registers are written by the loads of iteration kt
//     and read by its stores, one thread's own program order; they are not wgmma operands.
//   Accumulators: owned by the wgmma between issue and wait_group; nothing between them
//     touches them (ptxas would serialise the wgmma, C7510: the census asserts it does not),
//     and wait_group 0 precedes the epilogue.
//   Edges: zero-filled A columns k >= K and B rows k >= K make the padding of the last K tile
//     contribute exactly 0; rows m >= M and columns n >= N reach only accumulators the
//     epilogue masks (store_acc_64x256), and are zeros anyway.
#include "wgmma.cuh"
#include "wgmma_tile.cuh"
#include "wgmma_reg_loader.cuh"
#include "tile_order.cuh"

#if !defined(HG_LOAD_A) || !defined(HG_LOAD_B)
#error "compile with the load widths -DHG_LOAD_A, -DHG_LOAD_B (numba_gemm.hgemm.v11r_ragged.defines())"
#endif

namespace v11r {

using namespace wgt;   // BM, BN, BK, STAGES, THREADS, A_BYTES, STAGE_BYTES (-DHG_*)
static_assert(!PRODUCER, "every thread loads and computes: no producer warpgroup");
static_assert(STAGES >= 3, "the stage stored in iteration kt was last read by tile kt-2 (see above)");
static_assert(BN == 256, "written for 64 x 256 per warpgroup (acc[128], store_acc_64x256)");

template <typename T>
__device__ __forceinline__ void block_tile(const rsl::bits16* __restrict__ A,
                                           const rsl::bits16* __restrict__ B, float* __restrict__ C,
                                           int M, int N, int K, float alpha, float beta, bool vec_c,
                                           int bm, int bn, char* smem_raw) {
    const int tid = threadIdx.x, wg = tid / 128;
    const int m0 = bm * BM, n0 = bn * BN;
    const u32 base = (smem_u32(smem_raw) + 1023u) & ~1023u;   // swizzle atoms on 1024 bytes

    rsl::StagedTile<HG_LOAD_A, BM, BK> a;     // A tile: BM rows (m) x 64 columns (k)
    rsl::StagedTile<HG_LOAD_B, BK, BN> b;     // B tile: 64 rows (k) x 256 columns (n)
    a.init(A, K, m0, 0, tid);
    b.init(B, N, 0, n0, tid);
    const int rows_a = M - m0, cols_b = N - n0;               // > 0: the tile is in the matrix

    const int k_tiles = (K + BK - 1) / BK;
    a.load(rows_a, K);
    b.load(K, cols_b);
    a.store(base);
    b.store(base + A_BYTES);
    fence_proxy_async();
    __syncthreads();

    float acc[128];
    #pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;

    // Descriptors of stage 0 for this warpgroup (v11's); stage s adds (s * STAGE_BYTES) >> 4.
    const u64 desc_a0 = smem_desc_sw128(base + wg * 64 * 128, 16, 1024);
    const u64 desc_b0 = smem_desc_sw128(base + A_BYTES, B_PANEL, 1024);

    int s = 0;                                                // stage of tile kt
    for (int kt = 0; kt < k_tiles; ++kt) {
        const int s_next = s + 1 == STAGES ? 0 : s + 1;       // stage of tile kt + 1
        const bool more = kt + 1 < k_tiles;
        if (more) {                                           // (kt + 1) * 64 < K: no overflow
            const int k_left = K - (kt + 1) * BK;             // columns of A, rows of B left
            a.advance(BK);
            b.advance((long long)BK * N);
            a.load(rows_a, k_left);
            b.load(k_left, cols_b);
        }
        const u64 so = (u64)((s * STAGE_BYTES) >> 4);
        wgmma_k64<T>(acc, desc_a0 + so, desc_b0 + so);        // fence, 4 wgmma, commit
        if (more) {
            const u32 st = base + s_next * STAGE_BYTES;
            a.store(st);
            b.store(st + A_BYTES);
            fence_proxy_async();                              // generic stores -> async proxy
        }
        wgmma_wait<1>();                                      // group kt-1 of this warpgroup done
        __syncthreads();
        s = s_next;
    }
    wgmma_wait<0>();
    store_acc_64x256(acc, C, M, N, (long long)m0 + 64 * wg, n0, tid % 128, alpha, beta, vec_c);
}

}  // namespace v11r

#define V11R_ARGS const unsigned short* __restrict__ A, const unsigned short* __restrict__ B, \
    float* __restrict__ C, int M, int N, int K, float alpha, float beta, int vec_c, int super_m, \
    int super_n

template <typename T>
__device__ __forceinline__ void v11r_entry(V11R_ARGS) {
    extern __shared__ char smem[];
    const int grid_m = (M + v11r::BM - 1) / v11r::BM, grid_n = (N + v11r::BN - 1) / v11r::BN;
    int bm, bn;
    tile_supertile(blockIdx.x, grid_m, grid_n, super_m, super_n, bm, bn);
    v11r::block_tile<T>(A, B, C, M, N, K, alpha, beta, vec_c, bm, bn, smem);
}

extern "C" __global__ void __launch_bounds__(v11r::THREADS, 1) v11r_ragged_f16(V11R_ARGS) {
    v11r_entry<__half>(A, B, C, M, N, K, alpha, beta, vec_c, super_m, super_n);
}
extern "C" __global__ void __launch_bounds__(v11r::THREADS, 1) v11r_ragged_bf16(V11R_ARGS) {
    v11r_entry<__nv_bfloat16>(A, B, C, M, N, K, alpha, beta, vec_c, super_m, super_n);
}
