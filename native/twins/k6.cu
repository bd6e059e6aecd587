// k6 twin: 128-bit memory instructions. Block 32 x 4, tile 32 x 128 x 32, 8 x 4 outputs per
// thread at 4 consecutive columns; A tile stored transposed (As[k][m]); float4 global loads
// by linear thread id (2 of A, 8 of B per thread per phase); 3 LDS.128 per 32 FMAs.
// Four kernels by which operands' rows are 16-byte aligned: k6 (all float4), k6_bc (A in
// 32-bit), k6_a (B and C in 32-bit), k6_edge (all 32-bit). The three with a 32-bit operand
// split blocks: interior ones (C tile inside the matrix) take unchecked loads in every phase
// but the K tail, and unchecked stores.
#include "sgemm.cuh"
#include "tile.cuh"

namespace k6_twin {

constexpr int TM = TILE_M, TN = TILE_N, TK = TILE_K, THREADS = BLOCK_X * BLOCK_Y;
static_assert(THREAD_M == 8 && THREAD_N == 4, "k6: a thread's rows of A are two float4s, its columns of B one");
static_assert(BLOCK_X * THREAD_N == TN && BLOCK_Y * THREAD_M == TM, "k6: the threads cover the tile once");
static_assert(TK % 4 == 0 && THREADS % (TK / 4) == 0 && TM * TK % (4 * THREADS) == 0 &&
              TK * TN % (4 * THREADS) == 0, "k6: every thread loads whole float4s of each tile");
constexpr int A_LOADS = TM * TK / 4 / THREADS;   // 2
constexpr int B_LOADS = TK * TN / 4 / THREADS;   // 8
constexpr int A_ROW_STEP = THREADS / (TK / 4);   // 16
constexpr int B_ROW_STEP = THREADS / (TN / 4);   // 4

template <bool AV, bool BV, bool SPLIT>
__device__ __forceinline__ void body(SGEMM_ARGS) {
    __shared__ __align__(16) float As[TK][TM];
    __shared__ __align__(16) float Bs[TK][TN];
    constexpr int SPREAD = BV ? 1 : TN / 4;      // 32-bit B: four floats TN / 4 apart
    const u32 tx = threadIdx.x, ty = threadIdx.y, tid = ty * BLOCK_X + tx;
    const u32 m = M, n = N, k = K;
    const u32 row0 = blockIdx.y * TM, col0 = blockIdx.x * TN;
    const u32 i0 = ty * THREAD_M, j0 = tx * THREAD_N;
    const bool inside = SPLIT && row0 + TM <= m && col0 + TN <= n;
    const u32 k_in = k - k % TK;
    const u32 a_r = tid / (TK / 4), a_c = tid % (TK / 4) * 4;
    float acc[THREAD_M][THREAD_N];
#pragma unroll
    for (int r = 0; r < THREAD_M; ++r)
#pragma unroll
        for (int j = 0; j < THREAD_N; ++j) acc[r][j] = 0.f;
    u64 a_off = u64(row0 + a_r) * k + a_c;
    const u32 b_c = BV ? j0 : tx;
    u64 b_off = u64(ty) * n + col0 + b_c;
    for (u32 ph = 0; ph < k; ph += TK, a_off += TK, b_off += u64(TK) * n) {
        const bool fast = inside && ph < k_in;
#pragma unroll
        for (int s = 0; s < A_LOADS; ++s) {
            const u32 r = a_r + s * A_ROW_STEP;
            const u64 off = a_off + u64(s * A_ROW_STEP) * k;
            const float4 v = fast ? twin::load4_in<AV>(A, off)
                                  : twin::load4<AV>(A, off, row0 + r < m, ph + a_c, k);
            As[a_c + 0][r] = v.x; As[a_c + 1][r] = v.y; As[a_c + 2][r] = v.z; As[a_c + 3][r] = v.w;
        }
#pragma unroll
        for (int s = 0; s < B_LOADS; ++s) {
            const u32 r = ty + s * B_ROW_STEP;
            const u64 off = b_off + u64(s * B_ROW_STEP) * n;
            const float4 v = fast ? twin::load4_in<BV, SPREAD>(B, off)
                                  : twin::load4<BV, SPREAD>(B, off, ph + r < k, col0 + b_c, n);
            if (BV) {
                *reinterpret_cast<float4*>(&Bs[r][b_c]) = v;
            } else {
                Bs[r][b_c] = v.x; Bs[r][b_c + SPREAD] = v.y; Bs[r][b_c + 2 * SPREAD] = v.z;
                Bs[r][b_c + 3 * SPREAD] = v.w;
            }
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TK; ++kk) {
            const float4 lo = *reinterpret_cast<const float4*>(&As[kk][i0]);
            const float4 hi = *reinterpret_cast<const float4*>(&As[kk][i0 + 4]);
            const float4 b4 = *reinterpret_cast<const float4*>(&Bs[kk][j0]);
            const float a[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
            const float b[4] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    acc[r][j] += a[r] * b[j];
                    acc[r + 4][j] += a[r + 4] * b[j];
                }
        }
        __syncthreads();
    }
    const u32 col = col0 + j0;
#pragma unroll
    for (int r = 0; r < THREAD_M; ++r) {
        const u32 row = row0 + i0 + r;
        const u64 off = u64(row) * n + col;
        float4 out;
        if (beta == 0.f) out = twin::ax4(alpha, acc[r]);
        else if (inside) out = twin::axpby4(alpha, acc[r], beta, twin::load4_in<BV>(C, off));
        else out = twin::axpby4(alpha, acc[r], beta, twin::load4<BV>(C, off, row < m, col, n));
        if (inside) twin::store4_in<BV>(C, off, out);
        else twin::store4<BV>(C, off, row < m, col, n, out);
    }
}

}  // namespace k6_twin

extern "C" __global__ void k6(SGEMM_ARGS) { k6_twin::body<true, true, false>(M, N, K, alpha, A, B, beta, C); }
extern "C" __global__ void __launch_bounds__(k6_twin::THREADS, 7) k6_edge(SGEMM_ARGS) {
    k6_twin::body<false, false, true>(M, N, K, alpha, A, B, beta, C);
}
extern "C" __global__ void __launch_bounds__(k6_twin::THREADS, 7) k6_bc(SGEMM_ARGS) {
    k6_twin::body<false, true, true>(M, N, K, alpha, A, B, beta, C);
}
extern "C" __global__ void __launch_bounds__(k6_twin::THREADS, 7) k6_a(SGEMM_ARGS) {
    k6_twin::body<true, false, true>(M, N, K, alpha, A, B, beta, C);
}
