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

__all__ = [
    "smem_u32", "ldmatrix_x4", "ldmatrix_x4_trans", "mma_f16", "mma_bf16",
    "cp_async16", "cp_async_commit", "cp_async_wait",
    "ldmatrix_warp", "mma_warp", "a_fragment_coords", "b_fragment_coords", "c_fragment_coords",
    "ldmatrix_coords", "SIMULATOR",
]


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


# =======================================================================================
# Hopper (sm_90a): mbarrier, TMA and wgmma — the instructions of the v11py level, the same
# ones native/ptx.cuh and native/wgmma.cuh wrap for v11, with the same operands:
#
#   mbar_init(bar, count)              mbarrier.init.shared::cta.b64 [bar], count
#   fence_mbarrier_init()              fence.mbarrier_init.release.cluster
#   fence_proxy_async()                fence.proxy.async.shared::cta
#   mbar_arrive(bar)                   mbarrier.arrive.shared::cta.b64 _, [bar]
#   mbar_arrive_expect_tx(bar, bytes)  mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], bytes
#   mbar_wait(bar, parity)             mbarrier.try_wait.parity.shared::cta.b64, looped until done
#   fence_tensormap_acquire(tmap)      fence.proxy.tensormap::generic.acquire.sys [tmap], 128
#   prefetch_tensormap(tmap)           prefetch.tensormap [tmap]
#   tma_load_2d(dst, tmap, x, y, bar)  cp.async.bulk.tensor.2d.shared::cluster.global
#                                          .mbarrier::complete_tx::bytes [dst], [tmap, {x, y}], [bar]
#   warp_sync()                        bar.warp.sync -1 (the simulator has no cuda.syncwarp)
#   wgmma_fence() / wgmma_commit()     wgmma.fence / wgmma.commit_group (.sync.aligned)
#   wgmma_wait(n)                      wgmma.wait_group.sync.aligned n   (a factory, n constant)
#   wgmma_f16(acc, desc_a, desc_b)     wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16
#   wgmma_bf16(acc, desc_a, desc_b)    ... .f32.bf16.bf16
#   fence_operands(acc)                an empty asm on acc's 128 registers (pins them in order)
#
# bar, dst: 32-bit shared-window addresses; tmap: the 64-bit generic address of a tensor map
# in global memory (v11py's choice: Numba cannot pass a 128-byte, 64-byte-aligned
# __grid_constant__ parameter). acc: a float32 local array of 128 elements, the warpgroup's
# 64 x 256 fp32 accumulator fragment (wgmma_acc_coords); the wgmma intrinsic loads all 128,
# passes them as tied "+f" operands of one asm statement and stores the results back, so with
# constant indices everywhere NVVM keeps the array in registers.
#
# The twins. TMA: the copy lands at issue (the box from the map's matrix, zero-filled outside
# it, through the 128-byte swizzle on the absolute shared address) and completes its bytes on
# the mbarrier. mbarrier: arrivals and tx bytes are counted; a phase completes when both reach
# zero, and try_wait.parity is true once the current phase's parity differs from the one
# asked for; a waiting thread sleeps between polls (the simulator's threads are Python threads)
# and gives up, with an error, after a minute without progress — a deadlock on the GPU.
# wgmma: each thread queues its operations; wait_group is a rendezvous of the warpgroup's 128
# threads at which the oldest committed groups are evaluated, reading shared memory then (the
# latest the hardware may read it), so a stage refilled before its wgmma completed gives wrong
# results here too. wgmma without a wgmma.fence since the last commit_group is refused.

import time as _time

__all__ += [
    "mbar_init", "fence_mbarrier_init", "fence_proxy_async", "mbar_arrive", "mbar_arrive_expect_tx",
    "mbar_wait", "fence_tensormap_acquire", "prefetch_tensormap", "tma_load_2d", "warp_sync",
    "wgmma_fence", "wgmma_commit", "wgmma_wait", "wgmma_f16", "wgmma_bf16", "fence_operands",
    "wgmma_acc_coords", "decode_smem_desc", "wgmma_operand_a", "wgmma_operand_b", "wgmma_warpgroup",
    "sim_tensor_map", "tma_box",
]

WGMMA_N = 256          # m64n256k16: the only shape these intrinsics emit
_WAIT_TIMEOUT_S = 60.0


def wgmma_acc_coords(t: int, i: int) -> tuple[int, int]:
    """(row, col) of accumulator d[i] (0..127) of thread t (0..127) of the warpgroup, in the
    64 x 256 tile of m64n256k16 (PTX ISA, "Matrix Fragments for wgmma.mma_async.m64nNk16",
    accumulator D): warp t/32 owns rows 16 (t/32) .. +15; row (t%32)/4, plus 8 for i%4 >= 2;
    column 8 (i/4) + 2 (t%4) + i%2 — mma.sync's 16 x 8 C layout once per warp and n8 block."""
    w, lane = t // 32, t % 32
    return 16 * w + lane // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (lane % 4) + i % 2


def decode_smem_desc(desc: int) -> dict:
    """The fields of a 64-bit wgmma shared-memory matrix descriptor (the inverse of
    numba_gemm.hgemm._wgmma.smem_desc): byte start address, LBO, SBO, base offset, swizzle."""
    desc = int(desc)
    return {"start": (desc & 0x3FFF) << 4, "lbo": ((desc >> 16) & 0x3FFF) << 4,
            "sbo": ((desc >> 32) & 0x3FFF) << 4, "base_offset": (desc >> 49) & 7,
            "swizzle": {0: "none", 1: "128B", 2: "64B", 3: "32B"}[(desc >> 62) & 3]}


def _swizzled(addr: np.ndarray) -> np.ndarray:
    """SWIZZLE_128B on absolute shared addresses: bits 4-6 XOR bits 7-9 (repeats every 1024 B)."""
    return addr ^ (((addr >> 7) & 7) << 4)


def _sw128_fields(desc):
    f = decode_smem_desc(desc)
    if f["swizzle"] != "128B" or f["base_offset"] != 0:
        raise NotImplementedError(f"the wgmma twin reads SWIZZLE_128B tiles with base offset 0, got {f}")
    return f


def wgmma_operand_a(smem: np.ndarray, desc: int) -> np.ndarray:
    """A (64 x 16, K-major, 128-byte swizzle) as uint16 bits: element (m, k) at start +
    (m / 8) SBO + (m % 8) 128 + 2k, swizzled. `smem`: the shared window as bytes, from
    address _SIM_SMEM_BASE."""
    f = _sw128_fields(desc)
    m, k = np.arange(64)[:, None], np.arange(16)[None, :]
    return _gather16(smem, f["start"] + (m // 8) * f["sbo"] + (m % 8) * 128 + 2 * k)


def wgmma_operand_b(smem: np.ndarray, desc: int, n: int = WGMMA_N) -> np.ndarray:
    """B (16 x n, N-major — imm-trans-b 1 —, 128-byte swizzle) as uint16 bits: element (k, j)
    at start + (j / 64) LBO + (k / 8) SBO + (k % 8) 128 + 2 (j % 64), swizzled."""
    f = _sw128_fields(desc)
    k, j = np.arange(16)[:, None], np.arange(n)[None, :]
    return _gather16(smem, f["start"] + (j // 64) * f["lbo"] + (k // 8) * f["sbo"] + (k % 8) * 128
                     + 2 * (j % 64))


def _gather16(smem: np.ndarray, addr: np.ndarray) -> np.ndarray:
    off = _swizzled(np.asarray(addr, np.int64)) - _SIM_SMEM_BASE
    if off.min() < 0 or off.max() + 2 > smem.size:
        raise ValueError("wgmma operand outside shared memory")
    return smem[off].astype(np.uint16) | (smem[off + 1].astype(np.uint16) << 8)


_ACC_ROWS, _ACC_COLS = (np.array([[wgmma_acc_coords(t, i)[a] for i in range(128)] for t in range(128)])
                        for a in (0, 1))


def wgmma_warpgroup(smem: np.ndarray, accs, desc_a: int, desc_b: int, bf16: bool) -> None:
    """One m64n256k16 wgmma of a whole warpgroup: accs[t] (thread t's 128 fp32 accumulators)
    += A B, in place, in the accumulator layout. Products and sums in float64, rounded once to
    fp32 (the tensor cores round partial sums differently, within fp32 accumulation error)."""
    A = _halves_to_float(wgmma_operand_a(smem, desc_a), bf16)
    B = _halves_to_float(wgmma_operand_b(smem, desc_b), bf16)
    D = np.zeros((64, WGMMA_N))
    D[_ACC_ROWS, _ACC_COLS] = np.stack([np.asarray(a, np.float64) for a in accs])
    D = (A @ B + D).astype(np.float32)
    for t, a in enumerate(accs):
        a[:] = D[_ACC_ROWS[t], _ACC_COLS[t]]


def tma_box(X: np.ndarray, x: int, y: int, box_rows: int, box_cols: int) -> np.ndarray:
    """The box_rows x box_cols box of 2-D X at column x, row y, zero outside X (TMA's fill)."""
    box = np.zeros((box_rows, box_cols), X.dtype)
    r0, r1 = max(y, 0), min(y + box_rows, X.shape[0])
    c0, c1 = max(x, 0), min(x + box_cols, X.shape[1])
    if r0 < r1 and c0 < c1:
        box[r0 - y:r1 - y, c0 - x:c1 - x] = X[r0:r1, c0:c1]
    return box


# ---- simulator state ------------------------------------------------------------------

class _Rendezvous:
    """n simulated threads meet; the last to arrive runs `evaluate` on everyone's operands.
    Waiting threads poll the simulator's abort flag, so a failing thread does not leave the
    others blocked."""

    def __init__(self, n):
        self.n, self.count, self.generation = n, 0, 0
        self.cond = threading.Condition()
        self.slots = [None] * n
        self.error = None

    def call(self, index, operands, evaluate):
        t = threading.current_thread()
        with self.cond:
            gen = self.generation
            self.slots[index] = operands
            self.count += 1
            if self.count == self.n:
                try:
                    self.error = None
                    evaluate(list(self.slots))
                except Exception as e:          # every participant raises it
                    self.error = e
                self.count, self.generation = 0, gen + 1
                self.cond.notify_all()
            else:
                start = _time.monotonic()
                while self.generation == gen:
                    self.cond.wait(0.05)
                    if getattr(t, "abort", False):
                        raise RuntimeError("another simulated thread failed")
                    if _time.monotonic() - start > _WAIT_TIMEOUT_S:
                        raise RuntimeError(f"{self.count} of {self.n} threads reached a warpgroup "
                                           "instruction (the others never did: a hang on the GPU)")
            if self.error is not None:
                raise self.error


class _MBarrier:
    def __init__(self, count):
        self.count, self.pending, self.tx, self.phase = count, count, 0, 0

    def _maybe_complete(self):
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count

    def arrive(self, tx=0):
        if self.pending == 0:
            raise RuntimeError("mbarrier arrival beyond its expected count")
        self.tx += tx
        self.pending -= 1
        self._maybe_complete()

    def complete_tx(self, nbytes):
        self.tx -= nbytes
        if not -(2**20 - 1) <= self.tx <= 2**20 - 1:
            raise RuntimeError(f"mbarrier tx-count {self.tx} out of range")
        self._maybe_complete()


class _Block:
    """The Hopper state of one simulated block: its mbarriers (by shared address) and its
    warpgroup rendezvous."""

    def __init__(self):
        self.lock = threading.Lock()
        self.barriers: dict[int, _MBarrier] = {}
        self.warpgroups: dict[int, _Rendezvous] = {}

    def barrier(self, bar) -> _MBarrier:
        b = self.barriers.get(int(bar))
        if b is None:
            raise RuntimeError(f"mbarrier at shared address {int(bar):#x} used before mbarrier.init")
        return b


def _block() -> _Block:
    t = threading.current_thread()
    key = tuple(t.blockIdx)
    with _WARPS_LOCK:
        blocks = t._manager.__dict__.setdefault("_ptx_hopper", {})
        b = blocks.get(key)
        if b is None:
            b = blocks[key] = _Block()
    return b


def _check_bar(bar):
    t = threading.current_thread()
    smem = _smem_bytes(t)
    off = int(bar) - _SIM_SMEM_BASE
    if off % 8 or not 0 <= off <= smem.size - 8:
        raise ValueError(f"mbarrier address {int(bar):#x}: not 8-byte aligned or outside shared memory")


def _sim_mbar_init(bar, count):
    _check_bar(bar)
    b = _block()
    with b.lock:
        b.barriers[int(bar)] = _MBarrier(int(count))


def _sim_mbar_arrive(bar):
    b = _block()
    with b.lock:
        b.barrier(bar).arrive()


def _sim_mbar_arrive_expect_tx(bar, nbytes):
    b = _block()
    with b.lock:
        b.barrier(bar).arrive(int(nbytes))


def _sim_mbar_wait(bar, parity):
    t, b = threading.current_thread(), _block()
    start = _time.monotonic()
    while True:
        with b.lock:
            if (b.barrier(bar).phase & 1) != (int(parity) & 1):
                return
        if getattr(t, "abort", False):
            raise RuntimeError("another simulated thread failed")
        if _time.monotonic() - start > _WAIT_TIMEOUT_S:
            raise RuntimeError(f"mbarrier at {int(bar):#x}: the phase of parity {int(parity)} never "
                               "completed (a deadlock on the GPU)")
        _time.sleep(0.0005)


def _no_op(*_):
    return None


# Tensor maps of the simulator: the address of a 128-byte host buffer (what the kernel is
# given) -> (the buffer, the matrix as uint16 bits, box rows, box cols).
_SIM_MAPS: dict = {}
_SIM_MAPS_LOCK = threading.Lock()


def sim_tensor_map(X: np.ndarray, box_rows: int, box_cols: int) -> int:
    """A simulator tensor map of the row-major 2-byte matrix X read in box_rows x box_cols
    boxes with SWIZZLE_128B (what numba_gemm.tma.matrix_map encodes on a GPU): returns the
    address to pass to the kernel. The inner box must be one 128-byte swizzle span."""
    X = np.asarray(X)
    if X.ndim != 2 or X.itemsize != 2:
        raise ValueError(f"sim_tensor_map takes a 2-D matrix of 2-byte elements, got {X.dtype} {X.shape}")
    if box_cols * 2 != 128:
        raise ValueError("the twin implements SWIZZLE_128B boxes with 128-byte rows")
    buf = np.zeros(128 + 64, np.uint8)
    addr = buf.__array_interface__["data"][0]
    addr += -addr % 64                                   # 64-byte aligned, as a CUtensorMap
    with _SIM_MAPS_LOCK:
        _SIM_MAPS[addr] = (buf, X.view(np.uint16), int(box_rows), int(box_cols))
        while len(_SIM_MAPS) > 64:
            _SIM_MAPS.pop(next(iter(_SIM_MAPS)))
    return addr


def _sim_tma_load_2d(dst, tmap, x, y, bar):
    t = threading.current_thread()
    smem = _smem_bytes(t)
    with _SIM_MAPS_LOCK:
        entry = _SIM_MAPS.get(int(tmap))
    if entry is None:
        raise ValueError(f"no tensor map at {int(tmap):#x}")
    _, X, box_rows, box_cols = entry
    dst = int(dst)
    if dst % 128:
        raise ValueError(f"TMA destination {dst:#x} is not 128-byte aligned")
    data = tma_box(X, int(x), int(y), box_rows, box_cols).view(np.uint8).reshape(-1, 16)
    chunks = _swizzled(dst + 16 * np.arange(data.shape[0], dtype=np.int64)) - _SIM_SMEM_BASE
    if chunks.min() < 0 or chunks.max() + 16 > smem.size:
        raise ValueError("TMA box outside shared memory")
    smem[chunks[:, None] + np.arange(16)] = data
    b = _block()
    with b.lock:
        b.barrier(bar).complete_tx(data.size)


def _wg_state(t):
    if not hasattr(t, "_wg_groups"):
        t._wg_groups, t._wg_open, t._wg_fenced = [], [], False
    return t


def _sim_wgmma_fence():
    _wg_state(threading.current_thread())._wg_fenced = True


def _sim_wgmma(bf16):
    def wgmma(acc, desc_a, desc_b):
        t = _wg_state(threading.current_thread())
        if not t._wg_fenced:
            raise RuntimeError("wgmma.mma_async without a wgmma.fence since the last commit_group")
        t._wg_open.append((_numpy(acc), int(desc_a), int(desc_b), bf16, _smem_bytes(t)))

    return wgmma


def _sim_wgmma_commit():
    t = _wg_state(threading.current_thread())
    t._wg_groups.append(t._wg_open)
    t._wg_open, t._wg_fenced = [], False


def _sim_wgmma_wait(n):
    n = int(n)

    def wait(*_):
        t = _wg_state(threading.current_thread())
        b = _block()
        wg = t.thread_id // 128
        with b.lock:
            r = b.warpgroups.get(wg)
            if r is None:
                r = b.warpgroups[wg] = _Rendezvous(128)

        def evaluate(threads):
            counts = {len(th._wg_groups) for th in threads}
            if len(counts) != 1:
                raise RuntimeError(f"threads of warpgroup {wg} committed different numbers of groups: {counts}")
            while len(threads[0]._wg_groups) > n:
                groups = [th._wg_groups.pop(0) for th in threads]
                for ops in zip(*groups):
                    if len({(o[1], o[2], o[3]) for o in ops}) != 1:
                        raise RuntimeError("threads of one warpgroup gave different wgmma descriptors")
                    wgmma_warpgroup(ops[0][4], [o[0] for o in ops], ops[0][1], ops[0][2], ops[0][3])

        r.call(t.thread_id % 128, t, evaluate)

    return wait


# ---- the intrinsics -------------------------------------------------------------------

def _build_hopper():
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    i32, i64, f32 = ir.IntType(32), ir.IntType(64), ir.FloatType()

    def asm(builder, ret, ins, text, constraints, side_effect=True):
        fnty = ir.FunctionType(ret, [v.type for v in ins])
        return builder.call(ir.InlineAsm(fnty, text, constraints, side_effect=side_effect), ins)

    def arg(context, builder, value, ty, to):
        return context.cast(builder, value, ty, to)

    def integers(*tys):
        return all(isinstance(t, types.Integer) for t in tys)

    def void_asm(name, text, params, constraints, doc):
        """An intrinsic f(*integer args) -> None emitting `text` (params: the Numba type each
        argument is converted to)."""

        def typed(args):
            if not integers(*args):
                raise TypeError(f"{name} takes {len(params)} integer arguments, got {args}")

            def codegen(context, builder, sig, llargs):
                ins = [arg(context, builder, v, t, p) for v, t, p in zip(llargs, args, params)]
                asm(builder, ir.VoidType(), ins, text, constraints)
                return context.get_dummy_value()

            return types.void(*args), codegen

        # an @intrinsic needs named parameters (no *args): one signature per arity
        names = ", ".join(f"a{i}" for i in range(len(params)))
        scope = {"typed": typed}
        exec(f"def impl(typingctx, {names}):\n    return typed(({names},))", scope)
        impl = scope["impl"]
        impl.__name__ = name
        impl.__doc__ = doc
        return intrinsic(impl)

    u32, u64, s32 = types.uint32, types.uint64, types.int32
    mbar_init = void_asm("mbar_init", "mbarrier.init.shared::cta.b64 [$0], $1;", (u32, u32),
                         "r,r,~{memory}", "mbarrier.init.shared::cta.b64 [bar], count;")
    mbar_arrive = void_asm("mbar_arrive", "mbarrier.arrive.shared::cta.b64 _, [$0];", (u32,),
                           "r,~{memory}", "mbarrier.arrive.shared::cta.b64 _, [bar];")
    mbar_arrive_expect_tx = void_asm(
        "mbar_arrive_expect_tx", "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", (u32, u32),
        "r,r,~{memory}", "Arrive once and expect `bytes` of transactions in this phase.")
    # try_wait suspends the thread for a system-dependent time; the loop retries until the
    # phase of this parity has completed. ${:uid} makes the label unique per inlined copy.
    mbar_wait = void_asm(
        "mbar_wait",
        "{\n.reg .pred done;\nWAIT_${:uid}:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\n"
        "@!done bra WAIT_${:uid};\n}", (u32, u32), "r,r,~{memory}",
        "Block until the phase of mbarrier `bar` with parity `parity` has completed.")
    fence_tensormap_acquire = void_asm(
        "fence_tensormap_acquire", "fence.proxy.tensormap::generic.acquire.sys [$0], 128;", (u64,),
        "l,~{memory}", "Acquire the 128-byte tensor map at generic address tmap for the tensormap proxy.")
    prefetch_tensormap = void_asm("prefetch_tensormap", "prefetch.tensormap [$0];", (u64,),
                                  "l,~{memory}", "prefetch.tensormap [tmap];")
    tma_load_2d = void_asm(
        "tma_load_2d",
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [$0], [$1, {$2, $3}], [$4];", (u32, u64, s32, s32, u32), "r,l,r,r,r,~{memory}",
        "One box of the tensor map at (x inner, y outer) into shared dst; its bytes complete on bar.")

    def no_arg_asm(name, text):
        def impl(typingctx):
            def codegen(context, builder, sig, args):
                asm(builder, ir.VoidType(), [], text, "~{memory}")
                return context.get_dummy_value()

            return types.void(), codegen

        impl.__name__, impl.__doc__ = name, text
        return intrinsic(impl)

    fence_mbarrier_init = no_arg_asm("fence_mbarrier_init", "fence.mbarrier_init.release.cluster;")
    fence_proxy_async = no_arg_asm("fence_proxy_async", "fence.proxy.async.shared::cta;")
    warp_sync = no_arg_asm("warp_sync", "bar.warp.sync -1;")
    wgmma_fence = no_arg_asm("wgmma_fence", "wgmma.fence.sync.aligned;")
    wgmma_commit = no_arg_asm("wgmma_commit", "wgmma.commit_group.sync.aligned;")

    def wgmma_wait(n: int):
        """wgmma.wait_group.sync.aligned n: at most n (a constant) groups still pending."""
        return no_arg_asm(f"wgmma_wait_{int(n)}", f"wgmma.wait_group.sync.aligned {int(n)};")

    def acc_pointers(context, builder, acc_ty, acc):
        ary = context.make_array(acc_ty)(context, builder, acc)
        return [builder.gep(ary.data, [ir.Constant(i64, i)], inbounds=True) for i in range(128)]

    def check_acc(acc):
        if not (isinstance(acc, types.Array) and acc.dtype == types.float32 and acc.ndim == 1):
            raise TypeError(f"the accumulators are a 1-D float32 local array of 128, got {acc}")

    def tied_asm(builder, ptrs, extra, text, extra_constraints):
        """asm with the 128 accumulators as outputs $0..$127 and as inputs tied to them (LLVM's
        spelling of "+f"), after the `extra` inputs ($128, ...)."""
        vals = [builder.load(p) for p in ptrs]
        constraints = ",".join(["=f"] * 128 + extra_constraints + [str(i) for i in range(128)])
        res = asm(builder, ir.LiteralStructType([f32] * 128), extra + vals, text, constraints)
        for i, p in enumerate(ptrs):
            builder.store(builder.extract_value(res, i), p)

    def make_wgmma(ab):
        regs = ", ".join(f"${i}" for i in range(128))
        # scale-d = 1 (accumulate: the accumulators start at zero), scale-a = scale-b = 1,
        # trans-a = 0 (A K-major), trans-b = 1 (B N-major, as the row-major B is stored)
        text = ("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                f"wgmma.mma_async.sync.aligned.m64n256k16.f32.{ab}.{ab} "
                f"{{{regs}}}, $128, $129, p, 1, 1, 0, 1;\n}}")

        def wgmma(typingctx, acc, desc_a, desc_b):
            check_acc(acc)
            if not integers(desc_a, desc_b):
                raise TypeError(f"wgmma descriptors are uint64, got {desc_a}, {desc_b}")

            def codegen(context, builder, sig, args):
                ptrs = acc_pointers(context, builder, acc, args[0])
                da = arg(context, builder, args[1], desc_a, u64)
                db = arg(context, builder, args[2], desc_b, u64)
                tied_asm(builder, ptrs, [da, db], text, ["l", "l"])
                return context.get_dummy_value()

            return types.void(acc, desc_a, desc_b), codegen

        wgmma.__name__ = f"wgmma_{ab}"
        wgmma.__doc__ = f"acc += A B, one m64n256k16 of the warpgroup:\n\n    {text.splitlines()[3]}"
        return intrinsic(wgmma)

    @intrinsic
    def fence_operands(typingctx, acc):
        """An empty volatile asm reading and writing all 128 accumulators (CUTLASS's
        warpgroup_fence_operand): their values are taken after the preceding wgmma.wait_group,
        never moved above it."""
        check_acc(acc)

        def codegen(context, builder, sig, args):
            tied_asm(builder, acc_pointers(context, builder, acc, args[0]), [], "", [])
            return context.get_dummy_value()

        return types.void(acc), codegen

    return (mbar_init, fence_mbarrier_init, fence_proxy_async, mbar_arrive, mbar_arrive_expect_tx,
            mbar_wait, fence_tensormap_acquire, prefetch_tensormap, tma_load_2d, warp_sync,
            wgmma_fence, wgmma_commit, wgmma_wait, make_wgmma("f16"), make_wgmma("bf16"),
            fence_operands)


if SIMULATOR:
    mbar_init, mbar_arrive, mbar_arrive_expect_tx = _sim_mbar_init, _sim_mbar_arrive, _sim_mbar_arrive_expect_tx
    mbar_wait, tma_load_2d = _sim_mbar_wait, _sim_tma_load_2d
    fence_mbarrier_init = fence_proxy_async = fence_tensormap_acquire = prefetch_tensormap = _no_op
    warp_sync = fence_operands = _no_op
    wgmma_fence, wgmma_commit, wgmma_wait = _sim_wgmma_fence, _sim_wgmma_commit, _sim_wgmma_wait
    wgmma_f16, wgmma_bf16 = _sim_wgmma(False), _sim_wgmma(True)
else:
    (mbar_init, fence_mbarrier_init, fence_proxy_async, mbar_arrive, mbar_arrive_expect_tx,
     mbar_wait, fence_tensormap_acquire, prefetch_tensormap, tma_load_2d, warp_sync,
     wgmma_fence, wgmma_commit, wgmma_wait, wgmma_f16, wgmma_bf16, fence_operands) = _build_hopper()
