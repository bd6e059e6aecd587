// v12 = v11 + ping-pong consumers: a producer warpgroup that only loads, and two consumer
// warpgroups that each own a whole 128 x 128 half of v11's 128 x 256 block tile and take turns
// on the tensor cores, so one half's epilogue runs under the other half's K loop.
//
// C (M x N, fp32) = alpha * A (M x K) @ B (K x N) + beta * C; A, B fp16 or bf16, row-major.
//
// The grid is v11's: one CTA per 128 x 256 block tile, in v9's super-tile order. What changes
// inside it (pingpong.cuh has the schedule, the order barrier and the register split):
//   warpgroup 0, the producer (setmaxnreg 40): one thread streams the K tiles of the left half,
//     then of the right half, through one ring of 32 KB stages (A 128 x 64 + B 64 x 128).
//   warpgroups 1 and 2, the consumers (setmaxnreg 232): consumer 0 multiplies the left half
//     (two m64n128k16 per k16 step), hands the tensor cores to consumer 1 as soon as its last
//     wgmma is queued, then stores its half while consumer 1 multiplies the right half.
// v11 ran both warpgroups' K loops together and then stored all 128 KB of C with the tensor
// cores idle; here only the right half's 64 KB store is exposed. The price: A's 16 KB box is
// loaded once per half (L2 -> SM 64 KB per 64-deep K tile of the block tile instead of 48).
// A block tile whose right half lies wholly past N computes only its left half.
#include "pingpong.cuh"
#include "tile_order.cuh"

namespace v12 {

// The CTA's two tiles, side by side: (bm, 2 bp) and (bm, 2 bp + 1) in 128 x 128 units.
struct HalfTiles {
    int bm, bn0, n;
    __device__ int count() const { return n; }
    __device__ void get(int i, int& m, int& bn) const {
        m = bm;
        bn = bn0 + i;
    }
};

}  // namespace v12

#define V12_ARGS const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b, \
    float* __restrict__ C, int M, int N, int K, float alpha, float beta, int vec_c, int super_m,     \
    int super_n

template <typename T>
__device__ __forceinline__ void v12_entry(const CUtensorMap* tm_a, const CUtensorMap* tm_b,
                                          float* C, int M, int N, int K, float alpha, float beta,
                                          int vec_c, int super_m, int super_n) {
    using namespace pingpong;
    extern __shared__ char smem[];
    const int grid_m = (M + BM - 1) / BM, grid_n = (N + BN - 1) / BN;   // 128 x 128 tiles
    const int grid_p = (grid_n + 1) / 2;                                 // 128 x 256 block tiles
    // a cluster (v14) takes CLUSTER block tiles one above the other: rank r, tile row CLUSTER pm + r
    int pm, bp;
    tile_supertile(blockIdx.x / CLUSTER, (grid_m + CLUSTER - 1) / CLUSTER, grid_p, super_m, super_n, pm, bp);
    const v12::HalfTiles tiles{CLUSTER * pm + (int)(blockIdx.x % CLUSTER), 2 * bp, min(2, grid_n - 2 * bp)};
    run<T>(tm_a, tm_b, C, M, N, K, alpha, beta, vec_c, tiles, smem);
}

extern "C" __global__ void __launch_bounds__(pingpong::THREADS, 1) v12_warpspec_f16(V12_ARGS) {
    v12_entry<__half>(&tm_a, &tm_b, C, M, N, K, alpha, beta, vec_c, super_m, super_n);
}
extern "C" __global__ void __launch_bounds__(pingpong::THREADS, 1) v12_warpspec_bf16(V12_ARGS) {
    v12_entry<__nv_bfloat16>(&tm_a, &tm_b, C, M, N, K, alpha, beta, vec_c, super_m, super_n);
}
