// k8e twin: k8p's copy kernel, k9's loop launched on the whole tiles only, the right strip's
// kernel (rows [0, M'), columns [N', pn)) and, where B and C serve in place, the K tail's kernel;
// the bottom strip is k6gv's (or k6gv16's) twin on views of the operands. The host (numba_gemm.measure.twins)
// launches them in the Numba level's order, on the level's workspace.
#include "unrolled_buffers.cuh"

// k8es.cu builds the copy, strip and tail kernels below under its own names (K8E_LEVEL) beside
// its own interior kernel
#ifndef K8E_LEVEL
#define K8E_LEVEL k8e
WT_KERNEL k8e(SGEMM_ARGS) { wt::k9_body<true, true>(M, N, K, alpha, A, B, beta, C); }
#endif
#define K8E_PASTE(level, suffix) level##suffix
#define K8E_NAME(level, suffix) K8E_PASTE(level, suffix)

// dst (dst_rows x dst_cols) = the top-left dst_rows x dst_cols of src (rows x cols), zero where
// src has no element: a thread per column, COPY_ROWS rows each, grid y strided past 65535.
constexpr u64 COPY_ROWS = 4;
extern "C" __global__ void K8E_NAME(K8E_LEVEL, _repitch)(const float* __restrict__ src, int rows, int cols,
                                       float* __restrict__ dst, int dst_rows, int dst_cols) {
    const u64 c = u64(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= u64(dst_cols)) return;
    for (u64 r0 = u64(blockIdx.y) * COPY_ROWS; r0 < u64(dst_rows); r0 += u64(gridDim.y) * COPY_ROWS)
        for (u64 r = r0; r < r0 + COPY_ROWS && r < u64(dst_rows); ++r)
            dst[r * dst_cols + c] = r < u64(rows) && c < u64(cols) ? src[r * cols + c] : 0.0f;
}

// C[:M, n0:ldb] = alpha*A @ B[:, n0:ldb] + beta*C[:M, n0:ldb] for 1 or 2 float4s of columns: a
// CTA per ROWS rows of A (K floats each, K % 4 == 0) whose warps split K, lane l of warp w at
// k = 128w + 4l, then 128 * EDGE_WARPS further on; the sums meet in shared memory and lane j of
// warp 0 adds output j over warps 0..7 and their lanes 0..31 in that order.
constexpr int EDGE_ROWS = 2, EDGE_WARPS = 8, EDGE_COLS = 8, EDGE_OUT = EDGE_ROWS * EDGE_COLS;
extern "C" __global__ void __launch_bounds__(32 * EDGE_WARPS)
K8E_NAME(K8E_LEVEL, _edge_columns)(int M, int K, int ldb, int n0, float alpha, const float* __restrict__ A,
                 const float* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ float Red[EDGE_WARPS][32][EDGE_OUT];
    const u32 lane = threadIdx.x, warp = threadIdx.y;
    const u64 row0 = u64(blockIdx.x) * EDGE_ROWS;
    const bool wide = ldb - n0 > 4;             // two float4s of B per k row, else one
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
    float acc[EDGE_ROWS][EDGE_COLS] = {};
    for (u64 kk = warp * 128 + lane * 4; kk < u64(K); kk += 128 * EDGE_WARPS) {
        float rb[4][EDGE_COLS];
#pragma unroll
        for (int i = 0; i < 4; ++i) {           // B's k rows kk .. kk+3, zero past the strip
            const u64 b_off = (kk + i) * ldb + n0;
            const float4 lo = twin::ld4(B, b_off), hi = wide ? twin::ld4(B, b_off + 4) : zero;
            const float v[EDGE_COLS] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
            for (int c = 0; c < EDGE_COLS; ++c) rb[i][c] = v[c];
        }
#pragma unroll
        for (int r = 0; r < EDGE_ROWS; ++r) {  // the CTA's rows past M add zeros
            const float4 a4 = row0 + r < u64(M) ? twin::ld4(A, (row0 + r) * K + kk) : zero;
            const float a[4] = {a4.x, a4.y, a4.z, a4.w};
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int c = 0; c < EDGE_COLS; ++c) acc[r][c] += a[i] * rb[i][c];
        }
    }
#pragma unroll
    for (int r = 0; r < EDGE_ROWS; ++r)
#pragma unroll
        for (int c = 0; c < EDGE_COLS; ++c) Red[warp][lane][r * EDGE_COLS + c] = acc[r][c];
    __syncthreads();                            // every warp reaches it: none returned early
    if (warp == 0 && lane < u32(EDGE_OUT)) {
        float s = 0.0f;
        for (int w = 0; w < EDGE_WARPS; ++w)    // warp, then lane order: the same bits every run
            for (int j = 0; j < 32; ++j) s += Red[w][j][lane];
        const u64 row = row0 + lane / EDGE_COLS, col = u64(n0) + lane % EDGE_COLS;
        if (row < u64(M) && col < u64(ldb)) twin::store_c(C, row * ldb + col, s, alpha, beta);
    }
}

// C += alpha*A[:, k0:K] @ B[k0:K, :] for the 1 to 3 k's past the product's K4 = k0: a thread per
// column, COPY_ROWS rows each (the copy kernel's grid), after the product has written C.
extern "C" __global__ void K8E_NAME(K8E_LEVEL, _tail)(int M, int N, int K, int k0, float alpha, const float* __restrict__ A,
                                    const float* __restrict__ B, float* __restrict__ C) {
    const u64 c = u64(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= u64(N)) return;
    float b[3];
#pragma unroll
    for (int i = 0; i < 3; ++i) b[i] = k0 + i < K ? B[u64(k0 + i) * N + c] : 0.0f;   // zero past K
    for (u64 r0 = u64(blockIdx.y) * COPY_ROWS; r0 < u64(M); r0 += u64(gridDim.y) * COPY_ROWS)
        for (u64 r = r0; r < r0 + COPY_ROWS && r < u64(M); ++r) {
            float s = 0.0f;
#pragma unroll
            for (int i = 0; i < 3; ++i)
                if (k0 + i < K) s += A[r * K + k0 + i] * b[i];
            C[r * N + c] += alpha * s;
        }
}
