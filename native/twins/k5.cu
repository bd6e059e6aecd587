// k5 twin: k4 + an 8 x 4 register outer product per thread: 8 A values and 4 B values
// (columns tx + 32j) per k, 32 FMAs. Block 32 x 4, tile 32 x 128 x 32 (outer_product.cuh).
#include "outer_product.cuh"

extern "C" __global__ void k5(SGEMM_ARGS) { k5_twin::multiply<false>(M, N, K, 0, K, alpha, A, B, beta, C); }
