"""Operand records: what gemm() needs to know about an array, read once.

    rec = read(x, "A")          # Operand(ptr, shape, strides, dtype, device, library, obj, ...)

Sources, in this order:
  1. torch tensors: their own accessors (data_ptr, shape, stride, dtype, get_device): the
     same fields DLPack carries (bfloat16 included), without building and parsing a capsule
     per operand per call; bench.py --overhead prints the cost of both ways.
  2. NumPy arrays (host): their own fields; NumPy's DLPack export has no bfloat16 (ml_dtypes).
  3. anything with __dlpack__ / __dlpack_device__ (CuPy, JAX, ...): the capsule is parsed
     with ctypes, versioned (DLPack 1.x, with its read-only flag) when the producer offers it.
     DLPack has bfloat16, which __cuda_array_interface__ has not.
  4. anything with __cuda_array_interface__ (Numba device arrays, ...), evaluated once (a
     property: torch recomputes it on every access, hasattr included).
  5. the Numba CUDA simulator's device arrays, when the simulator is on.

A record is also a minimal array for the levels' run(): .shape, .dtype, .reshape(n) (a flat
view of a C-contiguous record) and __cuda_array_interface__, so the levels read pointers
from it exactly as from a Numba array, with no wrapper object in between.

Strides are in elements (DLPack's convention); None means C-contiguous. device is the CUDA
ordinal, or -1 for host memory. stream is the producer's stream for device records (the
stream its pending writes are ordered on, driver handle: 0 legacy default, 2 per-thread
default), or None when the producer does not say.
"""
from __future__ import annotations

import ctypes
import struct
import sys

import numpy as np

from . import driver

try:
    import ml_dtypes

    BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a dependency; without it no bf16
    BFLOAT16 = None

HOST = -1


class Operand:
    """One array, as read once: pointer, shape, strides (elements), dtype, device, library."""

    __slots__ = ("ptr", "shape", "strides", "dtype", "device", "library", "obj", "readonly",
                 "stream", "host", "simulated")

    def __init__(self, ptr, shape, strides, dtype, device, library, obj, readonly=False,
                 stream=None, host=None, simulated=False):
        self.ptr = ptr
        self.shape = shape
        self.strides = strides
        self.dtype = dtype
        self.device = device
        self.library = library
        self.obj = obj
        self.readonly = readonly
        self.stream = stream
        self.host = host            # the NumPy array for host records
        self.simulated = simulated  # a Numba simulator device array

    @property
    def on_device(self) -> bool:
        return self.device != HOST

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def contiguous(self) -> bool:
        """Row-major contiguous (dimensions of extent 1 may carry any stride)."""
        s = self.strides
        if s is None:
            return True
        if len(s) == 2:                      # the common case, without the loop
            m, n = self.shape
            return (s[1] == 1 or n == 1) and (s[0] == n or m == 1)
        step = 1
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and s != step:
                return False
            step *= n
        return True

    def reshape(self, *shape):
        """A view of the same elements in `shape`, row-major; only for C-contiguous records
        (the SGEMM launches: flat, or 2-D for a level that cuts its operands into views)."""
        n = 1
        for d in shape:
            n *= d
        if n != self.size or not self.contiguous:
            raise ValueError(f"cannot view a {self.shape} operand as {shape} contiguous elements")
        return self._view(shape)

    def __getitem__(self, key):
        """Elements [a:b] of a flat view (k8e cuts B's first rows and C's last rows where they lie)."""
        flat = isinstance(key, slice) and len(self.shape) == 1 and key.step in (None, 1)
        start = (key.start or 0) if flat else 0
        if not (flat and key.stop is not None and 0 <= start <= key.stop <= self.size):
            raise TypeError(f"an operand takes only [a:b] of a flat view, not {key!r} of {self.shape}")
        return self._view((key.stop - start,), start)

    def _view(self, shape, start=0):
        return Operand(self.ptr + start * self.dtype.itemsize, tuple(shape), None, self.dtype,
                       self.device, self.library, self.obj, self.readonly, self.stream)

    @property
    def __cuda_array_interface__(self):
        if not self.on_device or self.simulated:
            raise AttributeError("__cuda_array_interface__")
        strides = None if self.strides is None else tuple(s * self.dtype.itemsize for s in self.strides)
        return {"shape": self.shape, "strides": strides, "typestr": self.dtype.str,
                "data": (self.ptr, self.readonly), "version": 3}

    def __repr__(self):
        where = "host" if self.device == HOST else f"cuda:{self.device}"
        return (f"Operand({self.library} {self.dtype.name}{list(self.shape)} on {where}, "
                f"ptr={self.ptr:#x}, strides={self.strides})")


# ---------------------------------------------------------------------------- readers

def library_of(x) -> str:
    """The top-level package of x's type: 'torch', 'cupy', 'numba', 'numpy', 'jaxlib', ..."""
    return type(x).__module__.partition(".")[0]


def read(x, name: str = "array", stream: int | None = None) -> Operand:
    """The record of x. `stream`: the driver stream handle the consumer will use (DLPack
    producers order their pending work before it); None: the producer's current stream."""
    if isinstance(x, Operand):
        return x
    reader = _READERS.get(type(x))
    if reader is None:
        reader = _reader_for(x)
        _READERS[type(x)] = reader
    return reader(x, name, stream)


def _reader_for(x):
    lib = library_of(x)
    if lib == "torch":
        return _read_torch
    if isinstance(x, np.ndarray):
        return _read_numpy
    if _simulator_array_type() is not None and isinstance(x, _simulator_array_type()):
        return _read_simulated
    if hasattr(type(x), "__dlpack__") and hasattr(type(x), "__dlpack_device__"):
        return _read_dlpack_or_cai
    # a property on the type, or an attribute of the instance: look at the type first so
    # that a computed property is not evaluated here
    if hasattr(type(x), "__cuda_array_interface__") or "__cuda_array_interface__" in getattr(x, "__dict__", ()):
        return _read_cai
    return _not_an_array


_READERS: dict = {}


def _not_an_array(x, name, stream):
    raise TypeError(
        f"{name}: expected a NumPy array or a device array (DLPack or __cuda_array_interface__: "
        f"torch, CuPy, JAX, Numba), got {type(x).__name__}"
    )


def _simulator_array_type():
    numba = sys.modules.get("numba")
    if numba is None:
        return None
    from . import gpu

    if not gpu.simulating():
        return None
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    return FakeCUDAArray


def _element_strides(byte_strides, itemsize, name):
    if byte_strides is None:
        return None
    out = []
    for s in byte_strides:
        if s % itemsize:
            raise ValueError(f"{name}: stride of {s} bytes is not a whole number of {itemsize}-byte elements")
        out.append(s // itemsize)
    return tuple(out)


def _read_numpy(x, name, stream):
    return Operand(x.__array_interface__["data"][0], x.shape,
                   _element_strides(x.strides, x.itemsize, name), x.dtype, HOST, "numpy", x,
                   readonly=not x.flags.writeable, host=x)


def _read_simulated(x, name, stream):
    host = x._ary if hasattr(x, "_ary") else np.asarray(x)
    return Operand(host.__array_interface__["data"][0], tuple(x.shape),
                   _element_strides(host.strides, host.itemsize, name), np.dtype(x.dtype), 0,
                   "numba", x, simulated=True)


# torch: dtype by name, so torch need not be imported here
_TORCH_DTYPES = {"torch.float32": np.dtype(np.float32), "torch.float16": np.dtype(np.float16),
                 "torch.float64": np.dtype(np.float64), "torch.int32": np.dtype(np.int32),
                 "torch.int64": np.dtype(np.int64), "torch.int16": np.dtype(np.int16),
                 "torch.uint8": np.dtype(np.uint8), "torch.int8": np.dtype(np.int8),
                 "torch.bool": np.dtype(np.bool_)}
if BFLOAT16 is not None:
    _TORCH_DTYPES["torch.bfloat16"] = BFLOAT16


_torch_by_object: dict = {}


def as_dtype(x) -> np.dtype:
    """A NumPy dtype from a NumPy dtype or type, a name ("float16", "bfloat16" or "bf16") or a
    torch dtype (torch.bfloat16 included); TypeError for anything else."""
    name = str(x)
    if name.startswith("torch."):
        dt = _TORCH_DTYPES.get(name)
        if dt is None:
            raise TypeError(f"torch dtype {x} has no NumPy equivalent here")
        return dt
    if isinstance(x, str) and x.lower() in ("bfloat16", "bf16") and BFLOAT16 is not None:
        return BFLOAT16
    try:
        return np.dtype(x)
    except TypeError:
        raise TypeError(f"not a dtype: {x!r}") from None


def _torch_dtype(x, name):
    dt = _torch_by_object.get(x.dtype)
    if dt is None:
        dt = _TORCH_DTYPES.get(str(x.dtype))
        if dt is None:
            raise TypeError(f"{name}: torch dtype {x.dtype} has no NumPy equivalent here")
        _torch_by_object[x.dtype] = dt
    return dt


def _read_torch(x, name, stream):
    if x.requires_grad:
        raise TypeError(f"{name} requires grad and gemm() is not differentiable: pass {name}.detach()")
    if x.is_neg():      # e.g. z.conj().imag: its memory holds -x (torch negates lazily)
        raise TypeError(f"{name} is a torch view with the negative bit set: pass {name}.resolve_neg()")
    dt = _torch_dtype(x, name)
    dev = x.get_device()            # -1 on the CPU
    if dev < 0:
        if x.device.type != "cpu":
            raise TypeError(f"{name} is a torch tensor on {x.device}; gemm() takes CUDA or CPU tensors")
        host = x.view(getattr(sys.modules["torch"], "int16")).numpy().view(dt) if dt == BFLOAT16 else x.numpy()
        return Operand(x.data_ptr(), tuple(x.shape), tuple(x.stride()), dt, HOST, "torch", x,
                       host=host)
    # stream None: torch orders its work on its current stream (driver.current_stream)
    return Operand(x.data_ptr(), tuple(x.shape), tuple(x.stride()), dt, dev, "torch", x)


_Tensor = None      # torch.Tensor, once torch is imported


def torch_fields(A, B, C):
    """What read() takes from CUDA torch tensors A, B, C (pointer, shape, strides, dtype,
    device), straight from their accessors, for gemm()'s fast-path key; None when any of them
    is something else (a tensor that needs grad or is a negative-bit view included: read()
    refuses those) or torch is not imported. The hot path of a repeated call: one function."""
    global _Tensor
    if _Tensor is None:
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        _Tensor = torch.Tensor
    T = _Tensor          # written out for the three: this runs on every repeated call
    if type(A) is not T or type(B) is not T or type(C) is not T:
        return None
    if A.requires_grad or B.requires_grad or C.requires_grad or A.is_neg() or B.is_neg() or C.is_neg():
        return None
    da, db, dc = A.get_device(), B.get_device(), C.get_device()
    if da < 0 or db < 0 or dc < 0:
        return None
    return ((A.data_ptr(), A.shape, A.stride(), A.dtype, da), (B.data_ptr(), B.shape, B.stride(), B.dtype, db),
            (C.data_ptr(), C.shape, C.stride(), C.dtype, dc))


def output_like(a: Operand, M: int, N: int, dtype=np.float32):
    """An uninitialised M×N array of `dtype` (float32, or A's float16/bfloat16) made by record
    a's library on a's device; MemoryError when the device has no room (the library's own
    error is chained). A bfloat16 C of a library without that type (Numba) holds its uint16
    bit patterns; CuPy has none either and is refused (pass C)."""
    dtype = np.dtype(dtype)
    bf16 = BFLOAT16 is not None and dtype == BFLOAT16
    try:
        if a.library == "torch":
            import torch

            return torch.empty((M, N), dtype=getattr(torch, "bfloat16" if bf16 else dtype.name),
                               device=a.obj.device)
        if a.library == "cupy":
            if bf16:
                raise TypeError("CuPy has no bfloat16 array for C: pass C (e.g. a torch tensor), "
                                "or out_dtype=float32")
            import cupy

            with cupy.cuda.Device(a.device):
                return cupy.empty((M, N), dtype=dtype)
        from numba import cuda

        with cuda.gpus[a.device]:        # Numba's, or a library without a known allocator
            return cuda.device_array((M, N), np.uint16 if bf16 else dtype)
    except Exception as e:  # noqa: BLE001 - torch, CuPy and Numba each have their own OOM type
        text = str(e).lower()
        if "out of memory" in text or "out_of_memory" in text:
            raise MemoryError(f"cannot allocate C ({M}x{N} {dtype.name}, "
                              f"{dtype.itemsize * M * N / 2**30:.1f} GiB) on GPU {a.device}: "
                              "out of device memory") from e
        raise


# --- DLPack (https://dmlc.github.io/dlpack/latest/c_api.html), parsed with ctypes
# DLTensor: void* data; {int32 device_type, device_id}; int32 ndim; {uint8 code, uint8 bits,
# uint16 lanes}; int64* shape; int64* strides; uint64 byte_offset
_DLTENSOR = struct.Struct("<QiiiBBHQQQ")
# DLManagedTensorVersioned: {uint32 major, minor}; void* manager_ctx; deleter; uint64 flags; DLTensor
_VERSIONED_HEADER = struct.Struct("<IIQQQ")
_DL_READ_ONLY = 1
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_TYPES = {(0, 8): np.int8, (0, 16): np.int16, (0, 32): np.int32, (0, 64): np.int64,
             (1, 8): np.uint8, (1, 16): np.uint16, (1, 32): np.uint32, (1, 64): np.uint64,
             (2, 16): np.float16, (2, 32): np.float32, (2, 64): np.float64, (6, 8): np.bool_}

_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def dlpack_dtype(code: int, bits: int, lanes: int) -> np.dtype:
    if lanes != 1:
        raise TypeError(f"DLPack vector type ({lanes} lanes) is not a matrix element type")
    if (code, bits) == (4, 16):
        if BFLOAT16 is None:
            raise TypeError("bfloat16 needs the ml_dtypes package")
        return BFLOAT16
    dt = _DL_TYPES.get((code, bits))
    if dt is None:
        raise TypeError(f"DLPack dtype code {code} with {bits} bits is not supported")
    return np.dtype(dt)


def parse_capsule(capsule):
    """(data pointer, device_type, device_id, shape, strides or None, dtype, read-only) of a
    DLPack capsule. The capsule is not consumed: its destructor frees the export, and the
    memory stays alive with the producer's array (the record keeps it)."""
    if _capsule_is_valid(capsule, b"dltensor_versioned"):
        base = _capsule_pointer(capsule, b"dltensor_versioned")
        major, _, _, _, flags = _VERSIONED_HEADER.unpack(ctypes.string_at(base, _VERSIONED_HEADER.size))
        if major != 1:
            raise TypeError(f"DLPack major version {major} is not supported (1 is)")
        readonly = bool(flags & _DL_READ_ONLY)
        tensor = base + _VERSIONED_HEADER.size
    elif _capsule_is_valid(capsule, b"dltensor"):
        tensor, readonly = _capsule_pointer(capsule, b"dltensor"), False
    else:
        raise TypeError("__dlpack__ returned something that is not a DLPack capsule")
    data, dev_type, dev_id, ndim, code, bits, lanes, shape_p, strides_p, offset = \
        _DLTENSOR.unpack(ctypes.string_at(tensor, _DLTENSOR.size))
    fmt = f"<{ndim}q"
    shape = struct.unpack(fmt, ctypes.string_at(shape_p, 8 * ndim)) if ndim else ()
    strides = struct.unpack(fmt, ctypes.string_at(strides_p, 8 * ndim)) if ndim and strides_p else None
    return data + offset, dev_type, dev_id, shape, strides, dlpack_dtype(code, bits, lanes), readonly


def _dlpack_stream(stream: int) -> int:
    # DLPack's stream argument: 1 names the legacy default stream (0 is not allowed), 2 the
    # per-thread one, -1 asks for no synchronisation
    return 1 if stream == 0 else stream


def _read_dlpack_or_cai(x, name, stream):
    try:
        dev_type, dev_id = x.__dlpack_device__()
    except Exception:  # noqa: BLE001 - a producer whose DLPack export fails may still have CAI
        return _read_cai(x, name, stream)
    dev_type = int(dev_type)
    if dev_type in (DL_CPU, DL_CUDA_HOST):
        kw = {}
    elif dev_type in (DL_CUDA, DL_CUDA_MANAGED):
        if stream is None:
            stream = driver.current_stream(library_of(x), int(dev_id))
        kw = {"stream": _dlpack_stream(stream)}
    else:
        raise TypeError(f"{name} lives on DLPack device type {dev_type}; gemm() takes CUDA or host memory")
    try:
        capsule = x.__dlpack__(max_version=(1, 0), **kw)
    except TypeError:               # a producer without DLPack 1.x's keyword
        capsule = x.__dlpack__(**kw)
    except BufferError as e:        # e.g. a dtype DLPack cannot describe: try the other protocols
        if hasattr(type(x), "__cuda_array_interface__"):
            return _read_cai(x, name, stream)
        if isinstance(x, np.ndarray):
            return _read_numpy(x, name, stream)
        raise TypeError(f"{name}: DLPack export failed: {e}") from None
    ptr, dev_type, dev_id, shape, strides, dtype, readonly = parse_capsule(capsule)
    lib = library_of(x)
    if dev_type in (DL_CPU, DL_CUDA_HOST):
        host = np.from_dlpack(x) if dtype != BFLOAT16 else None
        if host is None:
            raise TypeError(f"{name}: a host bfloat16 array must be a NumPy array of ml_dtypes.bfloat16")
        return Operand(ptr, shape, strides, dtype, HOST, lib, x, readonly=readonly, host=host)
    # the producer has ordered its pending work before `stream`
    return Operand(ptr, shape, strides, dtype, int(dev_id), lib, x, readonly=readonly,
                   stream=stream)


def _read_cai(x, name, stream):
    try:
        cai = x.__cuda_array_interface__          # evaluated exactly once
    except Exception as e:  # noqa: BLE001 - e.g. torch: "requires grad"
        raise TypeError(f"{name}: __cuda_array_interface__ failed: {e}") from None
    dtype = np.dtype(cai["typestr"])
    if dtype.kind == "V":
        raise TypeError(
            f"{name} has dtype {cai['typestr']} in __cuda_array_interface__, which has no bfloat16: "
            "pass bf16 through DLPack (__dlpack__: torch, CuPy, JAX)"
        )
    ptr, readonly = cai["data"]
    shape = tuple(cai["shape"])
    strides = _element_strides(cai.get("strides"), dtype.itemsize, name)
    s = cai.get("stream") if cai.get("version", 0) >= 3 else None
    producer = None if s is None else (0 if s == 1 else int(s))   # CAI: 1 = legacy default
    dev = driver.pointer_device(ptr) if ptr else 0
    return Operand(int(ptr), shape, strides, dtype, dev, library_of(x), x,
                   readonly=bool(readonly), stream=producer)
