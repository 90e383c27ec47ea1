/*
 * test_softmax_backward.c — softmax backward (templates/softmax_backward*.tj,
 * dx = y * (dy - sum(dy * y))): the interpreter against the float64
 * reference of support.c, and the generated PTX on the simulator against
 * the interpreter, in every strategy tj_softmax_backward can pick.
 *
 * Interpreter: every width from 1 to 1100 and a sweep of powers of two, ±1
 * and primes to 2^17 (single tile), the online template with small chunks,
 * three dtypes, row strides that differ between dx, y and dy, in place
 * (dx == y, dx == dy), and the extreme rows: a NaN in y or dy, an inf in
 * dy (±inf or NaN as IEEE gives them), y = 0 against an inf in dy (NaN),
 * a one-hot y, subnormal y, y all NaN (the softmax of a row of -inf).
 * Inputs are fresh per case: y the softmax of random rows, dy 3 * normal.
 * Outputs start as poison; every element must be written, and nothing in
 * the gaps between rows or the guard after the last.
 *
 * Simulator: the default plans (lane groups, one CTA), a streamed tile,
 * clusters of 2 and 4, splits of 3 and a cluster with a split, rows at
 * every phase (phased kernels), sm_80 and sm_90; the simulator's byte
 * counts show y and dy read once where the tile fits the registers (twice
 * where it is streamed, and in the online template) and dx written once.
 */
#include "ir/ir.h"
#include "support.h"
#include "support_ptxsim.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 37 /* elements after the last row of the output */

enum { IN_PLACE_NONE, IN_PLACE_Y, IN_PLACE_DY };

typedef struct Case {
  tj_softmax_template which;
  tj_dtype dtype;
  int64_t m, n;
  int64_t block;                          /* 0: the plan's */
  int64_t dx_pad, y_pad, dy_pad;          /* row stride = n + pad */
  int in_place;                           /* IN_PLACE_* */
  uint64_t seed;
} Case;

/* Changes rows of y and dy after the random fill. */
typedef void (*Shaper)(TjMatrix *y, TjMatrix *dy);

static void case_label(const Case *c, char *out, size_t size) {
  snprintf(out, size, "%s %s M=%lld N=%lld BLOCK=%lld pads %lld/%lld/%lld in-place %d seed %llu",
           c->which == TJ_SOFTMAX_ONLINE ? "online" : "single", dtype_label(c->dtype),
           (long long)c->m, (long long)c->n, (long long)c->block, (long long)c->dx_pad,
           (long long)c->y_pad, (long long)c->dy_pad, c->in_place, (unsigned long long)c->seed);
}

static tj_spec *make_spec(tj_softmax_template which, tj_dtype dtype, int64_t n, int64_t block,
                          tj_spec_options *o) {
  tj_program *p = NULL;
  tj_spec *s = NULL;
  ck_assert_int_eq(tj_row_program(TJ_ROW_SOFTMAX_BACKWARD, which, n, &p), TJ_OK);
  ck_assert_int_eq(row_spec_options(TJ_ROW_SOFTMAX_BACKWARD, which, dtype, 65536, n, 0, 0, o),
                   TJ_OK);
  if (block) o->block = block;
  tj_status st = tj_specialize(p, o, &s);
  ck_assert_msg(st == TJ_OK, "specialize: %s", tj_program_error(p));
  tj_program_destroy(p);
  return s;
}

/* The arguments: dx gets its whole buffer (guard included), y and dy
 * exactly their rows unless one of them is dx. */
static void make_args(tj_arg *args, TjMatrix *dx, TjMatrix *y, TjMatrix *dy) {
  TjMatrix *m[3] = {dx, y, dy};
  for (int i = 0; i < 3; i++) {
    size_t bytes = i == 0 || m[i] == dx ? m[i]->bytes : m[i]->span_bytes;
    args[i] = (tj_arg){TJ_ARG_PTR, {.ptr = m[i]->data}, bytes};
    args[3 + i] = (tj_arg){TJ_ARG_INT, {.i = m[i]->stride}, 0};
  }
  args[6] = (tj_arg){TJ_ARG_INT, {.i = y->cols}, 0};
}

static void run_case(const Case *c, Shaper shape) {
  char label[256], why[512];
  TjMatrix y, dy, dx;
  TjRng r;
  rng_seed(&r, c->seed);
  int64_t n = c->n;
  ck_assert(matrix_alloc(&y, c->dtype, c->m, n, n + c->y_pad,
                         c->in_place == IN_PLACE_Y ? GUARD : 0));
  ck_assert(matrix_alloc(&dy, c->dtype, c->m, n, n + c->dy_pad,
                         c->in_place == IN_PLACE_DY ? GUARD : 0));
  backward_fill(&y, &dy, &r);
  if (shape) shape(&y, &dy);
  double *ref = malloc((size_t)(c->m * n + 1) * sizeof *ref);
  ck_assert_ptr_nonnull(ref);
  backward_reference(&y, &dy, ref);
  TjMatrix *out = c->in_place == IN_PLACE_Y ? &y : c->in_place == IN_PLACE_DY ? &dy : &dx;
  if (!c->in_place) ck_assert(matrix_alloc(&dx, c->dtype, c->m, n, n + c->dx_pad, GUARD));
  tj_spec_options o;
  tj_spec *s = make_spec(c->which, c->dtype, n, c->block, &o);
  tj_arg args[7];
  make_args(args, out, &y, &dy);
  case_label(c, label, sizeof label);
  tj_status st = tj_interpret(s, args, 7, c->m);
  ck_assert_msg(st == TJ_OK, "%s: %s: %s", label, tj_status_string(st), tj_spec_error(s));
  tj_spec_destroy(s);
  TjCompare cmp;
  bool ok = compare_rows(out, ref, dtype_tolerance(c->dtype), !c->in_place, &cmp);
  compare_describe(&cmp, why, sizeof why);
  ck_assert_msg(ok, "%s: %s", label, why);
  matrix_free(&y);
  matrix_free(&dy);
  if (!c->in_place) matrix_free(&dx);
  free(ref);
}

static Case make_case(int which, int dtype, int64_t m, int64_t n, uint64_t seed) {
  Case c = {(tj_softmax_template)which, (tj_dtype)dtype, m, n, 0, 0, 0, 0, IN_PLACE_NONE, seed};
  return c;
}

/* ---- the interpreter --------------------------------------------------- */

/* Every width 1..1100, 110 a loop index, in a dtype that changes with n. */
START_TEST(every_width) {
  for (int64_t n = 110 * _i + 1; n <= 110 * (_i + 1); n++) {
    Case c = make_case(TJ_SOFTMAX_SINGLE, (int)(n % 3), 1 + n % 4, n, test_seed(n, 1, 0));
    run_case(&c, NULL);
  }
}
END_TEST

/* Powers of two, ±1, and primes up to 2^17, every dtype. */
START_TEST(wide_rows) {
  static const int64_t ns[] = {2047, 2048, 2049, 4093, 8191, 8192, 16384, 16385, 32749,
                               65536, 65537, 131071};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      Case c = make_case(TJ_SOFTMAX_SINGLE, d, ns[i] > 20000 ? 1 : 3, ns[i], test_seed(ns[i], d, 2));
      run_case(&c, NULL);
    }
}
END_TEST

/* The online template with a small chunk (partial last chunks, several
 * chunks) and with its default one. */
START_TEST(online_chunks) {
  static const int64_t ns[] = {1, 17, 64, 65, 1000, 4097, 100003};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      Case c = make_case(TJ_SOFTMAX_ONLINE, d, ns[i] > 5000 ? 1 : 3, ns[i], test_seed(ns[i], d, 3));
      c.block = i % 2 ? 64 : 256;
      run_case(&c, NULL);
      c.block = 0;
      c.seed++;
      run_case(&c, NULL);
    }
}
END_TEST

/* Strides that differ between the three matrices, and in place. */
START_TEST(strides_and_in_place) {
  static const int64_t ns[] = {1, 5, 100, 1023, 3000};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (int which = TJ_SOFTMAX_SINGLE; which <= TJ_SOFTMAX_ONLINE; which++)
      for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
        Case c = make_case(which, d, 4, ns[i], test_seed(ns[i], d, 4 + (uint64_t)which));
        c.dx_pad = 3;
        c.y_pad = 17;
        c.dy_pad = 1;
        run_case(&c, NULL);
        c.dx_pad = c.y_pad = c.dy_pad = 5;
        c.in_place = IN_PLACE_Y;
        run_case(&c, NULL);
        c.in_place = IN_PLACE_DY;
        run_case(&c, NULL);
      }
}
END_TEST

/* Row r of 7: 0 random, 1 a NaN in y, 2 a NaN in dy, 3 +inf in dy, 4 -inf
 * in dy where y is 0, 5 y one-hot, 6 y subnormal and dy huge. */
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
      for (int64_t c = 0; c < n; c++) {
        matrix_set(y, r, c, y->dtype == TJ_DTYPE_F32 ? 1e-40 : 0.0);
        matrix_set(dy, r, c, c % 2 ? 1e30 : -3e29);
      }
      break;
    }
  }
}

/* A row of y all NaN (the softmax of a row of -inf): dx all NaN. */
static void nan_rows(TjMatrix *y, TjMatrix *dy) {
  (void)dy;
  for (int64_t c = 0; c < y->cols; c++) matrix_set(y, y->rows - 1, c, NAN);
}

START_TEST(extreme_values) {
  static const int64_t ns[] = {1, 2, 33, 1000, 5000};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (int which = TJ_SOFTMAX_SINGLE; which <= TJ_SOFTMAX_ONLINE; which++)
      for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
        Case c = make_case(which, d, 14, ns[i], test_seed(ns[i], d, 6 + (uint64_t)which));
        if (which == TJ_SOFTMAX_ONLINE) c.block = 256;
        run_case(&c, extreme_rows);
        c.m = 2;
        run_case(&c, nan_rows);
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
  int reads;      /* times y and dy are read: 1, 2, or 0 for either */
  int stage;      /* STAGE: y and dy kept in shared memory (0: none) */
} SimCase;

/* The PTX of the case's specialization against the interpreter, on 11
 * rows: element by element where rows start anywhere, else phased. */
static void run_sim(const SimCase *k) {
  tj_program *p;
  tj_spec *s;
  tj_spec_options o;
  ck_assert_int_eq(tj_row_program(TJ_ROW_SOFTMAX_BACKWARD, k->which, k->n, &p), TJ_OK);
  ck_assert_int_eq(row_spec_options(TJ_ROW_SOFTMAX_BACKWARD, k->which, k->dtype, 65536, k->n,
                                    k->arch, k->warps, &o),
                   TJ_OK);
  if (k->cluster) o.cluster = k->cluster;
  if (k->split) o.split = k->split;
  if (k->stage) o.stage = k->stage;
  if (k->cluster || k->split || k->stage) o.block = tj_next_pow2(k->n); /* the plan fit its own */
  if (k->cluster || k->split) {
    int64_t span = 32LL * o.num_warps * o.cluster * o.split * (16 / (int)dtype_bytes(k->dtype));
    if (o.block < span) o.block = span; /* every thread a whole vector, as the plan makes it */
  }
  o.align = k->unaligned ? (int)dtype_bytes(k->dtype) : 16;
  o.phased = k->unaligned && k->which == TJ_SOFTMAX_SINGLE && o.split == 1;
  ck_assert_msg(tj_specialize(p, &o, &s) == TJ_OK, "%s", tj_program_error(p));
  const int64_t per = 16 / (int64_t)dtype_bytes(k->dtype), rows = 11;
  const int64_t stride = k->unaligned ? k->n + 3 : (k->n + per - 1) / per * per;
  TjMatrix y, dy, want, got;
  TjRng rng;
  rng_seed(&rng, test_seed((uint64_t)k->n, (uint64_t)k->dtype, (uint64_t)(k->cluster + 7 * k->split)));
  ck_assert(matrix_alloc(&y, k->dtype, rows, k->n, stride, 0));
  ck_assert(matrix_alloc(&dy, k->dtype, rows, k->n, stride, 0));
  ck_assert(matrix_alloc(&want, k->dtype, rows, k->n, stride, 8));
  ck_assert(matrix_alloc(&got, k->dtype, rows, k->n, stride, 8));
  backward_fill(&y, &dy, &rng);
  extreme_rows(&y, &dy);
  tj_arg args[7];
  make_args(args, &want, &y, &dy);
  ck_assert_msg(tj_interpret(s, args, 7, rows) == TJ_OK, "%s", tj_spec_error(s));
  make_args(args, &got, &y, &dy);
  char why[1024];
  PtxsimStats stats;
  bool ok = ptxsim_run_spec(s, k->arch, args, 7, rows, 0, &stats, why, sizeof why);
  ck_assert_msg(ok, "%s n=%lld warps=%d cluster %d split %d stage %d sm_%d%s: %s",
                dtype_label(k->dtype), (long long)k->n, o.num_warps, o.cluster, o.split, o.stage,
                k->arch, k->unaligned ? " unaligned" : "", why);
  TjTolerance t = dtype_tolerance(k->dtype);
  t.rtol *= 4;
  t.atol *= 4;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < k->n; c++) {
      double g = matrix_get(&got, r, c), w = matrix_get(&want, r, c);
      ck_assert_msg(close_enough(g, w, t) && !is_poison(got.data, k->dtype, matrix_index(&got, r, c)),
                    "%s n=%lld cluster %d split %d sm_%d: row %lld col %lld: %g, want %g",
                    dtype_label(k->dtype), (long long)k->n, o.cluster, o.split, k->arch,
                    (long long)r, (long long)c, g, w);
    }
  for (size_t i = 0; i < got.bytes / dtype_bytes(k->dtype); i++)
    ck_assert_msg((i % (size_t)stride < (size_t)k->n && i < (size_t)(rows * stride)) ||
                      is_poison(got.data, k->dtype, i),
                  "n=%lld: element %zu, outside the rows, written", (long long)k->n, i);
  /* dx written once (the one thread of a row with a partial vector writes
   * the elements of its full ones again, at most 15 each); y and dy read
   * as often as expected (streamed and online kernels read them twice). */
  uint64_t row_bytes = (uint64_t)(rows * k->n) * dtype_bytes(k->dtype);
  uint64_t slack = (uint64_t)rows * 15 * dtype_bytes(k->dtype) * (uint64_t)(k->n / 64 + 1);
  ck_assert_uint_ge(stats.bytes_written[0], row_bytes);
  ck_assert_uint_le(stats.bytes_written[0], row_bytes + slack);
  ck_assert_uint_eq(stats.bytes_read[2], stats.bytes_read[1]);
  if (k->reads) {
    ck_assert_uint_ge(stats.bytes_read[1], (uint64_t)k->reads * row_bytes);
    ck_assert_uint_le(stats.bytes_read[1], (uint64_t)k->reads * (row_bytes + slack));
  }
  matrix_free(&y);
  matrix_free(&dy);
  matrix_free(&want);
  matrix_free(&got);
  tj_spec_destroy(s);
  tj_program_destroy(p);
}

/* The plans' own specializations: lane groups, one CTA, the online template. */
START_TEST(planned_kernels_on_the_simulator) {
  static const int64_t ns[] = {1, 7, 31, 100, 513, 1000, 2049};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      SimCase k = {TJ_SOFTMAX_SINGLE, (tj_dtype)d, ns[i], 0, 0, 0, (int)(i + d) % 2 ? 80 : 90,
                   (i + (size_t)d) % 3 == 0, 1, 0};
      run_sim(&k);
    }
  for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
    SimCase k = {TJ_SOFTMAX_ONLINE, (tj_dtype)d, 5000, 4, 0, 0, 90, d == 1, 2, 0};
    run_sim(&k);
  }
}
END_TEST

/* One warp over rows of 3000 to 9000: the tile is streamed in pieces. */
START_TEST(streamed_on_the_simulator) {
  static const int64_t ns[] = {3000, 9000};
  for (size_t i = 0; i < 2; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      SimCase k = {TJ_SOFTMAX_SINGLE, (tj_dtype)d, ns[i], 1, 0, 0, d == 2 ? 80 : 90, i == 1,
                   i == 1 ? 2 : 0, 0};
      run_sim(&k);
    }
}
END_TEST

/* Clusters, splits and both, aligned and not, streamed and not. */
START_TEST(across_ctas_on_the_simulator) {
  static const struct {
    int cluster, split;
    int64_t n;
  } shapes[] = {{2, 1, 700}, {4, 1, 3001}, {1, 3, 1500}, {2, 3, 2500}, {1, 2, 20000}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      SimCase k = {TJ_SOFTMAX_SINGLE, (tj_dtype)d, shapes[i].n, 1, shapes[i].cluster,
                   shapes[i].split, shapes[i].cluster > 1 ? 90 : 80, (i + (size_t)d) % 2 == 1,
                   shapes[i].n > 10000 ? 2 : 1, 0};
      run_sim(&k);
    }
}
END_TEST

/* Staged rows, as the plan makes them for wide rows: y and dy kept in
 * shared memory and read from memory once, in one CTA, a cluster and a
 * grid split, at every phase where the rows start anywhere. */
START_TEST(staged_on_the_simulator) {
  static const struct {
    int cluster, split, stage;
    int64_t n;
  } shapes[] = {{1, 1, 8, 3000}, {2, 1, 16, 4100}, {1, 3, 8, 5000}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      SimCase k = {TJ_SOFTMAX_SINGLE, (tj_dtype)d, shapes[i].n, 2, shapes[i].cluster,
                   shapes[i].split, 90, (i + (size_t)d) % 2 == 1, 1, shapes[i].stage};
      run_sim(&k);
    }
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("softmax_backward");
  TCase *t = tcase_create("interpreter");
  tcase_set_timeout(t, 300);
  tcase_add_loop_test(t, every_width, 0, 10);
  tcase_add_test(t, wide_rows);
  tcase_add_test(t, online_chunks);
  tcase_add_test(t, strides_and_in_place);
  tcase_add_test(t, extreme_values);
  suite_add_tcase(s, t);
  t = tcase_create("simulator");
  tcase_set_timeout(t, 600);
  tcase_add_test(t, planned_kernels_on_the_simulator);
  tcase_add_test(t, streamed_on_the_simulator);
  tcase_add_test(t, across_ctas_on_the_simulator);
  tcase_add_test(t, staged_on_the_simulator);
  suite_add_tcase(s, t);
  return s;
}

int main(void) { return test_run_suite(suite()); }
