"""Tensor-core ceilings and the prices of the fragment loads that feed mma.sync, measured by
native kernels (native/tensor_ceilings.cu, compiled by NVRTC for sm_90a, launched through
numba_gemm.runtime.nvrtc); numba_gemm.measure.microbench runs them and writes them into the costs file.

"mma_sync" is mma.sync.m16n8k16 f16→f32 from registers only (the instruction of v8–v10: their
ceiling), "wgmma" is wgmma.mma_async m64n256k16 f16→f32 from shared memory, two warpgroups per
SM (the instruction the Hopper levels use). TFLOPS = FLOPs / CUDA-event time of one launch over
every SM (median of 5); each block's clock64 span also gives FLOPs per SM cycle and the SM clock
during the run. A full microbench run also writes the mma_sync figure as `tensor_flops`, the
tensor ceiling the ledgers price v7–v10 against (numba_gemm.explain.ledgers.card reads it).

"ldmatrix_x4" and "ldmatrix_x4_trans" run ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16 in
a loop of 8 conflict-free loads per iteration, each lane adding its four registers into four
sums that the host checks against the ISA's fragment layout (numba_gemm.ptx.ldmatrix_warp); the
result is SM cycles per warp instruction, as for the load kinds (numba_gemm.measure.load_costs), and
bytes per SM cycle (512 per x4). They go into the costs file's tensor section; a file without
them is "not yet measured" there.
"""
from __future__ import annotations

import statistics
from datetime import datetime, timezone

import numpy as np
from numba import cuda

from .load_costs import WARP, device_facts

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
    from numba_gemm.runtime import nvrtc

    return nvrtc.compile_variant(TENSOR_SOURCE, TENSOR_DEFINES)


def _timed_loop(fn, blocks: int, threads: int, src, out, cyc, iters: int):
    """Launch a register/shared-only loop kernel fn(src, out, cyc, iters) on blocks × threads:
    (seconds by CUDA events, {SM: [(clock64 at start, at end) of each block it ran]})."""
    from numba_gemm.hgemm._common import device_ptr, pack_args
    from numba_gemm.runtime.launch import launch_native

    args = pack_args(("p", device_ptr(src)), ("p", device_ptr(out)), ("p", device_ptr(cyc)), ("i", iters))
    start, stop = cuda.event(), cuda.event()
    start.record()
    launch_native(fn, (blocks, 1, 1), (threads, 1, 1), 0, None, args)
    stop.record()
    stop.synchronize()
    per_sm: dict[int, list] = {}
    for t0, t1, sm in cyc.copy_to_host().reshape(blocks, 3).astype(np.int64):
        per_sm.setdefault(int(sm), []).append((t0, t1))
    return cuda.event_elapsed_time(start, stop) * 1e-3, per_sm


def measure_tensor(name: str, iters: int | None = None, repeats: int = 5) -> dict:
    """One tensor-core ceiling on the current GPU: TFLOPS, FLOPs per SM cycle, SM clock."""
    from numba_gemm.runtime import nvrtc

    kernel, threads, blocks_per_sm, flops_per_iter, default_iters = TENSOR[name]
    iters = iters or default_iters
    f = device_facts()
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
    from numba_gemm.runtime import nvrtc

    kernel, trans, threads, blocks_per_sm, default_iters = LDMATRIX[name]
    iters = iters or default_iters
    f = device_facts()
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


TENSOR_METHOD = (f"native/tensor_ceilings.cu (NVRTC, sm_90a): mma_sync = mma.sync.m16n8k16 f16->f32 from "
                  f"registers, {MMA_CHAINS} accumulator chains per warp, 8 warps per block, 4 blocks per SM; "
                  f"wgmma = wgmma.mma_async m64n256k16 f16->f32, A and B from shared memory, {WG_BATCH} per "
                  "commit group with one group in flight, 2 warpgroups per SM; TFLOPS = FLOPs / CUDA-event "
                  f"time of one launch (median of 5); ldmatrix_x4(_trans) = ldmatrix.sync.aligned.m8n8.x4"
                  f"(.trans).shared.b16, {LDSM_BATCH} conflict-free loads per iteration each summed into 4 "
                  "registers, 8 warps per block, 4 blocks per SM, every lane's sums checked against the ISA's "
                  "fragment layout; clock64 span per SM / warp instructions on that SM (median over SMs, "
                  "median of 5 launches)")
TENSOR_NAMES = (*TENSOR, *LDMATRIX)


def measure_tensor_into(data: dict, names=None) -> None:
    """Measure `names` (default: all) into data's "tensor" and "tensor_tflops"; a failure goes
    to its "not_measured" with the reason."""
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
            lines.append(f"{name:18s} not yet measured (python -m numba_gemm.measure.microbench --tensor)")
    return "\n".join(lines)

