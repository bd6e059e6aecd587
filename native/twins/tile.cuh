// The tile of a twin of k1 .. k6 and k5sk: its Numba level's GEOMETRY (tile_m, tile_n, tile_k,
// thread_m, thread_n, block), passed as -D options by numba_gemm.measure.twins.defines, so that a tile
// is one Python value for both. Each twin static_asserts what its body assumes of them.
#pragma once

#if !defined(TILE_M) || !defined(TILE_N) || !defined(TILE_K) || !defined(THREAD_M) || \
    !defined(THREAD_N) || !defined(BLOCK_X) || !defined(BLOCK_Y)
#error "TILE_M, TILE_N, TILE_K, THREAD_M, THREAD_N, BLOCK_X, BLOCK_Y come from the Numba level's GEOMETRY (numba_gemm.measure.twins.defines)"
#endif
