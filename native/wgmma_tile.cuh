// wgmma_tile.cuh - the compile-time tile of the wgmma levels (v11, v11sk, v12, v13): BN = 64, 128
// or 256, with thread 0 loading (v11, v11sk) or a producer warpgroup (v13; v12: 256 only).
//
// Every number comes from a -DHG_* option: the level module's CONFIG (a
// numba_gemm.hgemm._wgmma.WgmmaTile) writes all of them, and the same record sizes the dynamic
// shared memory and the TMA boxes on the host. A source compiled without them stops here
// rather than fall back to a tile the host may not have sized.
//
//   HG_BM x HG_BN x HG_BK   block tile of C and K depth of one stage (a slab of 64 rows per consumer)
//   HG_STAGES               pipeline depth
//   HG_PRODUCER             1: one more warpgroup that only loads (v12, v13); 0: thread 0 also computes
//
// Shared layout of one stage (1024-byte aligned, the SWIZZLE_128B atom): A, one box of BM rows
// x 128 bytes; then B, BN/64 panels of 64 k-rows x 64 n (128 bytes), 8 KB apart.
#pragma once

#include "ptx.cuh"

#if !defined(HG_BM) || !defined(HG_BN) || !defined(HG_BK) || !defined(HG_STAGES) || !defined(HG_PRODUCER)
#error "compile with the level's tile as -DHG_* options (numba_gemm.hgemm._wgmma.WgmmaTile.defines())"
#endif

namespace wgt {

constexpr int BM = HG_BM, BN = HG_BN, BK = HG_BK, STAGES = HG_STAGES;
constexpr bool PRODUCER = HG_PRODUCER != 0;
constexpr int CONSUMERS = BM / 64;                        // wgmma warpgroups, one 64-row slab x BN each
constexpr int THREADS = 128 * (CONSUMERS + (PRODUCER ? 1 : 0));
constexpr u32 A_BYTES = BM * BK * 2;                      // one box of BM rows x 128 bytes
constexpr u32 B_PANEL = BK * 128;                         // 8 KB: 64 k-rows x 64 n
constexpr u32 STAGE_BYTES = A_BYTES + (BN / 64) * B_PANEL;
// Dynamic shared memory the host gives (WgmmaTile.smem()): STAGES * STAGE_BYTES + 1024 + 2 * STAGES * 8.

static_assert(BK * 2 == 128, "one 128-byte swizzle span per row; wgmma_k64 is 4 k16 steps");
static_assert(BN == 64 || BN == 128 || BN == 256, "one m64nBNk16 per k16 step (wgmma.cuh makes N = 64, 128, 256)");
static_assert(BM == 64 || BM == 128, "one or two slabs of 64 rows");
static_assert(STAGES >= 2 && STAGE_BYTES % 1024 == 0, "stages on swizzle-atom boundaries");

}  // namespace wgt
