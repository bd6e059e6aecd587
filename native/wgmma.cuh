// wgmma.cuh - warpgroup-level instructions (sm_90a): shared-memory matrix descriptors, the wgmma
// fences, wgmma.mma_async m64nNk16 (N = 16, 32, 64, 128, 256) with fp32 accumulators (fp16, bf16),
// setmaxnreg, and the epilogues for wgmma's accumulator layout.
//
// A warpgroup is 4 consecutive warps starting at a warp index divisible by 4; all 128 threads
// issue each wgmma together. The instruction is asynchronous: it reads A and B from shared
// memory through 64-bit descriptors while the issuing threads go on, and it owns the
// accumulator registers until wgmma.wait_group says its group is complete.
#pragma once

#include "ptx.cuh"
#include "c_element.cuh"

// ---- matrix descriptors (PTX ISA, "Matrix Descriptor Format") -------------------------------
//   bits  0-13  start address >> 4        bits 16-29  leading-dimension byte offset >> 4
//   bits 32-45  stride-dimension byte offset >> 4
//   bits 49-51  base offset (0: every swizzle atom starts on a 1024-byte boundary)
//   bits 62-63  swizzle: 0 none, 1 128B, 2 64B, 3 32B
// numba_gemm.hgemm._wgmma.smem_desc is the same function on the host (tested bit by bit).
__device__ __forceinline__ u64 smem_desc_sw128(u32 addr, u32 lbo, u32 sbo) {
    return (u64)((addr >> 4) & 0x3FFF) | ((u64)((lbo >> 4) & 0x3FFF) << 16) |
           ((u64)((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
}

// The thread's warpgroup, read from lane 0. Every lane of a warp has the same threadIdx.x / 128,
// but the compiler cannot prove it; a value broadcast by __shfl_sync it knows is warp-uniform, so
// the descriptors built from it stay in uniform registers (no R2UR before each HGMMA).
__device__ __forceinline__ int warpgroup_index() {
    return __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0);
}

// ---- ordering -------------------------------------------------------------------------------
// wgmma.fence: this warpgroup's earlier register writes (the accumulators) are visible to the
// wgmma that follows. Needed before the first wgmma of each batch.
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
// Close the batch of wgmma issued since the last commit into one group.
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Wait until at most N groups are pending: their shared-memory reads and register writes are done.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}

// ---- setmaxnreg: move registers between warpgroups -----------------------------------------
// Every thread of the warpgroup executes it. Effective only when the kernel has a register cap
// at entry (__launch_bounds__(threads, 1)) and each role is one branch of an if/else; ptxas
// says C7508 when it ignores it. dec releases registers to the SM's pool, inc waits for them.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(N));
}

// ---- D(64 x N, fp32) += A(64 x 16) * B(16 x N), N = 16, 32, 64, 128 or 256 ------------------
// A K-major (imm-trans-a 0), B N-major (imm-trans-b 1: B is stored k-row by k-row, n contiguous,
// as the row-major B matrix is). scale-d (a predicate) 1: accumulate. Thread t of the warpgroup
// holds N / 2 accumulators: for n8 block j, d[4j+0..1] = D[16(t/32) + (t%32)/4][8j + 2(t%4) + 0..1]
// and d[4j+2..3] the same 8 rows further down - mma.sync's 16 x 8 accumulator layout, once per
// warp and n8 block.
//
// The asm operands: %0 .. %(N/2 - 1) the accumulators, then the two descriptors, scale-d and
// imm-trans-b. HG_ACC_EACH_<N/2>(X) applies X to 1 .. N/2 - 1 (the numbers are written once,
// here) and makes both lists: the registers "%0, %1, ..." in the asm string and the "+f"(d[i])
// operands; %0 / d[0] lead, so each X can begin with its comma.
#define HG_ACC_EACH_8(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define HG_ACC_EACH_16(X) HG_ACC_EACH_8(X) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define HG_ACC_EACH_32(X) HG_ACC_EACH_16(X)                                                    \
    X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29) X(30) \
    X(31)
#define HG_ACC_EACH_64(X) HG_ACC_EACH_32(X)                                                    \
    X(32) X(33) X(34) X(35) X(36) X(37) X(38) X(39) X(40) X(41) X(42) X(43) X(44) X(45) X(46)  \
    X(47) X(48) X(49) X(50) X(51) X(52) X(53) X(54) X(55) X(56) X(57) X(58) X(59) X(60) X(61)  \
    X(62) X(63)
#define HG_ACC_EACH_128(X) HG_ACC_EACH_64(X)                                                   \
    X(64) X(65) X(66) X(67) X(68) X(69) X(70) X(71) X(72) X(73) X(74) X(75) X(76) X(77) X(78)  \
    X(79) X(80) X(81) X(82) X(83) X(84) X(85) X(86) X(87) X(88) X(89) X(90) X(91) X(92) X(93)  \
    X(94) X(95) X(96) X(97) X(98) X(99) X(100) X(101) X(102) X(103) X(104) X(105) X(106)       \
    X(107) X(108) X(109) X(110) X(111) X(112) X(113) X(114) X(115) X(116) X(117) X(118) X(119) \
    X(120) X(121) X(122) X(123) X(124) X(125) X(126) X(127)
#define HG_ACC_REG(i) ", %" #i
#define HG_ACC_OPERAND(i) , "+f"(d[i])

// One m64n<n>k16 wgmma for element type `ab` ("f16" / "bf16") with `acc` = n / 2 accumulators;
// desc_a, desc_b, scale-d, imm-trans-a and imm-trans-b are operands %acc .. %acc+4, given as
// numbers (the preprocessor cannot add).
#define HG_WGMMA_M64NK16(n, acc, ab, op_a, op_b, op_scale, op_ta, op_tb)                      \
    asm volatile(                                                                               \
        "{\n"                                                                                   \
        ".reg .pred acc;\n"                                                                     \
        "setp.ne.b32 acc, %" #op_scale ", 0;\n"                                                 \
        "wgmma.mma_async.sync.aligned.m64n" #n "k16.f32." ab "." ab " {%0"                      \
        HG_ACC_EACH_##acc(HG_ACC_REG) "}, %" #op_a ", %" #op_b ", acc, 1, 1, %" #op_ta ", %" #op_tb ";\n" \
        "}\n"                                                                                   \
        : "+f"(d[0]) HG_ACC_EACH_##acc(HG_ACC_OPERAND)                                          \
        : "l"(desc_a), "l"(desc_b), "n"(1), "n"(TRANS_A), "n"(TRANS_B))

// wgmma_m64nNk16<TRANS_B, TRANS_A>(d, desc_a, desc_b, T()): N follows d's length (N / 2), T the
// inputs' type. TRANS_B = 1 (the levels): B is N-major as TMA writes the row-major B; 0: K-major.
// TRANS_A = 0: A is K-major as the row-major A; 1: M-major (v11t, whose A operand is a panel of B).
#define HG_WGMMA_DEFINE(n, acc, op_a, op_b, op_scale, op_ta, op_tb)                            \
    template <int TRANS_B = 1, int TRANS_A = 0>                                                 \
    __device__ __forceinline__ void wgmma_m64nNk16(float (&d)[acc], u64 desc_a, u64 desc_b,    \
                                                   __half) {                                    \
        HG_WGMMA_M64NK16(n, acc, "f16", op_a, op_b, op_scale, op_ta, op_tb);                    \
    }                                                                                           \
    template <int TRANS_B = 1, int TRANS_A = 0>                                                 \
    __device__ __forceinline__ void wgmma_m64nNk16(float (&d)[acc], u64 desc_a, u64 desc_b,    \
                                                   __nv_bfloat16) {                             \
        HG_WGMMA_M64NK16(n, acc, "bf16", op_a, op_b, op_scale, op_ta, op_tb);                   \
    }
HG_WGMMA_DEFINE(16, 8, 8, 9, 10, 11, 12)
HG_WGMMA_DEFINE(32, 16, 16, 17, 18, 19, 20)
HG_WGMMA_DEFINE(64, 32, 32, 33, 34, 35, 36)
HG_WGMMA_DEFINE(128, 64, 64, 65, 66, 67, 68)
HG_WGMMA_DEFINE(256, 128, 128, 129, 130, 131, 132)

// ---- epilogue: one warpgroup's 64 x N accumulators to C -------------------------------------
// C[row0 + r][col0 + c] = alpha * d + beta * C (beta == 0: C is not read); 64-bit offsets.
// CT, C's element type: float, or a 16-bit C (c_element.cuh: computed in fp32, rounded once).
// Thread t holds, for n8 block j, d[4j + 0..1] at row 16 (t/32) + (t%32)/4, columns
// 8j + 2(t%4) + 0..1, and d[4j + 2..3] eight rows further down: pair stores (float2, or two
// 16-bit values), a warp's store covers 8 rows x 32 (16-bit: 16) bytes. A tile wholly inside C
// with pair-aligned rows (vec_c: base aligned to a pair, even N) takes the lean path: two row
// pointers, no per-element bounds check, the beta test outside the loop. Edge tiles mask every
// element.
// BN: the tile's width (d holds BN / 2); N: C's.
template <int BN, typename CT>
__device__ __forceinline__ void store_acc_64xN(const float (&d)[BN / 2], CT* __restrict__ C,
                                               int M, int N, long long row0, long long col0,
                                               int wg_thread, float alpha, float beta, bool vec_c) {
    constexpr int NB = BN / 8;   // n8 blocks
    const int warp = wg_thread / 32, lane = wg_thread % 32, g = lane / 4, q = lane % 4;
    if (vec_c && row0 + 64 <= M && col0 + 8 * NB <= N) {
        CT* c0 = C + (row0 + 16 * warp + g) * N + col0 + 2 * q;
        CT* c1 = c0 + 8ll * N;
        if (beta == 0.0f) {
            #pragma unroll
            for (int j = 0; j < NB; ++j) {
                store_pair(c0 + 8 * j, alpha * d[4 * j], alpha * d[4 * j + 1]);
                store_pair(c1 + 8 * j, alpha * d[4 * j + 2], alpha * d[4 * j + 3]);
            }
        } else {
            #pragma unroll
            for (int j = 0; j < NB; ++j) {
                const float2 o0 = load_pair(c0 + 8 * j), o1 = load_pair(c1 + 8 * j);
                store_pair(c0 + 8 * j, alpha * d[4 * j] + beta * o0.x, alpha * d[4 * j + 1] + beta * o0.y);
                store_pair(c1 + 8 * j, alpha * d[4 * j + 2] + beta * o1.x, alpha * d[4 * j + 3] + beta * o1.y);
            }
        }
        return;
    }
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
        const long long row = row0 + 16 * warp + g + 8 * h;
        if (row >= M) continue;
        CT* crow = C + row * N;
        #pragma unroll
        for (int j = 0; j < NB; ++j) {
            const long long col = col0 + 8 * j + 2 * q;
            float v0 = alpha * d[4 * j + 2 * h], v1 = alpha * d[4 * j + 2 * h + 1];
            if (vec_c && col + 1 < N) {
                if (beta != 0.0f) {
                    const float2 old = load_pair(crow + col);
                    v0 += beta * old.x;
                    v1 += beta * old.y;
                }
                store_pair(crow + col, v0, v1);
            } else {
                if (col < N) store_one(crow + col, beta != 0.0f ? v0 + beta * to_float(crow[col]) : v0);
                if (col + 1 < N)
                    store_one(crow + col + 1, beta != 0.0f ? v1 + beta * to_float(crow[col + 1]) : v1);
            }
        }
    }
}

// ---- epilogue through shared memory and TMA stores (beta == 0) -----------------------------
// The same 64 x BN tile as boxes of 64 rows x 128 bytes (8 KB): BN / 32 boxes of 32 floats, or
// BN / 64 of 64 16-bit values (CT, as store_acc_64xN). The warpgroup writes a box into one of two
// buffers at `buf` (1024-byte aligned, SWIZZLE_128B: 16-byte chunk k of row r at k ^ (r % 8),
// so the 8 rows of a warp's pair stores hit different banks) and thread 0 stores it with TMA:
// the warpgroup goes back to its K loop once the last box is issued, while the stores drain.
// A buffer is written again only after the store issued from it two boxes earlier has read it
// (wait_group.read 1); `bar` is the warpgroup's named barrier. TMA clips the rows and columns
// past M and N. Thread 0 must bulk_wait<0>() before the CTA exits.
template <int BN, typename CT>
__device__ __forceinline__ void store_acc_64xN_tma(const float (&d)[BN / 2], const void* tm_c, u32 buf,
                                                   int row0, int col0, int wg_thread, u32 bar,
                                                   float alpha) {
    constexpr int COLS = 128 / sizeof(CT), BOXES = BN / COLS, JJ = COLS / 8;   // n8 blocks per box
    const int warp = wg_thread / 32, lane = wg_thread % 32, g = lane / 4, q = lane % 4;
    // fp32: a warp's 8-byte stores are served a half-warp (g < 4, g >= 4) at a time, and in
    // block order both halves of a half-warp's lanes (q < 2, q >= 2) land in the same 4 of a
    // row's 8 chunks: two wavefronts per half (ncu: 4-way conflicts on every store). Lanes
    // q >= 2 take the blocks in the order jj ^ 2, the other 4 chunks: one wavefront per half.
    // 16-bit C stores 4 bytes a lane, and a warp's 32 stores already meet 32 banks.
    const int flip = (sizeof(CT) == 4 && q >= 2) ? 2 : 0;
    #pragma unroll
    for (int box = 0; box < BOXES; ++box) {
        const u32 b = buf + (box & 1) * 8192;
        if (wg_thread == 0) bulk_wait_read<1>();
        named_sync(bar, 128);                               // b is free
        #pragma unroll
        for (int jj = 0; jj < JJ; ++jj) {
            const int j = JJ * box + jj, jf = JJ * box + (jj ^ 2);   // this lane's block: j or jf
            #pragma unroll
            for (int h = 0; h < 2; ++h) {
                const u32 r = 16 * warp + g + 8 * h, byte = (8 * (jj ^ flip) + 2 * q) * sizeof(CT);
                const float v0 = flip ? d[4 * jf + 2 * h] : d[4 * j + 2 * h];
                const float v1 = flip ? d[4 * jf + 2 * h + 1] : d[4 * j + 2 * h + 1];
                st_shared_pair(b + r * 128 + ((((byte >> 4) ^ (r & 7)) << 4) | (byte & 15)),
                               alpha * v0, alpha * v1, CT());
            }
        }
        fence_proxy_async();                                // visible to the TMA engine
        named_sync(bar, 128);                               // the whole box is written
        if (wg_thread == 0) {
            tma_store_2d(tm_c, col0 + COLS * box, row0, b);
            bulk_commit();
        }
    }
}

// ---- one 64-deep stage: D(64 x BN) += A(64 x 64) * B(64 x BN) -------------------------------
// A: K-major 128-byte rows (k step = +32 bytes on the start address); B: N-major, BN / 64
// panels of 64 k-rows (k step = +16 rows = +2048 bytes). Descriptor start addresses are in
// 16-byte units in bits 0-13, so adding (bytes >> 4) moves the start (no carry: addresses
// < 256 KB). BN defaults to the 256 of the levels written for one tile width (v11r, v12, v13).
template <typename T, int BN = 256>
__device__ __forceinline__ void wgmma_k64(float (&d)[BN / 2], u64 desc_a, u64 desc_b) {
    wgmma_fence();
    #pragma unroll
    for (int kk = 0; kk < 4; ++kk)
        wgmma_m64nNk16(d, desc_a + ((kk * 32) >> 4), desc_b + ((kk * 2048) >> 4), T());
    wgmma_commit();
}

// ---- the 64 x 256 names of the levels written for one tile width (v11r, v12, v13) -------------
template <typename CT>
__device__ __forceinline__ void store_acc_64x256(const float (&d)[128], CT* __restrict__ C,
                                                 int M, int N, long long row0, long long col0,
                                                 int wg_thread, float alpha, float beta, bool vec_c) {
    store_acc_64xN<256>(d, C, M, N, row0, col0, wg_thread, alpha, beta, vec_c);
}
template <typename CT>
__device__ __forceinline__ void store_acc_64x256_tma(const float (&d)[128], const void* tm_c, u32 buf,
                                                     int row0, int col0, int wg_thread, u32 bar,
                                                     float alpha) {
    store_acc_64xN_tma<256, CT>(d, tm_c, buf, row0, col0, wg_thread, bar, alpha);
}
