"""read: diff native/v12_warpspec.cu native/v13_persistent.cu · run: python bench.py --level v13 --dtype fp16

v13: v12 + a persistent grid of 2-CTA clusters with the B tile multicast by TMA.

v13 = v12 with the grid and the loads changed; the warpgroup roles, the 128×256×64 tile, the
4-stage ring and the wgmma loop are v12's.
  - Persistent grid: as many clusters as can be resident at once (cuOccupancyMaxActiveClusters,
    one CTA per SM); cluster c computes pair-tiles c, c + G, c + 2G, ... in v9's super-tile
    order over the grid of pairs, so the G clusters working at any moment share A and B rows
    in L2 as v9-v12's waves did. The stage ring runs on across tiles: while the consumers store
    a tile's C, the producer already fills the next tile's stages — the epilogue overlaps the
    loads, and there is no block launch, barrier set-up or pipeline fill between tiles.
  - Cluster (2, 1, 1) along M, launched with cuLaunchKernelEx and the cluster-dimension
    attribute: the two CTAs compute tiles (2·pm, bn) and (2·pm + 1, bn), which need the same B
    tile. Each CTA loads half of B's four 64-column panels with cp.async.bulk.tensor
    .multicast::cluster into both CTAs' shared memory, and its own A; each CTA's full[s]
    expects the whole 48 KB stage, and empty[s] counts the consumer warps of both CTAs (a
    producer's multicast overwrites the stage in both).

Which ledger moved: L2 → SM bytes per stage and CTA from 48 KB to 32 KB (B read once per
pair), and the fixed costs per tile (launch, prologue, pipeline fill, epilogue not hidden).
DRAM bytes: the super-tile rule, now in pair units. Census (CI-asserted): HGMMA, UTMALDG.2D
.MULTICAST, USETMAXREG, SYNCS.ARRIVE.TRANS64.RED (the remote arrivals), UTMASTG.2D (the
epilogue's TMA stores); no HMMA, LDSM or local memory.

The epilogue (beta == 0, C 16-byte aligned): each consumer warpgroup writes its 64×256 tile
as eight 64×32 fp32 boxes into two 8 KB shared buffers (SWIZZLE_128B, so a warp's float2
stores to 8 rows hit different banks) and one thread stores each box with a TMA store
(cp.async.bulk.tensor, UTMASTG): the warpgroup goes back to the next tile's K loop while the
stores drain, instead of waiting on 64 global float2 stores per thread. beta != 0 (C is read)
and unaligned C keep the register epilogue. The 32 KB of buffers fit beside the 4 stages.
Measured (docs/RESULTS.md, "seventh run"): 1.025× the register epilogue at 4096³ fp16 (0.984×
cuBLAS), 0.99× at 8192³, where the power-bound clock sets the pace.

Launched with programmatic dependent launch (the launch attribute
CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION): a call may start while the kernel before
it in the stream finishes. Each CTA sets up its ring and passes the cluster barrier, then waits
(griddepcontrol.wait) until that kernel has finished and its writes are visible, before any
global access, and lets the next call start (griddepcontrol.launch_dependents). In a
back-to-back loop on an H100 that saved 0.3-1.9 us a call; the kernel's own time did not move
(docs/RESULTS.md, 2026-12-07).

run(..., cluster=1) (-DHG_CLUSTER=1) is the same persistent kernel without the cluster and
run(..., tma_store=0) the register epilogue, both for comparison. run(..., bm=, bn=) is a
narrower tile (bm 64 or 128, bn 64, 128 or 256: BN / 2 accumulators, BN / 64 panels of B shared
by the pair), as deep as its smaller stages fit (planned); run(..., stages=) another depth of
the ring. run(..., along_n=1) (-DHG_CLUSTER_N=1) turns the pair to run along N, sharing A
instead of B: each CTA loads half of the A tile (a tensor map of half-height boxes) multicast to
both, and all of its own B. That is the orientation for narrow N, where A is the big operand
(cuBLAS's pair at 4096×128×4096). run(..., cluster=4) is both pairs at once, a 2 × 2 cluster:
each CTA loads half of its A tile's rows and half of its B tile's panels, each multicast to the
CTA that shares it, so A and B each come from L2 half as often as without a cluster. It is
for comparison: on an H100 it ran at best 2 % faster than the pair and slower at most shapes
measured (docs/RESULTS.md, "thirtieth run").
Auto may rank the 128×128 tile (TILE_CHOICES): at 512×4096 it runs 128 CTAs, six stages
deep, where the 128×256 tile fills 64 of the 132 SMs; and, for narrow N, the pair along N at
64×64, 128×64 and 128×128 (on an H100 at 4096×128×4096 the 64×64 pair along N ran 0.75×
cuBLAS where along M it ran 0.55× and v11sl 0.70×).

A K-group tile (two consumer warpgroups sharing one 64-row tile's K, their sums added in
shared memory), built for narrow N, was measured on an H100 slower than v11sl and than the
128×128 tile (docs/RESULTS.md, "twenty-third run"), with racecheck hazards on its hand-off, and
removed.

Measured on the H200:
docs/RESULTS.md, "2026-12-01, third run: the kernels' own time (HGEMM)", with the cluster=1
variant and the register epilogue: no step over v12; the multicast is worth about what
the persistent grid alone loses; the fixed cost per round of tiles (the epilogue from registers
while the tensor cores idle) is what cuBLAS still does better.

Limits as v10-v12 (TMA: K % 8 == 0, N % 8 == 0, 16-byte aligned base; refused before launch,
naming v9). A pair whose second tile lies below M (odd number of tile rows) still runs that
CTA for its half of B; it stores nothing.
"""
from __future__ import annotations

import ctypes
import dataclasses

import numpy as np

from . import _common as cm
from . import _wgmma as wg

LEVEL = "v13"
PARENT = "v12"
TITLE = "persistent 2-CTA clusters, TMA multicast"
DELTA = ("v13 = v12 + a persistent grid of 2-CTA clusters walking pair-tiles in super-tile "
         "order, B multicast to both CTAs by TMA, the epilogue overlapping the next tile's loads")
DTYPES = cm.DTYPES
SOURCE = "v13_persistent.cu"
KERNEL_NAMES = {"f16": "v13_persistent_f16", "bf16": "v13_persistent_bf16"}
SASS_MUST_HAVE = ("HGMMA", "UTMALDG.2D.MULTICAST", "USETMAXREG.DEALLOC", "USETMAXREG.TRY_ALLOC",
                  "UTMASTG.2D")
SASS_MUST_NOT_HAVE = ("HMMA", "LDSM")
RASTER = "super"
PERSISTENT = True   # one resident grid walks the tiles: auto words its waves as rounds of tiles

CONFIG = wg.WgmmaTile(producer=True)
C16 = True      # C may be A's fp16/bf16 (-DHG_C16=1): fp32 accumulate, alpha and beta in fp32, rounded once
CLUSTER = 2     # CTAs per cluster, along M (-DHG_CLUSTER; 1 = persistent only, for comparison; 4 = 2 x 2)
ALONG_N = 0     # 1: the pair runs along N and shares A (-DHG_CLUSTER_N); 0: along M, sharing B
TMA_STORE = 1   # beta == 0: C through shared memory and TMA stores (-DHG_TMA_STORE; 0 for comparison)
C_BOX_BYTES = 64 * 128     # one 64-row x 128-byte box of the TMA-store epilogue; two per consumer


def defines(cluster: int = CLUSTER, tma_store: int = TMA_STORE, c16: int = 0,
            config: wg.WgmmaTile = CONFIG, along_n: int = ALONG_N) -> tuple[str, ...]:
    """The tile's -DHG_* options, -DHG_CLUSTER, -DHG_CLUSTER_N, -DHG_TMA_STORE and -DHG_C16 (C in
    A's 16-bit type): the source has no default."""
    if cluster not in (1, 2, 4):
        raise ValueError(f"cluster must be 1, 2 or 4 (2 x 2) CTAs, got {cluster}")
    if along_n not in (0, 1) or along_n and cluster != 2:
        raise ValueError(f"along_n is 0 or 1, and 1 needs the pair (cluster=2), got along_n={along_n}, "
                         f"cluster={cluster}")
    if tma_store not in (0, 1):
        raise ValueError(f"tma_store is 0 or 1, got {tma_store}")
    if c16 not in (0, 1):
        raise ValueError(f"c16 is 0 (fp32 C) or 1 (C in A's 16-bit type), got {c16}")
    return config.defines() + (f"-DHG_CLUSTER={cluster}", f"-DHG_CLUSTER_N={along_n}",
                               f"-DHG_TMA_STORE={tma_store}", f"-DHG_C16={c16}")


def extra_smem(tma_store: int = TMA_STORE, config=CONFIG) -> int:
    """Shared memory beside the stage ring: the epilogue's two boxes per consumer with TMA stores."""
    return tma_store * config.consumers * 2 * C_BOX_BYTES


def smem_bytes(tma_store: int = TMA_STORE, config=CONFIG) -> int:
    """Dynamic shared memory: the stages and barriers, plus extra_smem."""
    return config.smem() + extra_smem(tma_store, config)


def tile(bm: int = CONFIG.bm, bn: int = CONFIG.bn) -> wg.WgmmaTile:
    """v13's tile bm × bn (bm 64 or 128, bn 64, 128 or 256) at the shipped depth and roles,
    refused with a ValueError that says why; CONFIG by default."""
    return wg.variant(LEVEL, CONFIG, bm, bn)


def planned(config: wg.WgmmaTile = CONFIG, tma_store: int = TMA_STORE, stages=None) -> wg.WgmmaTile:
    """`config` as run() launches it: `stages` deep when given (a ValueError if it does not fit
    beside extra_smem), else as deep as fits beside it, up to wg.MAX_STAGES (the persistent grid
    has one CTA per SM): the shipped 128×256 four deep, 128×128 six deep (cuBLAS's depth for
    that tile at M = 512)."""
    extra = extra_smem(tma_store, config)
    if stages is None:
        return wg.deepest(config, extra)
    deep = dataclasses.replace(config, stages=wg.as_int(LEVEL, "stages", stages))
    bad = deep.problems() + ([] if deep.smem() + extra <= cm.SMEM_LIMIT else
                             [f"{deep.smem() + extra} bytes of shared memory > {cm.SMEM_LIMIT}"])
    if bad:
        raise ValueError(f"level {LEVEL}: no ring of {stages} stages at {config.bm}x{config.bn}: {'; '.join(bad)}")
    return deep


DEFINES = defines()

# The tiles auto may rank (numba_gemm.choose; a tile runs under auto only once its own
# calibration entry exists): 128×128, calibrated by the H200 run of v13's narrower tiles
# (docs/RESULTS.md, "v13's narrower tiles", four stages deep) and run six deep since, which
# measured 1.04-1.10× its four-deep self at M = 512 on an H100 (twenty-third and twenty-fourth
# runs): auto prices it conservatively until an H200 run measures it six deep. And three tiles
# with the pair along N, for narrow N, each the fastest of the package's kernels on an H100 at
# one of 4096×128×4096 (64×64), 8192×128×8192 and 4096×256×4096 (128×64), 8192×256×8192
# (128×128) (docs/RESULTS.md, "twenty-fifth run"; on the H200 the 128×64 one at the middle two
# and at 8192×64×8192). Uncalibrated: a fit with that H200 run moved auto's picks on its own
# measurements past the 3 % bar, so they wait for a suite run that times them with the rest.
# With the pair along M the 64-row tiles beat no level auto ran at the shapes they were built for.
TILE_CHOICES = (CONFIG, tile(128, 128),
                *((tile(bm, bn), {"along_n": 1}) for bm, bn in ((64, 64), (128, 64), (128, 128))))


def _warm_variants() -> dict:
    """What python -m numba_gemm warm compiles besides DEFINES: the 16-bit C kernel, and each
    other tile of TILE_CHOICES with either C."""
    out = {"c16": defines(c16=1)}
    for choice in TILE_CHOICES[1:]:
        t, more = choice if isinstance(choice, tuple) else (choice, {})
        for c16 in (0, 1):
            name = ",".join([f"bm={t.bm}", f"bn={t.bn}", *(f"{k}={v}" for k, v in more.items())] + ["c16"] * c16)
            out[name] = defines(c16=c16, config=planned(t), **more)
    return out


WARM_VARIANTS = _warm_variants()


def sides(cluster: int = CLUSTER, along_n: int = ALONG_N) -> tuple[int, int]:
    """(CTAs of a cluster along M, along N): the kernel's CM and CN. Those along M share B, those
    along N share A."""
    if cluster == 4:
        return 2, 2
    return (1, cluster) if along_n else (cluster, 1)


def tile_order(M: int, N: int, K: int, l2_bytes: int | None = None, config=CONFIG,
               cluster: int = CLUSTER, along_n: int = ALONG_N):
    """(super_m, super_n) in tiles, multiples of the cluster's sides: the kernel walks
    cluster-tiles (a pair of tiles, or 2 x 2)."""
    if l2_bytes is None:
        l2_bytes = cm.l2_cache_bytes()
    cm_, cn = sides(cluster, along_n)
    sm, sn = cm.choose_supertile(M, N, K, cm_ * config.bm, cn * config.bn, l2_bytes)
    return cm_ * sm, cn * sn


def pair_tiles(M: int, N: int, config=CONFIG, cluster: int = CLUSTER, along_n: int = ALONG_N) -> int:
    cm_, cn = sides(cluster, along_n)
    return cm.cdiv(M, cm_ * config.bm) * cm.cdiv(N, cn * config.bn)


def launch_config(M: int, N: int, K: int, config=CONFIG, max_clusters: int = 66,
                  cluster: int = CLUSTER, tma_store: int = TMA_STORE, along_n: int = ALONG_N):
    """(grid, block, smem): min(resident clusters, cluster-tiles) clusters of `cluster` CTAs."""
    clusters = max(1, min(max_clusters, pair_tiles(M, N, config, cluster, along_n)))
    return (cluster * clusters, 1, 1), (config.threads, 1, 1), smem_bytes(tma_store, config)


def unsupported(M: int, N: int, K: int) -> str | None:
    return wg.tma_rule(M, N, K)


def resident_clusters(fn, block, smem, cluster: int = CLUSTER) -> int:
    """How many clusters of this kernel fit on the device at once (cuOccupancyMaxActiveClusters)."""
    n = cm.resident_clusters(fn, block, smem, cluster)
    if n < 1:
        raise RuntimeError(f"no cluster of {cluster} CTAs with {smem} bytes of shared memory fits")
    return n


def c_map(C, M: int, N: int):
    """C's tensor map for the TMA-store epilogue (boxes of 64 rows × 128 bytes: 32 floats or 64
    16-bit values, SWIZZLE_128B), or None when C's base or rows are not 16-byte aligned (TMA's
    rule; the kernel then stores from registers)."""
    from ..runtime import tma

    pc, size = cm.device_ptr(C), np.dtype(C.dtype).itemsize
    if pc % 16 or N * size % 16:
        return None
    dtype = np.float32 if size == 4 else np.uint16     # only the element size matters to a store
    return tma.cached_matrix_map(dtype, pc, M, N, (64, 128 // size), kernel_inner_bytes=128)


def c_is_16bit(A, C) -> bool:
    """Whether C is in A's 16-bit type (else it must be fp32); TypeError for any other C."""
    size = np.dtype(C.dtype).itemsize
    if size == 2 and cm.element_type(C) == cm.element_type(A):
        return True
    if np.dtype(C.dtype) != np.float32:
        raise TypeError(f"level {LEVEL} writes C as float32 or as A's type, not {np.dtype(C.dtype).name}")
    return False


def run(A, B, C, alpha, beta, stream=None, cluster: int = CLUSTER, tma_store: int = TMA_STORE,
        bm: int = CONFIG.bm, bn: int = CONFIG.bn, stages=None, along_n: int = ALONG_N):
    from ..runtime import nvrtc
    from ..runtime.launch import launch_native

    config = planned(tile(bm, bn), tma_store, stages)     # before any operand is touched
    M, K = A.shape
    N = B.shape[1]
    c16 = c_is_16bit(A, C)
    d = defines(cluster, tma_store, int(c16), config, along_n)
    cm_, cn = sides(cluster, along_n)
    # with two CTAs along N each loads half of the A tile: boxes of bm / 2 rows
    args = wg.maps_and_args(LEVEL, A, B, C, alpha, beta, config, c16,
                            a_rows=config.bm // cn if cn > 1 else None)
    super_m, super_n = tile_order(M, N, K, config=config, cluster=cluster, along_n=along_n)
    # the kernel counts a super-tile in cluster-tiles
    args[-2], args[-1] = ctypes.c_int32(super_m // cm_), ctypes.c_int32(super_n // cn)
    tm_c = c_map(C, M, N) if tma_store and beta == 0 else None
    args = args[:2] + [args[0] if tm_c is None else tm_c] + args[2:] + [ctypes.c_int32(int(tm_c is not None))]
    fn = nvrtc.function(SOURCE, KERNEL_NAMES[cm.element_type(A)], defines=d)
    block, nbytes = (config.threads, 1, 1), smem_bytes(tma_store, config)
    resident = resident_clusters(fn, block, nbytes, cluster)
    grid, _, _ = launch_config(M, N, K, config, max_clusters=resident, cluster=cluster, tma_store=tma_store,
                               along_n=along_n)
    # programmatic dependent launch: in a loop the next call starts while this one finishes (the
    # kernel waits for it before its first load); 0.3-1.9 us a call on an H100 (docs/RESULTS.md)
    launch_native(fn, grid, block, nbytes, stream, args, cluster=cluster, pdl=True)
