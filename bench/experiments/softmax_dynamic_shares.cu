// softmax_dynamic_shares.cu - one huge row over every CTA the device holds:
// do CTAs that take their shares' last pieces as they come gain on CTAs
// with fixed shares?
//
// A hand-written experiment, not part of tilejit. bench/RESULTS.md MM4
// timed tilejit's split rows CTA by CTA: CTAs with the same work end their
// first phase up to 3 us apart (bf16 1 x 10^7: 5.5 to 8.4 us), and the
// grid's barrier waits for the slowest. Here a row of n elements is cut
// into chunks of one piece (T threads x V 16-byte vectors, 16 KiB); each
// CTA copies its chunks into shared memory (cp.async, a piece ahead),
// folds them into a (max, sum) pair, meets the others at a barrier in
// global memory, then writes its chunks out from shared memory:
//   STATIC  CTA c takes chunks [c q, (c + 1) q), q = chunks / CTAs;
//   DYNAMIC CTA c takes its first q - D chunks as above, then chunks from
//           a pool of the rest (D a CTA), one at a time, by an atomic
//           counter, while it has room (CAP pieces): fast CTAs take more.
// The row's values are a pattern, so the result is checked against double.
// Figures: % of a 16-byte copy kernel over the same bytes, medians of 15
// runs, each after a 512 MiB memset.
//
//   nvcc -arch=sm_90 -O3 -std=c++17 -o /tmp/dyn bench/experiments/softmax_dynamic_shares.cu && /tmp/dyn
#include "grid_common.cuh"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

static const int T = 256, V = 4, CAP = 7, PIECE = T * V; /* vectors a chunk */

/* ws: [0] the barrier's counter, [32] the pool's counter; partials after. */
template <bool BF16, bool DYNAMIC>
__global__ __launch_bounds__(T) void row_kernel(uint4 *y, const uint4 *x, int chunks, int q, int d,
                                                unsigned *ws, float2 *partials) {
  typedef Elem<BF16> E;
  extern __shared__ uint4 stash[];
  __shared__ float2 slots[T / 32];
  __shared__ int ids[CAP + 1];
  const int base = DYNAMIC ? q - d : q, pool0 = gridDim.x * base;
  if (threadIdx.x == 0)
    for (int p = 0; p < base; p++) ids[p] = blockIdx.x * base + p;
  __syncthreads();
  auto issue = [&](int p) {
    const uint4 *src = x + (size_t)ids[p] * PIECE;
#pragma unroll
    for (int i = 0; i < V; i++) copy_in(&stash[p * PIECE + i * T + threadIdx.x], src + i * T + threadIdx.x);
    commit();
  };
  float m = -INFINITY, s = 0;
  auto fold = [&](int p) {
    uint4 v[V];
#pragma unroll
    for (int i = 0; i < V; i++) v[i] = stash[p * PIECE + i * T + threadIdx.x];
    float pm, ps;
    piece_pair<BF16, V>(v, pm, ps);
    merge(m, s, pm, ps);
  };
  /* thread 0 takes the pool's next chunk as the CTA's piece p */
  auto grab = [&](int p) {
    if (threadIdx.x == 0) ids[p] = p < CAP ? pool0 + (int)atomicAdd(&ws[32], 1u) : chunks;
  };
  issue(0);
  for (int p = 0; p < base; p++) {
    if (p + 1 < base) issue(p + 1), wait_groups<1>();
    else wait_groups<0>();
    fold(p);
  }
  int taken = base;
  if (DYNAMIC) { /* the pool, a piece ahead, while there is room */
    grab(taken);
    __syncthreads();
    if (ids[taken] < chunks) issue(taken);
    while (taken < CAP && ids[taken] < chunks) {
      grab(taken + 1);
      __syncthreads();
      if (ids[taken + 1] < chunks) issue(taken + 1), wait_groups<1>();
      else wait_groups<0>();
      fold(taken);
      taken++;
    }
  }
  block_pair<T>(m, s, slots);
  if (threadIdx.x == 0) partials[blockIdx.x] = make_float2(m, s);
  grid_barrier(&ws[0], gridDim.x, blockIdx.x == 0);
  m = -INFINITY, s = 0;
  for (int c = threadIdx.x; c < (int)gridDim.x; c += T) {
    float2 q2 = __ldcg(&partials[c]);
    merge(m, s, q2.x, q2.y);
  }
  block_pair<T>(m, s, slots);
  const float inv = 1.f / s;
  for (int p = 0; p < taken; p++) {
    uint4 *dst = y + (size_t)ids[p] * PIECE;
#pragma unroll
    for (int i = 0; i < V; i++) {
      uint4 v = stash[p * PIECE + i * T + threadIdx.x], o;
#pragma unroll
      for (int k = 0; k < E::PER; k++) E::put(o, k, ex2((E::get(v, k) - m) * LOG2E) * inv);
      __stcs(dst + i * T + threadIdx.x, o);
    }
  }
}

template <bool BF16> __global__ void fill(uint4 *x, size_t vecs) {
  typedef Elem<BF16> E;
  for (size_t v = blockIdx.x * (size_t)blockDim.x + threadIdx.x; v < vecs; v += (size_t)gridDim.x * blockDim.x) {
    uint4 o;
    for (int k = 0; k < E::PER; k++) E::put(o, k, pattern(v * E::PER + k));
    x[v] = o;
  }
}

static void *xbuf, *ybuf, *flush;
static unsigned *ws;
static float2 *partials;

/* One row of `per_cta` chunks a CTA on average, over every resident CTA. */
template <bool BF16, bool DYNAMIC> static void run(int per_cta, int d) {
  int per_sm = 0, sms = 0, smem = CAP * PIECE * 16;
  auto k = row_kernel<BF16, DYNAMIC>;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, T, smem);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  int ctas = per_sm * sms, chunks = ctas * per_cta;
  size_t n = (size_t)chunks * PIECE * (BF16 ? 8 : 4), bytes = (size_t)chunks * PIECE * 16;
  fill<BF16><<<1024, 256>>>((uint4 *)xbuf, bytes / 16);
  float copy = median_ms(flush, [&] { copy16<<<132 * 8, 512>>>((uint4 *)ybuf, (const uint4 *)xbuf, bytes / 16); });
  cudaMemset(ybuf, 0xff, bytes);
  uint4 *yp = (uint4 *)ybuf;
  const uint4 *xp = (const uint4 *)xbuf;
  int q = per_cta;
  void *args[] = {&yp, &xp, &chunks, &q, &d, &ws, &partials};
  float ms = median_ms(flush, [&] {
    cudaMemsetAsync(ws, 0, 256);
    cudaLaunchCooperativeKernel((void *)k, ctas, T, args, smem, 0);
  });
  cudaError_t err = cudaDeviceSynchronize();
  printf("%s n=%-9zu %s d=%d: %d CTAs (%d an SM), %d chunks of 16 KiB: %5.1f%% of copy (%.2f us, copy %.2f us) worst rel err %.2e %s\n",
         BF16 ? "bf16" : "f32 ", n, DYNAMIC ? "DYNAMIC" : "STATIC ", d, ctas, per_sm, chunks, 100 * copy / ms, ms * 1e3,
         copy * 1e3, worst<BF16>(ybuf, n, n), cudaGetErrorString(err));
}

int main() {
  if (cudaMalloc(&xbuf, 256u << 20) || cudaMalloc(&ybuf, 256u << 20) || cudaMalloc(&flush, 512u << 20) ||
      cudaMalloc(&ws, 256) || cudaMalloc(&partials, 4096 * sizeof(float2))) {
    fprintf(stderr, "no GPU memory\n");
    return 1;
  }
  for (int round = 0; round < 2; round++) {
    for (int per : {5, 3}) { /* bf16 about 10.8 and 6.5 million; f32 half */
      run<true, false>(per, 0);
      run<true, true>(per, 1);
      run<true, true>(per, 2);
      run<false, false>(per, 0);
      run<false, true>(per, 1);
      run<false, true>(per, 2);
    }
  }
  return 0;
}
