/*
 * gpu_softmax.c — tj_softmax on the GPU against the float64 reference, with
 * the tolerances and method of the testing rules (fresh random inputs per
 * case, poisoned outputs, gaps and guards checked, x untouched).
 *
 *   every width 1..4096 in f32 (M = 1..5 varied with N);
 *   powers of two, +-1 and primes up to 2^20, and one N above 2^20;
 *   f16 and bf16 on a representative subset;
 *   M in {1, 3, 64, 5000, 100000} (the last far beyond one resident grid);
 *   row strides > N, in place, pointers one element off 16 bytes;
 *   rows at any phase of 16 bytes (offsets 1 .. VEC-1, strides N+1 and
 *   N+3, in place, x and y at different phases), odd widths to 50257;
 *   every extreme-value row of the testing rules, in all three dtypes;
 *   forced num_warps and templates, and the NVRTC backend;
 *   row offsets past 2^31 elements (4 GiB of f16, in place);
 *   rows across CTAs: wide rows (clusters, streamed pieces) and few huge
 *   rows (the grid level) up to 2^24 with M in {1, 2, 3, 131}, all three
 *   dtypes (M = 131 at N = 65536, and 262145 in f32, to keep the float64
 *   reference's time down); every cluster size and several splits forced, combined and
 *   streamed; extreme rows at N = 10^6 (every CTA but one all -inf, a NaN,
 *   a +inf, all -inf);
 *   a second call hits the cache and compiles nothing;
 *   tj_log_softmax through the same plans, N from 1 to 10^7, every dtype,
 *   strided, in place, at another phase, extreme rows (CK_RUN_CASE=log).
 *
 * Cases run in batches (support_gpu.c): one upload, many launches, one
 * download. TJ_GPU_QUICK=1 (compute-sanitizer runs) takes subsets of the
 * sweeps and skips the 4 GiB case.
 */
#define _POSIX_C_SOURCE 200809L

#include "support_gpu.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CASES 8192

static GpuCase cases[MAX_CASES];
static int ncases;

static GpuCase *add(tj_dtype dtype, int64_t m, int64_t n) {
  ck_assert_int_lt(ncases, MAX_CASES);
  GpuCase *c = &cases[ncases++];
  memset(c, 0, sizeof *c);
  c->dtype = dtype;
  c->m = m;
  c->n = n;
  c->seed = test_seed((uint64_t)ncases, (uint64_t)n, (uint64_t)m * 4 + (uint64_t)dtype);
  return c;
}

static void run(const char *name, bool allow_unsupported) {
  tj_context *ctx = gpu_context(NULL);
  GpuTally tally = {0};
  gpu_run_cases(ctx, cases, ncases, NULL, allow_unsupported, &tally);
  gpu_report(name, &tally);
  tj_cache_stats s;
  tj_context_cache_stats(ctx, &s);
  fprintf(stderr, "  cache: %llu misses, %llu hits, codegen %.1f ms, driver JIT %.1f ms\n",
          (unsigned long long)s.misses, (unsigned long long)s.hits, s.codegen_us / 1e3, s.jit_ms);
  tj_context_destroy(ctx);
  ncases = 0;
}

static bool is_prime(int64_t n) {
  if (n < 2) return false;
  for (int64_t d = 2; d * d <= n; d++)
    if (n % d == 0) return false;
  return true;
}

static int64_t next_prime(int64_t n) {
  while (!is_prime(n)) n++;
  return n;
}

/* ------------------------------------------------------------- sweeps */

START_TEST(every_width_to_4096_f32) {
  int step_after = gpu_quick() ? 256 : 4096;
  for (int64_t n = 1; n <= 4096; n += n < step_after ? 1 : 61) add(TJ_DTYPE_F32, 1 + n % 5, n);
  run("every N 1..4096 f32", false);
}
END_TEST

/* Adds an f32 case of width n unless one was added already. */
static void add_width(int64_t n) {
  for (int i = 0; i < ncases; i++)
    if (cases[i].n == n) return;
  add(TJ_DTYPE_F32, n <= 65536 ? 3 : 2, n);
}

START_TEST(powers_and_primes_to_2_20) {
  int top = gpu_quick() ? 16 : 20;
  for (int k = 0; k <= top; k++) {
    int64_t p = (int64_t)1 << k;
    for (int64_t n = p - 1; n <= p + 1; n++)
      if (n >= 1) add_width(n);
    if (k >= 2) add_width(next_prime(p + p / 2));
  }
  if (!gpu_quick()) add_width(3 * ((int64_t)1 << 20) + 17); /* above 2^20 */
  run("powers of two, +-1, primes f32", false);
}
END_TEST

static const int64_t half_widths[] = {1,     2,     3,     8,      31,     32,     33,    100,
                                      127,   128,   129,   500,    512,    1000,   1023,  1024,
                                      1025,  2048,  4095,  4096,   4097,   8192,   10007, 16384,
                                      32768, 32769, 65536, 100003, 262144, 1048576};

START_TEST(f16_and_bf16_subset) {
  for (tj_dtype d = TJ_DTYPE_F16; d <= TJ_DTYPE_BF16; d++)
    for (size_t i = 0; i < sizeof half_widths / sizeof half_widths[0]; i++) {
      int64_t n = half_widths[i];
      if (gpu_quick() && n > 65536) continue;
      add(d, n > 65536 ? 2 : 3, n);
      if (i % 3 == 0) add(d, 4, n)->offset = 1;
    }
  run("f16 and bf16", false);
}
END_TEST

START_TEST(row_counts) {
  static const int64_t ms[] = {1, 3, 64, 5000};
  static const int64_t ns[] = {1, 37, 1000, 4096};
  for (size_t i = 0; i < 4; i++)
    for (size_t j = 0; j < 4; j++) add(TJ_DTYPE_F32, ms[i], ns[j]);
  add(TJ_DTYPE_F32, 100000, 1);
  add(TJ_DTYPE_F32, 100000, 32);
  add(TJ_DTYPE_F16, 5000, 128);
  add(TJ_DTYPE_BF16, 20000, 300);
  run("row counts", false);
}
END_TEST

START_TEST(strides_in_place_and_offsets) {
  static const int64_t ns[] = {1, 3, 32, 100, 1000, 1024, 4097, 40000};
  for (tj_dtype d = TJ_DTYPE_F32; d <= TJ_DTYPE_F16; d++)
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
      int64_t n = ns[i], m = n > 10000 ? 3 : 7;
      GpuCase *c = add(d, m, n);
      c->x_stride = n + 5;
      c->y_stride = n + 13;
      add(d, m, n)->in_place = true;
      c = add(d, m, n);
      c->in_place = true;
      c->x_stride = n + 3;
      add(d, m, n)->offset = 1;
      c = add(d, m, n);
      c->offset = 1;
      c->x_stride = n + 8;
      c->y_stride = n + 1;
      c = add(d, m, n); /* strides of whole 16-byte vectors, n not a multiple */
      c->x_stride = c->y_stride = (n + 15) / 16 * 16;
    }
  run("strides, in place, offsets", false);
}
END_TEST

/* Rows at any phase of 16 bytes (phased kernels, codegen/phase.c): offsets
 * 1 to VEC-1 elements, strides N+1 and N+3 (every row at another phase),
 * in place, and x and y at different phases (y then moves element by
 * element). Widths from the odd ones of real models, and 128, where 16-bit
 * rows start to be phased (256 bytes); the widest also in
 * enough rows to fill the device, which the plan stages (one CTA or a
 * cluster a row, the staged kernel phased). */
START_TEST(rows_at_any_phase) {
  static const int64_t ns[] = {1, 7, 77, 128, 197, 577, 1023, 3000, 12345, 32001, 50257};
  size_t count = gpu_quick() ? 8 : sizeof ns / sizeof ns[0]; /* to 3000 under sanitizers */
  for (tj_dtype d = TJ_DTYPE_F32; d < TJ_DTYPE_COUNT; d++)
    for (size_t i = 0; i < count; i++) {
      int64_t n = ns[i], m = n > 10000 ? 5 : 33, vec = d == TJ_DTYPE_F32 ? 4 : 8;
      for (int64_t off = 1; off < vec; off++) add(d, m, n)->offset = off;
      GpuCase *c = add(d, m, n);
      c->x_stride = c->y_stride = n + 1;
      c = add(d, m, n);
      c->x_stride = c->y_stride = n + 3;
      c->offset = 2;
      c = add(d, m, n);
      c->in_place = true;
      c->x_stride = n + 1;
      c->offset = 1;
      c = add(d, m, n);
      c->offset = 1;
      c->y_offset = vec - 1;
      c = add(d, m, n);
      c->x_stride = n + 1;
      c->y_stride = n + 2;
      if (n < 32001) continue;
      c = add(d, 300, n); /* staged */
      c->x_stride = c->y_stride = n + 1;
      c->offset = 3;
      c = add(d, 300, n);
      c->x_stride = c->y_stride = n + 5;
      c->in_place = true;
    }
  run("rows at any phase", false);
}
END_TEST

/* ----------------------------------------------------- extreme values */

enum {
  ROW_RANDOM,
  ROW_ALL_NEG_INF,   /* all NaN */
  ROW_POS_INF,       /* all NaN */
  ROW_NAN,           /* all NaN; other rows unaffected */
  ROW_NEG_INF_MIXED, /* exact 0 at the -inf */
  ROW_FLT_MAX,       /* uniform (or NaN where FLT_MAX rounds to inf) */
  ROW_MINUS_1E30,    /* uniform */
  ROW_DENORMAL,      /* uniform */
  ROW_HUGE_PAIR,     /* +-3e38: one-hot */
  ROW_EQUAL,         /* uniform */
  ROW_ONE_FINITE,    /* -inf but one: exactly one-hot */
  ROW_FEW_FINITE,    /* -inf but a window of 64: every other part of the row all -inf */
  ROW_KINDS
};

static void fill_row(TjMatrix *x, TjRng *rng, int64_t r, int kind) {
  int64_t n = x->cols, at = rng_range(rng, 0, n - 1);
  double tiny = x->dtype == TJ_DTYPE_F16 ? 1e-6 : 1e-40;
  for (int64_t c = 0; c < n; c++) {
    double v = matrix_get(x, r, c);
    switch (kind) {
    case ROW_ALL_NEG_INF: v = -INFINITY; break;
    case ROW_NEG_INF_MIXED:
      if (c != at && rng_uniform(rng) < 0.5) v = -INFINITY;
      break;
    case ROW_FLT_MAX: v = FLT_MAX; break;
    case ROW_MINUS_1E30: v = -1e30; break;
    case ROW_DENORMAL: v = tiny; break;
    case ROW_EQUAL: v = -3.0; break;
    case ROW_ONE_FINITE:
      if (c != at) v = -INFINITY;
      break;
    case ROW_FEW_FINITE:
      if (c < at || c >= at + 64) v = -INFINITY;
      break;
    default: break;
    }
    matrix_set(x, r, c, v);
  }
  if (kind == ROW_POS_INF) matrix_set(x, r, at, INFINITY);
  if (kind == ROW_NAN) matrix_set(x, r, at, NAN);
  if (kind == ROW_HUGE_PAIR) matrix_set(x, r, at, 3e38);
  if (kind == ROW_HUGE_PAIR && n > 1) matrix_set(x, r, (at + 1) % n, -3e38);
}

static void fill_extreme(TjMatrix *x, TjRng *rng, int arg) {
  gpu_fill_default(x, rng, 0);
  for (int64_t r = 0; r < x->rows; r++) fill_row(x, rng, r, (int)((r + arg) % ROW_KINDS));
}

START_TEST(extreme_values) {
  static const int64_t ns[] = {1, 2, 5, 32, 33, 100, 1000, 1024, 4097, 40000};
  for (tj_dtype d = TJ_DTYPE_F32; d < TJ_DTYPE_COUNT; d++)
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
      GpuCase *c = add(d, 2 * ROW_KINDS + 1, ns[i]);
      c->fill = fill_extreme;
      c->fill_arg = (int)i;
      c = add(d, ROW_KINDS, ns[i]);
      c->fill = fill_extreme;
      c->fill_arg = (int)i + 3;
      c->in_place = true;
      c->offset = 1;
    }
  run("extreme values", false);
}
END_TEST

/* ----------------------------------------------------------- options */

START_TEST(forced_warps_and_templates) {
  static const int64_t ns[] = {1, 100, 1000, 4096, 20000};
  for (size_t i = 0; i < 5; i++)
    for (int w = 1; w <= 32; w *= 2) add(TJ_DTYPE_F32, 5, ns[i])->opts.num_warps = w;
  static const int64_t online[] = {1, 100, 1000, 5000, 40000, 100003};
  for (size_t i = 0; i < 6; i++) {
    add(TJ_DTYPE_F32, 3, online[i])->opts.which_template = TJ_SOFTMAX_ONLINE;
    add(TJ_DTYPE_BF16, 3, online[i])->opts.which_template = TJ_SOFTMAX_ONLINE;
  }
  add(TJ_DTYPE_F32, 3, 32768)->opts.which_template = TJ_SOFTMAX_SINGLE;
  add(TJ_DTYPE_F32, 3, 65536)->opts.which_template = TJ_SOFTMAX_SINGLE;
  run("forced options", true);
}
END_TEST

/* The NVRTC backend over the same sweep as the PTX backend: every width
 * 1..4096 (f32), powers of two +-1 and primes to 2^20, the 16-bit subset,
 * and a pointer one element off. Both are checked against float64, so they
 * agree with each other within the tolerance. */
START_TEST(nvrtc_backend) {
  int step = gpu_quick() ? 97 : 1, top = gpu_quick() ? 12 : 20;
  for (int64_t n = 1; n <= 4096; n += step) add(TJ_DTYPE_F32, 1 + n % 3, n)->opts.backend = TJ_BACKEND_NVRTC;
  for (int k = 13; k <= top; k++) {
    int64_t p = (int64_t)1 << k;
    for (int64_t n = p - 1; n <= p + 1; n++) add(TJ_DTYPE_F32, 2, n)->opts.backend = TJ_BACKEND_NVRTC;
    add(TJ_DTYPE_F32, 2, next_prime(p + p / 2))->opts.backend = TJ_BACKEND_NVRTC;
  }
  for (tj_dtype d = TJ_DTYPE_F16; d <= TJ_DTYPE_BF16; d++)
    for (size_t i = 0; i < sizeof half_widths / sizeof half_widths[0]; i++)
      if (!gpu_quick() || half_widths[i] <= 65536) add(d, 2, half_widths[i])->opts.backend = TJ_BACKEND_NVRTC;
  GpuCase *c = add(TJ_DTYPE_F32, 5, 1000);
  c->opts.backend = TJ_BACKEND_NVRTC;
  c->offset = 1;
  run("NVRTC backend", true); /* skipped without libnvrtc or a driver for its PTX */
}
END_TEST

/* ---------------------------------------------------- rows across CTAs */

/* Wide rows: a cluster per row (sm_90) or the grid level, streamed where a
 * thread's share is too large; every dtype, M from one row to more than the
 * device holds at once, widths at and past powers of two. */
START_TEST(wide_rows) {
  static const int64_t ns[] = {32769,  65536,  100003,  131072, 262144,
                               262145, 524288, 1048576, 1048577};
  for (tj_dtype d = TJ_DTYPE_F32; d < TJ_DTYPE_COUNT; d++)
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
      for (int64_t m = 1; m <= 3; m++) {
        if (gpu_quick() && ns[i] > 262144) continue;
        GpuCase *c = add(d, m, ns[i]);
        if ((i + (size_t)m) % 3 == 0) c->offset = 1; /* unaligned: element by element */
        if ((i + (size_t)m) % 4 == 1) c->in_place = true;
      }
  /* More rows than the device holds clusters at once. */
  for (tj_dtype d = TJ_DTYPE_F32; d < TJ_DTYPE_COUNT; d++) add(d, 131, 65536);
  if (!gpu_quick()) add(TJ_DTYPE_F32, 131, 262145)->offset = 1;
  /* 16-bit rows over the grid in rounds of it: on sm_90 in clusters of two
   * over half the split (80 rows of 300000: 7 clusters of 2 a row, 28 rows
   * a round on 132 SMs), one at any phase, one in place. */
  add(TJ_DTYPE_F16, 80, 300000)->offset = 1;
  add(TJ_DTYPE_BF16, 80, 300000)->in_place = true;
  run("wide rows", false);
}
END_TEST

/* Few huge rows: the grid level, the rows streamed in pieces. */
START_TEST(huge_rows) {
  static const struct {
    int64_t m, n;
  } shapes[] = {{1, (int64_t)1 << 24}, {2, 10000000}, {3, 1000000}, {1, 4000001}};
  for (tj_dtype d = TJ_DTYPE_F32; d < TJ_DTYPE_COUNT; d++)
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
      if (gpu_quick() && shapes[i].n > 1000000) continue;
      GpuCase *c = add(d, shapes[i].m, shapes[i].n);
      c->in_place = i == 1;
      c->offset = i == 3 && d == TJ_DTYPE_F32;
    }
  if (!gpu_quick()) add(TJ_DTYPE_F32, 3, (int64_t)1 << 24);
  run("huge rows", false);
}
END_TEST

/* Strategies forced through the options: every cluster size (sizes above 8
 * where the device allows them), splits that are and are not powers of two,
 * a cluster and a split together, and streaming in one CTA (few warps). */
START_TEST(forced_strategies) {
  static const int64_t ns[] = {40000, 65536, 100003};
  for (size_t i = 0; i < 3; i++) {
    for (int cl = 2; cl <= 16; cl++) add(TJ_DTYPE_F32, 3, ns[i])->opts.cluster = cl;
    static const int splits[] = {2, 3, 7, 16, 64};
    for (int k = 0; k < 5; k++) add(TJ_DTYPE_BF16, 3, ns[i])->opts.split = splits[k];
    GpuCase *c = add(TJ_DTYPE_F16, 5, ns[i]);
    c->opts.cluster = 2;
    c->opts.split = 4;
    add(TJ_DTYPE_F32, 4, ns[i])->opts.num_warps = 4; /* 128 threads: streamed */
    c = add(TJ_DTYPE_F32, 2, ns[i]);
    c->opts.num_warps = 8;
    c->opts.split = 5;
  }
  run("forced strategies", true); /* a cluster the device cannot hold is skipped */
}
END_TEST

/* Extreme rows spread over many CTAs (N = 10^6, the grid level): one whose
 * every CTA but one sees only -inf, a NaN in one place, a +inf in one
 * place, all -inf, the rest of the testing rules' kinds. */
START_TEST(extreme_rows_across_ctas) {
  for (tj_dtype d = TJ_DTYPE_F32; d < TJ_DTYPE_COUNT; d++) {
    GpuCase *c = add(d, ROW_KINDS, 1000000);
    c->fill = fill_extreme;
    c = add(d, 2, 1000000);
    c->fill = fill_extreme;
    c->fill_arg = ROW_FEW_FINITE;
    c->opts.split = 128;
    c = add(d, 4, 1000000);
    c->fill = fill_extreme;
    c->fill_arg = ROW_ALL_NEG_INF;
    c = add(d, ROW_KINDS, 300000);
    c->fill = fill_extreme;
    c->fill_arg = 5;
    c->opts.cluster = 16;
  }
  run("extreme rows across CTAs", true);
}
END_TEST

/* ------------------------------------------- offsets past 2^31 elements */

/* Uploads `count` elements of poison at element `at` of the buffer. */
static void poison_at(tj_context *ctx, uint64_t dev, int64_t at, int64_t count, TjMatrix *scratch) {
  matrix_poison(scratch);
  ck_assert_int_eq(tj_copy_to_device(ctx, dev + (uint64_t)at * 2, scratch->data, (size_t)count * 2),
                   TJ_OK);
}

static void run_huge_stride(tj_context *ctx, uint64_t dev, int64_t stride, int64_t n) {
  const int64_t m = 3, guard = 8;
  TjMatrix x, y, scratch;
  TjRng rng;
  rng_seed(&rng, test_seed(31, (uint64_t)stride, (uint64_t)n));
  ck_assert(matrix_alloc(&x, TJ_DTYPE_F16, m, n, n, 0));
  ck_assert(matrix_alloc(&y, TJ_DTYPE_F16, m, n, n, 0));
  ck_assert(matrix_alloc(&scratch, TJ_DTYPE_F16, 1, guard, guard, 0));
  gpu_fill_default(&x, &rng, 0);
  for (int64_t r = 0; r < m; r++) {
    size_t row_bytes = (size_t)n * 2;
    uint64_t at = dev + (uint64_t)(r * stride) * 2;
    ck_assert_int_eq(tj_copy_to_device(ctx, at, (char *)x.data + r * n * 2, row_bytes), TJ_OK);
    poison_at(ctx, dev, r * stride + n, guard, &scratch);
  }
  tj_status st = tj_softmax(ctx, TJ_DTYPE_F16, m, n, dev, stride, dev, stride, NULL, NULL);
  ck_assert_msg(st == TJ_OK, "%s", tj_context_error(ctx));
  for (int64_t r = 0; r < m; r++) {
    uint64_t at = dev + (uint64_t)(r * stride) * 2;
    ck_assert_int_eq(tj_copy_to_host(ctx, (char *)y.data + r * n * 2, at, (size_t)n * 2), TJ_OK);
    ck_assert_int_eq(tj_copy_to_host(ctx, scratch.data, at + (uint64_t)n * 2, (size_t)guard * 2),
                     TJ_OK);
    for (int64_t g = 0; g < guard; g++)
      ck_assert_msg(is_poison(scratch.data, TJ_DTYPE_F16, (size_t)g),
                    "stride %lld: guard after row %lld written", (long long)stride, (long long)r);
  }
  double *ref = malloc((size_t)(m * n) * sizeof *ref);
  softmax_reference(&x, ref);
  TjCompare cmp;
  char why[512];
  bool ok = compare_rows(&y, ref, dtype_tolerance(TJ_DTYPE_F16), false, &cmp);
  compare_describe(&cmp, why, sizeof why);
  ck_assert_msg(ok, "f16 in place, stride %lld, N %lld: %s", (long long)stride, (long long)n, why);
  free(ref);
  matrix_free(&x);
  matrix_free(&y);
  matrix_free(&scratch);
}

START_TEST(offsets_past_2_31_elements) {
  if (gpu_quick()) return;
  tj_context *ctx = gpu_context(NULL);
  const int64_t strides[] = {((int64_t)1 << 30) + 3, ((int64_t)1 << 30) + 8};
  const int64_t max_n = 40000;
  size_t bytes = (size_t)(2 * strides[1] + max_n + 8) * 2; /* over 4 GiB */
  uint64_t dev = 0;
  tj_status st = tj_device_alloc(ctx, bytes, &dev);
  ck_assert_msg(st == TJ_OK, "%s", tj_context_error(ctx));
  for (int i = 0; i < 2; i++) {
    run_huge_stride(ctx, dev, strides[i], 1000);
    run_huge_stride(ctx, dev, strides[i], max_n);
  }
  fprintf(stderr, "offsets past 2^31 elements: 4 cases in a %.2f GiB buffer\n",
          (double)bytes / (1 << 30));
  tj_device_free(ctx, dev);
  tj_context_destroy(ctx);
}
END_TEST

/* One f32 row of n up to 2^31 - 1, the largest tj_softmax takes (the
 * online template): the loop ends at n (an i32 counter wrapped there once),
 * every element is written, and the values are right. x[i] = (i mod 8) / 2,
 * so softmax is known exactly: exp(x - 3.5) / S, with S summed per residue
 * in float64. Checked against the testing rules' tolerance, and, since that
 * tolerance's atol dwarfs values near 1e-9, also to a relative 1e-2: the
 * sum is 2^31 terms in f32, each thread adding up 2^23 of them in turn (an
 * H200 gave 1.8e-3 at n = 2^31 - 1). */
static void run_i32_limit(tj_context *ctx, uint64_t x, uint64_t y, float *host, int64_t n) {
  const int64_t guard = 64;
  for (int64_t i = 0; i < n + guard; i++) host[i] = NAN;
  ck_assert_int_eq(tj_copy_to_device(ctx, y, host, (size_t)(n + guard) * 4), TJ_OK);
  tj_status st = tj_softmax(ctx, TJ_DTYPE_F32, 1, n, y, n, x, n, NULL, NULL);
  ck_assert_msg(st == TJ_OK, "n %lld: %s", (long long)n, tj_context_error(ctx));
  ck_assert_int_eq(tj_copy_to_host(ctx, host, y, (size_t)(n + guard) * 4), TJ_OK);
  double want[8], sum = 0;
  for (int k = 0; k < 8; k++) sum += (double)((n - k + 7) / 8) * exp(0.5 * k - 3.5);
  for (int k = 0; k < 8; k++) want[k] = exp(0.5 * k - 3.5) / sum;
  TjTolerance tol = dtype_tolerance(TJ_DTYPE_F32);
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double w = want[i & 7], got = host[i];
    if (!(fabs(got - w) <= tol.atol + tol.rtol * w)) /* NaN: never written */
      ck_abort_msg("n %lld: y[%lld] = %g, want %g", (long long)n, (long long)i, got, w);
    if (fabs(got - w) / w > worst) worst = fabs(got - w) / w;
  }
  for (int64_t g = 0; g < guard; g++)
    ck_assert_msg(isnan(host[n + g]), "n %lld: y[n + %lld] written", (long long)n, (long long)g);
  fprintf(stderr, "i32 limit: n %lld, largest relative error %.2e\n", (long long)n, worst);
  ck_assert_msg(worst <= 1e-2, "n %lld: relative error %.2e", (long long)n, worst);
}

START_TEST(rows_at_the_i32_limit) {
  if (gpu_quick()) return;
  tj_context *ctx = gpu_context(NULL);
  const int64_t top = INT32_MAX, guard = 64;
  const int64_t ns[] = {top, top + 1 - TJ_SOFTMAX_CHUNK + 1, top + 1 - TJ_SOFTMAX_CHUNK - 1};
  size_t bytes = (size_t)(top + guard) * 4;
  float *host = malloc(bytes);
  uint64_t x = 0, y = 0;
  ck_assert(host != NULL);
  ck_assert_msg(tj_device_alloc(ctx, bytes, &x) == TJ_OK && tj_device_alloc(ctx, bytes, &y) == TJ_OK,
                "%s", tj_context_error(ctx));
  for (int64_t i = 0; i < top + guard; i++) host[i] = 0.5f * (float)(i & 7);
  ck_assert_int_eq(tj_copy_to_device(ctx, x, host, bytes), TJ_OK);
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) run_i32_limit(ctx, x, y, host, ns[i]);
  tj_device_free(ctx, x);
  tj_device_free(ctx, y);
  free(host);
  tj_context_destroy(ctx);
}
END_TEST

/* ---------------------------------------------------------- the cache */

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

START_TEST(second_call_only_launches) {
  /* A tiny problem: the host time per call is the runtime's plus the launch. */
  tj_context *ctx = gpu_context(NULL);
  const int64_t m = 1, n = 32;
  uint64_t x, y;
  TjMatrix hx;
  TjRng rng;
  rng_seed(&rng, 5);
  ck_assert(matrix_alloc(&hx, TJ_DTYPE_F32, m, n, n, 0));
  gpu_fill_default(&hx, &rng, 0);
  ck_assert_int_eq(tj_device_alloc(ctx, hx.bytes, &x), TJ_OK);
  ck_assert_int_eq(tj_device_alloc(ctx, hx.bytes, &y), TJ_OK);
  ck_assert_int_eq(tj_copy_to_device(ctx, x, hx.data, hx.bytes), TJ_OK);
  ck_assert_int_eq(tj_softmax(ctx, TJ_DTYPE_F32, m, n, y, n, x, n, NULL, NULL), TJ_OK);
  tj_cache_stats before, after;
  tj_context_cache_stats(ctx, &before);
  ck_assert_uint_eq(before.misses, 1);
  enum { CALLS = 1000 };
  double start = now_us();
  for (int i = 0; i < CALLS; i++)
    ck_assert_int_eq(tj_softmax(ctx, TJ_DTYPE_F32, m, n, y, n, x, n, NULL, NULL), TJ_OK);
  double per_call = (now_us() - start) / CALLS;
  /* Another n with the same BLOCK and alignment, a multiple of the vector
   * too (DIV 4), shares the kernel; one that is not gets its own. */
  ck_assert_int_eq(tj_softmax(ctx, TJ_DTYPE_F32, m, n - 4, y, n, x, n, NULL, NULL), TJ_OK);
  tj_context_cache_stats(ctx, &after);
  ck_assert_uint_eq(after.misses, 1);
  ck_assert_uint_eq(after.hits, before.hits + CALLS + 1);
  ck_assert_int_eq(tj_softmax(ctx, TJ_DTYPE_F32, m, n - 1, y, n, x, n, NULL, NULL), TJ_OK);
  tj_context_cache_stats(ctx, &after);
  ck_assert_uint_eq(after.misses, 2);
  ck_assert_int_eq(tj_context_synchronize(ctx), TJ_OK);
  fprintf(stderr,
          "cache hit: %.2f us of host time per tj_softmax call, launch included (M=1, N=32)\n",
          per_call);
  matrix_free(&hx);
  tj_device_free(ctx, x);
  tj_device_free(ctx, y);
  tj_context_destroy(ctx);
}
END_TEST

/* ---------------------------------------------------------- log-softmax */

/* tj_log_softmax through the same plans: N from 1 to past 2^20 (lane
 * groups, one CTA, clusters, the grid level, streamed), every dtype, rows
 * strided, in place, at every phase, extreme rows; against the float64
 * log-softmax, outputs poisoned, guards checked (support_gpu.c). */
START_TEST(log_softmax_rows) {
  static const int64_t ns[] = {1, 7, 31, 100, 577, 1000, 1023, 4096, 12345, 32768, 65536, 1048577};
  for (tj_dtype d = TJ_DTYPE_F32; d < TJ_DTYPE_COUNT; d++)
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
      int64_t n = ns[i], m = n > 100000 ? 2 : n > 4096 ? 9 : 131;
      GpuCase *c = add(d, m, n);
      c->op = TJ_ROW_LOG_SOFTMAX;
      c = add(d, m, n); /* rows at another phase each, in place */
      c->op = TJ_ROW_LOG_SOFTMAX;
      c->x_stride = c->y_stride = n + 3;
      c->offset = 1;
      c->in_place = (i % 2) == 0;
      c = add(d, 2 * ROW_KINDS + 1, n < 100000 ? n : 40000);
      c->op = TJ_ROW_LOG_SOFTMAX;
      c->fill = fill_extreme;
      c->fill_arg = (int)i;
    }
  GpuCase *c = add(TJ_DTYPE_F32, 1, 10000000); /* one huge row, the grid level */
  c->op = TJ_ROW_LOG_SOFTMAX;
  c = add(TJ_DTYPE_BF16, 3, 1000); /* the online template, forced */
  c->op = TJ_ROW_LOG_SOFTMAX;
  c->opts.which_template = TJ_SOFTMAX_ONLINE;
  run("log-softmax", false);
}
END_TEST

int main(void) {
  Suite *s = suite_create("gpu softmax");
  TCase *t = tcase_create("numerics");
  tcase_set_timeout(t, 1200);
  tcase_add_test(t, every_width_to_4096_f32);
  tcase_add_test(t, powers_and_primes_to_2_20);
  tcase_add_test(t, f16_and_bf16_subset);
  tcase_add_test(t, row_counts);
  tcase_add_test(t, strides_in_place_and_offsets);
  tcase_add_test(t, extreme_values);
  tcase_add_test(t, forced_warps_and_templates);
  tcase_add_test(t, nvrtc_backend);
  tcase_add_test(t, offsets_past_2_31_elements);
  tcase_add_test(t, rows_at_the_i32_limit);
  tcase_add_test(t, second_call_only_launches);
  suite_add_tcase(s, t);
  TCase *a = tcase_create("across"); /* CK_RUN_CASE=across runs these alone */
  tcase_set_timeout(a, 1200);
  tcase_add_test(a, wide_rows);
  tcase_add_test(a, huge_rows);
  tcase_add_test(a, forced_strategies);
  tcase_add_test(a, extreme_rows_across_ctas);
  suite_add_tcase(s, a);
  TCase *ph = tcase_create("phase"); /* CK_RUN_CASE=phase: rows at any phase alone */
  tcase_set_timeout(ph, 600);
  tcase_add_test(ph, rows_at_any_phase);
  suite_add_tcase(s, ph);
  TCase *lg = tcase_create("log"); /* CK_RUN_CASE=log: tj_log_softmax alone */
  tcase_set_timeout(lg, 600);
  tcase_add_test(lg, log_softmax_rows);
  suite_add_tcase(s, lg);
  return gpu_main(s);
}
