// k9 twin: the loop of unrolled_buffers.cuh (two phases per trip, clamped rows, unchecked loads
// inside K) on every tile, in the four float4 specialisations.
#include "unrolled_buffers.cuh"

using wt::k9_body;
WARPTILE_KERNELS(k9, k9_body)
