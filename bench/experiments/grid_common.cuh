// grid_common.cuh - what the hand-written experiments of rows over the grid
// share (softmax_grid_rows.cu, softmax_dynamic_shares.cu): the -inf-safe
// merge of (max, sum) pairs, a CTA's pair in every thread, the barrier in
// global memory, cp.async's copy, commit and wait, and the check of a
// result against double.
#pragma once
#include "rows_common.cuh"

#include <cmath>
#include <cstring>
#include <vector>

static __device__ __forceinline__ void merge(float &m, float &s, float m2, float s2) {
  float mm = fmaxf(m, m2);
  if (mm == -INFINITY) return;
  s = s * ex2((m - mm) * LOG2E) + s2 * ex2((m2 - mm) * LOG2E);
  m = mm;
}

/* The pair of a CTA of T threads, in every thread (slots: T / 32). */
template <int T> static __device__ void block_pair(float &m, float &s, float2 *slots) {
  for (int o = 16; o; o >>= 1) merge(m, s, __shfl_xor_sync(~0u, m, o), __shfl_xor_sync(~0u, s, o));
  __syncthreads(); /* slots free from the last use */
  if ((threadIdx.x & 31) == 0) slots[threadIdx.x / 32] = make_float2(m, s);
  __syncthreads();
  m = slots[0].x, s = slots[0].y;
  for (int i = 1; i < T / 32; i++) merge(m, s, slots[i].x, slots[i].y);
}

/* Every CTA arrives once an episode; the top bit flips when all have. */
static __device__ void grid_barrier(unsigned *counter, int ctas, bool master) {
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned inc = master ? 0x80000000u - (ctas - 1) : 1u, old, now;
    asm volatile("atom.add.release.gpu.global.u32 %0, [%1], %2;" : "=r"(old) : "l"(counter), "r"(inc) : "memory");
    do asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(counter) : "memory");
    while (!((now ^ old) & 0x80000000u));
  }
  __syncthreads();
}

static __device__ __forceinline__ void copy_in(uint4 *slot, const uint4 *src) {
  unsigned dst = (unsigned)__cvta_generic_to_shared(slot);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
static __device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> static __device__ __forceinline__ void wait_groups() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* The experiments' row values (a row may add its own constant, which its
 * softmax ignores). */
static __host__ __device__ float pattern(size_t i) { return (float)((i * 37) % 11) * 0.125f; }

/* The largest relative error over count values of y (rows of n elements,
 * bf16 or f32) against the softmax of pattern, in double; NaN sticks. */
template <bool BF16> static double worst(const void *y, size_t count, size_t n) {
  std::vector<uint16_t> h16(BF16 ? count : 0);
  std::vector<float> h32(BF16 ? 0 : count);
  cudaMemcpy(BF16 ? (void *)h16.data() : (void *)h32.data(), y, count * (BF16 ? 2 : 4),
             cudaMemcpyDeviceToHost);
  double sum = 0, mx = 0;
  for (size_t i = 0; i < n; i++) mx = fmax(mx, pattern(i));
  for (size_t i = 0; i < n; i++) sum += exp(pattern(i) - mx);
  double bad = 0;
  for (size_t j = 0; j < count; j++) {
    double want = exp(pattern(j % n) - mx) / sum, got;
    if (BF16) {
      uint32_t w = (uint32_t)h16[j] << 16;
      float f;
      memcpy(&f, &w, 4);
      got = f;
    } else {
      got = h32[j];
    }
    double e = fabs(got - want) / want;
    if (!(e <= bad)) bad = e;
  }
  return bad;
}
