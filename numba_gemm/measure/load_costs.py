"""The Numba kernels that price the cycle ledger's loads on the GPU at hand (numba_gemm.measure.microbench
runs them and writes the costs file).

Each kind of load (a shared broadcast, a conflict-free shared load, an n-way bank conflict,
a 128-bit shared load, global loads of several shapes) runs in a loop of independent
warp-level loads, 8 per iteration, each consumed by one FADD as a GEMM consumes what it
loads. The grid fills every SM (2048 threads per SM on sm_90: full occupancy). Every block
reads its SM's cycle counter (clock64) at the start and end of the loop and records which
SM it ran on; per SM,

    cost = (last end - first start on that SM) / (warp load instructions run on that SM)

in SM cycles per warp-level instruction: the unit of numba_gemm.explain.ledgers (the seed's 4090
figures: conflict-free 2.686, broadcast 0.534, global 1.94). The median over SMs is kept.
An FFMA loop is measured the same way as a yardstick (128 FP32 lanes per SM: 0.25).

Global loads read a 32 KB array that stays in L1 after the first pass, as k2's and the tiled
levels' loads mostly do; `ldg_x32` sends each lane to its own 128-byte line (k1's A load);
`ldg128_x8` is k7's (and the 16-deep k8's) float4 load of A: 4 lanes per row, 64 bytes from
each of 8 rows (8 lines, where a coalesced `ldg128` touches 4); `ldg128_x16` is the 8-deep k8's:
2 lanes per row, 32 bytes from each of 16 rows (16 lines, the same 16 sectors).

Also measured: the device-to-device copy bandwidth (bytes read + written per second, the
bytes ledger's ceiling) and the SM clock (clock64 cycles over CUDA-event time).

In the Numba CUDA simulator (no GPU) `smoke()` runs each kernel once at a tiny size and checks
the values it loaded, so the index patterns are tested in CI. Whoever imports this module has
chosen the simulator or the GPU already (numba_gemm.runtime.gpu).
"""
from __future__ import annotations

import statistics
import time

import numpy as np
from numba import cuda, float32, types, uint64

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
# the tests to check each pattern is the kind it claims to be (numba_gemm.explain.ledgers).

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
        from numba_gemm.ptx.intrinsics import load4_global, load4_shared
        return load4_shared, load4_global
    except Exception as e:  # the 128-bit kinds are then reported as not measured
        return None, f"numba_gemm.ptx.intrinsics unavailable: {e}"


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


# _ldg32 is _lds32's loop on global memory, written out again on purpose: each kernel is
# the instruction stream it prices, so no helper stands between the two and the loads.
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

def device_facts():
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
    f = device_facts()
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


def measure_kinds(kinds=None) -> tuple[dict, dict, dict]:
    """measure() of each kind (default: all): ({kind: median}, {kind: [min, max, SMs seen]},
    {kind: why it was not measured})."""
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
    return costs, spread, problems


def measure_clock(iters: int = 1 << 16, threads: int = 256) -> float:
    """SM clock in GHz: clock64 cycles of an FFMA loop over its CUDA-event time."""
    f = device_facts()
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

