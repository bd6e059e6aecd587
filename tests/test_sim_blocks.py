"""The simulator's thread blocks as numba_gemm.runtime.sim_blocks runs them (no GPU: CI only).

syncthreads() opens once every live thread waits, threads that return early leave the block's
count, the block predicates count, and the first error raised in a block is the launch's.
"""
import threading

import numpy as np
import pytest
from numba import cuda, float32, int32

from tests.conftest import SIMULATOR

pytestmark = pytest.mark.skipif(not SIMULATOR, reason="the simulator's blocks (no GPU)")


@cuda.jit
def rotate(out, rounds):
    buf = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    v = float32(t)
    for _ in range(rounds):
        buf[t] = v
        cuda.syncthreads()
        v = buf[(t + 1) % 64] + 1
        cuda.syncthreads()             # nobody writes buf before everyone has read it
    out[cuda.blockIdx.x, t] = v


@cuda.jit
def half(out):
    buf = cuda.shared.array(32, int32)
    t = cuda.threadIdx.x
    if t >= 16:
        return                         # half the block is gone before the first barrier
    buf[t] = t
    cuda.syncthreads()
    out[t] = buf[15 - t]
    cuda.syncthreads()


@cuda.jit
def votes(out):
    t = cuda.threadIdx.x
    out[t, 0] = cuda.syncthreads_count(t % 3 == 0)
    out[t, 1] = cuda.syncthreads_and(t < 48)
    out[t, 2] = cuda.syncthreads_or(t == 47)


@cuda.jit
def one_bad(out):
    t = cuda.threadIdx.x
    if t == 5:
        out[t + 1000] = 1.0            # out of bounds: the simulator raises IndexError
    cuda.syncthreads()
    out[t] = 1.0


@cuda.jit
def two_buffers(out):
    a = cuda.shared.array(32, int32)
    b = cuda.shared.array(32, int32)     # another line: another array
    t = cuda.threadIdx.x
    a[t] = t
    b[t] = -t
    cuda.syncthreads()
    out[t] = a[31 - t] + 100 * b[31 - t]


@cuda.jit
def record_fields(recs, out):
    t = cuda.threadIdx.x
    out[t] = recs[t].x + recs.y[t]       # a structured array keeps the simulator's field access


def test_installed_once_the_simulator_is_chosen():
    from numba.cuda.simulator import kernel

    from numba_gemm.runtime import sim_blocks

    assert kernel.BlockManager.without_polling
    block = kernel.BlockManager
    sim_blocks.install()
    assert kernel.BlockManager is block          # a second install changes nothing


def test_shared_memory_passes_round_the_block_through_many_barriers():
    out = np.zeros((2, 64), np.float32)
    rotate[2, 64](out, 10)
    expected = (np.arange(64) + 10) % 64 + 10
    assert np.array_equal(out, np.stack([expected, expected]).astype(np.float32))


def test_threads_that_return_early_leave_the_barrier():
    out = np.full(32, -1, np.int32)
    half[1, 32](out)
    assert out[:16].tolist() == list(range(15, -1, -1)) and (out[16:] == -1).all()


def test_block_predicates_see_every_thread():
    out = np.zeros((48, 3), np.int32)
    votes[1, 48](out)
    assert (out == [16, 1, 1]).all()


def test_the_first_error_of_a_block_is_the_launchs():
    """The others stop at the barrier; the launch returns once all have, leaving no thread
    waiting: a second failing launch starts no new threads, and the next launch is right."""
    threads = []
    for _ in range(2):
        with pytest.raises(IndexError, match="tid=\\[5, 0, 0\\]"):
            one_bad[1, 32](np.zeros(32, np.float32))
        threads.append(threading.active_count())
    assert threads[0] == threads[1]
    out = np.zeros((1, 64), np.float32)
    rotate[1, 64](out, 3)
    assert np.array_equal(out[0], (np.arange(64) + 3) % 64 + 3)


def test_each_line_has_its_own_shared_array_and_every_thread_sees_it():
    out = np.zeros(32, np.int32)
    two_buffers[1, 32](out)
    r = np.arange(31, -1, -1)
    assert (out == r - 100 * r).all()


def test_structured_arrays_keep_their_fields():
    recs = np.zeros(8, dtype=[("x", np.float32), ("y", np.float32)])
    recs["x"], recs["y"] = np.arange(8), 10 * np.arange(8)
    out = np.zeros(8, np.float32)
    record_fields[1, 8](recs, out)
    assert (out == 11 * np.arange(8)).all()


@cuda.jit(debug=True, opt=False)
def divide_debug(out, x):
    out[0] = float32(1.0) / x[0]


@cuda.jit
def divide(out, x):
    out[0] = float32(1.0) / x[0]


def test_a_debug_kernel_raises_on_division_by_zero_and_the_next_kernel_does_not():
    """As the simulator runs a debug kernel: NumPy raises on division by zero, in its threads
    only (the workers that ran it run the next kernel too)."""
    x, out = np.zeros(1, np.float32), np.zeros(1, np.float32)
    with pytest.raises(FloatingPointError):
        divide_debug[1, 1](out, x)
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        divide[1, 1](out, x)
    assert np.isinf(out[0])
