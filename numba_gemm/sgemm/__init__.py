"""SGEMM levels (k*): float32 GEMM written as numba.cuda kernels in Python, one module per level."""
