"""read: diff native/twins/k8e.cu native/twins/k8es.cu · run: python bench.py --level k8es

k8es — k8e with its interior shared out by stream-K (k9st's kernel and plan).

k8e takes the thin border of a ragged shape out of the tiles, so its interior is whole tiles
on float4 operands; but the interior's tiles still come in waves of 264. At 777×5000×3001 it
is 6 × 39 = 234 tiles, 0.89 of a wave, so 30 of the 264 slots idle for the whole product; at
4097³ 32 × 32 = 1024 tiles, 3.88 waves. k8es runs k8e's launches unchanged (A's copy, the
strips, the K tail) but gives the interior to k9st's kernel with k9st's plan over the
interior's tiles alone (`interior_plan`): its last waves laid end to end in K tiles, an equal
share per resident CTA, a tile split between two CTAs added in CTA order by its last one.
Where the interior's tiles are whole waves the plan has no stream part and k8es is k8e.

k9st's kernel takes the tiles across N apart from N, so it covers the interior's columns
[0, N') of operands whose rows are pn floats long, and rows [0, M') through views of the first
M' rows of A′ and C′.

Ledger: k8e's bytes, k9's phase; what moves is the interior's work per slot (k9st's).
Measured: docs/RESULTS.md.
"""
import numpy as np

from . import k8e_edges as k8e
from . import k9st_streamk as k9st
from ._common import launch
from .k9st_streamk import StreamPlan, launch_stream

LEVEL = "k8es"
PARENT = "k8e"
TITLE = "k8e with its interior's last waves shared out by stream-K (k9st's kernel and plan)"
DELTA = ("k8es = k8e + the interior by k9st: its tiles past the last whole wave laid end to end in K "
         "tiles, an equal share per resident CTA, a split tile's parts added in CTA order")
DTYPES = (np.float32,)
SASS_MUST_HAVE = k9st.SASS_MUST_HAVE

TILING, GEOMETRY, BLOCK = k8e.TILING, k8e.GEOMETRY, k8e.BLOCK
TILE_M, TILE_N, TILE_K = k8e.TILE_M, k8e.TILE_N, k8e.TILE_K
THREAD_M, THREAD_N = k8e.THREAD_M, k8e.THREAD_N
THREADS = k8e.THREADS
PHASES_PER_TRIP = k8e.PHASES_PER_TRIP
CTAS_PER_SM = k9st.CTAS_PER_SM
SPLIT_IN_KERNEL = True                         # numba_gemm.choose: one launch for the interior
kernel = k9st.kernel                           # k9st's kernel with every operand as float4
# the copy, strip and tail kernels are k8e's (its twin builds them under this level's names)
KERNELS = {LEVEL: (kernel, k9st.SIGNATURE), "k8es_edge_columns": (k8e.edge_columns, k8e.EDGE_SIGNATURE),
           "k8es_tail": (k8e.k_tail, k8e.TAIL_SIGNATURE)}
HELPER_KERNELS = k8e.HELPER_KERNELS
# k8e's plan of the border, copies and operands, re-exported for the twin and the ledgers
from .k8e_edges import (bottom, buffers, copies, copies_bytes, copy_config, edge_config, edge_columns, grid,  # noqa: E402,F401
                        in_place_for, k_tail, pitch, plan, row_lengths, unsupported, warp_step)


def interior_plan(M: int, N: int, K: int, slots: int | None = None) -> tuple[int, int, StreamPlan]:
    """(M', tiles across N, k9st's plan) of the interior of an M×N×K call: the rows and columns
    of k8e's whole tiles (`plan`) on operands of pitch(N) columns, K the interior's (pitch(K)
    on copies, K4 in place)."""
    m, n = plan(M, N, K)
    return m, -(-n // TILE_N), k9st.stream_plan(m, n, K, slots)


def stream_plan(M: int, N: int, K: int, slots: int | None = None) -> StreamPlan:
    """k9st's plan of the interior on k8p's copies (what numba_gemm.choose prices)."""
    return interior_plan(M, N, pitch(K), slots)[2]


def interior(A2, B2, C2, M, N, K, alpha, beta, stream):
    """The interior (k8e.product's `inner`): k9st's kernel over its plan, or with whole waves
    k8e's own launch."""
    pk, pn = pitch(K), pitch(N)                     # K: the call's on copies, K4 in place
    m, tiles_n, p = interior_plan(M, N, pk)
    if not p.streams:
        launch(k8e.kernel, grid(M, N), BLOCK, A2.reshape(M, pk), B2.reshape(pk, pn), C2.reshape(M, pn),
               alpha, beta, stream)
        return
    launch_stream(kernel, p.grid, BLOCK, A2[:m * pk].reshape(m, pk), B2.reshape(pk, pn),
                  C2[:m * pn].reshape(m, pn), alpha, beta, stream, p, tiles_n)


def run(A, B, C, alpha, beta, stream=None):
    k8e.compute(LEVEL, A, B, C, alpha, beta, stream, interior)
