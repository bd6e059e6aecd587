"""HGEMM levels (v*): fp16/bf16 inputs, fp32 accumulate and output; native CUDA compiled by NVRTC,
and the levels written in numba.cuda with inline PTX (v8py)."""
