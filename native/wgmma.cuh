// wgmma.cuh - warpgroup-level instructions (sm_90a): shared-memory matrix descriptors, the wgmma
// fences, wgmma.mma_async m64n256k16 with fp32 accumulators (fp16 and bf16), setmaxnreg, and
// the epilogue for wgmma's accumulator layout.
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

// ---- D(64 x 256, fp32) += A(64 x 16) * B(16 x 256) ------------------------------------------
// A K-major (imm-trans-a 0), B N-major (imm-trans-b 1: B is stored k-row by k-row, n contiguous,
// as the row-major B matrix is). scale-d (a predicate) 1: accumulate. Thread t of the warpgroup holds, for
// n8 block j, d[4j+0..1] = D[16(t/32) + (t%32)/4][8j + 2(t%4) + 0..1] and d[4j+2..3] the same
// 8 rows further down - mma.sync's 16 x 8 accumulator layout, once per warp and n8 block.
// The asm of one m64n256k16 wgmma for element type `ab` ("f16" / "bf16"): operands %0-%127 are
// the accumulators, %128/%129 the descriptors, %130 scale-d (1: accumulate), %131 imm-trans-b.
#define HG_WGMMA_M64N256K16(ab)                                                                 \
    asm volatile(                                                                               \
        "{\n"                                                                                   \
        ".reg .pred acc;\n"                                                                     \
        "setp.ne.b32 acc, %130, 0;\n"                                                           \
        "wgmma.mma_async.sync.aligned.m64n256k16.f32." ab "." ab " {" HG_WGMMA_ACC_REGS        \
        "}, %128, %129, acc, 1, 1, 0, %131;\n"                                                  \
        "}\n"                                                                                   \
        : HG_WGMMA_ACC_OPERANDS                                                                 \
        : "l"(desc_a), "l"(desc_b), "n"(1), "n"(TRANS_B))
#define HG_WGMMA_ACC_REGS \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define HG_WGMMA_ACC_OPERANDS \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
    "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
    "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// TRANS_B = 1 (the levels): B is N-major as TMA writes the row-major B; 0: K-major.
template <int TRANS_B = 1>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], u64 desc_a, u64 desc_b, __half) {
    HG_WGMMA_M64N256K16("f16");
}
template <int TRANS_B = 1>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], u64 desc_a, u64 desc_b, __nv_bfloat16) {
    HG_WGMMA_M64N256K16("bf16");
}

// ---- epilogue: one warpgroup's 64 x 256 accumulators to C -----------------------------------
// C[row0 + r][col0 + c] = alpha * d + beta * C (beta == 0: C is not read); 64-bit offsets.
// CT, C's element type: float, or a 16-bit C (c_element.cuh: computed in fp32, rounded once).
// Thread t holds, for n8 block j, d[4j + 0..1] at row 16 (t/32) + (t%32)/4, columns
// 8j + 2(t%4) + 0..1, and d[4j + 2..3] eight rows further down: pair stores (float2, or two
// 16-bit values), a warp's store covers 8 rows x 32 (16-bit: 16) bytes. A tile wholly inside C
// with pair-aligned rows (vec_c: base aligned to a pair, even N) takes the lean path: two row
// pointers, no per-element bounds check, the beta test outside the loop. Edge tiles mask every
// element.
template <typename CT>
__device__ __forceinline__ void store_acc_64x256(const float (&d)[128], CT* __restrict__ C,
                                                 int M, int N, long long row0, long long col0,
                                                 int wg_thread, float alpha, float beta, bool vec_c) {
    constexpr int NB = 32;   // n8 blocks
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
// The same 64 x 256 tile as boxes of 64 rows x 128 bytes (8 KB): 8 boxes of 32 floats, or 4 of
// 64 16-bit values (CT, as store_acc_64x256). The warpgroup writes a box into one of two
// buffers at `buf` (1024-byte aligned, SWIZZLE_128B: 16-byte chunk k of row r at k ^ (r % 8),
// so the 8 rows of a warp's pair stores hit different banks) and thread 0 stores it with TMA:
// the warpgroup goes back to its K loop once the last box is issued, while the stores drain.
// A buffer is written again only after the store issued from it two boxes earlier has read it
// (wait_group.read 1); `bar` is the warpgroup's named barrier. TMA clips the rows and columns
// past M and N. Thread 0 must bulk_wait<0>() before the CTA exits.
template <typename CT>
__device__ __forceinline__ void store_acc_64x256_tma(const float (&d)[128], const void* tm_c, u32 buf,
                                                     int row0, int col0, int wg_thread, u32 bar,
                                                     float alpha) {
    constexpr int COLS = 128 / sizeof(CT), BOXES = 256 / COLS, JJ = COLS / 8;   // n8 blocks per box
    const int warp = wg_thread / 32, lane = wg_thread % 32, g = lane / 4, q = lane % 4;
    #pragma unroll
    for (int box = 0; box < BOXES; ++box) {
        const u32 b = buf + (box & 1) * 8192;
        if (wg_thread == 0) bulk_wait_read<1>();
        named_sync(bar, 128);                               // b is free
        #pragma unroll
        for (int jj = 0; jj < JJ; ++jj) {
            const int j = JJ * box + jj;
            #pragma unroll
            for (int h = 0; h < 2; ++h) {
                const u32 r = 16 * warp + g + 8 * h, byte = (8 * jj + 2 * q) * sizeof(CT);
                st_shared_pair(b + r * 128 + ((((byte >> 4) ^ (r & 7)) << 4) | (byte & 15)),
                               alpha * d[4 * j + 2 * h], alpha * d[4 * j + 2 * h + 1], CT());
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

// ---- one 64-deep stage: D(64 x 256) += A(64 x 64) * B(64 x 256) -----------------------------
// A: K-major 128-byte rows (k step = +32 bytes on the start address); B: N-major panels of
// 64 k-rows (k step = +16 rows = +2048 bytes). Descriptor start addresses are in 16-byte
// units in bits 0-13, so adding (bytes >> 4) moves the start (no carry: addresses < 256 KB).
template <typename T>
__device__ __forceinline__ void wgmma_k64(float (&d)[128], u64 desc_a, u64 desc_b) {
    wgmma_fence();
    #pragma unroll
    for (int kk = 0; kk < 4; ++kk)
        wgmma_m64n256k16(d, desc_a + ((kk * 32) >> 4), desc_b + ((kk * 2048) >> 4), T());
    wgmma_commit();
}
