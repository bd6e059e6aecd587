"""The three ledgers: why each level of the ladder is faster than the one it was derived from.

A roofline alone ("bytes ledger") explains few of the SGEMM steps: on the seed's 4090 k2 ran
at twenty times its DRAM roofline because its bytes come from L1/L2, and k3 raised the
arithmetic intensity 32× for a 1.16× gain. Two more ledgers, both computed from each level's own index mapping
(its `warp_step`), explain what the roofline cannot:

* **bytes**    FLOPs, DRAM bytes under the level's tiling (each block reads its A and B panels
               from DRAM once, C is written once), intensity, roofline time on a card,
               attainment of a measured time.
* **requests** global-memory requests per warp-level load and per FMA: the distinct 128-byte
               segments (and 32-byte sectors) that the 32 lanes of one warp touch. k1: 32 + 1
               = 33 per FMA.
* **cycles**   shared and global loads per FMA, split by kind (broadcast, conflict-free,
               n-way bank conflict, 128-bit), each priced in SM cycles per warp-level
               instruction at full occupancy: the seed's prices on the RTX 4090, on the H200
               those `python -m numba_gemm.measure.microbench` measured (numba_gemm/data/). A
               global load split over r 128-byte lines (ragged rows: K or N not a multiple
               of 32 floats) is priced from the card's measured prices by lines, so every
               size is priced on the H200.

The unit of the cycle ledger is the SM's throughput: a cost c means one SM retires one such
warp instruction every c cycles when it is full of warps. Hence the time it predicts,
t = (M·N·K / 32 warp-FMAs) × cycles per FMA / (SMs × clock); for the seed's k2 on the 4090
this gives 25.8 ms against 25.815 ms measured.

    card.py    the cards, from numba_gemm/data/*.json
    ledger.py  the ledgers of one level, read from its module's hooks
    report.py  explain, markdown_tables, the 4096 / 4097 stride experiment

One warp's addresses (Geometry, Access, Step, lanes, global_load, shared_access) and the
request / sector / bank models that classify them are numba_gemm.sgemm._access, what the SGEMM
levels write their warp_step in; every name is importable from here too. Waves is
numba_gemm.choose's (auto's waves against the launch bounds), waves() prices it on a card.

Plain Python arithmetic: importing this package imports neither Numba nor a level.
"""
from ...sgemm._access import (BANK_BYTES, BANKS, F32, KIND_NAMES, SECTOR, SEGMENT, WARP, Access,
                              BankProfile, Geometry, Step, bank_profile, global_kind, global_load,
                              kind_name, lanes, requests, sectors, shared_access, shared_kind)
from .card import CARDS_JSON, DATA_DIR, H200_COSTS, PRICE_FALLBACK, RTX4090, RTX5080, Card, card, h200, load
from .ledger import (RASTERS, BytesLedger, CycleLedger, HTile, L2Ledger, RequestLedger, Waves, bytes_ledger,
                     cycle_ledger, geometry, htile, l2_ledger, level_of, predicted_speedup,
                     request_ledger, tile_bytes, warp_steps, waves)
from .report import explain, markdown_tables, wave_line, stride_experiment, stride_view, supertile_comparison

__all__ = [
    "BANK_BYTES", "BANKS", "F32", "KIND_NAMES", "SECTOR", "SEGMENT", "WARP", "Access", "BankProfile",
    "Geometry", "Step", "bank_profile", "global_kind", "global_load", "kind_name", "lanes", "requests",
    "sectors", "shared_access", "shared_kind",
    "CARDS_JSON", "DATA_DIR", "H200_COSTS", "PRICE_FALLBACK", "RTX4090", "RTX5080", "Card", "card", "h200", "load",
    "RASTERS", "BytesLedger", "CycleLedger", "HTile", "L2Ledger", "RequestLedger", "bytes_ledger",
    "cycle_ledger", "geometry", "htile", "l2_ledger", "level_of", "predicted_speedup", "request_ledger",
    "tile_bytes", "warp_steps", "Waves", "waves", "wave_line",
    "explain", "markdown_tables", "stride_experiment", "stride_view", "supertile_comparison",
]
