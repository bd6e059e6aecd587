"""CUDA C twins of the SGEMM levels: the cost of writing a kernel in Python, measured live.

For every Numba level kN there is native/twins/kN.cu with the same algorithm, geometry and
edge handling in CUDA C (the same grid and block, the same specialisations under the same
names, chosen by the same rule), compiled by NVRTC for sm_90a and launched with raw
pointers. A twin runs on the level's inputs like the level itself, so bench.py can time both
in one process and print Numba / CUDA C.

    from numba_gemm.measure import twins
    t = twins.twin("k7")
    t.run(dA, dB, dC, alpha, beta)                  # device arrays, as Level.run
    twins.time_twin("k7", 4096, 4096, 4096)         # median ms of the twin (fresh inputs)
    twins.census("k7")                              # SASS census of the twin's kernels (no GPU)
    twins.defines("k7")                             # its tile as -D options: ('-DWT_TM=128', ...)
    python tools/twin_census.py k6 k7 k8            # Numba vs CUDA C, main loop by main loop
"""
from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass
from types import ModuleType

from .. import splitk
from ..sgemm import _splitk_parts
from ..registry import get
from ..runtime import nvrtc
from ..runtime.launch import launch_native


REDUCE_SOURCE = "twins/splitk_reduce.cu"   # the split-K levels' reduction, shared by their twins
REDUCE_DEFINES = (f"-DREDUCE_BATCH={splitk.REDUCE_BATCH}",)   # partials loaded before they are added
SUM_DEFINES = (f"-DSUM_BATCH={_splitk_parts.BATCH}",)          # the same in a level's in-kernel sum


def source(level_name: str) -> str:
    """The twin's file under native/."""
    return f"twins/{level_name}.cu"


def defines(level_name: str) -> tuple[str, ...]:
    """The twin's tile as -D options, from its Numba level: a warp-tiled level's TILING (and
    _warptile's A_PAD, its launch bound, _warptile.blocks_per_sm) for warptile.cuh, else the level's GEOMETRY for tile.cuh;
    a level that reduces its slices in the kernel adds SUM_DEFINES (splitk_in_kernel.cuh).
    A twin does not compile without them (#error), so the tile it runs is the level's."""
    mod = get(level_name).module
    if hasattr(mod, "TILING"):
        from ..sgemm import _warptile

        t = mod.TILING
        values = {"WT_TM": t.tile_m, "WT_TN": t.tile_n, "WT_TK": t.tile_k, "WT_WM": t.warp_m,
                  "WT_WN": t.warp_n, "WT_LANES_N": t.lanes_n, "WT_A_PAD": _warptile.A_PAD,
                  "WT_MIN_BLOCKS": _warptile.blocks_per_sm(t)}
    else:
        g = mod.GEOMETRY
        values = {"TILE_M": g.tile_m, "TILE_N": g.tile_n, "TILE_K": g.tile_k, "THREAD_M": g.thread_m,
                  "THREAD_N": g.thread_n, "BLOCK_X": g.block[0], "BLOCK_Y": g.block[1]}
    in_kernel = SUM_DEFINES if getattr(mod, "SPLIT_IN_KERNEL", False) else ()
    return tuple(f"-D{name}={int(v)}" for name, v in values.items()) + in_kernel


def has_twin(level_name: str) -> bool:
    lv = get(level_name)
    return lv.family == "sgemm" and (nvrtc.native_dir() / source(lv.name)).is_file()


@dataclass(frozen=True)
class Twin:
    level: str
    module: ModuleType            # the Numba level: grid, BLOCK and the specialisation rule

    @property
    def source(self) -> str:
        return source(self.level)

    @property
    def defines(self) -> tuple[str, ...]:
        return defines(self.level)

    @property
    def copy_kernel(self) -> str | None:
        """The copy kernel of a level that runs on padded copies (k8p), else None."""
        return f"{self.level}_repitch" if hasattr(self.module, "copies") else None

    @property
    def edge_kernel(self) -> str | None:
        """The right strip's kernel of a level that computes its border apart (k8e), else None."""
        return f"{self.level}_edge_columns" if hasattr(self.module, "edge_columns") else None

    @property
    def tail_kernel(self) -> str | None:
        """The K tail's kernel of a level that may use B and C in place (k8e), else None."""
        return f"{self.level}_tail" if hasattr(self.module, "k_tail") else None

    @property
    def kernel_names(self) -> tuple[str, ...]:
        spec = getattr(self.module, "SPECIALISATIONS", None)
        names = tuple(name for name, _ in spec.values()) if spec else (self.level,)
        return names + tuple(k for k in (self.copy_kernel, self.edge_kernel, self.tail_kernel) if k)

    def kernel_name(self, A, B, C) -> str:
        """The kernel this call runs: the one the Numba level would pick for these operands."""
        spec = getattr(self.module, "SPECIALISATIONS", None)
        if not spec:
            return self.level
        return spec[self.module.vector_operands(A, B, C)][0]

    def run(self, A, B, C, alpha, beta, stream=None):
        """C = alpha·A@B + beta·C on validated float32 device arrays (as Level.run)."""
        M, K = A.shape
        N = B.shape[1]
        reason = self.module.unsupported(M, N, K) if hasattr(self.module, "unsupported") else None
        if reason:
            raise ValueError(f"{self.level} twin: {reason}")
        fn = nvrtc.function(self.source, self.kernel_name(A, B, C), defines=self.defines)
        if hasattr(self.module, "split_plan"):
            return self._run_split(fn, A, B, C, alpha, beta, stream)
        if hasattr(self.module, "copies"):              # k8p, k8e, k8es (whose interior streams)
            return self._run_pitched(fn, A, B, C, alpha, beta, stream)
        if hasattr(self.module, "stream_plan"):
            return self._run_stream(fn, A, B, C, alpha, beta, stream)
        args = [ctypes.c_int32(M), ctypes.c_int32(N), ctypes.c_int32(K), ctypes.c_float(alpha),
                ctypes.c_void_p(_ptr(A)), ctypes.c_void_p(_ptr(B)), ctypes.c_float(beta),
                ctypes.c_void_p(_ptr(C))]
        launch_native(fn, self.module.grid(M, N), self.module.BLOCK, 0, stream, args)

    def _run_split(self, fn, A, B, C, alpha, beta, stream):
        """A split-K level's launches (numba_gemm.sgemm._splitk_parts) in CUDA C: the level's
        split plan, the slices into C (S == 1) or into the workspace with alpha 1, beta 0,
        then the fixed-order reduction of native/twins/splitk_reduce.cu; or, for a level that
        reduces in the kernel, one launch with the workspace's partials and counters."""
        from ..runtime import workspace
        from ..sgemm import _splitk_parts

        M, K = A.shape
        N = B.shape[1]
        S, kslice = self.module.split_plan(M, N, K)
        grid = _splitk_parts.grid(self.module.grid(M, N), S)
        if getattr(self.module, "SPLIT_IN_KERNEL", False):
            P, counters = _splitk_parts.in_kernel_buffers(C, grid, M, N)
            args = [ctypes.c_int32(M), ctypes.c_int32(N), ctypes.c_int32(K), ctypes.c_int32(kslice),
                    ctypes.c_float(alpha), ctypes.c_void_p(_ptr(A)), ctypes.c_void_p(_ptr(B)),
                    ctypes.c_float(beta), ctypes.c_void_p(_ptr(C)), ctypes.c_void_p(_ptr(P)),
                    ctypes.c_void_p(_ptr(counters))]
            launch_native(fn, grid, self.module.BLOCK, 0, stream, args)
            return
        out, a, b = (C, alpha, beta) if S == 1 else (workspace.partials(C, S, M, N), 1.0, 0.0)
        args = [ctypes.c_int32(M), ctypes.c_int32(N), ctypes.c_int32(K), ctypes.c_int32(kslice),
                ctypes.c_float(a), ctypes.c_void_p(_ptr(A)), ctypes.c_void_p(_ptr(B)), ctypes.c_float(b),
                ctypes.c_void_p(_ptr(out))]
        launch_native(fn, grid, self.module.BLOCK, 0, stream, args)
        if S > 1:
            args = [ctypes.c_void_p(_ptr(out)), ctypes.c_int32(S), ctypes.c_int64(M * N),
                    ctypes.c_float(alpha), ctypes.c_float(beta), ctypes.c_void_p(_ptr(C))]
            launch_native(nvrtc.function(REDUCE_SOURCE, "splitk_reduce", defines=REDUCE_DEFINES),
                          (splitk.reduce_grid(M * N),), (splitk.REDUCE_THREADS,), 0, stream, args)

    def _run_stream(self, fn, A, B, C, alpha, beta, stream):
        """A stream-K level's launch (k9st) in CUDA C: its plan's grid, with the workspace's
        partial tiles and counters; a plan with no stream part runs the parent's twin, as the
        level runs its parent's kernel."""
        M, K = A.shape
        N = B.shape[1]
        p = self.module.stream_plan(M, N, K)
        if not p.streams:
            return twin(self.module.PARENT).run(A, B, C, alpha, beta, stream)
        P, counters = self.module.buffers(C, p)
        args = [ctypes.c_int32(M), ctypes.c_int32(N), ctypes.c_int32(K), ctypes.c_int32(self.module.grid(M, N)[0]),
                ctypes.c_int32(p.whole), ctypes.c_float(alpha), ctypes.c_void_p(_ptr(A)), ctypes.c_void_p(_ptr(B)),
                ctypes.c_float(beta), ctypes.c_void_p(_ptr(C)), ctypes.c_void_p(_ptr(P)),
                ctypes.c_void_p(_ptr(counters))]
        launch_native(fn, p.grid, self.module.BLOCK, 0, stream, args)

    def _run_pitched(self, fn, A, B, C, alpha, beta, stream):
        """k8p's and k8e's launches in CUDA C: the level's copies (its `copies` plan, its
        workspace) by the twin's copy kernel, the product on the padded operands (k8e: its
        interior, then the bottom strip by k6gv's or k6gv16's twin and the right strip), C
        written back."""
        M, K = A.shape
        N = B.shape[1]
        mod = self.module
        if self.tail_kernel and mod.in_place_for(A, B, C):
            return self._run_in_place(fn, A, B, C, alpha, beta, stream)
        pk, pn = mod.pitch(K), mod.pitch(N)
        pad = dict(zip("ABC", mod.buffers(C, M, N, K)))
        ends = {"A": (A, pad["A"]), "B": (B, pad["B"]), "C in": (C, pad["C"]), "C out": (pad["C"], C)}
        copy = nvrtc.function(self.source, self.copy_kernel, defines=self.defines)

        def launch_copy(what, rows, cols, dst_rows, dst_cols):
            src, dst = ends[what]
            args = [ctypes.c_void_p(_ptr(src)), ctypes.c_int32(rows), ctypes.c_int32(cols),
                    ctypes.c_void_p(_ptr(dst)), ctypes.c_int32(dst_rows), ctypes.c_int32(dst_cols)]
            launch_native(copy, *mod.copy_config(dst_rows, dst_cols), 0, stream, args)

        *into, out = mod.copies(M, N, K, beta)
        for c in into:
            launch_copy(*c)
        self._interior(fn, pad, M, N, pn, pk, alpha, beta, stream)
        if self.edge_kernel:
            self._run_strips(pad, M, N, K, alpha, beta, stream)
        launch_copy(*out)

    def _run_in_place(self, fn, A, B, C, alpha, beta, stream):
        """k8e's launches where B and C serve in place: A's first K4 columns copied, the product
        over K4 on B's first K4 rows and C itself (interior, strips), then the K tail into C."""
        import numpy as np

        from ..runtime import workspace

        M, K = A.shape
        N = B.shape[1]
        mod = self.module
        k4, _ = mod.row_lengths(M, N, K)
        A2 = workspace.scratch(C, f"{self.level} A", M * k4 * 4).view(np.float32)
        copy = nvrtc.function(self.source, self.copy_kernel, defines=self.defines)
        args = [ctypes.c_void_p(_ptr(A)), ctypes.c_int32(M), ctypes.c_int32(K),
                ctypes.c_void_p(_ptr(A2)), ctypes.c_int32(M), ctypes.c_int32(k4)]
        launch_native(copy, *mod.copy_config(M, k4), 0, stream, args)
        ops = {"A": A2, "B": B.reshape(K * N)[:k4 * N], "C": C.reshape(M * N)}
        self._interior(fn, ops, M, N, N, k4, alpha, beta, stream)
        self._run_strips(ops, M, N, k4, alpha, beta, stream)
        tail = nvrtc.function(self.source, self.tail_kernel, defines=self.defines)
        args = [ctypes.c_int32(M), ctypes.c_int32(N), ctypes.c_int32(K), ctypes.c_int32(k4),
                ctypes.c_float(alpha), ctypes.c_void_p(_ptr(A)), ctypes.c_void_p(_ptr(B)),
                ctypes.c_void_p(_ptr(C))]
        launch_native(tail, *mod.copy_config(M, N), 0, stream, args)

    def _interior(self, fn, ops, M, N, ld, k, alpha, beta, stream):
        """The product on the operands `ops` ({"A", "B", "C"}: k8p's copies, or k8e's A′ beside
        B and C in place; rows of k and ld floats): the twin's kernel on the level's grid, or
        where the level shares the interior out (k8es: interior_plan) its stream kernel over the
        first M' rows, with the level's workspace; with whole waves k8e's kernel, as the level."""
        mod = self.module
        ptrs = [ctypes.c_void_p(_ptr(ops[x])) for x in "ABC"]
        plan = getattr(mod, "interior_plan", None)
        m, tiles_n, p = plan(M, N, k) if plan else (M, 0, None)
        if p is None or not p.streams:
            if p is not None:
                fn = nvrtc.function(source(mod.PARENT), mod.PARENT, defines=defines(mod.PARENT))
            args = [ctypes.c_int32(M), ctypes.c_int32(ld), ctypes.c_int32(k), ctypes.c_float(alpha),
                    ptrs[0], ptrs[1], ctypes.c_float(beta), ptrs[2]]
            launch_native(fn, mod.grid(M, N), mod.BLOCK, 0, stream, args)
            return
        from ..sgemm import k9st_streamk as k9st

        P, counters = k9st.buffers(ops["C"][:m * ld], p)     # the workspace the level's launch uses
        args = [ctypes.c_int32(m), ctypes.c_int32(ld), ctypes.c_int32(k), ctypes.c_int32(tiles_n),
                ctypes.c_int32(p.whole), ctypes.c_float(alpha), ptrs[0], ptrs[1], ctypes.c_float(beta),
                ptrs[2], ctypes.c_void_p(_ptr(P)), ctypes.c_void_p(_ptr(counters))]
        launch_native(fn, p.grid, mod.BLOCK, 0, stream, args)

    def _run_strips(self, pad, M, N, K, alpha, beta, stream):
        mod = self.module
        m, n = mod.plan(M, N, K)
        pk, pn = mod.pitch(K), mod.pitch(N)
        for gv, *strip in mod.bottom(pad["A"], pad["B"], pad["C"], M, N, K):
            twin(gv.LEVEL).run(*strip, alpha, beta, stream)
        if n < pn:
            args = [ctypes.c_int32(m), ctypes.c_int32(pk), ctypes.c_int32(pn), ctypes.c_int32(n),
                    ctypes.c_float(alpha), ctypes.c_void_p(_ptr(pad["A"])), ctypes.c_void_p(_ptr(pad["B"])),
                    ctypes.c_float(beta), ctypes.c_void_p(_ptr(pad["C"]))]
            edge = nvrtc.function(self.source, self.edge_kernel, defines=self.defines)
            launch_native(edge, *mod.edge_config(M, N), 0, stream, args)


def _ptr(x) -> int:
    return int(x.__cuda_array_interface__["data"][0])


def twin(level_name: str) -> Twin:
    lv = get(level_name)
    if not has_twin(lv.name):
        raise ValueError(f"level {lv.name} has no CUDA C twin (only SGEMM levels do)")
    return Twin(lv.name, lv.module)


def census(level_name: str):
    """SASS census (numba_gemm.explain.sass.Census per kernel) of the twin, compiled by NVRTC."""
    from ..explain import sass

    src, d = source(level_name), defines(level_name)
    cubin = nvrtc.compile_variant(src, d)
    return sass.census_cubin(cubin, level_name, nvrtc.compile_log(src, defines=d))


def time_twin(level_name: str, M: int, N: int, K: int, buffers=None, reps=None,
              flush_l2: bool = False) -> float:
    """Median milliseconds of the twin on an M×N×K product (alpha 1, beta 0, like bench).

    `buffers`: (dA, dB, dC) device arrays to reuse (bench passes the level's own);
    otherwise fresh random inputs are made."""
    from .timing import bench

    t = twin(level_name)
    if buffers is None:
        import numpy as np
        from numba import cuda

        from . import check

        A, B, _ = check.random_inputs(M, N, K)
        buffers = (cuda.to_device(A), cuda.to_device(B), cuda.device_array((M, N), np.float32))
    dA, dB, dC = buffers
    return bench(lambda: t.run(dA, dB, dC, 1.0, 0.0), reps=reps, flush_l2=flush_l2).median_ms


def _loops(sass_text: str, operands: bool) -> tuple[list[str], list[tuple[int, int]]]:
    """(the function's opcodes, (start, end) of each loop in them: a label, then a backward
    branch to it)."""
    from ..explain.sass import _INSTR

    labels, ops, spans = {}, [], []
    for line in sass_text.splitlines():
        m = re.match(r"^\s*\.(L_x_\d+):", line)
        if m:
            labels[m.group(1)] = len(ops)
            continue
        m = _INSTR.match(line)
        if m:
            ops.append(line.split("*/", 1)[1].split(";")[0].strip() if operands else m.group(1))
            target = re.search(r"BRA\s.*`\(\.(L_x_\d+)\)", line)
            if target and labels.get(target.group(1), len(ops)) < len(ops):
                spans.append((labels[target.group(1)], len(ops)))
    return ops, spans


def main_loop(sass_text: str, operands: bool = False) -> list[str]:
    """Opcodes of the longest innermost loop in nvdisasm text of one function: for a GEMM kernel,
    the K loop the time goes to (k9st runs it inside a loop over segments of K). With
    `operands`, whole instructions (predicate, opcode, operands) instead."""
    ops, spans = _loops(sass_text, operands)
    inner = [(a, b) for a, b in spans
             if not any(a <= c and d <= b and (c, d) != (a, b) for c, d in spans)]
    a, b = max(inner, key=lambda s: s[1] - s[0], default=(0, 0))
    return ops[a:b]


def twin_sass(level_name: str) -> dict[str, str]:
    """{kernel name: nvdisasm text} of the twin."""
    from ..explain.sass import disassemble, split_functions

    return split_functions(disassemble(nvrtc.compile_variant(source(level_name), defines(level_name))))
