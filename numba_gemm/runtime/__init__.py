"""Talking to the GPU: the driver binding, launches, NVRTC, the Numba kernel cache, operands, TMA.
Imports nothing of numba_gemm but runtime/ and util; every other part of the package may import it."""
