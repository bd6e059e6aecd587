"""read: diff native/v11sk_splitk.cu native/v11gv_gemv.cu · run: python bench.py --level v11gv --dtype fp16

v11gv: skinny M (≤ 2) without the tensor cores — B streamed once from DRAM into registers, K split over a cluster.

v11gv = v11sk for M ≤ 2 rebuilt as a GEMV. At M ≤ 2 each element of B meets at most 2 of A,
so the time is B's bytes over DRAM bandwidth (1×4096×4096 fp16: 32 MiB, ~8 µs at 4.13 TB/s)
if enough of them are in flight. v11sk pads M to a 64-row wgmma tile, stages B through shared
memory for a reuse M ≤ 2 does not have and writes S partial products for a second launch; it
reached about half the bandwidth at decode shapes. Here (native/v11gv_gemv.cu):

    CTA (256 threads): R rows × 256 columns of C, one K slice; grid = column tiles · S
    lane l owns columns 8l .. 8l+7: one 16-byte load of a B row (a warp reads 512 contiguous
    bytes); warp w takes k rows w·8 .. w·8+7 of every 64: 8 loads of B in flight per lane,
    one 16-byte load per row of A; both converted to fp32, 8·R FFMA per k
    end of slice: the 8 warps' partials meet in shared memory, added in warp order 0..7;
    S > 1: the S slices of a column tile are one cluster and add their partials through
    distributed shared memory in the order 0..S-1 (v11sl's reduction), one launch, no workspace

Two row counts R = 1, 2, the least that holds M (8·R FFMA per k; a row past M multiplies
zeros). The next step's loads are issued before this step's FFMA, so 16 loads of B per lane are
in flight (run(..., prefetch=False) measures without). Rows of A or B that are not whole 16
bytes take the edge kernel (R = 2), element by element, every load checked: any shape is exact,
the aligned ones are fast.

Why M ≤ 2: kernels with R = 4 and 8 were built and measured (docs/RESULTS.md, fourteenth run)
and lost to v11sk by 1.5–2.7×: 8·R accumulators plus a step of loads in flight do not fit the
registers of 2–3 CTAs an SM, so fewer bytes are in flight than the DRAM needs. From M = 3 the
tensor-core levels read B once per 64 rows and win.

Which ledger moved: bytes in flight. B is read once, by 16-byte loads straight into registers,
and nothing else of size moves: A is a few KB per slice (from L2), C is M·N floats. What it
costs: FFMA instead of HGMMA — 8·R per 16 bytes of B, which the SM issues many times over at
the DRAM rate.

M > 2 is refused: v11sk, v11sl or auto serve it.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import splitk
from ..util import ceil_div
from . import _common as cm

LEVEL = "v11gv"
PARENT = "v11sk"
TITLE = "skinny M (≤ 2) as a GEMV: B streamed into registers, K split over a cluster"
DELTA = ("v11gv = v11sk for M ≤ 2 without the tensor cores: each lane loads 16 bytes of a B row "
         "straight into registers, 2 FFMA per element at most, warps and a cluster of K slices "
         "add their partials in a fixed order in shared memory")
DTYPES = cm.DTYPES
SOURCE = "v11gv_gemv.cu"
KERNEL_NAMES = {"f16": "v11gv_f16_r2", "bf16": "v11gv_bf16_r2"}
ROWS = (1, 2)                                   # R: the kernels' row counts
KERNELS = {(kind, rows): f"v11gv_{kind}_r{rows}" for kind in ("f16", "bf16") for rows in ROWS}
EDGE_KERNELS = {kind: f"v11gv_{kind}_edge" for kind in ("f16", "bf16")}
SASS_MUST_HAVE = ("LDG.E.128", "FFMA", "UCGABAR_ARV", "UCGABAR_WAIT", "LD.E")
SASS_MUST_NOT_HAVE = ("HGMMA", "HMMA")          # the point: no tensor cores
RASTER = "n-fastest"
SPLIT_IN_KERNEL = True                          # numba_gemm.choose: one launch, no partials in memory
DEFINES = ()
NO_PREFETCH = ("-DV11GV_PREFETCH=0",)           # run(..., prefetch=False): for a benchmark


@dataclass(frozen=True)
class GemvTile:
    """The CTA's output tile (what the ledgers and auto read) and its K step."""
    bm: int = 2
    bn: int = 256
    bk: int = 64
    threads: int = 256


CONFIG = GemvTile()
MAX_M = CONFIG.bm
MAX_SPLITS = 8                                  # the portable cluster size
MIN_SLICE_STEPS = 4                             # K steps (of 64) a slice runs at least
CTAS_PER_SM = {1: 3, 2: 2}                      # by R: the launch bounds (registers)


def rows_for(M: int) -> int:
    """R, the rows a CTA computes: the least of ROWS that holds M."""
    return next((r for r in ROWS if r >= M), MAX_M)


def resident_ctas(M: int, N: int, K: int) -> int:
    """CTAs an SM holds of the kernel that serves M rows (what the ledgers' waves read)."""
    return CTAS_PER_SM[rows_for(M)]


def smem_bytes(rows: int) -> int:
    """The 8 warps' partial tiles, rows × 256 floats each."""
    return 8 * rows * CONFIG.bn * 4


def plan_splits(M: int, N: int, K: int, sms: int = 132, splits: int | None = None,
                clusters=None) -> int:
    """S, the K slices (one cluster) per column tile: as many as one wave of CTAs holds (tiles·S
    within every SM's slots), at most MAX_SPLITS, each slice at least MIN_SLICE_STEPS steps of 64, none empty. A forced
    `splits` (benchmarks) is checked the same way. `clusters(c)`, where given, says how many
    clusters of c CTAs of the kernel fit at once, and S is lowered until all the tiles' clusters
    do (splitk.resident_splits; run() asks the driver). Pure otherwise."""
    tiles, steps = ceil_div(N, CONFIG.bn), ceil_div(K, CONFIG.bk)
    if splits is None:
        fit = sms * resident_ctas(M, N, K) // tiles       # one wave: tiles·S within the slots
        s = max(1, min(fit, MAX_SPLITS, steps // MIN_SLICE_STEPS))
        if clusters is not None:
            s = splitk.resident_splits(tiles, steps, s, clusters)
    elif isinstance(splits, bool) or not isinstance(splits, int) or not 1 <= splits <= min(MAX_SPLITS, steps):
        raise ValueError(f"level {LEVEL}: splits must be an int in 1..{min(MAX_SPLITS, steps)} (at most the "
                         f"cluster size {MAX_SPLITS} and the {steps} K steps of 64), got {splits!r}")
    else:
        s = splits
    return splitk.effective_splits(steps, s)          # no empty slice


def kernel_rows(M: int, aligned: bool) -> int:
    """R of the kernel that serves M rows: rows_for(M) for aligned rows; the edge kernel has 2."""
    return rows_for(M) if aligned else MAX_M


def launch_config(M: int, N: int, K: int, splits: int = 1, aligned: bool = True):
    """(grid, block, smem): column tiles · S CTAs along x, in clusters of S; the shared memory
    of the kernel's R."""
    return ((ceil_div(N, CONFIG.bn) * splits, 1, 1), (CONFIG.threads, 1, 1),
            smem_bytes(kernel_rows(M, aligned)))


def kernel_name(kind: str, M: int, aligned: bool) -> str:
    return KERNELS[(kind, rows_for(M))] if aligned else EDGE_KERNELS[kind]


def unsupported(M: int, N: int, K: int) -> str | None:
    reason = cm.check_dims(M, N, K)
    if reason:
        return reason
    if M > MAX_M:
        return (f"v11gv serves M ≤ {MAX_M}: from M = 3 the tensor-core levels, which read B once per 64 "
                f"rows, are faster (docs/RESULTS.md): use v11sk, v11sl or level='auto'")
    if K > cm.INT32_MAX - 16 * CONFIG.bk:        # the kernel's k indices run up to K + 8 steps, in int32
        return f"K = {K} is within {16 * CONFIG.bk} of 2^31 (int32 k indices past K)"
    return None


def run(A, B, C, alpha, beta, stream=None, splits: int | None = None, prefetch: bool = True):
    from ..runtime import nvrtc
    from ..runtime.launch import launch_native

    M, K = A.shape
    N = B.shape[1]
    reason = unsupported(M, N, K)
    if reason:
        raise ValueError(f"level {LEVEL} cannot run M={M}, N={N}, K={K}: {reason}")
    pa, pb = cm.device_ptr(A), cm.device_ptr(B)
    aligned = cm.rows_16b_aligned(pa, K) and cm.rows_16b_aligned(pb, N)
    kernel = nvrtc.function(SOURCE, kernel_name(cm.element_type(A), M, aligned),
                            defines=DEFINES if prefetch else NO_PREFETCH)
    _, block, smem = launch_config(M, N, K, 1, aligned)      # the grid waits for S
    S = plan_splits(M, N, K, sms=cm.sm_count(), splits=splits,
                    clusters=lambda c: cm.resident_clusters(kernel, block, smem, c))
    per = splitk.slice_k_tiles(ceil_div(K, CONFIG.bk), S) * CONFIG.bk
    args = cm.pack_args(("p", pa), ("p", pb), ("p", cm.device_ptr(C)), ("i", M), ("i", N), ("i", K),
                        ("f", alpha), ("f", beta), ("i", per), ("i", S))
    grid, block, smem = launch_config(M, N, K, S, aligned)
    launch_native(kernel, grid, block, smem, stream, args, cluster=S if S > 1 else None, pdl=True)
