// softmax_grid_rows.cu - rows over many CTAs, taken in turn: does
// overlapping one row's last phase with the next row's first phase pay?
//
// A hand-written experiment, not part of tilejit. tilejit spreads a row that
// no CTA or cluster holds over a group of CTAs (SPLIT), each keeping its
// share in shared memory, and each group takes its rows in turn: phase 1
// copies the share in (cp.async, a piece ahead) and folds it into a (max,
// sum) pair; the group's CTAs meet at a barrier in global memory; phase 2
// writes y from the stash. Measured with ncu on an H200, four rows of 10^7
// f32 move exactly the bytes they must (160 MB read), yet run at 77% of
// copy, so the time goes to the phases' order, not to traffic. Here, with
// groups of per_row CTAs of 256 threads, shares of 64 KiB in pieces of 4
// vectors a thread, all resident (a cooperative launch):
//   SEQ   tilejit's order: phase 1, barrier, phase 2, the next row;
//   PRE   phase 2 also copies the next row's pieces into the slots it has
//         just emptied (cp.async); phase 1 then only waits and folds;
//   PIPE  as PRE, and phase 2 folds those pieces too, a piece behind, so
//         that the writes, the next row's reads and its arithmetic overlap:
//         only the barrier is left between rows.
// x is a pattern shifted by 3 (r mod 5) a row, so every row has the same
// softmax and a row normalized with a neighbour's (max, sum) fails the
// check (the largest relative error over every element, against double).
// Figures: % of a 16-byte copy kernel over the same bytes, medians of 15
// runs, each after a 512 MiB memset.
//
//   nvcc -arch=sm_90 -O3 -std=c++17 -o /tmp/grid_rows bench/experiments/softmax_grid_rows.cu && /tmp/grid_rows
#include "grid_common.cuh"

#include <cuda_bf16.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

static const int T = 256, V = 4;

template <bool BF16> static __device__ void fold(const uint4 *v, float &m, float &s) {
  float pm, ps;
  piece_pair<BF16, V>(v, pm, ps);
  merge(m, s, pm, ps);
}

enum Mode { SEQ, PRE, PIPE };
static const char *const mode_names[] = {"SEQ ", "PRE ", "PIPE"};

/* Groups of per_row CTAs, each group taking rows group, group + groups, ...
 * (one group: every row in turn over the whole grid). */
template <bool BF16, Mode MODE>
__global__ __launch_bounds__(T) void rows_kernel(uint4 *y, const uint4 *x, int n, int rows, int per_row,
                                                 unsigned *counters, float2 *partials) {
  typedef Elem<BF16> E;
  extern __shared__ uint4 stash[];
  __shared__ float2 slots[T / 32];
  const int share = n / E::PER / per_row, pieces = share / (T * V);
  const int group = blockIdx.x / per_row, rank = blockIdx.x % per_row, groups = gridDim.x / per_row;
  const size_t row_vecs = (size_t)n / E::PER;
  unsigned *counter = counters + group * 32;
  auto at = [&](int p, int i) { return (p * V + i) * T + threadIdx.x; };
  auto issue = [&](int r, int p) {
    const uint4 *src = x + r * row_vecs + (size_t)rank * share;
#pragma unroll
    for (int i = 0; i < V; i++) copy_in(&stash[at(p, i)], src + at(p, i));
    commit();
  };
  auto read = [&](int p, uint4 *v) {
#pragma unroll
    for (int i = 0; i < V; i++) v[i] = stash[at(p, i)];
  };
  float m = -INFINITY, s = 0;
  auto first_phase = [&](int r) { /* row r copied in a piece ahead, and folded */
    m = -INFINITY, s = 0;
    issue(r, 0);
    for (int p = 0; p < pieces; p++) {
      uint4 v[V];
      if (p + 1 < pieces) issue(r, p + 1), wait_groups<1>();
      else wait_groups<0>();
      read(p, v);
      fold<BF16>(v, m, s);
    }
  };
  if (MODE == PIPE && group < rows) first_phase(group); /* the first row's alone */
  for (int r = group, k = 0; r < rows; r += groups, k++) {
    if (MODE == SEQ || (MODE == PRE && k == 0)) {
      first_phase(r);
    } else if (MODE == PRE) { /* every piece already copied in during the last row's phase 2 */
      m = -INFINITY, s = 0;
      wait_groups<0>();
      for (int p = 0; p < pieces; p++) {
        uint4 v[V];
        read(p, v);
        fold<BF16>(v, m, s);
      }
    }
    block_pair<T>(m, s, slots);
    float2 *part = partials + ((size_t)group * 2 + (k & 1)) * T;
    if (threadIdx.x == 0) part[rank] = make_float2(m, s);
    grid_barrier(counter, per_row, rank == 0);
    float2 q = threadIdx.x < per_row ? __ldcg(&part[threadIdx.x]) : make_float2(-INFINITY, 0.f);
    m = q.x, s = q.y;
    block_pair<T>(m, s, slots);
    const float rm = m, inv = 1.f / s;
    const bool next = MODE != SEQ && r + groups < rows;
    m = -INFINITY, s = 0;
    uint4 *dst = y + r * row_vecs + (size_t)rank * share;
    for (int p = 0; p < pieces; p++) {
      uint4 v[V];
      read(p, v);
#pragma unroll
      for (int i = 0; i < V; i++) {
        uint4 o;
#pragma unroll
        for (int k = 0; k < E::PER; k++) E::put(o, k, ex2((E::get(v[i], k) - rm) * LOG2E) * inv);
        __stcs(dst + at(p, i), o);
      }
      if (next) {
        issue(r + groups, p); /* the slot's values are in registers, already stored */
        if (MODE == PIPE && p > 0) {
          wait_groups<1>();
          read(p - 1, v);
          fold<BF16>(v, m, s);
        }
      }
    }
    if (MODE == PIPE && next) {
      uint4 v[V];
      wait_groups<0>();
      read(pieces - 1, v);
      fold<BF16>(v, m, s);
    }
  }
}

/* x[r][i] = pattern(i) + 3 (r mod 5): neighbouring rows of a group differ. */
template <bool BF16> __global__ void fill(uint4 *x, int n, int rows) {
  typedef Elem<BF16> E;
  size_t vecs = (size_t)n / E::PER * rows;
  for (size_t v = blockIdx.x * (size_t)blockDim.x + threadIdx.x; v < vecs; v += (size_t)gridDim.x * blockDim.x) {
    uint4 o;
    size_t r = v / (n / E::PER), i0 = v % (n / E::PER) * E::PER;
    for (int k = 0; k < E::PER; k++) E::put(o, k, pattern(i0 + k) + 3.0f * (r % 5));
    x[v] = o;
  }
}

static void *xbuf, *ybuf, *flush;
static unsigned *counters;
static float2 *partials;
static const size_t MOST = 256u << 20;

template <bool BF16, Mode MODE> static void run(int n, int rows, int per_row) {
  size_t bytes = (size_t)n * rows * (BF16 ? 2 : 4);
  int share = n / (BF16 ? 8 : 4) / per_row, smem = share * 16, per_sm = 0, sms = 0;
  auto k = rows_kernel<BF16, MODE>;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, T, smem);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  int groups = per_sm * sms / per_row;
  if (groups > rows) groups = rows;
  if (groups < 1 || share % (T * V) || per_row > T) {
    printf("%s n=%d: not resident (%d an SM) or not whole pieces\n", BF16 ? "bf16" : "f32", n, per_sm);
    return;
  }
  fill<BF16><<<1024, 256>>>((uint4 *)xbuf, n, rows);
  float copy = median_ms(flush, [&] { copy16<<<132 * 8, 512>>>((uint4 *)ybuf, (const uint4 *)xbuf, bytes / 16); });
  cudaMemset(ybuf, 0xff, bytes);
  uint4 *yp = (uint4 *)ybuf;
  const uint4 *xp = (const uint4 *)xbuf;
  void *args[] = {&yp, &xp, &n, &rows, &per_row, &counters, &partials};
  float ms = median_ms(flush, [&] {
    cudaMemsetAsync(counters, 0, 4096);
    cudaLaunchCooperativeKernel((void *)k, groups * per_row, T, args, smem, 0);
  });
  cudaError_t err = cudaDeviceSynchronize();
  printf("%s %4d x %-8d %s %3d a row, %2d groups, %d CTAs/SM, share %3d KiB: %5.1f%% of copy (%.1f us, copy %.1f us) worst rel err %.2e %s\n",
         BF16 ? "bf16" : "f32 ", rows, n, mode_names[MODE], per_row, groups, per_sm, smem >> 10, 100 * copy / ms,
         ms * 1e3, copy * 1e3, worst<BF16>(ybuf, (size_t)n * rows, n), cudaGetErrorString(err));
}

template <bool BF16> static void modes(int n, int rows, int per_row) {
  run<BF16, SEQ>(n, rows, per_row);
  run<BF16, PRE>(n, rows, per_row);
  run<BF16, PIPE>(n, rows, per_row);
}

int main() {
  if (cudaMalloc(&xbuf, MOST) || cudaMalloc(&ybuf, MOST) || cudaMalloc(&flush, 512u << 20) ||
      cudaMalloc(&counters, 4096) || cudaMalloc(&partials, 1024 * 2 * T * sizeof(float2))) {
    fprintf(stderr, "no GPU memory\n");
    return 1;
  }
  for (int round = 0; round < 2; round++) {
    for (int rows : {4, 8}) {
      modes<true>(1 << 23, rows, 256);
      modes<false>(1 << 22, rows, 256);
    }
    modes<false>(524288, 128, 32); /* wide rows in rounds of 12 groups */
    modes<true>(524288, 256, 16);
    modes<false>(1 << 20, 64, 64);
    modes<true>(1 << 20, 128, 32);
  }
  return 0;
}
