// k9 twin: k8 + cp.async, a ring of WT_STAGES K tiles (async_stages.cuh) over all of K. Tiles
// past K are zero-fills that read nothing.
#include "async_stages.cuh"

template <bool AV, bool BV>
__device__ __forceinline__ void k9_body(SGEMM_ARGS) {
    wt::async_stages<AV, BV>(M, N, K, alpha, A, B, beta, C);
}

WARPTILE_KERNELS(k9, k9_body)
