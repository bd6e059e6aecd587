"""HGEMM levels (v*): fp16/bf16 inputs, fp32 accumulate and output, one module per level.
They import runtime, ptx, splitk and util only; measure and explain may import them, the call
reaches them through the registry.

Native CUDA C++ compiled by NVRTC (the module's SOURCE names its native/*.cu), and the levels
written in numba.cuda with inline PTX (names ending in "py", each the twin of a native level).
The list is the registry's: numba_gemm.levels(), or `python bench.py --help`."""
