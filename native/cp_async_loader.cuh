// cp_async_loader.cuh - global -> shared by cp.async into the 128-byte XOR-swizzled layout
// (v8, v9): the loader geometry (which chunks each thread copies) and the copy of one chunk.
// The per-thread addresses and the stage loop live in each level's kernel, next to its pipeline.
//
// Chunk c (16 B) of a 128-byte row r is stored at chunk c ^ (r % 8) (swz128 in ptx.cuh): the 8
// rows an ldmatrix reads sit in 8 different 16-byte bank groups, with no padding. With
// 1024-byte aligned panels this is byte for byte the layout TMA's SWIZZLE_128B writes.
//
// Edges: cp.async with src-size 0 zero-fills chunks past M, N, K. Rows that are not 16-byte
// aligned in global memory (K or N % 8 != 0, or an unaligned base) are copied element by
// element instead. 64-bit offsets wherever a row index multiplies a leading dimension.
#pragma once

#include "tile_config.cuh"

namespace hg {

// Loader geometry: A is BM rows x 8 chunks, B is BK rows x BN/8 chunks; each thread copies
// A_ITERS chunks of A rows A_ROWSTEP apart and B_ITERS chunks of B rows B_ROWSTEP apart.
constexpr int A_ITERS = BM * 8 / THREADS, A_ROWSTEP = THREADS / 8;
constexpr int B_CPR = BN / 8, B_ITERS = BK * B_CPR / THREADS, B_ROWSTEP = THREADS / B_CPR;

static_assert(THREADS % 64 == 0 && A_ITERS * THREADS == BM * 8, "A rows per pass keep row % 8");
static_assert(THREADS % B_CPR == 0 && B_ITERS * THREADS == BK * B_CPR &&
              (B_ROWSTEP & (B_ROWSTEP - 1)) == 0, "B rows per pass: a power of two");

// Copy one 16-byte chunk. VEC: cp.async (zero-fill when !ok). Otherwise element-wise with
// per-element bounds, for rows that are not 16-byte aligned in global memory.
template <bool VEC>
__device__ __forceinline__ void copy_chunk(u32 dst, char* dst_generic, const bits16* src,
                                           bool row_ok, long long col, long long ncols,
                                           const bits16* any_valid) {
    if (VEC) {
        const bool ok = row_ok && col < ncols;
        cp_async16(dst, ok ? (const void*)src : (const void*)any_valid, ok ? 16 : 0);
    } else {
        u32 w[4];
        #pragma unroll
        for (int e = 0; e < 8; e += 2) {
            const u32 lo = (row_ok && col + e < ncols) ? src[e] : 0u;
            const u32 hi = (row_ok && col + e + 1 < ncols) ? src[e + 1] : 0u;
            w[e / 2] = lo | (hi << 16);
        }
        *reinterpret_cast<uint4*>(dst_generic) = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

}  // namespace hg
