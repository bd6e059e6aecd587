// tensor_ceilings.cu - how fast the tensor cores go when nothing else is in the way: the
// ceilings the HGEMM levels are measured against (numba_gemm.measure.microbench, "tensor" ceilings).
//
//   mma_sync_loop: mma.sync.m16n8k16 (f16 x f16 -> f32), the instruction of v8-v10, from
//     registers only: each warp runs CHAINS independent accumulator chains over fragments that
//     stay in registers, so no load, no shared memory and no barrier limits the issue rate.
//   wgmma_loop: wgmma.mma_async m64n256k16 (f16 x f16 -> f32), Hopper's warpgroup MMA, with A
//     and B read from shared memory through matrix descriptors as a GEMM main loop does; each
//     warpgroup (128 threads) owns a 64 x 256 fp32 accumulator (128 registers per thread) and
//     issues WG_BATCH wgmma per commit group, keeping one group in flight. Two warpgroups per
//     block, one block per SM (the accumulators leave no room for a second).
//
//   ldmatrix_loop / ldmatrix_trans_loop: ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16, the
//     fragment load of v8-v10, the price of the shared-memory reads that feed mma.sync. Each warp
//     issues LDSM_BATCH x4 loads per iteration from a conflict-free pattern (lane l names the
//     16-byte row at 16 l, so each 8x8 matrix is 128 contiguous bytes: all 32 banks once) and
//     adds the four registers of every load into four accumulators, so no load is dead code and
//     the host can check each lane's sums against the ISA's fragment layout (numba_gemm.ptx).
//
// Each block's thread 0 records its clock64 span and SM, so the host gets both the rate per SM
// cycle and the clock the SMs ran at. The sums written to `out` keep every result live.
//
// The host gives the loop shapes (numba_gemm.measure.tensor_ceilings.TENSOR_DEFINES), so the FLOP and byte
// counts it divides by have one source: -DMMA_CHAINS (independent accumulators per warp, enough
// to cover the mma latency), -DWG_BATCH (wgmma per commit group) and -DLDSM_BATCH (ldmatrix per
// loop iteration).
#include "ptx.cuh"
#include "wgmma.cuh"   // wgmma_fence / commit / wait, wgmma_m64nNk16

#if !defined(MMA_CHAINS) || !defined(WG_BATCH) || !defined(LDSM_BATCH)
#error "compile with -DMMA_CHAINS, -DWG_BATCH and -DLDSM_BATCH (numba_gemm.measure.tensor_ceilings.TENSOR_DEFINES)"
#endif

// Thread 0 writes its block's clock64 span and the SM it ran on: cyc[3b .. 3b+2].
__device__ __forceinline__ void record_block(u64* cyc, u64 t0, u64 t1) {
    if (threadIdx.x == 0) {
        u32 sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        cyc[3 * blockIdx.x] = t0;
        cyc[3 * blockIdx.x + 1] = t1;
        cyc[3 * blockIdx.x + 2] = sm;
    }
}

// ---- mma.sync from registers ---------------------------------------------------------------

constexpr int CHAINS = MMA_CHAINS;

extern "C" __global__ void __launch_bounds__(256) mma_sync_loop(const u32* __restrict__ in,
                                                                 float* __restrict__ out,
                                                                 u64* __restrict__ cyc, int iters) {
    const int lane = threadIdx.x % 32;
    u32 a[4], b0 = in[lane + 128], b1 = in[lane + 160];
    #pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = in[lane + 32 * i];   // data, not constants the compiler knows
    float d[CHAINS][4];
    #pragma unroll
    for (int c = 0; c < CHAINS; ++c)
        #pragma unroll
        for (int e = 0; e < 4; ++e) d[c][e] = 0.0f;

    __syncthreads();
    u64 t0 = clock64();
    for (int it = 0; it < iters; ++it) {
        #pragma unroll
        for (int c = 0; c < CHAINS; ++c) mma_16816(d[c], a, b0, b1, __half());
    }
    __syncthreads();
    u64 t1 = clock64();

    float s = 0.0f;
    #pragma unroll
    for (int c = 0; c < CHAINS; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
    record_block(cyc, t0, t1);
}

// ---- wgmma from shared memory --------------------------------------------------------------

constexpr int WG_A_BYTES = 64 * 16 * 2;  // A: 64 (m) x 16 (k) f16
constexpr int WG_B_BYTES = 256 * 16 * 2; // B: 256 (n) x 16 (k) f16, k contiguous

// Matrix descriptor (PTX ISA, "Matrix Descriptor Format"), no swizzle: the operand is 8 x 8
// core matrices of 128 contiguous bytes; core matrices adjacent in k are LBO bytes apart, in
// m or n SBO bytes apart. Here the two k halves of each 8-row group are adjacent (LBO 128) and
// 8-row groups follow each other (SBO 256).
__device__ __forceinline__ u64 wgmma_desc(u32 smem_addr) {
    const u64 start = (smem_addr & 0x3FFFF) >> 4, lbo = 128 >> 4, sbo = 256 >> 4;
    return start | (lbo << 16) | (sbo << 32);
}

extern "C" __global__ void __launch_bounds__(256, 1) wgmma_loop(const u32* __restrict__ in,
                                                               float* __restrict__ out,
                                                               u64* __restrict__ cyc, int iters) {
    __shared__ __align__(128) u32 tiles[(WG_A_BYTES + WG_B_BYTES) / 4];
    for (int i = threadIdx.x; i < (WG_A_BYTES + WG_B_BYTES) / 4; i += blockDim.x) tiles[i] = in[i];
    fence_proxy_async();   // generic-proxy stores, then reads by the async proxy (wgmma)
    __syncthreads();
    const u32 base = smem_u32(tiles);
    const u64 desc_a = wgmma_desc(base), desc_b = wgmma_desc(base + WG_A_BYTES);

    float d[128];
    #pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;

    __syncthreads();
    u64 t0 = clock64();
    for (int it = 0; it < iters; ++it) {
        wgmma_fence();
        #pragma unroll
        for (int j = 0; j < WG_BATCH; ++j) wgmma_m64nNk16<0>(d, desc_a, desc_b, __half());    // N = 256, B K-major
        wgmma_commit();
        wgmma_wait<1>();
    }
    wgmma_wait<0>();
    __syncthreads();
    u64 t1 = clock64();

    float s = 0.0f;
    #pragma unroll
    for (int i = 0; i < 128; ++i) s += d[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
    record_block(cyc, t0, t1);
}

// ---- ldmatrix from shared memory -----------------------------------------------------------

constexpr int LDSM_BYTES = 512;                          // one x4: four 8x8 b16 matrices
constexpr int LDSM_TILE_WORDS = 2 * LDSM_BATCH * LDSM_BYTES / 4;   // two halves, alternating

// out[4 t + i] = the sum (mod 2^32) of register i over every load of thread t.
template <bool TRANS>
__device__ __forceinline__ void ldmatrix_loop_body(const u32* __restrict__ in, u32* __restrict__ out,
                                                   u64* __restrict__ cyc, int iters) {
    __shared__ __align__(128) u32 tile[LDSM_TILE_WORDS];
    for (int i = threadIdx.x; i < LDSM_TILE_WORDS; i += blockDim.x) tile[i] = in[i];
    __syncthreads();
    const u32 base = smem_u32(tile) + 16 * (threadIdx.x % 32);
    u32 acc[4] = {0u, 0u, 0u, 0u};

    __syncthreads();
    u64 t0 = clock64();
    #pragma unroll 1   // one iteration's LDSM_BATCH loads in flight, not ptxas' choice of several
    for (int it = 0; it < iters; ++it) {
        const u32 half = base + (it & 1) * (LDSM_BATCH * LDSM_BYTES);   // odd iterations: the other half
        #pragma unroll
        for (int j = 0; j < LDSM_BATCH; ++j) {
            u32 r[4];
            if (TRANS) ldmatrix_x4_trans(r, half + j * LDSM_BYTES);
            else ldmatrix_x4(r, half + j * LDSM_BYTES);
            #pragma unroll
            for (int i = 0; i < 4; ++i) acc[i] += r[i];
        }
    }
    __syncthreads();
    u64 t1 = clock64();

    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    #pragma unroll
    for (int i = 0; i < 4; ++i) out[4 * t + i] = acc[i];
    record_block(cyc, t0, t1);
}

extern "C" __global__ void __launch_bounds__(256, 4) ldmatrix_loop(const u32* __restrict__ in, u32* __restrict__ out,
                                                                 u64* __restrict__ cyc, int iters) {
    ldmatrix_loop_body<false>(in, out, cyc, iters);
}

extern "C" __global__ void __launch_bounds__(256, 4) ldmatrix_trans_loop(const u32* __restrict__ in,
                                                                       u32* __restrict__ out,
                                                                       u64* __restrict__ cyc, int iters) {
    ldmatrix_loop_body<true>(in, out, cyc, iters);
}
