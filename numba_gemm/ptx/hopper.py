"""Inline-PTX intrinsics of Hopper (sm_90a): mbarrier, TMA and wgmma — the instructions of the
v11py level, the same ones native/ptx.cuh and native/wgmma.cuh wrap for v11, with the same operands:

  mbar_init(bar, count)              mbarrier.init.shared::cta.b64 [bar], count
  fence_mbarrier_init()              fence.mbarrier_init.release.cluster
  fence_proxy_async()                fence.proxy.async.shared::cta
  mbar_arrive(bar)                   mbarrier.arrive.shared::cta.b64 _, [bar]
  mbar_arrive_expect_tx(bar, bytes)  mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], bytes
  mbar_wait(bar, parity)             mbarrier.try_wait.parity.shared::cta.b64, looped until done
  fence_tensormap_acquire(tmap)      fence.proxy.tensormap::generic.acquire.sys [tmap], 128
  prefetch_tensormap(tmap)           prefetch.tensormap [tmap]
  tma_load_2d(dst, tmap, x, y, bar)  cp.async.bulk.tensor.2d.shared::cluster.global
                                         .mbarrier::complete_tx::bytes [dst], [tmap, {x, y}], [bar]
  warp_sync()                        bar.warp.sync -1 (the simulator has no cuda.syncwarp)
  wgmma_fence() / wgmma_commit()     wgmma.fence / wgmma.commit_group (.sync.aligned)
  wgmma_wait(n)                      wgmma.wait_group.sync.aligned n   (a factory, n constant)
  wgmma_f16(acc, desc_a, desc_b)     wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16
  wgmma_bf16(acc, desc_a, desc_b)    ... .f32.bf16.bf16
  fence_operands(acc)                an empty asm on acc's 128 registers (pins them in order)

bar, dst: 32-bit shared-window addresses; tmap: the 64-bit generic address of a tensor map
in global memory (v11py's choice: Numba cannot pass a 128-byte, 64-byte-aligned
__grid_constant__ parameter). acc: a float32 local array of 128 elements, the warpgroup's
64 x 256 fp32 accumulator fragment (wgmma_acc_coords); the wgmma intrinsic loads all 128,
passes them as tied "+f" operands of one asm statement and stores the results back, so with
constant indices everywhere NVVM keeps the array in registers.

The twins. TMA: the copy lands at issue (the box from the map's matrix, zero-filled outside
it, through the 128-byte swizzle on the absolute shared address) and completes its bytes on
the mbarrier. mbarrier: arrivals and tx bytes are counted; a phase completes when both reach
zero, and try_wait.parity is true once the current phase's parity differs from the one
asked for; a waiting thread sleeps between polls (the simulator's threads are Python threads)
and gives up, with an error, after a minute without progress — a deadlock on the GPU.
wgmma: each thread queues its operations; wait_group is a rendezvous of the warpgroup's 128
threads at which the oldest committed groups are evaluated, reading shared memory then (the
latest the hardware may read it), so a stage refilled before its wgmma completed gives wrong
results here too. wgmma without a wgmma.fence since the last commit_group is refused.
"""
from __future__ import annotations

import threading
import time

import numpy as np

from .intrinsics import _numpy  # the NumPy array behind a simulator array
# the twins share mma_sync's simulated shared window (smem_u32 names it) and its state lock
from .mma_sync import _SIM_SMEM_BASE, _WARPS_LOCK, SIMULATOR, _halves_to_float, _smem_bytes

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
                start = time.monotonic()
                while self.generation == gen:
                    self.cond.wait(0.05)
                    if getattr(t, "abort", False):
                        raise RuntimeError("another simulated thread failed")
                    if time.monotonic() - start > _WAIT_TIMEOUT_S:
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
    start = time.monotonic()
    while True:
        with b.lock:
            if (b.barrier(bar).phase & 1) != (int(parity) & 1):
                return
        if getattr(t, "abort", False):
            raise RuntimeError("another simulated thread failed")
        if time.monotonic() - start > _WAIT_TIMEOUT_S:
            raise RuntimeError(f"mbarrier at {int(bar):#x}: the phase of parity {int(parity)} never "
                               "completed (a deadlock on the GPU)")
        time.sleep(0.0005)


def _no_op(*_):
    return None


# Tensor maps of the simulator: the address of a 128-byte host buffer (what the kernel is
# given) -> (the buffer, the matrix as uint16 bits, box rows, box cols).
_SIM_MAPS: dict = {}
_SIM_MAPS_LOCK = threading.Lock()


def sim_tensor_map(X: np.ndarray, box_rows: int, box_cols: int) -> int:
    """A simulator tensor map of the row-major 2-byte matrix X read in box_rows x box_cols
    boxes with SWIZZLE_128B (what numba_gemm.runtime.tma.matrix_map encodes on a GPU): returns the
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

    i64, f32 = ir.IntType(64), ir.FloatType()

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
