#!/usr/bin/env python3
"""Numba level vs its CUDA C twin, statically: registers, spills and the main (K) loop of
every kernel — its length, FFMA count and share, shared and global loads — side by side.
No GPU needed. Where a Numba level runs slower than its twin, this is where to look first.

    python tools/twin_census.py k5 k6 k7 k8
"""
import os
import sys

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "0")


def numba_kernels(level):
    """{name: (nvdisasm text, Census)}, compiled with the kernel's own launch bounds."""
    from numba import cuda

    from numba_gemm.explain import sass
    from numba_gemm.registry import get

    mod = get(level).module
    spec = getattr(mod, "SPECIALISATIONS", None)
    kernels = dict(spec.values()) if spec else {level: mod.kernel}
    out = {}
    for name, k in kernels.items():
        bounds = k.targetoptions.get("launch_bounds")
        ptx, _ = cuda.compile_ptx(k.py_func, mod.SIGNATURE, cc=(9, 0), launch_bounds=bounds)
        cubin, log = sass.link_ptx(ptx)
        (c,) = sass.census_cubin(cubin, level, log)
        out[name] = (sass.disassemble(cubin), c)
    return out


def row(side, name, text, c):
    from numba_gemm.measure.twins import main_loop

    loop = main_loop(text)
    ff = sum(op == "FFMA" for op in loop)
    lds = sum(op.startswith("LDS") for op in loop)
    ldg = sum(op.startswith("LDG") for op in loop)
    local = sum(op.startswith(("LDL", "STL")) for op in loop)
    share = f"{ff / len(loop):.3f}" if loop else "-"
    return (f"{name:<9} {side:<6} {c.registers:>4} {c.local_memory_ops:>5} {len(loop):>5} {ff:>5} "
            f"{share:>6} {lds:>4} {ldg:>4} {local:>4} {c.total:>6}")


def main(argv):
    from numba_gemm.measure import twins

    print("kernel    side   regs  L/S  loop  FFMA  share  LDS  LDG  L/S  total")
    for level in argv or ["k1", "k2", "k3", "k3c", "k4", "k5", "k6", "k7", "k8"]:
        numba = numba_kernels(level)
        native = twins.twin_sass(level)
        by_name = {c.kernel: c for c in twins.census(level)}
        for name, (text, c) in numba.items():
            print(row("numba", name, text, c))
            print(row("C", name, native[name], by_name[name]), flush=True)
    print("L/S: local-memory instructions (whole kernel, then in the loop); loop: instructions in "
          "the longest innermost loop (the K loop); share: FFMA / loop")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
