"""CUDA C++ sources of the native HGEMM levels (compiled at run time by NVRTC)."""
