// Split-K reduced inside the GEMM kernel (k6gv.cu): numba_gemm/sgemm/_splitk_parts.py's
// arrive() and sum_slices4() in CUDA C. Each CTA of a tile stores its raw partial into slice z
// of P; the last of the tile's S CTAs to arrive (a uint32 counter per tile, which it resets to
// zero for the next call) adds the S partials in order z = 0 .. S-1: slice 0, then SUM_BATCH
// slices' loads in flight at once, through L2 (__ldcg: another SM wrote them during this
// kernel), the last batch's slices past S neither loaded nor added.
#pragma once
#include "sgemm.cuh"

#ifndef SUM_BATCH
#error "SUM_BATCH comes from numba_gemm.sgemm._splitk_parts.BATCH (numba_gemm.measure.twins.defines: SUM_DEFINES)"
#endif

namespace twin {

// Called once every thread of the CTA has stored its partial: true, in every thread, for the
// last of the S CTAs counted on counters[tile] to arrive (k9st: a stream tile's parts).
__device__ __forceinline__ bool arrive_at(unsigned* counters, u32 tile, u32 tid, u32 S) {
    __shared__ unsigned last;
    __threadfence();
    __syncthreads();
    if (tid == 0) {
        const bool is_last = atomicAdd(&counters[tile], 1u) == S - 1;
        if (is_last) counters[tile] = 0;
        last = is_last;
    }
    __syncthreads();
    const bool is_last = last != 0;
    if (is_last) __threadfence();
    return is_last;
}

// arrive_at on the counter of the CTA's (x, y) tile in the grid
__device__ __forceinline__ bool arrive(unsigned* counters, u32 tid, u32 S) {
    return arrive_at(counters, blockIdx.y * gridDim.x + blockIdx.x, tid, S);
}

// P[off .. off+3] summed over the S slices mn apart, in slice order; columns past n and rows
// not row_ok load nothing (their sums are never stored).
__device__ __forceinline__ void sum_slices4(const float* P, u64 off, u64 mn, u32 S, bool row_ok, u32 col,
                                            u32 n, float (&s)[4]) {
    bool ok[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        ok[q] = row_ok && col + q < n;
        s[q] = ok[q] ? __ldcg(P + off + q) : 0.f;
    }
    for (u32 z = 1; z < S; z += SUM_BATCH) {
        float p[SUM_BATCH][4];
#pragma unroll
        for (int b = 0; b < SUM_BATCH; ++b)
#pragma unroll
            for (int q = 0; q < 4; ++q)
                p[b][q] = ok[q] && z + b < S ? __ldcg(P + u64(z + b) * mn + off + q) : 0.f;
#pragma unroll
        for (int b = 0; b < SUM_BATCH; ++b)
            if (z + b < S)
#pragma unroll
                for (int q = 0; q < 4; ++q) s[q] += p[b][q];
    }
}

}  // namespace twin
