// k9's stage ring (numba_gemm/sgemm/_async_stages.py in CUDA C): K tiles copied global -> shared
// by cp.async, WT_STAGES deep, one commit group per tile, wait_group STAGES-2 + one barrier per
// tile. A is not transposed (cp.async cannot): a stage's A tile is [TK/4 chunks][TM rows][4 k] (+ a pad per chunk),
// and a lane's 8 rows are LANES_M apart (am + {0, 8, 16, 24} + {0, 32}) so that the lanes of a
// column read 8 consecutive chunks, one LDS.128 each. Copies outside the matrix are zero-fills;
// rows that are not 16-byte aligned copy 4 bytes at a time (cp.async.ca), each float checked.
#pragma once
#include "ptx.cuh"
#include "warptile.cuh"

#ifndef WT_STAGES
#error "WT_STAGES comes from the Numba level's STAGES (numba_gemm.twins.defines)"
#endif

namespace wt {

constexpr int STAGES = WT_STAGES;
// chunks TM * 4 + 128 / TK floats apart: the chunks one wavefront of copies writes on different banks
constexpr int CHUNK = TM * 4 + 128 / TK, A_FLOATS = TK / 4 * CHUNK, STAGE = A_FLOATS + TK * TN;
static_assert(CHUNK % 4 == 0, "chunks 16-byte aligned");
static_assert(STAGES >= 2, "a cp.async ring needs at least 2 stages");

// One float4 of A (columns col..col+3 of a row) or of B (SPREAD apart in the 32-bit form) into
// shared address dst, or zeros where it lies outside the matrix.
template <bool VEC, int SPREAD>
__device__ __forceinline__ void copy4(u32 dst, const float* X, u64 off, bool row_ok, u32 col, u32 ncols) {
    if (VEC) {
        const bool ok = row_ok && col < ncols;                        // ncols % 4 == 0: all or none
        cp_async16(dst, ok ? X + off : X, ok ? 16 : 0);
        return;
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const bool ok = row_ok && col + q * SPREAD < ncols;
        cp_async4(dst + 4 * SPREAD * q, ok ? X + off + q * SPREAD : X, ok ? 4 : 0);
    }
}

// This thread's share of one K tile into the stage at shared address stage. a_dst, b_dst: byte
// offsets of its first A chunk and B float4 in a stage; (a_row, a_col), (b_row, b_col): their
// matrix elements (as _async_stages.issue).
template <bool AV, bool BV>
__device__ __forceinline__ void issue(u32 stage, const float* A, const float* B, u64 a_off, u64 b_off, u32 a_dst,
                                      u32 b_dst, u32 a_row, u32 a_col, u32 b_row, u32 b_col, u32 m, u32 n, u32 k) {
#pragma unroll
    for (int s = 0; s < A_LOADS; ++s)
        copy4<AV, 1>(stage + a_dst + s * A_ROW_STEP * 16, A, a_off + u64(s * A_ROW_STEP) * k,
                     a_row + s * A_ROW_STEP < m, a_col, k);
#pragma unroll
    for (int s = 0; s < B_LOADS; ++s)
        copy4<BV, BV ? 1 : SPREAD>(stage + b_dst + s * B_ROW_STEP * TN * 4, B, b_off + u64(s * B_ROW_STEP) * n,
                                   b_row + s * B_ROW_STEP < k, b_col, n);
}

// One stage: per chunk of 4 k, THREAD_M LDS.128 (a row's 4 k each), then per k SUB_N LDS.128
// of B and the 8 x 8 outer product.
__device__ __forceinline__ void compute_chunks(const float* st, u32 am, u32 bn, float (&acc)[THREAD_M][THREAD_N]) {
#pragma unroll
    for (int c = 0; c < TK / 4; ++c) {
        float af[THREAD_M][4];                                        // 4 k of each of the lane's rows
#pragma unroll
        for (int i = 0; i < THREAD_M; ++i) {
            const float4 a = *reinterpret_cast<const float4*>(st + c * CHUNK + 4 * (am + i / 4 * M_STEP + i % 4 * LANES_M));
            af[i][0] = a.x; af[i][1] = a.y; af[i][2] = a.z; af[i][3] = a.w;
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            float bf[THREAD_N];
#pragma unroll
            for (int j = 0; j < SUB_N; ++j) {
                const float4 b = *reinterpret_cast<const float4*>(st + A_FLOATS + (4 * c + q) * TN + bn + j * N_STEP);
                bf[4 * j] = b.x; bf[4 * j + 1] = b.y; bf[4 * j + 2] = b.z; bf[4 * j + 3] = b.w;
            }
#pragma unroll
            for (int i = 0; i < THREAD_M; ++i)
#pragma unroll
                for (int j = 0; j < THREAD_N; ++j) acc[i][j] += af[i][q] * bf[j];
        }
    }
}

template <bool AV, bool BV>
__device__ __forceinline__ void async_stages(int M, int N, int K, float alpha, const float* __restrict__ A,
                                             const float* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ __align__(16) float ring[STAGES * STAGE];
    const u32 lane = threadIdx.x, warp = threadIdx.y, tid = warp * 32 + lane;
    const u32 m = M, n = N, k = K;
    const u32 row0 = blockIdx.y * TM, col0 = blockIdx.x * TN;
    Loader l = loader<BV>(tid, row0, col0, k, n);
    const u32 am = warp / WARPS_N * WM + lane / LANES_N;              // rows apart: no * 4
    const u32 bn = warp % WARPS_N * WN + lane % LANES_N * 4;
    const u32 base = smem_u32(ring);
    const u32 a_dst = (l.a_c / 4 * CHUNK + 4 * l.a_r) * 4, b_dst = (A_FLOATS + l.b_r * TN + l.b_c) * 4;
    float acc[THREAD_M][THREAD_N] = {};
    u32 wr = 0, nxt = 0;                                              // stage to fill, its first k
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        issue<AV, BV>(base + wr * 4, A, B, l.a_off, l.b_off, a_dst, b_dst, row0 + l.a_r, nxt + l.a_c, nxt + l.b_r,
                      col0 + l.b_c, m, n, k);
        cp_async_commit();
        l.a_off += TK;
        l.b_off += u64(TK) * n;
        nxt += TK;
        wr += STAGE;
    }
    u32 rd = 0;
#pragma unroll 1   // as the Numba level's while loop: one tile per trip
    for (u32 ph = 0; ph < k; ph += TK) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        issue<AV, BV>(base + wr * 4, A, B, l.a_off, l.b_off, a_dst, b_dst, row0 + l.a_r, nxt + l.a_c, nxt + l.b_r,
                      col0 + l.b_c, m, n, k);
        cp_async_commit();
        compute_chunks(ring + rd, am, bn, acc);
        l.a_off += TK;
        l.b_off += u64(TK) * n;
        nxt += TK;
        wr = wr < (STAGES - 1) * STAGE ? wr + STAGE : 0;
        rd = rd < (STAGES - 1) * STAGE ? rd + STAGE : 0;
    }
    cp_async_wait<0>();
    epilogue<BV, LANES_M>(C, acc, alpha, beta, row0, col0, am, bn, m, n);
}

}  // namespace wt
