"""read: diff native/v11_wgmma.cu native/v12_warpspec.cu · run: python bench.py --level v12 --dtype fp16

v12: v11 + warp specialisation — a producer warpgroup, two consumer warpgroups, setmaxnreg.

v12 = v11 with the roles split. In v11 thread 0 both issued the TMA loads and computed, so the
refill had to trail the reads by two stages (only two tiles ahead in flight) and warp 0 paid for
the producer's waits. v12 adds a third warpgroup (384 threads) that only loads: one thread
walks the K tiles, waits on empty[s] until both consumers released a stage, re-arms full[s]
with the stage's byte count and issues the boxes, so all 4 stages are in flight. The two
consumer warpgroups run v11's loop unchanged (fence, 4 × wgmma m64n256k16, commit,
wait_group 1, release) on rows 0-63 and 64-127 of the 128×256 tile.

Registers: __launch_bounds__(384, 1) caps every thread at 168 at entry; the producer gives
registers back with setmaxnreg.dec (40) and the consumers take them with setmaxnreg.inc (232):
128·40 + 256·232 = 64,512 of the 65,536. Each role is one branch of one if/else, as setmaxnreg
needs (ptxas would warn C7508 and ignore it otherwise; the CI test reads the log).

Which ledger moved: load latency hidden (up to 4 stages in flight instead of 2, no computing
warp ever waits for the producer) and issue slots (the consumers' warps issue only waits, wgmma
and their arrivals). Bytes are v11's. Measured on the H200 (docs/RESULTS.md, "2026-12-01,
third run: the kernels' own time (HGEMM)"): no step over v11, in either dtype. v11's K loop
already ran at the tensor cores' rate (time against K), so there was no load latency left to
hide; the fixed cost per tile (the epilogue) is the same in both. Census (CI-asserted):
HGMMA.64x256x16.F32, UTMALDG.2D, USETMAXREG.DEALLOC / .TRY_ALLOC, SYNCS; no HMMA, LDSM or local
memory.

Limits as v10/v11 (TMA): K % 8 == 0, N % 8 == 0, 16-byte aligned base; otherwise refused
before launch, naming v9.
"""
from __future__ import annotations

from . import _common as cm
from . import _wgmma as wg

LEVEL = "v12"
PARENT = "v11"
TITLE = "warp-specialised producer/consumers + setmaxnreg"
DELTA = ("v12 = v11 + a producer warpgroup (TMA only, waits on empty barriers) and two consumer "
         "warpgroups (wgmma only), registers moved to the consumers with setmaxnreg 40/232")
DTYPES = cm.DTYPES
SOURCE = "v12_warpspec.cu"
KERNEL_NAMES = {"f16": "v12_warpspec_f16", "bf16": "v12_warpspec_bf16"}
SASS_MUST_HAVE = ("HGMMA", "UTMALDG", "USETMAXREG.DEALLOC", "USETMAXREG.TRY_ALLOC")
SASS_MUST_NOT_HAVE = ("HMMA", "LDSM")
RASTER = "super"

CONFIG = wg.WgmmaTile(producer=True)
DEFINES = CONFIG.defines()        # the whole tile as -DHG_* (native/wgmma_tile.cuh requires them)


def tile_order(M: int, N: int, K: int, l2_bytes: int | None = None, config=CONFIG):
    return wg.tile_order(M, N, K, l2_bytes, config)


def launch_config(M: int, N: int, K: int, config=CONFIG):
    return wg.launch_config(M, N, K, config)


def unsupported(M: int, N: int, K: int) -> str | None:
    return wg.tma_rule(M, N, K)


def run(A, B, C, alpha, beta, stream=None):
    M, K = A.shape
    N = B.shape[1]
    args = wg.maps_and_args(LEVEL, A, B, C, alpha, beta, CONFIG)
    grid, block, smem = launch_config(M, N, K)
    cm.launch(SOURCE, KERNEL_NAMES[cm.element_type(A)], grid, block, smem, stream, args, DEFINES,
              pdl=True)
