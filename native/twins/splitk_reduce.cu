// The split-K reduction shared by the split-K twins (k5sk.cu, k8sk.cu): numba_gemm/splitk.py's
// reduce_partials in CUDA C. P holds `splits` partial products of C (M*N floats each, slice z
// at P + z*M*N); C[i] = alpha * (P[i] + P[MN + i] + ... + P[(splits-1)*MN + i]) + beta * C[i],
// added in that order (the same bits on every run), grid-strided; beta == 0 never reads C.
#include "sgemm.cuh"

extern "C" __global__ void splitk_reduce(const float* __restrict__ P, int splits, long long MN,
                                         float alpha, float beta, float* __restrict__ C) {
    const u64 n = MN;
    const u64 step = u64(gridDim.x) * blockDim.x;
    for (u64 i = u64(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
        float acc = P[i];
        for (u64 z = 1; z < u64(splits); ++z) acc += P[z * n + i];
        twin::store_c(C, i, acc, alpha, beta);
    }
}
