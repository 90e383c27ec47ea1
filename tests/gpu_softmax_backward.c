/*
 * gpu_softmax_backward.c — tj_softmax_backward on the GPU against the
 * float64 reference of support.c (dx = y * (dy - sum(dy * y))).
 *
 * Widths from 1 to 2^20 (every strategy the plan picks: lane groups, one
 * CTA, clusters, the grid split) and one row of 10^7 (a split holding it,
 * or streamed where the device is small), three dtypes, three different row
 * strides, dy and dx at a phase of their own or all three at one phase, in
 * place (dx == y, dx == dy), and the extreme rows of test_softmax_backward.
 * dx starts as poison (NaN): every element must be written, the gaps
 * between rows and a guard after the last must stay poison, and y and dy
 * must be unchanged (unless dx is one of them). TJ_GPU_QUICK (the
 * compute-sanitizer runs) takes a few widths.
 */
#include "support_gpu.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 33

typedef struct Backward {
  tj_dtype dtype;
  int64_t m, n;
  int64_t pads[3];   /* row stride of dx, y, dy: n + pad */
  int64_t shift[3];  /* elements past a 256-byte boundary */
  int in_place;      /* 0, 1: dx == y, 2: dx == dy */
  bool extreme;      /* the extreme rows */
} Backward;

/* Row r of 7: as test_softmax_backward.c's extreme_rows. */
static void extreme_rows(TjMatrix *y, TjMatrix *dy) {
  int64_t n = y->cols;
  for (int64_t r = 1; r < y->rows; r++) {
    switch (r % 7) {
    case 1: matrix_set(y, r, n / 2, NAN); break;
    case 2: matrix_set(dy, r, n - 1, NAN); break;
    case 3: matrix_set(dy, r, n / 3, INFINITY); break;
    case 4:
      matrix_set(y, r, 0, 0.0);
      matrix_set(dy, r, 0, -INFINITY);
      break;
    case 5:
      for (int64_t c = 0; c < n; c++) matrix_set(y, r, c, c == n / 2 ? 1.0 : 0.0);
      break;
    case 6:
      for (int64_t c = 0; c < n; c++) matrix_set(y, r, c, NAN);
      break;
    }
  }
}

static uint64_t upload(tj_context *ctx, const TjMatrix *m, int64_t shift, uint64_t *buffer) {
  size_t at = (size_t)shift * dtype_bytes(m->dtype);
  ck_assert_int_eq(tj_device_alloc(ctx, m->bytes + 256, buffer), TJ_OK);
  ck_assert_int_eq(tj_copy_to_device(ctx, *buffer + at, m->data, m->bytes), TJ_OK);
  return *buffer + at;
}

static void run(tj_context *ctx, const Backward *b, uint64_t seed) {
  char label[200], why[512];
  snprintf(label, sizeof label, "%s M=%lld N=%lld pads %lld/%lld/%lld shifts %lld/%lld/%lld%s%s",
           dtype_label(b->dtype), (long long)b->m, (long long)b->n, (long long)b->pads[0],
           (long long)b->pads[1], (long long)b->pads[2], (long long)b->shift[0],
           (long long)b->shift[1], (long long)b->shift[2],
           b->in_place == 1 ? " dx=y" : b->in_place == 2 ? " dx=dy" : "",
           b->extreme ? " extreme" : "");
  TjMatrix m[3]; /* dx, y, dy */
  TjRng rng;
  rng_seed(&rng, seed);
  for (int i = 0; i < 3; i++)
    ck_assert(matrix_alloc(&m[i], b->dtype, b->m, b->n, b->n + b->pads[i], GUARD));
  backward_fill(&m[1], &m[2], &rng);
  if (b->extreme) extreme_rows(&m[1], &m[2]);
  double *ref = malloc((size_t)(b->m * b->n) * sizeof *ref);
  ck_assert_ptr_nonnull(ref);
  backward_reference(&m[1], &m[2], ref);
  uint64_t buffers[3] = {0, 0, 0}, at[3];
  for (int i = 1; i < 3; i++) at[i] = upload(ctx, &m[i], b->shift[i], &buffers[i]);
  at[0] = b->in_place ? at[b->in_place] : upload(ctx, &m[0], b->shift[0], &buffers[0]);
  const TjMatrix *dx = &m[b->in_place];
  tj_status st = tj_softmax_backward(ctx, b->dtype, b->m, b->n, at[0], dx->stride, at[1],
                                     m[1].stride, at[2], m[2].stride, NULL, NULL);
  ck_assert_msg(st == TJ_OK, "%s: %s", label, tj_context_error(ctx));
  ck_assert_int_eq(tj_context_synchronize(ctx), TJ_OK);
  TjMatrix got[3];
  for (int i = 0; i < 3; i++) {
    if (i == 0 && b->in_place) continue;
    ck_assert(matrix_alloc(&got[i], b->dtype, b->m, b->n, m[i].stride, GUARD));
    ck_assert_int_eq(tj_copy_to_host(ctx, got[i].data, at[i], got[i].bytes), TJ_OK);
  }
  TjCompare cmp;
  bool ok = compare_rows(&got[b->in_place], ref, dtype_tolerance(b->dtype), !b->in_place, &cmp);
  compare_describe(&cmp, why, sizeof why);
  ck_assert_msg(ok, "%s: %s", label, why);
  for (int i = 1; i < 3; i++)
    if (i != b->in_place)
      ck_assert_msg(memcmp(got[i].data, m[i].data, m[i].bytes) == 0, "%s: input %d changed",
                    label, i);
  for (int i = 0; i < 3; i++) {
    if (!(i == 0 && b->in_place)) matrix_free(&got[i]);
    matrix_free(&m[i]);
    if (buffers[i]) tj_device_free(ctx, buffers[i]);
  }
  free(ref);
}

static const int64_t widths[] = {1,     2,     7,     31,     100,    512,     1000,
                                 1025,  4096,  8191,  16384,  16385,  32768,   65537,
                                 131072, 262144, 524288, 1 << 20};
static const int64_t quick_widths[] = {7, 1025, 16385, 65537, 262144};

static int64_t rows_for(int64_t n) {
  int64_t m = ((int64_t)16 << 20) / (4 * n);
  return m < 3 ? 3 : m > 131 ? 131 : m;
}

START_TEST(widths_dtypes_and_layouts) {
  tj_context *ctx = gpu_context(NULL);
  bool quick = gpu_quick();
  const int64_t *ns = quick ? quick_widths : widths;
  size_t count = quick ? sizeof quick_widths / sizeof *quick_widths : sizeof widths / sizeof *widths;
  int cases = 0;
  for (size_t i = 0; i < count; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      int64_t n = ns[i];
      Backward b = {(tj_dtype)d, rows_for(n), n, {0, 0, 0}, {0, 0, 0}, 0, false};
      run(ctx, &b, test_seed((uint64_t)n, (uint64_t)d, 1));
      /* Three strides, the rows at one phase (vectors from each row's boundary). */
      b.m = b.m < 7 ? b.m : 7;
      b.pads[0] = b.pads[1] = b.pads[2] = 3;
      b.shift[0] = b.shift[1] = b.shift[2] = 1;
      run(ctx, &b, test_seed((uint64_t)n, (uint64_t)d, 2));
      /* Three phases of their own (element by element). */
      b.pads[1] = 8;
      b.shift[2] = 2;
      run(ctx, &b, test_seed((uint64_t)n, (uint64_t)d, 3));
      b.pads[0] = b.pads[1] = b.pads[2] = 5;
      b.in_place = 1 + (int)(i % 2);
      run(ctx, &b, test_seed((uint64_t)n, (uint64_t)d, 4));
      cases += 4;
    }
  fprintf(stderr, "softmax backward: %d cases right\n", cases);
  tj_context_destroy(ctx);
}
END_TEST

START_TEST(extreme_rows_and_one_huge_row) {
  tj_context *ctx = gpu_context(NULL);
  static const int64_t ns[] = {1, 100, 5000, 65536, 1000000};
  for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      Backward b = {(tj_dtype)d, 14, ns[i], {0, 0, 0}, {0, 0, 0}, 0, true};
      run(ctx, &b, test_seed((uint64_t)ns[i], (uint64_t)d, 5));
    }
  for (int d = 0; d < TJ_DTYPE_COUNT; d += 2) {
    Backward b = {(tj_dtype)d, 1, gpu_quick() ? 3000000 : 10000000, {0, 0, 0}, {0, 0, 0}, 0,
                  false};
    run(ctx, &b, test_seed(7, (uint64_t)d, 6));
  }
  tj_context_destroy(ctx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("gpu_softmax_backward");
  TCase *t = tcase_create("backward");
  tcase_set_timeout(t, 900);
  tcase_add_test(t, widths_dtypes_and_layouts);
  tcase_add_test(t, extreme_rows_and_one_huge_row);
  suite_add_tcase(s, t);
  return gpu_main(s);
}
