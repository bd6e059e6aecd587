// v13 = v12 + a persistent grid: one CTA per SM, each walking the 128 x 128 tiles
// first, first + G, first + 2G, ... (G CTAs) in v9's super-tile order, its two ping-pong
// consumers taking every other tile of that list.
//
// C (M x N, fp32) = alpha * A (M x K) @ B (K x N) + beta * C; A, B fp16 or bf16, row-major.
//
// v12 hid one half's epilogue per block tile; the other half's store, the CTA's launch, its
// barrier set-up and the first stages' fill stayed exposed, once per 128 x 256 tile. Here the
// ring and the turns run on from tile to tile (pingpong.cuh): every tile's epilogue runs under
// the other consumer's K loop, and the producer is loading the next tiles while it does; what
// is exposed is one pipeline fill at the start and the last tile's epilogue at the end.
// At any moment the G CTAs work on G consecutive tiles of the super-tile order, so what they
// share in L2 is what a wave of v9-v12 shared.
#include "pingpong.cuh"
#include "tile_order.cuh"

namespace v13 {

// Tiles first, first + step, ... below `tiles`, decoded in super-tile order over a grid of
// grid_m x grid_n cluster tiles (CLUSTER tile rows each; v14: 2), row `rank` of each.
struct StridedTiles {
    int first, step, tiles, grid_m, grid_n, super_m, super_n, rank;
    __device__ int count() const { return first < tiles ? (tiles - first + step - 1) / step : 0; }
    __device__ void get(int i, int& bm, int& bn) const {
        int pm;
        tile_supertile(first + i * step, grid_m, grid_n, super_m, super_n, pm, bn);
        bm = pingpong::CLUSTER * pm + rank;
    }
};

}  // namespace v13

#define V13_ARGS const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b, \
    float* __restrict__ C, int M, int N, int K, float alpha, float beta, int vec_c, int super_m,     \
    int super_n

template <typename T>
__device__ __forceinline__ void v13_entry(const CUtensorMap* tm_a, const CUtensorMap* tm_b,
                                          float* C, int M, int N, int K, float alpha, float beta,
                                          int vec_c, int super_m, int super_n) {
    using namespace pingpong;
    extern __shared__ char smem[];
    const int grid_n = (N + BN - 1) / BN;
    const int pair_m = ((M + BM - 1) / BM + CLUSTER - 1) / CLUSTER;      // rows of cluster tiles
    const v13::StridedTiles tiles{(int)(blockIdx.x / CLUSTER), (int)(gridDim.x / CLUSTER), pair_m * grid_n,
                                  pair_m, grid_n, super_m, super_n, (int)(blockIdx.x % CLUSTER)};
    run<T>(tm_a, tm_b, C, M, N, K, alpha, beta, vec_c, tiles, smem);
}

extern "C" __global__ void __launch_bounds__(pingpong::THREADS, 1) v13_persistent_f16(V13_ARGS) {
    v13_entry<__half>(&tm_a, &tm_b, C, M, N, K, alpha, beta, vec_c, super_m, super_n);
}
extern "C" __global__ void __launch_bounds__(pingpong::THREADS, 1) v13_persistent_bf16(V13_ARGS) {
    v13_entry<__nv_bfloat16>(&tm_a, &tm_b, C, M, N, K, alpha, beta, vec_c, super_m, super_n);
}
