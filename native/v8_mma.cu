// v8 - WMMA replaced by inline PTX: ldmatrix + mma.sync.m16n8k16, padding replaced by the
// 128-byte XOR swizzle.
//
// C (M x N, fp32) = alpha * A (M x K) @ B (K x N) + beta * C; A, B fp16 or bf16, row-major.
//
// Tile (default; -DHG_BM/BN/STAGES/WARPS_M/WARPS_N/MIN_BLOCKS/FRAG_PIPE override it, see
// namespace hg): 128 x 256 x 64, 4-stage cp.async pipeline (4 x 48 KB of shared memory), 256
// threads = 8 warps as 2 (m) x 4 (n), each warp 64 x 64 of C = 4 x 8 mma tiles of 16 x 8 (128
// fp32 accumulators per thread). Per 16-wide k step a warp issues 4 ldmatrix for A, 4 ldmatrix.trans
// for B and 32 mma: 8 shared loads of 512 B feed 32 x 4096 FLOPs, so shared-memory bandwidth
// stays below the tensor pipe's demand (a 64 x 32 warp tile needs 6 loads per 16 mma).
//
// Shared layout: every tile is made of "panels" of 128-byte rows (64 halves). A's tile is one
// panel of 128 rows (m) x 64 k; B's tile is 4 panels of 64 rows (k) x 64 n. Chunk c (16 B) of
// row r is stored at chunk c ^ (r % 8): the 8 rows an ldmatrix reads sit in 8 different
// 16-byte bank groups, with no padding. With 1024-byte aligned panels this is byte for byte
// the layout TMA's SWIZZLE_128B writes (v10 loads the same tiles by TMA, reads them the same).
//
// Edges: cp.async with src-size 0 zero-fills chunks past M, N, K; masked stores. Rows that are
// not 16-byte aligned (K or N % 8 != 0, or an unaligned base) fall back to element-wise loads.
// 64-bit offsets wherever a row index multiplies a leading dimension.
#include "ptx.cuh"

namespace hg {

// The tile configuration is compile-time and may be overridden with -D options (the host passes
// them through NVRTC; they are part of the cubin cache key). The defaults are the shipped tile.
#ifndef HG_BM
#define HG_BM 128
#endif
#ifndef HG_BN
#define HG_BN 256
#endif
#ifndef HG_BK
#define HG_BK 64
#endif
#ifndef HG_STAGES
#define HG_STAGES 4
#endif
#ifndef HG_WARPS_M
#define HG_WARPS_M 2
#endif
#ifndef HG_WARPS_N
#define HG_WARPS_N 4
#endif
#ifndef HG_MIN_BLOCKS          // __launch_bounds__ minimum blocks per SM: caps registers
#define HG_MIN_BLOCKS 1
#endif
#ifndef HG_FRAG_PIPE           // 1: load the next k16 step's fragments before this step's mma
#define HG_FRAG_PIPE 0
#endif

constexpr int BM = HG_BM, BN = HG_BN, BK = HG_BK, STAGES = HG_STAGES;
constexpr int WARPS_M = HG_WARPS_M, WARPS_N = HG_WARPS_N, THREADS = 32 * WARPS_M * WARPS_N;
constexpr int MIN_BLOCKS = HG_MIN_BLOCKS;
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;     // warp tile (default 64 x 64)
constexpr int MT = WM / 16, NT = WN / 8;                 // mma tiles per warp (default 4 x 8)
constexpr u32 A_BYTES = BM * BK * 2;                     // one panel of BM 128-byte rows
constexpr u32 B_PANEL = BK * 128;                        // 8 KB: 64 k-rows x 64 n
constexpr u32 B_BYTES = (BN / 64) * B_PANEL;
constexpr u32 STAGE_BYTES = A_BYTES + B_BYTES;           // default 48 KB, a multiple of 1024
// Dynamic shared memory the host must give: STAGES * STAGE_BYTES + 1024 (slack to align the
// base to 1024 bytes); 197,632 bytes for the default tile.

// Loader geometry: A is BM rows x 8 chunks, B is BK rows x BN/8 chunks; each thread copies
// A_ITERS chunks of A rows A_ROWSTEP apart and B_ITERS chunks of B rows B_ROWSTEP apart.
constexpr int A_ITERS = BM * 8 / THREADS, A_ROWSTEP = THREADS / 8;
constexpr int B_CPR = BN / 8, B_ITERS = BK * B_CPR / THREADS, B_ROWSTEP = THREADS / B_CPR;

static_assert(BK * 2 == 128, "the swizzle and the ldmatrix XOR walk assume 128-byte A rows");
static_assert(BM % WARPS_M == 0 && BN % WARPS_N == 0 && WM % 16 == 0 && WN % 16 == 0,
              "warp tiles are whole 16 x 16 mma pairs");
static_assert(WN % 64 == 0 || 64 % WN == 0, "a warp's B columns lie within, or span whole, panels");
static_assert(BN % 64 == 0 && STAGE_BYTES % 1024 == 0, "B is whole 64-column panels");
static_assert(THREADS % 64 == 0 && A_ITERS * THREADS == BM * 8, "A rows per pass keep row % 8");
static_assert(THREADS % B_CPR == 0 && B_ITERS * THREADS == BK * B_CPR &&
              (B_ROWSTEP & (B_ROWSTEP - 1)) == 0, "B rows per pass: a power of two");

typedef unsigned short bits16;

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

// ---- the consumer side, shared with v10 -----------------------------------------------------

// This lane's ldmatrix addresses relative to a stage, swizzle included (computed once).
// A (x4): matrices (m0-7,k0-7) (m8-15,k0-7) (m0-7,k8-15) (m8-15,k8-15) = mma's a0..a3; lane
// supplies row lane%16, logical chunk lane/16. Chunk 2kk + lane/16 of row r is at
// (2kk + lane/16) ^ (r%8) = ((lane/16) ^ (r%8)) ^ 2kk, so a k step is an XOR with kk*32 bytes.
__device__ __forceinline__ u32 a_lane_offset(int warp_m, int lane) {
    return warp_m * (WM * 128) + swz128(lane % 16, lane / 16);
}
// B (x4.trans): matrices (k0-7,n0-7) (k8-15,n0-7) (k0-7,n8-15) (k8-15,n8-15) = b0b1, b2b3 of
// two n8 tiles; lane supplies k-row lane%8 + 8*((lane/8)%2), chunk c0 + lane/16, where the
// warp's first column is chunk c0 of its panel. The next 16 columns are 2 chunks on: an XOR
// with j*32 bytes (c0 is a multiple of WN/8, so c0 + 2j never carries into c0's bits); every
// 4th j starts the next panel.
__device__ __forceinline__ u32 b_lane_offset(int warp_n, int lane) {
    const int col0 = warp_n * WN;
    return A_BYTES + (col0 / 64) * B_PANEL +
           swz128(lane % 8 + 8 * ((lane / 8) % 2), (col0 % 64) / 8 + lane / 16);
}

__device__ __forceinline__ void load_frags(u32 (&af)[MT][4], u32 (&bf)[NT / 2][4], u32 a_thr,
                                           u32 b_thr, int kk) {
    #pragma unroll
    for (int i = 0; i < MT; ++i) ldmatrix_x4(af[i], (a_thr + i * 16 * 128) ^ (kk * 32));
    #pragma unroll
    for (int j = 0; j < NT / 2; ++j)
        ldmatrix_x4_trans(bf[j], (b_thr + kk * 16 * 128 + (j / 4) * B_PANEL) ^ ((j % 4) * 32));
}

template <typename T>
__device__ __forceinline__ void mma_frags(float (&acc)[MT][NT][4], const u32 (&af)[MT][4],
                                          const u32 (&bf)[NT / 2][4]) {
    #pragma unroll
    for (int i = 0; i < MT; ++i)
        #pragma unroll
        for (int j = 0; j < NT / 2; ++j) {
            mma_16816(acc[i][2 * j], af[i], bf[j][0], bf[j][1], T());
            mma_16816(acc[i][2 * j + 1], af[i], bf[j][2], bf[j][3], T());
        }
}

// One BK-deep stage: 4 k16 steps of MT + NT/2 ldmatrix and MT*NT mma (default 4 + 4 and 32).
// a_thr, b_thr: stage base + the lane offsets above; the stage base must be 1024-byte aligned
// (the XORs touch bits 4..6). HG_FRAG_PIPE double-buffers the fragments: step kk+1's ldmatrix
// are issued before step kk's mma, so their latency hides behind 32 mma of the same warp
// instead of relying on the other warps of the scheduler (costs MT*4 + NT*2 registers).
template <typename T>
__device__ __forceinline__ void mma_stage(float (&acc)[MT][NT][4], u32 a_thr, u32 b_thr) {
#if HG_FRAG_PIPE
    u32 af[2][MT][4], bf[2][NT / 2][4];
    load_frags(af[0], bf[0], a_thr, b_thr, 0);
    #pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
        if (kk + 1 < BK / 16) load_frags(af[(kk + 1) % 2], bf[(kk + 1) % 2], a_thr, b_thr, kk + 1);
        mma_frags<T>(acc, af[kk % 2], bf[kk % 2]);
    }
#else
    #pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
        u32 af[MT][4], bf[NT / 2][4];
        load_frags(af, bf, a_thr, b_thr, kk);
        mma_frags<T>(acc, af, bf);
    }
#endif
}

// Epilogue: accumulator (i, j) holds rows g, g+8 and columns 2q, 2q+1 of a 16 x 8 tile.
// Masked; float2 stores when C rows allow; beta == 0 never reads C.
__device__ __forceinline__ void store_tile(const float (&acc)[MT][NT][4], float* __restrict__ C,
                                           int M, int N, int m0, int n0, int warp_m, int warp_n,
                                           int lane, float alpha, float beta, bool vec_c) {
    const int g = lane / 4, q = lane % 4;
    #pragma unroll
    for (int i = 0; i < MT; ++i) {
        #pragma unroll
        for (int h = 0; h < 2; ++h) {
            const long long row = (long long)m0 + warp_m * WM + i * 16 + g + 8 * h;
            if (row >= M) continue;
            float* crow = C + row * N;
            #pragma unroll
            for (int j = 0; j < NT; ++j) {
                const long long col = (long long)n0 + warp_n * WN + j * 8 + 2 * q;
                float v0 = alpha * acc[i][j][2 * h], v1 = alpha * acc[i][j][2 * h + 1];
                if (vec_c && col + 1 < N) {
                    float2* c2 = reinterpret_cast<float2*>(crow + col);
                    if (beta != 0.0f) {
                        const float2 old = *c2;
                        v0 += beta * old.x;
                        v1 += beta * old.y;
                    }
                    *c2 = make_float2(v0, v1);
                } else {
                    if (col < N) crow[col] = beta != 0.0f ? v0 + beta * crow[col] : v0;
                    if (col + 1 < N) crow[col + 1] = beta != 0.0f ? v1 + beta * crow[col + 1] : v1;
                }
            }
        }
    }
}

// The whole block computes tile (bm, bn). FAST: both operands take cp.async (16-byte rows).
template <typename T, bool FAST>
__device__ __forceinline__ void block_tile(const bits16* __restrict__ A, const bits16* __restrict__ B,
                                           float* __restrict__ C, int M, int N, int K,
                                           float alpha, float beta, bool vec_a, bool vec_b,
                                           bool vec_c, int bm, int bn, char* smem_raw) {
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
    const int m0 = bm * BM, n0 = bn * BN;

    // 1024-aligned base: the XOR walks below flip address bits 4..6 only.
    const u32 raw = smem_u32(smem_raw);
    const u32 base = (raw + 1023u) & ~1023u;
    char* const base_generic = smem_raw + (base - raw);

    // ---- producer-side precompute: each thread copies A_ITERS chunks of A and B_ITERS of B
    // per stage (default 4 and 8).
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
    #pragma unroll
    for (int i = 0; i < MT; ++i)
        #pragma unroll
        for (int j = 0; j < NT; ++j)
            #pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

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

// ---- which tile a block computes -------------------------------------------------------------
#ifndef HG_TILE_ORDER_DEFINED
// v8: a 1-D grid in row-major tile order (n fastest), as the seed's v8.
__device__ __forceinline__ void tile_of(int bid, int grid_m, int grid_n, int, int, int& bm, int& bn) {
    bm = bid / grid_n;
    bn = bid - bm * grid_n;
}
#define HG_ENTRY(dt) v8_mma_##dt
#endif

#ifndef HG_NO_ENTRY
#define HG_ARGS const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,      \
    float* __restrict__ C, int M, int N, int K, float alpha, float beta, int vec_a, int vec_b, \
    int vec_c, int super_m, int super_n

template <typename T>
__device__ __forceinline__ void hgemm_entry(HG_ARGS) {
    extern __shared__ char smem[];
    const int grid_m = (M + hg::BM - 1) / hg::BM, grid_n = (N + hg::BN - 1) / hg::BN;
    int bm, bn;
    tile_of(blockIdx.x, grid_m, grid_n, super_m, super_n, bm, bn);
    if (vec_a && vec_b)
        hg::block_tile<T, true>(A, B, C, M, N, K, alpha, beta, true, true, vec_c, bm, bn, smem);
    else
        hg::block_tile<T, false>(A, B, C, M, N, K, alpha, beta, vec_a, vec_b, vec_c, bm, bn, smem);
}

extern "C" __global__ void __launch_bounds__(hg::THREADS, hg::MIN_BLOCKS) HG_ENTRY(f16)(HG_ARGS) {
    hgemm_entry<__half>(A, B, C, M, N, K, alpha, beta, vec_a, vec_b, vec_c, super_m, super_n);
}
#ifndef HG_NO_BF16   // tile sweeps time fp16 only and compile half as much
extern "C" __global__ void __launch_bounds__(hg::THREADS, hg::MIN_BLOCKS) HG_ENTRY(bf16)(HG_ARGS) {
    hgemm_entry<__nv_bfloat16>(A, B, C, M, N, K, alpha, beta, vec_a, vec_b, vec_c, super_m, super_n);
}
#endif
#endif  // HG_NO_ENTRY
