// mma_stage.cuh - the consumer side of the swizzled mma.sync levels (v8, v9, v10): each warp's
// ldmatrix addresses in a 128-byte-swizzled stage, its A/B fragments, and mma.sync.m16n8k16
// over one BK-deep stage into fp32 accumulators (MT x NT tiles of 16 x 8 per warp).
//
// Per 16-wide k step a warp issues MT ldmatrix.x4 for A, NT/2 ldmatrix.x4.trans for B and
// MT*NT mma (64 x 64 warp tile: 4 + 4 loads of 512 B for 32 mma of 4096 FLOPs).
#pragma once

#include "tile_config.cuh"

namespace hg {

// This lane's ldmatrix addresses relative to a stage, swizzle included (computed once).
// A (x4): matrices (m0-7,k0-7) (m8-15,k0-7) (m0-7,k8-15) (m8-15,k8-15) = mma's a0..a3; lane
// supplies row lane%16, logical chunk lane/16. Chunk 2kk + lane/16 of row r is at
// (2kk + lane/16) ^ (r%8) = ((lane/16) ^ (r%8)) ^ 2kk, so a k step is an XOR with kk*32 bytes.
__device__ __forceinline__ u32 a_lane_offset(int warp_m, int lane) {
    return warp_m * (WM * 128) + swz128(lane % 16, lane / 16);
}
// B (x4.trans): matrices (k0-7,n0-7) (k8-15,n0-7) (k0-7,n8-15) (k8-15,n8-15) = b0b1, b2b3 of
// two n8 tiles; lane supplies k-row lane%8 + 8*((lane/8)%2), chunk c0 + lane/16, where the
// warp's first column is chunk c0 of its panel. The next 16 columns are 2 chunks on: an XOR
// with j*32 bytes (c0 is a multiple of WN/8, so c0 + 2j never carries into c0's bits); every
// 4th j starts the next panel.
__device__ __forceinline__ u32 b_lane_offset(int warp_n, int lane) {
    const int col0 = warp_n * WN;
    return A_BYTES + (col0 / 64) * B_PANEL +
           swz128(lane % 8 + 8 * ((lane / 8) % 2), (col0 % 64) / 8 + lane / 16);
}

__device__ __forceinline__ void load_frags(u32 (&af)[MT][4], u32 (&bf)[NT / 2][4], u32 a_thr,
                                           u32 b_thr, int kk) {
    #pragma unroll
    for (int i = 0; i < MT; ++i) ldmatrix_x4(af[i], (a_thr + i * 16 * 128) ^ (kk * 32));
    #pragma unroll
    for (int j = 0; j < NT / 2; ++j)
        ldmatrix_x4_trans(bf[j], (b_thr + kk * 16 * 128 + (j / 4) * B_PANEL) ^ ((j % 4) * 32));
}

template <typename T>
__device__ __forceinline__ void mma_frags(float (&acc)[MT][NT][4], const u32 (&af)[MT][4],
                                          const u32 (&bf)[NT / 2][4]) {
    #pragma unroll
    for (int i = 0; i < MT; ++i)
        #pragma unroll
        for (int j = 0; j < NT / 2; ++j) {
            mma_16816(acc[i][2 * j], af[i], bf[j][0], bf[j][1], T());
            mma_16816(acc[i][2 * j + 1], af[i], bf[j][2], bf[j][3], T());
        }
}

__device__ __forceinline__ void zero_acc(float (&acc)[MT][NT][4]) {
    #pragma unroll
    for (int i = 0; i < MT; ++i)
        #pragma unroll
        for (int j = 0; j < NT; ++j)
            #pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
}

// One BK-deep stage: 4 k16 steps of MT + NT/2 ldmatrix and MT*NT mma.
// a_thr, b_thr: stage base + the lane offsets above; the stage base must be 1024-byte aligned
// (the XORs touch bits 4..6). HG_FRAG_PIPE double-buffers the fragments: step kk+1's ldmatrix
// are issued before step kk's mma, so their latency hides behind the mma of the same warp
// instead of relying on the other warps of the scheduler (costs MT*4 + NT*2 registers).
template <typename T>
__device__ __forceinline__ void mma_stage(float (&acc)[MT][NT][4], u32 a_thr, u32 b_thr) {
#if HG_FRAG_PIPE
    u32 af[2][MT][4], bf[2][NT / 2][4];
    load_frags(af[0], bf[0], a_thr, b_thr, 0);
    #pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
        if (kk + 1 < BK / 16) load_frags(af[(kk + 1) % 2], bf[(kk + 1) % 2], a_thr, b_thr, kk + 1);
        mma_frags<T>(acc, af[kk % 2], bf[kk % 2]);
    }
#else
    #pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
        u32 af[MT][4], bf[NT / 2][4];
        load_frags(af, bf, a_thr, b_thr, kk);
        mma_frags<T>(acc, af, bf);
    }
#endif
}

}  // namespace hg
