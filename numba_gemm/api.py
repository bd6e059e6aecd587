"""gemm() and plan(): C = alpha·A@B + beta·C with one level of the ladder, from any framework.

One pipeline serves both (bench.py --overhead measures the host cost of each stage).
`prepare()` checks level, alpha and beta, reads each operand once into a record
(numba_gemm.runtime.operands: pointer, shape, strides, dtype incl. bfloat16, device, owning library),
validates the records, chooses the level, and for device operands makes C when none is given
and records the launches the level's run() makes (numba_gemm.runtime.launch). What it returns holds a
`Submission`: the device, the recorded launches and the inputs' producers. Submitting picks the
stream (`stream=` if given, else the one the inputs' library considers current: torch's or
CuPy's current stream, Numba's default stream otherwise), checks CUDA graph capture, waits with
an event for inputs produced on other streams, and launches. A Plan holds one prepared call;
gemm() caches recorded launches by everything validation and run() read (level, alpha, beta
and each record's pointer, shape, strides, dtype, device), and, for torch CUDA tensors with C
given, keeps the Submission under a key made of the tensors' own fields (those the records
would hold), so that a repeated call is one lookup and the launches. Each cache keeps at most
512 calls and 1 GiB of the workspaces their launches hold (numba_gemm.runtime.launch.Calls).

CUDA graph capture: the kernel goes to the stream in use; when that stream is capturing, the
launch is captured (replaying the graph recomputes C from A and B as they are then). A call
that would run eagerly while the inputs' library is capturing on another stream is refused.
Warm a level up (one call outside the capture) before capturing: its first call compiles
and loads the kernel, which a capture does not allow.

level="auto" (the default): numba_gemm.choose ranks the levels that take the dtype and serve
this shape on this device by predicted time (calibrated levels first, numba_gemm/data/
h200_auto.json); the first that accepts these operands runs (the TMA levels v10+ also need
16-byte aligned bases at run time: when they refuse, the next runs). The native levels need a
GPU of the architecture they are compiled for (sm_90a); a level module can opt out with
`AUTO = False`. In the simulator (no GPU) only the Numba levels run: when auto's ranking holds
none for the dtype (float16/bfloat16), the Numba levels that take it and serve the shape,
AUTO = False included (v8py, v11py), ranked the same way. They take seconds even at tiny
shapes (one Python thread per GPU thread).
"""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from . import registry as _levels
from .runtime import driver, gpu, launch, operands
from .runtime.gpu import NoGPUError
from .runtime.operands import BFLOAT16

AUTO = "auto"
SIM_WARN_FLOPS = 2 * 64**3 * 8   # above this the simulator takes minutes


def transfer_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype an array travels to the device as: Numba has no bfloat16, so bf16 goes as its
    uint16 bit pattern (the native levels read the bits)."""
    return np.dtype(np.uint16) if BFLOAT16 is not None and dtype == BFLOAT16 else np.dtype(dtype)


# ---------------------------------------------------------------------------- arguments

def resolve_level(level):
    """A Level, or None for "auto". TypeError/ValueError name the argument."""
    if not isinstance(level, str):
        raise TypeError(f"level must be a level name such as 'k6' or 'v10', or 'auto'; got {level!r}")
    if level.lower() == AUTO:
        return None
    return _levels.get(level)


_F32_MAX = float(np.finfo(np.float32).max)


def real_scalar(x, name: str) -> float:
    """x as a float: a finite real number that fits float32 (the kernels' alpha and beta)."""
    if type(x) is not float:
        if isinstance(x, bool) or not isinstance(x, numbers.Real):
            raise TypeError(f"{name} must be a real number, got {x!r} of type {type(x).__name__}")
        x = float(x)
    if not -_F32_MAX <= x <= _F32_MAX:          # NaN fails too
        raise ValueError(f"{name} must be finite and fit in float32, got {x}")
    return x


_mode = None


def mode() -> str:
    """'gpu' or 'simulator'; NoGPUError when neither is possible."""
    global _mode
    if _mode is not None:
        return _mode
    if gpu.simulating():
        m = "simulator"
    elif gpu.has_gpu():
        m = "gpu"
    elif gpu.cuda_target_chosen():
        raise NoGPUError(
            "numba_gemm: no CUDA GPU found, and numba.cuda is already imported without the "
            "simulator, so this process cannot switch to it. The Numba levels (k*, v8py, v11py) run in "
            "Numba's CUDA simulator when it is on before numba.cuda is imported: run with "
            "NUMBA_ENABLE_CUDASIM=1 (e.g. NUMBA_ENABLE_CUDASIM=1 python script.py), or call "
            "numba_gemm.use_simulator_if_no_gpu() before anything imports numba.cuda. "
            "The native levels (the other v*) need a GPU."
        )
    else:
        raise NoGPUError(
            "numba_gemm: no CUDA GPU found. The Numba levels (k*, v8py, v11py) can run in Numba's CUDA "
            "simulator: call numba_gemm.use_simulator_if_no_gpu() first, or set "
            "NUMBA_ENABLE_CUDASIM=1 before numba.cuda is imported (e.g. NUMBA_ENABLE_CUDASIM=1 "
            "python script.py; bench.py does it by itself). The native levels (the other v*) need a GPU."
        )
    if gpu.cuda_target_chosen():    # the choice is final once numba.cuda is imported
        _mode = m
    return m


# ---------------------------------------------------------------------------- validation

def _overlap(x, y) -> bool:
    """Whether two 2-D C-contiguous records in one memory (a device's, or the host's) share
    bytes. Host operands too: their copies would make the result right, but the rule is the
    same for every library (and a C-contiguous array spans one interval, so this is exact)."""
    x_end = x.ptr + x.shape[0] * x.shape[1] * x.dtype.itemsize
    y_end = y.ptr + y.shape[0] * y.shape[1] * y.dtype.itemsize
    return x.ptr < y_end and y.ptr < x_end


def validate(a, b, c, beta, level=None, out=None):
    """(M, N, K) of records a, b, c (c may be None: then `out`, the dtype C will be made with,
    default float32); raises TypeError/ValueError on any problem, including a shape or a C dtype
    `level` cannot serve (level None, "auto": any float16/bfloat16/float32)."""
    for r in (b, c):
        if r is None:
            continue
        if r.on_device != a.on_device:
            raise TypeError("A, B and C must all be host (NumPy) arrays or all be device arrays, not a mix")
        if r.device != a.device:
            where = ", ".join(f"{n} on GPU {r.device}" for n, r in zip("ABC", (a, b, c)) if r is not None)
            raise ValueError(f"A, B and C must be on one GPU; got {where}")
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise ValueError(f"A and B must be 2-D matrices, got shapes {a.shape} and {b.shape}")
    (M, K), (K2, N) = a.shape, b.shape
    if K != K2:
        raise ValueError(f"inner dimensions differ: A is {M}x{K}, B is {K2}x{N}")
    if M < 1 or N < 1 or K < 1:
        raise ValueError(f"M, N and K must be >= 1, got M={M}, N={N}, K={K}")
    ok = level.dtypes if level is not None else _INPUT_DTYPES
    if a.dtype != b.dtype or a.dtype not in ok:
        who = f"level {level.name} takes" if level is not None else "gemm() takes"
        raise TypeError(f"{who} A and B of dtype {', '.join(d.name for d in ok)} (both the same); "
                        f"got {a.dtype.name} and {b.dtype.name}")
    if not (a.contiguous and b.contiguous):
        raise ValueError("A and B must be C-contiguous (row-major); use np.ascontiguousarray or .contiguous()")
    if c is not None:
        if c.shape != (M, N):
            raise ValueError(f"C must have shape {(M, N)} for A {a.shape} @ B {b.shape}, got {c.shape}")
        if out is not None and out != c.dtype:
            raise TypeError(f"out_dtype {out.name} differs from C's dtype {c.dtype.name}: give one of them")
        if not c.contiguous:
            raise ValueError("C must be C-contiguous (row-major)")
        if c.readonly:
            raise ValueError("C is read-only")
        if _overlap(c, a) or _overlap(c, b):
            raise ValueError("C overlaps A or B in memory: gemm() writes C while it reads A and B, "
                             "so C must not share memory with them (pass a separate C)")
    elif beta != 0:
        raise ValueError(f"beta = {beta} needs an input C (beta != 0 adds beta·C); pass C, or beta=0")
    check_c_dtype(c.dtype if c is not None else (out if out is not None else _F32), a.dtype, level)
    if level is not None:
        reason = level.unsupported(M, N, K)
        if reason:
            raise ValueError(f"level {level.name} cannot run M={M}, N={N}, K={K}: {reason}")
    return M, N, K


def check_c_dtype(c_dtype, ab_dtype, level=None) -> None:
    """C is float32, or A's own float16/bfloat16 (fp32 accumulate, rounded once) for the levels
    that write it (C16 = True); TypeError naming them otherwise."""
    if c_dtype == _F32:                 # every level (the hot path: nothing else to check)
        return
    if not (c_dtype == ab_dtype and c_dtype.itemsize == 2):
        also = f", or {ab_dtype.name} as A and B" if ab_dtype.itemsize == 2 else ""
        raise TypeError(f"C must be float32{also}; got {c_dtype.name}")
    if level is not None and not level.writes(c_dtype, ab_dtype):
        writers = [lv.name for lv in _levels.registry().values() if lv.writes(c_dtype, ab_dtype)]
        raise TypeError(f"level {level.name} writes C as float32 only; levels that write "
                        f"{c_dtype.name} C: {', '.join(writers) or 'none'}")


_F32 = np.dtype(np.float32)
_INPUT_DTYPES = tuple(np.dtype(d) for d in (np.float32, np.float16, BFLOAT16) if d is not None)


# ---------------------------------------------------------------------------- device path

_launch_cache = launch.Calls()    # (level, alpha, beta, the records' fields) -> (Level, [Launch])
_torch_cache = launch.Calls()     # the fast path: (level, alpha, beta, torch tensors' fields) -> Submission


def _scalar_key(x: float):
    # 0.0 and -0.0 are equal and hash alike, but alpha = -0.0 writes -0.0 where 0.0 writes +0.0
    return x if x else (x, math.copysign(1.0, x))


def _record_key(r):
    """A record's fields that validate() and a level's run() read."""
    return (r.ptr, r.shape, r.strides, r.dtype, r.device, r.readonly)


def _torch_key(lv, A, B, C, alpha, beta):
    """The fast path's cache key for torch tensors A, B, C: everything the full path's reading,
    validation and recording look at, so that a hit stands for a call that passed them all
    with the same values. None when an operand is not a CUDA torch tensor."""
    fields = operands.torch_fields(A, B, C)
    if fields is None:
        return None
    fa, fb, fc = fields
    return (lv.name if lv else AUTO, _scalar_key(alpha), _scalar_key(beta), fa, fb, fc)


def _record_launches(lv, a, b, c, alpha, beta, M, N, K, c_dtype):
    """(level, [Launch]) for these records: the explicit level, or auto's first that accepts them
    and writes C of `c_dtype`."""
    from numba import cuda

    if lv is not None:
        cands = [lv]
    else:
        from . import choose

        native = choose.native_usable(a.device)
        cands = [x for x in choose.auto_candidates(a.dtype, M, N, K, native) if x.writes(c_dtype, a.dtype)]
        if not cands:
            raise choose.no_level(a.dtype, M, N, K, native, c_dtype)
    err = None
    for cand in cands:
        try:
            with cuda.gpus[a.device], launch.recording() as rec:
                cand.run(a, b, c, alpha, beta)
        except ValueError as e:       # refused before any launch (e.g. v10: unaligned base)
            if lv is not None:
                raise
            err = e
            continue
        if not rec.launches:    # it launched some other way (and so, eagerly): never cache that
            raise driver.LaunchError(f"level {cand.name} launched its kernel outside "
                                     "numba_gemm.runtime.launch (launch_native / launch_numba): gemm() "
                                     "cannot record it")
        return cand, rec.launches
    raise err


def _producers(records) -> tuple:
    """(libraries, streams) that order the records' pending work, each once: the libraries
    whose current stream it is on (records that name no stream), and the streams records
    name (DLPack, __cuda_array_interface__ v3)."""
    libraries, streams = [], []
    for r in records:
        if r.stream is None:
            if r.library not in libraries:
                libraries.append(r.library)
        elif r.stream not in streams:
            streams.append(r.stream)
    return tuple(libraries), tuple(streams)


def _call_stream(library, producer, device, user):
    """(the stream a call runs on, the library whose current stream it is or None): `user` if
    given, else A's producer stream, else A's library's current stream."""
    if user is not None:
        return user, None
    if producer is not None:
        return producer, None
    return driver.current_stream(library, device), library


def _check_capture(library, device, stream, user_given) -> bool:
    """Whether `stream` is capturing; refuses a call on a user's stream that is not while the
    inputs' library captures on another."""
    capturing = driver.is_capturing(stream)
    if not capturing and user_given:
        driver.refuse_if_library_capturing(library, device, stream)
    return capturing


def _order_inputs(stream, device, producers, current=None):
    """Make `stream` wait for inputs ordered on other streams (producers: _producers()'s pair;
    current: a library whose current stream is `stream`, so that it need not be asked)."""
    libraries, streams = producers
    for lib in libraries:
        if lib != current:
            p = driver.current_stream(lib, device)
            if p != stream:
                driver.wait(stream, p, device)
    for p in streams:
        if p != stream:
            driver.wait(stream, p, device)


class Submission:
    """What launching a prepared device call needs, and nothing that holds an operand: the
    device, the recorded launches, A's library and producer stream (the call's default stream)
    and the producers of every input. The caches keep these, so they never keep arrays alive."""

    __slots__ = ("device", "launches", "library", "producer", "producers")

    def __init__(self, device, launches, library, producer, producers):
        self.device, self.launches = device, launches
        self.library, self.producer, self.producers = library, producer, producers

    def submit(self, user=None) -> None:
        """The launches on the call's stream (`user`, a raw handle, or the default), after the
        capture check and the waits for inputs produced on other streams."""
        device, library = self.device, self.library      # each field read once: the hot path
        S, current = _call_stream(library, self.producer, device, user)
        with driver.on_device(device):
            if _check_capture(library, device, S, user is not None):
                launch.keep_for_graphs(self.launches)
            _order_inputs(S, device, self.producers, current)
            for L in self.launches:
                L.launch(S)


class Prepared:
    """One gemm made ready: the level, the shape, C (given or made), the operand records, and
    either a Submission (device operands on a GPU) or the host path's simulated flag."""

    __slots__ = ("level", "M", "N", "K", "C", "c_dtype", "records", "submission", "simulated")

    def __init__(self, level, shape, C, c_dtype, records, submission=None, simulated=False):
        self.level, (self.M, self.N, self.K), self.C, self.records = level, shape, C, records
        self.c_dtype, self.submission, self.simulated = c_dtype, submission, simulated


def prepare(lv, A, B, C, alpha: float, beta: float, user=None, cache=None, out=None) -> Prepared:
    """Read and validate the operands, choose the level and, for device operands on a GPU,
    make C (of dtype `out`, default float32) when it is not given and record the launches
    (looked up in `cache` first, keyed by everything validation and run() read). `user`: the
    caller's raw stream handle or None."""
    m = mode()
    out = None if out is None else operands.as_dtype(out)
    a = operands.read(A, "A", user if m == "gpu" else None)
    if not (m == "gpu" and a.on_device):
        b = operands.read(B, "B")
        c = operands.read(C, "C") if C is not None else None
        M, N, K = validate(a, b, c, beta, lv, out)
        simulated = m == "simulator"
        c_dtype = c.dtype if c is not None else (out if out is not None else _F32)
        return Prepared(_host_level(lv, a, M, N, K, simulated, c_dtype), (M, N, K), C, c_dtype,
                        (a, b, c), simulated=simulated)
    S, _ = _call_stream(a.library, a.stream, a.device, user)
    b = operands.read(B, "B", S)
    c = operands.read(C, "C", S) if C is not None else None
    M, N, K = validate(a, b, c, beta, lv, out)
    c_dtype = c.dtype if c is not None else (out if out is not None else _F32)
    with driver.on_device(a.device):
        _check_capture(a.library, a.device, S, user is not None)
        if c is None:
            C = operands.output_like(a, M, N, c_dtype)
            c = operands.read(C, "C", S)
        key = cache is not None and (lv.name if lv else AUTO, _scalar_key(alpha), _scalar_key(beta),
                                     _record_key(a), _record_key(b), _record_key(c))
        hit = cache.get(key) if key else None
        if hit is None:
            hit = _record_launches(lv, a, b, c, alpha, beta, M, N, K, c_dtype)
            if key:
                cache.remember(key, hit, hit[1])
    level, launches = hit
    records = (a, b, c)
    return Prepared(level, (M, N, K), C, c_dtype, records,
                    Submission(a.device, launches, a.library, a.stream, _producers(records)))


# ---------------------------------------------------------------------------- host / simulator path

def _gemm_host(p: Prepared, alpha, beta, stream):
    """NumPy inputs (GPU: copied over and back), or simulator arrays."""
    from numba import cuda

    lv, (a, b, c), C, simulated = p.level, p.records, p.C, p.simulated
    M, N, K = p.M, p.N, p.K
    c_bits = transfer_dtype(p.c_dtype)           # bf16 C travels as uint16, as A and B do

    if lv.native and simulated:
        raise NoGPUError(f"level {lv.name} is a native CUDA level and needs a GPU")
    if simulated and 2 * M * N * K > SIM_WARN_FLOPS:
        warnings.warn(f"the CUDA simulator runs one Python thread per GPU thread: "
                      f"{M}x{N}x{K} will take a long time", stacklevel=3)
    if a.on_device:                                   # simulator device arrays
        dC = c.obj if c is not None else cuda.device_array((M, N), c_bits)
        lv.run(a.obj, b.obj, dC, alpha, beta)
        return C if C is not None else dC
    s = 0
    if not simulated:
        cuda.current_context()   # the capture query below needs a current context (a first call)
        h = driver.stream_handle(stream)
        try:
            capturing = driver.is_capturing(h)
        except driver.LaunchError:
            capturing = True
        if capturing:
            raise driver.LaunchError("host (NumPy) operands need synchronous copies, which a CUDA "
                                     "graph capture forbids: pass device arrays")
        s = cuda.external_stream(h) if h else 0
    dA = cuda.to_device(a.host.view(transfer_dtype(a.dtype)), stream=s)
    dB = cuda.to_device(b.host.view(transfer_dtype(b.dtype)), stream=s)
    if c is not None and beta != 0:
        dC = cuda.to_device(c.host.view(c_bits), stream=s)
    else:
        dC = cuda.device_array((M, N), c_bits, stream=s)
    lv.run(dA, dB, dC, alpha, beta, stream=s or None)
    out = dC.copy_to_host(stream=s).view(p.c_dtype)
    if s:
        s.synchronize()
    if C is None:
        return _host_result(out, a.library)
    c.host[...] = out
    return C


def _host_result(out: np.ndarray, library: str):
    """A host result as the inputs' library holds one: NumPy, or a CPU torch tensor."""
    if library != "torch":
        return out
    import torch

    if out.dtype == BFLOAT16:          # torch.from_numpy knows no ml_dtypes.bfloat16
        return torch.from_numpy(out.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(out)


def _host_level(lv, a, M, N, K, simulated, c_dtype=_F32):
    if lv is not None:
        if lv.native and simulated:
            raise NoGPUError(f"level {lv.name} is a native CUDA level and needs a GPU; without one "
                             "only the Numba levels run (in the CUDA simulator)")
        return lv
    from . import choose

    native = False
    if not simulated:
        from numba import cuda

        native = choose.native_usable(cuda.get_current_device().id)
    cands = choose.auto_candidates(a.dtype, M, N, K, native)
    if not cands and simulated:
        cands = choose.simulator_candidates(a.dtype, M, N, K)
    cands = [x for x in cands if x.writes(c_dtype, a.dtype)]
    if not cands:
        raise choose.no_level(a.dtype, M, N, K, native, c_dtype)
    return cands[0]


# ---------------------------------------------------------------------------- public

def gemm(A, B, C=None, *, alpha=1.0, beta=0.0, level="auto", stream=None, out_dtype=None):
    """C = alpha * A @ B + beta * C, row-major, with one level of the ladder (or "auto").

    A (M×K) and B (K×N): float32 for the SGEMM levels (k*), float16 or bfloat16 for the HGEMM
    levels (v*); C (M×N) is float32 by default. With 16-bit A and B, C may be in their type
    too (out_dtype=, e.g. torch.float16, or a 16-bit C given), as torch.mm returns it: the sum
    is still accumulated in fp32, alpha·AB + beta·C computed in fp32 and rounded once; the
    levels with C16 = True write it (v13), the others refuse it. Any framework: torch tensors, CuPy, JAX, Numba device
    arrays (DLPack or __cuda_array_interface__, used in place, bfloat16 included through
    DLPack), or NumPy arrays (bfloat16 as ml_dtypes.bfloat16; copied to the GPU and back).
    Without C, the result is a new array of A's library (torch in -> torch out, CuPy -> CuPy,
    NumPy -> NumPy, others -> a Numba device array); with C, it is written into C and C is
    returned. When beta == 0, C is only written, never read.

    level: "auto" (the fastest level that serves the dtype and shape here; numba_gemm.api
    says how it ranks) or a level name (numba_gemm.levels()). stream: any object with
    __cuda_stream__, a torch/CuPy/Numba stream or a raw handle; default: the stream A's
    library considers current. Device operands run on their own GPU.
    C must not share memory with A or B (ValueError, NumPy operands included).
    Without a GPU, the Numba levels (k*, v8py, v11py) run in the CUDA simulator if Numba is in
    simulator mode (use_simulator_if_no_gpu(), or NUMBA_ENABLE_CUDASIM=1, before numba.cuda is
    imported); otherwise NoGPUError says how.
    """
    lv = resolve_level(level)
    alpha, beta = real_scalar(alpha, "alpha"), real_scalar(beta, "beta")
    user = key = None
    if mode() == "gpu":
        user = None if stream is None else driver.stream_handle(stream)
        key = _torch_key(lv, A, B, C, alpha, beta) if C is not None and out_dtype is None else None
        if key is not None:
            hit = _torch_cache.get(key)
            if hit is not None:     # the same fields as a call that passed every check
                hit.submit(user)
                return C
    p = prepare(lv, A, B, C, alpha, beta, user, _launch_cache, out_dtype)
    if p.submission is None:
        return _gemm_host(p, alpha, beta, stream)
    if key is not None:      # read, validated and recorded: the fast path may skip all three
        _torch_cache.remember(key, p.submission, p.submission.launches)
    p.submission.submit(user)
    return p.C


class Plan:
    """A prepared gemm: operands read and validated, level chosen and its launches recorded,
    once; execute() launches them (one cuLaunchKernel per launch on a GPU).

    Between executes, the CONTENTS of A, B and C may change (each execute reads them as they
    are then, which is also what a CUDA graph replays), and the stream may (execute(stream=)).
    The operands themselves — their memory, shapes, dtypes, device — and alpha, beta and the
    level are fixed: make a new plan for other arrays. The plan keeps its operands alive.
    Without C the plan makes one output array (of out_dtype, default float32), written by
    every execute and returned by it.
    Host (NumPy) operands are copied in and out on every execute.
    """

    def __init__(self, A, B, C=None, *, alpha=1.0, beta=0.0, level="auto", stream=None, out_dtype=None):
        lv = resolve_level(level)
        self.alpha, self.beta = real_scalar(alpha, "alpha"), real_scalar(beta, "beta")
        self._stream, self._auto = stream, lv is None
        self._user = None if stream is None or mode() != "gpu" else driver.stream_handle(stream)
        p = self.prepared = prepare(lv, A, B, C, self.alpha, self.beta, self._user, out=out_dtype)
        self._submission, self._out = p.submission, p.C     # _out: the device path's C, fixed
        self.level, self.M, self.N, self.K = p.level, p.M, p.N, p.K
        self.device, self.dtype = p.records[0].device, p.records[0].dtype
        if p.submission is None and C is None and not p.records[0].on_device:
            # the plan's own output, in A's library, written by every execute
            p.C = _host_result(np.empty((p.M, p.N), p.c_dtype), p.records[0].library)
            p.records = p.records[:2] + (operands.read(p.C, "C"),)

    @property
    def C(self):
        return self.prepared.C

    def execute(self, stream=None):
        """Run the plan; returns C (the given one, or the plan's own output array)."""
        sub = self._submission
        if sub is not None:
            sub.submit(self._user if stream is None else driver.stream_handle(stream))
            return self._out
        p = self.prepared
        out = _gemm_host(p, self.alpha, self.beta, stream if stream is not None else self._stream)
        if p.C is None:               # the first execute made the output: keep writing it
            p.C = out
            p.records = p.records[:2] + (operands.read(out, "C"),)
        return out

    __call__ = execute

    def explain(self) -> str:
        """Which level this plan runs and why: auto's ranking with predicted times and the
        runners-up (numba_gemm.choose), or that the caller named the level."""
        head = f"plan runs {self.level.name} for {self.dtype.name} {self.M}x{self.N}x{self.K}"
        if not self._auto:
            return head + ": the level was named (auto did not choose)"
        from . import choose

        native = mode() == "gpu" and choose.native_usable(max(self.device, 0))
        ranked = choose.explain(self.dtype, self.M, self.N, self.K, native, self.beta)
        if ranked.split("\n")[0].endswith(": " + self.level.name):
            return head + "\n" + ranked
        return (head + " (auto's first choice could not take these operands, e.g. an unaligned "
                "base for TMA)\n" + ranked)

    def __repr__(self):
        return f"Plan({self.level.name}, M={self.M}, N={self.N}, K={self.K}, alpha={self.alpha}, beta={self.beta})"


def plan(A, B, C=None, *, alpha=1.0, beta=0.0, level="auto", stream=None, out_dtype=None) -> Plan:
    """Prepare C = alpha·A@B + beta·C once; .execute() (or call it) runs it. See Plan and gemm()
    (out_dtype: C's dtype when C is not given)."""
    return Plan(A, B, C, alpha=alpha, beta=beta, level=level, stream=stream, out_dtype=out_dtype)
