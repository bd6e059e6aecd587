// k6gv twin: GEMV-style SGEMM for M <= TILE_M (8; k6gv16.cu compiles it at 16). Block 32 x 8
// (8 warps), tile TILE_M x 128 x 64; lane l owns columns 4l..4l+3 (float4 B) or l, l+32, l+64,
// l+96 (32-bit B) and all TILE_M rows; warp w takes k rows 8w..8w+7 of each 64-deep phase, B
// straight from global memory into registers; A's TILE_M x 64 chunk TILE_M/4 floats per thread
// (rows r, r+4, ...) into a double-buffered, transposed As[k][m] (one barrier per phase). At the
// end of the slice the 8 warps' partial tiles meet in shared memory 8 rows at a time, and warp w
// adds row 8g+w over warps 0..7 in that order. gridDim.z = S slices of K
// (kslice elements each, a multiple of 64). S == 1: the CTA writes C. S > 1: CTA (x, y, z)
// stores its raw sums at P + z*M*N, and the last CTA of the tile to arrive adds the S slices in
// order and writes C (splitk_in_kernel.cuh): one launch.
// Two kernels by whether the rows of B and C are 16-byte aligned: K6GV_VECTOR (float4 B and C)
// and K6GV_EDGE (32-bit), named k6gv and k6gv_edge unless the includer names them; A always
// moves 32 bits at a time. Every load is checked.
#include "sgemm.cuh"
#include "splitk_in_kernel.cuh"
#include "tile.cuh"

namespace k6gv_twin {

constexpr int TM = TILE_M, TN = TILE_N, TK = TILE_K, WARPS = BLOCK_Y, THREADS = BLOCK_X * BLOCK_Y;
constexpr int KW = TK / WARPS;                  // k rows of B per warp per phase: 8
constexpr int GROUPS = TM / WARPS;              // rows a warp owns after the block's sum
constexpr int A_LOADS = TM * TK / THREADS, A_ROW_STEP = THREADS / TK;   // floats of A, 4 rows apart
static_assert(BLOCK_X == 32 && TM % 4 == 0, "k6gv: a warp's lanes span the tile's columns, A's rows at k are float4s");
static_assert(BLOCK_X * THREAD_N == TN && TM % WARPS == 0 && THREAD_M == GROUPS && THREAD_N == 4,
              "k6gv: after the block's sum, warp w stores rows w, w+8, ..., a float4 per lane each");
static_assert(TK % WARPS == 0 && THREADS % TK == 0 && TM * TK == A_LOADS * THREADS,
              "k6gv: the warps split the phase, a thread loads A_LOADS floats of A's chunk, one column");

template <bool BV>
__device__ __forceinline__ void body(int M, int N, int K, int kslice, float alpha, const float* __restrict__ A,
                                     const float* __restrict__ B, float beta, float* __restrict__ C,
                                     float* __restrict__ P, unsigned* counters) {
    __shared__ __align__(16) float As[2 * TK][TM];          // two buffers of As[k][m]
    __shared__ __align__(16) float Red[WARPS * WARPS][TN];  // Red[w*8 + r][c]: warp w's partial, 8 rows
    constexpr int SPREAD = BV ? 1 : TN / 4;
    const u32 lane = threadIdx.x, w = threadIdx.y, tid = w * 32 + lane;
    const u32 m = M, n = N, k = K;
    const u32 row0 = blockIdx.y * TM, col0 = blockIdx.x * TN, z = blockIdx.z;
    const u32 k_lo = z * u32(kslice);                 // < K < 2^31: the sums below cannot wrap
    const u32 k_hi = min(k, k_lo + u32(kslice));
    const u32 b_c = BV ? lane * 4 : lane, col = col0 + b_c;
    const u32 a_r = tid / TK, a_c = tid % TK;          // a warp: 32 consecutive k of one row of A
    const float* Ap = A + (u64(row0 + a_r) * k + k_lo + a_c);
    const float* Bp = B + u64(k_lo + w * KW) * n;      // my first k row of B in the phase
    const u64 nn = n;
    float acc[TM][4];
#pragma unroll
    for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[r][j] = 0.f;
    u32 buf = 0;
    for (u32 k0 = k_lo; k0 < k_hi; k0 += TK, Ap += TK, Bp += TK * nn, buf ^= 1) {
        float4 rb[KW];
        const int rows_left = int(k_hi - k0) - int(w * KW);   // my k rows of the phase inside the slice
#pragma unroll
        for (int i = 0; i < KW; ++i) rb[i] = twin::load4<BV, SPREAD>(Bp + i * nn, col, i < rows_left, col, n);
#pragma unroll
        for (int t = 0; t < A_LOADS; ++t) {
            const u32 ar = a_r + t * A_ROW_STEP;
            As[buf * TK + a_c][ar] = (row0 + ar < m && k0 + a_c < k_hi) ? Ap[u64(t * A_ROW_STEP) * k] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < KW; ++i) {
            float a[TM];                               // A's TM rows at this k: TM/4 broadcasts
#pragma unroll
            for (int h = 0; h < TM / 4; ++h) {
                const float4 q = *reinterpret_cast<const float4*>(&As[buf * TK + w * KW + i][4 * h]);
                a[4 * h] = q.x; a[4 * h + 1] = q.y; a[4 * h + 2] = q.z; a[4 * h + 3] = q.w;
            }
            const float b[4] = {rb[i].x, rb[i].y, rb[i].z, rb[i].w};
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int r = 0; r < 4; ++r)
#pragma unroll
                    for (int h = 0; h < TM / 4; ++h) acc[4 * h + r][j] += a[4 * h + r] * b[j];
        }
    }
    const u32 j0 = lane * 4;
    float s[GROUPS][4];
#pragma unroll
    for (int g = 0; g < GROUPS; ++g) {                 // 8 rows of the tile at a time
        if (g > 0) __syncthreads();                    // every warp has read the previous group's sums
#pragma unroll
        for (int r = 0; r < WARPS; ++r) {
            const float* v = acc[g * WARPS + r];
            if (BV) {
                *reinterpret_cast<float4*>(&Red[w * WARPS + r][b_c]) = make_float4(v[0], v[1], v[2], v[3]);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) Red[w * WARPS + r][b_c + j * SPREAD] = v[j];
            }
        }
        __syncthreads();
        const float4 s4 = *reinterpret_cast<const float4*>(&Red[w][j0]);
        s[g][0] = s4.x; s[g][1] = s4.y; s[g][2] = s4.z; s[g][3] = s4.w;
#pragma unroll
        for (int v = 1; v < WARPS; ++v) {              // warp order: the same bits every run
            const float4 t = *reinterpret_cast<const float4*>(&Red[v * WARPS + w][j0]);
            s[g][0] += t.x; s[g][1] += t.y; s[g][2] += t.z; s[g][3] += t.w;
        }
    }
    const u32 ccol = col0 + j0;
    if (gridDim.z > 1) {              // park slice z's sums; the tile's last CTA adds all S in order
        const u64 mn = u64(m) * n;
#pragma unroll
        for (int g = 0; g < GROUPS; ++g) {
            const u32 row = row0 + g * WARPS + w;
            twin::store4<BV>(P, u64(z) * mn + u64(row) * n + ccol, row < m, ccol, n,
                             make_float4(s[g][0], s[g][1], s[g][2], s[g][3]));
        }
        if (!twin::arrive(counters, tid, gridDim.z)) return;
#pragma unroll
        for (int g = 0; g < GROUPS; ++g) {
            const u32 row = row0 + g * WARPS + w;
            twin::sum_slices4(P, u64(row) * n + ccol, mn, gridDim.z, row < m, ccol, n, s[g]);
        }
    }
#pragma unroll
    for (int g = 0; g < GROUPS; ++g) {
        const u32 row = row0 + g * WARPS + w;
        const u64 off = u64(row) * n + ccol;
        const float4 out = beta == 0.f ? twin::ax4(alpha, s[g])
                                       : twin::axpby4(alpha, s[g], beta, twin::load4<BV>(C, off, row < m, ccol, n));
        twin::store4<BV>(C, off, row < m, ccol, n, out);
    }
}

}  // namespace k6gv_twin

#ifndef K6GV_VECTOR
#define K6GV_VECTOR k6gv
#define K6GV_EDGE k6gv_edge
#endif
#define K6GV_ARGS int M, int N, int K, int kslice, float alpha, const float* __restrict__ A, \
                  const float* __restrict__ B, float beta, float* __restrict__ C, float* __restrict__ P, \
                  unsigned* counters
// 256 threads, 2 CTAs per SM: the Numba level's launch bounds (CTAS_PER_SM), at most 128 registers.
extern "C" __global__ void __launch_bounds__(k6gv_twin::THREADS, 2) K6GV_VECTOR(K6GV_ARGS) {
    k6gv_twin::body<true>(M, N, K, kslice, alpha, A, B, beta, C, P, counters);
}
extern "C" __global__ void __launch_bounds__(k6gv_twin::THREADS, 2) K6GV_EDGE(K6GV_ARGS) {
    k6gv_twin::body<false>(M, N, K, kslice, alpha, A, B, beta, C, P, counters);
}
