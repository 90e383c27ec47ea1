// rows_common.cuh - what the hand-written row experiments share: the
// approximate exp2 they compute with, 16-byte vectors of bf16 or f32, a
// piece's (max, sum) pair, the copy kernel they are measured against, and their timing (the median of
// 15 runs, each after a 512 MiB memset of `flush` that empties L2).
#pragma once
#include <cuda_bf16.h>
#include <cstdint>

static const float LOG2E = 1.4426950408889634f;

static __device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <bool BF16> struct Elem;
template <> struct Elem<true> { /* 8 bf16 a vector */
  static const int PER = 8;
  static __device__ float get(const uint4 &v, int i) {
    uint32_t w = reinterpret_cast<const uint32_t *>(&v)[i / 2];
    return __uint_as_float(i % 2 ? w & 0xffff0000u : w << 16);
  }
  static __device__ void put(uint4 &v, int i, float f) {
    reinterpret_cast<uint16_t *>(&v)[i] = __bfloat16_as_ushort(__float2bfloat16_rn(f));
  }
};
template <> struct Elem<false> { /* 4 f32 a vector */
  static const int PER = 4;
  static __device__ float get(const uint4 &v, int i) {
    return __uint_as_float(reinterpret_cast<const uint32_t *>(&v)[i]);
  }
  static __device__ void put(uint4 &v, int i, float f) {
    reinterpret_cast<uint32_t *>(&v)[i] = __float_as_uint(f);
  }
};

/* The (max, sum of exp(x - max)) pair of V vectors of a piece. */
template <bool BF16, int V>
static __device__ __forceinline__ void piece_pair(const uint4 *v, float &pm, float &ps) {
  typedef Elem<BF16> E;
  pm = -INFINITY, ps = 0;
#pragma unroll
  for (int i = 0; i < V; i++)
#pragma unroll
    for (int k = 0; k < E::PER; k++) pm = fmaxf(pm, E::get(v[i], k));
#pragma unroll
  for (int i = 0; i < V; i++)
#pragma unroll
    for (int k = 0; k < E::PER; k++) ps += ex2((E::get(v[i], k) - pm) * LOG2E);
}

__global__ void copy16(uint4 *y, const uint4 *x, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = x[i];
}

/* The median of 15 runs of launch(), in ms, each after a memset of flush. */
template <typename F> static float median_ms(void *flush, F launch) {
  static cudaEvent_t t0, t1;
  if (!t0) cudaEventCreate(&t0), cudaEventCreate(&t1);
  float t[15];
  for (int r = 0; r < 15; r++) {
    cudaMemset(flush, r, 512u << 20);
    cudaEventRecord(t0);
    launch();
    cudaEventRecord(t1);
    cudaEventSynchronize(t1);
    cudaEventElapsedTime(&t[r], t0, t1);
  }
  for (int i = 0; i < 15; i++)
    for (int j = i + 1; j < 15; j++)
      if (t[j] < t[i]) { float q = t[i]; t[i] = t[j]; t[j] = q; }
  return t[7];
}
