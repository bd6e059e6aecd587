// hopper_base.cuh - what the Hopper levels (v11+) take over unchanged from v9 and v10: the
// CUtensorMap parameter type and the super-tile decode of a tile index.
//
// Both are restated from v10_tma.cu and v9_supertile.cu (same definitions) so that the v11+
// sources do not include the v8 kernel with its tile constants.
#pragma once

// CUtensorMap as cuda.h declares it (128 opaque bytes, 64-byte aligned). cuda.h itself is a host
// header that pulls in <stdlib.h>, which NVRTC does not have, so the layout is restated here.
#ifndef CUDA_VERSION
struct alignas(64) CUtensorMap {
    unsigned long long opaque[16];
};
#endif
static_assert(sizeof(CUtensorMap) == 128 && alignof(CUtensorMap) == 64, "CUtensorMap layout");

// v9's super-tile order (numba_gemm.hgemm._common.supertile_decode is the same function):
// tile rows in bands of super_m, each band cut into super-tiles super_n wide, n fastest inside.
__device__ __forceinline__ void supertile_of(int t, int grid_m, int grid_n, int super_m,
                                             int super_n, int& bm, int& bn) {
    const int band = t / (super_m * grid_n);
    const int r = t - band * super_m * grid_n;
    const int hm = min(super_m, grid_m - band * super_m);   // rows in this band
    const int sc = r / (hm * super_n);                       // super-tile within the band
    const int r2 = r - sc * hm * super_n;
    const int wn = min(super_n, grid_n - sc * super_n);      // columns in this super-tile
    bm = band * super_m + r2 / wn;
    bn = sc * super_n + r2 % wn;
}
