"""Device-side helpers for kernels written in numba.cuda: intrinsics, each with a simulator twin.
Imports nothing of numba_gemm but util; the levels, measure and explain import it.

    intrinsics 128-bit loads and stores and the read-only data path of the SGEMM levels
               (numba_gemm.ptx.intrinsics; its own module, not re-exported here)
    mma_sync   ldmatrix, mma.sync and cp.async (the v8py level), the whole-warp host mirrors of
               ldmatrix and mma.sync, and the per-warp rendezvous of their simulator twins
    hopper     mbarrier, TMA and wgmma (the v11py level), their host mirrors and twins
    inline_copy  Numba's inliner with one memo per copied IR: the same kernels in half the
               compile time (installed when this package is imported)

Callers take every tensor-core intrinsic from here (`from numba_gemm import ptx; ptx.mma_f16`):
which module holds it follows the instruction's generation, which the caller need not know.
"""
from . import inline_copy
from .mma_sync import (SIMULATOR, a_fragment_coords, b_fragment_coords, c_fragment_coords,
                       cp_async16, cp_async_commit, cp_async_wait, ldmatrix_coords, ldmatrix_warp,
                       ldmatrix_x4, ldmatrix_x4_trans, mma_bf16, mma_f16, mma_warp, smem_u32)
from .hopper import (decode_smem_desc, fence_mbarrier_init, fence_operands, fence_proxy_async,
                     fence_tensormap_acquire, mbar_arrive, mbar_arrive_expect_tx, mbar_init,
                     mbar_wait, prefetch_tensormap, sim_tensor_map, tma_box, tma_load_2d,
                     warp_sync, wgmma_acc_coords, wgmma_bf16, wgmma_commit, wgmma_f16, wgmma_fence,
                     wgmma_operand_a, wgmma_operand_b, wgmma_wait, wgmma_warpgroup)

__all__ = [
    "smem_u32", "ldmatrix_x4", "ldmatrix_x4_trans", "mma_f16", "mma_bf16", "cp_async16",
    "cp_async_commit", "cp_async_wait", "ldmatrix_warp", "mma_warp", "a_fragment_coords",
    "b_fragment_coords", "c_fragment_coords", "ldmatrix_coords", "SIMULATOR",
    "mbar_init", "fence_mbarrier_init", "fence_proxy_async", "mbar_arrive",
    "mbar_arrive_expect_tx", "mbar_wait", "fence_tensormap_acquire", "prefetch_tensormap",
    "tma_load_2d", "warp_sync", "wgmma_fence", "wgmma_commit", "wgmma_wait", "wgmma_f16",
    "wgmma_bf16", "fence_operands", "wgmma_acc_coords", "decode_smem_desc", "wgmma_operand_a",
    "wgmma_operand_b", "wgmma_warpgroup", "sim_tensor_map", "tma_box",
]

inline_copy.install()   # the levels' inline="always" helpers compile in half the time
