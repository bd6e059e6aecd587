// tile_order.cuh - which output tile (bm, bn) block `bid` of a 1-D grid computes.
//
// The hardware hands out blocks in blockIdx order, so the numbering decides what L2 re-uses.
//   tile_row_major (v8): row by row, n fastest. A wave of blocks shares one or a few rows of A
//     but walks the whole width of B.
//   tile_supertile (v9, v10): tile rows are grouped into bands of super_m rows, each band cut
//     into super-tiles super_n tiles wide, n fastest inside a super-tile. The super_m A
//     row-panels of a band stay resident while the band is swept, and B is streamed once per
//     band instead of once per tile row. The host picks (super_m, super_n) from the L2 size
//     (numba_gemm.hgemm._common.choose_supertile).
// Ragged edges: the last band may have fewer rows and the last super-tile of a band fewer
// columns; the decode accounts for both, so every block of the grid_m * grid_n grid gets a
// distinct tile and none idles. It is the same function as _common.supertile_decode.
#pragma once

__device__ __forceinline__ void tile_row_major(int bid, int grid_n, int& bm, int& bn) {
    bm = bid / grid_n;
    bn = bid - bm * grid_n;
}

__device__ __forceinline__ void tile_supertile(int bid, int grid_m, int grid_n, int super_m,
                                               int super_n, int& bm, int& bn) {
    const int band = bid / (super_m * grid_n);
    const int r = bid - band * super_m * grid_n;
    const int hm = min(super_m, grid_m - band * super_m);   // rows in this band
    const int sc = r / (hm * super_n);                       // super-tile within the band
    const int r2 = r - sc * hm * super_n;
    const int wn = min(super_n, grid_n - sc * super_n);      // columns in this super-tile
    bm = band * super_m + r2 / wn;
    bn = sc * super_n + r2 % wn;
}
