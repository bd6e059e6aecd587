"""TMA tensor maps: cuTensorMapEncodeTiled with its documented constraints checked first.

`check_tiled()` is pure Python (no GPU, no driver): it raises ValueError with an explanation
for every argument the driver documents as invalid, plus the kernel's own layout assumption.
`encode_tiled()` checks, then calls the driver and checks its result. `matrix_map()` is the
row-major 2-D case the HGEMM levels use.

The driver's rules for CU_TENSOR_MAP_INTERLEAVE_NONE (cuTensorMapEncodeTiled documentation):
  - rank 1..5; global address 16-byte aligned;
  - globalDim[i] in [1, 2^32];
  - globalStrides (rank-1 of them, bytes) multiples of 16 and < 2^40; each stride at least
    the extent of the dimension below it (dims must not overlap);
  - boxDim[i] in [1, 256]; boxDim[0] * element size a multiple of 16 bytes;
  - elementStrides[i] in [1, 8];
  - with a swizzle, the box's inner extent (boxDim[0] * element size) must be <= the swizzle
    span: 32, 64 or 128 bytes.
The kernel's rule on top (v10): its ldmatrix addresses walk a 128-byte row with an XOR
(`addr ^ kk*32`) — that is only the SWIZZLE_128B layout when each box row is exactly 128 bytes.
A 64-byte inner box (BK = 32 fp16) is legal for the driver, but the kernel would then read
chunks that the swizzle put elsewhere, past the box: the seed's "BK=32 + SWIZZLE_128B
illegal address" crash. `kernel_inner_bytes=128` turns that into this error.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

SWIZZLE_SPAN = {"none": None, "32B": 32, "64B": 64, "128B": 128}
L2_PROMOTION = {0: "NONE", 64: "L2_64B", 128: "L2_128B", 256: "L2_256B"}
MAX_RANK = 5


def _dtype_enum(dtype):
    from cuda.bindings import driver as drv

    T = drv.CUtensorMapDataType
    dt = np.dtype(dtype)
    if dt == np.float16:
        return T.CU_TENSOR_MAP_DATA_TYPE_FLOAT16
    if dt == np.uint16 or dt.name == "bfloat16":
        # bf16 arrives as uint16 bits; TMA only copies bytes, the enum names the element size
        return T.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
    if dt == np.float32:
        return T.CU_TENSOR_MAP_DATA_TYPE_FLOAT32
    raise ValueError(f"no tensor-map data type for {dt}")


def check_tiled(address: int, global_dims, global_strides, box_dims, elem_bytes: int,
                element_strides=None, swizzle: str = "128B",
                kernel_inner_bytes: int | None = None) -> None:
    """Raise ValueError unless cuTensorMapEncodeTiled (INTERLEAVE_NONE) would accept these.

    global_dims and box_dims are innermost first (dim 0 is contiguous); global_strides are the
    byte strides of dims 1..rank-1. kernel_inner_bytes: the inner box size in bytes the kernel
    that reads the tile assumes (None: no assumption).
    """
    dims, strides, box = list(global_dims), list(global_strides), list(box_dims)
    rank = len(dims)
    es = [1] * rank if element_strides is None else list(element_strides)
    if not 1 <= rank <= MAX_RANK:
        raise ValueError(f"tensor rank must be 1..{MAX_RANK}, got {rank}")
    if len(box) != rank or len(es) != rank or len(strides) != rank - 1:
        raise ValueError(
            f"rank {rank} needs {rank} box dims, {rank} element strides and {rank - 1} global "
            f"strides; got {len(box)}, {len(es)}, {len(strides)}"
        )
    if elem_bytes not in (1, 2, 4, 8):
        raise ValueError(f"element size must be 1, 2, 4 or 8 bytes, got {elem_bytes}")
    if swizzle not in SWIZZLE_SPAN:
        raise ValueError(f"swizzle must be one of {list(SWIZZLE_SPAN)}, got {swizzle!r}")
    if address % 16:
        raise ValueError(
            f"global address {address:#x} is not 16-byte aligned (TMA requires it): "
            "use an aligned allocation, or a level that loads with per-element checks"
        )
    for i, d in enumerate(dims):
        if not 1 <= d <= 2**32:
            raise ValueError(f"global dim {i} = {d} must be in [1, 2^32]")
    extent = dims[0] * elem_bytes
    for i, s in enumerate(strides, start=1):
        if s % 16:
            raise ValueError(
                f"global stride of dim {i} = {s} bytes is not a multiple of 16 (TMA requires "
                f"16-byte aligned rows; for a row-major 2-byte matrix the row length must be a "
                f"multiple of 8 elements)"
            )
        if s >= 2**40:
            raise ValueError(f"global stride of dim {i} = {s} bytes must be < 2^40")
        if s < extent:
            raise ValueError(f"global stride of dim {i} = {s} bytes is smaller than the {extent}-byte extent of dim {i - 1}")
        extent = s * dims[i]
    for i, b in enumerate(box):
        if not 1 <= b <= 256:
            raise ValueError(f"box dim {i} = {b} must be in [1, 256]")
    for i, e in enumerate(es):
        if not 1 <= e <= 8:
            raise ValueError(f"element stride {i} = {e} must be in [1, 8]")
    inner = box[0] * elem_bytes
    if inner % 16:
        raise ValueError(f"inner box extent {inner} bytes (box dim 0 × element size) must be a multiple of 16")
    span = SWIZZLE_SPAN[swizzle]
    if span is not None and inner > span:
        raise ValueError(
            f"inner box extent {inner} bytes exceeds the SWIZZLE_{swizzle} span of {span} bytes: "
            f"use at most {span // elem_bytes} elements in box dim 0 (several boxes per tile)"
        )
    if kernel_inner_bytes is not None and inner != kernel_inner_bytes:
        raise ValueError(
            f"inner box extent is {inner} bytes but the kernel reads this tile assuming "
            f"{kernel_inner_bytes}-byte rows (its XOR walk over SWIZZLE_{swizzle} chunks); the "
            f"driver would accept the map and the kernel would read outside the box (the "
            f"'BK=32 with SWIZZLE_128B' illegal-address crash). Use box dim 0 = "
            f"{kernel_inner_bytes // elem_bytes} elements."
        )


def encode_tiled(dtype, address: int, global_dims, global_strides, box_dims,
                 element_strides=None, swizzle: str = "128B", l2_promotion: int = 256,
                 kernel_inner_bytes: int | None = None, oob_nan: bool = False):
    """Check, then cuTensorMapEncodeTiled; returns a cuda.bindings CUtensorMap (128 bytes)."""
    from cuda.bindings import driver as drv

    from .driver import check

    elem = np.dtype(dtype).itemsize
    check_tiled(address, global_dims, global_strides, box_dims, elem, element_strides,
                swizzle, kernel_inner_bytes)
    if l2_promotion not in L2_PROMOTION:
        raise ValueError(f"l2_promotion must be one of {list(L2_PROMOTION)} bytes, got {l2_promotion}")
    rank = len(global_dims)
    es = [1] * rank if element_strides is None else list(element_strides)
    sw = {"none": "NONE", "32B": "32B", "64B": "64B", "128B": "128B"}[swizzle]
    fill = "NAN_REQUEST_ZERO_FMA" if oob_nan else "NONE"
    return check(
        drv.cuTensorMapEncodeTiled(
            _dtype_enum(dtype), rank, address,
            [drv.cuuint64_t(int(d)) for d in global_dims],
            [drv.cuuint64_t(int(s)) for s in global_strides],
            [drv.cuuint32_t(int(b)) for b in box_dims],
            [drv.cuuint32_t(int(e)) for e in es],
            drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            getattr(drv.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{sw}"),
            getattr(drv.CUtensorMapL2promotion, f"CU_TENSOR_MAP_L2_PROMOTION_{L2_PROMOTION[l2_promotion]}"),
            getattr(drv.CUtensorMapFloatOOBfill, f"CU_TENSOR_MAP_FLOAT_OOB_FILL_{fill}"),
        ),
        "cuTensorMapEncodeTiled",
    )


def matrix_args(address: int, rows: int, cols: int, box_rows: int, box_cols: int, elem_bytes: int = 2,
                pitch: int | None = None):
    """(global_dims, global_strides, box_dims) of a row-major rows × cols matrix, inner dim first;
    its rows `pitch` elements apart (default: cols, a dense matrix)."""
    return (cols, rows), ((pitch or cols) * elem_bytes,), (box_cols, box_rows)


def check_matrix(address: int, rows: int, cols: int, box_rows: int, box_cols: int,
                 elem_bytes: int = 2, swizzle: str = "128B", kernel_inner_bytes: int | None = 128,
                 pitch: int | None = None):
    dims, strides, box = matrix_args(address, rows, cols, box_rows, box_cols, elem_bytes, pitch)
    check_tiled(address, dims, strides, box, elem_bytes, None, swizzle, kernel_inner_bytes)


def matrix_map(dtype, address: int, rows: int, cols: int, box_rows: int, box_cols: int,
               swizzle: str = "128B", l2_promotion: int = 256, kernel_inner_bytes: int | None = 128,
               pitch: int | None = None):
    """Tensor map of a row-major rows × cols matrix read in box_rows × box_cols boxes.

    Out-of-bounds parts of a box are zero-filled by TMA (OOB_FILL_NONE), which is what makes
    ragged M, N, K exact without edge code in the kernel.
    """
    elem = np.dtype(dtype).itemsize
    dims, strides, box = matrix_args(address, rows, cols, box_rows, box_cols, elem, pitch)
    return encode_tiled(dtype, address, dims, strides, box, None, swizzle, l2_promotion,
                        kernel_inner_bytes)


_MAPS: OrderedDict = OrderedDict()


def cached_matrix_map(dtype, address: int, rows: int, cols: int, box: tuple[int, int],
                      kernel_inner_bytes: int = 128, pitch: int | None = None):
    """matrix_map with SWIZZLE_128B and 256-byte L2 promotion (what the TMA levels load with),
    cached by its arguments: encoding costs host microseconds and a GEMM in a loop reuses them."""
    key = (np.dtype(dtype).str, address, rows, cols, box, kernel_inner_bytes, pitch)
    m = _MAPS.get(key)
    if m is None:
        m = _MAPS[key] = matrix_map(dtype, address, rows, cols, box[0], box[1], swizzle="128B",
                                    l2_promotion=256, kernel_inner_bytes=kernel_inner_bytes,
                                    pitch=pitch)
        if len(_MAPS) > 32:
            _MAPS.popitem(last=False)
    return m
