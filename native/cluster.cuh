// cluster.cuh - thread-block clusters (sm_90): who am I in the cluster, cluster-wide barriers,
// arriving on a partner CTA's mbarrier, and TMA loads multicast to several CTAs of the cluster.
//
// A cluster's CTAs run at the same time on one GPC and can address each other's shared memory
// ("distributed shared memory"): a shared::cta address names the same offset in every CTA,
// mapa turns it into the shared::cluster address of that offset in CTA `rank`.
#pragma once

#include "ptx.cuh"

__device__ __forceinline__ u32 cluster_ctarank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
__device__ __forceinline__ u32 cluster_id_x() {
    u32 r;
    asm volatile("mov.u32 %0, %%clusterid.x;\n" : "=r"(r));
    return r;
}
__device__ __forceinline__ u32 cluster_count_x() {
    u32 r;
    asm volatile("mov.u32 %0, %%nclusterid.x;\n" : "=r"(r));
    return r;
}

// Every thread of every CTA of the cluster arrives, then waits for all: orders the barrier
// initialisation before any remote access at the start, and keeps a CTA's shared memory alive
// at the end until its partner can no longer arrive on it.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\n"
                 "barrier.cluster.wait.acquire;\n" ::: "memory");
}

// cluster_sync for the barrier right after the mbarriers' set-up (init_stage_ring), when that is
// all a partner needs to see: fence.mbarrier_init.release.cluster has already released the
// set-up to the cluster, so the arrival can be .relaxed (the pairing CUTLASS's sm90 kernels
// and Triton's Gluon use). A .release arrival compiles to MEMBAR.ALL.GPU: 0.4-0.6 us of v13's
// start on an H100 (docs/RESULTS.md).
__device__ __forceinline__ void cluster_sync_after_init() {
    asm volatile("barrier.cluster.arrive.relaxed;\n"
                 "barrier.cluster.wait.acquire;\n" ::: "memory");
}

// Arrive on the mbarrier at shared::cta offset `bar` of CTA `rank` (itself included), with the
// default .release.cta semantics: the arrival only has to follow this thread's wgmma reads,
// which wgmma.wait_group already completed. (.release.cluster would compile to MEMBAR.ALL.GPU,
// a full fence per arrival that also waits for the previous tile's C stores.)
__device__ __forceinline__ void mbar_arrive_cluster(u32 bar, u32 rank) {
    asm volatile(
        "{\n"
        ".reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
        "}\n" :: "r"(bar), "r"(rank) : "memory");
}

// tma_load_2d whose box lands at shared offset `dst` of every CTA in `cta_mask` (bit r = rank
// r), each completing its bytes on its own mbarrier at offset `bar`. One L2 read, several SMs.
__device__ __forceinline__ void tma_load_2d_multicast(u32 dst, const void* tmap, int x, int y,
                                                      u32 bar, unsigned short cta_mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n"
        :: "r"(dst), "l"(reinterpret_cast<u64>(tmap)), "r"(x), "r"(y), "r"(bar), "h"(cta_mask)
        : "memory");
}

// Two floats at shared::cta offset `addr` of CTA `rank` of the cluster (distributed shared
// memory: mapa, then a shared::cluster load).
__device__ __forceinline__ float2 ld_cluster_f2(u32 addr, u32 rank) {
    float2 v;
    asm volatile(
        "{\n"
        ".reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %2, %3;\n"
        "ld.shared::cluster.v2.f32 {%0, %1}, [remote];\n"
        "}\n" : "=f"(v.x), "=f"(v.y) : "r"(addr), "r"(rank) : "memory");
    return v;
}

// One float at shared::cta offset `addr` of CTA `rank` (as ld_cluster_f2).
__device__ __forceinline__ float ld_cluster_f1(u32 addr, u32 rank) {
    float v;
    asm volatile(
        "{\n"
        ".reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %1, %2;\n"
        "ld.shared::cluster.f32 %0, [remote];\n"
        "}\n" : "=f"(v) : "r"(addr), "r"(rank) : "memory");
    return v;
}
