"""SGEMM levels (k*): float32 GEMM written as numba.cuda kernels in Python, one module per level,
each with a CUDA C twin in native/twins/. The list is the registry's: numba_gemm.levels(), or
`python bench.py --help`."""
