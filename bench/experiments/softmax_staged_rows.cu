// softmax_staged_rows.cu - wide rows streamed through registers in pieces,
// with x staged in shared memory so that it is read from HBM once.
//
// A hand-written experiment, not part of tilejit. Today a row that fits one
// CTA's registers is held there whole (1024 threads x 32 values for 16-bit
// N = 32768, one CTA an SM), so the SM's memory and issue times add up (see
// softmax_16bit_rows.cu). Here a CTA of T threads walks its row in pieces
// of V 16-byte vectors a thread: phase 0 loads each piece, stores it to the
// thread's own slots of shared memory and folds it into a running (max,
// sum) pair; after the CTA's reduction, phase 1 reads the pieces back from
// shared memory (each thread its own slots: no barrier) and stores y. A CTA
// needs only a few registers, so several share an SM and one loads while
// another computes. Rows: bf16 32768 (64 KiB), f32 16384 (64 KiB), f32
// 32768 and bf16 65536 (128 KiB), x = 256 MiB. Figures are % of a 16-byte
// copy kernel over the same bytes, medians of 15 runs, each after a 512 MiB memset. x is a
// constant, so every y is 1/N exactly: the first and last vectors are checked.
//
//   nvcc -arch=sm_90 -O3 -o /tmp/staged bench/experiments/softmax_staged_rows.cu && /tmp/staged
#include "rows_common.cuh"

#include <cuda_bf16.h>
#include <cstdint>
#include <cstdio>



/* (max, sum) pairs combined -inf-safely enough for finite rows. */
static __device__ __forceinline__ void merge(float &m, float &s, float m2, float s2) {
  float mm = fmaxf(m, m2);
  s = s * ex2((m - mm) * LOG2E) + s2 * ex2((m2 - mm) * LOG2E);
  m = mm;
}

template <int T> static __device__ void block_pair(float &m, float &s) {
  __shared__ float2 slots[32];
  for (int o = 16; o; o >>= 1) merge(m, s, __shfl_xor_sync(~0u, m, o), __shfl_xor_sync(~0u, s, o));
  if ((threadIdx.x & 31) == 0) slots[threadIdx.x / 32] = make_float2(m, s);
  __syncthreads();
  m = slots[0].x, s = slots[0].y;
  for (int i = 1; i < T / 32; i++) merge(m, s, slots[i].x, slots[i].y);
}

/* STAGE: x kept in shared memory for phase 1, else read again from global. */
template <bool BF16, int T, int V, int MIN_CTAS, bool STAGE>
__global__ __launch_bounds__(T, MIN_CTAS) void staged(uint4 *y, const uint4 *x, int n) {
  typedef Elem<BF16> E;
  extern __shared__ uint4 stash[];
  const int vecs = n / E::PER, pieces = vecs / (T * V);
  const uint4 *xr = x + (size_t)blockIdx.x * vecs;
  uint4 *yr = y + (size_t)blockIdx.x * vecs;
  float m = -INFINITY, s = 0;
#pragma unroll 1
  for (int p = 0; p < pieces; p++) {
    uint4 v[V];
#pragma unroll
    for (int i = 0; i < V; i++) {
      v[i] = xr[(p * V + i) * T + threadIdx.x];
      if (STAGE) stash[(p * V + i) * T + threadIdx.x] = v[i];
    }
    float pm, ps;
    piece_pair<BF16, V>(v, pm, ps);
    merge(m, s, pm, ps);
  }
  block_pair<T>(m, s);
  float inv = 1.f / s;
#pragma unroll 1
  for (int p = pieces - 1; p >= 0; p--) {
#pragma unroll
    for (int i = 0; i < V; i++) {
      int at = (p * V + i) * T + threadIdx.x;
      uint4 v = STAGE ? stash[at] : xr[at], o;
#pragma unroll
      for (int k = 0; k < E::PER; k++) E::put(o, k, ex2((E::get(v, k) - m) * LOG2E) * inv);
      yr[at] = o;
    }
  }
}


static void *x, *y, *flush;
static const size_t BYTES = 256u << 20;


/* Every y is 1/n: bf16 0x3800 (n = 32768), f32 2^-14 or 2^-15. */
static const char *check(bool bf16, int m, int n) {
  uint32_t v[8];
  cudaMemcpy(v, y, 16, cudaMemcpyDeviceToHost);
  cudaMemcpy(v + 4, (char *)y + (size_t)m * n * (bf16 ? 2 : 4) - 16, 16, cudaMemcpyDeviceToHost);
  float want = 1.0f / n;
  for (int i = 0; i < 8; i++) {
    if (bf16 && (v[i] & 0xffff) != 0x3800u) return "WRONG";
    if (!bf16 && v[i] != *(uint32_t *)&want) return "WRONG";
  }
  return "y checked";
}

template <bool BF16, int T, int V, int MIN_CTAS, bool STAGE> static void row(int n, float copy) {
  const int m = (int)(BYTES / (BF16 ? 2 : 4) / n);
  int smem = STAGE ? n * (BF16 ? 2 : 4) : 0, per_sm = 0;
  auto k = staged<BF16, T, V, MIN_CTAS, STAGE>;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, T, smem);
  cudaMemset(x, BF16 ? 0x3f : 0, BYTES); /* bf16 0x3f3f; f32 0: every y 1/n */
  cudaMemset(y, 0xff, BYTES);
  float ms = median_ms(flush, [&] { k<<<m, T, smem>>>((uint4 *)y, (const uint4 *)x, n); });
  printf("%s N=%-6d T=%-4d V=%d %-6s %d CTAs/SM: %5.1f%% of copy (%s, %s)\n", BF16 ? "bf16" : "f32 ",
         n, T, V, STAGE ? "staged" : "reread", per_sm, 100 * copy / ms,
         cudaGetErrorString(cudaGetLastError()), check(BF16, m, n));
}

int main() {
  if (cudaMalloc(&x, BYTES) || cudaMalloc(&y, BYTES) || cudaMalloc(&flush, 512u << 20)) {
    fprintf(stderr, "no GPU memory\n");
    return 1;
  }
  float copy = median_ms(flush, [] { copy16<<<132 * 8, 512>>>((uint4 *)y, (const uint4 *)x, BYTES / 16); });
  printf("copy kernel: %.0f GB/s\n", 2.0 * BYTES / copy / 1e6);
  row<true, 256, 4, 1, true>(32768, copy);
  row<true, 256, 2, 1, true>(32768, copy);
  row<true, 512, 2, 1, true>(32768, copy);
  row<true, 512, 4, 1, true>(32768, copy);
  row<true, 256, 4, 1, false>(32768, copy);
  row<false, 256, 4, 1, true>(16384, copy);
  row<false, 512, 2, 1, true>(16384, copy);
  row<false, 512, 4, 1, true>(32768, copy);
  row<false, 1024, 2, 1, true>(32768, copy);
  row<true, 512, 4, 1, true>(65536, copy);
  return 0;
}
