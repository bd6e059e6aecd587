"""Microbenchmarks that price the cycle ledger on the GPU at hand.

    python -m numba_gemm.microbench --out numba_gemm/data/h200_costs.json

Each kind of load (a shared broadcast, a conflict-free shared load, an n-way bank conflict,
a 128-bit shared load, global loads of several shapes) runs in a loop of independent
warp-level loads, 8 per iteration, each consumed by one FADD as a GEMM consumes what it
loads. The grid fills every SM (2048 threads per SM on sm_90: full occupancy). Every block
reads its SM's cycle counter (clock64) at the start and end of the loop and records which
SM it ran on; per SM,

    cost = (last end - first start on that SM) / (warp load instructions run on that SM)

in SM cycles per warp-level instruction: the unit of numba_gemm.ledgers (the seed's 4090
figures: conflict-free 2.686, broadcast 0.534, global 1.94). The median over SMs is kept.
An FFMA loop is measured the same way as a yardstick (128 FP32 lanes per SM: 0.25).

Global loads read a 32 KB array that stays in L1 after the first pass, as k2's and the tiled
levels' loads mostly do; `ldg_x32` sends each lane to its own 128-byte line (k1's A load);
`ldg128_x8` is k7's (and the 16-deep k8's) float4 load of A: 4 lanes per row, 64 bytes from
each of 8 rows (8 lines, where a coalesced `ldg128` touches 4); `ldg128_x16` is the 8-deep k8's:
2 lanes per row, 32 bytes from each of 16 rows (16 lines, the same 16 sectors).

Also measured: the device-to-device copy bandwidth (bytes read + written per second, the
bytes ledger's ceiling) and the SM clock (clock64 cycles over CUDA-event time).

Tensor-core ceilings (`tensor_ceiling(name)`, TFLOPS; native CUDA compiled by NVRTC for sm_90a,
native/tensor_ceilings.cu, launched through numba_gemm.nvrtc): "mma_sync" is mma.sync.m16n8k16
f16→f32 from registers only (the instruction of v8–v10: their ceiling), "wgmma" is
wgmma.mma_async m64n256k16 f16→f32 from shared memory, two warpgroups per SM (the instruction
the Hopper levels use). TFLOPS = FLOPs / CUDA-event time of one launch over every SM (median of
5); each block's clock64 span also gives FLOPs per SM cycle and the SM clock during the run.
A full run also writes the mma_sync figure as `tensor_flops`, the tensor ceiling the ledgers
price v7–v10 against (numba_gemm.ledgers.card reads it from the costs file).

The same file prices the fragment loads that feed mma.sync: "ldmatrix_x4" and
"ldmatrix_x4_trans" run ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16 in a loop of 8
conflict-free loads per iteration, each lane adding its four registers into four sums that the
host checks against the ISA's fragment layout (numba_gemm.ptx.ldmatrix_warp); the result is SM
cycles per warp instruction, as for the load kinds, and bytes per SM cycle (512 per x4). They
go into the costs file's tensor section; a file without them is "not yet measured" there.

    python -m numba_gemm.microbench --tensor          # tensor ceilings and ldmatrix prices only
    python -m numba_gemm.microbench --tensor ldmatrix_x4,ldmatrix_x4_trans \
        --update numba_gemm/data/h200_costs.json      # measure some, merge them into a costs file
    python -m numba_gemm.microbench --kinds ldg128_x16 --update numba_gemm/data/h200_costs.json

In the Numba CUDA simulator (no GPU) `run_all(smoke=True)` runs each kernel once at a tiny
size and checks the values it loaded, so the index patterns are tested in CI; the timings
there mean nothing and are not written.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import datetime, timezone

import numpy as np

if __name__ == "__main__":   # run as a program: choose the simulator before numba is imported.
    from numba_gemm.gpu import use_simulator_if_no_gpu   # (Imported, the caller has chosen.)

    use_simulator_if_no_gpu()

from numba import cuda, float32, int32, types, uint32, uint64  # noqa: E402

SIMULATOR = bool(cuda.config.ENABLE_CUDASIM)
u64 = uint64

SMEM_WORDS = 4096          # 16 KB of shared memory per block
GLOBAL_WORDS = 8192        # 32 KB global array: L1-resident
ROWS128 = 32               # 2-D arrays of 32 rows × 128 floats for the 128-bit kinds
UNROLL = 8                 # loads per loop iteration (kept in sync with the kernels)
WARP = 32
SMEM_ALIGN = 16           # bytes: the 128-bit shared loads need it

# kind -> (kernel family, lane stride, column multiplier, or for ldg128_x* lanes per row)
KINDS = {
    "ffma": ("ffma", 0),
    "lds_bcast": ("lds32", 0),
    "lds_free": ("lds32", 1),
    "lds_conflict2": ("lds32", 2),
    "lds_conflict4": ("lds32", 4),
    "lds_conflict8": ("lds32", 8),
    "lds_conflict32": ("lds32", 32),
    "lds128_bcast": ("lds128", 0),
    "lds128": ("lds128", 4),
    "ldg_bcast": ("ldg32", 0),
    "ldg": ("ldg32", 1),
    "ldg_x32": ("ldg32", 32),
    "ldg128": ("ldg128", 4),
    "ldg128_x8": ("ldg128_x8", 4),
    "ldg128_x16": ("ldg128_x16", 2),
}
ROW_WINDOWS = ("ldg128_x8", "ldg128_x16")   # the families of rows_element's pattern


# ---------------------------------------------------------------------------------------
# Which addresses each kind's warp touches: the same formulas as the kernels below, used by
# the tests to check each pattern is the kind it claims to be (numba_gemm.ledgers).

def lane_addresses(kind: str, j: int = 0, it: int = 0) -> tuple[list[int], int]:
    """(byte addresses of the 32 lanes for load j of iteration it, bytes per lane)."""
    fam, p = KINDS[kind]
    lanes = range(32)
    if fam in ("lds32", "ldg32"):
        mask = 2047 if fam == "lds32" else 4095
        return [4 * (lane * p + ((it * 256) & mask) + j * 32) for lane in lanes], 4
    if fam in ("lds128", "ldg128"):
        row = (it * UNROLL + j) & (ROWS128 - 1)
        return [4 * (row * 128 + lane * p) for lane in lanes], 16
    if fam in ROW_WINDOWS:
        return [4 * rows_element(kind, lane, j, it) for lane in lanes], 16
    raise ValueError(f"{kind} is not a load")


def row_window(per_row: int) -> tuple[int, int]:
    """(rows, windows): a warp with per_row lanes per row covers 32 / per_row rows; the 32-row
    array holds that many such windows one above the other."""
    rows = WARP // per_row
    return rows, ROWS128 // rows


def rows_element(kind: str, lane: int, j: int, it: int) -> int:
    """ldg128_x8 / ldg128_x16, k7's and k8's A loads: with p lanes per row (KINDS), lane l reads
    the float4 at row l // p, column 4 (l % p) of a window of 32 / p rows, so a warp takes 16 p
    bytes from each of 32 / p rows 512 bytes apart (x8: 8 lines, x16: 16 lines; 16 sectors
    either way). Load j of an iteration moves the window down by its height (j % windows) and
    right by its width (j // windows); odd iterations start 64 columns further, so no load
    repeats its predecessor's."""
    per_row = KINDS[kind][1]
    rows, windows = row_window(per_row)
    row = lane // per_row + rows * (j % windows)
    col = 4 * (lane % per_row) + 4 * per_row * (j // windows) + 64 * (it % 2)
    return row * 128 + col


# ---------------------------------------------------------------------------------------
# clock64 and %smid: numba-cuda 0.30 exposes neither. Inline PTX, volatile so that the two
# clock reads are neither merged nor moved; plain-Python twins for the simulator.

def _build_sregs():
    from llvmlite import ir
    from numba.cuda.extending import intrinsic

    def reg(ptx, bits, name):
        def impl(typingctx):
            sig = (types.uint64 if bits == 64 else types.uint32)()

            def codegen(context, builder, signature, args):
                fnty = ir.FunctionType(ir.IntType(bits), [])
                asm = ir.InlineAsm(fnty, ptx, "=l" if bits == 64 else "=r", side_effect=True)
                return builder.call(asm, [])

            return sig, codegen

        impl.__name__ = name
        return intrinsic(impl)

    return reg("mov.u64 $0, %clock64;", 64, "clock64"), reg("mov.u32 $0, %smid;", 32, "smid")


if SIMULATOR:
    def clock64():
        return time.perf_counter_ns()

    def smid():
        return 0
else:
    clock64, smid = _build_sregs()


def _vector_loads():
    """(load4_shared, load4_global) from the package, or (None, reason)."""
    try:
        from numba_gemm.intrinsics import load4_global, load4_shared
        return load4_shared, load4_global
    except Exception as e:  # the 128-bit kinds are then reported as not measured
        return None, f"numba_gemm.intrinsics unavailable: {e}"


# ---------------------------------------------------------------------------------------
# Kernels. Indices are uint64 (Numba's signed indices add a wraparound select per load).
# Every kernel writes out[thread] (so nothing is dead code), cyc[block] and sm[block].

@cuda.jit(device=True, inline="always")
def _record(out, cyc, sm, total, t0, t1):
    """Every thread writes its sum (so no load is dead code); thread 0 its block's clock span and SM."""
    t = cuda.threadIdx.x
    out[cuda.blockIdx.x * cuda.blockDim.x + t] = total
    if t == 0:
        cyc[2 * cuda.blockIdx.x] = t0
        cyc[2 * cuda.blockIdx.x + 1] = t1
        sm[cuda.blockIdx.x] = smid()


@cuda.jit
def _ffma(out, cyc, sm, iters, p):
    t = cuda.threadIdx.x
    x = float32(t) * float32(1e-3)
    a0 = x; a1 = x + float32(1); a2 = x + float32(2); a3 = x + float32(3)   # noqa: E702
    a4 = x + float32(4); a5 = x + float32(5); a6 = x + float32(6); a7 = x + float32(7)  # noqa: E702
    m = float32(0.999)
    cuda.syncthreads()
    t0 = clock64()
    it = u64(0)
    while it < u64(iters):
        a0 = a0 * m + x; a1 = a1 * m + x; a2 = a2 * m + x; a3 = a3 * m + x   # noqa: E702
        a4 = a4 * m + x; a5 = a5 * m + x; a6 = a6 * m + x; a7 = a7 * m + x   # noqa: E702
        it += u64(1)
    cuda.syncthreads()
    t1 = clock64()
    _record(out, cyc, sm, a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7, t0, t1)


@cuda.jit
def _lds32(out, cyc, sm, iters, stride):
    s = cuda.shared.array(SMEM_WORDS, float32)
    t = cuda.threadIdx.x
    i = t
    while i < SMEM_WORDS:
        s[i] = float32(i)
        i += cuda.blockDim.x
    cuda.syncthreads()
    base = u64(t & 31) * u64(stride)
    a0 = float32(0); a1 = float32(0); a2 = float32(0); a3 = float32(0)   # noqa: E702
    t0 = clock64()
    it = u64(0)
    while it < u64(iters):
        # offsets are multiples of 32 words: every load keeps the lanes' bank pattern
        o = base + ((it * u64(256)) & u64(2047))
        a0 += s[o]; a1 += s[o + u64(32)]; a2 += s[o + u64(64)]; a3 += s[o + u64(96)]   # noqa: E702
        a0 += s[o + u64(128)]; a1 += s[o + u64(160)]; a2 += s[o + u64(192)]; a3 += s[o + u64(224)]  # noqa: E702
        it += u64(1)
    cuda.syncthreads()
    t1 = clock64()
    _record(out, cyc, sm, a0 + a1 + a2 + a3, t0, t1)


@cuda.jit
def _ldg32(g, out, cyc, sm, iters, stride):
    t = cuda.threadIdx.x
    base = u64(t & 31) * u64(stride)
    a0 = float32(0); a1 = float32(0); a2 = float32(0); a3 = float32(0)   # noqa: E702
    cuda.syncthreads()
    t0 = clock64()
    it = u64(0)
    while it < u64(iters):
        o = base + ((it * u64(256)) & u64(4095))
        a0 += g[o]; a1 += g[o + u64(32)]; a2 += g[o + u64(64)]; a3 += g[o + u64(96)]   # noqa: E702
        a0 += g[o + u64(128)]; a1 += g[o + u64(160)]; a2 += g[o + u64(192)]; a3 += g[o + u64(224)]  # noqa: E702
        it += u64(1)
    cuda.syncthreads()
    t1 = clock64()
    _record(out, cyc, sm, a0 + a1 + a2 + a3, t0, t1)


_KERNELS: dict = {"ffma": _ffma, "lds32": _lds32, "ldg32": _ldg32}


def _build_vector_kernels():
    load4_shared, load4_global = _vector_loads()
    if load4_shared is None:
        return load4_global  # the reason

    @cuda.jit
    def _lds128(out, cyc, sm, iters, colmul):
        if SIMULATOR:   # the simulator's shared.array takes no alignment (a constant: pruned on the GPU)
            s = cuda.shared.array((ROWS128, 128), float32)
        else:
            s = cuda.shared.array((ROWS128, 128), float32, alignment=SMEM_ALIGN)
        t = cuda.threadIdx.x
        i = t
        while i < ROWS128 * 128:
            s[i // 128, i % 128] = float32(i)
            i += cuda.blockDim.x
        cuda.syncthreads()
        col = u64(t & 31) * u64(colmul)
        a0 = float32(0); a1 = float32(0); a2 = float32(0); a3 = float32(0)   # noqa: E702
        t0 = clock64()
        it = u64(0)
        while it < u64(iters):
            r = (it * u64(UNROLL)) & u64(ROWS128 - 1)
            for j in range(UNROLL):
                v = load4_shared(s, (r + u64(j), col))
                a0 += v[0]; a1 += v[1]; a2 += v[2]; a3 += v[3]   # noqa: E702
            it += u64(1)
        cuda.syncthreads()
        t1 = clock64()
        _record(out, cyc, sm, a0 + a1 + a2 + a3, t0, t1)

    @cuda.jit
    def _ldg128(g, out, cyc, sm, iters, colmul):
        t = cuda.threadIdx.x
        col = u64(t & 31) * u64(colmul)
        a0 = float32(0); a1 = float32(0); a2 = float32(0); a3 = float32(0)   # noqa: E702
        cuda.syncthreads()
        t0 = clock64()
        it = u64(0)
        while it < u64(iters):
            r = (it * u64(UNROLL)) & u64(ROWS128 - 1)
            for j in range(UNROLL):
                v = load4_global(g, (r + u64(j)) * u64(128) + col)
                a0 += v[0]; a1 += v[1]; a2 += v[2]; a3 += v[3]   # noqa: E702
            it += u64(1)
        cuda.syncthreads()
        t1 = clock64()
        _record(out, cyc, sm, a0 + a1 + a2 + a3, t0, t1)

    def _ldg128_rows(per_row):
        rows, windows = row_window(per_row)   # compile-time constants of each kernel

        @cuda.jit
        def kernel(g, out, cyc, sm, iters, lanes_per_row):
            t = cuda.threadIdx.x
            lane = u64(t & 31)
            # rows_element: the lane's float4 in the window, then an offset per load (constant)
            off = (lane // u64(lanes_per_row)) * u64(128) + u64(4) * (lane % u64(lanes_per_row))
            a0 = float32(0); a1 = float32(0); a2 = float32(0); a3 = float32(0)   # noqa: E702
            cuda.syncthreads()
            t0 = clock64()
            it = u64(0)
            while it < u64(iters):
                o = off + u64(64) * (it & u64(1))
                for j in range(UNROLL):
                    v = load4_global(g, o + u64(rows * 128 * (j % windows) + 4 * per_row * (j // windows)))
                    a0 += v[0]; a1 += v[1]; a2 += v[2]; a3 += v[3]   # noqa: E702
                it += u64(1)
            cuda.syncthreads()
            t1 = clock64()
            _record(out, cyc, sm, a0 + a1 + a2 + a3, t0, t1)
        return kernel

    _KERNELS["lds128"] = _lds128
    _KERNELS["ldg128"] = _ldg128
    for fam in ROW_WINDOWS:
        _KERNELS[fam] = _ldg128_rows(KINDS[fam][1])   # family and kind share the name
    return None


_VECTOR_PROBLEM = _build_vector_kernels()


# ---------------------------------------------------------------------------------------
# Expected results (for the simulator check): what out[thread] must hold.

def expected_out(kind: str, threads: int, iters: int) -> np.ndarray:
    fam, p = KINDS[kind]
    out = np.zeros(threads, dtype=np.float64)
    if fam == "ffma":
        return None
    for t in range(threads):
        acc = 0.0
        for it in range(iters):
            for j in range(UNROLL):
                if fam in ("lds32", "ldg32"):
                    mask = 2047 if fam == "lds32" else 4095
                    acc += (t & 31) * p + ((it * 256) & mask) + j * 32
                elif fam in ROW_WINDOWS:
                    acc += 4 * rows_element(kind, t & 31, j, it) + 6
                else:
                    row = (it * UNROLL + j) & (ROWS128 - 1)
                    acc += 4 * (row * 128 + (t & 31) * p) + 6   # x + y + z + w of 4 consecutive
        out[t] = acc
    return out


def _launch(kind: str, blocks: int, threads: int, iters: int, garr, garr128):
    fam, p = KINDS[kind]
    k = _KERNELS[fam]
    out = cuda.device_array(blocks * threads, np.float32)
    cyc = cuda.device_array(2 * blocks, np.uint64)
    sm = cuda.device_array(blocks, np.uint32)
    if fam == "ldg32":
        k[blocks, threads](garr, out, cyc, sm, np.int32(iters), np.int32(p))
    elif fam == "ldg128" or fam in ROW_WINDOWS:
        k[blocks, threads](garr128, out, cyc, sm, np.int32(iters), np.int32(p))
    else:
        k[blocks, threads](out, cyc, sm, np.int32(iters), np.int32(p))
    return out, cyc, sm


def _global_arrays():
    g = cuda.to_device(np.arange(GLOBAL_WORDS, dtype=np.float32))
    g128 = cuda.to_device(np.arange(ROWS128 * 128, dtype=np.float32))
    return g, g128


def smoke(kinds=None, iters: int = 2, threads: int = 64) -> dict[str, str]:
    """Run each kernel once on one small block and check the loaded values. {kind: 'ok'|reason}."""
    g, g128 = _global_arrays()
    res = {}
    for kind in kinds or KINDS:
        fam, _ = KINDS[kind]
        if fam not in _KERNELS:
            res[kind] = f"skipped: {_VECTOR_PROBLEM}"
            continue
        out, cyc, sm = _launch(kind, 1, threads, iters, g, g128)
        got = out.copy_to_host().astype(np.float64)
        want = expected_out(kind, threads, iters)
        if want is not None and not np.allclose(got, want, rtol=1e-6):
            bad = int(np.argmax(np.abs(got - want)))
            res[kind] = f"wrong: thread {bad} loaded sum {got[bad]} != {want[bad]}"
        else:
            res[kind] = "ok"
    return res


# ---------------------------------------------------------------------------------------
# Measurement on a GPU.

def _device_facts():
    dev = cuda.get_current_device()
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    return {
        "device": name,
        "cc": list(dev.compute_capability),
        "sms": int(dev.MULTIPROCESSOR_COUNT),
        "max_threads_per_sm": int(dev.MAX_THREADS_PER_MULTIPROCESSOR),
    }


def _per_sm_cost(cyc, sm, threads: int, iters: int, loads_per_iter: int):
    """Median over SMs of (SM cycles spanned) / (warp instructions run on that SM).

    Counters of different SMs are not synchronised, but all blocks on one SM read the same
    counter: the SM's busy span is its last end minus its first start, whether its blocks
    ran together or one after another.
    """
    starts, ends = cyc[0::2], cyc[1::2]
    per_sm: dict[int, list[tuple[int, int]]] = {}
    for a, b, s in zip(starts, ends, sm):
        per_sm.setdefault(int(s), []).append((int(a), int(b)))
    warps = threads // 32
    costs = []
    for spans in per_sm.values():
        span = max(b for _, b in spans) - min(a for a, _ in spans)
        costs.append(span / (len(spans) * warps * iters * loads_per_iter))
    return statistics.median(costs), min(costs), max(costs), len(per_sm)


def measure(kind: str, iters: int = 2048, threads: int = 256, repeats: int = 3, arrays=None):
    """Cycles per warp-level instruction per SM for one kind: (median, min, max, sms seen)."""
    f = _device_facts()
    blocks = f["sms"] * (f["max_threads_per_sm"] // threads)
    g, g128 = arrays or _global_arrays()
    fam, _ = KINDS[kind]
    per_iter = UNROLL
    _launch(kind, blocks, threads, 4, g, g128)   # compile + warm up
    cuda.synchronize()
    runs = []
    for _ in range(repeats):
        out, cyc, sm = _launch(kind, blocks, threads, iters, g, g128)
        cuda.synchronize()
        runs.append(_per_sm_cost(cyc.copy_to_host(), sm.copy_to_host(), threads, iters, per_iter))
    runs.sort(key=lambda r: r[0])
    return runs[len(runs) // 2]


def measure_clock(iters: int = 1 << 16, threads: int = 256) -> float:
    """SM clock in GHz: clock64 cycles of an FFMA loop over its CUDA-event time."""
    f = _device_facts()
    blocks = f["sms"] * (f["max_threads_per_sm"] // threads)
    out = cuda.device_array(blocks * threads, np.float32)
    cyc = cuda.device_array(2 * blocks, np.uint64)
    sm = cuda.device_array(blocks, np.uint32)
    _ffma[blocks, threads](out, cyc, sm, np.int32(16), np.int32(0))
    cuda.synchronize()
    start, stop = cuda.event(), cuda.event()
    start.record()
    _ffma[blocks, threads](out, cyc, sm, np.int32(iters), np.int32(0))
    stop.record()
    stop.synchronize()
    ms = cuda.event_elapsed_time(start, stop)
    c = cyc.copy_to_host().astype(np.int64)
    return float(np.max(c[1::2] - c[0::2])) / (ms * 1e-3) / 1e9


def measure_copy_bandwidth(nbytes: int = 1 << 30, copies: int = 10, repeats: int = 5) -> float:
    """Device-to-device copy bandwidth in bytes/s, counting bytes read plus bytes written.

    `copies` back-to-back copies between one pair of events (median over `repeats` pairs): with
    one copy per pair, the host's time to issue it lands inside the window and the figure comes
    out ~20 % low on an H200 (3.36 instead of ~4.2 TB/s).
    """
    n = nbytes // 4
    src = cuda.device_array(n, np.float32)
    dst = cuda.device_array(n, np.float32)
    stream = cuda.stream()
    dst.copy_to_device(src, stream=stream)  # warm-up (the contents do not matter to a copy)
    stream.synchronize()
    times = []
    start, stop = cuda.event(), cuda.event()
    for _ in range(repeats):
        start.record(stream)
        for _ in range(copies):
            dst.copy_to_device(src, stream=stream)
        stop.record(stream)
        stop.synchronize()
        times.append(cuda.event_elapsed_time(start, stop) * 1e-3 / copies)
    return 2 * n * 4 / statistics.median(times)


# ---------------------------------------------------------------------------------------
# Tensor-core ceilings: native kernels (native/tensor_ceilings.cu) through numba_gemm.nvrtc.

TENSOR_SOURCE = "tensor_ceilings.cu"
MMA_CHAINS = 8      # independent mma.sync accumulators per warp
WG_BATCH = 8        # wgmma per commit group
LDSM_BATCH = 8      # ldmatrix.x4 per loop iteration
TENSOR_DEFINES = (f"-DMMA_CHAINS={MMA_CHAINS}", f"-DWG_BATCH={WG_BATCH}", f"-DLDSM_BATCH={LDSM_BATCH}")
MMA_FLOPS = 2 * 16 * 8 * 16           # one mma.sync.m16n8k16
WGMMA_FLOPS = 2 * 64 * 256 * 16       # one wgmma m64n256k16
# name -> (kernel, threads per block, blocks per SM, FLOPs per block per loop iteration, iterations)
TENSOR = {
    "mma_sync": ("mma_sync_loop", 256, 4, (256 // 32) * MMA_CHAINS * MMA_FLOPS, 1 << 16),
    "wgmma": ("wgmma_loop", 256, 1, (256 // 128) * WG_BATCH * WGMMA_FLOPS, 1 << 14),
}


# The fragment loads that feed mma.sync, priced like the load kinds above (SM cycles per warp
# instruction): name -> (kernel, .trans, threads per block, blocks per SM, iterations).
LDSM_BYTES = 512                       # one ldmatrix.x4: four 8×8 b16 matrices
LDSM_TILE_WORDS = 2 * LDSM_BATCH * LDSM_BYTES // 4
LDMATRIX = {
    "ldmatrix_x4": ("ldmatrix_loop", False, 256, 4, 1 << 13),
    "ldmatrix_x4_trans": ("ldmatrix_trans_loop", True, 256, 4, 1 << 13),
}


def ldmatrix_addresses(j: int, it: int) -> list[int]:
    """Byte offsets in the tile that the 32 lanes give load j of iteration it (as the kernel)."""
    return [(it % 2) * LDSM_BATCH * LDSM_BYTES + j * LDSM_BYTES + 16 * lane for lane in range(WARP)]


def expected_ldmatrix(tile_words: np.ndarray, trans: bool, iters: int) -> np.ndarray:
    """(32, 4) uint32: lane l's sum (mod 2^32) of register i over the whole loop, from the ISA's
    fragment layout (numba_gemm.ptx.ldmatrix_warp), the check of what the kernel loaded."""
    from numba_gemm.ptx import ldmatrix_warp

    smem = np.ascontiguousarray(tile_words, dtype=np.uint32).view(np.uint8)
    total = np.zeros((WARP, 4), dtype=np.uint64)
    for half, times in ((0, (iters + 1) // 2), (1, iters // 2)):
        for j in range(LDSM_BATCH):
            regs = np.array(ldmatrix_warp(smem, ldmatrix_addresses(j, half), trans), dtype=np.uint64)
            total += regs * np.uint64(times)
    return (total % (1 << 32)).astype(np.uint32)


def tensor_cubin() -> bytes:
    """The ceilings' cubin (sm_90a), compiled by NVRTC; needs no GPU."""
    from numba_gemm import nvrtc

    return nvrtc.compile_variant(TENSOR_SOURCE, TENSOR_DEFINES)


def _timed_loop(fn, blocks: int, threads: int, src, out, cyc, iters: int):
    """Launch a register/shared-only loop kernel fn(src, out, cyc, iters) on blocks × threads:
    (seconds by CUDA events, {SM: [(clock64 at start, at end) of each block it ran]})."""
    from numba_gemm import nvrtc
    from numba_gemm.hgemm._common import device_ptr, pack_args

    args = pack_args(("p", device_ptr(src)), ("p", device_ptr(out)), ("p", device_ptr(cyc)), ("i", iters))
    start, stop = cuda.event(), cuda.event()
    start.record()
    nvrtc.launch(fn, (blocks, 1, 1), (threads, 1, 1), 0, None, args)
    stop.record()
    stop.synchronize()
    per_sm: dict[int, list] = {}
    for t0, t1, sm in cyc.copy_to_host().reshape(blocks, 3).astype(np.int64):
        per_sm.setdefault(int(sm), []).append((t0, t1))
    return cuda.event_elapsed_time(start, stop) * 1e-3, per_sm


def measure_tensor(name: str, iters: int | None = None, repeats: int = 5) -> dict:
    """One tensor-core ceiling on the current GPU: TFLOPS, FLOPs per SM cycle, SM clock."""
    from numba_gemm import nvrtc

    kernel, threads, blocks_per_sm, flops_per_iter, default_iters = TENSOR[name]
    iters = iters or default_iters
    f = _device_facts()
    blocks = f["sms"] * blocks_per_sm
    fn = nvrtc.function(TENSOR_SOURCE, kernel, defines=TENSOR_DEFINES)
    rng = np.random.default_rng()
    src = cuda.to_device(rng.uniform(-1, 1, 8192).astype(np.float16).view(np.uint32))  # not zeros
    out = cuda.device_array(blocks * threads, np.float32)
    cyc = cuda.device_array(3 * blocks, np.uint64)
    _timed_loop(fn, blocks, threads, src, out, cyc, 16)   # load + warm up
    runs = []
    for _ in range(repeats):
        seconds, per_sm = _timed_loop(fn, blocks, threads, src, out, cyc, iters)
        rates = [len(v) * iters * flops_per_iter / (max(b for _, b in v) - min(a for a, _ in v))
                 for v in per_sm.values()]
        spans = [max(b for _, b in v) - min(a for a, _ in v) for v in per_sm.values()]
        runs.append({"tflops": blocks * iters * flops_per_iter / seconds / 1e12,
                     "flops_per_sm_cycle": statistics.median(rates),
                     "sm_clock_ghz": statistics.median(spans) / seconds / 1e9,
                     "sms_seen": len(per_sm), "seconds": seconds})
    runs.sort(key=lambda r: r["tflops"])
    r = runs[len(runs) // 2]
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()} | {
        "blocks": blocks, "threads": threads, "iters": iters}


def measure_ldmatrix(name: str, iters: int | None = None, repeats: int = 5) -> dict:
    """One ldmatrix kind on the current GPU: SM cycles per warp instruction (median over SMs),
    instructions and bytes per SM cycle; every lane's sums checked on every run."""
    from numba_gemm import nvrtc

    kernel, trans, threads, blocks_per_sm, default_iters = LDMATRIX[name]
    iters = iters or default_iters
    f = _device_facts()
    blocks = f["sms"] * blocks_per_sm
    fn = nvrtc.function(TENSOR_SOURCE, kernel, defines=TENSOR_DEFINES)
    words = np.random.default_rng().integers(1, 1 << 32, LDSM_TILE_WORDS, dtype=np.uint64).astype(np.uint32)
    src = cuda.to_device(words)
    out = cuda.device_array(blocks * threads * 4, np.uint32)
    cyc = cuda.device_array(3 * blocks, np.uint64)
    want = np.tile(expected_ldmatrix(words, trans, iters), (blocks * threads // WARP, 1))
    _timed_loop(fn, blocks, threads, src, out, cyc, 16)   # load + warm up
    per_instr = threads // WARP * iters * LDSM_BATCH     # warp instructions per block
    runs = []
    for _ in range(repeats):
        seconds, per_sm = _timed_loop(fn, blocks, threads, src, out, cyc, iters)
        got = out.copy_to_host().reshape(-1, 4)
        if not np.array_equal(got, want):
            bad = int(np.argmax(np.any(got != want, axis=1)))
            raise RuntimeError(f"{name}: thread {bad} summed {got[bad].tolist()}, the ISA's layout gives "
                               f"{want[bad].tolist()}")
        spans = [max(b for _, b in v) - min(a for a, _ in v) for v in per_sm.values()]
        costs = [span / (len(v) * per_instr) for span, v in zip(spans, per_sm.values())]
        cost = statistics.median(costs)
        runs.append({"cycles_per_instr": cost, "instr_per_sm_cycle": 1 / cost,
                     "bytes_per_sm_cycle": LDSM_BYTES / cost,
                     "sm_clock_ghz": statistics.median(spans) / seconds / 1e9,
                     "sms_seen": len(per_sm), "seconds": seconds})
    runs.sort(key=lambda r: r["cycles_per_instr"])
    r = runs[len(runs) // 2]
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()} | {
        "blocks": blocks, "threads": threads, "iters": iters, "checked": True,
        "measured_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%MZ")}


def tensor_ceiling(name: str) -> float:
    """TFLOPS of one tensor-core ceiling ("mma_sync" or "wgmma") on the current GPU."""
    return measure_tensor(name)["tflops"]


def _write_json(path: str, data: dict) -> None:
    with open(path, "w") as fh:
        json.dump(data, fh, indent=1)
        fh.write("\n")


def run_tensor(out_path: str | None = None, quiet: bool = False, names=None) -> dict:
    """The tensor-core ceilings and the ldmatrix prices (or `names` of them); JSON at out_path."""
    import numba

    data = {"schema": 1, **_device_facts(),
            "tensor_tflops": {}, "tensor": {}, "tensor_method": _TENSOR_METHOD,
            "numba": numba.__version__,
            "measured_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%MZ")}
    _measure_tensor_into(data, names)
    if out_path:
        _write_json(out_path, data)
    if not quiet:
        print(format_tensor(data))
    return data


_TENSOR_METHOD = (f"native/tensor_ceilings.cu (NVRTC, sm_90a): mma_sync = mma.sync.m16n8k16 f16->f32 from "
                  f"registers, {MMA_CHAINS} accumulator chains per warp, 8 warps per block, 4 blocks per SM; "
                  f"wgmma = wgmma.mma_async m64n256k16 f16->f32, A and B from shared memory, {WG_BATCH} per "
                  "commit group with one group in flight, 2 warpgroups per SM; TFLOPS = FLOPs / CUDA-event "
                  f"time of one launch (median of 5); ldmatrix_x4(_trans) = ldmatrix.sync.aligned.m8n8.x4"
                  f"(.trans).shared.b16, {LDSM_BATCH} conflict-free loads per iteration each summed into 4 "
                  "registers, 8 warps per block, 4 blocks per SM, every lane's sums checked against the ISA's "
                  "fragment layout; clock64 span per SM / warp instructions on that SM (median over SMs, "
                  "median of 5 launches)")
TENSOR_NAMES = (*TENSOR, *LDMATRIX)


def _measure_tensor_into(data: dict, names=None) -> None:
    for name in names or TENSOR_NAMES:
        try:
            r = measure_tensor(name) if name in TENSOR else measure_ldmatrix(name)
        except Exception as e:  # one broken measurement must not lose the others
            data.setdefault("not_measured", {})[name] = f"{type(e).__name__}: {e}"
            continue
        data["tensor"][name] = r
        if name in TENSOR:
            data["tensor_tflops"][name] = round(r["tflops"], 1)


def ldmatrix_price(data: dict, name: str = "ldmatrix_x4") -> float | None:
    """SM cycles per warp ldmatrix of a costs file's tensor section; None: not yet measured."""
    r = data.get("tensor", {}).get(name)
    return r["cycles_per_instr"] if r else None


def format_tensor(data: dict) -> str:
    lines = [f"{'ceiling':18s} {'TFLOPS':>8s} {'FLOP/SM/clk':>12s} {'SM GHz':>7s}"]
    tensor = data.get("tensor", {})
    for name in TENSOR:
        if name in tensor:
            r = tensor[name]
            lines.append(f"{name:18s} {r['tflops']:8.1f} {r['flops_per_sm_cycle']:12.0f} {r['sm_clock_ghz']:7.3f}")
    lines.append(f"{'fragment load':18s} {'cyc/instr':>9s} {'B/SM/clk':>9s} {'SM GHz':>7s}")
    for name in LDMATRIX:
        if name in tensor:
            r = tensor[name]
            lines.append(f"{name:18s} {r['cycles_per_instr']:9.3f} {r['bytes_per_sm_cycle']:9.1f} "
                         f"{r['sm_clock_ghz']:7.3f}")
    for name in TENSOR_NAMES:
        why = data.get("not_measured", {}).get(name)
        if why:
            lines.append(f"{name:18s} not measured: {why}")
        elif name not in tensor:
            lines.append(f"{name:18s} not yet measured (python -m numba_gemm.microbench --tensor)")
    return "\n".join(lines)


def run_all(out_path: str | None = None, kinds=None, smoke_only: bool | None = None,
            quiet: bool = False) -> dict:
    """Measure every kind (GPU) or smoke-test every kernel (simulator); write JSON if asked."""
    if smoke_only is None:
        smoke_only = SIMULATOR
    if smoke_only:
        res = smoke(kinds)
        if not quiet:
            for k, v in res.items():
                print(f"{k:16s} {v}")
            print("simulator: index patterns checked; no timings (run on a GPU to measure)")
        return {"smoke": res}
    t_start = time.time()
    facts = _device_facts()
    arrays = _global_arrays()
    costs, spread, problems = {}, {}, {}
    for kind in kinds or KINDS:
        fam, _ = KINDS[kind]
        if fam not in _KERNELS:
            problems[kind] = str(_VECTOR_PROBLEM)
            continue
        try:
            med, lo, hi, nsm = measure(kind, arrays=arrays)
        except Exception as e:  # one broken kind must not lose the others
            problems[kind] = f"{type(e).__name__}: {e}"
            continue
        costs[kind] = round(med, 4)
        spread[kind] = [round(lo, 4), round(hi, 4), nsm]
    clock = measure_clock()
    bw = measure_copy_bandwidth()
    tensor = {"tensor_tflops": {}, "tensor": {}, "not_measured": problems}
    if kinds is None:
        _measure_tensor_into(tensor)
    import numba
    data = {
        "schema": 1,
        **facts,
        "clock_ghz": round(clock, 4),
        "copy_bandwidth_Bps": round(bw, -6),
        "unit": "SM cycles per warp-level instruction at full occupancy (median over SMs)",
        "costs": costs,
        "spread_min_max_sms": spread,
        "not_measured": problems,
        "tensor_tflops": tensor["tensor_tflops"],
        # the ledgers' tensor ceiling for the mma.sync levels (numba_gemm.ledgers.card reads it)
        **({"tensor_flops": tensor["tensor"]["mma_sync"]["tflops"] * 1e12} if "mma_sync" in tensor["tensor"] else {}),
        "tensor": tensor["tensor"],
        "tensor_method": _TENSOR_METHOD,
        "method": (f"{UNROLL} independent loads per loop iteration, each consumed by one FADD; "
                   f"256 threads per block, {facts['max_threads_per_sm'] // 256} blocks per SM; "
                   "clock64 span per SM / warp instructions on that SM; global loads from a "
                   "32 KB L1-resident array; copy bandwidth = 2 × bytes / time of a 1 GiB "
                   "device-to-device copy (10 copies per event pair, median of 5 pairs)"),
        "numba": numba.__version__,
        "measured_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
        "seconds": round(time.time() - t_start, 1),
    }
    if out_path:
        _write_json(out_path, data)
    if not quiet:
        print(format_table(data))
    return data


SEED_4090 = {"lds_free": 2.686, "lds_bcast": 0.534, "ldg": 1.94}


def format_table(data: dict) -> str:
    lines = [f"{data['device']} (cc {data['cc'][0]}.{data['cc'][1]}, {data['sms']} SMs): "
             f"clock {data['clock_ghz']:.3f} GHz, copy {data['copy_bandwidth_Bps'] / 1e12:.2f} TB/s",
             f"{'kind':16s} {'cycles':>8s} {'min':>8s} {'max':>8s} {'4090 (seed)':>12s}"]
    for k, v in data["costs"].items():
        lo, hi, _ = data["spread_min_max_sms"][k]
        seed = SEED_4090.get(k)
        lines.append(f"{k:16s} {v:8.3f} {lo:8.3f} {hi:8.3f} {seed if seed else '':>12}")
    for k, why in data.get("not_measured", {}).items():
        if k not in TENSOR_NAMES:
            lines.append(f"{k:16s} not measured: {why}")
    lines.append(f"({data['seconds']} s; unit: {data['unit']})")
    if data.get("tensor"):
        lines.append(format_tensor(data))
    return "\n".join(lines)


def update_file(path: str, new: dict) -> dict:
    """Merge the measurements of `new` (a --kinds or --tensor run) into the costs file at `path`,
    keeping everything else; each merged entry is dated in "updated"."""
    with open(path) as fh:
        data = json.load(fh)
    if (data.get("device"), data.get("sms")) != (new["device"], new["sms"]):
        raise ValueError(f"{path} was measured on {data.get('device')}, this is {new['device']}")
    stamp = new["measured_utc"]
    for kind, cost in new.get("costs", {}).items():
        data["costs"][kind] = cost
        data["spread_min_max_sms"][kind] = new["spread_min_max_sms"][kind]
        data.setdefault("updated", {})[kind] = stamp
    for name, r in new.get("tensor", {}).items():
        data.setdefault("tensor", {})[name] = r
        data.setdefault("updated", {})[name] = stamp
        if name in TENSOR:
            data.setdefault("tensor_tflops", {})[name] = new["tensor_tflops"][name]
            if name == "mma_sync":
                data["tensor_flops"] = r["tflops"] * 1e12
    for name in (*new.get("costs", {}), *new.get("tensor", {})):
        data.get("not_measured", {}).pop(name, None)
    if new.get("tensor"):
        data["tensor_method"] = new["tensor_method"]
    _write_json(path, data)
    return data


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write the costs JSON here (e.g. numba_gemm/data/h200_costs.json)")
    ap.add_argument("--update", metavar="FILE",
                    help="measure only --kinds or --tensor and merge them into this costs file, "
                         "keeping its other entries (each merged one dated under 'updated')")
    ap.add_argument("--kinds", help="comma-separated subset of: " + ", ".join(KINDS))
    ap.add_argument("--smoke", action="store_true", help="only run each kernel once and check it")
    ap.add_argument("--tensor", nargs="?", const=",".join(TENSOR_NAMES), metavar="NAMES",
                    help="only the tensor-core ceilings and ldmatrix prices (default: all of "
                         f"{', '.join(TENSOR_NAMES)}): needs a GPU")
    a = ap.parse_args(argv)
    if a.update and not (a.kinds or a.tensor):
        ap.error("--update merges a partial run: give --kinds or --tensor")
    if a.tensor:
        if SIMULATOR:
            ap.error("the tensor-core ceilings are native kernels: they need a GPU")
        names = a.tensor.split(",")
        unknown = [n for n in names if n not in TENSOR_NAMES]
        if unknown:
            ap.error(f"unknown tensor measurements: {unknown} (one of {', '.join(TENSOR_NAMES)})")
        data = run_tensor(a.out, names=names)
        if a.update:
            update_file(a.update, data)
        return 0 if set(data["tensor"]) == set(names) else 1
    kinds = a.kinds.split(",") if a.kinds else None
    if kinds:
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            ap.error(f"unknown kinds: {unknown}")
    if a.update and (a.smoke or SIMULATOR):
        ap.error("--update needs a GPU measurement")
    res = run_all(a.out, kinds, smoke_only=True if a.smoke else None)
    if "smoke" in res:
        bad = {k: v for k, v in res["smoke"].items() if v != "ok" and not v.startswith("skipped")}
        return 1 if bad else 0
    if a.update:
        update_file(a.update, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
