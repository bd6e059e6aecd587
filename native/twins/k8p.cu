// k8p twin: k8's aligned kernel on padded copies of A, B and C (rows of whole float4s), and the
// one copy kernel that makes them and writes C back. The host (numba_gemm.measure.twins) launches the
// copies and the product in the Numba level's order, on the level's workspace.
#include "double_buffer.cuh"

template <bool AV, bool BV>
__device__ __forceinline__ void k8p_body(SGEMM_ARGS) {
    wt::double_buffered<AV, BV>(M, N, K, 0, K, alpha, A, B, beta, C);
}

WT_KERNEL k8p(SGEMM_ARGS) { k8p_body<true, true>(M, N, K, alpha, A, B, beta, C); }

// dst (dst_rows x dst_cols) = the top-left dst_rows x dst_cols of src (rows x cols), zero where
// src has no element: a thread per column, COPY_ROWS rows each, grid y strided past 65535.
constexpr u64 COPY_ROWS = 4;
extern "C" __global__ void k8p_repitch(const float* __restrict__ src, int rows, int cols,
                                       float* __restrict__ dst, int dst_rows, int dst_cols) {
    const u64 c = u64(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= u64(dst_cols)) return;
    for (u64 r0 = u64(blockIdx.y) * COPY_ROWS; r0 < u64(dst_rows); r0 += u64(gridDim.y) * COPY_ROWS)
        for (u64 r = r0; r < r0 + COPY_ROWS && r < u64(dst_rows); ++r)
            dst[r * dst_cols + c] = r < u64(rows) && c < u64(cols) ? src[r * cols + c] : 0.0f;
}
