// The warp tiling of k7 and k8 (numba_gemm/sgemm/_warptile.py in CUDA C). The shipped tiling:
// a 128 x 128 block tile, 8 warps as 2 x 4 warp tiles of 64 x 32, each lane an 8 x 8 thread tile
// made of 2 x 2 pieces of 4 x 4 (rows am + {0..3, 32..35}, columns bn + {0..3, 16..19}), so
// every shared load of the inner loop is one conflict-free LDS.128. Block (32 lanes, 8 warps).
// The A tile is stored transposed with rows padded by A_PAD floats; every global access is
// checked (one predicate per float4, or per float in the 32-bit forms).
#pragma once
#include "sgemm.cuh"

// The tiling is the Numba level's TILING (tile_m, tile_n, tile_k, warp_m, warp_n, lanes_n) and
// _warptile's A_PAD and MIN_BLOCKS, passed as -D options by numba_gemm.measure.twins.defines.
#if !defined(WT_TM) || !defined(WT_TN) || !defined(WT_TK) || !defined(WT_WM) || !defined(WT_WN) || \
    !defined(WT_LANES_N) || !defined(WT_A_PAD) || !defined(WT_MIN_BLOCKS)
#error "WT_TM, WT_TN, WT_TK, WT_WM, WT_WN, WT_LANES_N, WT_A_PAD, WT_MIN_BLOCKS come from the Numba level's TILING (numba_gemm.measure.twins.defines)"
#endif

namespace wt {

constexpr int TM = WT_TM, TN = WT_TN, TK = WT_TK, WM = WT_WM, WN = WT_WN, LANES_N = WT_LANES_N;
constexpr int MIN_BLOCKS = WT_MIN_BLOCKS;                               // __launch_bounds__
constexpr int WARPS_N = TN / WN, THREADS = 32 * (TM / WM) * WARPS_N, LANES_M = 32 / LANES_N;
constexpr int SUB_M = WM / (4 * LANES_M), SUB_N = WN / (4 * LANES_N);   // 2 x 2 pieces
constexpr int THREAD_M = 4 * SUB_M, THREAD_N = 4 * SUB_N;               // 8 x 8
constexpr int M_STEP = 4 * LANES_M, N_STEP = 4 * LANES_N;               // 32, 16
constexpr int AS = TM + WT_A_PAD;                                       // padded As row
constexpr int A_LOADS = TM * TK / 4 / THREADS, B_LOADS = TK * TN / 4 / THREADS;
constexpr int A_ROW_STEP = THREADS / (TK / 4), B_ROW_STEP = THREADS / (TN / 4);
constexpr int SPREAD = TN / 4;
// WarpTiling.problems() of _warptile, which the body assumes
static_assert(TM % WM == 0 && TN % WN == 0, "warp tiles must divide the block tile");
static_assert(SUB_M >= 1 && SUB_N >= 1 && WM % (4 * LANES_M) == 0 && WN % (4 * LANES_N) == 0,
              "a warp tile must be whole 4x4 pieces for LANES_M x LANES_N lanes");
static_assert(TK % 4 == 0 && TN % 4 == 0 && WT_A_PAD % 4 == 0, "float4 rows (As rows 16-byte aligned for LDS.128)");
static_assert(TM * TK % (4 * THREADS) == 0 && TK * TN % (4 * THREADS) == 0,
              "every thread must load whole float4s of each tile");
static_assert(THREADS % (TK / 4) == 0 && THREADS % (TN / 4) == 0, "the loaders' rows must not straddle threads");

// This thread's share of one phase: its first A float4 at tile (a_r, a_c), B's at (b_r, b_c).
struct Loader {
    u32 a_r, a_c, b_r, b_c;
    u64 a_off, b_off;
};

template <bool BV>
__device__ __forceinline__ Loader loader(u32 tid, u32 row0, u32 col0, u32 k, u32 n) {
    Loader l;
    l.a_r = tid / (TK / 4);
    l.a_c = tid % (TK / 4) * 4;
    l.b_r = tid / (TN / 4);
    l.b_c = BV ? tid % (TN / 4) * 4 : tid % (TN / 4);
    l.a_off = u64(row0 + l.a_r) * k + l.a_c;
    l.b_off = u64(l.b_r) * n + col0 + l.b_c;
    return l;
}

template <bool AV, bool BV>
__device__ __forceinline__ void load_tiles(const float* A, const float* B, float4 (&ra)[A_LOADS],
                                           float4 (&rb)[B_LOADS], const Loader& l, u32 ph,
                                           u32 row0, u32 col0, u32 m, u32 n, u32 k) {
#pragma unroll
    for (int s = 0; s < A_LOADS; ++s)
        ra[s] = twin::load4<AV>(A, l.a_off + u64(s * A_ROW_STEP) * k, row0 + l.a_r + s * A_ROW_STEP < m,
                                ph + l.a_c, k);
#pragma unroll
    for (int s = 0; s < B_LOADS; ++s)
        rb[s] = twin::load4<BV, BV ? 1 : SPREAD>(B, l.b_off + u64(s * B_ROW_STEP) * n,
                                                 ph + l.b_r + s * B_ROW_STEP < k, col0 + l.b_c, n);
}

template <bool BV>
__device__ __forceinline__ void store_tiles(float (*As)[AS], float (*Bs)[TN], const float4 (&ra)[A_LOADS],
                                            const float4 (&rb)[B_LOADS], const Loader& l) {
#pragma unroll
    for (int s = 0; s < A_LOADS; ++s) {
        const u32 r = l.a_r + s * A_ROW_STEP;
        As[l.a_c + 0][r] = ra[s].x; As[l.a_c + 1][r] = ra[s].y;
        As[l.a_c + 2][r] = ra[s].z; As[l.a_c + 3][r] = ra[s].w;
    }
#pragma unroll
    for (int s = 0; s < B_LOADS; ++s) {
        float* row = Bs[l.b_r + s * B_ROW_STEP];
        if (BV) {
            *reinterpret_cast<float4*>(row + l.b_c) = rb[s];
        } else {
            row[l.b_c] = rb[s].x; row[l.b_c + SPREAD] = rb[s].y;
            row[l.b_c + 2 * SPREAD] = rb[s].z; row[l.b_c + 3 * SPREAD] = rb[s].w;
        }
    }
}

// TK steps of the 8 x 8 outer product: per k, SUB_M + SUB_N LDS.128 feed 64 FFMA.
__device__ __forceinline__ void compute(const float (*As)[AS], const float (*Bs)[TN], u32 am, u32 bn,
                                        float (&acc)[THREAD_M][THREAD_N]) {
#pragma unroll
    for (int kk = 0; kk < TK; ++kk) {
        float af[THREAD_M], bf[THREAD_N];
#pragma unroll
        for (int i = 0; i < SUB_M; ++i) {
            const float4 a = *reinterpret_cast<const float4*>(&As[kk][am + i * M_STEP]);
            af[4 * i] = a.x; af[4 * i + 1] = a.y; af[4 * i + 2] = a.z; af[4 * i + 3] = a.w;
        }
#pragma unroll
        for (int j = 0; j < SUB_N; ++j) {
            const float4 b = *reinterpret_cast<const float4*>(&Bs[kk][bn + j * N_STEP]);
            bf[4 * j] = b.x; bf[4 * j + 1] = b.y; bf[4 * j + 2] = b.z; bf[4 * j + 3] = b.w;
        }
#pragma unroll
        for (int i = 0; i < THREAD_M; ++i)
#pragma unroll
            for (int j = 0; j < THREAD_N; ++j) acc[i][j] += af[i] * bf[j];
    }
}

template <bool BV>
__device__ __forceinline__ void epilogue(float* C, const float (&acc)[THREAD_M][THREAD_N], float alpha,
                                         float beta, u32 row0, u32 col0, u32 am, u32 bn, u32 m, u32 n) {
#pragma unroll
    for (int i = 0; i < THREAD_M; ++i) {
        const u32 row = row0 + am + i / 4 * M_STEP + i % 4;
#pragma unroll
        for (int j4 = 0; j4 < SUB_N; ++j4) {
            const u32 col = col0 + bn + j4 * N_STEP;
            const u64 off = u64(row) * n + col;
            const float4 out = beta == 0.f
                ? twin::ax4(alpha, &acc[i][4 * j4])
                : twin::axpby4(alpha, &acc[i][4 * j4], beta, twin::load4<BV>(C, off, row < m, col, n));
            twin::store4<BV>(C, off, row < m, col, n, out);
        }
    }
}

// The raw sum (alpha 1, beta 0) of the rows i whose bit is set in `rows` (k9sk's parts of a
// tile); i is unrolled, so acc stays in registers
template <bool BV>
__device__ __forceinline__ void epilogue_rows(float* P, const float (&acc)[THREAD_M][THREAD_N], u32 rows,
                                              u32 row0, u32 col0, u32 am, u32 bn, u32 m, u32 n) {
#pragma unroll
    for (int i = 0; i < THREAD_M; ++i) {
        if (!(rows >> i & 1u)) continue;
        const u32 row = row0 + am + i / 4 * M_STEP + i % 4;
#pragma unroll
        for (int j4 = 0; j4 < SUB_N; ++j4) {
            const u32 col = col0 + bn + j4 * N_STEP;
            twin::store4<BV>(P, u64(row) * n + col, row < m, col, n, twin::ax4(1.f, &acc[i][4 * j4]));
        }
    }
}

}  // namespace wt

// A kernel under the Numba level's launch bounds (_warptile.jit)
#define WT_KERNEL extern "C" __global__ void __launch_bounds__(wt::THREADS, wt::MIN_BLOCKS)

#define WARPTILE_KERNELS(LEVEL, body)                                                          \
    WT_KERNEL LEVEL(SGEMM_ARGS) { body<true, true>(M, N, K, alpha, A, B, beta, C); }           \
    WT_KERNEL LEVEL##_edge(SGEMM_ARGS) { body<false, false>(M, N, K, alpha, A, B, beta, C); }  \
    WT_KERNEL LEVEL##_bc(SGEMM_ARGS) { body<false, true>(M, N, K, alpha, A, B, beta, C); }     \
    WT_KERNEL LEVEL##_a(SGEMM_ARGS) { body<true, false>(M, N, K, alpha, A, B, beta, C); }
