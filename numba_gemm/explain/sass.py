"""Static SASS census: what each level's kernel compiles to on sm_90, without a GPU.

    Numba level:  compile_ptx(py_func, SIGNATURE, cc=(9, 0)) -> nvJitLink (cuda.core.Linker) -> cubin
    native level: numba_gemm.runtime.nvrtc.compile_variant(SOURCE, DEFINES) -> cubin (sm_90a)
    cubin -> nvdisasm -> count instructions by opcode class; registers and static shared
    memory come from the cubin's ELF section headers, spill bytes per function from the
    linker's or NVRTC's log (NVRTC's is cached on disk with the cubin).

One row per kernel entry point: `v8_f16`, `v8_bf16` for a native level (its KERNEL_NAMES),
`v8py_f16`, `v8py_f16_general`, ... for a Numba level's specialisations. A native entry holds
every path it picks between at run time, so its static count can be a multiple of a Numba
specialisation's: v8_f16 holds both of v8's block-tile instances (FAST, every operand by
cp.async, and the general one), each with its own epilogue, where v8py compiles them as two
kernels (v8py_f16 and v8py_f16_general).

This is the seed's check ("did float4 really become 128-bit?") made routine: a level's
SASS_MUST_HAVE names the instructions it exists for, and `missing(level, kernels)` says which
of them a census did not find.
Counts are static (instructions in the binary, not executed): compare levels with the same
unrolling, as the seed does for K5/K6 (both 1056 FFMA).

A Numba level with several compiled specialisations lists them in `KERNELS = {name:
(kernel, signature)}`; otherwise its `kernel` and `SIGNATURE` are used. A kernel given as its
dispatcher is compiled with the launch bounds it was jitted with (they cap its registers, as
they do at run time); a bare Python function without.

Numba picks the real compiler or the CUDA simulator once, at import. When this process runs
the simulator (CI without a GPU), the Numba levels are compiled in a child process with the
simulator off; compilation needs no GPU, only the NVVM and nvJitLink libraries. The child
processes, the per-level disk cache and the progress lines are numba_gemm.explain.census_cache.

    python -m numba_gemm.explain.sass k5 k6        # print the census table
"""
from __future__ import annotations

import functools
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field

from . import census_cache

ARCH = "sm_90"

# Columns of the table: normalised opcode classes, in reading order; each is shown when some
# kernel of the table has it. Hopper's (HGMMA .. UTMALDG.MULTICAST) are what v11+ exist for.
COLUMNS = (
    "FFMA", "HMMA", "HGMMA", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR",
    "LDG.E", "LDG.E.64", "LDG.E.128", "LDS", "LDS.64", "LDS.128", "LDSM",
    "STS", "STS.64", "STS.128", "STG.E", "STG.E.64", "STG.E.128",
    "LDGSTS", "UTMALDG", "UTMALDG.MULTICAST", "SYNCS", "USETMAXREG.TRY_ALLOC", "USETMAXREG.DEALLOC",
    "BAR", "LDL", "STL",
)

# Memory opcodes whose width modifier is kept; every other modifier (.E for 64-bit addresses,
# .CONSTANT for the read-only path, .LTC128B / .EF / .EL cache hints, .STRONG.GPU ...) is
# dropped, so LDG.E.128.CONSTANT and LDG.E.LTC128B.128 both count as LDG.E.128.
_WIDTHS = ("U8", "S8", "U16", "S16", "64", "128")
_WIDTH_OPS = {"LDG": "LDG.E", "STG": "STG.E", "LDS": "LDS", "STS": "STS", "LDL": "LDL", "STL": "STL"}


class CensusUnavailable(RuntimeError):
    """The census cannot be taken here (a compiler piece is missing); the message says which."""


@dataclass
class Census:
    level: str
    kernel: str
    opcodes: dict = field(default_factory=dict)   # full opcode (modifiers kept) -> count
    registers: int = 0                             # per thread
    shared_bytes: int = 0                          # static shared memory per block
    spill_stores: int | None = None                # bytes, from the linker log (None: unknown)
    spill_loads: int | None = None
    stack_bytes: int | None = None
    launch_bounds: list | None = None              # a Numba kernel's (threads, blocks per SM)
    sass: str = field(default="", repr=False, compare=False)   # the kernel's disassembly

    @property
    def total(self) -> int:
        return sum(self.opcodes.values())

    @property
    def classes(self) -> Counter:
        """Counts by normalised opcode class (the table's columns)."""
        out = Counter()
        for op, n in self.opcodes.items():
            out[normalise(op)] += n
        return out

    def count(self, prefix: str) -> int:
        """Instructions whose opcode is `prefix` or starts with `prefix` + "." (raw or normalised).

        "LDS" counts LDS, LDS.64, LDS.128 but not LDSM; "LDG.E.128" counts LDG.E.128.CONSTANT.
        """
        def match(op):
            return op == prefix or op.startswith(prefix + ".")

        return sum(n for op, n in self.opcodes.items() if match(op) or match(normalise(op)))

    def has(self, prefix: str) -> bool:
        return self.count(prefix) > 0

    @property
    def local_memory_ops(self) -> int:
        return self.count("LDL") + self.count("STL")


def normalise(opcode: str) -> str:
    """Opcode class: LDG.E.128.CONSTANT -> LDG.E.128, BAR.SYNC.DEFER_BLOCKING -> BAR, HMMA.16816.F32 -> HMMA,
    HGMMA.64x128x16.F32 -> HGMMA; WARPGROUP and USETMAXREG keep what they do (WARPGROUP.DEPBAR.LE ->
    WARPGROUP.DEPBAR, USETMAXREG.TRY_ALLOC.CTAPOOL -> USETMAXREG.TRY_ALLOC); a TMA load keeps
    whether it multicasts to the cluster (UTMALDG.2D -> UTMALDG, UTMALDG.2D.MULTICAST ->
    UTMALDG.MULTICAST)."""
    parts = opcode.split(".")
    base = parts[0]
    if base in _WIDTH_OPS:
        widths = [p for p in parts[1:] if p in _WIDTHS]
        return _WIDTH_OPS[base] + ("." + widths[-1] if widths else "")
    if base.startswith("SYNCS"):
        return "SYNCS"
    if base in ("WARPGROUP", "USETMAXREG"):
        return ".".join(parts[:2])
    if base == "UTMALDG" and "MULTICAST" in parts:
        return "UTMALDG.MULTICAST"
    return base


# ---------------------------------------------------------------------------------------
# Tools

def find_nvdisasm() -> str:
    from ..runtime.nvrtc import nvdisasm_path

    path = nvdisasm_path()
    if not path:
        raise CensusUnavailable(
            "nvdisasm not found: install the nvidia-cuda-nvdisasm wheel "
            "(pip install nvidia-cuda-nvdisasm) or put a CUDA toolkit's bin/ on PATH"
        )
    return path


def link_ptx(ptx: str | bytes, arch: str = ARCH) -> tuple[bytes, str]:
    """PTX -> (cubin, ptxas info log) with nvJitLink through cuda.core."""
    from cuda.core import Linker, LinkerOptions, ObjectCode

    if isinstance(ptx, str):
        ptx = ptx.encode()
    linker = Linker(ObjectCode.from_ptx(ptx), options=LinkerOptions(arch=arch, verbose=True))
    try:
        cubin = bytes(linker.link("cubin").code)
        log = linker.get_info_log() or ""
    finally:
        linker.close()
    return cubin, log


def disassemble(cubin: bytes) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        out = subprocess.run([find_nvdisasm(), "-c", path], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"nvdisasm failed: {out.stderr.strip()}")
    return out.stdout


# ---------------------------------------------------------------------------------------
# Parsers

# an opcode may hold lower case: HGMMA.64x128x16.F32 (the wgmma shape)
_INSTR = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Za-z0-9_.]*)")


def count_opcodes(sass: str) -> Counter:
    """Full opcodes (modifiers kept, predicate dropped) of every instruction in nvdisasm text."""
    return Counter(m.group(1) for m in map(_INSTR.match, sass.splitlines()) if m)


def _elf(cubin: bytes):
    """(section headers, section names, symbol names) of a 64-bit little-endian ELF (a cubin).

    A header is (type, offset, size, link, info)."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        raise ValueError("not a 64-bit ELF cubin")
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    raw = [struct.unpack_from("<IIQQQQII", cubin, shoff + i * shentsize) for i in range(shnum)]
    headers = [(typ, off, size, link, info) for _n, typ, _f, _a, off, size, link, info in raw]

    def string(table_offset, i):
        start = table_offset + i
        return cubin[start:cubin.index(b"\0", start)].decode()

    names = [string(headers[shstrndx][1], r[0]) for r in raw]
    symbols = []
    for typ, off, size, link, _info in headers:
        if typ == 2:  # SHT_SYMTAB: 24-byte entries, names in the linked string table
            symbols = [string(headers[link][1], struct.unpack_from("<I", cubin, off + 24 * j)[0])
                       for j in range(size // 24)]
    return headers, names, symbols


def elf_sections(cubin: bytes) -> dict[str, tuple[int, int]]:
    """{section name: (size, sh_info)}."""
    headers, names, _ = _elf(cubin)
    return {n: (h[2], h[4]) for n, h in zip(names, headers)}


def _nv_info(cubin: bytes, offset: int, size: int):
    """Entries (attribute, payload bytes) of an .nv.info section (EIATTR records)."""
    end, p = offset + size, offset
    while p + 2 <= end:
        fmt, attr = cubin[p], cubin[p + 1]
        if fmt == 4:          # EIFMT_SVAL: u16 length + payload
            length, = struct.unpack_from("<H", cubin, p + 2)
            yield attr, cubin[p + 4:p + 4 + length]
            p += 4 + length
        elif fmt in (2, 3):   # EIFMT_BVAL / EIFMT_HVAL: 2 bytes inline
            yield attr, cubin[p + 2:p + 4]
            p += 4
        else:                 # EIFMT_NVAL
            p += 2


EIATTR_FRAME_SIZE = 0x11
EIATTR_REGCOUNT = 0x2F


def kernel_resources(cubin: bytes) -> dict[str, dict]:
    """{function symbol: {"registers", "shared_bytes", "frame_bytes"}} from the ELF.

    The register count is the EIATTR_REGCOUNT record (symbol index, count) of the `.nv.info`
    section (older cubins kept it in the top byte of the `.text.<name>` sh_info instead);
    static shared memory is the size of `.nv.shared.<name>`, which on sm_90 includes the 1 KB
    per block the system reserves (ptxas -v reports 20480 bytes for the seed's K6, the
    section is 21504: the footprint a block really takes out of the SM's shared memory).
    """
    headers, names, symbols = _elf(cubin)
    by_symbol = {}
    for (typ, off, size, _link, _info), name in zip(headers, names):
        if name == ".nv.info":
            for attr, data in _nv_info(cubin, off, size):
                if attr in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE) and len(data) >= 8:
                    sym, value = struct.unpack_from("<II", data)
                    by_symbol.setdefault(sym, {})[attr] = value
    sizes = {n: h[2] for n, h in zip(names, headers)}
    out = {}
    for (_typ, _off, _size, _link, info), sec in zip(headers, names):
        if not sec.startswith(".text."):
            continue
        name = sec[len(".text."):]
        attrs = by_symbol.get(info & 0xFFFFFF, {})
        out[name] = {
            "registers": attrs.get(EIATTR_REGCOUNT, info >> 24),
            "shared_bytes": sizes.get(".nv.shared." + name, 0),
            "frame_bytes": attrs.get(EIATTR_FRAME_SIZE),
        }
    return out


def split_functions(sass: str) -> dict[str, str]:
    """nvdisasm text split into {function name: its code}."""
    parts = re.split(r"^\s*\.section\s+\.text\.([^,\s]+)\s*,.*$", sass, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


_SPILL = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)


def spill_info(log: str) -> tuple[int, int, int] | None:
    """(stack frame, spill store, spill load) bytes summed over a ptxas info log; None if absent."""
    found = _SPILL.findall(log or "")
    if not found:
        return None
    return tuple(sum(int(f[i]) for f in found) for i in range(3))


_FUNCTION_SPILL = re.compile(r"Function properties for (\S+)\s*\n[^\n]*?" + _SPILL.pattern)


def spills_by_function(log: str) -> dict[str, tuple[int, int, int]]:
    """{function: (stack frame, spill store, spill load) bytes} from a ptxas info log, which
    reports each function of a module separately (a native level's cubin holds several)."""
    return {m.group(1): tuple(int(m.group(i)) for i in (2, 3, 4))
            for m in _FUNCTION_SPILL.finditer(log or "")}


# ---------------------------------------------------------------------------------------
# Census

def census_cubin(cubin: bytes, level: str, log: str | None = None, names=None) -> list[Census]:
    """One Census per function in the cubin; `names` maps symbol -> display name.

    Spill bytes per function come from the ptxas log; without a log entry for a function, a
    stack frame of 0 bytes (the cubin's EIATTR_FRAME_SIZE) means 0 spills (spilled registers
    live in the stack frame); a larger frame may be local arrays, so spills stay unknown."""
    functions = split_functions(disassemble(cubin))
    res = kernel_resources(cubin)
    by_function = spills_by_function(log)
    whole = spill_info(log)
    out = []
    for symbol, code in functions.items():
        r = res.get(symbol, {})
        spills = by_function.get(symbol)
        if spills is None and len(functions) == 1:
            spills = whole                  # a one-kernel log that names it differently
        if spills is None and r.get("frame_bytes") == 0:
            spills = (0, 0, 0)
        stack = spills[0] if spills else r.get("frame_bytes")
        out.append(Census(
            level=level,
            kernel=(names or {}).get(symbol, symbol),
            opcodes=dict(sorted(count_opcodes(code).items())),
            registers=r.get("registers", 0),
            shared_bytes=r.get("shared_bytes", 0),
            stack_bytes=stack,
            spill_stores=spills[1] if spills else None,
            spill_loads=spills[2] if spills else None,
            sass=code,
        ))
    return out


def census_numba(pyfunc, signature, level: str, kernel: str, launch_bounds=None,
                 arch: str = ARCH) -> Census:
    """arch "sm_90a": the arch-specific target, which wgmma needs (a level's ARCH)."""
    from numba import cuda

    if cuda.config.ENABLE_CUDASIM:
        raise CensusUnavailable("the CUDA simulator is on in this process: use census_level()")
    cc = (9, 0, "a") if arch.endswith("a") else (9, 0)
    ptx, _ = cuda.compile_ptx(pyfunc, signature, cc=cc, launch_bounds=launch_bounds)
    cubin, log = link_ptx(ptx, arch)
    (census,) = census_cubin(cubin, level, log)   # Numba emits one entry per compilation
    census.kernel = kernel
    census.launch_bounds = list(launch_bounds) if launch_bounds else None
    return census


def numba_kernels(module) -> dict:
    """{name: (py_func, signature, launch_bounds)} of a Numba level's compiled specialisations."""
    kernels = getattr(module, "KERNELS", None) or {module.LEVEL: (module.kernel, module.SIGNATURE)}
    return {name: (getattr(k, "py_func", k), sig, getattr(k, "targetoptions", {}).get("launch_bounds"))
            for name, (k, sig) in kernels.items()}


def _census_native(level) -> list[Census]:
    try:
        from ..runtime import nvrtc
    except ImportError as e:
        raise CensusUnavailable(
            f"native level {level.name}: numba_gemm.runtime.nvrtc is not available ({e})"
        ) from None
    # the shipped tile: a level whose tile is not its source's default names the -D options.
    # One row per entry point, named level_variant (v8_f16, v8_bf16) as the Numba levels'
    # specialisations are (v8py_f16); the log is the one cached with the cubin.
    module = level.module
    cubin = nvrtc.compile_variant(module.SOURCE, module.DEFINES)
    log = nvrtc.compile_log(module.SOURCE, defines=module.DEFINES)
    names = {symbol: f"{level.name}_{variant}"
             for variant, symbol in getattr(module, "KERNEL_NAMES", {}).items()}
    order = list(names.values())
    return sorted(census_cubin(cubin, level.name, log, names=names),
                  key=lambda c: order.index(c.kernel) if c.kernel in order else len(order))


def _simulating() -> bool:
    if "numba" in sys.modules:
        from numba import cuda

        return bool(cuda.config.ENABLE_CUDASIM)
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def _census_numba_kernel(level: str, kernel: str) -> Census:
    from ..registry import get

    module = get(level).module
    f, sig, bounds = numba_kernels(module)[kernel]
    return census_numba(f, sig, level, kernel, bounds, getattr(module, "ARCH", ARCH))


@functools.lru_cache(maxsize=None)
def _census_numba_level(name: str) -> tuple:
    from ..registry import get

    return tuple(_census_numba_kernel(name, k) for k in numba_kernels(get(name).module))


_CHILD_CACHE: dict[str, list[Census]] = {}


def _cached(level) -> list[Census] | None:
    data = census_cache.load(level)
    try:
        return None if data is None else [Census(**c) for c in data]
    except TypeError:    # written by another version of Census: taken again
        return None


def census_levels(levels) -> dict[str, list[Census]]:
    """census_levels_uncached through the per-level disk cache (census_cache.cache_path). A level
    another process is taking is waited for and read from the cache, not compiled twice."""
    out = _from_cache(levels)
    todo = [lv for lv in levels if lv.name not in out]
    if todo:
        with census_cache.one_taker():
            out.update(_from_cache(todo))
            todo = [lv for lv in todo if lv.name not in out]
            fresh = census_levels_uncached(todo) if todo else {}
            for lv in todo:
                if not isinstance(fresh[lv.name], Exception):
                    census_cache.store(lv, [asdict(c) for c in fresh[lv.name]])
        out.update(fresh)
    return {lv.name: out[lv.name] for lv in levels}


def _from_cache(levels) -> dict[str, list[Census]]:
    out = {}
    for lv in levels:
        hit = _cached(lv)
        if hit is not None:
            census_cache.progress(f"{lv.name}: from the cache")
            out[lv.name] = hit
    return out


def census_levels_uncached(levels) -> dict[str, list[Census]]:
    """Census of several levels ({name: [Census per kernel]}); the Numba levels in parallel child
    processes (census_cache.in_children) under the simulator or when there are several.

    Native levels raise CensusUnavailable only when asked for alone (census_level); here a
    native level that cannot be compiled maps to the exception instance instead of a list.
    """
    out = {}
    numba = {lv.name: list(numba_kernels(lv.module)) for lv in levels if not lv.native}
    # children: with the simulator on they are the only way to compile; on a GPU, with several
    # kernels to take, they compile in parallel (one kernel alone is faster in this process)
    if numba and (_simulating() or sum(map(len, numba.values())) > 1):
        missing = [n for n in numba if n not in _CHILD_CACHE]
        if missing:
            got = census_cache.in_children([f"{n}:{k}" for n in missing for k in numba[n]])
            _CHILD_CACHE.update({n: [Census(**got[f"{n}:{k}"]) for k in numba[n]] for n in missing})
        numba_results = {n: _CHILD_CACHE[n] for n in numba}
    else:
        numba_results = {n: census_cache.timed(n, lambda: list(_census_numba_level(n))) for n in numba}
    for lv in levels:
        if lv.native:
            try:
                out[lv.name] = census_cache.timed(lv.name, lambda: _census_native(lv))
            except CensusUnavailable as e:
                out[lv.name] = e
        else:
            out[lv.name] = numba_results[lv.name]
    return out


def kernel_censuses(*names: str) -> dict[str, Census]:
    """{kernel: Census} of every kernel of the named levels, through the disk cache (a test or
    tool that reads a kernel's SASS shares the one compile with every other reader)."""
    from ..registry import get

    levels = [get(n) for n in names]
    out = {}
    for name, got in census_levels(levels).items():
        if isinstance(got, Exception):
            raise got
        out.update({c.kernel: c for c in got})
    return out


def missing(level, kernels) -> list[str]:
    """The level's SASS_MUST_HAVE instructions that none of its kernels' censuses contains."""
    return [p for p in level.sass_must_have if not any(c.has(p) for c in kernels)]


def census_level(level) -> list[Census]:
    """Census of every kernel of one level (a registry Level record or a level name)."""
    if isinstance(level, str):
        from ..registry import get

        level = get(level)
    result = census_levels([level])[level.name]
    if isinstance(result, Exception):
        raise result
    return result


# ---------------------------------------------------------------------------------------
# Table

def format_table(censuses, must_have=()) -> str:
    """One row per kernel, one column per opcode class present (COLUMNS, then the classes of
    `must_have` that COLUMNS lacks: the instructions the shown levels exist for), plus
    registers/shared/spills/total; what no column holds is counted under "other". A kernel
    whose name does not start with its level's is shown as level:kernel."""
    censuses = list(censuses)
    classes = [c.classes for c in censuses]
    present = {k for cl in classes for k, v in cl.items() if v}
    wanted = list(COLUMNS) + [k for k in dict.fromkeys(map(normalise, must_have)) if k not in COLUMNS]
    cols = [c for c in wanted if c in present]
    header = ["kernel", *cols, "other", "TOTAL", "regs", "smem B", "spill B"]
    rows = []
    for c, cl in zip(censuses, classes):
        other = c.total - sum(cl[k] for k in cols)
        spill = "?" if c.spill_stores is None else str(c.spill_stores + c.spill_loads)
        label = c.kernel if c.kernel.startswith(c.level) else f"{c.level}:{c.kernel}"   # whose kernel
        rows.append([label, *(str(cl[k]) if cl[k] else "-" for k in cols), str(other),
                     str(c.total), str(c.registers), str(c.shared_bytes), spill])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(r, widths)))
             for r in [header, *rows]]
    return "\n".join(lines)


def census_table(levels) -> str:
    """format_table of every kernel of `levels` (through the cache); a level whose census cannot
    be taken here is named on stderr and left out."""
    levels = list(levels)
    rows = []
    for name, r in census_levels(levels).items():
        if isinstance(r, Exception):
            print(f"{name}: skipped: {r}", file=sys.stderr)
        else:
            rows.extend(r)
    return format_table(rows, [p for lv in levels for p in lv.sass_must_have])


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("levels", nargs="*", help="level names (default: all)")
    p.add_argument("--json", action="store_true", help="print the censuses as JSON")
    p.add_argument("--sass", action="store_true", help="print each kernel's whole SASS (nvdisasm)")
    p.add_argument("--kernels", action="store_true",
                   help="the arguments are Numba kernels as LEVEL:KERNEL: print their censuses as JSON, "
                        "compiled in this process, one after another, without the disk cache")
    args = p.parse_args(argv)
    from ..registry import get, registry

    if args.kernels:
        out = {}
        for spec in args.levels:
            level, kernel = spec.split(":", 1)
            out[spec] = asdict(census_cache.timed(f"{level} {kernel}", lambda: _census_numba_kernel(level, kernel)))
        print(json.dumps(out))
        return 0
    levels = [get(n) for n in args.levels] if args.levels else list(registry().values())
    if args.sass:
        for name, r in census_levels(levels).items():
            for c in ([] if isinstance(r, Exception) else r):
                print(f"// ===== {name}: {c.kernel}\n{c.sass}")
    elif args.json:
        print(json.dumps({n: [asdict(c) for c in r] for n, r in census_levels(levels).items()
                          if not isinstance(r, Exception)}))
    else:
        print(census_table(levels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
