// wgmma_epilogues.cu - both 64 x N epilogues of wgmma.cuh (registers: store_acc_64xN; shared
// memory + TMA stores: store_acc_64xN_tma) at every width wgmma.cuh makes (N = 64, 128, 256)
// and every C type (fp32, fp16, bf16), one kernel each. v11 and v11sk use the register path at
// every width and v13 the TMA path at 256; this source makes CI compile and census the rest.
// Compiled, never launched (tests/test_wgmma_tiles.py).
//
// epi_<N>_<C type>: the warpgroup's N / 2 accumulators come from `acc` (so nothing folds);
// beta != 0 takes the register path, beta == 0 the TMA path into two 8 KB boxes at the start of
// shared memory (1024-byte aligned for SWIZZLE_128B).
#include "wgmma.cuh"
#include "tensor_map.cuh"

template <int N, typename CT>
__device__ __forceinline__ void both_epilogues(const CUtensorMap* tm_c, const float* __restrict__ acc,
                                               CT* __restrict__ C, int M, int ldc, float alpha,
                                               float beta, int vec_c) {
    extern __shared__ __align__(1024) char smem[];
    const int t = threadIdx.x;
    float d[N / 2];
    #pragma unroll
    for (int i = 0; i < N / 2; ++i) d[i] = acc[i * 128 + t];
    if (beta != 0.0f) {
        store_acc_64xN<N>(d, C, M, ldc, 64ll * blockIdx.y, (long long)N * blockIdx.x, t, alpha, beta, vec_c);
    } else {
        store_acc_64xN_tma<N, CT>(d, tm_c, smem_u32(smem), 64 * blockIdx.y, N * blockIdx.x, t, 1, alpha);
        if (t == 0) bulk_wait<0>();
    }
}

#define HG_EPILOGUE_KERNEL(n, name, CT)                                                          \
    extern "C" __global__ void __launch_bounds__(128, 1) epi_##n##_##name(                     \
        const __grid_constant__ CUtensorMap tm_c, const float* __restrict__ acc, CT* C, int M,   \
        int ldc, float alpha, float beta, int vec_c) {                                          \
        both_epilogues<n, CT>(&tm_c, acc, C, M, ldc, alpha, beta, vec_c);                       \
    }
#define HG_EPILOGUE_KERNELS(n)                  \
    HG_EPILOGUE_KERNEL(n, f32, float)           \
    HG_EPILOGUE_KERNEL(n, f16, __half)          \
    HG_EPILOGUE_KERNEL(n, bf16, __nv_bfloat16)
HG_EPILOGUE_KERNELS(64)
HG_EPILOGUE_KERNELS(128)
HG_EPILOGUE_KERNELS(256)
