"""HGEMM levels v7..v10: fp16/bf16 inputs, fp32 accumulate and output, native CUDA via NVRTC."""
