// k9 twin: k8 (double_buffer.cuh) built for k9's tiling, a 256x128 block of 64x64 warp tiles,
// and one block per SM in its launch bounds: the -D options come from the Numba level's TILING
// and CTAS_PER_SM (numba_gemm.measure.twins.defines), so this file only names the kernels.
#include "double_buffer.cuh"

template <bool AV, bool BV>
__device__ __forceinline__ void k9_body(SGEMM_ARGS) {
    wt::double_buffered<AV, BV>(M, N, K, 0, K, alpha, A, B, beta, C);
}

WARPTILE_KERNELS(k9, k9_body)
