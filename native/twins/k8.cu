// k8 twin: k7 + double buffering (double_buffer.cuh) over all of K. The last phase's loads
// fall outside K: all checks fail.
#include "double_buffer.cuh"

template <bool AV, bool BV>
__device__ __forceinline__ void k8_body(SGEMM_ARGS) {
    wt::double_buffered<AV, BV>(M, N, K, 0, K, alpha, A, B, beta, C);
}

WARPTILE_KERNELS(k8, k8_body)
