"""CUDA C++ sources compiled at run time by NVRTC: the native HGEMM levels, their shared headers,
the tensor-core ceilings microbenchmark, and twins/ (the SGEMM levels' CUDA C twins)."""
