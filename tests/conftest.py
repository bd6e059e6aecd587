"""Without a GPU, run every Numba kernel in the CUDA simulator (set before numba is imported)."""
import os

import pytest

from numba_gemm.gpu import has_gpu, use_simulator_if_no_gpu

SIMULATOR = use_simulator_if_no_gpu()
GPU = has_gpu() and not SIMULATOR

gpu_only = pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")


def pytest_report_header(config):
    mode = "CUDA GPU" if GPU else "Numba CUDA simulator (no GPU: GPU-only tests skip)"
    return f"numba_gemm: running on {mode}"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "gpu" in item.keywords and not GPU:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
