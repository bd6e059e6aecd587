"""read: diff native/v11_wgmma.cu numba_gemm/hgemm/v11py_wgmma.py (its native twin) · run: python bench.py --level v11py --dtype fp16

v11py: v11 written in numba.cuda — Hopper's tensor cores (wgmma), TMA and mbarriers from Python.

The same kernel as v11 (native/v11_wgmma.cu, its K loop in native/wgmma_tma_loop.cuh),
statement for statement: a 128×256×64 block tile in 4 stages of 48 KB, 256 threads as two
consumer warpgroups of 64 rows × 256 columns, thread 0 also issuing the TMA loads of the
stage read TMA_LAG = 2 iterations ago; full/empty mbarriers per stage; per stage and
warpgroup wgmma.fence, 4 × wgmma.mma_async m64n256k16 (k = 0, 16, 32, 48) reading the
SWIZZLE_128B tiles through 64-bit matrix descriptors, commit_group, wait_group 1, then lane
0 of each warp releases the previous stage; 128 fp32 accumulators per thread in registers;
v11's super-tile order and epilogue. What changes is the language: the PTX comes from
numba_gemm.ptx (one `@intrinsic` per instruction, llvmlite InlineAsm; wgmma is one asm
statement with the 128 accumulators as tied operands), `#pragma unroll` becomes loops over
constants and `unrolled`, index arithmetic is uint32/uint64 (numba-cuda#801).

The tensor maps reach the kernel through global memory, not as kernel parameters: Numba has
no way to declare a 128-byte, 64-byte-aligned `__grid_constant__` parameter (its ABI passes
scalars and array records). The host encodes each map as v11 does (numba_gemm.runtime.tma, cached),
copies its 128 bytes once into a device buffer cached with it, and passes the buffer's
address; thread 0 of each block acquires the map for the tensormap proxy before using it
(`fence.proxy.tensormap::generic.acquire.sys` — the CUDA programming guide's rule for a map
that the host wrote with a memcpy: a fence in each block before first use, .sys scope).

Specialisations: f16 and bf16 (the wgmma type); nothing else varies at compile time.

Edges as v11: TMA zero-fills boxes past M and K; B panels wholly right of N are not loaded
(their stale shared memory reaches only accumulator columns >= N, never stored); masked
stores of C, two floats per store as v11's (8 bytes: N % 8 == 0 keeps each pair in one row and
aligned); beta == 0 never reads C; offsets of C in 64 bits. Limits are TMA's, as v11: K % 8 == 0, N % 8 == 0 and 16-byte
aligned bases for 2-byte types; other operands are refused before launch, naming v9.

In the CUDA simulator the intrinsics are plain-Python twins (numba_gemm.ptx: the TMA copy
with its swizzle and zero fill, counted mbarrier phases, the warpgroup's wgmma evaluated at
wait_group from the descriptors), so the pipeline, indexing and edges run in CI on small
shapes; the maps are then simulator maps (ptx.sim_tensor_map) of the host arrays.

Measured on the H200: docs/RESULTS.md, "v11py with one 8-byte store per pair of floats" (sixth
run), and "v11py against v11" (fifth run, before those stores); AUTO = False while it is slower
than v11.
"""
from __future__ import annotations

import ctypes
import threading
from collections import OrderedDict

import numpy as np
from numba import cuda, float32, int32, uint8, uint32, uint64

from .. import ptx
from ..ptx.intrinsics import unrolled
from ..ptx import (SIMULATOR, fence_mbarrier_init, fence_operands, fence_proxy_async,
                   fence_tensormap_acquire, mbar_arrive, mbar_arrive_expect_tx, mbar_init,
                   mbar_wait, prefetch_tensormap, smem_u32, tma_load_2d, warp_sync, wgmma_bf16,
                   wgmma_commit, wgmma_f16, wgmma_fence, wgmma_wait)
from . import _common as cm
from . import _numba_launch
from . import _wgmma as wg
from ._numba_launch import array_args

LEVEL = "v11py"
PARENT = "v11"
TITLE = "v11 in numba.cuda: wgmma + TMA + mbarrier"
DELTA = ("v11py = v11 written in numba.cuda: TMA, mbarriers and wgmma m64n256k16 as inline-PTX "
         "@intrinsics, the tensor maps in global memory; same tile, pipeline, order and edges")
DTYPES = cm.DTYPES
SASS_MUST_HAVE = ("HGMMA", "UTMALDG", "SYNCS", "WARPGROUP.ARRIVE")
SASS_MUST_NOT_HAVE = ("HMMA", "LDSM")
RASTER = "super"
AUTO = False    # level="auto" never picks it until measured against v11 on the H200
ARCH = "sm_90a"  # wgmma needs the arch-specific target

CONFIG = wg.WgmmaTile()                      # v11's tile: 128 x 256 x 64, 4 stages, lag 2
BM, BN, BK, STAGES, TMA_LAG = CONFIG.bm, CONFIG.bn, CONFIG.bk, CONFIG.stages, CONFIG.tma_lag
THREADS = CONFIG.threads                     # 256: two consumer warpgroups
WARPS = THREADS // 32                        # arrivals per stage on an empty barrier
A_BYTES = BM * BK * 2                        # one box of A: BM rows x 128 bytes (16 KB)
B_PANEL = BK * 128                           # one box of B: 64 k-rows x 64 n (8 KB)
STAGE_BYTES = A_BYTES + (BN // 64) * B_PANEL  # 48 KB, a multiple of the 1024-byte swizzle atom
SMEM = CONFIG.smem()                         # stages + 1 KB of alignment slack + 8 mbarriers
BOX_A, BOX_B = wg.boxes(CONFIG)              # the A box and one B panel, as v11's maps
assert not CONFIG.problems() and STAGE_BYTES == CONFIG.stage_bytes and STAGE_BYTES % 1024 == 0

u32, u64, i32 = uint32, uint64, int32
# uint32 constants: with a Python int, Numba computes u32 // c in int64, and a 64-bit division
# by a run-time value is a call into a ptxas routine, which serializes every wgmma
S = np.uint32(STAGES)
uBM, uBN, uBK = np.uint32(BM), np.uint32(BN), np.uint32(BK)
SIM_L2_BYTES = 50 * 2**20   # the simulator has no device to ask; the H200's L2 (tile order only)

# (tm_a, tm_b, C, M, N, K, alpha, beta, super_m, super_n): the maps' global addresses, C flat
SIGNATURE = (uint64, uint64, float32[::1], int32, int32, int32, float32, float32, int32, int32)


@cuda.jit(device=True, inline="always")
def smem_desc(addr, lbo, sbo):
    """The SWIZZLE_128B matrix descriptor (_wgmma.smem_desc, native/wgmma.cuh smem_desc_sw128)."""
    return (u64((addr >> u32(4)) & u32(0x3FFF)) | (u64((lbo >> u32(4)) & u32(0x3FFF)) << u64(16))
            | (u64((sbo >> u32(4)) & u32(0x3FFF)) << u64(32)) | (u64(1) << u64(62)))


@cuda.jit(device=True, inline="always")
def supertile(bid, grid_m, grid_n, super_m, super_n):
    """(bm, bn) of block bid: native/tile_order.cuh tile_supertile, _common.supertile_decode."""
    band = u32(bid // u32(super_m * grid_n))
    r = u32(bid - u32(band * super_m) * grid_n)
    hm = min(super_m, u32(grid_m - u32(band * super_m)))
    sc = u32(r // u32(hm * super_n))
    r2 = u32(r - u32(sc * hm) * super_n)
    wn = min(super_n, u32(grid_n - u32(sc * super_n)))
    return u32(u32(band * super_m) + u32(r2 // wn)), u32(u32(sc * super_n) + u32(r2 % wn))


@cuda.jit(device=True, inline="always")
def issue(f, base, full, tm_a, tm_b, m0, n0, b_panels, stage_tx):
    """Thread 0: K tile f into stage f % STAGES — expect its bytes, then one A box and
    b_panels B boxes, all completing on full[f % STAGES]."""
    s = u32(f % S)
    st = u32(base + s * STAGE_BYTES)
    bar = u32(full + 8 * s)
    kx = i32(f * BK)                          # f < ceil(K / 64): f * 64 < K + 64 < 2^31
    mbar_arrive_expect_tx(bar, stage_tx)
    tma_load_2d(st, tm_a, kx, i32(m0), bar)
    p = u32(0)
    while p < b_panels:
        tma_load_2d(u32(st + A_BYTES + p * B_PANEL), tm_b, i32(n0 + 64 * p), kx, bar)
        p = u32(p + 1)


def _sim_store2(C, c, col, n, v0, v1, beta):
    c = int(c)
    if col < n:
        C[c] = v0 if beta == 0 else v0 + beta * C[c]
        C[c + 1] = v1 if beta == 0 else v1 + beta * C[c + 1]


def _build_store2():
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def store2(typingctx, C, c, col, n, v0, v1, beta):
        """C[c], C[c + 1] = v0, v1 where col < n, plus beta * C[...] unless beta == 0 (then C is
        not read), as one 8-byte store (STG.E.64; and one LDG.E.64 for beta != 0). It takes
        what v11py guarantees: N % 8 == 0 and col even, so col + 1 < n whenever col < n, and
        c = row·N + col is even, so C + c is 8-byte aligned (C's base is 16-byte aligned).
        The branches are built in LLVM IR: as Python `if`s, the 64 inlined copies of the
        epilogue made Numba's inliner copy thousands of IR blocks."""
        if not (isinstance(C, types.Array) and C.dtype == types.float32 and C.ndim == 1):
            raise TypeError(f"store2 takes a 1-D float32 array, got {C}")

        def codegen(context, builder, sig, args):
            ary = context.make_array(C)(context, builder, args[0])
            f32, f32x2 = ir.FloatType(), ir.VectorType(ir.FloatType(), 2)
            cc = context.cast(builder, args[1], c, types.uint64)
            col_ = context.cast(builder, args[2], col, types.uint32)
            n_ = context.cast(builder, args[3], n, types.uint32)
            b = context.cast(builder, args[6], beta, types.float32)

            def pair(x, y):
                vec = builder.insert_element(ir.Constant(f32x2, ir.Undefined), x, ir.Constant(ir.IntType(32), 0))
                return builder.insert_element(vec, y, ir.Constant(ir.IntType(32), 1))

            vals = pair(*[context.cast(builder, a, t, types.float32) for a, t in ((args[4], v0), (args[5], v1))])
            read = builder.fcmp_unordered("!=", b, ir.Constant(f32, 0.0))
            with builder.if_then(builder.icmp_unsigned("<", col_, n_)):
                ptr = builder.bitcast(builder.gep(ary.data, [cc], inbounds=True), f32x2.as_pointer())
                with builder.if_else(read) as (with_c, without_c):
                    with with_c:
                        bb_c = builder.block
                        v_c = builder.fadd(vals, builder.fmul(pair(b, b), builder.load(ptr, align=8)))
                    with without_c:
                        bb_0 = builder.block
                out = builder.phi(f32x2)
                out.add_incoming(v_c, bb_c)
                out.add_incoming(vals, bb_0)
                builder.store(out, ptr, align=8)
            return context.get_dummy_value()

        return types.void(C, c, col, n, v0, v1, beta), codegen

    return store2


store2 = _sim_store2 if SIMULATOR else _build_store2()


@cuda.jit(device=True, inline="always")
def store_pair(j, acc, h, crow, C, col0, n, alpha, beta):
    """d[4j + 2h], d[4j + 2h + 1]: columns 8j + 2q, +1 of this thread's row (col0 = n0 + 2q)."""
    col = u32(col0 + 8 * j)
    store2(C, u64(crow + u64(col)), col, n, alpha * acc[4 * j + 2 * h], alpha * acc[4 * j + 2 * h + 1],
           beta)


# 32 n8 blocks as straight-line code: acc is indexed by constants only, so it stays in registers
store_row = unrolled(store_pair, 32)


@cuda.jit(device=True, inline="always")
def store_rows(h, acc, C, m, n, row0, col0, alpha, beta):
    """Row row0 + 8h of the warpgroup's tile (row0 = its first row + 16 warp + g)."""
    row = u32(row0 + 8 * h)
    if row < m:
        store_row(0, acc, h, u64(row) * u64(n), C, col0, n, alpha, beta)


store_both_rows = unrolled(store_rows, 2)


def _make_kernel(bf16: bool):
    wgmma = wgmma_bf16 if bf16 else wgmma_f16
    wait_prev = wgmma_wait(1)
    wait_all = wgmma_wait(0)

    def v11py(tm_a, tm_b, C, M, N, K, alpha, beta, super_m, super_n):
        smem = cuda.shared.array(0, uint8)       # dynamic: the launch gives SMEM bytes
        tid = u32(cuda.threadIdx.x)
        lane, wgi = u32(tid % 32), u32(tid // 128)
        m, n, k = u32(M), u32(N), u32(K)
        grid_m, grid_n = u32(u32(m + u32(BM - 1)) // uBM), u32(u32(n + u32(BN - 1)) // uBN)
        bm, bn = supertile(u32(cuda.blockIdx.x), grid_m, grid_n, u32(super_m), u32(super_n))
        m0, n0 = u32(bm * BM), u32(bn * BN)

        raw = smem_u32(smem)
        base = u32((raw + 1023) & ~u32(1023))    # swizzle atoms on 1024-byte boundaries
        full = u32(base + STAGES * STAGE_BYTES)  # full[s] at full + 8s
        empty = u32(full + STAGES * 8)           # empty[s] at empty + 8s

        b_panels = min(u32(BN // 64), u32((n - n0 + 63) // 64))
        stage_tx = u32(A_BYTES + b_panels * B_PANEL)

        if tid == 0:
            # the maps were written by the host (a memcpy): acquire them for the tensormap
            # proxy before TMA reads them (the fence is needed once per block, .sys scope)
            fence_tensormap_acquire(tm_a)
            fence_tensormap_acquire(tm_b)
            prefetch_tensormap(tm_a)
            prefetch_tensormap(tm_b)
            for s in range(STAGES):
                mbar_init(u32(full + 8 * s), u32(1))
                mbar_init(u32(empty + 8 * s), u32(WARPS))
            fence_mbarrier_init()                # the barriers, visible to TMA's async proxy
            fence_proxy_async()
        cuda.syncthreads()

        k_tiles = u32(u32(k + u32(BK - 1)) // uBK)
        if tid == 0:
            for f in range(STAGES - TMA_LAG):
                if u32(f) < k_tiles:
                    issue(u32(f), base, full, tm_a, tm_b, m0, n0, b_panels, stage_tx)

        acc = cuda.local.array(128, float32)
        for i in range(128):
            acc[i] = float32(0.0)

        # descriptors of stage 0 for this warpgroup; a stage or k step adds its byte offset
        # >> 4 to the start-address field (no carry: shared addresses < 256 KB)
        desc_a0 = smem_desc(u32(base + wgi * (64 * 128)), u32(16), u32(1024))
        desc_b0 = smem_desc(u32(base + A_BYTES), u32(B_PANEL), u32(1024))

        kt = u32(0)
        while kt < k_tiles:
            if tid == 0:
                f = u32(kt + (STAGES - TMA_LAG))
                if f < k_tiles:
                    if f >= STAGES:              # wait until stage f % S was released
                        mbar_wait(u32(empty + 8 * (f % S)), u32((f // S - 1) & 1))
                    issue(f, base, full, tm_a, tm_b, m0, n0, b_panels, stage_tx)
            warp_sync()                          # warp 0 reconverges before .sync.aligned wgmma
            s = u32(kt % S)
            mbar_wait(u32(full + 8 * s), u32((kt // S) & 1))
            so = u64((s * STAGE_BYTES) >> 4)
            wgmma_fence()
            for kk in range(BK // 16):           # A: +32 bytes per k16; B: +16 rows = 2048 bytes
                wgmma(acc, u64(desc_a0 + so + u64((kk * 32) >> 4)),
                      u64(desc_b0 + so + u64((kk * 2048) >> 4)))
            wgmma_commit()
            wait_prev()                          # stage kt-1's wgmma have read their operands
            if kt > 0 and lane == 0:
                mbar_arrive(u32(empty + 8 * ((kt - 1) % S)))
            kt = u32(kt + 1)
        wait_all()
        fence_operands(acc)                      # the epilogue reads acc after wait_group 0

        # ---- epilogue: thread t of the warpgroup holds rows 16 (t/32) + g (+8), columns
        # 8j + 2q (+1) (ptx.wgmma_acc_coords); masked; beta == 0 never reads C
        wt = u32(tid % 128)
        g, q = u32(lane // 4), u32(lane % 4)
        store_both_rows(0, acc, C, m, n, u32(m0 + 64 * wgi + 16 * (wt // 32) + g), u32(n0 + 2 * q),
                        alpha, beta)

    v11py.__name__ = f"v11py_{'bf16' if bf16 else 'f16'}"
    return v11py


KERNELS = {}
for _bf16 in (False, True):
    _f = _make_kernel(_bf16)
    # __launch_bounds__(256, 1) as v11: up to 255 registers (the simulator takes no bounds)
    KERNELS[_f.__name__] = (cuda.jit(_f) if SIMULATOR else cuda.jit(_f, launch_bounds=(THREADS, 1)),
                            SIGNATURE)
del _bf16, _f

kernel, _ = KERNELS["v11py_f16"]


def unsupported(M: int, N: int, K: int) -> str | None:
    return wg.tma_rule(M, N, K)


def tile_order(M: int, N: int, K: int, l2_bytes: int | None = None, config=CONFIG):
    """(super_m, super_n): v11's L2 rule for this tile."""
    return wg.tile_order(M, N, K, l2_bytes, config)


def launch_config(M: int, N: int, K: int, config=CONFIG):
    return wg.launch_config(M, N, K, config)


# ---------------------------------------------------------------------------- tensor maps

_DEVICE_MAPS: OrderedDict = OrderedDict()   # (context, map arguments) -> device copy of the map
_MAPS_LOCK = threading.Lock()


def device_map(dtype, address: int, rows: int, cols: int, box: tuple[int, int]) -> int:
    """Global address of the 128-byte tensor map of a row-major matrix (numba_gemm.runtime.tma's
    checked, cached map), copied to device memory once and cached with the map. The copy is
    synchronous, so any later launch on any stream sees it complete."""
    from ..runtime import driver, tma

    key = (driver.current_context(), np.dtype(dtype).str, address, rows, cols, box)
    with _MAPS_LOCK:
        hit = _DEVICE_MAPS.get(key)
        if hit is not None:
            _DEVICE_MAPS.move_to_end(key)
            return cm.device_ptr(hit)
    tm = tma.cached_matrix_map(dtype, address, rows, cols, box, wg.INNER_BYTES)
    words = np.array([int(w) for w in tm.opaque], np.uint64)
    if words.nbytes != 128:
        raise RuntimeError(f"a CUtensorMap is 128 bytes, got {words.nbytes}")
    buf = cuda.to_device(words)                  # device allocations are 256-byte aligned
    if cm.device_ptr(buf) % 64:
        raise RuntimeError("tensor map copy is not 64-byte aligned")
    with _MAPS_LOCK:
        _DEVICE_MAPS[key] = buf
        while len(_DEVICE_MAPS) > 32:
            _DEVICE_MAPS.popitem(last=False)
    return cm.device_ptr(buf)


# ---------------------------------------------------------------------------- launch

def _address(a) -> int:
    if SIMULATOR:
        from ..ptx.intrinsics import _numpy

        return _numpy(a).__array_interface__["data"][0]
    return cm.device_ptr(a)


def _function(name: str):
    return _numba_launch.function(KERNELS[name][0], SIGNATURE)


def run(A, B, C, alpha, beta, stream=None):
    """Check the operands against TMA's rules, make (or reuse) the two maps, launch the
    specialisation of A's type: on a GPU with cuLaunchKernel from the cached handle, in the
    simulator through Numba with simulator maps."""
    M, K = A.shape
    N = B.shape[1]
    pa, pb = _address(A), _address(B)
    wg.check_operands(LEVEL, pa, pb, M, N, K, CONFIG)
    name = f"v11py_{cm.element_type(A)}"
    grid, block, smem = launch_config(M, N, K)
    if SIMULATOR:
        from ..ptx.intrinsics import _numpy

        super_m, super_n = tile_order(M, N, K, SIM_L2_BYTES)
        tm_a = ptx.sim_tensor_map(_numpy(A).reshape(M, K), *BOX_A)
        tm_b = ptx.sim_tensor_map(_numpy(B).reshape(K, N), *BOX_B)
        KERNELS[name][0][grid, block, stream or 0, smem](
            np.uint64(tm_a), np.uint64(tm_b), C.reshape(M * N), np.int32(M), np.int32(N),
            np.int32(K), np.float32(alpha), np.float32(beta), np.int32(super_m), np.int32(super_n))
        return
    from ..runtime.launch import launch_native

    dtype = np.float16 if cm.element_type(A) == "f16" else np.uint16   # uint16 -> BFLOAT16 map
    tm_a = device_map(dtype, pa, M, K, BOX_A)
    tm_b = device_map(dtype, pb, K, N, BOX_B)
    super_m, super_n = tile_order(M, N, K)
    args = ([ctypes.c_uint64(tm_a), ctypes.c_uint64(tm_b)] + array_args(cm.device_ptr(C), M * N, 4)
            + cm.pack_args(("i", M), ("i", N), ("i", K), ("f", alpha), ("f", beta),
                           ("i", super_m), ("i", super_n)))
    launch_native(_function(name), grid, block, smem, stream, args)
