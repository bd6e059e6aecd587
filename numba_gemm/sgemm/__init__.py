"""SGEMM levels k1..k6: float32 GEMM written as numba.cuda kernels in Python."""
