// wgmma_reg_loader.cuh - register-staged loads of one operand tile into the SWIZZLE_128B layout
// that the wgmma descriptors of wgmma.cuh read (and TMA writes): for operands whose rows TMA
// cannot describe (row strides or bases not 16-byte aligned).
//
// An operand tile is ROWS rows x COLS elements of a row-major matrix G (leading dimension LD):
//   A: ROWS = BM rows of m, COLS = 64 k      (G = A, LD = K)
//   B: ROWS = 64 rows of k, COLS = BN n      (G = B, LD = N)
// In shared memory it is COLS / 64 panels of ROWS rows x 128 bytes, PANEL = ROWS * 128 bytes
// apart; 16-byte chunk c of a panel row r sits at chunk c ^ (r % 8) (swz128 in ptx.cuh). For A
// that is one box of BM rows (SBO 1024), for B the 64-column panels 8 KB apart (LBO 8192).
//
// Each global load is W bytes (8, 4 or 2: the widest dividing the base address and the row
// length in bytes, numba_gemm.hgemm.v11r_ragged.load_width). A piece is what one thread stores
// with one st.shared: PIECE = max(W, 4) bytes, LOADS = PIECE / W loads (2 for W = 2, packed
// into one 32-bit register, else 1). Piece q of the tile (elements q * PIECE_ELEMS ...) belongs
// to thread q % THREADS, as its piece i = q / THREADS: consecutive threads read consecutive
// bytes of a row (one warp load covers 32 * W contiguous bytes), and a warp's stores fill whole
// 128-byte panel rows (no bank conflicts). So a thread's pieces share one column `col` and run
// down rows row0 + i * STEP, STEP = THREADS * PIECE_ELEMS / COLS (a power of two, row0 < STEP):
//   dst(i) = (dst0 ^ (((i * STEP) & 7) << 4)) + i * STEP * 128   (row % 8 = row0 % 8 ^ (i*STEP) % 8)
//   src(i) = src0 + i * STEP * LD                                 (walked by adding the step)
// numba_gemm.hgemm.v11r_ragged.loader_model is this walk in Python, tested to write every byte
// of both stage tiles once, where TMA's SWIZZLE_128B would put it, zeros outside the matrix.
//
// Edges: a load is one predicate, never part in and part out: W divides 2 * LD, so LD and the
// tile's first column (a multiple of 64) are multiples of LOAD_ELEMS = W / 2, and so is each
// load's column. Rows past the matrix (m >= M for A, k >= K for B), columns past it (k >= K
// for A, n >= N for B) are stored as zeros, so the padding of A and B multiplies to 0 (no stale
// NaN from an earlier tile can reach a stored element). Bounds are compared as counts left
// (rows_left = M - m0, ...), never as m0 + row, which could pass 2^31; addresses are 64-bit.
#pragma once

#include "ptx.cuh"
#include "wgmma_tile.cuh"

namespace rsl {

typedef unsigned short bits16;

__device__ __forceinline__ void sts32(u32 addr, u32 v) {
    asm volatile("st.shared.b32 [%0], %1;\n" :: "r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void sts64(u32 addr, u32 v0, u32 v1) {
    asm volatile("st.shared.v2.b32 [%0], {%1, %2};\n" :: "r"(addr), "r"(v0), "r"(v1) : "memory");
}

// One thread's share of one operand tile: where it reads and writes, and the registers that
// carry a tile from its loads (issued before the wgmma of the previous tile) to its stores.
template <int W, int ROWS, int COLS>
struct StagedTile {
    static_assert(W == 2 || W == 4 || W == 8, "loads of 2, 4 or 8 bytes");
    static constexpr int THREADS = wgt::THREADS;
    static constexpr int LOAD_ELEMS = W / 2;                       // elements per global load
    static constexpr int PIECE_ELEMS = W < 4 ? 2 : W / 2;          // elements per shared store
    static constexpr int LOADS = PIECE_ELEMS / LOAD_ELEMS;         // loads per piece
    static constexpr int REGS = PIECE_ELEMS / 2;                   // 32-bit registers per piece
    static constexpr int PIECES = ROWS * COLS / (PIECE_ELEMS * THREADS);   // per thread
    static constexpr int STEP = THREADS * PIECE_ELEMS / COLS;      // rows between its pieces
    static constexpr u32 PANEL = ROWS * 128;                       // bytes per 64-column panel
    static_assert(COLS % 64 == 0 && (THREADS * PIECE_ELEMS) % COLS == 0, "whole rows per pass");
    static_assert(PIECES * PIECE_ELEMS * THREADS == ROWS * COLS, "every piece has one thread");
    static_assert((STEP & (STEP - 1)) == 0 && ROWS % STEP == 0, "rows per pass: a power of two");

    const bits16* src0;   // this thread's first element of the current tile (row0, col)
    long long step;       // STEP * LD: elements between its pieces
    u32 dst0;             // byte offset of its first piece in the operand's shared tile
    int row0, col;        // tile coordinates of its first piece
    u32 r[PIECES * REGS]; // the staged tile (W = 2: each register packs two loads)

    // G's tile at (R0, C0): rows R0.., columns C0.. (A: m0, k0; B: k0, n0).
    __device__ __forceinline__ void init(const bits16* G, long long LD, long long R0, long long C0,
                                         int tid) {
        const int e = tid * PIECE_ELEMS;        // piece tid of the tile (i = 0)
        row0 = e / COLS;
        col = e % COLS;
        step = (long long)STEP * LD;
        src0 = G + (R0 + row0) * LD + C0 + col;
        dst0 = (col / 64) * PANEL + swz128(row0, (col % 64) / 8) + (col % 8) * 2;
    }

    // The next K tile: A moves 64 columns right, B 64 rows down.
    __device__ __forceinline__ void advance(long long elems) { src0 += elems; }

    // Issue this thread's loads of the tile at src0; rows row >= rows_left and columns
    // col >= cols_left are zero (their addresses are not read).
    __device__ __forceinline__ void load(int rows_left, int cols_left) {
        const bits16* p = src0;
        #pragma unroll
        for (int i = 0; i < PIECES; ++i, p += step) {
            const bool row_ok = row0 + i * STEP < rows_left;
            if (W == 8) {
                const bool ok = row_ok && col < cols_left;
                const uint2 v = ok ? *reinterpret_cast<const uint2*>(p) : make_uint2(0u, 0u);
                r[2 * i] = v.x;
                r[2 * i + 1] = v.y;
            } else if (W == 4) {
                const bool ok = row_ok && col < cols_left;
                r[i] = ok ? *reinterpret_cast<const u32*>(p) : 0u;
            } else {
                const u32 lo = (row_ok && col < cols_left) ? (u32)p[0] : 0u;
                const u32 hi = (row_ok && col + 1 < cols_left) ? (u32)p[1] : 0u;
                r[i] = lo | (hi << 16);
            }
        }
    }

    // Store the staged tile into the operand's shared tile at `tile` (1024-byte aligned).
    __device__ __forceinline__ void store(u32 tile) const {
        #pragma unroll
        for (int i = 0; i < PIECES; ++i) {
            const u32 dst = (tile + (dst0 ^ (((i * STEP) & 7) << 4))) + i * STEP * 128;
            if (REGS == 2)
                sts64(dst, r[2 * i], r[2 * i + 1]);
            else
                sts32(dst, r[i]);
        }
    }
};

}  // namespace rsl
