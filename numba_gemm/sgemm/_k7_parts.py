"""The former name of numba_gemm.sgemm._warptile (the warp tiling of k7, k8 and k8sk).

Kept only while numba_gemm/twins.py, tests/test_twins.py and tools/k7_tiles.py still import it
under this name; once they import _warptile, delete this file. No level imports it.
"""
from ._warptile import A_PAD, MIN_BLOCKS, WarpTiling, grid, jit, make, specialisations, warp_step

__all__ = ["A_PAD", "MIN_BLOCKS", "WarpTiling", "grid", "jit", "make", "specialisations", "warp_step"]
