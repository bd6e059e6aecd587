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
"""
from __future__ import annotations

import threading

import numpy as np


class _Barrier:
    """syncthreads() for one block: opens when every live thread waits; exits count down."""

    def __init__(self, threads: int):
        self.cond = threading.Condition()
        self.live, self.waiting, self.opened = threads, 0, 0
        self.failed = None               # the first thread that raised

    def _open(self):
        self.waiting = 0
        self.opened += 1
        self.cond.notify_all()

    def wait(self):
        with self.cond:
            if self.failed is None:
                opened = self.opened
                self.waiting += 1
                if self.waiting == self.live:
                    self._open()
                while opened == self.opened and self.failed is None:
                    self.cond.wait()
            if self.failed is not None:
                raise RuntimeError("another thread of the block raised")

    def leave(self, thread):
        with self.cond:
            self.live -= 1
            if thread.exception is not None and self.failed is None:
                self.failed = thread
                self.cond.notify_all()
            elif self.live and self.waiting == self.live:
                self._open()
            elif not self.live:
                self.cond.notify_all()

    def finish(self):
        """Wait until every thread has left or one has raised; re-raise the first error."""
        with self.cond:
            while self.live and self.failed is None:
                self.cond.wait()
        if self.failed is not None:
            error, traceback = self.failed.exception
            raise error.with_traceback(traceback)


def install() -> None:
    """Make the simulator run its blocks this way, for the rest of the process (idempotent).
    Call it once the simulator is chosen: it imports numba.cuda."""
    from numba.cuda.simulator import kernel

    if getattr(kernel.BlockManager, "without_polling", False):
        return

    class Thread(kernel.BlockThread):
        def syncthreads(self):
            self._manager.barrier.wait()

        def run(self):
            try:
                super().run()            # the simulator's: keeps an error as self.exception
            finally:
                self._manager.barrier.leave(self)

    class Block(kernel.BlockManager):
        without_polling = True

        def run(self, grid_point, *args):
            points = list(np.ndindex(*self._block_dim))
            self.barrier = _Barrier(len(points))
            for point in points:
                Thread(lambda: self._f(*args), self, grid_point, point, self._debug).start()
            self.barrier.finish()

    kernel.BlockManager = Block
