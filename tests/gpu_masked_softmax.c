/*
 * gpu_masked_softmax.c — tj_masked_softmax on the GPU against the float64
 * reference of support.c (softmax(scale * x) over the columns j <= q +
 * offset of query q = row % rows, exactly 0 elsewhere).
 *
 * Widths 1 to 2^20 (lane groups, one CTA, clusters, the grid split) and
 * rows of 10^7, three dtypes; masks bottom right (rows > n too), top left,
 * mid-row, below the diagonal, none, offsets past the clamp; several rows
 * and scales; strides, y and x at one phase or each at its own, in place,
 * masked_softmax_extreme_rows. y starts as poison: all of it written,
 * reference zeros exact +0, gaps and guard untouched, x unchanged. Bad
 * masks are refused before any launch. TJ_GPU_QUICK takes a few widths.
 */
#include "support_gpu.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 33

typedef struct Masked {
  tj_dtype dtype;
  int64_t m, n;
  int64_t pads[2];  /* row stride of y, x: n + pad */
  int64_t shift[2]; /* elements past a 256-byte boundary */
  bool in_place;    /* y == x */
  bool extreme;     /* the extreme rows */
  tj_softmax_mask mask;
} Masked;

/* The largest errors seen by this test (one process per test). */
static double worst_abs, worst_ratio;

static uint64_t upload(tj_context *ctx, const TjMatrix *m, int64_t shift, uint64_t *buffer) {
  size_t at = (size_t)shift * dtype_bytes(m->dtype);
  ck_assert_int_eq(tj_device_alloc(ctx, m->bytes + 256, buffer), TJ_OK);
  ck_assert_int_eq(tj_copy_to_device(ctx, *buffer + at, m->data, m->bytes), TJ_OK);
  return *buffer + at;
}

static void run(tj_context *ctx, const Masked *b, uint64_t seed) {
  char label[256], why[512];
  snprintf(label, sizeof label,
           "%s M=%lld N=%lld pads %lld/%lld shifts %lld/%lld%s%s mask causal %d rows %lld offset "
           "%lld scale %.9g",
           dtype_label(b->dtype), (long long)b->m, (long long)b->n, (long long)b->pads[0],
           (long long)b->pads[1], (long long)b->shift[0], (long long)b->shift[1],
           b->in_place ? " in place" : "", b->extreme ? " extreme" : "", b->mask.causal,
           (long long)b->mask.rows, (long long)b->mask.offset, (double)b->mask.scale);
  TjMatrix m[2]; /* y, x */
  TjRng rng;
  rng_seed(&rng, seed);
  for (int i = 0; i < 2; i++)
    ck_assert(matrix_alloc(&m[i], b->dtype, b->m, b->n, b->n + b->pads[i], GUARD));
  masked_softmax_fill(&m[1], &b->mask, &rng);
  if (b->extreme) masked_softmax_extreme_rows(&m[1], &b->mask);
  double *ref = malloc((size_t)(b->m * b->n) * sizeof *ref);
  ck_assert_ptr_nonnull(ref);
  masked_softmax_reference(&m[1], &b->mask, ref);
  uint64_t buffers[2] = {0, 0}, at[2];
  at[1] = upload(ctx, &m[1], b->shift[1], &buffers[1]);
  at[0] = b->in_place ? at[1] : upload(ctx, &m[0], b->shift[0], &buffers[0]);
  const TjMatrix *y = &m[b->in_place];
  tj_status st = tj_masked_softmax(ctx, b->dtype, b->m, b->n, at[0], y->stride, at[1], m[1].stride,
                                   &b->mask, NULL, NULL);
  ck_assert_msg(st == TJ_OK, "%s: %s", label, tj_context_error(ctx));
  ck_assert_int_eq(tj_context_synchronize(ctx), TJ_OK);
  TjMatrix got[2];
  for (int i = 0; i < 2; i++) {
    if (i == 0 && b->in_place) continue;
    ck_assert(matrix_alloc(&got[i], b->dtype, b->m, b->n, m[i].stride, GUARD));
    ck_assert_int_eq(tj_copy_to_host(ctx, got[i].data, at[i], got[i].bytes), TJ_OK);
  }
  const TjMatrix *out = &got[b->in_place];
  TjCompare cmp;
  bool ok = compare_rows(out, ref, dtype_tolerance(b->dtype), !b->in_place, &cmp);
  compare_describe(&cmp, why, sizeof why);
  ck_assert_msg(ok, "%s: %s", label, why);
  worst_abs = fmax(worst_abs, cmp.max_abs);
  worst_ratio = fmax(worst_ratio, cmp.max_ratio);
  int64_t zr, zc, bad = compare_exact_zeros(out, ref, &zr, &zc);
  ck_assert_msg(bad == 0, "%s: %lld zeros of the reference not +0 (first row %lld col %lld: %g)",
                label, (long long)bad, (long long)zr, (long long)zc,
                bad ? matrix_get(out, zr, zc) : 0.0);
  if (!b->in_place)
    ck_assert_msg(memcmp(got[1].data, m[1].data, m[1].bytes) == 0, "%s: x changed", label);
  for (int i = 0; i < 2; i++) {
    if (!(i == 0 && b->in_place)) matrix_free(&got[i]);
    matrix_free(&m[i]);
    if (buffers[i]) tj_device_free(ctx, buffers[i]);
  }
  free(ref);
}

static void report(const char *test, int cases) {
  fprintf(stderr,
          "masked softmax, %s: %d cases right, max abs error %.3g, max error/tolerance %.3g\n",
          test, cases, worst_abs, worst_ratio);
}

static const int64_t widths[] = {1,    2,     7,     31,    100,   512,    1000,   1025,   4096,
                                 8191, 16384, 16385, 32768, 65537, 131072, 262144, 524288, 1 << 20};
static const int64_t quick_widths[] = {7, 1025, 16385, 65537, 262144};

static int64_t rows_for(int64_t n) {
  int64_t m = ((int64_t)16 << 20) / (4 * n);
  return m < 3 ? 3 : m > 131 ? 131 : m;
}

/* Each width and dtype five ways: bottom right over the whole call (rows =
 * M, so rows > n where n is small) or over 3 attention matrices; top left
 * with three strides at one phase; a random offset with y and x at phases
 * of their own; in place, ending mid-row; and no mask. */
START_TEST(widths_dtypes_and_layouts) {
  tj_context *ctx = gpu_context(NULL);
  bool quick = gpu_quick();
  const int64_t *ns = quick ? quick_widths : widths;
  size_t count =
      quick ? sizeof quick_widths / sizeof *quick_widths : sizeof widths / sizeof *widths;
  int cases = 0;
  for (size_t i = 0; i < count; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      int64_t n = ns[i], m = rows_for(n);
      TjRng r;
      rng_seed(&r, test_seed((uint64_t)n, (uint64_t)d, 10));
      float scale = masked_scales[(i + (size_t)d) % 4];
      int64_t rows = m > 2 * n ? m : m / 3 > 0 ? m / 3 : 1;
      Masked b = {(tj_dtype)d, m,     n,     {0, 0},
                  {0, 0},      false, false, masked_causal(rows, n - rows, scale)};
      run(ctx, &b, test_seed((uint64_t)n, (uint64_t)d, 1));
      /* Top left, strides, the rows at one phase (vectors from each row's boundary). */
      b.m = b.m < 7 ? b.m : 7;
      b.mask = masked_causal(0, 0, scale);
      b.pads[0] = b.pads[1] = 3;
      b.shift[0] = b.shift[1] = 1;
      run(ctx, &b, test_seed((uint64_t)n, (uint64_t)d, 2));
      /* Two phases of their own (element by element), a random offset. */
      b.pads[1] = 8;
      b.shift[1] = 2;
      b.mask = masked_causal(2, rng_range(&r, -2, n), scale);
      run(ctx, &b, test_seed((uint64_t)n, (uint64_t)d, 3));
      /* In place, ending mid-row. */
      b.pads[0] = b.pads[1] = 5;
      b.shift[0] = b.shift[1] = 0;
      b.in_place = true;
      b.mask = masked_causal(b.m, n / 2 - b.m, scale);
      run(ctx, &b, test_seed((uint64_t)n, (uint64_t)d, 4));
      /* No mask (its offset ignored). */
      b.in_place = i % 2 == 1;
      b.mask = (tj_softmax_mask){scale, 0, 0, -5};
      run(ctx, &b, test_seed((uint64_t)n, (uint64_t)d, 5));
      cases += 5;
    }
  report("widths, dtypes and layouts", cases);
  tj_context_destroy(ctx);
}
END_TEST

/* The masks of attention at a few widths: top left over one matrix and
 * over three, bottom right with rows > n as more queries than M, negative
 * offsets, offsets at and past the clamp (every column, no column), no
 * mask, rows 0 (= m) and rows 2^31 - 1. */
START_TEST(masks_and_rows) {
  tj_context *ctx = gpu_context(NULL);
  static const int64_t ns[] = {1, 7, 1000, 4097, 65537};
  int cases = 0;
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      int64_t n = ns[i];
      MaskedCall masks[MASKED_CALLS + 1];
      masked_calls(n, 12, masks);
      masks[MASKED_CALLS] = (MaskedCall){6, masked_causal(INT32_MAX, n / 3, 0.125f)};
      for (size_t k = 0; k < sizeof masks / sizeof masks[0]; k++) {
        Masked b = {(tj_dtype)d, masks[k].m, n, {0, 0}, {0, 0}, false, false, masks[k].mask};
        run(ctx, &b, test_seed((uint64_t)n, (uint64_t)d, 20 + k));
        cases++;
      }
    }
  report("masks and rows", cases);
  tj_context_destroy(ctx);
}
END_TEST

/* masked_softmax_extreme_rows under three masks, and rows of 10^7 (a split
 * holding each, or streamed where the device is small). */
START_TEST(extreme_rows_and_huge_rows) {
  tj_context *ctx = gpu_context(NULL);
  static const int64_t ns[] = {1, 100, 5000, 65536, 1000000};
  int cases = 0;
  for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      int64_t n = ns[i];
      const tj_softmax_mask masks[] = {
          {0.125f, 0, 0, 0}, masked_causal(20, -1, 1.0f), masked_causal(20, n - 20, 0.125f)};
      for (int k = 0; k < 3; k++) {
        Masked b = {(tj_dtype)d, 20, n, {0, 0}, {0, 0}, false, true, masks[k]};
        run(ctx, &b, test_seed((uint64_t)n, (uint64_t)d, 30 + (uint64_t)k));
        cases++;
      }
    }
  int64_t huge = gpu_quick() ? 3000000 : 10000000;
  for (int d = 0; d < TJ_DTYPE_COUNT; d += 2) {
    Masked b = {(tj_dtype)d, 1,     huge,  {0, 0},
                {0, 0},      false, false, masked_causal(1, huge * 3 / 5, 0.125f)};
    run(ctx, &b, test_seed(7, (uint64_t)d, 40));
    b.m = 2;
    b.mask = masked_causal(2, huge - 2, 1.0f);
    run(ctx, &b, test_seed(7, (uint64_t)d, 41));
    cases += 2;
  }
  report("extreme and huge rows", cases);
  tj_context_destroy(ctx);
}
END_TEST

/* ---- refusals ---------------------------------------------------------- */

static void assert_refused(tj_context *ctx, tj_status st, const char *why, const char *call) {
  ck_assert_msg(st == TJ_ERR_INVALID_ARGUMENT, "%s: %s", call, tj_status_string(st));
  const char *msg = tj_context_error(ctx);
  ck_assert_msg(strstr(msg, "tj_masked_softmax") && strstr(msg, why),
                "%s: message \"%s\", want \"%s\"", call, msg, why);
}

/* A NULL mask, a scale that is not positive and finite, causal not 0 or
 * 1, rows outside 0 .. 2^31-1, and the checks every row op makes (a NULL
 * pointer, overlapping y and x) are refused before any launch, whatever m
 * is; the poisoned buffer stays byte for byte as it was, and the context
 * works after. */
START_TEST(bad_masks_launch_nothing) {
  tj_context *ctx = gpu_context(NULL);
  const size_t bytes = 64 * 1024;
  uint64_t buf = 0;
  ck_assert_int_eq(tj_device_alloc(ctx, bytes, &buf), TJ_OK);
  TjMatrix poison;
  ck_assert(matrix_alloc(&poison, TJ_DTYPE_F32, 1, (int64_t)(bytes / 4), (int64_t)(bytes / 4), 0));
  ck_assert_int_eq(tj_copy_to_device(ctx, buf, poison.data, bytes), TJ_OK);
  const uint64_t y = buf, x = buf + 8192;
  const tj_softmax_mask good = masked_causal(4, 0, 0.125f);
  const struct {
    tj_softmax_mask mask;
    const char *why;
  } bad[] = {
      {{0.0f, 1, 4, 0}, "mask->scale must be positive and finite"},
      {{-0.0f, 1, 4, 0}, "mask->scale must be positive and finite"},
      {{-0.125f, 1, 4, 0}, "mask->scale must be positive and finite"},
      {{INFINITY, 1, 4, 0}, "mask->scale must be positive and finite"},
      {{-INFINITY, 0, 4, 0}, "mask->scale must be positive and finite"},
      {{NAN, 1, 4, 0}, "mask->scale must be positive and finite"},
      {{0.125f, 2, 4, 0}, "mask->causal must be 0 or 1"},
      {{0.125f, -1, 4, 0}, "mask->causal must be 0 or 1"},
      {{0.125f, 1, -1, 0}, "mask->rows must be 0 (m) to 2^31-1"},
      {{0.125f, 1, (int64_t)INT32_MAX + 1, 0}, "mask->rows must be 0 (m) to 2^31-1"},
      {{0.125f, 0, INT64_MAX, 0}, "mask->rows must be 0 (m) to 2^31-1"},
      {{0.125f, 1, INT64_MIN, 0}, "mask->rows must be 0 (m) to 2^31-1"},
  };
  char call[64];
  for (int64_t m = 0; m <= 4; m += 4) {
    snprintf(call, sizeof call, "NULL mask, m %lld", (long long)m);
    assert_refused(ctx,
                   tj_masked_softmax(ctx, TJ_DTYPE_F32, m, 100, y, 100, x, 100, NULL, NULL, NULL),
                   "NULL mask", call);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      snprintf(call, sizeof call, "bad mask %zu, m %lld", i, (long long)m);
      tj_status st =
          tj_masked_softmax(ctx, TJ_DTYPE_F32, m, 100, y, 100, x, 100, &bad[i].mask, NULL, NULL);
      assert_refused(ctx, st, bad[i].why, call);
    }
  }
  assert_refused(ctx,
                 tj_masked_softmax(ctx, TJ_DTYPE_F32, 4, 100, y, 100, 0, 100, &good, NULL, NULL),
                 "NULL x", "NULL x");
  assert_refused(
      ctx, tj_masked_softmax(ctx, TJ_DTYPE_F32, 4, 100, y, 100, y + 400, 100, &good, NULL, NULL),
      "overlap", "overlap");
  assert_refused(ctx,
                 tj_masked_softmax(ctx, TJ_DTYPE_F32, -1, 100, y, 100, x, 100, &good, NULL, NULL),
                 "negative m or n", "negative m");
  ck_assert_int_eq(tj_context_synchronize(ctx), TJ_OK);
  TjMatrix after;
  ck_assert(matrix_alloc(&after, TJ_DTYPE_F32, 1, (int64_t)(bytes / 4), (int64_t)(bytes / 4), 0));
  ck_assert_int_eq(tj_copy_to_host(ctx, after.data, buf, bytes), TJ_OK);
  ck_assert_mem_eq(after.data, poison.data, bytes);
  /* Empty calls succeed with nothing launched; a good one still runs. */
  ck_assert_int_eq(tj_masked_softmax(ctx, TJ_DTYPE_F32, 0, 100, 0, 0, 0, 0, &good, NULL, NULL),
                   TJ_OK);
  ck_assert_int_eq(tj_masked_softmax(ctx, TJ_DTYPE_F32, 4, 0, 0, 0, 0, 0, &good, NULL, NULL),
                   TJ_OK);
  matrix_free(&after);
  matrix_free(&poison);
  tj_device_free(ctx, buf);
  Masked b = {TJ_DTYPE_F32, 4, 100, {0, 0}, {0, 0}, false, false, good};
  run(ctx, &b, test_seed(100, 0, 50));
  tj_context_destroy(ctx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("gpu_masked_softmax");
  TCase *t = tcase_create("masked");
  tcase_set_timeout(t, 900);
  tcase_add_test(t, widths_dtypes_and_layouts);
  tcase_add_test(t, masks_and_rows);
  tcase_add_test(t, extreme_rows_and_huge_rows);
  tcase_add_test(t, bad_masks_launch_nothing);
  suite_add_tcase(s, t);
  return gpu_main(s);
}
