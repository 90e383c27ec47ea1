/*
 * test_softmax_cpu.c — the numerics of both softmax templates, run through
 * the CPU interpreter and compared with the float64 reference of support.c
 * under the tolerances of the testing rules.
 *
 *   softmax.tj          every N from 1 to 4096 in f32 (M from 1 to 5, varied
 *                       with N), and a selection of N in f16 and bf16;
 *   softmax_online.tj   N in {1, 17, 4096, 4097, 100003, 2^20} with a small
 *                       chunk (BLOCK 64 or 256), and with the default chunk;
 *   both                every extreme-value row of the testing rules, row
 *                       strides larger than N, and in-place (y == x).
 *
 * Every check draws fresh inputs from a seed of its own, poisons the output
 * with a NaN payload first, checks every row element was written, and
 * checks that the gaps between rows and a guard after the last row still
 * hold the poison. x is passed with its exact byte size, so a read past the
 * last row is an interpreter error.
 */
#include "ir/ir.h"
#include "runtime/runtime.h"
#include "support.h"

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 67 /* elements after the last row of y */

typedef struct Case {
  tj_softmax_template which;
  tj_dtype dtype;
  int64_t m, n;
  int64_t block;              /* 0: the default for n */
  int64_t x_stride, y_stride; /* 0: n */
  bool in_place;
  uint64_t seed;
  tj_row_op op; /* 0: softmax */
} Case;

/* A contiguous, out-of-place case with the default chunk. */
static Case make_case(int which, int dtype, int64_t m, int64_t n, uint64_t seed) {
  Case c = {(tj_softmax_template)which, (tj_dtype)dtype, m, n, 0, 0, 0, false, seed, 0};
  return c;
}

static const char *template_label(tj_softmax_template t) {
  return t == TJ_SOFTMAX_ONLINE ? "online" : t == TJ_SOFTMAX_SINGLE ? "single" : "auto";
}

static void case_label(const Case *c, char *out, size_t size) {
  snprintf(out, size, "%s%s %s M=%lld N=%lld BLOCK=%lld strides %lld/%lld%s seed %llu",
           c->op == TJ_ROW_LOG_SOFTMAX ? "log-softmax " : "", template_label(c->which), dtype_label(c->dtype), (long long)c->m, (long long)c->n,
           (long long)c->block, (long long)c->x_stride, (long long)c->y_stride,
           c->in_place ? " in-place" : "", (unsigned long long)c->seed);
}

static tj_spec *make_spec(const Case *c) {
  tj_program *p = NULL;
  tj_spec_options o;
  tj_spec *s = NULL;
  ck_assert_int_eq(tj_row_program(c->op, c->which, c->n, &p), TJ_OK);
  ck_assert_int_eq(softmax_spec_options(c->which, c->dtype, 65536, c->n, 0, 0, &o), TJ_OK);
  if (c->block) o.block = c->block;
  tj_status st = tj_specialize(p, &o, &s);
  ck_assert_msg(st == TJ_OK, "specialize: %s", tj_program_error(p));
  tj_program_destroy(p);
  return s;
}

/* y gets its whole buffer (guard included), x exactly its rows. */
static tj_status interpret(tj_spec *s, TjMatrix *y, const TjMatrix *x) {
  tj_arg args[5] = {{TJ_ARG_PTR, {.ptr = y->data}, y->bytes},
                    {TJ_ARG_PTR, {.ptr = x->data}, y == x ? x->bytes : x->span_bytes},
                    {TJ_ARG_INT, {.i = y->stride}, 0},
                    {TJ_ARG_INT, {.i = x->stride}, 0},
                    {TJ_ARG_INT, {.i = x->cols}, 0}};
  return tj_interpret(s, args, 5, x->rows);
}

/* Reshapes rows of x after the random fill; NULL: random rows only. */
typedef void (*RowShaper)(TjMatrix *x, TjRng *r);

/* Runs a case and checks it against the reference; y is returned for more
 * checks (x itself when in place), and freed by finish(). */
typedef struct Run {
  Case c;
  TjMatrix x, y;
  TjMatrix *out;
  double *ref;
} Run;

static void start(Run *run, const Case *c, RowShaper shape) {
  char label[256], why[512];
  run->c = *c;
  int64_t xs = c->x_stride ? c->x_stride : c->n, ys = c->y_stride ? c->y_stride : c->n;
  double spread = c->dtype == TJ_DTYPE_F32 ? 1e4 : 100.0;
  TjRng r;
  rng_seed(&r, c->seed);
  ck_assert(matrix_alloc(&run->x, c->dtype, c->m, c->n, xs, c->in_place ? GUARD : 0));
  matrix_fill_random(&run->x, &r, 3.0, spread);
  if (shape) shape(&run->x, &r);
  run->ref = malloc((size_t)(c->m * c->n + 1) * sizeof *run->ref);
  ck_assert_ptr_nonnull(run->ref);
  row_reference(c->op, &run->x, run->ref);
  run->out = &run->x;
  if (!c->in_place) {
    ck_assert(matrix_alloc(&run->y, c->dtype, c->m, c->n, ys, GUARD));
    run->out = &run->y;
  }
  tj_spec *s = make_spec(c);
  case_label(c, label, sizeof label);
  tj_status st = interpret(s, run->out, &run->x);
  ck_assert_msg(st == TJ_OK, "%s: %s: %s", label, tj_status_string(st), tj_spec_error(s));
  tj_spec_destroy(s);
  TjCompare cmp;
  bool ok = compare_rows(run->out, run->ref, dtype_tolerance(c->dtype), !c->in_place, &cmp);
  compare_describe(&cmp, why, sizeof why);
  ck_assert_msg(ok, "%s: %s", label, why);
}

static void finish(Run *run) {
  matrix_free(&run->x);
  if (!run->c.in_place) matrix_free(&run->y);
  free(run->ref);
}

static void check_case(const Case *c) {
  Run run;
  start(&run, c, NULL);
  finish(&run);
}

/* ---- widths ------------------------------------------------------------ */

/* softmax.tj at every width 1..4096 in f32, 256 widths per loop index. */
START_TEST(single_every_width_f32) {
  for (int64_t n = 256 * _i + 1; n <= 256 * (_i + 1); n++) {
    Case c = make_case(TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 1 + n % 5, n, test_seed(1, (uint64_t)n, 0));
    check_case(&c);
  }
}
END_TEST

static const int64_t selected_widths[] = {1,    2,    3,    5,    7,    8,    13,  16,   17,   31,
                                          32,   33,   63,   64,   65,   100,  127, 128,  129,  255,
                                          256,  257,  500,  511,  512,  513,  777, 1000, 1023, 1024,
                                          1025, 2047, 2048, 2049, 3001, 4095, 4096};

/* softmax.tj in f16 (loop index 0) and bf16 (1) at selected widths. */
START_TEST(single_selected_widths_16bit) {
  tj_dtype d = _i == 0 ? TJ_DTYPE_F16 : TJ_DTYPE_BF16;
  for (size_t i = 0; i < sizeof selected_widths / sizeof *selected_widths; i++) {
    int64_t n = selected_widths[i];
    Case c = make_case(TJ_SOFTMAX_SINGLE, d, 1 + n % 4, n, test_seed(2, (uint64_t)n, d));
    check_case(&c);
  }
}
END_TEST

static const int64_t online_widths[] = {1, 17, 4096, 4097, 100003, 1 << 20};

/* softmax_online.tj with chunks of 64 and 256 and the default chunk, per dtype. */
START_TEST(online_widths_all_dtypes) {
  tj_dtype d = (tj_dtype)_i;
  const int64_t blocks[] = {64, 256, 0};
  for (size_t i = 0; i < sizeof online_widths / sizeof *online_widths; i++)
    for (size_t b = 0; b < 3; b++) {
      int64_t n = online_widths[i];
      if (n == 1 << 20 && (d != TJ_DTYPE_F32 || blocks[b] == 64)) continue; /* time */
      uint64_t seed = test_seed(3, (uint64_t)n, (uint64_t)(d * 8 + (int)b));
      Case c = make_case(TJ_SOFTMAX_ONLINE, d, n >= 100003 ? 2 : 3, n, seed);
      c.block = blocks[b];
      check_case(&c);
    }
}
END_TEST

/* The chunk smaller than, equal to and larger than n, on both sides of a multiple. */
START_TEST(online_chunk_edges) {
  const int64_t widths[] = {63, 64, 65, 127, 128, 129, 1000};
  for (size_t i = 0; i < sizeof widths / sizeof *widths; i++) {
    int64_t n = widths[i];
    Case c = make_case(TJ_SOFTMAX_ONLINE, TJ_DTYPE_F32, 3, n, test_seed(4, (uint64_t)n, 0));
    c.block = 64;
    check_case(&c);
    c.block = 1;
    c.seed++;
    check_case(&c);
  }
}
END_TEST

/* ---- strides and in-place --------------------------------------------- */

START_TEST(strided_rows) {
  for (int which = TJ_SOFTMAX_SINGLE; which <= TJ_SOFTMAX_ONLINE; which++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      const int64_t widths[] = {1, 5, 100, 333, 1024};
      for (size_t i = 0; i < 5; i++) {
        int64_t n = widths[i];
        Case c = make_case(which, d, 4, n, test_seed(5, (uint64_t)n, (uint64_t)(which * 8 + d)));
        c.block = which == TJ_SOFTMAX_ONLINE ? 64 : 0;
        c.x_stride = n + 3;
        c.y_stride = 2 * n + 1;
        check_case(&c);
      }
    }
}
END_TEST

START_TEST(in_place) {
  for (int which = TJ_SOFTMAX_SINGLE; which <= TJ_SOFTMAX_ONLINE; which++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      const int64_t widths[] = {1, 6, 257, 1000};
      for (size_t i = 0; i < 4; i++) {
        int64_t n = widths[i];
        uint64_t seed = test_seed(6, (uint64_t)n, (uint64_t)(which * 8 + d));
        Case c = make_case(which, d, 3, n, seed);
        c.block = which == TJ_SOFTMAX_ONLINE ? 64 : 0;
        c.in_place = true;
        check_case(&c);
        c.x_stride = c.y_stride = n + 5; /* strided and in place */
        c.seed++;
        check_case(&c);
      }
    }
}
END_TEST

/* ---- extreme values ---------------------------------------------------- */

/* Per dtype: its largest finite value, a very negative finite value, and a
 * subnormal. */
static double dtype_max(tj_dtype d) {
  return d == TJ_DTYPE_F32 ? FLT_MAX : d == TJ_DTYPE_F16 ? 65504.0 : 0x1.fep127;
}
static double dtype_very_negative(tj_dtype d) { return d == TJ_DTYPE_F16 ? -6e4 : -1e30; }
static double dtype_subnormal(tj_dtype d) { return d == TJ_DTYPE_F16 ? 0x1p-20 : 0x1p-130; }
static double dtype_huge(tj_dtype d) { return d == TJ_DTYPE_F16 ? 65504.0 : 3e38; }

enum {
  ROW_RANDOM,
  ROW_ALL_NEG_INF,
  ROW_POS_INF,
  ROW_NAN,
  ROW_NEG_INF_MIXED,
  ROW_NEG_INF_PREFIX, /* the first chunks all -inf, then finite */
  ROW_NEG_INF_SUFFIX,
  ROW_ALL_MAX,
  ROW_ALL_VERY_NEGATIVE,
  ROW_ALL_SUBNORMAL,
  ROW_ONE_HOT,
  ROW_KINDS
};

static void fill_row(TjMatrix *x, int64_t row, int kind, TjRng *r) {
  int64_t n = x->cols, at = rng_range(r, 0, n - 1);
  tj_dtype d = x->dtype;
  for (int64_t c = 0; c < n; c++) {
    double v = matrix_get(x, row, c);
    switch (kind) {
    case ROW_ALL_NEG_INF: v = -INFINITY; break;
    case ROW_POS_INF: v = c == at ? INFINITY : v; break;
    case ROW_NAN: v = c == at ? NAN : v; break;
    case ROW_NEG_INF_MIXED: v = c != at && rng_uniform(r) < 0.5 ? -INFINITY : v; break;
    case ROW_NEG_INF_PREFIX: v = c < n - 1 && c < 2 * n / 3 ? -INFINITY : v; break;
    case ROW_NEG_INF_SUFFIX: v = c > 0 && c > n / 3 ? -INFINITY : v; break;
    case ROW_ALL_MAX: v = dtype_max(d); break;
    case ROW_ALL_VERY_NEGATIVE: v = dtype_very_negative(d); break;
    case ROW_ALL_SUBNORMAL: v = dtype_subnormal(d); break;
    case ROW_ONE_HOT: v = c == at ? dtype_huge(d) : -dtype_huge(d); break;
    default: break;
    }
    matrix_set(x, row, c, v);
  }
}

/* Row r holds kind r % ROW_KINDS: every kind twice, each group led by a random row. */
static void shape_extremes(TjMatrix *x, TjRng *r) {
  for (int64_t row = 0; row < x->rows; row++) fill_row(x, row, (int)(row % ROW_KINDS), r);
}

/* The exact properties beyond the tolerance check. */
/* Log-softmax's: NaN rows as softmax's, -inf where x is -inf, uniform rows
 * uniform, the one-hot's max exactly 0 and the rest far below, N = 1 gives 0. */
static void check_log_row_exact(const Run *run, int64_t row, const char *label) {
  const TjMatrix *x = &run->x, *y = run->out;
  int kind = (int)(row % ROW_KINDS);
  int64_t n = x->cols;
  double first = matrix_get(y, row, 0);
  bool nan_row = kind == ROW_ALL_NEG_INF || kind == ROW_POS_INF || kind == ROW_NAN;
  for (int64_t c = 0; c < n; c++) {
    double in = matrix_get(x, row, c), out = matrix_get(y, row, c);
    if (nan_row)
      ck_assert_msg(isnan(out), "%s row %lld col %lld: %g, want NaN", label, (long long)row,
                    (long long)c, out);
    else if (in == -INFINITY)
      ck_assert_msg(out == -INFINITY, "%s row %lld col %lld: %g at -inf, want -inf", label,
                    (long long)row, (long long)c, out);
    if (kind >= ROW_ALL_MAX && kind <= ROW_ALL_SUBNORMAL)
      ck_assert_msg(out == first, "%s row %lld: not uniform (%g, %g)", label, (long long)row, first,
                    out);
    if (kind == ROW_ONE_HOT)
      ck_assert_msg(in > 0 ? out == 0.0 : out < -1e4, "%s row %lld col %lld: %g, want 0 at the "
                    "max and far below elsewhere", label, (long long)row, (long long)c, out);
  }
  if (n == 1 && !nan_row)
    ck_assert_msg(first == 0.0, "%s: N = 1 gives %g, want 0", label, first);
}

static void check_row_exact(const Run *run, int64_t row, const char *label) {
  const TjMatrix *x = &run->x, *y = run->out;
  int kind = (int)(row % ROW_KINDS);
  int64_t n = x->cols;
  double first = matrix_get(y, row, 0);
  if (run->c.op == TJ_ROW_LOG_SOFTMAX) {
    check_log_row_exact(run, row, label);
    return;
  }
  for (int64_t c = 0; c < n; c++) {
    double in = matrix_get(x, row, c), out = matrix_get(y, row, c);
    bool nan_row = kind == ROW_ALL_NEG_INF || kind == ROW_POS_INF || kind == ROW_NAN;
    if (nan_row)
      ck_assert_msg(isnan(out), "%s row %lld col %lld: %g, want NaN", label, (long long)row,
                    (long long)c, out);
    if (kind >= ROW_NEG_INF_MIXED && kind <= ROW_NEG_INF_SUFFIX && in == -INFINITY)
      ck_assert_msg(out == 0.0, "%s row %lld col %lld: %g at -inf, want exactly 0", label,
                    (long long)row, (long long)c, out);
    if (kind >= ROW_ALL_MAX && kind <= ROW_ALL_SUBNORMAL)
      ck_assert_msg(out == first, "%s row %lld: not uniform (%g, %g)", label, (long long)row, first,
                    out);
    if (kind == ROW_ONE_HOT)
      ck_assert_msg(out == 0.0 || out == 1.0, "%s row %lld col %lld: %g, want one-hot", label,
                    (long long)row, (long long)c, out);
  }
  if (n == 1 && kind != ROW_ALL_NEG_INF && kind != ROW_POS_INF && kind != ROW_NAN)
    ck_assert_msg(first == 1.0, "%s: N = 1 gives %g, want 1", label, first);
}

static void check_extremes(tj_row_op op, tj_softmax_template which, tj_dtype d, int64_t n,
                           int64_t block) {
  Case c =
      make_case(which, d, 2 * ROW_KINDS, n, test_seed(7, (uint64_t)n, (uint64_t)(which * 8 + d)));
  c.block = block;
  c.op = op;
  char label[256];
  case_label(&c, label, sizeof label);
  Run run;
  start(&run, &c, shape_extremes);
  for (int64_t row = 0; row < c.m; row++) check_row_exact(&run, row, label);
  finish(&run);
}

static const int64_t extreme_widths[] = {1, 2, 3, 64, 100, 1000, 4097};

/* Loop index: template (single, online) x dtype. */
START_TEST(extreme_values) {
  tj_softmax_template which = _i < TJ_DTYPE_COUNT ? TJ_SOFTMAX_SINGLE : TJ_SOFTMAX_ONLINE;
  tj_dtype d = (tj_dtype)(_i % TJ_DTYPE_COUNT);
  for (size_t i = 0; i < sizeof extreme_widths / sizeof *extreme_widths; i++)
    check_extremes(TJ_ROW_SOFTMAX, which, d, extreme_widths[i],
                   which == TJ_SOFTMAX_ONLINE ? 64 : 0);
}
END_TEST

/* ---- log-softmax ------------------------------------------------------- */

/* log_softmax.tj and log_softmax_online.tj (loop index: dtype) at widths
 * around the layouts' edges, strided, in place and with every extreme row. */
START_TEST(log_softmax_rows) {
  tj_dtype d = (tj_dtype)_i;
  static const int64_t widths[] = {1, 2, 31, 32, 33, 100, 513, 1000, 4096, 4097, 100003};
  for (int which = TJ_SOFTMAX_SINGLE; which <= TJ_SOFTMAX_ONLINE; which++)
    for (size_t i = 0; i < sizeof widths / sizeof *widths; i++) {
      int64_t n = widths[i], block = which == TJ_SOFTMAX_ONLINE ? 64 : 0;
      Case c = make_case(which, d, n > 10000 ? 2 : 3, n,
                         test_seed(9, (uint64_t)n, (uint64_t)(which * 8 + d)));
      c.op = TJ_ROW_LOG_SOFTMAX;
      c.block = block;
      check_case(&c);
      c.x_stride = n + 3;
      c.y_stride = 2 * n + 1;
      c.seed++;
      check_case(&c);
      c.x_stride = c.y_stride = n + 5;
      c.in_place = true;
      c.seed++;
      check_case(&c);
      if (n <= 4097) check_extremes(TJ_ROW_LOG_SOFTMAX, (tj_softmax_template)which, d, n, block);
    }
}
END_TEST

/* Padding leaks nothing and a NaN row leaves its neighbour alone: BLOCK 32
 * over rows of 5, then rows of 30 (two chunks of 32 would hold 64) where
 * row 0 is random and row 1 all -inf. */
START_TEST(padding_and_neighbours) {
  for (int which = TJ_SOFTMAX_SINGLE; which <= TJ_SOFTMAX_ONLINE; which++) {
    Case c = make_case(which, TJ_DTYPE_F32, 2, 5, test_seed(8, 5, (uint64_t)which));
    c.block = 32;
    Run run;
    start(&run, &c, NULL);
    finish(&run);
    c.n = 30; /* 2 chunks of 32 would hold 64 */
    c.seed++;
    start(&run, &c, shape_extremes);
    finish(&run);
  }
}
END_TEST

START_TEST(empty_matrices) {
  for (int which = TJ_SOFTMAX_SINGLE; which <= TJ_SOFTMAX_ONLINE; which++) {
    Case zero_rows = make_case(which, TJ_DTYPE_F32, 0, 10, 9);
    Case zero_cols = make_case(which, TJ_DTYPE_F16, 4, 0, 10);
    check_case(&zero_rows);
    check_case(&zero_cols); /* nothing written: the guard keeps its poison */
  }
}
END_TEST

/* ---- the softmax API --------------------------------------------------- */

static tj_softmax_plan plan_of(int arch, tj_dtype dtype, int64_t m, int64_t n,
                               const tj_softmax_options *o) {
  tj_device_info device;
  tj_softmax_plan plan;
  ck_assert_int_eq(tj_device_nominal(arch, &device), TJ_OK);
  ck_assert_int_eq(tj_softmax_plan_for(&device, dtype, m, n, o, &plan), TJ_OK);
  return plan;
}

#define ASSERT_PLAN_STAGE(p, w, b, nw, c, sp, st)                                                  \
  do {                                                                                             \
    ck_assert_int_eq((p).which, (w));                                                              \
    ck_assert_int_eq((p).block, (b));                                                              \
    ck_assert_int_eq((p).num_warps, (nw));                                                         \
    ck_assert_int_eq((p).cluster, (c));                                                            \
    ck_assert_int_eq((p).split, (sp));                                                             \
    ck_assert_int_eq((p).stage, (st));                                                             \
  } while (0)
#define ASSERT_PLAN(p, w, b, nw, c, sp) ASSERT_PLAN_STAGE(p, w, b, nw, c, sp, 0)
#define ASSERT_STAGED_AT(p, b, c, sp, st) ASSERT_PLAN_STAGE(p, TJ_SOFTMAX_SINGLE, b, 8, c, sp, st)
#define ASSERT_STAGED(p, b, c, sp)        ASSERT_STAGED_AT(p, b, c, sp, 32)
/* Staged over the grid in CTAs of 4 warps (softmax_plan.c's halve_ctas). */
#define ASSERT_HALVED(p, b, c, sp, st) ASSERT_PLAN_STAGE(p, TJ_SOFTMAX_SINGLE, b, 4, c, sp, st)
/* Staged over the grid, SPLIT sp CTAs a row, each keeping STASH bytes. */
#define ASSERT_STASHED(p, b, sp, bytes)                                                            \
  do {                                                                                             \
    tj_softmax_plan stashed_ = (p);                                                                \
    ASSERT_STAGED(stashed_, b, 1, sp);                                                             \
    ck_assert_int_eq(stashed_.stash, (bytes));                                                     \
  } while (0)

/* The strategy (softmax_plan.c) for the shapes it distinguishes. */
START_TEST(plan_for_every_kind_of_shape) {
  const tj_softmax_template S = TJ_SOFTMAX_SINGLE;
  const tj_softmax_options none = {.stage = -1};
  /* Rows up to 32768 (under 64 KiB): one CTA, the warps of the table, on
   * any arch; a few rows of 64 KiB too. */
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F32, 4096, 1000, NULL), S, 1024, 4, 1, 1);
  ASSERT_PLAN(plan_of(80, TJ_DTYPE_BF16, 1, 32768, NULL), S, 32768, 32, 1, 1);
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F32, 4, 32768, NULL), S, 32768, 32, 1, 1);
  /* ... where softmax_tuning.inc has a measured line, its warps (sm_90). */
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_BF16, 4096, 8192, NULL), S, 8192, 4, 1, 1);
  ASSERT_PLAN(plan_of(80, TJ_DTYPE_BF16, 4096, 8192, NULL), S, 8192, 16, 1, 1);
  /* Rows of 64 KiB and more, enough of them: staged, 256-thread CTAs
   * holding at most 64 KiB each in shared memory, one a row or a cluster
   * (sm_90 and later); on sm_90 one CTA of 512 threads where a thread's
   * share is whole pieces (bf16 32768: 64, two of 32; f16 24576: 48, no),
   * and f32 rows up to 128 KiB in one such CTA, not a cluster of two. */
  ASSERT_STAGED(plan_of(80, TJ_DTYPE_BF16, 2048, 32768, NULL), 32768, 1, 1);
  ASSERT_PLAN_STAGE(plan_of(90, TJ_DTYPE_BF16, 2048, 32768, NULL), S, 32768, 16, 1, 1, 32);
  ASSERT_PLAN_STAGE(plan_of(90, TJ_DTYPE_F32, 4096, 20480, NULL), S, 20480, 16, 1, 1, 40);
  ASSERT_PLAN_STAGE(plan_of(90, TJ_DTYPE_F32, 4096, 24576, NULL), S, 24576, 16, 1, 1, 32);
  /* ... and 16-bit rows over 32 KiB (N > 16384); f32 rows of 32-64 KiB
   * are not (they ran as fast in registers). */
  ASSERT_PLAN_STAGE(plan_of(90, TJ_DTYPE_F16, 4096, 20000, NULL), S, 20480, 16, 1, 1, 40);
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_BF16, 4096, 16384, NULL), S, 16384, 4, 1, 1);
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F32, 4096, 12000, NULL), S, 16384, 16, 1, 1);
  /* BLOCK fits the threads' whole repeats, not the next power of two: a
   * row inside a warp in lanes of 2 to 4 vectors (f16 80: 4 lanes of 3,
   * 200: 16 of 2, 577: 32 of 3); a CTA's 16-bit row in half the warps
   * where they pad less, at most 8 vectors a thread (f16 5000: 4 warps
   * of 5, not 8 of 3; sm_80's 12352: 8 warps of 7, not 16 of 4), or in
   * the table's warps (sm_90's 12352: 4 of 13), an f32 one as before
   * (next_pow2 and the table's warps); a staged row. */
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F16, 4096, 80, NULL), S, 96, 4, 1, 1);
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F16, 4096, 200, NULL), S, 256, 4, 1, 1);
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F32, 4096, 48, NULL), S, 48, 4, 1, 1);
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F16, 4096, 577, NULL), S, 768, 4, 1, 1);
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F16, 4096, 3000, NULL), S, 3072, 4, 1, 1);
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F16, 4096, 5000, NULL), S, 5120, 4, 1, 1);
  ASSERT_PLAN(plan_of(80, TJ_DTYPE_F16, 4096, 12352, NULL), S, 14336, 8, 1, 1);
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F16, 4096, 12352, NULL), S, 13312, 4, 1, 1);
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F32, 4096, 12345, NULL), S, 16384, 16, 1, 1);
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F32, 4096, 3000, NULL), S, 4096, 8, 1, 1);
  ASSERT_STAGED(plan_of(90, TJ_DTYPE_F16, 4096, 24576, NULL), 24576, 1, 1);
  /* Rows off 16 bytes (rt_softmax_rows_plan): rows at one phase are
   * phased and fitted as aligned ones are (f16 1000: 32 lanes of 4; f32
   * 300: 32 of 3), but 16-bit ones over 16 lanes may take 5 vectors a lane
   * (577 and 640: 16 lanes of 5, not 32 of 3; 641 stays 32 of 3; f16 150
   * stays 8 lanes of 3, not 4 of 5); staged ones as they are; rows in
   * narrower vectors keep next_pow2 and the table's warps; aligned rows
   * (16) keep the plan. 16-bit rows at one phase of more than 10 vectors
   * a thread take 8 warps where those hold at most 6 (10300 and 12288: 11
   * and 12 in 4 warps), else are staged (12352 and 12289: 13), not 9999
   * (10); and f32 ones are fitted where that saves a quarter of the tile
   * (6001: 6144; not 12345: 7 repeats of 8). */
  static const struct {
    tj_dtype dtype;
    int64_t n;
    int align;
    bool one_phase, phased;
    int64_t block;
    int warps, stage;
  } rows[] = {
      {TJ_DTYPE_F16, 1000, 2, true, true, 1024, 4, 0},  {TJ_DTYPE_F16, 577, 2, true, true, 640, 4, 0},
      {TJ_DTYPE_BF16, 640, 2, true, true, 640, 4, 0},   {TJ_DTYPE_BF16, 641, 2, true, true, 768, 4, 0},
      {TJ_DTYPE_F16, 150, 2, true, true, 192, 4, 0},    {TJ_DTYPE_F16, 577, 16, true, false, 768, 4, 0},
      {TJ_DTYPE_F32, 300, 4, true, true, 384, 4, 0},     {TJ_DTYPE_F16, 80, 2, false, false, 128, 4, 0},
      {TJ_DTYPE_F32, 32768, 4, true, true, 32768, 8, 32}, {TJ_DTYPE_F32, 200, 16, true, false, 256, 4, 0},
      /* the table's 4 warps for 16-bit 12352, phased fitted (BLOCK 13312,
       * staged), element by element at next_pow2; fewer_warps' 4 for f16
       * 5000 */
      {TJ_DTYPE_F16, 12352, 2, true, true, 13312, 4, 32},
      {TJ_DTYPE_F16, 12352, 2, false, false, 16384, 4, 0},
      {TJ_DTYPE_F16, 5000, 2, true, true, 5120, 4, 0},
      {TJ_DTYPE_BF16, 10300, 2, true, true, 12288, 8, 0},
      {TJ_DTYPE_BF16, 12288, 2, true, true, 12288, 8, 0},
      {TJ_DTYPE_BF16, 12289, 2, true, true, 13312, 4, 32},
      {TJ_DTYPE_BF16, 9999, 2, true, true, 10240, 4, 0},
      {TJ_DTYPE_F32, 6001, 4, true, true, 6144, 16, 0},
      {TJ_DTYPE_F32, 12345, 4, true, true, 16384, 16, 0},
  };
  tj_device_info device;
  ck_assert_int_eq(tj_device_nominal(90, &device), TJ_OK);
  for (size_t i = 0; i < TJ_COUNTOF(rows); i++) {
    tj_softmax_plan r; /* as tj_softmax plans them */
    ck_assert_int_eq(rt_row_plan(&device, TJ_ROW_SOFTMAX, rows[i].dtype, 4096, rows[i].n, NULL,
                                 rows[i].align, &r),
                     TJ_OK);
    ck_assert_msg(rt_softmax_rows_plan(&device, &r, TJ_ROW_SOFTMAX, rows[i].dtype, rows[i].n,
                                       rows[i].align, rows[i].one_phase, NULL) == rows[i].phased,
                  "case %zu", i);
    ck_assert_msg(r.block == rows[i].block && r.num_warps == rows[i].warps &&
                      r.stage == rows[i].stage,
                  "case %zu: BLOCK %lld, %d warps, STAGE %d", i, (long long)r.block, r.num_warps,
                  r.stage);
  }
  /* ... log-softmax's and masked softmax's rows of 11 vectors staged
   * (not 8 warps), as all of their rows of more than 10 */
  static const tj_row_op staged_ops[] = {TJ_ROW_LOG_SOFTMAX, TJ_ROW_MASKED_SOFTMAX};
  for (size_t i = 0; i < TJ_COUNTOF(staged_ops); i++) {
    tj_softmax_plan r;
    ck_assert_int_eq(rt_row_plan(&device, staged_ops[i], TJ_DTYPE_F16, 4096, 10300, NULL, 2, &r),
                     TJ_OK);
    ck_assert(rt_softmax_rows_plan(&device, &r, staged_ops[i], TJ_DTYPE_F16, 10300, 2, true, NULL));
    ck_assert_msg(r.num_warps == 4 && r.stage == 32 && r.block == 11264,
                  "op %zu: %d warps, STAGE %d, BLOCK %lld", i, r.num_warps, r.stage,
                  (long long)r.block);
  }
  /* ... but not where the caller chose the warps or NVRTC, nor before
   * sm_80. */
  const tj_softmax_options chosen[] = {{.num_warps = 4}, {.backend = TJ_BACKEND_NVRTC}};
  for (int arch = 75; arch <= 90; arch += 15)
    for (size_t i = 0; i < TJ_COUNTOF(chosen) + 1; i++) {
      const tj_softmax_options *o = i < TJ_COUNTOF(chosen) ? &chosen[i] : NULL;
      tj_device_info at;
      tj_softmax_plan r;
      ck_assert_int_eq(tj_device_nominal(arch, &at), TJ_OK);
      ck_assert_int_eq(rt_row_plan(&at, TJ_ROW_SOFTMAX, TJ_DTYPE_BF16, 4096, 14001, o, 2, &r),
                       TJ_OK);
      ck_assert(rt_softmax_rows_plan(&at, &r, TJ_ROW_SOFTMAX, TJ_DTYPE_BF16, 14001, 2, true, o));
      ck_assert_msg(r.stage == (arch == 90 && !o ? 32 : 0), "sm_%d, case %zu: STAGE %d", arch,
                    i, r.stage);
    }
  ASSERT_PLAN_STAGE(plan_of(90, TJ_DTYPE_F32, 4096, 32001, NULL), S, 32768, 16, 1, 1, 32);
  /* ... but rows off 16 bytes keep 256 threads: a cluster of two, one CTA
   * of 16-bit rows. */
  tj_softmax_plan unaligned;
  ck_assert_int_eq(rt_row_plan(&device, TJ_ROW_SOFTMAX, TJ_DTYPE_F32, 4096, 32001, NULL, 4,
                               &unaligned),
                   TJ_OK);
  ASSERT_STAGED(unaligned, 32768, 2, 1);
  ck_assert_int_eq(rt_row_plan(&device, TJ_ROW_SOFTMAX, TJ_DTYPE_F16, 4096, 32768, NULL, 2,
                               &unaligned),
                   TJ_OK);
  ASSERT_STAGED(unaligned, 32768, 1, 1);
  ASSERT_STAGED(plan_of(90, TJ_DTYPE_F32, 1024, 65536, NULL), 65536, 4, 1);
  ASSERT_STAGED(plan_of(90, TJ_DTYPE_F32, 1024, 40000, NULL), 43008, 3, 1);
  ASSERT_STAGED(plan_of(90, TJ_DTYPE_F32, 512, 131072, NULL), 131072, 8, 1);
  ASSERT_STAGED(plan_of(90, TJ_DTYPE_BF16, 1024, 262144, NULL), 262144, 8, 1);
  ASSERT_STAGED(plan_of(90, TJ_DTYPE_F16, 256, 262144, NULL), 262144, 8, 1);
  /* ... not in a cluster of 16: over the grid (and for 128 rows in rounds
   * of 22, not 24 and 8), 16-bit rows in clusters of two over half the
   * split where they take two rounds of the grid or more, two rows a
   * round or more; f32 rows, and one round, stay CTAs of the grid. Such
   * 16-bit rows in two rounds or more then take CTAs of 4 warps, twice as
   * many (not log-softmax's: tj_row_plan_for's test). */
  ASSERT_HALVED(plan_of(90, TJ_DTYPE_F16, 256, 524288, NULL), 524288, 2, 16, 32);
  ASSERT_HALVED(plan_of(90, TJ_DTYPE_BF16, 128, 524288, NULL), 524288, 2, 18, 40);
  ASSERT_STAGED(plan_of(90, TJ_DTYPE_F32, 128, 524288, NULL), 524288, 1, 32);
  ASSERT_STAGED(plan_of(90, TJ_DTYPE_F16, 4, 1 << 20, NULL), 1 << 20, 1, 99);
  ASSERT_STAGED(plan_of(80, TJ_DTYPE_F16, 256, 524288, NULL), 524288, 1, 16);
  ASSERT_STAGED(plan_of(100, TJ_DTYPE_F32, 1024, 65536, NULL), 65536, 4, 1);
  /* Wider, or few rows, or no clusters (sm_80): over the grid, at least
   * the CTAs of 64 KiB the row needs, as many as fill the device (132 SMs,
   * three such CTAs each) when rows are few. */
  ASSERT_STAGED(plan_of(90, TJ_DTYPE_F32, 64, 1 << 20, NULL), 1 << 20, 1, 64);
  ASSERT_STAGED(plan_of(90, TJ_DTYPE_F32, 1, 1000000, NULL), 1 << 20, 1, 256);
  ASSERT_STAGED_AT(plan_of(90, TJ_DTYPE_F32, 4, 1000000, NULL), 1013760, 1, 99, 40);
  ASSERT_STAGED(plan_of(90, TJ_DTYPE_BF16, 1, 10000000, NULL), 10485760, 1, 256);
  ASSERT_STAGED(plan_of(80, TJ_DTYPE_F32, 1024, 65536, NULL), 65536, 1, 4);
  /* ... a split that leaves no round of rows less than half full: 64 rows
   * of 2^20 bf16 in rounds of 11 (36 CTAs a row), not of 12 and 4 (32). */
  ASSERT_HALVED(plan_of(90, TJ_DTYPE_BF16, 64, 1 << 20, NULL), 1 << 20, 2, 36, 40);
  /* STAGE 40 where its pieces of 5 vectors divide a thread's share, with
   * fewer slots than 32's: 80 elements a thread (bf16 40000 in a cluster of
   * 2) and 120 (151937 in 5); not 104 (50257 in 2: pieces of 4, 4, 4 and 1
   * vectors, not 5, 5 and 3), where 32 ran faster (bench/RESULTS.md, GG4);
   * f32's 52 stay in 64. */
  ASSERT_STAGED(plan_of(90, TJ_DTYPE_BF16, 4096, 50257, NULL), 53248, 2, 1);
  ASSERT_STAGED_AT(plan_of(90, TJ_DTYPE_BF16, 3355, 40000, NULL), 40960, 2, 1, 40);
  ASSERT_STAGED_AT(plan_of(90, TJ_DTYPE_BF16, 512, 151937, NULL), 153600, 5, 1, 40);
  ASSERT_STAGED(plan_of(90, TJ_DTYPE_F32, 4096, 50257, NULL), 53248, 4, 1);
  ASSERT_STAGED(plan_of(90, TJ_DTYPE_F32, 128, 1 << 19, NULL), 1 << 19, 1, 32);
  /* Rows no 256 staged CTAs hold (over 96 KiB each): every CTA the grid
   * holds (256, SPLIT's most), the rows in turn, each keeping what its
   * part of the SM's shared memory holds (STASH: two CTAs an SM on sm_90,
   * three on sm_80); the rest is read again. BLOCK is whole vectors of
   * every thread, where that is below the next power of two. */
  ASSERT_STASHED(plan_of(90, TJ_DTYPE_F32, 4, 10000000, NULL), 10223616, 256, 112 * 1024);
  ASSERT_STASHED(plan_of(90, TJ_DTYPE_BF16, 1, 50000000, NULL), 50331648, 256, 112 * 1024);
  /* ... an even number of such rows (or of rows that take every CTA in
   * turn) two at a time, over half of those CTAs each with the same STASH,
   * where it keeps at least 70% of a CTA's share: bf16 10^7 (72%), f32
   * 5*10^6; not bf16 2^24 (43%), nor three rows (the last alone on half). */
  ASSERT_STASHED(plan_of(90, TJ_DTYPE_BF16, 4, 10000000, NULL), 10223616, 128, 112 * 1024);
  ASSERT_STASHED(plan_of(90, TJ_DTYPE_F32, 2, 5000000, NULL), 5111808, 128, 112 * 1024);
  ASSERT_STASHED(plan_of(90, TJ_DTYPE_BF16, 3, 10000000, NULL), 10485760, 256, 0);
  ASSERT_STASHED(plan_of(90, TJ_DTYPE_BF16, 4, 1 << 24, NULL), 1 << 24, 256, 112 * 1024);
  ASSERT_STASHED(plan_of(80, TJ_DTYPE_F32, 1, 1 << 22, NULL), 1 << 22, 256, 52 * 1024);
  /* ... where no CTA keeps 32 KiB so (sm_86: 99 KiB an SM), the grid level
   * of 512-thread CTAs that hold the row in registers; one they cannot
   * hold streams through 1024-thread CTAs, reading x twice. */
  ASSERT_PLAN(plan_of(86, TJ_DTYPE_F32, 1, 1 << 22, NULL), S, 1 << 22, 32, 1, 84);
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F32, 4, 10000000, &none), S, 10272768, 32, 1, 132);
  /* Before sm_80 nothing is staged: clusters do not exist, the grid level
   * holds the row (sm_75: 40 SMs). */
  ASSERT_PLAN(plan_of(75, TJ_DTYPE_F32, 1024, 65536, NULL), S, 65536, 16, 1, 8);
  /* STAGE -1: the plans without staging, for the shapes above. */
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F32, 1024, 65536, &none), S, 65536, 4, 8, 1);
  /* ... a row of 16 such CTAs goes over the grid, not into a cluster of 16. */
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F32, 64, 262144, &none), S, 262144, 16, 1, 16);
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_BF16, 2048, 32768, &none), S, 32768, 16, 1, 1);
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F32, 1, 1000000, &none), S, 1 << 20, 16, 1, 264);
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F32, 64, 1 << 20, &none), S, 1 << 20, 16, 1, 64);
  /* The options win. */
  tj_softmax_options o = {.which_template = TJ_SOFTMAX_ONLINE};
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F32, 1, 100003, &o), TJ_SOFTMAX_ONLINE, TJ_SOFTMAX_CHUNK, 8, 1, 1);
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F32, 1, 1000, &o), TJ_SOFTMAX_ONLINE, 1024, 4, 1, 1);
  o = (tj_softmax_options){.num_warps = 16, .cluster = 4};
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F32, 7, 70000, &o), S, 73728, 16, 4, 1);
  o = (tj_softmax_options){.num_warps = 16}; /* the caller's CTAs hold 32 a thread */
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_F32, 1024, 65536, &o), S, 65536, 16, 4, 1);
  o = (tj_softmax_options){.cluster = 2};
  ASSERT_PLAN(plan_of(90, TJ_DTYPE_BF16, 7, 70000, &o), S, 73728, 16, 2, 1);
  o = (tj_softmax_options){.split = 3};
  ASSERT_PLAN(plan_of(75, TJ_DTYPE_F16, 7, 100, &o), S, 128, 4, 1, 3);
  /* A plan the runtime shrinks (NVRTC takes one CTA a row; residency) gets
   * a BLOCK that fits what is left: a multiple of the threads' vectors, or a power
   * of two if that is less (before, 9 x 40000 through NVRTC kept 59392 for
   * 7168 threads, and specialize refused it). */
  tj_softmax_plan shrunk = plan_of(90, TJ_DTYPE_F32, 9, 40000, &none);
  ASSERT_PLAN(shrunk, S, 59392, 16, 1, 29);
  shrunk.split = 14;
  rt_softmax_fit_block(&shrunk, TJ_DTYPE_F32, 40000, 1, RT_VECTORS_ALIGNED);
  ASSERT_PLAN(shrunk, S, 57344, 16, 1, 14);
  shrunk.split = 1;
  rt_softmax_fit_block(&shrunk, TJ_DTYPE_F32, 40000, 1, RT_VECTORS_ALIGNED);
  ASSERT_PLAN(shrunk, S, 40960, 16, 1, 1);
  /* A NULL device plans for the nominal sm_90. */
  tj_softmax_plan p;
  ck_assert_int_eq(tj_softmax_plan_for(NULL, TJ_DTYPE_F32, 1024, 65536, NULL, &p), TJ_OK);
  ASSERT_STAGED(p, 65536, 4, 1);
  /* Its specialization options. */
  tj_spec_options so;
  ck_assert_int_eq(tj_softmax_spec_options(&p, TJ_DTYPE_BF16, 40000, &so), TJ_OK);
  ck_assert(so.n == 40000 && so.block == 65536 && so.dtype == TJ_DTYPE_BF16 &&
            so.num_warps == 8 && so.cluster == 4 && so.split == 1 && so.align == 0 &&
            so.stage == 32);
  /* The programs. */
  tj_program *prog = NULL;
  ck_assert_int_eq(tj_softmax_program(TJ_SOFTMAX_AUTO, 40000, &prog), TJ_OK);
  ck_assert_str_eq(prog->name, "softmax");
  ck_assert_int_eq(prog->nparams, 5);
  tj_program_destroy(prog);
  ck_assert_int_eq(tj_softmax_program(TJ_SOFTMAX_ONLINE, 4000, &prog), TJ_OK);
  ck_assert_str_eq(prog->name, "softmax_online");
  tj_program_destroy(prog);
}
END_TEST

/* Softmax backward (two row tiles, y and dy): 16-bit rows staged as
 * softmax's are, sized for both tiles (a row of 32768 bf16 holds 128 KiB:
 * a cluster of 2); f32 rows keep the plans of registers. */
START_TEST(backward_plans) {
  tj_device_info device;
  tj_softmax_plan p;
  ck_assert_int_eq(tj_device_nominal(90, &device), TJ_OK);
  ck_assert_int_eq(tj_row_plan_for(&device, TJ_ROW_SOFTMAX_BACKWARD, TJ_DTYPE_BF16, 2048, 32768,
                                   NULL, &p), TJ_OK);
  ASSERT_STAGED(p, 32768, 2, 1);
  ck_assert_int_eq(tj_row_plan_for(&device, TJ_ROW_SOFTMAX_BACKWARD, TJ_DTYPE_F16, 64, 1 << 20,
                                   NULL, &p), TJ_OK);
  ck_assert(p.stage > 0 && p.cluster == 1 && p.split >= 64);
  ck_assert_int_eq(tj_row_plan_for(&device, TJ_ROW_SOFTMAX_BACKWARD, TJ_DTYPE_BF16, 4096, 8192,
                                   NULL, &p), TJ_OK);
  ck_assert_int_eq(p.stage, 0); /* 32 KiB held: registers */
  ck_assert_int_eq(tj_row_plan_for(&device, TJ_ROW_SOFTMAX_BACKWARD, TJ_DTYPE_F32, 2048, 32768,
                                   NULL, &p), TJ_OK);
  ck_assert_int_eq(p.stage, 0);
  ck_assert_int_gt(p.cluster * p.split, 1);
  ck_assert_int_eq(tj_row_plan_for(&device, TJ_ROW_SOFTMAX_BACKWARD, TJ_DTYPE_F32, 64, 1 << 20,
                                   NULL, &p), TJ_OK);
  ck_assert_int_eq(p.stage, 0);
  /* The caller's CTAs are not staged. */
  tj_softmax_options o = {.num_warps = 8};
  ck_assert_int_eq(tj_row_plan_for(&device, TJ_ROW_SOFTMAX_BACKWARD, TJ_DTYPE_BF16, 2048, 32768,
                                   &o, &p), TJ_OK);
  ck_assert_int_eq(p.stage, 0);
}
END_TEST

/* 16-bit rows over the grid in rounds take CTAs of 4 warps, twice as many
 * (softmax_plan.c's halve_ctas), for softmax and the masked softmax; not
 * for log-softmax, which ran slower so, nor softmax backward's two tiles. */
START_TEST(halved_ctas_by_op) {
  tj_device_info device;
  tj_softmax_plan p;
  ck_assert_int_eq(tj_device_nominal(90, &device), TJ_OK);
  static const struct {
    tj_row_op op;
    int warps, ctas;
  } ops[] = {{TJ_ROW_SOFTMAX, 4, 32},
             {TJ_ROW_MASKED_SOFTMAX, 4, 32},
             {TJ_ROW_LOG_SOFTMAX, 8, 16},
             {TJ_ROW_SOFTMAX_BACKWARD, 8, 0}};
  for (size_t i = 0; i < TJ_COUNTOF(ops); i++) {
    ck_assert_int_eq(tj_row_plan_for(&device, ops[i].op, TJ_DTYPE_BF16, 256, 524288, NULL, &p),
                     TJ_OK);
    ck_assert_msg(p.num_warps == ops[i].warps && p.stage > 0, "op %d: %d warps, STAGE %d",
                  (int)ops[i].op, p.num_warps, p.stage);
    if (ops[i].ctas)
      ck_assert_msg(p.cluster * p.split == ops[i].ctas, "op %d: %d x %d CTAs", (int)ops[i].op,
                    p.cluster, p.split);
  }
}
END_TEST

/* A measured shape for staged rows (softmax_tuning.inc's TUNED_ROWS) as the
 * plan applies it: scaled to n, only where the rows fill the device, the
 * shares fit and a cluster is portable; its dtype, arch and BLOCK only. */
START_TEST(tuned_rows_lines) {
  tj_device_info d, old;
  tj_softmax_plan p;
  ck_assert_int_eq(tj_device_nominal(90, &d), TJ_OK);
  ck_assert_int_eq(tj_device_nominal(80, &old), TJ_OK);
  const RtTunedRows lines[] = {{90, TJ_DTYPE_BF16, 524288, 32, false},
                               {90, TJ_DTYPE_F32, 65536, 2, true},
                               {90, TJ_DTYPE_F16, 262144, 16, true}};
  const size_t count = TJ_COUNTOF(lines);
  memset(&p, 0, sizeof p);
  ck_assert(rt_softmax_tuned_rows(lines, count, &d, TJ_DTYPE_BF16, 128, 524288, &p));
  ck_assert_int_eq(p.cluster, 1);
  ck_assert_int_eq(p.split, 32);
  ck_assert_int_eq(p.num_warps, 8);
  ck_assert(p.stage == 32 || p.stage == 40);
  /* Narrower rows of the same BLOCK keep shares of the same bytes. */
  ck_assert(rt_softmax_tuned_rows(lines, count, &d, TJ_DTYPE_BF16, 128, 300000, &p));
  ck_assert_int_eq(p.split, 19); /* ceil(32 * 300000 / 524288) */
  ck_assert(rt_softmax_tuned_rows(lines, count, &d, TJ_DTYPE_F32, 512, 65536, &p));
  ck_assert_int_eq(p.cluster, 2); /* 128 KiB shares fit sm_90's 227 KiB */
  ck_assert_int_eq(p.split, 1);
  ck_assert(rt_softmax_tuned_rows(lines, count, &d, TJ_DTYPE_F32, 512, 40000, &p));
  ck_assert_int_eq(p.cluster, 2);
  /* Rows that do not fill the device, another dtype, BLOCK or arch, a
   * cluster past 8: the rules' plan. */
  memset(&p, 0, sizeof p);
  ck_assert(!rt_softmax_tuned_rows(lines, count, &d, TJ_DTYPE_BF16, 1, 524288, &p));
  ck_assert(!rt_softmax_tuned_rows(lines, count, &d, TJ_DTYPE_F16, 128, 524288, &p));
  ck_assert(!rt_softmax_tuned_rows(lines, count, &d, TJ_DTYPE_BF16, 128, 1 << 20, &p));
  ck_assert(!rt_softmax_tuned_rows(lines, count, &old, TJ_DTYPE_BF16, 128, 524288, &p));
  ck_assert(!rt_softmax_tuned_rows(lines, count, &d, TJ_DTYPE_F16, 256, 262144, &p));
  ck_assert(!rt_softmax_tuned_rows(lines, count, &d, TJ_DTYPE_F32, 512, 20000, &p));
  ck_assert_int_eq(p.cluster + p.split + p.num_warps + p.stage, 0);
  /* The table built in: the plan of a measured shape is the rules' there
   * (softmax_tuning.inc keeps them, every candidate measured), whose 18
   * CTAs of 8 warps then halve (halve_ctas). */
  ck_assert_int_eq(tj_softmax_plan_for(&d, TJ_DTYPE_BF16, 128, 524288, NULL, &p), TJ_OK);
  ck_assert_int_eq(p.split * p.cluster, 36);
  ck_assert_int_eq(p.num_warps, 4);
}
END_TEST

START_TEST(api_errors) {
  tj_program *p = (tj_program *)&p;
  tj_spec_options o;
  tj_softmax_plan plan;
  tj_device_info d;
  ck_assert_int_eq(tj_softmax_program(TJ_SOFTMAX_AUTO, -1, &p), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(p);
  ck_assert_int_eq(tj_softmax_program(TJ_SOFTMAX_AUTO, 10, NULL), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_softmax_program((tj_softmax_template)7, 10, &p), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_softmax_plan_for(NULL, TJ_DTYPE_F32, 1, -5, NULL, &plan),
                   TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_softmax_plan_for(NULL, TJ_DTYPE_F32, -1, 5, NULL, &plan),
                   TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_softmax_plan_for(NULL, TJ_DTYPE_COUNT, 1, 5, NULL, &plan),
                   TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_softmax_plan_for(NULL, (tj_dtype)-1, 1, 5, NULL, &plan),
                   TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_softmax_plan_for(NULL, TJ_DTYPE_F32, 1, 5, NULL, NULL),
                   TJ_ERR_INVALID_ARGUMENT);
  tj_softmax_options bad[] = {{.which_template = (tj_softmax_template)9}, {.num_warps = 3},
                              {.num_warps = 64},  {.cluster = 17},
                              {.cluster = -1},    {.split = 1025}};
  for (size_t i = 0; i < TJ_COUNTOF(bad); i++)
    ck_assert_int_eq(tj_softmax_plan_for(NULL, TJ_DTYPE_F32, 1, 5, &bad[i], &plan),
                     TJ_ERR_INVALID_ARGUMENT);
  tj_softmax_options single = {.which_template = TJ_SOFTMAX_SINGLE};
  ck_assert_int_eq(tj_softmax_plan_for(NULL, TJ_DTYPE_F32, 1, ((int64_t)1 << 30) + 1, &single,
                                       &plan),
                   TJ_ERR_UNSUPPORTED);
  ck_assert_int_eq(tj_softmax_plan_for(NULL, TJ_DTYPE_F32, 1, 5, NULL, &plan), TJ_OK);
  ck_assert_int_eq(tj_softmax_spec_options(&plan, TJ_DTYPE_F32, 5, NULL), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_softmax_spec_options(NULL, TJ_DTYPE_F32, 5, &o), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_softmax_spec_options(&plan, TJ_DTYPE_COUNT, 5, &o),
                   TJ_ERR_INVALID_ARGUMENT);
  /* A single tile of BLOCK 32 does not cover 33 elements. */
  plan.block = 32;
  ck_assert_int_eq(tj_softmax_spec_options(&plan, TJ_DTYPE_F32, 33, &o), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_device_nominal(91, &d), TJ_ERR_UNSUPPORTED);
  ck_assert_int_eq(tj_device_nominal(90, NULL), TJ_ERR_INVALID_ARGUMENT);
}
END_TEST

/* A y buffer one element short: the last row's store fails, naming it. */
START_TEST(short_output_is_an_error) {
  Case c = make_case(TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 3, 10, 11);
  TjMatrix x, y;
  TjRng r;
  rng_seed(&r, c.seed);
  ck_assert(matrix_alloc(&x, TJ_DTYPE_F32, 3, 10, 10, 0) &&
            matrix_alloc(&y, TJ_DTYPE_F32, 3, 10, 10, 0));
  matrix_fill_random(&x, &r, 3.0, 10.0);
  y.bytes -= 4;
  tj_spec *s = make_spec(&c);
  ck_assert_int_eq(interpret(s, &y, &x), TJ_ERR_INTERP);
  ck_assert_msg(strstr(tj_spec_error(s), "store") && strstr(tj_spec_error(s), "program 2") &&
                    strstr(tj_spec_error(s), "element 9") &&
                    strstr(tj_spec_error(s), "parameter y"),
                "%s", tj_spec_error(s));
  tj_spec_destroy(s);
  matrix_free(&x);
  matrix_free(&y);
}
END_TEST

static Suite *softmax_suite(void) {
  Suite *s = suite_create("softmax_cpu");
  TCase *widths = tcase_create("widths");
  tcase_set_timeout(widths, 600);
  tcase_add_loop_test(widths, single_every_width_f32, 0, 16);
  tcase_add_loop_test(widths, single_selected_widths_16bit, 0, 2);
  tcase_add_loop_test(widths, online_widths_all_dtypes, 0, TJ_DTYPE_COUNT);
  tcase_add_test(widths, online_chunk_edges);
  suite_add_tcase(s, widths);
  TCase *layout = tcase_create("layout");
  tcase_set_timeout(layout, 120);
  tcase_add_test(layout, strided_rows);
  tcase_add_test(layout, in_place);
  tcase_add_test(layout, padding_and_neighbours);
  tcase_add_test(layout, empty_matrices);
  tcase_add_test(layout, short_output_is_an_error);
  suite_add_tcase(s, layout);
  TCase *extremes = tcase_create("extremes");
  tcase_set_timeout(extremes, 120);
  tcase_add_loop_test(extremes, extreme_values, 0, 2 * TJ_DTYPE_COUNT);
  tcase_add_loop_test(extremes, log_softmax_rows, 0, TJ_DTYPE_COUNT);
  suite_add_tcase(s, extremes);
  TCase *api = tcase_create("api");
  tcase_add_test(api, plan_for_every_kind_of_shape);
  tcase_add_test(api, backward_plans);
  tcase_add_test(api, halved_ctas_by_op);
  tcase_add_test(api, tuned_rows_lines);
  tcase_add_test(api, api_errors);
  suite_add_tcase(s, api);
  return s;
}

int main(void) {
  return test_run_suite(softmax_suite());
}
