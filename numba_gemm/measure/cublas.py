"""The baseline: cuBLAS, through nvmath-python's low-level bindings (nvmath.bindings.cublas).

Why nvmath-python: it is NVIDIA's maintained Python binding to the CUDA math libraries, its wheel
is small (libcublas itself comes from the CUDA install or the nvidia-cublas wheel), and it takes
raw device pointers, so cuBLAS runs on exactly the buffers the levels use, in the same process.

cuBLAS is column-major; a row-major C = A @ B is the column-major C^T = B^T @ A^T, so the call
passes B first and swaps M and N. SGEMM runs with CUBLAS_DEFAULT_MATH: strict FP32, no TF32.
HGEMM is cublasGemmEx with fp16/bf16 inputs, CUBLAS_COMPUTE_32F and fp32 output, or output in
the inputs' type (c16=True, what torch.mm returns for 16-bit inputs).
"""
from __future__ import annotations

import numpy as np


def _ptr(arr) -> int:
    return arr.__cuda_array_interface__["data"][0]


class Cublas:
    def __init__(self):
        from nvmath.bindings import cublas

        self._lib = cublas
        self.handle = cublas.create()
        cublas.set_math_mode(self.handle, cublas.Math.DEFAULT_MATH)

    def close(self):
        if self.handle is not None:
            self._lib.destroy(self.handle)
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def gemm(self, A, B, C, alpha: float = 1.0, beta: float = 0.0, in_dtype=None, c16: bool = False):
        """Row-major C = alpha*A@B + beta*C on device arrays; in_dtype names A/B's element type;
        c16: C is in that 16-bit type too (else float32)."""
        from nvmath import CudaDataType

        lib = self._lib
        M, K = A.shape
        N = B.shape[1]
        # host scalars: read by cuBLAS during the call (pointer mode host)
        a = np.array([alpha], np.float32)
        b = np.array([beta], np.float32)
        op = lib.Operation.N
        kind = np.dtype(in_dtype or A.dtype).name
        if kind == "float32":
            lib.sgemm(self.handle, op, op, N, M, K, a.ctypes.data, _ptr(B), N,
                      _ptr(A), K, b.ctypes.data, _ptr(C), N)
            return C
        types = {"float16": CudaDataType.CUDA_R_16F, "bfloat16": CudaDataType.CUDA_R_16BF}
        if kind not in types:
            raise TypeError(f"cuBLAS baseline has no input type {kind}")
        t = types[kind]
        lib.gemm_ex(self.handle, op, op, N, M, K, a.ctypes.data, _ptr(B), t, N, _ptr(A), t, K,
                    b.ctypes.data, _ptr(C), t if c16 else CudaDataType.CUDA_R_32F, N,
                    lib.ComputeType.COMPUTE_32F, lib.GemmAlgo.DEFAULT)
        return C
