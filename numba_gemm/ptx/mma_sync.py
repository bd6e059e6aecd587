"""Inline-PTX intrinsics for tensor-core kernels written in numba.cuda (the v8py level).

Numba has no API for inline assembly, but an `@intrinsic` may emit any LLVM IR, and LLVM IR
has inline assembly (`llvmlite.ir.InlineAsm`), which NVVM passes through to PTX unchanged.
Each intrinsic below is a few lines of that; its docstring shows the PTX it emits. They are
the instructions native/ptx.cuh wraps for the CUDA C levels, with the same operands:

    smem_u32(S)                 the 32-bit shared-window address of shared array S
    ldmatrix_x4(addr)           ldmatrix.sync.aligned.m8n8.x4.shared.b16        -> 4 x u32
    ldmatrix_x4_trans(addr)     ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16  -> 4 x u32
    mma_f16(c, a, b)            mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32  -> 4 x f32
    mma_bf16(c, a, b)           ... .f32.bf16.bf16.f32
    cp_async16(dst, X, i, n)    cp.async.cg.shared.global [dst], [&X[i]], 16, n  (n = 0: zero-fill)
    cp_async_commit()           cp.async.commit_group
    cp_async_wait(n)            cp.async.wait_group n   (n a compile-time constant: a factory)

Shared operands are 32-bit addresses in the shared window, as the instructions take them
(`smem_u32` of a `cuda.shared.array(0, ...)`, the dynamic shared memory, plus a byte offset).
Register operands are uint32 (two 16-bit halves, the lower index in the low half).

The simulator: an intrinsic has no Python body, so each one has a plain-Python twin, chosen
when `numba.cuda.config.ENABLE_CUDASIM` is set, that computes what the instruction computes.
ldmatrix and mma.sync are warp-wide: one lane's result depends on the other lanes' operands.
The simulator runs every GPU thread as a Python thread, so the twins of those two meet at a
per-warp rendezvous, collect the 32 lanes' operands, and evaluate the whole warp's instruction
once (`ldmatrix_warp`, `mma_warp`: pure functions on all 32 lanes' operands, written from the
PTX ISA's fragment layouts, which tests/test_ptx_intrinsics.py checks lane by lane). The
cp.async twin queues the copy and performs it only when a cp.async.wait_group lets its group
complete, so a kernel that reads a stage before waiting for it reads stale data in the
simulator too; it also refuses the accesses the hardware faults on (misaligned, out of bounds).
"""
from __future__ import annotations

import threading

import numpy as np
from numba import cuda

from .intrinsics import _numpy  # the NumPy array behind a simulator array

SIMULATOR = bool(cuda.config.ENABLE_CUDASIM)


# ---------------------------------------------------------------------------------------
# Fragment layouts of mma.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16" with
# .f16/.bf16 inputs). g = lane // 4 (the "groupID"), q = lane % 4 ("threadID_in_group").
# Each function gives, for register r and half h (0 = low 16 bits), the (row, col) element.

def a_fragment_coords(lane: int, r: int, h: int) -> tuple[int, int]:
    """A (16 x 16, row-major): a0..a3 hold (g, 2q+h), (g+8, 2q+h), (g, 2q+8+h), (g+8, 2q+8+h)."""
    g, q = lane // 4, lane % 4
    return g + 8 * (r % 2), 2 * q + h + 8 * (r // 2)


def b_fragment_coords(lane: int, r: int, h: int) -> tuple[int, int]:
    """B (16 x 8, k x n): b0, b1 hold (k = 2q+h, n = g), (k = 2q+8+h, n = g)."""
    g, q = lane // 4, lane % 4
    return 2 * q + h + 8 * r, g


def c_fragment_coords(lane: int, r: int) -> tuple[int, int]:
    """C/D (16 x 8, fp32): c0..c3 hold (g, 2q), (g, 2q+1), (g+8, 2q), (g+8, 2q+1)."""
    g, q = lane // 4, lane % 4
    return g + 8 * (r // 2), 2 * q + r % 2


def ldmatrix_coords(lane: int, r: int, h: int, trans: bool) -> tuple[int, int, int]:
    """ldmatrix .x4: (matrix, row, col) of the 8 x 8 matrix element that lands in half h of
    register r of `lane`. Register r receives matrix r; lane t gets row t // 4, columns
    2(t % 4), 2(t % 4) + 1 — or, with .trans, the transposed element (row and col swapped)."""
    row, col = lane // 4, 2 * (lane % 4) + h
    return (r, col, row) if trans else (r, row, col)


# ---------------------------------------------------------------------------------------
# Whole-warp semantics: pure functions of all 32 lanes' operands.

def ldmatrix_warp(smem: np.ndarray, addrs, trans: bool) -> list[tuple[int, int, int, int]]:
    """What ldmatrix.x4(.trans) returns to each of 32 lanes. `smem`: the shared memory as
    bytes (uint8), `addrs[l]`: the byte offset lane l supplies, the start of row l % 8 of
    matrix l // 8 (16 bytes: eight b16 elements)."""
    halves = smem.view(np.uint16)
    rows = []
    for a in addrs:
        a = int(a)
        if a % 16 or not 0 <= a <= smem.size - 16:
            raise ValueError(f"ldmatrix row address {a:#x}: not 16-byte aligned or outside shared memory")
        rows.append(halves[a // 2: a // 2 + 8])
    out = []
    for lane in range(32):
        regs = []
        for r in range(4):
            lo, hi = (int(rows[8 * m + i][j]) for m, i, j in
                      (ldmatrix_coords(lane, r, h, trans) for h in (0, 1)))
            regs.append(lo | (hi << 16))
        out.append(tuple(regs))
    return out


def _halves_to_float(bits: np.ndarray, bf16: bool) -> np.ndarray:
    bits = np.asarray(bits, dtype=np.uint32)
    if bf16:
        return (bits << 16).view(np.float32).astype(np.float64)
    return bits.astype(np.uint16).view(np.float16).astype(np.float64)


def mma_warp(c, a, b, bf16: bool) -> list[tuple]:
    """What mma.sync.m16n8k16.row.col.f32.{f16,bf16} returns to each of 32 lanes.
    c[l]: lane l's 4 fp32 accumulators, a[l]: its 4 A registers, b[l]: its 2 B registers.
    Products are exact in float64; the sum is rounded once to fp32 (the hardware rounds
    partial sums differently, within fp32 accumulation error)."""
    A = np.zeros((16, 16), np.uint32)
    B = np.zeros((16, 8), np.uint32)
    C = np.zeros((16, 8), np.float64)
    for lane in range(32):
        for r in range(4):
            for h in (0, 1):
                A[a_fragment_coords(lane, r, h)] = (int(a[lane][r]) >> (16 * h)) & 0xFFFF
            C[c_fragment_coords(lane, r)] = float(c[lane][r])
        for r in range(2):
            for h in (0, 1):
                B[b_fragment_coords(lane, r, h)] = (int(b[lane][r]) >> (16 * h)) & 0xFFFF
    D = (_halves_to_float(A, bf16) @ _halves_to_float(B, bf16) + C).astype(np.float32)
    return [tuple(D[c_fragment_coords(lane, r)] for r in range(4)) for lane in range(32)]


# ---------------------------------------------------------------------------------------
# Simulator twins.

class _Warp:
    """Rendezvous of one simulated warp: each lane deposits its operands and waits; the
    barrier's action (run by one lane once all 32 have arrived) evaluates the instruction for
    the whole warp; each lane then takes its own result. Operands and results alternate
    between two slots: a lane reuses a slot only after every lane has arrived at the next
    instruction, i.e. has taken its result from this one."""

    def __init__(self):
        self.slots = [[None] * 32, [None] * 32]
        self.results = [None, None]
        self.pending = None
        self.barrier = threading.Barrier(32, action=self._evaluate, timeout=120)

    def _evaluate(self):
        parity, evaluate = self.pending
        self.results[parity] = evaluate(list(self.slots[parity]))

    def call(self, parity, lane, operands, evaluate):
        self.slots[parity][lane] = operands
        self.pending = (parity, evaluate)   # the same for every lane of this instruction
        self.barrier.wait()
        return self.results[parity][lane]


_WARPS_LOCK = threading.Lock()


def _thread_state():
    """(this simulated thread, its lane, its warp's rendezvous)."""
    t = threading.current_thread()
    manager = t._manager
    warp = t.thread_id // 32
    with _WARPS_LOCK:
        warps = manager.__dict__.setdefault("_ptx_warps", {})
        w = warps.get(warp)
        if w is None:
            w = warps[warp] = _Warp()
    if not hasattr(t, "_ptx_calls"):
        t._ptx_calls = 0
        t._ptx_groups = [[]]      # cp.async: committed groups, then the open one
    return t, t.thread_id % 32, w


def _warp_call(operands, evaluate):
    t, lane, w = _thread_state()
    parity = t._ptx_calls % 2
    t._ptx_calls += 1
    return w.call(parity, lane, operands, evaluate)


# The simulated shared window: dynamic shared memory starts at this (16-byte aligned, not
# 1024-byte aligned) address, so a kernel's own alignment arithmetic is exercised.
_SIM_SMEM_BASE = 0x10


def _sim_smem_u32(S):
    t = threading.current_thread()
    t._ptx_smem = _numpy(S).view(np.uint8)
    return np.uint32(_SIM_SMEM_BASE)


def _smem_bytes(t):
    smem = getattr(t, "_ptx_smem", None)
    if smem is None:
        raise RuntimeError("shared address used before smem_u32() named the shared array")
    return smem


def _sim_ldmatrix(trans):
    def ldmatrix(addr):
        t = threading.current_thread()
        smem = _smem_bytes(t)
        return _warp_call(int(addr) - _SIM_SMEM_BASE,
                          lambda addrs: ldmatrix_warp(smem, addrs, trans))

    return ldmatrix


def _sim_mma(bf16):
    def mma(c, a, b):
        def evaluate(ops):
            return [tuple(np.float32(x) for x in d) for d in
                    mma_warp([o[0] for o in ops], [o[1] for o in ops], [o[2] for o in ops], bf16)]

        return _warp_call((tuple(c), tuple(a), tuple(b)), evaluate)

    return mma


def _sim_cp_async16(dst, X, index, src_bytes):
    t, _, _ = _thread_state()
    smem = _smem_bytes(t)
    x = _numpy(X)
    off = int(dst) - _SIM_SMEM_BASE
    if off % 16 or not 0 <= off <= smem.size - 16:
        raise ValueError(f"cp.async destination {int(dst):#x}: not 16-byte aligned or outside shared memory")
    n = int(src_bytes)
    if n not in (0, 16):
        raise ValueError("cp_async16 copies 16 bytes or zero-fills them (src_bytes 0)")
    flat = x.reshape(-1).view(np.uint8)
    start = int(index) * x.itemsize
    if (x.__array_interface__["data"][0] + start) % 16:
        raise ValueError(f"cp.async source at element {int(index)} is not 16-byte aligned")
    if n and not 0 <= start <= flat.size - 16:
        raise IndexError(f"cp.async source at element {int(index)} reads past the array")
    data = flat[start:start + 16].copy() if n else np.zeros(16, np.uint8)
    t._ptx_groups[-1].append((off, data))


def _sim_cp_async_commit():
    t, _, _ = _thread_state()
    t._ptx_groups.append([])


def _sim_cp_async_wait(n):
    def wait(*_):
        t, _, _ = _thread_state()
        smem = _smem_bytes(t) if any(t._ptx_groups) else None
        committed = t._ptx_groups[:-1]
        while len(committed) > n:           # the oldest groups complete
            for off, data in committed.pop(0):
                smem[off:off + 16] = data
        t._ptx_groups[:-1] = committed

    return wait


# ---------------------------------------------------------------------------------------
# The intrinsics.

def _build():
    from llvmlite import ir
    from numba.cuda import cgutils, types
    from numba.cuda.extending import intrinsic

    i32, i64, f32 = ir.IntType(32), ir.IntType(64), ir.FloatType()
    SHARED = 3
    u32x4 = types.UniTuple(types.uint32, 4)
    f32x4 = types.UniTuple(types.float32, 4)

    def asm(builder, ret, ins, text, constraints, side_effect=True):
        fnty = ir.FunctionType(ret, [v.type for v in ins])
        return builder.call(ir.InlineAsm(fnty, text, constraints, side_effect=side_effect), ins)

    def u32_arg(context, builder, value, ty):
        return context.cast(builder, value, ty, types.uint32)

    def is_tuple(ty, n, kind):
        return isinstance(ty, types.BaseTuple) and len(ty) == n and all(isinstance(t, kind) for t in ty)

    @intrinsic
    def smem_u32(typingctx, S):
        """The shared-window address of shared array S (from its generic data pointer):

            cvta.to.shared (folded by LLVM to `mov.u32 %r, <symbol>;` for a static symbol)
        """
        if not isinstance(S, types.Array):
            raise TypeError(f"smem_u32 takes a shared array, got {S}")

        def codegen(context, builder, sig, args):
            ary = context.make_array(S)(context, builder, args[0])
            shared = builder.addrspacecast(ary.data, ir.PointerType(ary.data.type.pointee, SHARED))
            return builder.ptrtoint(shared, i32)

        return types.uint32(S), codegen

    def make_ldmatrix(trans):
        text = ("ldmatrix.sync.aligned.m8n8.x4%s.shared.b16 {$0, $1, $2, $3}, [$4];"
                % (".trans" if trans else ""))

        def ldmatrix(typingctx, addr):
            if not isinstance(addr, types.Integer):
                raise TypeError(f"ldmatrix takes a uint32 shared address, got {addr}")

            def codegen(context, builder, sig, args):
                res = asm(builder, ir.LiteralStructType([i32] * 4),
                          [u32_arg(context, builder, args[0], addr)], text, "=r,=r,=r,=r,r")
                parts = [builder.extract_value(res, i) for i in range(4)]
                return context.make_tuple(builder, sig.return_type, parts)

            return u32x4(addr), codegen

        ldmatrix.__doc__ = text
        return ldmatrix

    ldmatrix_x4 = intrinsic(make_ldmatrix(False))
    ldmatrix_x4.__doc__ = """Four 8x8 b16 matrices: lane l gives the row address of row l%8 of
        matrix l/8; register r of lane t receives matrix r, row t/4, columns 2(t%4), 2(t%4)+1:

            ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r0, %r1, %r2, %r3}, [%addr];"""
    ldmatrix_x4_trans = intrinsic(make_ldmatrix(True))
    ldmatrix_x4_trans.__doc__ = """As ldmatrix_x4, each matrix transposed: lane t receives rows
        2(t%4), 2(t%4)+1 of column t/4 (mma's B fragment when B is stored k-major):

            ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%r0, %r1, %r2, %r3}, [%addr];"""

    def make_mma(ab):
        text = ("mma.sync.aligned.m16n8k16.row.col.f32.%s.%s.f32 "
                "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};" % (ab, ab))

        def mma(typingctx, c, a, b):
            if not (is_tuple(c, 4, types.Number) and is_tuple(a, 4, types.Integer)
                    and is_tuple(b, 2, types.Integer)):
                raise TypeError(f"mma takes (4 floats, 4 uint32, 2 uint32), got {c}, {a}, {b}")

            def codegen(context, builder, sig, args):
                cs = [context.cast(builder, v, t, types.float32)
                      for v, t in zip(cgutils.unpack_tuple(builder, args[0], 4), c)]
                ins = [u32_arg(context, builder, v, t)
                       for v, t in zip(cgutils.unpack_tuple(builder, args[1], 4), a)]
                ins += [u32_arg(context, builder, v, t)
                        for v, t in zip(cgutils.unpack_tuple(builder, args[2], 2), b)]
                # a pure function of its operands: no side effect, LLVM may schedule it freely
                res = asm(builder, ir.LiteralStructType([f32] * 4), ins + cs, text,
                          "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f", side_effect=False)
                parts = [builder.extract_value(res, i) for i in range(4)]
                return context.make_tuple(builder, sig.return_type, parts)

            return f32x4(c, a, b), codegen

        return intrinsic(mma)

    mma_f16 = make_mma("f16")
    mma_f16.__doc__ = """D = A B + C on one warp, fp16 inputs, fp32 accumulators (c: 4 floats,
        a: 4 uint32, b: 2 uint32; layouts: a/b/c_fragment_coords):

            mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {d0..d3}, {a0..a3}, {b0, b1}, {c0..c3};"""
    mma_bf16 = make_mma("bf16")
    mma_bf16.__doc__ = mma_f16.__doc__.replace("fp16", "bf16").replace("f16.f16", "bf16.bf16")

    @intrinsic
    def cp_async16(typingctx, dst, X, index, src_bytes):
        """Copy 16 bytes from &X[index] (global) to shared address dst without passing through
        registers, L1 bypassed; src_bytes 0 reads nothing and writes 16 zero bytes (the
        address given is then X's base: it must still be valid):

            cp.async.cg.shared.global [%dst], [%src], 16, %src_bytes;
        """
        if not (isinstance(X, types.Array) and X.ndim == 1 and X.layout in "CA"
                and all(isinstance(t, types.Integer) for t in (dst, index, src_bytes))):
            raise TypeError(f"cp_async16(u32 dst, 1-D array, index, src_bytes), got {dst}, {X}, {index}")

        def codegen(context, builder, sig, args):
            ary = context.make_array(X)(context, builder, args[1])
            i = args[2]
            i = builder.sext(i, i64) if index.signed else builder.zext(i, i64)
            n = u32_arg(context, builder, args[3], src_bytes)
            # src_bytes 0: pass X's base instead (any valid address), as a pointer select, so
            # the address arithmetic of consecutive copies stays one walk
            ptr = builder.select(builder.icmp_unsigned("!=", n, ir.Constant(i32, 0)),
                                 builder.gep(ary.data, [i], inbounds=True), ary.data)
            asm(builder, ir.VoidType(),
                [u32_arg(context, builder, args[0], dst), builder.ptrtoint(ptr, i64), n],
                "cp.async.cg.shared.global [$0], [$1], 16, $2;", "r,l,r,~{memory}")
            return context.get_dummy_value()

        return types.void(dst, X, index, src_bytes), codegen

    @intrinsic
    def cp_async_commit(typingctx):
        """Close the group of this thread's cp.async issued since the last commit:

            cp.async.commit_group;
        """
        def codegen(context, builder, sig, args):
            asm(builder, ir.VoidType(), [], "cp.async.commit_group;", "~{memory}")
            return context.get_dummy_value()

        return types.void(), codegen

    def cp_async_wait(n: int):
        """An intrinsic that waits until at most n (a constant) of this thread's committed
        cp.async groups are still in flight:

            cp.async.wait_group n;
        """
        n = int(n)

        def wait(typingctx):
            def codegen(context, builder, sig, args):
                asm(builder, ir.VoidType(), [], f"cp.async.wait_group {n};", "~{memory}")
                return context.get_dummy_value()

            return types.void(), codegen

        wait.__name__ = f"cp_async_wait_{n}"
        return intrinsic(wait)

    return (smem_u32, ldmatrix_x4, ldmatrix_x4_trans, mma_f16, mma_bf16,
            cp_async16, cp_async_commit, cp_async_wait)


if SIMULATOR:
    smem_u32 = _sim_smem_u32
    ldmatrix_x4, ldmatrix_x4_trans = _sim_ldmatrix(False), _sim_ldmatrix(True)
    mma_f16, mma_bf16 = _sim_mma(False), _sim_mma(True)
    cp_async16, cp_async_commit, cp_async_wait = _sim_cp_async16, _sim_cp_async_commit, _sim_cp_async_wait
else:
    (smem_u32, ldmatrix_x4, ldmatrix_x4_trans, mma_f16, mma_bf16,
     cp_async16, cp_async_commit, cp_async_wait) = _build()
