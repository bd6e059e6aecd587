// The split-K reduction shared by the split-K twins that reduce in a second launch (k5sk.cu, k8sk.cu):
// numba_gemm/splitk.py's reduce_partials in CUDA C. P holds `splits` partial products of C (M*N
// floats each, slice z at P + z*M*N); C[i] = alpha * (P[i] + P[MN + i] + ... + P[(splits-1)*MN + i])
// + beta * C[i], added in that order (the same bits on every run), one element per thread
// (grid-strided past the grid's size); beta == 0 never reads C. The partials are loaded
// REDUCE_BATCH at a time (-D from splitk.REDUCE_BATCH), so their loads are in flight together.
#include "sgemm.cuh"

#ifndef REDUCE_BATCH
#error "REDUCE_BATCH comes from numba_gemm.splitk.REDUCE_BATCH (numba_gemm.measure.twins.REDUCE_DEFINES)"
#endif

extern "C" __global__ void splitk_reduce(const float* __restrict__ P, int splits, long long MN,
                                         float alpha, float beta, float* __restrict__ C) {
    const u64 n = MN, s = splits;
    const u64 step = u64(gridDim.x) * blockDim.x;
    for (u64 i = u64(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
        float acc = P[i];
        u64 z = 1;
        for (; z + REDUCE_BATCH - 1 < s; z += REDUCE_BATCH) {
            float p[REDUCE_BATCH];
#pragma unroll
            for (int b = 0; b < REDUCE_BATCH; ++b) p[b] = P[(z + b) * n + i];
#pragma unroll
            for (int b = 0; b < REDUCE_BATCH; ++b) acc += p[b];
        }
        for (; z < s; ++z) acc += P[z * n + i];
        twin::store_c(C, i, acc, alpha, beta);
    }
}
