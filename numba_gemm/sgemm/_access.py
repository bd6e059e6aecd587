"""What one warp touches, and what it costs in requests, sectors and bank conflicts.

A level's `warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY)` returns a `Step`: the `Access`es
(array, width, byte addresses of the 32 lanes) one warp of block (bx, by) makes in one step
(one k, or one phase of tile_k). It builds them with `lanes`, `global_load` and
`shared_access` from the same constants its kernel uses. The functions below classify each
access; the ledgers (numba_gemm.explain.ledgers.ledger) add them up. Pure Python, no Numba.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

WARP = 32
SEGMENT = 128   # bytes: a memory request in the seed's (and the CUDA guide's) sense
SECTOR = 32     # bytes: the unit DRAM/L2 actually move
BANKS = 32      # shared memory: 32 banks of 4 bytes
BANK_BYTES = 4
F32 = 4         # bytes per element: the SGEMM levels index float32 arrays


# ---------------------------------------------------------------------------- the request model

def _touched(addresses_bytes: Iterable[int], unit: int, width: int) -> set[int]:
    units = set()
    for a in addresses_bytes:
        a = int(a)
        if a < 0:
            raise ValueError(f"negative address {a}")
        for u in range(a // unit, (a + width - 1) // unit + 1):
            units.add(u)
    return units


def requests(addresses_bytes: Iterable[int], segment: int = SEGMENT, width: int = 4) -> int:
    """Memory requests of one warp-level access: distinct `segment`-byte blocks touched.

    `addresses_bytes` are the byte addresses of the active lanes, each accessing `width`
    bytes. A 32-lane load of 32 consecutive aligned floats is 1 request; lanes 32 floats or
    more apart are 32 requests; with segment=32 the same function counts sectors.
    """
    return len(_touched(addresses_bytes, segment, width))


def sectors(addresses_bytes: Iterable[int], width: int = 4) -> int:
    return requests(addresses_bytes, SECTOR, width)


# ---------------------------------------------------------------------------- the bank model

@dataclass(frozen=True)
class BankProfile:
    distinct: int     # distinct addresses across the warp
    ways: int         # worst bank conflict within one phase (1 = conflict-free)
    wavefronts: int   # shared-memory passes the access needs (model)


def bank_profile(addresses_bytes: Sequence[int], width: int = 4) -> BankProfile:
    """Bank-conflict model of one warp-level shared-memory access.

    The warp is served in phases of 128 bytes' worth of lanes (32 lanes for 4-byte, 16 for
    8-byte, 8 for 16-byte accesses). In a phase, lanes reading the same word share it
    (broadcast); distinct words in the same bank are serialised: `ways` is the largest
    count of distinct words in one bank. A warp whose whole footprint is one conflict-free
    128-byte pass (e.g. every lane reading the same float4) needs one wavefront.
    """
    addrs = [int(a) for a in addresses_bytes]
    if width not in (4, 8, 16):
        raise ValueError("width must be 4, 8 or 16 bytes")

    def ways_of(group):
        words = {w for a in group for w in range(a // BANK_BYTES, (a + width) // BANK_BYTES)}
        per_bank: dict[int, int] = {}
        for w in words:
            per_bank[w % BANKS] = per_bank.get(w % BANKS, 0) + 1
        return max(per_bank.values()), len(words)

    whole_ways, whole_words = ways_of(addrs)
    distinct = len(set(addrs))
    if whole_ways == 1 and whole_words <= BANKS:
        return BankProfile(distinct, 1, 1)
    per_phase = (BANKS * BANK_BYTES) // width
    phases = [addrs[i:i + per_phase] for i in range(0, len(addrs), per_phase)]
    ways = [ways_of(p)[0] for p in phases]
    return BankProfile(distinct, max(ways), sum(ways))


# ---------------------------------------------------------------------------- cost classes

def shared_kind(addresses_bytes: Sequence[int], width: int = 4) -> str:
    """The cost class of a shared load: lds_bcast, lds_free, lds_conflict{n}, lds128, ..."""
    p = bank_profile(addresses_bytes, width)
    prefix = {4: "lds", 8: "lds64", 16: "lds128"}[width]
    if p.distinct == 1:
        return f"{prefix}_bcast"
    if p.ways == 1:
        return "lds_free" if width == 4 else prefix
    return f"{prefix}_conflict{p.ways}"


def global_kind(addresses_bytes: Sequence[int], width: int = 4) -> str:
    """The cost class of a global load: ldg_bcast, ldg, ldg_x{requests}, ldg128, ..."""
    addrs = list(addresses_bytes)
    r = requests(addrs, SEGMENT, width)
    if width == 4:
        if len(set(addrs)) == 1:
            return "ldg_bcast"
        return "ldg" if r == 1 else f"ldg_x{r}"
    prefix = {8: "ldg64", 16: "ldg128"}[width]
    least = math.ceil(len(set(addrs)) * width / SEGMENT)
    return prefix if r <= least else f"{prefix}_x{r}"


# What each kind is, as explain() and bank_report() print it on every level: the facts of the
# access, not anyone's name for it. (The SGEMM seed calls lds_free a "32-way" load, meaning 32
# lanes reading 32 distinct words in 32 banks; docs/CONCEPTS.md says so once, under banks.)
KIND_NAMES = {
    "lds_bcast": "shared, broadcast (1 word for 32 lanes)",
    "lds_free": "shared, 32 distinct words in 32 banks, conflict-free",
    "lds128": "shared, 128-bit, conflict-free",
    "lds128_bcast": "shared, 128-bit broadcast",
    "ldg": "global, 32-bit, 1 request",
    "ldg_bcast": "global, 32-bit broadcast (1 sector)",
    "ldg128": "global, 128-bit, coalesced",
    "ffma": "FFMA (the FP32 pipe, for scale)",
}


def kind_name(kind: str) -> str:
    if kind in KIND_NAMES:
        return KIND_NAMES[kind]
    if kind.startswith("lds") and "_conflict" in kind:
        return f"shared, {kind.rsplit('conflict', 1)[1]}-way bank conflict"
    if kind.startswith("ldg") and "_x" in kind:
        return f"global, {kind.rsplit('_x', 1)[1]} requests per instruction"
    return kind


# ---------------------------------------------------------------------------- a level's geometry

@dataclass(frozen=True)
class Geometry:
    """A SGEMM level's launch shape, as its kernel uses it (the module's GEOMETRY)."""
    block: tuple[int, int]   # (threads_x, threads_y)
    tile_m: int              # output tile per block
    tile_n: int
    tile_k: int              # K step per phase (1: no shared-memory staging)
    thread_m: int            # outputs per thread
    thread_n: int

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1]

    @property
    def staged(self) -> bool:
        return self.tile_k > 1


# ---------------------------------------------------------------------------- one warp's step

@dataclass(frozen=True)
class Access:
    space: str            # "global" | "shared"
    op: str               # "load" | "store"
    array: str            # "A", "B", "As", "Bs"
    width: int            # bytes per lane
    addrs: tuple[int, ...]
    inner: bool = False   # in the FMA loop (vs. the tile-loading phase)

    @property
    def kind(self) -> str:
        if self.space == "shared":
            return shared_kind(self.addrs, self.width)
        return global_kind(self.addrs, self.width)


@dataclass(frozen=True)
class Step:
    fmas: int                        # FMAs per thread in this step
    accesses: tuple[Access, ...]
    what: str                        # "one k" or "one phase"


def lanes(g: Geometry, warp: int) -> list[tuple[int, int]]:
    """(tx, ty) of the 32 lanes of warp `warp` of a block (threadIdx.x varies fastest)."""
    out = []
    for lane in range(WARP):
        t = warp * WARP + lane
        out.append((t % g.block[0], t // g.block[0]))
    return out


def global_load(array: str, element_indices, width: int = F32) -> Access:
    """A warp's global load of float32 elements `element_indices` (one per lane), `width` bytes each."""
    return Access("global", "load", array, width, tuple(i * F32 for i in element_indices))


def shared_access(array: str, element_indices, width: int = F32, inner: bool = True,
                  op: str = "load", base: int = 0) -> Access:
    """A warp's shared-memory load or store; `base` is the array's byte offset in shared memory."""
    return Access("shared", op, array, width, tuple(base + i * F32 for i in element_indices), inner)
