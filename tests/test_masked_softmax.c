/*
 * test_masked_softmax.c — masked softmax (templates/masked_softmax*.tj:
 * softmax(scale * x) over the columns j <= q + offset of query q = row %
 * rows, exactly 0 elsewhere): the interpreter against the float64 reference
 * of support.c, and the generated PTX on the simulator against the
 * interpreter, in every strategy the plan can pick.
 *
 * Interpreter: every width 1..1100, powers of two ±1 and primes to 2^17,
 * the online template in small chunks, three dtypes; masks top left, bottom
 * right (rows > n too), negative, huge and unclamped offsets, none; several
 * rows and scales; strides, in place; masked_softmax_extreme_rows. y starts
 * as poison: all of it written, reference zeros exact +0, gaps and guard
 * untouched. Simulator: planned kernels, streamed, clusters, splits, phased
 * rows, sm_80/sm_90; x read in its kept columns only, y written once.
 */
#define _POSIX_C_SOURCE 200809L

#include "ir/ir.h"
#include "support.h"
#include "support_ptxsim.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD           37 /* elements after the last row of the output */
#define MISSING_LIBCUDA "/nonexistent/tilejit-test/libcuda.so.1"

typedef struct Case {
  tj_softmax_template which;
  tj_dtype dtype;
  int64_t m, n;
  int64_t block;        /* 0: the plan's */
  int64_t y_pad, x_pad; /* row stride = n + pad */
  bool in_place;        /* y == x */
  bool raw_offset;      /* the kernel gets mask.offset as it is, not clamped */
  tj_softmax_mask mask;
  uint64_t seed;
} Case;

/* Changes rows of x after the random fill. */
typedef void (*Shaper)(TjMatrix *x, const tj_softmax_mask *mask);

/* The largest errors of this test (one process per test), per dtype. */
static double worst_abs[TJ_DTYPE_COUNT], worst_ratio[TJ_DTYPE_COUNT];

static void note_errors(tj_dtype d, double abs_error, double ratio) {
  if (abs_error > worst_abs[d]) worst_abs[d] = abs_error;
  if (ratio > worst_ratio[d]) worst_ratio[d] = ratio;
}

static void report(const char *test) {
  fprintf(stderr, "masked softmax, %s: max abs error / error over tolerance:", test);
  for (int d = 0; d < TJ_DTYPE_COUNT; d++)
    fprintf(stderr, " %s %.3g / %.3g%s", dtype_label((tj_dtype)d), worst_abs[d], worst_ratio[d],
            d + 1 < TJ_DTYPE_COUNT ? "," : "\n");
  memset(worst_abs, 0, sizeof worst_abs);
  memset(worst_ratio, 0, sizeof worst_ratio);
}

static void case_label(const Case *c, char *out, size_t size) {
  snprintf(out, size,
           "%s %s M=%lld N=%lld BLOCK=%lld pads %lld/%lld%s mask causal %d rows %lld offset %lld%s "
           "scale %.9g seed %llu",
           c->which == TJ_SOFTMAX_ONLINE ? "online" : "single", dtype_label(c->dtype),
           (long long)c->m, (long long)c->n, (long long)c->block, (long long)c->y_pad,
           (long long)c->x_pad, c->in_place ? " in place" : "", c->mask.causal,
           (long long)c->mask.rows, (long long)c->mask.offset, c->raw_offset ? " (raw)" : "",
           (double)c->mask.scale, (unsigned long long)c->seed);
}

static tj_spec *make_spec(tj_softmax_template which, tj_dtype dtype, int64_t n, int64_t block,
                          tj_spec_options *o) {
  tj_program *p = NULL;
  tj_spec *s = NULL;
  ck_assert_int_eq(tj_row_program(TJ_ROW_MASKED_SOFTMAX, which, n, &p), TJ_OK);
  ck_assert_int_eq(row_spec_options(TJ_ROW_MASKED_SOFTMAX, which, dtype, 65536, n, 0, 0, o), TJ_OK);
  if (block) o->block = block;
  tj_status st = tj_specialize(p, o, &s);
  ck_assert_msg(st == TJ_OK, "specialize: %s", tj_program_error(p));
  tj_program_destroy(p);
  return s;
}

/* The offset tj_masked_softmax gives the kernel: n when not causal, and
 * clamped to [-2^31, 2^31]. */
static int64_t kernel_offset(const tj_softmax_mask *mask, int64_t n) {
  const int64_t limit = (int64_t)1 << 31;
  int64_t offset = mask->causal ? mask->offset : n;
  return offset < -limit ? -limit : offset > limit ? limit : offset;
}

/* The kernel's arguments: y gets its whole buffer (guard included), x
 * exactly its rows unless it is y; then the strides, n, and the mask's
 * scale, rows (0: m) and offset, as tj_masked_softmax passes them. */
static void make_args(tj_arg *args, TjMatrix *y, TjMatrix *x, const tj_softmax_mask *mask,
                      bool raw_offset) {
  args[0] = (tj_arg){TJ_ARG_PTR, {.ptr = y->data}, y->bytes};
  args[1] = (tj_arg){TJ_ARG_PTR, {.ptr = x->data}, x == y ? x->bytes : x->span_bytes};
  args[2] = (tj_arg){TJ_ARG_INT, {.i = y->stride}, 0};
  args[3] = (tj_arg){TJ_ARG_INT, {.i = x->stride}, 0};
  args[4] = (tj_arg){TJ_ARG_INT, {.i = x->cols}, 0};
  args[5] = (tj_arg){TJ_ARG_FLOAT, {.f = mask->scale}, 0};
  args[6] = (tj_arg){TJ_ARG_INT, {.i = mask->rows ? mask->rows : x->rows}, 0};
  args[7] =
      (tj_arg){TJ_ARG_INT, {.i = raw_offset ? mask->offset : kernel_offset(mask, x->cols)}, 0};
}

static void run_case(const Case *c, Shaper shape) {
  char label[320], why[512];
  TjMatrix x, y;
  TjRng r;
  rng_seed(&r, c->seed);
  int64_t n = c->n;
  ck_assert(matrix_alloc(&x, c->dtype, c->m, n, n + c->x_pad, c->in_place ? GUARD : 0));
  masked_softmax_fill(&x, &c->mask, &r);
  if (shape) shape(&x, &c->mask);
  double *ref = malloc((size_t)(c->m * n + 1) * sizeof *ref);
  ck_assert_ptr_nonnull(ref);
  masked_softmax_reference(&x, &c->mask, ref);
  TjMatrix *out = c->in_place ? &x : &y;
  if (!c->in_place) ck_assert(matrix_alloc(&y, c->dtype, c->m, n, n + c->y_pad, GUARD));
  tj_spec_options o;
  tj_spec *s = make_spec(c->which, c->dtype, n, c->block, &o);
  tj_arg args[8];
  make_args(args, out, &x, &c->mask, c->raw_offset);
  case_label(c, label, sizeof label);
  tj_status st = tj_interpret(s, args, 8, c->m);
  ck_assert_msg(st == TJ_OK, "%s: %s: %s", label, tj_status_string(st), tj_spec_error(s));
  tj_spec_destroy(s);
  TjCompare cmp;
  bool ok = compare_rows(out, ref, dtype_tolerance(c->dtype), !c->in_place, &cmp);
  compare_describe(&cmp, why, sizeof why);
  ck_assert_msg(ok, "%s: %s", label, why);
  note_errors(c->dtype, cmp.max_abs, cmp.max_ratio);
  int64_t zr, zc, bad = compare_exact_zeros(out, ref, &zr, &zc);
  ck_assert_msg(bad == 0, "%s: %lld zeros of the reference not +0 (first row %lld col %lld: %g)",
                label, (long long)bad, (long long)zr, (long long)zc,
                bad ? matrix_get(out, zr, zc) : 0.0);
  matrix_free(&x);
  if (!c->in_place) matrix_free(&y);
  free(ref);
}

static Case make_case(int which, int dtype, int64_t m, int64_t n, tj_softmax_mask mask,
                      uint64_t seed) {
  Case c = {(tj_softmax_template)which, (tj_dtype)dtype, m, n, 0, 0, 0, false, false, mask, seed};
  return c;
}

/* ---- the interpreter --------------------------------------------------- */

/* Every width 1..1100, 110 a loop index, in a dtype and a mask that change
 * with n: causal top left, bottom right, at a random offset, strictly below
 * the diagonal (offset -1), or none; 1 to 4 queries, 1 or 2 batches. Every
 * seventh width runs the online template in chunks of 64 too. */
START_TEST(every_width) {
  for (int64_t n = 110 * _i + 1; n <= 110 * (_i + 1); n++) {
    int64_t rows = 1 + n % 4, m = rows * (1 + n / 4 % 2);
    TjRng r;
    rng_seed(&r, test_seed((uint64_t)n, 9, 0));
    float scale = masked_scales[n / 5 % 4];
    tj_softmax_mask masks[] = {masked_causal(rows, 0, scale),
                               masked_causal(rows, n - rows, scale),
                               masked_causal(rows, rng_range(&r, -rows, n), scale),
                               masked_causal(rows, -1, scale),
                               {scale, 0, rows, 0}};
    Case c = make_case(TJ_SOFTMAX_SINGLE, (int)(n % 3), m, n, masks[n % 5], test_seed(n, 1, 0));
    run_case(&c, NULL);
    if (n % 7 == 0) {
      c.which = TJ_SOFTMAX_ONLINE;
      c.block = 64;
      c.seed++;
      run_case(&c, NULL);
    }
  }
  char name[64];
  snprintf(name, sizeof name, "every width %d..%d", 110 * _i + 1, 110 * (_i + 1));
  report(name);
}
END_TEST

/* Powers of two, ±1, and primes up to 2^17, every dtype: bottom right, and
 * the kept columns ending anywhere in the row. */
START_TEST(wide_rows) {
  static const int64_t ns[] = {2047,  2048,  2049,  4093,  8191,  8192,
                               16384, 16385, 32749, 65536, 65537, 131071};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      int64_t n = ns[i], m = n > 20000 ? 2 : 3;
      TjRng r;
      rng_seed(&r, test_seed((uint64_t)n, (uint64_t)d, 12));
      Case c = make_case(TJ_SOFTMAX_SINGLE, d, m, n, masked_causal(m, n - m, masked_scales[i % 4]),
                         test_seed((uint64_t)n, (uint64_t)d, 2));
      run_case(&c, NULL);
      c.mask.offset = rng_range(&r, -1, n - m);
      c.seed++;
      run_case(&c, NULL);
    }
  report("wide rows");
}
END_TEST

/* The online template with a small chunk (partial last chunks, several
 * chunks, kept columns ending inside a chunk) and with its default one. */
START_TEST(online_chunks) {
  static const int64_t ns[] = {1, 17, 64, 65, 1000, 4097, 100003};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      int64_t n = ns[i], m = n > 5000 ? 1 : 3;
      TjRng r;
      rng_seed(&r, test_seed((uint64_t)n, (uint64_t)d, 13));
      Case c =
          make_case(TJ_SOFTMAX_ONLINE, d, m, n, masked_causal(m, n - m, masked_scales[(i + d) % 4]),
                    test_seed((uint64_t)n, (uint64_t)d, 3));
      c.block = i % 2 ? 64 : 256;
      run_case(&c, NULL);
      c.block = 0;
      c.mask.offset = rng_range(&r, -1, n);
      c.seed++;
      run_case(&c, NULL);
    }
  report("online chunks");
}
END_TEST

/* The masks of attention, in both templates and every dtype: top left
 * (one attention matrix, and three of 4 queries), bottom right (rows > n
 * included, as a batch or as more queries than M), negative offsets,
 * offsets past the clamp (every column, no column), no mask (its offset
 * ignored), and rows 0 (= m). */
START_TEST(masks_and_rows) {
  static const int64_t ns[] = {1, 7, 100, 1000, 3000};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (int which = TJ_SOFTMAX_SINGLE; which <= TJ_SOFTMAX_ONLINE; which++)
      for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
        int64_t n = ns[i];
        bool small = n < 20;
        MaskedCall masks[MASKED_CALLS];
        masked_calls(n, small ? 2 * (n + 3) : 12, masks);
        for (size_t k = 0; k < sizeof masks / sizeof masks[0]; k++) {
          Case c = make_case(which, d, masks[k].m, n, masks[k].mask,
                             test_seed((uint64_t)n, (uint64_t)d, 100 * (uint64_t)which + k));
          if (which == TJ_SOFTMAX_ONLINE) c.block = 256;
          run_case(&c, NULL);
        }
      }
  report("masks and rows");
}
END_TEST

/* The template's own arithmetic on offsets tj_masked_softmax would clamp:
 * ±2^40 and the ends of i32 (q + offset + 1 in i64 must not wrap). */
START_TEST(unclamped_offsets_in_the_template) {
  static const int64_t offsets[] = {(int64_t)1 << 40, -((int64_t)1 << 40), INT32_MAX, INT32_MIN,
                                    (int64_t)INT32_MIN - 1};
  static const int64_t ns[] = {5, 1000};
  for (size_t i = 0; i < 2; i++)
    for (int which = TJ_SOFTMAX_SINGLE; which <= TJ_SOFTMAX_ONLINE; which++)
      for (size_t k = 0; k < sizeof offsets / sizeof offsets[0]; k++) {
        Case c = make_case(which, (int)k % 3, 4, ns[i], masked_causal(2, offsets[k], 0.125f),
                           test_seed(ns[i], k, 20 + (uint64_t)which));
        c.raw_offset = true;
        run_case(&c, NULL);
      }
}
END_TEST

/* Strides that differ between y and x, and in place. */
START_TEST(strides_and_in_place) {
  static const int64_t ns[] = {1, 5, 100, 1023, 3000};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (int which = TJ_SOFTMAX_SINGLE; which <= TJ_SOFTMAX_ONLINE; which++)
      for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
        int64_t n = ns[i];
        Case c = make_case(which, d, 6, n, masked_causal(3, n - 3, masked_scales[(i + d) % 4]),
                           test_seed((uint64_t)n, (uint64_t)d, 4 + (uint64_t)which));
        c.y_pad = 3;
        c.x_pad = 17;
        run_case(&c, NULL);
        c.y_pad = 17;
        c.x_pad = 1;
        c.mask.offset = -1;
        run_case(&c, NULL);
        c.y_pad = c.x_pad = 5;
        c.in_place = true;
        run_case(&c, NULL);
        c.mask.causal = 0;
        run_case(&c, NULL);
      }
  report("strides and in place");
}
END_TEST

/* masked_softmax_extreme_rows on 20 rows (two of each kind): no mask, one
 * strictly below the diagonal (row 0 keeps nothing) and bottom right. */
START_TEST(extreme_values) {
  static const int64_t ns[] = {1, 2, 33, 1000, 5000};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (int which = TJ_SOFTMAX_SINGLE; which <= TJ_SOFTMAX_ONLINE; which++)
      for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
        int64_t n = ns[i];
        const tj_softmax_mask masks[] = {
            {0.125f, 0, 0, 0}, masked_causal(20, -1, 1.0f), masked_causal(20, n - 20, 0.125f)};
        for (int k = 0; k < 3; k++) {
          Case c = make_case(which, d, 20, n, masks[k],
                             test_seed((uint64_t)n, (uint64_t)d, 6 + 3 * (uint64_t)which + k));
          if (which == TJ_SOFTMAX_ONLINE) c.block = 256;
          run_case(&c, masked_softmax_extreme_rows);
        }
      }
  report("extreme values");
}
END_TEST

/* Without a driver (TILEJIT_LIBCUDA names no file), tj_masked_softmax
 * refuses at once, naming itself and the library: its mask checks need a
 * context, so gpu_masked_softmax checks those. */
START_TEST(no_driver) {
  tj_softmax_mask mask = masked_causal(4, 0, 0.125f);
  const tj_softmax_mask *masks[] = {&mask, NULL};
  for (int i = 0; i < 2; i++) {
    tj_status st =
        tj_masked_softmax(NULL, TJ_DTYPE_F32, 4, 4, 0x1000, 4, 0x2000, 4, masks[i], NULL, NULL);
    ck_assert_msg(st == TJ_ERR_NO_DRIVER, "%s", tj_status_string(st));
    const char *msg = tj_context_error(NULL);
    ck_assert_msg(strstr(msg, "tj_masked_softmax") && strstr(msg, MISSING_LIBCUDA), "\"%s\"", msg);
  }
}
END_TEST

/* ---- the simulator ----------------------------------------------------- */

typedef struct SimCase {
  tj_softmax_template which;
  tj_dtype dtype;
  int64_t n;
  int warps, cluster, split; /* 0: the plan's */
  int arch;
  bool unaligned; /* rows at every phase (a stride of n + 3) */
  int reads;      /* times x's kept columns are read: 1, 2, or 0 for at most 2 */
  int mask;       /* which of sim_mask's */
} SimCase;

/* For 12 rows: bottom right, ending mid-row, none, and strictly below the
 * diagonal of 4 queries (rows keeping nothing). */
static tj_softmax_mask sim_mask(int which, int64_t n) {
  switch (which % 4) {
  case 0: return masked_causal(12, n - 12, 0.125f);
  case 1: return masked_causal(12, n / 2 - 6, 1.0f);
  case 2: return (tj_softmax_mask){masked_scales[2], 0, 0, 0};
  default: return masked_causal(4, -2, 0.125f);
  }
}

/* The PTX of the case's specialization against the interpreter, on 12
 * rows of masked_softmax_extreme_rows: element by element where rows start anywhere, else
 * phased. */
static void run_sim(const SimCase *k) {
  tj_program *p;
  tj_spec *s;
  tj_spec_options o;
  ck_assert_int_eq(tj_row_program(TJ_ROW_MASKED_SOFTMAX, k->which, k->n, &p), TJ_OK);
  ck_assert_int_eq(row_spec_options(TJ_ROW_MASKED_SOFTMAX, k->which, k->dtype, 65536, k->n, k->arch,
                                    k->warps, &o),
                   TJ_OK);
  if (k->cluster) o.cluster = k->cluster;
  if (k->split) o.split = k->split;
  if (k->cluster || k->split) o.block = tj_next_pow2(k->n); /* the plan fit its own CTAs */
  if (k->cluster || k->split) {
    int64_t span = 32LL * o.num_warps * o.cluster * o.split * (16 / (int)dtype_bytes(k->dtype));
    if (o.block < span) o.block = span; /* every thread a whole vector, as the plan makes it */
  }
  o.align = k->unaligned ? (int)dtype_bytes(k->dtype) : 16;
  o.phased = k->unaligned && k->which == TJ_SOFTMAX_SINGLE && o.split == 1;
  ck_assert_msg(tj_specialize(p, &o, &s) == TJ_OK, "%s", tj_program_error(p));
  const int64_t per = 16 / (int64_t)dtype_bytes(k->dtype), rows = 12;
  const int64_t stride = k->unaligned ? k->n + 3 : (k->n + per - 1) / per * per;
  const tj_softmax_mask mask = sim_mask(k->mask, k->n);
  TjMatrix x, want, got;
  TjRng rng;
  rng_seed(&rng, test_seed((uint64_t)k->n, (uint64_t)k->dtype,
                           (uint64_t)(k->cluster + 7 * k->split + 100 * k->mask)));
  ck_assert(matrix_alloc(&x, k->dtype, rows, k->n, stride, 0));
  ck_assert(matrix_alloc(&want, k->dtype, rows, k->n, stride, 8));
  ck_assert(matrix_alloc(&got, k->dtype, rows, k->n, stride, 8));
  masked_softmax_fill(&x, &mask, &rng);
  masked_softmax_extreme_rows(&x, &mask);
  tj_arg args[8];
  make_args(args, &want, &x, &mask, false);
  ck_assert_msg(tj_interpret(s, args, 8, rows) == TJ_OK, "%s", tj_spec_error(s));
  make_args(args, &got, &x, &mask, false);
  char why[1024];
  PtxsimStats stats;
  bool ok = ptxsim_run_spec(s, k->arch, args, 8, rows, 0, &stats, why, sizeof why);
  ck_assert_msg(ok, "%s n=%lld warps=%d cluster %d split %d sm_%d mask %d%s: %s",
                dtype_label(k->dtype), (long long)k->n, o.num_warps, o.cluster, o.split, k->arch,
                k->mask, k->unaligned ? " unaligned" : "", why);
  TjTolerance t = dtype_tolerance(k->dtype);
  t.rtol *= 4;
  t.atol *= 4;
  int64_t kept = 0;
  for (int64_t r = 0; r < rows; r++) {
    kept += masked_softmax_end(&mask, rows, k->n, r);
    for (int64_t c = 0; c < k->n; c++) {
      double g = matrix_get(&got, r, c), w = matrix_get(&want, r, c);
      bool exact = w != 0.0 || (g == 0.0 && !signbit(g));
      ck_assert_msg(close_enough(g, w, t) && exact &&
                        !is_poison(got.data, k->dtype, matrix_index(&got, r, c)),
                    "%s n=%lld cluster %d split %d sm_%d mask %d: row %lld col %lld: %g, want %g",
                    dtype_label(k->dtype), (long long)k->n, o.cluster, o.split, k->arch, k->mask,
                    (long long)r, (long long)c, g, w);
      if (isfinite(w) && isfinite(g))
        note_errors(k->dtype, fabs(g - w), fabs(g - w) / (t.atol + t.rtol * fabs(w)));
    }
  }
  for (size_t i = 0; i < got.bytes / dtype_bytes(k->dtype); i++)
    ck_assert_msg((i % (size_t)stride < (size_t)k->n && i < (size_t)(rows * stride)) ||
                      is_poison(got.data, k->dtype, i),
                  "n=%lld: element %zu, outside the rows, written", (long long)k->n, i);
  /* y written once (the one thread of a row with a partial vector writes
   * the elements of its full ones again, at most 15 each); x read in its
   * kept columns only, as often as expected: once where the tile fits,
   * twice in the online template, and twice where a tile is streamed
   * (its max and its sum of exps of the safe max, scaled, make a fused
   * pair, one phase, reduce.c; three times before they did). */
  uint64_t elem = dtype_bytes(k->dtype), row_bytes = (uint64_t)(rows * k->n) * elem;
  uint64_t kept_bytes = (uint64_t)kept * elem;
  uint64_t slack = (uint64_t)rows * 15 * elem * (uint64_t)(k->n / 64 + 1);
  ck_assert_uint_ge(stats.bytes_written[0], row_bytes);
  ck_assert_uint_le(stats.bytes_written[0], row_bytes + slack);
  ck_assert_uint_ge(stats.bytes_read[1], kept_bytes);
  ck_assert_uint_le(stats.bytes_read[1],
                    (uint64_t)(k->reads ? k->reads : 2) * (kept_bytes + slack));
  if (k->reads) ck_assert_uint_ge(stats.bytes_read[1], (uint64_t)k->reads * kept_bytes);
  matrix_free(&x);
  matrix_free(&want);
  matrix_free(&got);
  tj_spec_destroy(s);
  tj_program_destroy(p);
}

/* The plans' own specializations: lane groups, one CTA, the online template. */
START_TEST(planned_kernels_on_the_simulator) {
  static const int64_t ns[] = {1, 7, 31, 100, 513, 1000, 2049};
  int count = 0;
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      SimCase k = {.which = TJ_SOFTMAX_SINGLE,
                   .dtype = (tj_dtype)d,
                   .n = ns[i],
                   .arch = (int)(i + d) % 2 ? 80 : 90,
                   .unaligned = (i + (size_t)d) % 3 == 0,
                   .reads = 1,
                   .mask = count++};
      run_sim(&k);
    }
  for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
    SimCase k = {.which = TJ_SOFTMAX_ONLINE,
                 .dtype = (tj_dtype)d,
                 .n = 5000,
                 .warps = 4,
                 .arch = 90,
                 .unaligned = d == 1,
                 .reads = 2,
                 .mask = count++};
    run_sim(&k);
  }
  report("planned kernels on the simulator (against the interpreter)");
}
END_TEST

/* One warp over rows of 3000 to 9000: the tile is streamed in pieces. */
START_TEST(streamed_on_the_simulator) {
  static const int64_t ns[] = {3000, 9000};
  int count = 0;
  for (size_t i = 0; i < 2; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      SimCase k = {.which = TJ_SOFTMAX_SINGLE,
                   .dtype = (tj_dtype)d,
                   .n = ns[i],
                   .warps = 1,
                   .arch = d == 2 ? 80 : 90,
                   .unaligned = i == 1,
                   .reads = i == 1 ? 2 : 0,
                   .mask = count++};
      run_sim(&k);
    }
  report("streamed on the simulator (against the interpreter)");
}
END_TEST

/* Clusters, splits and both, aligned and not, streamed and not. */
START_TEST(across_ctas_on_the_simulator) {
  static const struct {
    int cluster, split;
    int64_t n;
  } shapes[] = {{2, 1, 700}, {4, 1, 3001}, {1, 3, 1500}, {2, 3, 2500}, {1, 2, 20000}};
  int count = 0;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      SimCase k = {.which = TJ_SOFTMAX_SINGLE,
                   .dtype = (tj_dtype)d,
                   .n = shapes[i].n,
                   .warps = 1,
                   .cluster = shapes[i].cluster,
                   .split = shapes[i].split,
                   .arch = shapes[i].cluster > 1 ? 90 : 80,
                   .unaligned = (i + (size_t)d) % 2 == 1,
                   .reads = shapes[i].n > 10000 ? 2 : 1,
                   .mask = count++};
      run_sim(&k);
    }
  report("across CTAs on the simulator (against the interpreter)");
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("masked_softmax");
  TCase *t = tcase_create("interpreter");
  tcase_set_timeout(t, 300);
  tcase_add_loop_test(t, every_width, 0, 10);
  tcase_add_test(t, wide_rows);
  tcase_add_test(t, online_chunks);
  tcase_add_test(t, masks_and_rows);
  tcase_add_test(t, unclamped_offsets_in_the_template);
  tcase_add_test(t, strides_and_in_place);
  tcase_add_test(t, extreme_values);
  tcase_add_test(t, no_driver);
  suite_add_tcase(s, t);
  t = tcase_create("simulator");
  tcase_set_timeout(t, 600);
  tcase_add_test(t, planned_kernels_on_the_simulator);
  tcase_add_test(t, streamed_on_the_simulator);
  tcase_add_test(t, across_ctas_on_the_simulator);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  setenv("TILEJIT_LIBCUDA", MISSING_LIBCUDA, 1); /* no driver, whatever the machine has */
  return test_run_suite(suite());
}
