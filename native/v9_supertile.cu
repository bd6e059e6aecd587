// v9 = v8 + super-tile rasterisation of the 1-D grid, for L2 reuse. One change: which tile
// block blockIdx.x computes (tile_supertile in tile_order.cuh instead of tile_row_major);
// the tile, the loader, the pipeline and the mma code are v8's, line for line
// (diff native/v8_mma.cu native/v9_supertile.cu).
//
// C (M x N, fp32) = alpha * A (M x K) @ B (K x N) + beta * C; A, B fp16 or bf16, row-major.
//
// v8 numbers tiles row by row: a wave of blocks shares one or a few rows of A, but walks the
// whole width of B, which is re-read from DRAM for every band of tile rows once B no longer
// fits in L2. v9 groups tile rows into bands of super_m rows and cuts each band into
// super-tiles super_n tiles wide, n fastest inside a super-tile: the super_m A row-panels of a
// band stay resident while the band is swept, and B is streamed once per band instead of once
// per tile row. The host picks (super_m, super_n) from the L2 size so that
// (super_m*BM + super_n*BN)*K*2 bytes fit (numba_gemm.hgemm._common.choose_supertile).
//
// Shipped tile: v8's (numba_gemm/hgemm/v9_supertile.py CONFIG, -DHG_* options): 128 x 128 x 64,
// 3 stages, 4 warps of 64 x 64, 2 blocks per SM. Edges as v8.
#include "ptx.cuh"
#include "tile_config.cuh"
#include "cp_async_loader.cuh"
#include "mma_stage.cuh"
#include "epilogue.cuh"
#include "tile_order.cuh"

namespace hg {

// The whole block computes tile (bm, bn). FAST: both operands take cp.async (16-byte rows).
// Dynamic shared memory: STAGES * STAGE_BYTES + 1024 (slack to align the base to 1024 bytes).
template <typename T, bool FAST>
__device__ __forceinline__ void block_tile(const bits16* __restrict__ A, const bits16* __restrict__ B,
                                           float* __restrict__ C, int M, int N, int K,
                                           float alpha, float beta, bool vec_a, bool vec_b,
                                           bool vec_c, int bm, int bn, char* smem_raw) {
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
    const int m0 = bm * BM, n0 = bn * BN;

    // 1024-aligned base: the XOR walks flip address bits 4..6 only.
    const u32 raw = smem_u32(smem_raw);
    const u32 base = (raw + 1023u) & ~1023u;
    char* const base_generic = smem_raw + (base - raw);

    // ---- the loader (cp_async_loader.cuh): each thread copies A_ITERS chunks of A and B_ITERS
    // of B per stage (8 and 8 for the shipped tile of 4 warps).
    // A chunk i: row tid/8 + A_ROWSTEP*i, chunk tid%8; A_ROWSTEP is a multiple of 8, so row % 8
    // and the swizzle stay the same: destinations A_ROWSTEP*128 bytes apart.
    const int a_r = tid / 8, a_c = tid % 8;
    const u32 a_dst = swz128(a_r, a_c);
    const bits16* a_src = A + (long long)(m0 + a_r) * K + a_c * 8;
    const long long a_step = (long long)A_ROWSTEP * K;
    // B chunk i: k-row b_r + B_ROWSTEP*i, 16-byte column tid%B_CPR (panel (tid%B_CPR)/8).
    // b_r < B_ROWSTEP, a power of two, so row % 8 = (b_r % 8) ^ ((B_ROWSTEP*i) % 8): the
    // destination is b_dst + B_ROWSTEP*i*128 with the chunk XORed by (B_ROWSTEP*i) % 8.
    const int b_r = tid / B_CPR, b_nc = tid % B_CPR;
    const u32 b_dst = A_BYTES + (b_nc / 8) * B_PANEL + swz128(b_r, b_nc % 8);
    const long long b_col = (long long)n0 + b_nc * 8;
    const bits16* b_src = B + (long long)b_r * N + b_col;
    const long long b_step = (long long)B_ROWSTEP * N;

    // Bounds that do not change along K, kept as a bit mask (one register, not A_ITERS).
    u32 a_rows_ok = 0;
    #pragma unroll
    for (int i = 0; i < A_ITERS; ++i) a_rows_ok |= (u32)(m0 + a_r + A_ROWSTEP * i < M) << i;
    const bool b_col_ok = b_col < N;

    // Sources are walked by adding the row step (one 64-bit add per chunk) rather than kept
    // as A_ITERS + B_ITERS live pointers: registers matter when a warp tile is 64 x 32.
    auto load_stage = [&](int stage, int kt) {
        const u32 st = base + stage * STAGE_BYTES;
        char* stg = base_generic + stage * STAGE_BYTES;
        const int k0 = kt * BK;                      // < K < 2^31
        const bool a_col_ok = k0 + a_c * 8 < K;
        const bits16* pa = a_src + k0;
        #pragma unroll
        for (int i = 0; i < A_ITERS; ++i, pa += a_step) {
            const bool row_ok = (a_rows_ok >> i) & 1u;
            const u32 off = a_dst + i * A_ROWSTEP * 128;
            if (FAST || vec_a)
                copy_chunk<true>(st + off, nullptr, pa, row_ok && a_col_ok, 0, 1, A);
            else
                copy_chunk<false>(0, stg + off, pa, row_ok, k0 + a_c * 8, K, A);
        }
        const int b_krem = K - k0 - b_r;             // rows b_r + B_ROWSTEP*i < b_krem exist
        const bits16* pb = b_src + (long long)k0 * N;
        #pragma unroll
        for (int i = 0; i < B_ITERS; ++i, pb += b_step) {
            const bool row_ok = B_ROWSTEP * i < b_krem;
            const u32 off = (b_dst + i * B_ROWSTEP * 128) ^ (((i * B_ROWSTEP) & 7) << 4);
            if (FAST || vec_b)
                copy_chunk<true>(st + off, nullptr, pb, row_ok && b_col_ok, 0, 1, B);
            else
                copy_chunk<false>(0, stg + off, pb, row_ok, b_col, N, B);
        }
    };

    const u32 a_lane = a_lane_offset(warp_m, lane), b_lane = b_lane_offset(warp_n, lane);

    float acc[MT][NT][4];
    zero_acc(acc);

    const int k_tiles = (K + BK - 1) / BK;
    #pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < k_tiles) load_stage(s, s);
        cp_async_commit();
    }

    for (int kt = 0; kt < k_tiles; ++kt) {
        cp_async_wait<STAGES - 2>();   // tile kt has landed (this thread's copies) ...
        __syncthreads();               // ... and everyone's; stage (kt-1)%S is free again
        {
            const int nk = kt + STAGES - 1;
            if (nk < k_tiles) load_stage(nk % STAGES, nk);
            cp_async_commit();         // an empty group keeps the wait count in step
        }
        const u32 st = base + (kt % STAGES) * STAGE_BYTES;
        mma_stage<T>(acc, st + a_lane, st + b_lane);
    }
    cp_async_wait<0>();

    store_tile(acc, C, M, N, m0, n0, warp_m, warp_n, lane, alpha, beta, vec_c);
}

}  // namespace hg

#define V9_ARGS const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,      \
    float* __restrict__ C, int M, int N, int K, float alpha, float beta, int vec_a, int vec_b, \
    int vec_c, int super_m, int super_n

template <typename T>
__device__ __forceinline__ void v9_entry(V9_ARGS) {
    extern __shared__ char smem[];
    const int grid_m = (M + hg::BM - 1) / hg::BM, grid_n = (N + hg::BN - 1) / hg::BN;
    int bm, bn;
    tile_supertile(blockIdx.x, grid_m, grid_n, super_m, super_n, bm, bn);
    if (vec_a && vec_b)
        hg::block_tile<T, true>(A, B, C, M, N, K, alpha, beta, true, true, vec_c, bm, bn, smem);
    else
        hg::block_tile<T, false>(A, B, C, M, N, K, alpha, beta, vec_a, vec_b, vec_c, bm, bn, smem);
}

extern "C" __global__ void __launch_bounds__(hg::THREADS, hg::MIN_BLOCKS) v9_supertile_f16(V9_ARGS) {
    v9_entry<__half>(A, B, C, M, N, K, alpha, beta, vec_a, vec_b, vec_c, super_m, super_n);
}
#ifndef HG_NO_BF16   // tile sweeps time fp16 only and compile half as much
extern "C" __global__ void __launch_bounds__(hg::THREADS, hg::MIN_BLOCKS) v9_supertile_bf16(V9_ARGS) {
    v9_entry<__nv_bfloat16>(A, B, C, M, N, K, alpha, beta, vec_a, vec_b, vec_c, super_m, super_n);
}
#endif
