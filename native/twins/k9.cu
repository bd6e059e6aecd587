// k9 twin: k8 + B copied global -> shared by cp.async (numba_gemm/sgemm/k9_async_b.py in CUDA C).
// A keeps k8's path (load_a_tile into registers one tile ahead, store_a_tile transposed); B's
// float4s go straight into Bs[k][n] by cp.async, WT_STAGES - 1 tiles ahead in a ring of
// WT_STAGES stages, one commit group per tile, wait_group STAGES-2 + one barrier per tile. As
// has WT_STAGES buffers too, so one index names both tiles of a phase and k8's compute runs
// unchanged. Copies outside the matrix are zero-fills; where B's rows are not 16-byte aligned a
// float4 is four 4-byte cp.async.ca, SPREAD apart, each float checked. Tiles past K read nothing.
#include "ptx.cuh"
#include "warptile.cuh"

#ifndef WT_STAGES
#error "WT_STAGES comes from the Numba level's STAGES (numba_gemm.twins.defines)"
#endif

namespace wt {

constexpr int STAGES = WT_STAGES;
constexpr u32 B_STAGE = TK * TN * 4;                      // bytes of one B stage
static_assert(STAGES >= 2, "a cp.async ring needs at least 2 stages");

// This thread's B float4s of one K tile (first k: ph) into the stage at shared address stage,
// then one commit group. b_dst: byte offset of its first float4 in a stage.
template <bool BV>
__device__ __forceinline__ void issue_b(u32 stage, const float* B, const Loader& l, u32 b_dst, u32 ph, u32 col0,
                                        u32 n, u32 k) {
#pragma unroll
    for (int s = 0; s < B_LOADS; ++s) {
        const u32 dst = stage + b_dst + s * B_ROW_STEP * TN * 4;
        const u64 off = l.b_off + u64(s * B_ROW_STEP) * n;
        const bool row_ok = ph + l.b_r + s * B_ROW_STEP < k;
        const u32 col = col0 + l.b_c;
        if (BV) {
            const bool ok = row_ok && col < n;                 // n % 4 == 0: all four or none
            cp_async16(dst, ok ? B + off : B, ok ? 16 : 0);
        } else {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const bool ok = row_ok && col + q * SPREAD < n;
                cp_async4(dst + 4 * SPREAD * q, ok ? B + off + q * SPREAD : B, ok ? 4 : 0);
            }
        }
    }
    cp_async_commit();
}

template <bool AV, bool BV>
__device__ __forceinline__ void async_b(int M, int N, int K, float alpha, const float* __restrict__ A,
                                        const float* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ __align__(16) float As[STAGES][TK][AS];
    __shared__ __align__(16) float Bs[STAGES][TK][TN];
    const u32 lane = threadIdx.x, warp = threadIdx.y, tid = warp * 32 + lane;
    const u32 m = M, n = N, k = K;
    const u32 row0 = blockIdx.y * TM, col0 = blockIdx.x * TN;
    Loader l = loader<BV>(tid, row0, col0, k, n);
    const u32 am = warp / WARPS_N * WM + lane / LANES_N * 4;
    const u32 bn = warp % WARPS_N * WN + lane % LANES_N * 4;
    const u32 base = smem_u32(Bs), b_dst = (l.b_r * TN + l.b_c) * 4;
    float4 ra[A_LOADS];
    float acc[THREAD_M][THREAD_N] = {};
    u32 wr = 0, nxt = 0;                                     // B stage to fill (bytes), its first k
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        issue_b<BV>(base + wr, B, l, b_dst, nxt, col0, n, k);
        l.b_off += u64(TK) * n;
        nxt += TK;
        wr += B_STAGE;
    }
    load_a_tile<AV>(A, ra, l, 0, row0, m, k);
    store_a_tile(As[0], ra, l);
    cp_async_wait<STAGES - 2>();                             // B tile 0 has landed
    __syncthreads();
    u32 buf = 0;                                             // stage to multiply
#pragma unroll 1   // as the Numba level's while loop: one tile per trip
    for (u32 ph = 0; ph < k; ph += TK) {
        issue_b<BV>(base + wr, B, l, b_dst, nxt, col0, n, k);   // into the stage tile ph/TK - 1 used
        l.b_off += u64(TK) * n;
        nxt += TK;
        wr = wr < (STAGES - 1) * B_STAGE ? wr + B_STAGE : 0;
        l.a_off += TK;
        load_a_tile<AV>(A, ra, l, ph + TK, row0, m, k);
        compute(As[buf], Bs[buf], am, bn, acc);
        buf = buf < STAGES - 1 ? buf + 1 : 0;
        store_a_tile(As[buf], ra, l);
        cp_async_wait<STAGES - 2>();                         // B tile ph/TK + 1 has landed
        __syncthreads();
    }
    cp_async_wait<0>();                                      // the zero-fills past K
    epilogue<BV>(C, acc, alpha, beta, row0, col0, am, bn, m, n);
}

}  // namespace wt

template <bool AV, bool BV>
__device__ __forceinline__ void k9_body(SGEMM_ARGS) {
    wt::async_b<AV, BV>(M, N, K, alpha, A, B, beta, C);
}

WARPTILE_KERNELS(k9, k9_body)
