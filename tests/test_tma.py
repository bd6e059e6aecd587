"""numba_gemm.runtime.tma: the documented cuTensorMapEncodeTiled rules, checked without a driver.

`_driver_accepts` restates the rules independently (straight from the driver documentation);
hypothesis draws arguments around every boundary and the checker must agree with it exactly.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numba_gemm.hgemm import _wgmma
from numba_gemm.runtime import tma


def _driver_accepts(addr, dims, strides, box, elem, es, swizzle):
    rank = len(dims)
    span = {"none": None, "32B": 32, "64B": 64, "128B": 128}[swizzle]
    ok = 1 <= rank <= 5 and addr % 16 == 0
    ok &= all(1 <= d <= 2**32 for d in dims)
    ok &= all(s % 16 == 0 and s < 2**40 for s in strides)
    ext = dims[0] * elem
    for i, s in enumerate(strides, start=1):
        ok &= s >= ext
        ext = s * dims[i]
    ok &= all(1 <= b <= 256 for b in box) and all(1 <= e <= 8 for e in es)
    ok &= (box[0] * elem) % 16 == 0
    ok &= span is None or box[0] * elem <= span
    return bool(ok)


def _accepts(*args, **kw):
    try:
        tma.check_tiled(*args, **kw)
        return True
    except ValueError:
        return False


near16 = st.sampled_from([0, 8, 16, 2, 32, 48, 1024, 4096 + 8])


@settings(max_examples=400)
@given(
    addr=near16,
    rows=st.sampled_from([1, 7, 64, 4096, 2**32, 2**32 + 1]),
    cols=st.sampled_from([1, 8, 12, 64, 100, 4096]),
    pad=st.sampled_from([0, 8, -8, 3]),
    box0=st.sampled_from([0, 1, 8, 16, 32, 64, 72, 128, 256, 257]),
    box1=st.sampled_from([0, 1, 64, 128, 256, 257]),
    elem=st.sampled_from([1, 2, 4]),
    es1=st.sampled_from([0, 1, 8, 9]),
    swizzle=st.sampled_from(["none", "32B", "64B", "128B"]),
)
def test_checker_accepts_exactly_the_documented_cases(addr, rows, cols, pad, box0, box1, elem, es1, swizzle):
    dims = (cols, rows)
    strides = (max(cols * elem + pad * elem, 1),)
    box = (box0, box1)
    es = (1, es1)
    expect = _driver_accepts(addr, dims, strides, box, elem, es, swizzle)
    assert _accepts(addr, dims, strides, box, elem, es, swizzle) == expect


def test_seed_bk32_with_swizzle_128b_is_refused_before_launch():
    # BK = 32 fp16 -> a 64-byte inner box: legal for the driver, wrong for the kernel
    tma.check_matrix(0, 4096, 4096, 128, 32, kernel_inner_bytes=None)    # the driver's rules pass
    with pytest.raises(ValueError, match="BK=32 with SWIZZLE_128B"):
        tma.check_matrix(0, 4096, 4096, 128, 32, kernel_inner_bytes=128)
    tma.check_matrix(0, 4096, 4096, 128, 64, kernel_inner_bytes=128)


def test_messages_say_why():
    with pytest.raises(ValueError, match="not 16-byte aligned"):
        tma.check_matrix(8, 64, 64, 64, 64)
    with pytest.raises(ValueError, match="multiple of 8 elements"):
        tma.check_matrix(0, 64, 100, 64, 64)
    with pytest.raises(ValueError, match="exceeds the SWIZZLE_128B span"):
        tma.check_matrix(0, 64, 256, 64, 128, kernel_inner_bytes=None)
    with pytest.raises(ValueError, match="must be in \\[1, 256\\]"):
        tma.check_matrix(0, 1024, 64, 512, 64)
    with pytest.raises(ValueError, match="rank"):
        tma.check_tiled(0, [1] * 6, [16] * 5, [1] * 6, 2)


def test_v10_refuses_unaligned_rows_naming_v9():
    from numba_gemm.hgemm import v10_tma

    for shape in [(64, 64, 100), (64, 100, 64), (5, 13, 7)]:
        reason = v10_tma.unsupported(*shape)
        assert reason and "v9" in reason and "16 bytes" in reason
    assert v10_tma.unsupported(1, 8, 8) is None
    with pytest.raises(ValueError, match="v9"):
        _wgmma.check_operands("v10", 8, 0, 64, 64, 64, v10_tma.CONFIG)     # unaligned base pointer


@pytest.mark.gpu
def test_encode_real_maps():
    from numba import cuda

    from numba_gemm.hgemm import v10_tma

    cuda.current_context()
    a = cuda.device_array((300, 72), np.float16)
    box_a, box_b = _wgmma.boxes(v10_tma.CONFIG)
    m = tma.matrix_map(np.float16, a.__cuda_array_interface__["data"][0], 300, 72, *box_a)
    assert m.getPtr() != 0
    b = cuda.device_array((72, 520), np.uint16)     # bf16 bits
    tma.matrix_map(np.uint16, b.__cuda_array_interface__["data"][0], 72, 520, *box_b)
