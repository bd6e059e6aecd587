"""Global-memory loaders of the float4 SGEMM levels (k6, k7, k8, k8sk) and the rule that picks them.

A 128-bit global access needs a 16-byte-aligned address: rows of A need K % 4 == 0, rows of B
and C need N % 4 == 0, and every base pointer must be aligned. The host decides per call
which operands may move as float4 (`vector_operands`); a level keeps one specialisation per
answer and moves the other operands 32 bits at a time.

Every loader moves four floats of one matrix row, X[off : off+4] (or `step` floats apart),
i.e. columns col, col+step, col+2·step, col+3·step of a row with `ncols` columns; `row_ok`
says the row exists. Checked forms (`vector_load`, `scalar_load`, `store_vector`,
`store_scalar`): outside the matrix loads give 0 and stores skip; a float4 needs one compare
(ncols % 4 == 0: all four columns are in, or all out), the 32-bit forms one per float.
Unchecked forms (`*_in`: tiles wholly inside the matrix) carry no predicate at all.

Each factory takes the element load it is built on: `load4_global` / `plain` (C, and k6's A
and B), or the read-only path `load4_readonly` / `load_readonly` (ld.global.nc, as nvcc does for
the twins' `const float* __restrict__`; k7 and k8 read A and B through it). Why `step`: a warp
whose 32-bit loads of B go 32 floats apart reads one 128-byte line per LDG; four consecutive
floats per lane would touch four lines per instruction, four times over (4× the L1 wavefronts
of the float4 form).
"""
from __future__ import annotations

from numba import cuda

from ..ptx.intrinsics import store4_global
from ._common import float32, u32, u64

ZERO = float32(0.0)


def inline(f):
    """f as a device function inlined in Numba IR (no compiled device function: no GPU needed)."""
    return cuda.jit(device=True, inline="always")(f)


# ---- which operands may move as float4 ---------------------------------------------------

def _address(x) -> int:
    # the simulator's device arrays are NumPy arrays underneath
    iface = getattr(x, "__cuda_array_interface__", None) or x.__array_interface__
    return iface["data"][0]


def _aligned(x) -> bool:
    return _address(x) % 16 == 0


def vector_operands(A, B, C) -> tuple[bool, bool]:
    """(rows of A are 16-byte aligned, rows of B and of C are): which operands may move as float4."""
    K, N = A.shape[1], B.shape[1]
    return K % 4 == 0 and _aligned(A), N % 4 == 0 and _aligned(B) and _aligned(C)


# ---- element loads the factories are built on --------------------------------------------

@inline
def plain(X, off):
    return X[off]


# ---- checked: outside the matrix loads give 0 and stores skip -----------------------------

def vector_load(load4):
    """load4(X, off) when the float4 is inside the matrix, else zeros."""
    @inline
    def vector(X, off, row_ok, col, ncols):
        if row_ok & (col < ncols):          # ncols % 4 == 0: all four in, or all out
            return load4(X, off)
        return ZERO, ZERO, ZERO, ZERO
    return vector


def scalar_load(load, step):
    """Four load(X, ·) `step` floats apart, each checked. u32(col + i): a plain `col + 1` is
    int64 in Numba, i.e. 64-bit compares; `&` (not `and`) gives predicated loads, not branches."""
    @inline
    def scalar(X, off, row_ok, col, ncols):
        return (load(X, off) if row_ok & (col < ncols) else ZERO,
                load(X, off + u64(step)) if row_ok & (u32(col + step) < ncols) else ZERO,
                load(X, off + u64(2 * step)) if row_ok & (u32(col + 2 * step) < ncols) else ZERO,
                load(X, off + u64(3 * step)) if row_ok & (u32(col + 3 * step) < ncols) else ZERO)
    return scalar


@inline
def store_vector(X, off, row_ok, col, ncols, v):
    """The float4 v into X[off:off+4] as one STG.E.128 when it is inside the matrix."""
    if row_ok & (col < ncols):
        store4_global(X, off, v)


@inline
def store_scalar(X, off, row_ok, col, ncols, v):
    """The float4 v into X[off:off+4] one float at a time, each column checked (C's 32-bit edge)."""
    if row_ok & (col < ncols):
        X[off] = v[0]
    if row_ok & (u32(col + 1) < ncols):
        X[off + u64(1)] = v[1]
    if row_ok & (u32(col + 2) < ncols):
        X[off + u64(2)] = v[2]
    if row_ok & (u32(col + 3) < ncols):
        X[off + u64(3)] = v[3]


# ---- unchecked: the tile lies wholly inside the matrix ------------------------------------

def vector_load_in(load4):
    @inline
    def vector_in(X, off):
        return load4(X, off)
    return vector_in


def scalar_load_in(load, step):
    """Four load(X, ·) `step` floats apart off one address register (+0x4, +0x8, ... for step 1):
    no compare, no predicate."""
    @inline
    def scalar_in(X, off):
        return (load(X, off), load(X, off + u64(step)),
                load(X, off + u64(2 * step)), load(X, off + u64(3 * step)))
    return scalar_in


@inline
def store_vector_in(X, off, v):
    store4_global(X, off, v)


@inline
def store_scalar_in(X, off, v):
    X[off] = v[0]
    X[off + u64(1)] = v[1]
    X[off + u64(2)] = v[2]
    X[off + u64(3)] = v[3]
