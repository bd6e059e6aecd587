// c_element.cuh - C's element type in the epilogues: fp32 (the default), or the inputs' fp16 /
// bf16 (the levels that take -DHG_C16=1). The accumulators are fp32 and alpha * acc + beta * C
// is computed in fp32 either way; a 16-bit C is rounded once, to nearest even, on the store.
#pragma once

#include "ptx.cuh"

template <bool C16, typename T>    // T: the inputs' element type
struct c_type { using type = float; };
template <typename T>
struct c_type<true, T> { using type = T; };

// Two adjacent elements of C as one store: float2 (8 bytes) or a 16-bit pair (4 bytes).
__device__ __forceinline__ void store_pair(float* p, float x, float y) {
    *reinterpret_cast<float2*>(p) = make_float2(x, y);
}
__device__ __forceinline__ void store_pair(__half* p, float x, float y) {
    *reinterpret_cast<__half2*>(p) = __floats2half2_rn(x, y);
}
__device__ __forceinline__ void store_pair(__nv_bfloat16* p, float x, float y) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(x, y);
}
__device__ __forceinline__ float2 load_pair(const float* p) {
    return *reinterpret_cast<const float2*>(p);
}
__device__ __forceinline__ float2 load_pair(const __half* p) {
    return __half22float2(*reinterpret_cast<const __half2*>(p));
}
__device__ __forceinline__ float2 load_pair(const __nv_bfloat16* p) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}

// One element, and its conversion from fp32.
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ void store_one(float* p, float x) { *p = x; }
__device__ __forceinline__ void store_one(__half* p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void store_one(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }

// out[0..1] = alpha * s + beta * out[0..1] for an fp32 C, as one 8-byte access where `vec` (an
// aligned pair), else two; beta == 0 does not read C (NaN already there must not leak).
__device__ __forceinline__ void axpby_pair(float* out, float2 s, float alpha, float beta, bool vec) {
    float v0 = alpha * s.x, v1 = alpha * s.y;
    if (vec) {
        if (beta != 0.0f) {
            const float2 old = load_pair(out);
            v0 += beta * old.x;
            v1 += beta * old.y;
        }
        store_pair(out, v0, v1);
    } else {
        out[0] = beta != 0.0f ? v0 + beta * out[0] : v0;
        out[1] = beta != 0.0f ? v1 + beta * out[1] : v1;
    }
}

// A pair into shared memory (the TMA-store epilogue's boxes).
__device__ __forceinline__ void st_shared_pair(u32 addr, float x, float y, float) {
    st_shared_v2(addr, x, y);
}
__device__ __forceinline__ void st_shared_pair(u32 addr, float x, float y, __half) {
    const __half2 h = __floats2half2_rn(x, y);
    st_shared_b32(addr, *reinterpret_cast<const u32*>(&h));
}
__device__ __forceinline__ void st_shared_pair(u32 addr, float x, float y, __nv_bfloat16) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    st_shared_b32(addr, *reinterpret_cast<const u32*>(&h));
}
