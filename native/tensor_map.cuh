// tensor_map.cuh - CUtensorMap, the kernel parameter type of a TMA tensor map.
//
// As cuda.h declares it: 128 opaque bytes, 64-byte aligned. cuda.h itself is a host header
// that pulls in <stdlib.h>, which NVRTC does not have, so the layout is restated here. The
// maps are encoded on the host (numba_gemm.runtime.tma) and passed by value as
// `const __grid_constant__ CUtensorMap`; TMA takes their generic address.
#pragma once

#ifndef CUDA_VERSION
struct alignas(64) CUtensorMap {
    unsigned long long opaque[16];
};
#endif
static_assert(sizeof(CUtensorMap) == 128 && alignof(CUtensorMap) == 64, "CUtensorMap layout");
