// Shared by the CUDA C twins of the SGEMM levels (k1.cu ... k8.cu): the kernel signature,
// 128-bit loads and stores, and the BLAS epilogue. Each twin is the same algorithm, geometry
// and edge handling as its Numba level in numba_gemm/sgemm/, written as CUDA C, so that
// bench.py can put the two side by side and the difference is the cost of Python.
//
// Every kernel: (M, N, K, alpha, A, B, beta, C), row-major float32, C = alpha*A@B + beta*C.
// As in the Numba levels: in-tile coordinates are 32-bit unsigned, element offsets 64-bit
// (M*K, K*N or M*N may pass 2^31), and beta == 0 never reads C.
#pragma once

typedef unsigned int u32;
typedef unsigned long long u64;

#define SGEMM_ARGS int M, int N, int K, float alpha, const float* __restrict__ A, \
                   const float* __restrict__ B, float beta, float* __restrict__ C

namespace twin {

__device__ __forceinline__ void store_c(float* C, u64 c, float value, float alpha, float beta) {
    if (beta == 0.0f) C[c] = alpha * value;
    else C[c] = alpha * value + beta * C[c];
}

// X[off .. off+3] as one 16-byte access: the caller guarantees 16-byte alignment.
__device__ __forceinline__ float4 ld4(const float* X, u64 off) {
    return *reinterpret_cast<const float4*>(X + off);
}
__device__ __forceinline__ void st4(float* X, u64 off, float4 v) {
    *reinterpret_cast<float4*>(X + off) = v;
}

}  // namespace twin

// ---- k6, k7, k8: four floats of one matrix row, checked or not --------------------------
// Columns col.. of a row with ncols columns; row_ok says the row exists. Outside the matrix
// loads give 0 and stores skip. VEC: one 16-byte access (ncols % 4 == 0, aligned rows, so a
// float4 is all inside or all outside); otherwise four 32-bit accesses, each checked, at
// consecutive columns or SPREAD apart (the 32-bit form of a B tile row: a warp's loads then
// stay on one 128-byte line per instruction).
namespace twin {

template <bool VEC, int SPREAD = 1>
__device__ __forceinline__ float4 load4(const float* X, u64 off, bool row_ok, u32 col, u32 ncols) {
    if (VEC) return (row_ok && col < ncols) ? ld4(X, off) : make_float4(0.f, 0.f, 0.f, 0.f);
    float4 v;
    v.x = (row_ok && col < ncols) ? X[off] : 0.f;
    v.y = (row_ok && col + SPREAD < ncols) ? X[off + SPREAD] : 0.f;
    v.z = (row_ok && col + 2 * SPREAD < ncols) ? X[off + 2 * SPREAD] : 0.f;
    v.w = (row_ok && col + 3 * SPREAD < ncols) ? X[off + 3 * SPREAD] : 0.f;
    return v;
}

template <bool VEC, int SPREAD = 1>
__device__ __forceinline__ float4 load4_in(const float* X, u64 off) {
    if (VEC) return ld4(X, off);
    return make_float4(X[off], X[off + SPREAD], X[off + 2 * SPREAD], X[off + 3 * SPREAD]);
}

template <bool VEC>
__device__ __forceinline__ void store4(float* X, u64 off, bool row_ok, u32 col, u32 ncols, float4 v) {
    if (VEC) {
        if (row_ok && col < ncols) st4(X, off, v);
        return;
    }
    if (row_ok && col < ncols) X[off] = v.x;
    if (row_ok && col + 1 < ncols) X[off + 1] = v.y;
    if (row_ok && col + 2 < ncols) X[off + 2] = v.z;
    if (row_ok && col + 3 < ncols) X[off + 3] = v.w;
}

template <bool VEC>
__device__ __forceinline__ void store4_in(float* X, u64 off, float4 v) {
    if (VEC) { st4(X, off, v); return; }
    X[off] = v.x; X[off + 1] = v.y; X[off + 2] = v.z; X[off + 3] = v.w;
}

// alpha*acc + beta*c, four at a time
__device__ __forceinline__ float4 axpby4(float alpha, const float* acc, float beta, float4 c) {
    return make_float4(alpha * acc[0] + beta * c.x, alpha * acc[1] + beta * c.y,
                       alpha * acc[2] + beta * c.z, alpha * acc[3] + beta * c.w);
}
__device__ __forceinline__ float4 ax4(float alpha, const float* acc) {
    return make_float4(alpha * acc[0], alpha * acc[1], alpha * acc[2], alpha * acc[3]);
}

}  // namespace twin
