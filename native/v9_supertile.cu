// v9 = v8 + super-tile rasterisation of the 1-D grid, for L2 reuse.
//
// The hardware hands out blocks in blockIdx order, so the order in which tiles are numbered
// decides which operand stays in L2. v8 numbers tiles row by row: a wave of blocks shares one
// or a few rows of A, but walks the whole width of B, which is re-read from DRAM for every
// band of rows once B no longer fits in L2. v9 groups tile rows into bands of super_m rows and
// cuts each band into super-tiles super_n tiles wide, n fastest inside a super-tile: the
// super_m A row-panels of a band stay resident while the band is swept, and B is streamed
// once per band instead of once per tile row. The host picks (super_m, super_n) from the L2
// size so that (super_m*BM + super_n*BN)*K*2 bytes fit (numba_gemm.hgemm._common).
//
// Ragged edges: the last band may have fewer rows and the last super-tile of a band fewer
// columns; the decode accounts for both, so every block of the grid_m*grid_n grid gets a
// distinct tile and none idles. It is the same function as _common.supertile_decode.
#define HG_TILE_ORDER_DEFINED
__device__ __forceinline__ void tile_of(int bid, int grid_m, int grid_n, int super_m, int super_n,
                                        int& bm, int& bn) {
    const int band = bid / (super_m * grid_n);
    const int r = bid - band * super_m * grid_n;
    const int hm = min(super_m, grid_m - band * super_m);   // rows in this band
    const int sc = r / (hm * super_n);                       // super-tile within the band
    const int r2 = r - sc * hm * super_n;
    const int wn = min(super_n, grid_n - sc * super_n);      // columns in this super-tile
    bm = band * super_m + r2 / wn;
    bn = sc * super_n + r2 % wn;
}
#define HG_ENTRY(dt) v9_supertile_##dt

#include "v8_mma.cu"
