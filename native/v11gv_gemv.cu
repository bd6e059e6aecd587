// v11gv = v11sk for M <= 2 without the tensor cores: a GEMV that streams B once, from DRAM
// straight into registers, 16 bytes a lane, and reduces its K slices in a cluster as v11sl.
//
// C (M x N, fp32) = alpha * A (M x K) @ B (K x N) + beta * C; A, B fp16 or bf16, row-major.
//
// At M <= 2 each element of B meets at most 2 of A: the time is B's bytes over DRAM bandwidth,
// if enough of them are in flight. wgmma pads M to a 64-row tile and stages B through shared
// memory for a reuse that is not there; here B never leaves the registers.
//
// CTA (256 threads, 8 warps): a tile of R rows x 256 columns of C, one K slice of it.
//   lane l owns columns 8l .. 8l+7 (one 16-byte load of a B row: a warp reads 512 contiguous
//   bytes), all R rows; warp w takes k rows w*8 .. w*8+7 of every 64: 8 loads of B a lane per
//   step, and one 16-byte load per row of A (8 consecutive k), converted to fp32, 8*R FFMA per k;
//   the next step's loads are issued before this step's FFMA (-DV11GV_PREFETCH=0: after), so 16
//   loads of B a lane are in flight. R: 1 or 2, the least >= M. (Kernels with R = 4 and 8 were
//   measured and lost to v11sk: their accumulators leave too few registers for loads in flight.)
// End of a slice: the 8 warps' partial tiles meet in shared memory; thread t adds column t over
//   warps 0..7 in that order (in place, into warp 0's tile). S == 1: it writes C. S > 1: the S
//   slices of a column tile are one cluster (S <= 8, along x); after a cluster barrier CTA z
//   adds elements [z E / S, (z+1) E / S) of the tile (E = M * 256) over the S partials in the
//   order 0..S-1 (ld.shared::cluster), writes C, and a second barrier keeps every CTA's shared
//   memory alive until the others have read it. Fixed orders: the same bits every run.
// VEC: rows of A and B 16-byte aligned (K, N multiples of 8, aligned bases); else the edge
//   kernel loads element by element, each checked.
#include "ptx.cuh"
#include "cluster.cuh"

namespace v11gv {
constexpr int WARPS = 8, THREADS = 32 * WARPS;
constexpr int COLS = 8;                       // columns per lane: 16 bytes of B
constexpr int TILE_N = 32 * COLS;             // 256
constexpr int KW = 8;                         // k rows per warp per step
constexpr int TILE_K = WARPS * KW;            // 64: the step of the K loop
#ifndef V11GV_PREFETCH
#define V11GV_PREFETCH 1
#endif
// aligned rows: load step k + 1 before the FFMA of step k (the edge kernel's element loads
// would need twice its registers)
template <bool VEC> constexpr bool prefetch() { return V11GV_PREFETCH && VEC; }

__device__ __forceinline__ float2 pair(u32 w, __half) { return __half22float2(*reinterpret_cast<__half2*>(&w)); }
__device__ __forceinline__ float2 pair(u32 w, __nv_bfloat16) {
    return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&w));
}

// KW rows of B at this lane's 8 columns, and rows r < R of A at the 8 k rows k0 .. k0+7: 16
// bytes each, zero outside the matrix and the slice.
template <typename T, int R, bool VEC>
__device__ __forceinline__ void load_step(const T* __restrict__ A, const T* __restrict__ B, int M, int N,
                                          int K, int k0, int k_hi, long long col, uint4 (&a)[R],
                                          uint4 (&b)[KW]) {
    if (VEC) {   // k0 % 8 == 0 and K % 8 == 0: a step's 8 k are all inside the slice or none
        const bool in = k0 < k_hi;
        #pragma unroll
        for (int i = 0; i < KW; ++i)
            b[i] = in && col < N ? __ldg(reinterpret_cast<const uint4*>(B + (long long)(k0 + i) * N + col))
                                 : make_uint4(0, 0, 0, 0);
        #pragma unroll
        for (int r = 0; r < R; ++r)
            a[r] = in && r < M ? __ldg(reinterpret_cast<const uint4*>(A + (long long)r * K + k0))
                               : make_uint4(0, 0, 0, 0);
    } else {
        const unsigned short* a16 = reinterpret_cast<const unsigned short*>(A);
        const unsigned short* b16 = reinterpret_cast<const unsigned short*>(B);
        u32 h[8];
        #pragma unroll
        for (int i = 0; i < KW; ++i) {
            #pragma unroll
            for (int j = 0; j < COLS; ++j)
                h[j] = k0 + i < k_hi && col + j < N ? b16[(long long)(k0 + i) * N + col + j] : 0u;
            b[i] = make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
        }
        #pragma unroll
        for (int r = 0; r < R; ++r) {
            #pragma unroll
            for (int i = 0; i < KW; ++i)
                h[i] = r < M && k0 + i < k_hi ? a16[(long long)r * K + k0 + i] : 0u;
            a[r] = make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
        }
    }
}

__device__ __forceinline__ u32 word(const uint4& v, int j) { return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w; }

template <typename T, int R, bool VEC>
__device__ __forceinline__ void gemv(const T* __restrict__ A, const T* __restrict__ B, float* __restrict__ C,
                                     int M, int N, int K, float alpha, float beta, int per, int S) {
    extern __shared__ __align__(16) float red[];          // [WARPS][R][TILE_N]: the warps' partials
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    const int z = S > 1 ? (int)cluster_ctarank() : 0;
    const long long n0 = (long long)(blockIdx.x / S) * TILE_N, col = n0 + COLS * lane;
    const int k_lo = z * per, k_hi = min(K, k_lo + per);

    float acc[R][COLS];
    #pragma unroll
    for (int r = 0; r < R; ++r)
        #pragma unroll
        for (int j = 0; j < COLS; ++j) acc[r][j] = 0.0f;
    // a dependent launch: nothing global is read before the previous kernel has finished (the
    // next one may start once every CTA is past its K loop: at the start, its CTAs slowed this
    // one's, an H100 loop 2 us longer instead of 0.8 us shorter; docs/RESULTS.md)
    wait_for_previous_grid();

    constexpr bool PREFETCH = prefetch<VEC>();
    uint4 a[R], b[KW];
    if (PREFETCH) load_step<T, R, VEC>(A, B, M, N, K, k_lo + w * KW, k_hi, col, a, b);
    for (int k0 = k_lo + w * KW; k0 < k_hi; k0 += TILE_K) {
        uint4 an[R], bn[KW];        // PREFETCH: the next step's loads, in flight during this one's FFMA
        if (PREFETCH) load_step<T, R, VEC>(A, B, M, N, K, k0 + TILE_K, k_hi, col, an, bn);
        else load_step<T, R, VEC>(A, B, M, N, K, k0, k_hi, col, a, b);
        #pragma unroll
        for (int p = 0; p < KW / 2; ++p) {             // k rows 2p and 2p + 1
            float2 ak[R];
            #pragma unroll
            for (int r = 0; r < R; ++r) ak[r] = pair(word(a[r], p), T());
            #pragma unroll
            for (int h = 0; h < 2; ++h) {
                const uint4& bi = b[2 * p + h];
                #pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const float2 f = pair(word(bi, j), T());
                    #pragma unroll
                    for (int r = 0; r < R; ++r) {
                        const float x = h ? ak[r].y : ak[r].x;
                        acc[r][2 * j] = fmaf(x, f.x, acc[r][2 * j]);
                        acc[r][2 * j + 1] = fmaf(x, f.y, acc[r][2 * j + 1]);
                    }
                }
            }
        }
        if (PREFETCH) {
            #pragma unroll
            for (int r = 0; r < R; ++r) a[r] = an[r];
            #pragma unroll
            for (int i = 0; i < KW; ++i) b[i] = bn[i];
        }
    }

    let_next_grid_start();
    // the warps' partial tiles, then thread t's column summed over warps 0..7 into warp 0's tile
    #pragma unroll
    for (int r = 0; r < R; ++r) {
        float4* row = reinterpret_cast<float4*>(red + (w * R + r) * TILE_N + COLS * lane);
        row[0] = make_float4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
        row[1] = make_float4(acc[r][4], acc[r][5], acc[r][6], acc[r][7]);
    }
    __syncthreads();
    const int t = threadIdx.x;
    #pragma unroll
    for (int r = 0; r < R; ++r) {
        float s = red[r * TILE_N + t];
        #pragma unroll
        for (int v = 1; v < WARPS; ++v) s += red[(v * R + r) * TILE_N + t];
        red[r * TILE_N + t] = s;
    }
    const int rows = min(M, R);
    if (S == 1) {
        if (n0 + t < N)
            for (int r = 0; r < rows; ++r) {
                float* out = C + (long long)r * N + n0 + t;
                *out = beta != 0.0f ? alpha * red[r * TILE_N + t] + beta * *out : alpha * red[r * TILE_N + t];
            }
        return;
    }
    cluster_sync();                       // every slice's partial is in place
    const int E = rows * TILE_N, lo = z * E / S, hi = (z + 1) * E / S;
    for (int e = lo + t; e < hi; e += THREADS) {
        const int c = e % TILE_N;
        if (n0 + c >= N) continue;
        const u32 at = smem_u32(red + e);
        float s = ld_cluster_f1(at, 0);
        for (int q = 1; q < S; ++q) s += ld_cluster_f1(at, q);
        float* out = C + (long long)(e / TILE_N) * N + n0 + c;
        *out = beta != 0.0f ? alpha * s + beta * *out : alpha * s;
    }
    cluster_sync();                       // no CTA leaves while another reads its shared memory
}
}  // namespace v11gv

#define V11GV_ARGS(T) const T* __restrict__ A, const T* __restrict__ B, float* __restrict__ C, int M, int N, \
    int K, float alpha, float beta, int per, int S
#define V11GV_KERNEL(name, T, R, VEC)                                                              \
    extern "C" __global__ void __launch_bounds__(v11gv::THREADS, R == 1 ? 3 : 2)                   \
    name(V11GV_ARGS(T)) {                                                                         \
        v11gv::gemv<T, R, VEC>(A, B, C, M, N, K, alpha, beta, per, S);                            \
    }
#define V11GV_KERNELS(kind, T)                                                                     \
    V11GV_KERNEL(v11gv_##kind##_r1, T, 1, true)                                                    \
    V11GV_KERNEL(v11gv_##kind##_r2, T, 2, true)                                                    \
    V11GV_KERNEL(v11gv_##kind##_edge, T, 2, false)
V11GV_KERNELS(f16, __half)
V11GV_KERNELS(bf16, __nv_bfloat16)
