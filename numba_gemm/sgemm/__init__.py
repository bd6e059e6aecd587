"""SGEMM levels (k*): float32 GEMM written as numba.cuda kernels in Python, one module per level.
They import runtime, ptx, splitk and util only; measure and explain may import them, the call
reaches them through the registry.

Each level has a CUDA C twin in native/twins/; _access.py is what their warp_step hooks are
written in, which the ledgers read. The list is the registry's: numba_gemm.levels(), or
`python bench.py --help`."""
