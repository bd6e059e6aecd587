"""Compile time of `inline="always"` device functions: one copy of the callee's scope per inline.

Numba inlines such a helper by pasting a copy of its IR into the caller
(numba.cuda.core.inline_closurecall, InlineWorker.inline_ir). numba-cuda 0.30.4 copies the callee
block by block, `copy.deepcopy(block)` with a fresh memo for each block. Each block's variables
point at the callee's Scope, and the Scope holds every variable of the callee, so each block
copies the whole scope again. The cost grows as blocks × variables. k9's unrolled helpers are
inlined into one another, and its kernels spent about two thirds of their compile in these
copies: 25-40 s each on a 2-core machine.

install() gives the blocks of one IR one memo, which is what a single deepcopy of the whole IR
would do: one copy of the scope, shared by the copied blocks. The inliner then renames the copied
variables by name, so the result is the same IR. The PTX of every Numba level is byte for byte
the same with and without it, and the big kernels compile in about half the time
(`python tools/compile_times.py` compiles every Numba kernel both ways and compares;
tests/test_inline_copy.py does so for k6gv and v8py). It replaces only that module's `copy`
name and passes every other call through unchanged.
"""
from __future__ import annotations

import copy


class _OneMemoPerIR:
    """The `copy` module, except that deepcopy(block) shares one memo among consecutive blocks
    of one scope. A block seen again starts a new memo: another copy of the same IR must be new."""

    def __init__(self, ir_block):
        self._block_type = ir_block
        self._scope = None
        self._memo: dict = {}
        self._blocks: dict = {}      # id -> block, kept alive so that no id is reused meanwhile

    def __getattr__(self, name):
        return getattr(copy, name)

    def deepcopy(self, x, memo=None):
        if memo is not None or not isinstance(x, self._block_type):
            return copy.deepcopy(x, memo)
        if x.scope is not self._scope or id(x) in self._blocks:
            self._scope, self._memo, self._blocks = x.scope, {}, {}
        self._blocks[id(x)] = x
        return copy.deepcopy(x, self._memo)


def install() -> bool:
    """Give numba-cuda's inliner the shared memo (once; the simulator never calls it); True once
    it has it, False where this numba-cuda keeps its inliner elsewhere."""
    try:
        from numba.cuda.core import inline_closurecall, ir
    except ImportError:
        return False
    if getattr(inline_closurecall, "copy", None) is copy:
        inline_closurecall.copy = _OneMemoPerIR(ir.Block)
    return isinstance(getattr(inline_closurecall, "copy", None), _OneMemoPerIR)
