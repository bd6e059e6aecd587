// tile_config.cuh - the compile-time tile of the swizzled mma.sync levels (v8, v9, v10).
//
// Every number comes from a -DHG_* option: the level module's CONFIG (a
// numba_gemm.hgemm._common.TileConfig) writes all of them, and they are part of the cubin
// cache key. A source compiled without them stops here rather than fall back to some tile.
//
//   HG_BM x HG_BN x HG_BK   block tile of C (BM x BN) and K depth of one pipeline stage
//   HG_STAGES               pipeline depth (stages of shared memory)
//   HG_WARPS_M x HG_WARPS_N warps of the block; each owns a (BM/WARPS_M) x (BN/WARPS_N) warp tile
//   HG_MIN_BLOCKS           __launch_bounds__ minimum blocks per SM (2 caps registers at 65536/(2*threads))
//   HG_FRAG_PIPE            1: load the next k16 step's fragments before this step's mma
//
// Shared layout of one stage: A then B, each made of "panels" of 128-byte rows (64 halves).
// A is one panel of BM rows (m) x 64 k; B is BN/64 panels of 64 rows (k) x 64 n.
#pragma once

#include "ptx.cuh"

#if !defined(HG_BM) || !defined(HG_BN) || !defined(HG_BK) || !defined(HG_STAGES) || \
    !defined(HG_WARPS_M) || !defined(HG_WARPS_N) || !defined(HG_MIN_BLOCKS) || !defined(HG_FRAG_PIPE)
#error "compile with the level's tile as -DHG_* options (numba_gemm.hgemm._common.TileConfig.defines())"
#endif

namespace hg {

constexpr int BM = HG_BM, BN = HG_BN, BK = HG_BK, STAGES = HG_STAGES;
constexpr int WARPS_M = HG_WARPS_M, WARPS_N = HG_WARPS_N, THREADS = 32 * WARPS_M * WARPS_N;
constexpr int MIN_BLOCKS = HG_MIN_BLOCKS;
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;     // warp tile
constexpr int MT = WM / 16, NT = WN / 8;                 // mma tiles (16 x 8) per warp
constexpr u32 A_BYTES = BM * BK * 2;                     // one panel of BM 128-byte rows
constexpr u32 B_PANEL = BK * 128;                        // 8 KB: 64 k-rows x 64 n
constexpr u32 B_BYTES = (BN / 64) * B_PANEL;
constexpr u32 STAGE_BYTES = A_BYTES + B_BYTES;           // a multiple of 1024

static_assert(BK * 2 == 128, "the swizzle and the ldmatrix XOR walk assume 128-byte A rows");
static_assert(BM % WARPS_M == 0 && BN % WARPS_N == 0 && WM % 16 == 0 && WN % 16 == 0,
              "warp tiles are whole 16 x 16 mma pairs");
static_assert(WN % 64 == 0 || 64 % WN == 0, "a warp's B columns lie within, or span whole, panels");
static_assert(BN % 64 == 0 && STAGE_BYTES % 1024 == 0, "B is whole 64-column panels");

typedef unsigned short bits16;   // fp16 and bf16 travel as raw 16-bit patterns

}  // namespace hg
