// tensor_ceilings.cu - how fast the tensor cores go when nothing else is in the way: the
// ceilings the HGEMM levels are measured against (numba_gemm.microbench, "tensor" ceilings).
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
// Each block's thread 0 records its clock64 span and SM, so the host gets both the rate per SM
// cycle and the clock the SMs ran at. The sums written to `out` keep every result live.
//
// The host gives the loop shapes (numba_gemm.microbench.TENSOR_DEFINES), so the FLOP count it
// divides by has one source: -DMMA_CHAINS (independent accumulators per warp, enough to cover
// the mma latency) and -DWG_BATCH (wgmma per commit group).
#include "ptx.cuh"

#if !defined(MMA_CHAINS) || !defined(WG_BATCH)
#error "compile with -DMMA_CHAINS and -DWG_BATCH (numba_gemm.microbench.TENSOR_DEFINES)"
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

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}

// d (64 x 256 fp32, 128 registers per thread of the warpgroup) += A (64 x 16) * B (16 x 256).
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], u64 desc_a, u64 desc_b) {
    asm volatile(
        "{\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, "
        "%8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, "
        "%24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, "
        "%40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, "
        "%56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, "
        "%72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, "
        "%88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, "
        "%104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, "
        "%120, %121, %122, %123, %124, %125, %126, %127 "
        "},\n"
        " %128, %129, 1, 1, 1, 0, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(desc_a), "l"(desc_b));
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
        for (int j = 0; j < WG_BATCH; ++j) wgmma_m64n256k16(d, desc_a, desc_b);
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
