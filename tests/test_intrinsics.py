"""128-bit load/store intrinsics: they compile to v4 PTX, and the simulator twins (or, on a
GPU, the intrinsics themselves) agree with plain indexing and refuse misaligned addresses."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from numba import cuda, float32

from numba_gemm.measure import check
from numba_gemm.ptx.intrinsics import (SIMULATOR, load4_global, load4_readonly, load4_shared, load_l2, load_readonly,
                                   store4_global, store4_shared)
from numba_gemm.sgemm import k6_vectorized as k6
from tests.conftest import gpu_only

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PTX = r'''
import json
from numba import cuda, float32, int32, uint32
from numba_gemm.ptx.intrinsics import load4_global, load4_shared, store4_global, store4_shared

def copy(X, Y, i):
    S = cuda.shared.array((4, 32), float32, alignment=16)
    t = uint32(cuda.threadIdx.x)
    store4_shared(S, (1, 4 * t), load4_global(X, 4 * i))
    cuda.syncthreads()
    store4_global(Y, 4 * i, load4_shared(S, (1, 4 * t)))

ptx, _ = cuda.compile_ptx(copy, (float32[::1], float32[::1], int32), cc=(9, 0))
print(json.dumps(ptx))
'''


def test_intrinsics_compile_to_v4_ptx():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, "-c", PTX], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    ptx = json.loads(out.stdout.strip().splitlines()[-1])
    for op in ("ld.global.v4.f32", "st.global.v4.f32", "ld.shared.v4.f32", "st.shared.v4.f32"):
        assert ptx.count(op) == 1, op
    # no scalar fallbacks next to them
    assert "ld.global.f32" not in ptx and "st.shared.f32" not in ptx


READONLY_PTX = r'''
import json
from numba import cuda, float32, int32
from numba_gemm.ptx.intrinsics import load4_readonly, load_l2, load_readonly, store4_global

def copy(X, Y, i):
    x, y, z, w = load4_readonly(X, 4 * i)
    store4_global(Y, 4 * i, (x + load_readonly(X, i + 1), y + load_l2(Y, i + 2), z, w))

ptx, _ = cuda.compile_ptx(copy, (float32[::1], float32[::1], int32), cc=(9, 0))
print(json.dumps(ptx))
'''


def test_readonly_loads_compile_to_ld_global_nc():
    """The read-only intrinsics emit ld.global.nc (LDG.E.CONSTANT), as nvcc does for a
    `const float* __restrict__` argument, and load_l2 ld.global.cg (past L1); nothing else changes."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, "-c", READONLY_PTX], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    ptx = json.loads(out.stdout.strip().splitlines()[-1])
    assert ptx.count("ld.global.nc.v4.f32") == 1 and ptx.count("ld.global.nc.f32") == 1
    assert ptx.count("ld.global.cg.f32") == 1
    assert "ld.global.v4.f32" not in ptx and "ld.global.f32" not in ptx


@cuda.jit
def _readonly(X, Y):
    i = cuda.threadIdx.x
    v = load4_readonly(X, 4 * i)
    store4_global(Y, 4 * i, (v[0], v[1], load_l2(X, 4 * i + 2), load_readonly(X, 4 * i + 3)))


def test_readonly_loads_agree_with_plain_indexing():
    X = np.random.default_rng().uniform(-1, 1, 64).astype(np.float32)
    dY = cuda.to_device(np.full(64, np.nan, np.float32))
    _readonly[1, 16](cuda.to_device(X), dY)
    np.testing.assert_array_equal(dY.copy_to_host(), X)


@cuda.jit
def _shuffle(X, Y, Z):
    """Y[r, :] = X[r, :] through shared memory, 4 floats per thread; Z flat copy of X."""
    S = cuda.shared.array((8, 32), float32, alignment=None if SIMULATOR else 16)
    r = cuda.threadIdx.y
    c = cuda.threadIdx.x * 4
    store4_shared(S, (r, c), load4_global(X, r * 32 + c))
    cuda.syncthreads()
    v = load4_shared(S, (7 - r, c))                       # read another thread's row
    store4_global(Y, (7 - r) * 32 + c, v)
    store4_global(Z, (r, c), load4_global(X, r * 32 + c))


def test_twins_agree_with_plain_indexing():
    X = np.random.default_rng().uniform(-1, 1, 256).astype(np.float32)
    dX = cuda.to_device(X)
    dY = cuda.to_device(np.full(256, np.nan, np.float32))
    dZ = cuda.to_device(np.full((8, 32), np.nan, np.float32))
    _shuffle[1, (8, 8)](dX, dY, dZ)
    np.testing.assert_array_equal(dY.copy_to_host(), X)
    np.testing.assert_array_equal(dZ.copy_to_host(), X.reshape(8, 32))


@pytest.mark.skipif(not SIMULATOR, reason="simulator twins only")
def test_twins_refuse_misaligned_and_out_of_row():
    from numba_gemm.ptx.intrinsics import _sim_load4, _sim_store4

    buf = np.zeros(64, np.float32)
    base = buf[(-buf.__array_interface__["data"][0] // 4) % 4:][:32]   # a 16-byte-aligned view
    assert _sim_load4(True)(base, 4) == (0, 0, 0, 0)
    with pytest.raises(ValueError, match="misaligned"):
        _sim_load4(True)(base, 2)
    with pytest.raises(ValueError, match="misaligned"):
        _sim_store4(True)(base[1:], 0, (1, 2, 3, 4))                  # base pointer off by 4 bytes
    with pytest.raises(IndexError):
        _sim_load4(False)(base.reshape(4, 8), (0, 6))                  # would cross into the next row
    with pytest.raises(IndexError):
        _sim_load4(True)(base, 30)
    with pytest.raises(IndexError):
        load_readonly(base, 32)


def test_k6_picks_the_vector_kernel_only_when_aligned():
    def vector_ok(A, B, C):
        return all(k6.vector_operands(A, B, C))

    def aligned(shape):
        a = np.zeros(int(np.prod(shape)) + 4, np.float32)
        skip = (-a.__array_interface__["data"][0] // 4) % 4
        return a[skip:skip + int(np.prod(shape))].reshape(shape)

    A, B, C = aligned((8, 12)), aligned((12, 16)), aligned((8, 16))
    assert vector_ok(A, B, C)
    assert not vector_ok(aligned((8, 13)), aligned((13, 16)), C)        # K % 4 != 0
    assert not vector_ok(A, aligned((12, 18)), aligned((8, 18)))        # N % 4 != 0
    shifted = np.zeros(8 * 12 + 8, np.float32)
    skip = (-shifted.__array_interface__["data"][0] // 4) % 4 + 1          # 4 bytes past 16
    assert not vector_ok(shifted[skip:skip + 96].reshape(8, 12), B, C)


@pytest.mark.parametrize("M, N, K, name", [
    (37, 41, 35, "k6_edge"), (64, 128, 32, "k6"), (1, 5, 3, "k6_edge"), (33, 132, 36, "k6"),
    # more than one block each way: inside blocks (unchecked loads, K tail checked) and border ones
    (40, 130, 35, "k6_edge"), (40, 132, 35, "k6_bc"), (40, 130, 36, "k6_a"), (64, 256, 33, "k6_bc"),
])
@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (-0.5, 2.0)])
def test_k6_ragged_shapes(M, N, K, name, alpha, beta):
    """Every specialisation on shapes that cut tiles (vector: K, N multiples of 4)."""
    A, B, C = check.random_inputs(M, N, K)
    C_in = C.copy()
    if beta == 0:
        C[:] = np.nan                                                      # must never be read
    dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.to_device(C)
    assert k6.SPECIALISATIONS[k6.vector_operands(dA, dB, dC)][0] == name
    k6.run(dA, dB, dC, alpha, beta)
    verdict = check.verify(dC.copy_to_host(), A, B, C_in, alpha, beta)
    assert verdict.ok, verdict


@gpu_only
@pytest.mark.parametrize("offset", [1, 2, 3])
def test_k6_misaligned_base_pointer_on_gpu(offset):
    """Shapes fit the vector kernel but the base pointers are not 16-byte aligned."""
    M, N, K = 200, 260, 132
    A, B, C = check.random_inputs(M, N, K)

    def at(x):
        flat = cuda.device_array(x.size + 4, np.float32)
        view = flat[offset:offset + x.size].reshape(x.shape)
        view.copy_to_device(np.ascontiguousarray(x))
        return view

    dA, dB, dC = at(A), at(B), at(C)
    assert not any(k6.vector_operands(dA, dB, dC))
    k6.run(dA, dB, dC, 1.5, -1.0)
    verdict = check.verify(dC.copy_to_host(), A, B, C, 1.5, -1.0)
    assert verdict.ok, verdict
