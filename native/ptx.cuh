// ptx.cuh - the PTX instructions the native HGEMM levels use, one thin wrapper each.
//
// Shared-memory operands are 32-bit shared-window addresses (smem_u32), as the instructions
// take them; global operands are generic 64-bit pointers.
#pragma once

#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef unsigned int u32;
typedef unsigned long long u64;

__device__ __forceinline__ u32 smem_u32(const void* p) {
    return static_cast<u32>(__cvta_generic_to_shared(p));
}

// ---- programmatic dependent launch (sm_90+) ------------------------------------------------

// Programmatic dependent launch (a launch with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION):
// this grid may start while the previous kernel of the stream still runs. Before its first
// global access it waits until that kernel has finished and its writes are visible; it lets
// the next such kernel start once each of its CTAs has said so. Without the attribute both are
// no-ops.
__device__ __forceinline__ void wait_for_previous_grid() {
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
}
__device__ __forceinline__ void let_next_grid_start() {
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// ---- cp.async (sm_80+): global -> shared without passing through registers -----------------

// 16 bytes, L1 bypassed (.cg). src_bytes == 0 reads nothing and zero-fills all 16 bytes,
// which is how tiles past the matrix edge become zeros; src must still be a valid address.
__device__ __forceinline__ void cp_async16(u32 dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>  // wait until at most N groups are still in flight
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

// ---- ldmatrix: four 8x8 b16 matrices from shared memory into mma fragments ----------------

// Lane l supplies the address of row l%8 of matrix l/8; register i receives matrix i.
__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
// Transposed: each 8x8 matrix is stored row = k, so lane t receives column t/4 (an n index),
// rows 2(t%4), 2(t%4)+1 - exactly the B fragment layout of mma.m16n8k16 (".col").
__device__ __forceinline__ void ldmatrix_x4_trans(u32 (&r)[4], u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// ---- mma.sync m16n8k16, fp32 accumulate: d += a * b ---------------------------------------

__device__ __forceinline__ void mma_16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1, __half) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1, __nv_bfloat16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- mbarrier (sm_80+; expect_tx and try_wait.parity sm_90) --------------------------------

__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
// Make the initialised barriers visible to the async proxy (TMA) before first use.
__device__ __forceinline__ void fence_barrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
// [excerpt:mbarrier-tma]
// Arrive once and announce `bytes` of transactions (TMA completes them) for the current phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                 :: "r"(bar), "r"(bytes) : "memory");
}
// Block until the phase with the given parity has completed.
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=;\n"
        "}\n" :: "r"(bar), "r"(parity) : "memory");
}

// ---- TMA (sm_90): one instruction moves a whole 2-D box, completion counted on an mbarrier --

// x is the inner (contiguous) coordinate, y the outer one, both in elements. Boxes that
// overhang the tensor are zero-filled and still count their full size in bytes.
__device__ __forceinline__ void tma_load_2d(u32 dst, const void* tmap, int x, int y, u32 bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];\n"
        :: "r"(dst), "l"(reinterpret_cast<u64>(tmap)), "r"(x), "r"(y), "r"(bar) : "memory");
}
// [/excerpt]
// The reverse direction: a box of shared memory (laid out as the map's swizzle says) to global
// memory, in the async proxy. Parts of the box outside the tensor are not written. Completion
// is tracked per thread in bulk groups (commit, then wait).
__device__ __forceinline__ void tma_store_2d(const void* tmap, int x, int y, u32 src) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
                 :: "l"(reinterpret_cast<u64>(tmap)), "r"(x), "r"(y), "r"(src) : "memory");
}
__device__ __forceinline__ void bulk_commit() {
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
template <int N>  // at most N of this thread's bulk groups still reading shared memory
__device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" :: "n"(N) : "memory");
}
template <int N>  // at most N of this thread's bulk groups not yet complete (writes done)
__device__ __forceinline__ void bulk_wait() {
    asm volatile("cp.async.bulk.wait_group %0;\n" :: "n"(N) : "memory");
}
// Named barrier `id` (1..15; 0 is __syncthreads) over `threads` threads.
__device__ __forceinline__ void named_sync(u32 id, u32 threads) {
    asm volatile("bar.sync %0, %1;\n" :: "r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void st_shared_v2(u32 addr, float x, float y) {
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" :: "r"(addr), "f"(x), "f"(y) : "memory");
}
__device__ __forceinline__ void st_shared_f32(u32 addr, float x) {
    asm volatile("st.shared.f32 [%0], %1;\n" :: "r"(addr), "f"(x) : "memory");
}
__device__ __forceinline__ void st_shared_b32(u32 addr, u32 x) {
    asm volatile("st.shared.b32 [%0], %1;\n" :: "r"(addr), "r"(x) : "memory");
}
__device__ __forceinline__ void prefetch_tmap(const void* tmap) {
    asm volatile("prefetch.tensormap [%0];\n" :: "l"(reinterpret_cast<u64>(tmap)) : "memory");
}

// Thread 0, before the K loop: the stage ring's barriers, full[s] (one arrival: the loader's
// expect_tx; TMA completes the bytes) and empty[s] (`readers` arrivals: the warps that read
// stage s), 8 bytes apart, made visible to the async proxy, and both tensor maps prefetched.
// The CTA (or the cluster) synchronises after it, before any barrier is used.
template <int STAGES>
__device__ __forceinline__ void init_stage_ring(const void* tm_a, const void* tm_b, u32 full,
                                                u32 empty, u32 readers) {
    prefetch_tmap(tm_a);
    prefetch_tmap(tm_b);
    #pragma unroll
    for (int s = 0; s < STAGES; ++s) {
        mbar_init(full + 8 * s, 1);
        mbar_init(empty + 8 * s, readers);
    }
    fence_barrier_init();
    fence_proxy_async();
}

// ---- the 128-byte XOR swizzle (the layout TMA's SWIZZLE_128B writes) ------------------------
// A tile is stored as "panels" of 128-byte rows. 16-byte chunk c of row r is stored at chunk
// c ^ (r % 8) of that row. With the panel 1024-byte aligned this is exactly SWIZZLE_128B:
// byte offset o -> o ^ (((o >> 7) & 7) << 4).
__device__ __forceinline__ u32 swz128(u32 row, u32 chunk) {
    return row * 128u + ((chunk ^ (row & 7u)) << 4);
}
