"""read: diff native/v10_tma.cu native/v11_wgmma.cu · run: python bench.py --level v11 --dtype fp16

v11: v10 with the tensor-core instruction changed: wgmma (warpgroup MMA) instead of mma.sync.

v11 = v10 + wgmma.mma_async m64n256k16, reading A and B straight from the SWIZZLE_128B shared
tiles that TMA wrote, through 64-bit matrix descriptors. The tile (128×256×64, 4 stages),
the TMA boxes, the full/empty mbarriers, the producer thread and the super-tile order are
v10's. The 256 threads are now two warpgroups, each owning 64 rows × 256 columns of the block
tile; per 16-deep k step each warpgroup issues ONE wgmma (v10: 8 ldmatrix + 32 mma.sync in each
of its 4 warps). The accumulators stay in registers
(128 fp32 per thread, as v10) and the shared tiles are never copied into fragment registers.
Around each stage: wgmma.fence, 4 wgmma (k = 0, 16, 32, 48), commit_group, then wait_group 1 —
the previous stage's group is complete, so its stage is released to the producer while this
stage's wgmma still run: the tensor cores always have a stage queued.

Which ledger moved: issue slots. Per warpgroup and stage, 4 HGMMA replace 128 LDSM + 512 HMMA
= 640 warp instructions; the shared-memory reads are done by the tensor cores'
own operand path (no LDSM, no fragment registers, no bank-conflict question). DRAM/L2 bytes
and the load side are v10's. Registers: 154 per thread (v10: accumulators + fragments).
Census (sm_90a, CI-asserted): HGMMA.64x256x16.F32, WARPGROUP.ARRIVE, WARPGROUP.DEPBAR.LE,
UTMALDG.2D, SYNCS; no HMMA, no LDSM, no local memory.

Descriptors (native/wgmma.cuh; `smem_desc` below is the same function): A is K-major with
128-byte rows, SBO = 1024 (8-row atoms), the k step +32 bytes on the start address; B is
N-major (imm-trans-b = 1) in 64-column panels, LBO = 8192 (next panel), SBO = 1024 (next 8
k rows), the k step +2048 bytes.

Measured on the H200: docs/RESULTS.md, "2026-12-01, third run: the kernels' own time
(HGEMM)": above the mma.sync register-loop ceiling (numba_gemm.measure.microbench); its K loop runs at
the tensor cores' rate (time against K at M = N = 4096), and what it loses to cuBLAS at 4096³
is a fixed cost per launch, mostly the epilogue.

Limits (TMA's, as v10): 16-byte aligned base and K % 8 == 0, N % 8 == 0 for 2-byte types;
other shapes are refused before launch, naming v9, which serves any shape.

Other tiles, same source: run(..., bm=64|128, bn=64|128|256) compiles the body for that tile
(m64n{bn}k16, bn / 64 B panels per stage, bn / 2 accumulators per thread; 4 stages, lag 2 as
shipped, or for a 64-wide tile as many stages as fit when its tiles fit one CTA per SM:
`planned`), each its own cubin. More, smaller CTAs for shapes whose 128×256 tiles leave SMs idle
(512³: 32 CTAs for 132 SMs; 64×64 tiles: 64 KB of stages, several CTAs per SM), timed against
the shipped tile with tools/hopper_top.py --levels v11,v11:bm=64:bn=128.

Launched as a programmatic dependent launch, as v11p, v11sk, v11sl, v11t, v11gv, v12 and v13
are: the K loop (native/wgmma_tma_loop.cuh) waits for the previous kernel of the stream
(griddepcontrol.wait) after its barrier set-up, before any global access, so in a back-to-back
loop the next call's launch and set-up overlap this one's end (an H100 loop at 512³: 10.4 ->
8.7 µs a call; docs/RESULTS.md, "thirty-fourth run").
"""
from __future__ import annotations

from ..util import ceil_div
from . import _common as cm
from . import _wgmma as wg

LEVEL = "v11"
PARENT = "v10"
TITLE = "wgmma from swizzled shared tiles"
DELTA = ("v11 = v10 with ldmatrix + mma.sync replaced by wgmma.mma_async m64n256k16 reading the "
         "TMA tiles through matrix descriptors (fence / commit_group / wait_group 1)")
DTYPES = cm.DTYPES
SOURCE = "v11_wgmma.cu"
KERNEL_NAMES = {"f16": "v11_wgmma_f16", "bf16": "v11_wgmma_bf16"}
SASS_MUST_HAVE = ("HGMMA", "UTMALDG", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR")
SASS_MUST_NOT_HAVE = ("HMMA", "LDSM")
RASTER = "super"

CONFIG = wg.WgmmaTile()
DEFINES = CONFIG.defines()        # the whole tile as -DHG_* (native/wgmma_tile.cuh requires them)


def tile_order(M: int, N: int, K: int, l2_bytes: int | None = None, config=CONFIG):
    """(super_m, super_n): v9's L2 rule for this tile."""
    return wg.tile_order(M, N, K, l2_bytes, config)


def launch_config(M: int, N: int, K: int, config=CONFIG):
    return wg.launch_config(M, N, K, config)


def unsupported(M: int, N: int, K: int) -> str | None:
    return wg.tma_rule(M, N, K)


def tile(bm: int = CONFIG.bm, bn: int = CONFIG.bn) -> wg.WgmmaTile:
    """v11's tile bm × bn (the shipped depth, stages and lag), refused with a ValueError that
    says which tiles exist; the shipped CONFIG by default."""
    return wg.variant(LEVEL, CONFIG, bm, bn)


DEEP_BN = 64   # the tile width that gains from a deeper pipeline on one wave (v11sl's tiles)


def planned(M: int, N: int, config: wg.WgmmaTile = CONFIG, sms: int = 132) -> wg.WgmmaTile:
    """`config` as run() launches it at M × N: a 64-wide tile whose tiles fit one CTA per SM as
    deep as shared memory allows (wg.deepest: no second CTA wants the SM's shared memory), else
    as given. Measured on the H200 (docs/RESULTS.md, twenty-first run): 128×64 at 1024³, 8 deep,
    8.7 µs where 4 deep took 9.4, as v11sl's 128×64 does; but 128×128 at 512×4096×4096, 7 deep,
    36.8 µs against 32.9, and 64×256 5 deep 39.8 against 36.4: the wider tiles keep 4 stages."""
    tiles = ceil_div(M, config.bm) * ceil_div(N, config.bn)
    return wg.deepest(config) if tiles <= sms and config.bn == DEEP_BN else config


# The tiles auto may rank (numba_gemm.choose: each under its own calibration entry, so none but
# CONFIG runs under auto before it has been measured).
TILE_CHOICES = tuple(tile(bm, bn) for bm in (64, 128) for bn in wg.WGMMA_N)


def _warm_variants() -> dict[str, tuple[str, ...]]:
    """Each other tile at the shipped depth, and each tile as deep as `planned` makes it."""
    out = {}
    for t in TILE_CHOICES:
        deep = wg.deepest(t) if t.bn == DEEP_BN else t
        if t != CONFIG:
            out[f"bm={t.bm},bn={t.bn}"] = t.defines()
        if deep != t:
            out[f"bm={t.bm},bn={t.bn},stages={deep.stages}"] = deep.defines()
    return out


# python -m numba_gemm warm compiles these too (auto runs the calibrated tiles)
WARM_VARIANTS = _warm_variants()


def run(A, B, C, alpha, beta, stream=None, bm: int = CONFIG.bm, bn: int = CONFIG.bn):
    """C = alpha·A@B + beta·C with the bm × bn tile (default: the shipped 128×256), as deep as
    `planned` makes it at this shape."""
    config = tile(bm, bn)                  # before any operand is touched
    M, K = A.shape
    N = B.shape[1]
    args = wg.maps_and_args(LEVEL, A, B, C, alpha, beta, config)   # refuses bad operands first
    config = planned(M, N, config, cm.sm_count())                  # the same boxes, maybe deeper
    defines = config.defines()
    grid, block, smem = launch_config(M, N, K, config)
    cm.launch(SOURCE, KERNEL_NAMES[cm.element_type(A)], grid, block, smem, stream, args, defines,
              pdl=True)
