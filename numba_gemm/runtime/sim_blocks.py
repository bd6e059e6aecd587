"""Thread blocks in Numba's CUDA simulator, synchronised without polling.

The simulator runs every GPU thread of a block as a Python thread. Its block manager learns
that all of them have reached syncthreads() by polling each one in a loop, and that loop
holds the GIL against the very threads it waits for: a 256-thread block spends most of its
time there, and how much depends on the interpreter's thread switching (numba-cuda 0.30.4:
k9 at 129 × 130 × 37, one run, 93–172 s on a two-core machine).

install() swaps in a block whose threads release each other: a barrier on a condition
variable that the last thread to arrive opens. The rules are the simulator's own:
syncthreads() returns once every thread of the block that has not yet exited is waiting in
it, and the first thread to raise stops the block (the others raise at their next
syncthreads) and its error is the launch's. The same run takes 18–27 s.

Starting a Python thread costs about 0.3 ms, more than many simulated threads take to run, so
the block's threads are workers kept from block to block: each takes its next simulated thread
from a queue. A block returns when all of its threads have returned, an error or not, so its
workers are free for the next block.

Two more of the simulator's costs go: its kernels get their array arguments as the NumPy arrays
behind them (the simulator's two wrappers cost three Python calls an element: a loop of reads
runs about 6× faster), and cuda.shared.array finds the line that asks without extracting the
whole stack. k8e's two slowest tests: 170 s before this module's workers, 74 s with all three.
"""
from __future__ import annotations

import queue
import sys
import threading

import numpy as np


def _closed_gate():
    gate = threading.Lock()
    gate.acquire()
    return gate


class _Barrier:
    """syncthreads() for one block: opens when every live thread waits; exits count down.

    The waiters of one round queue on a locked gate; opening it wakes the first, and each
    passes it on to the next as it leaves (one wake-up each, nobody contends for a lock)."""

    def __init__(self, threads: int):
        self.lock = threading.Lock()
        self.live, self.waiting = threads, 0
        self.gate = _closed_gate()       # this round's
        self.done = _closed_gate()       # opened when the last thread leaves
        self.failed = None               # the first thread that raised

    def _open(self):
        self.waiting = 0
        gate, self.gate = self.gate, _closed_gate()
        gate.release()

    def wait(self):
        with self.lock:
            gate = None if self.failed is not None else self.gate
            if gate is not None:
                self.waiting += 1
                if self.waiting == self.live:
                    self._open()
        if gate is not None:
            gate.acquire()
            gate.release()               # on to the next waiter
        if self.failed is not None:
            raise RuntimeError("another thread of the block raised")

    def leave(self, thread):
        with self.lock:
            self.live -= 1
            if thread.exception is not None and self.failed is None:
                self.failed = thread
                self.gate.release()      # the waiters raise; later arrivals do not wait
            elif self.failed is None and self.live and self.waiting == self.live:
                self._open()
            if not self.live:
                self.done.release()

    def finish(self):
        """Wait until every thread has left; re-raise the first error."""
        self.done.acquire()
        if self.failed is not None:
            error, traceback = self.failed.exception
            raise error.with_traceback(traceback)


_idle: list = []                 # worker lists no block is using
_idle_lock = threading.Lock()


def install() -> None:
    """Make the simulator run its blocks this way, for the rest of the process (idempotent).
    Call it once the simulator is chosen: it imports numba.cuda."""
    from numba.cuda.simulator import kernel, kernelapi
    from numba.cuda.simulator.cudadrv.devicearray import FakeWithinKernelCUDAArray
    from numba.cuda.simulator.kernelapi import Dim3

    if getattr(kernel.BlockManager, "without_polling", False):
        return

    def _plain(arg):
        """The NumPy array behind a kernel's array argument. The simulator wraps each array twice,
        and every element read or write pays three Python calls for it. Structured arrays
        keep their wrappers, which give them attribute access."""
        if isinstance(arg, FakeWithinKernelCUDAArray):
            ary = arg._item._ary
            if ary.dtype.names is None:
                return ary
        return arg

    class Worker(kernel.BlockThread):
        """A Python thread that runs simulated threads, one after another; between two it is
        the simulator's BlockThread of the one it runs."""

        def __init__(self):
            threading.Thread.__init__(self, daemon=True)
            self.jobs = queue.SimpleQueue()
            self.abort = self.syncthreads_blocked = False

        def syncthreads(self):
            self._manager.barrier.wait()

        def run(self):
            while True:
                manager, f, block, thread = self.jobs.get()
                x, y, _ = manager._block_dim
                self._manager, self.blockIdx, self.threadIdx = manager, Dim3(*block), Dim3(*thread)
                self.thread_id = thread[0] + x * (thread[1] + y * thread[2])
                self.exception = None
                self._target, self._args, self._kwargs = f, (), {}
                try:
                    kernel.BlockThread.run(self)   # the simulator's: keeps an error as self.exception
                finally:
                    manager.barrier.leave(self)

    def workers(n):
        with _idle_lock:
            ws = [w for w in (_idle.pop() if _idle else []) if w.is_alive()]
        while len(ws) < n:
            ws.append(Worker())
            ws[-1].start()
        return ws

    class Block(kernel.BlockManager):
        without_polling = True

        def run(self, grid_point, *args):
            args = [_plain(a) for a in args]
            points = list(np.ndindex(*self._block_dim))
            self.barrier = _Barrier(len(points))

            def f():
                if self._debug:           # as the simulator's BlockThread does, for this thread only
                    with np.errstate(divide="raise"):
                        return self._f(*args)
                return self._f(*args)

            ws = workers(len(points))
            for w, point in zip(ws, points):
                w.jobs.put((self, f, grid_point, point))
            try:
                self.barrier.finish()
            finally:                      # every thread has returned: the workers are idle
                with _idle_lock:
                    _idle.append(ws)

    kernel.BlockManager = Block
    kernelapi.FakeCUDAShared.array = _shared_array(kernelapi.FakeCUDAShared.array)


def _shared_array(simulators):
    """cuda.shared.array as the simulator's, which names an array by the line that asks for it,
    found without extracting the whole stack: the simulator's traceback.extract_stack reads
    (and stats) every frame's source file, once per thread and array, a tenth of a k8e run."""
    from numba.core import types
    from numba.np import numpy_support

    def array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:      # dynamic shared memory, or the error
            return simulators(self, shape, dtype, alignment)
        caller = sys._getframe(1)
        key = (caller.f_code.co_filename, caller.f_lineno)
        found = self._allocations.get(key)
        if found is None:
            if isinstance(dtype, types.Type):
                dtype = numpy_support.as_dtype(dtype)
            found = self._allocations.setdefault(key, np.empty(shape, dtype))   # one per line
        return found

    return array
