/*
 * test_ptx_sim.c — generated PTX executed by the PTX simulator
 * (support_ptxsim.c) and compared with the CPU interpreter, the IR's
 * reference semantics. This is how CI, which has no GPU, checks that the
 * kernels compute the right thing: layouts, lane groups, masks and partial
 * vectors, reductions at all three levels, the grid-stride loop with fewer
 * CTAs than rows, loops, casts per arch. The simulator also fails on any
 * out-of-bounds or misaligned global access and on a shfl.sync or bar.sync
 * that not every thread reaches.
 *
 * Softmax: widths around every layout boundary, three dtypes, several warp
 * counts, aligned and unaligned rows, rows of -inf, NaN and +inf. Random
 * programs (support_randprog.c): every output element must match the
 * interpreter's within a tolerance that covers ex2.approx and the order of
 * sums, and exactly the same elements must be written; 60 more specialized
 * phased (codegen/phase.c) whatever their alignment.
 */
#include "codegen/codegen.h"
#include "runtime/runtime.h" /* rt_size_multiple */
#include "support.h"
#include "support_ptxsim.h"
#include "support_randprog.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* PTX for s (arch), then run on ctas = half the CTAs the grid needs. */
static bool simulate(tj_spec *s, int arch, const tj_arg *args, int nargs, int64_t grid, char *why,
                     size_t size) {
  tj_codegen_options o = {arch, 0, 0};
  tj_kernel_info info;
  char *ptx = NULL;
  if (tj_emit_ptx(s, &o, &ptx, &info) != TJ_OK) {
    snprintf(why, size, "emit: %s", tj_spec_error(s));
    return false;
  }
  int64_t ctas = (grid + info.shape.programs_per_cta - 1) / info.shape.programs_per_cta;
  ctas = ctas > 1 ? ctas / 2 : 1;
  bool ok = ptxsim_run(ptx, args, nargs, grid, (int)ctas, why, size);
  tj_free(ptx);
  return ok;
}

/* ---- softmax ------------------------------------------------------------------ */

typedef struct Case {
  tj_softmax_template which;
  tj_dtype dtype;
  int64_t n;
  int warps, align, arch;
  tj_row_op op;
} Case;

/* Row r of x gets: 0 random, 1 all -inf, 2 one NaN, 3 one +inf, 4 -inf mixed in. */
static void fill(TjMatrix *x, TjRng *rng) {
  matrix_fill_random(x, rng, 3.0, 100.0);
  for (int64_t r = 1; r < x->rows; r++)
    for (int64_t c = 0; c < x->cols; c++) {
      int kind = (int)(r % 5);
      if (kind == 1) matrix_set(x, r, c, -INFINITY);
      if (kind == 2 && c == x->cols / 2) matrix_set(x, r, c, NAN);
      if (kind == 3 && c == x->cols - 1) matrix_set(x, r, c, INFINITY);
      if (kind == 4 && c % 3 == 0) matrix_set(x, r, c, -INFINITY);
    }
}

static void run_softmax(const Case *k) {
  tj_program *p;
  tj_spec *s;
  tj_spec_options o;
  ck_assert_int_eq(tj_row_program(k->op, k->which, k->n, &p), TJ_OK);
  ck_assert_int_eq(softmax_spec_options(k->which, k->dtype, 65536, k->n, 0, 0, &o), TJ_OK);
  o.num_warps = k->warps;
  o.align = k->align;
  /* DIV as tj_softmax takes it: the vector's elements where n is their multiple */
  int elem = (int)dtype_bytes(k->dtype);
  o.multiple = rt_size_multiple(k->n, k->align ? k->align : elem, elem);
  ck_assert_int_eq(tj_specialize(p, &o, &s), TJ_OK);
  int64_t per = k->align ? k->align / (int64_t)dtype_bytes(k->dtype) : 0;
  int64_t rows = 11, stride = per > 1 ? (k->n + per) / per * per : k->n + 3;
  TjMatrix x, y, want;
  TjRng rng;
  rng_seed(&rng, test_seed((uint64_t)k->n, (uint64_t)k->dtype, (uint64_t)k->warps));
  ck_assert(matrix_alloc(&x, k->dtype, rows, k->n, stride, 8));
  ck_assert(matrix_alloc(&y, k->dtype, rows, k->n, stride, 8));
  ck_assert(matrix_alloc(&want, k->dtype, rows, k->n, stride, 8));
  fill(&x, &rng);
  tj_arg args[5] = {{TJ_ARG_PTR, {.ptr = want.data}, want.bytes},
                    {TJ_ARG_PTR, {.ptr = x.data}, x.bytes},
                    {TJ_ARG_INT, {.i = stride}, 0},
                    {TJ_ARG_INT, {.i = stride}, 0},
                    {TJ_ARG_INT, {.i = k->n}, 0}};
  ck_assert_msg(tj_interpret(s, args, 5, rows) == TJ_OK, "%s", tj_spec_error(s));
  args[0].u.ptr = y.data;
  args[0].bytes = y.bytes;
  char why[1024];
  ck_assert_msg(simulate(s, k->arch, args, 5, rows, why, sizeof why),
                "%s n=%lld warps=%d align=%d sm_%d: %s", dtype_label(k->dtype), (long long)k->n,
                k->warps, k->align, k->arch, why);
  TjTolerance t = dtype_tolerance(k->dtype);
  t.rtol *= 4;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < k->n; c++) {
      double got = matrix_get(&y, r, c), ref = matrix_get(&want, r, c);
      ck_assert_msg(close_enough(got, ref, t),
                    "%s n=%lld warps=%d align=%d sm_%d: row %lld col %lld: %g, want %g",
                    dtype_label(k->dtype), (long long)k->n, k->warps, k->align, k->arch,
                    (long long)r, (long long)c, got, ref);
    }
  for (size_t i = matrix_index(&y, rows - 1, k->n); i < y.bytes / dtype_bytes(k->dtype); i++)
    ck_assert_msg(is_poison(y.data, k->dtype, i), "n=%lld: element %zu past the last row written",
                  (long long)k->n, i);
  matrix_free(&x);
  matrix_free(&y);
  matrix_free(&want);
  tj_spec_destroy(s);
  tj_program_destroy(p);
}

/* 48, 80, 200, 513 and 3000 get BLOCKs that are no power of two (lanes of
 * 2 to 4 vectors: f16 80 in 4 lanes of 3, BLOCK 96; CTAs: f16 3000 in 4
 * warps, BLOCK 3072), at alignments under 16 narrower lanes of them. */
static const int64_t widths[] = {1,   3,   8,   31,   32,   48,   80,   100,
                                 128, 200, 513, 1000, 1024, 2049, 3000, 4096};

START_TEST(softmax_matches_interpreter) {
  static const int warps[] = {0, 1, 2, 8};
  static const int aligns[] = {16, 0, 8, 4};
  int64_t n = widths[_i];
  for (int d = 0; d < TJ_DTYPE_COUNT; d++)
    for (int w = 0; w < 4; w++)
      for (int a = 0; a < 4; a++) {
        Case k = {TJ_SOFTMAX_SINGLE, (tj_dtype)d, n, warps[w], aligns[a], (d + w + a) % 2 ? 75 : 90,
                  0};
        if (n > 1024 && warps[w] && warps[w] < 4) k.warps = 8;
        run_softmax(&k);
      }
}
END_TEST

START_TEST(online_softmax_matches_interpreter) {
  static const int64_t ns[] = {1, 100, 4096, 5000, 9000};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      Case k = {TJ_SOFTMAX_ONLINE, (tj_dtype)d, ns[i], 0, i % 2 ? 16 : 0, d == 1 ? 80 : 90, 0};
      run_softmax(&k);
    }
}
END_TEST

/* Log-softmax, both templates, every dtype, aligned and not, lane groups to
 * a streamed tile: the same reduction structure with log and a subtraction
 * at the end. */
START_TEST(log_softmax_matches_interpreter) {
  static const int64_t ns[] = {1, 31, 100, 1000, 4097, 9000};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++)
      for (int which = TJ_SOFTMAX_SINGLE; which <= TJ_SOFTMAX_ONLINE; which++) {
        Case k = {(tj_softmax_template)which, (tj_dtype)d, ns[i], 0, (int)(i + d) % 2 ? 16 : 0,
                  (int)(i + d + which) % 3 ? 90 : 80, TJ_ROW_LOG_SOFTMAX};
        run_softmax(&k);
      }
}
END_TEST

/* A tile wider than a thread's registers (over 128 elements a thread with
 * one warp) is streamed in pieces: the max and the sum in one phase as a
 * fused pair, then x again, the pieces in reverse. Widths with rows of
 * padding pieces, unaligned rows (one element at a time) and every dtype. */
START_TEST(streamed_softmax_matches_interpreter) {
  static const int64_t ns[] = {4097, 8192, 9000, 16000};
  static const int aligns[] = {16, 0};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++)
      for (int a = 0; a < 2; a++) {
        Case k = {TJ_SOFTMAX_SINGLE, (tj_dtype)d, ns[i], 1, aligns[a], (int)(i + d) % 2 ? 80 : 90,
                  0};
        run_softmax(&k);
      }
}
END_TEST

/* ---- random programs --------------------------------------------------------- */

enum { RANDOM_PROGRAMS = 150, PHASED_PROGRAMS = 60 };

START_TEST(random_programs_match_interpreter) {
  RandProg rp;
  char why[1200];
  bool phased = _i >= RANDOM_PROGRAMS; /* then phased whatever the alignment */
  uint64_t seed = phased ? 888000 + (uint64_t)(_i - RANDOM_PROGRAMS) : 777000 + (uint64_t)_i;
  ck_assert_msg(randprog_make(seed, &rp, why, sizeof why), "seed %llu: %s",
                (unsigned long long)seed, why);
  if (phased) rp.options.phased = 1;
  tj_spec *s;
  ck_assert_msg(tj_specialize(rp.program, &rp.options, &s) == TJ_OK, "%s",
                tj_program_error(rp.program));
  ck_assert_msg(tj_interpret(s, rp.args, RANDPROG_ARGS, rp.grid) == TJ_OK, "%s: %s", rp.summary,
                tj_spec_error(s));
  void *want[3];
  for (int i = 0; i < 3; i++) {
    want[i] = malloc(rp.args[i].bytes);
    memcpy(want[i], rp.args[i].u.ptr, rp.args[i].bytes);
  }
  randprog_poison_outputs(&rp);
  static const int archs[] = {75, 80, 90};
  ck_assert_msg(simulate(s, archs[_i % 3], rp.args, RANDPROG_ARGS, rp.grid, why, sizeof why),
                "%s (sm_%d): %s", rp.summary, archs[_i % 3], why);
  for (int i = 0; i < 3; i++) {
    randprog_compare(&rp, i, rp.args[i].u.ptr, want[i]);
    free(want[i]);
  }
  tj_spec_destroy(s);
  randprog_free(&rp);
}
END_TEST

/* ---- i32 max and min ------------------------------------------------------- */

/* The GPU-only bug of random seeds 49, 191 and 382 (f16 programs with an i32
 * reduce_max of arange * -1): ptxas miscompiled max.s32 trees of negations.
 * The backend now writes i32 max/min on unsigned keys, which the simulator
 * must run right (and it refuses max.s32 / min.s32 outright). Negative,
 * positive and extreme values, every dtype's layout, one and two warps. */
START_TEST(i32_max_and_min_of_negations) {
  static const char text[] =
      "kernel negmax\n%0 : ptr<f32> = param out\n%1 : ptr<i32> = param v\n%2 : ptr<DTYPE> = param "
      "h\n"
      "%3 : tile<i32,BLOCK> = arange\n%4 : i32 = const -1\n%5 : tile<i32,BLOCK> = mul %3, %4\n"
      "%6 : tile<i32,BLOCK> = load %1, %3\n%7 : tile<i32,BLOCK> = neg %6\n"
      "%8 : tile<i32,BLOCK> = max %5, %7\n%9 : tile<i32,BLOCK> = min %8, %6\n"
      "%10 : i32 = reduce_max %5\n%11 : i32 = reduce_max %7\n%12 : i32 = max %10, %11\n"
      "%13 : tile<i32,BLOCK> = add %9, %12\n%14 : tile<f32,BLOCK> = cast %13\n"
      "store %0, %3, %14\n%15 : tile<DTYPE,BLOCK> = cast %14\nstore %2, %3, %15\n";
  tj_program *p;
  ck_assert_int_eq(tj_program_parse(text, strlen(text), &p), TJ_OK);
  enum { N = 512 };
  static int32_t v[N];
  static float got[N], want[N], ref[N], h[N];
  int32_t max_neg_v = INT32_MIN;
  for (int i = 0; i < N; i++) {
    v[i] = i % 7 == 0 ? -(int32_t)i * 3 : (int32_t)i * 5 - 1000;
    if (i == 3 || i == 5) v[i] = i == 3 ? 1000000 : -1000000;
    if (-v[i] > max_neg_v) max_neg_v = -v[i];
  }
  for (int i = 0; i < N; i++) {
    int32_t m = -i > -v[i] ? -i : -v[i];
    ref[i] = (float)((m < v[i] ? m : v[i]) + max_neg_v); /* reduce_max of -i is 0 */
  }
  tj_arg args[3] = {{TJ_ARG_PTR, {.ptr = want}, sizeof want},
                    {TJ_ARG_PTR, {.ptr = v}, sizeof v},
                    {TJ_ARG_PTR, {.ptr = h}, sizeof h}};
  for (int d = 0; d < TJ_DTYPE_COUNT; d++)
    for (int warps = 1; warps <= 2; warps++) {
      tj_spec_options o = {.n = N, .dtype = (tj_dtype)d, .align = 16, .num_warps = warps};
      tj_spec *sp;
      ck_assert_int_eq(tj_specialize(p, &o, &sp), TJ_OK);
      args[0].u.ptr = want;
      ck_assert_int_eq(tj_interpret(sp, args, 3, 1), TJ_OK);
      args[0].u.ptr = got;
      memset(got, 0xFF, sizeof got);
      char why[512];
      ck_assert_msg(simulate(sp, 90, args, 3, 1, why, sizeof why), "%s", why);
      for (int i = 0; i < N; i++)
        ck_assert_msg(got[i] == ref[i] && want[i] == ref[i],
                      "dtype %d warps %d element %d: simulator %g, interpreter %g, want %g", d,
                      warps, i, (double)got[i], (double)want[i], (double)ref[i]);
      tj_spec_destroy(sp);
    }
  tj_program_destroy(p);
}
END_TEST

/* rem in the PTX against the interpreter: i32 and i64 tiles by tiles (b 0
 * and -1 among them, INT_MIN % -1 too), a tile by an immediate, and a
 * scalar (the program id modulo a parameter), on 3 instances. */
START_TEST(remainders_match_interpreter) {
  static const char text[] =
      "kernel rems\n%0 : ptr<i32> = param out\n%1 : ptr<i32> = param a\n%2 : ptr<i32> = param b\n"
      "%3 : ptr<i64> = param out64\n%4 : ptr<i64> = param a64\n%5 : ptr<i64> = param b64\n"
      "%6 : i32 = param rows\n%7 : i32 = program_id\n%8 : i32 = rem %7, %6\n"
      "%9 : tile<i32,BLOCK> = arange\n%10 : tile<i32,BLOCK> = load %1, %9\n"
      "%11 : tile<i32,BLOCK> = load %2, %9\n%12 : tile<i32,BLOCK> = rem %10, %11\n"
      "%13 : i32 = const 7\n%14 : tile<i32,BLOCK> = rem %10, %13\n"
      "%15 : tile<i32,BLOCK> = mul %14, %8\n%16 : tile<i32,BLOCK> = add %12, %15\n"
      "%17 : i32 = const 64\n%18 : i32 = mul %7, %17\n%19 : tile<i32,BLOCK> = add %9, %18\n"
      "store %0, %19, %16\n%20 : tile<i64,BLOCK> = load %4, %9\n"
      "%21 : tile<i64,BLOCK> = load %5, %9\n%22 : tile<i64,BLOCK> = rem %20, %21\n"
      "store %3, %19, %22\n";
  enum { N = 64, INSTANCES = 3 };
  static int32_t a[N], b[N], got[N * INSTANCES], want[N * INSTANCES];
  static int64_t a64[N], b64[N], got64[N * INSTANCES], want64[N * INSTANCES];
  TjRng rng;
  rng_seed(&rng, 4242);
  for (int i = 0; i < N; i++) {
    a[i] = (int32_t)rng_next(&rng);
    b[i] = i % 8 == 0 ? 0 : i % 8 == 1 ? -1 : (int32_t)rng_range(&rng, -1000, 1000);
    a64[i] = (int64_t)rng_next(&rng);
    b64[i] = i % 8 == 2 ? 0 : i % 8 == 3 ? -1 : (int64_t)rng_next(&rng) >> (i % 60);
  }
  a[1] = INT32_MIN;
  a64[3] = INT64_MIN;
  tj_program *p;
  tj_spec *sp;
  ck_assert_int_eq(tj_program_parse(text, strlen(text), &p), TJ_OK);
  tj_spec_options o = {.n = N, .dtype = TJ_DTYPE_F32, .align = 16, .num_warps = 1};
  ck_assert_int_eq(tj_specialize(p, &o, &sp), TJ_OK);
  tj_arg args[7] = {{TJ_ARG_PTR, {.ptr = want}, sizeof want},
                    {TJ_ARG_PTR, {.ptr = a}, sizeof a},
                    {TJ_ARG_PTR, {.ptr = b}, sizeof b},
                    {TJ_ARG_PTR, {.ptr = want64}, sizeof want64},
                    {TJ_ARG_PTR, {.ptr = a64}, sizeof a64},
                    {TJ_ARG_PTR, {.ptr = b64}, sizeof b64},
                    {TJ_ARG_INT, {.i = 2}, 0}};
  ck_assert_msg(tj_interpret(sp, args, 7, INSTANCES) == TJ_OK, "%s", tj_spec_error(sp));
  args[0].u.ptr = got;
  args[3].u.ptr = got64;
  char why[512];
  ck_assert_msg(simulate(sp, 90, args, 7, INSTANCES, why, sizeof why), "%s", why);
  for (int k = 0; k < N * INSTANCES; k++) {
    int i = k % N, r = k / N;
    int32_t w = (b[i] == 0 || b[i] == -1 ? 0 : a[i] % b[i]) + a[i] % 7 * (r % 2);
    ck_assert_msg(want[k] == w && got[k] == w, "i32 %d: interpreter %d, PTX %d, want %d", k,
                  want[k], got[k], w);
    int64_t w64 = b64[i] == 0 || b64[i] == -1 ? 0 : a64[i] % b64[i];
    ck_assert_msg(want64[k] == w64 && got64[k] == w64, "i64 %d: %lld, %lld, want %lld", k,
                  (long long)want64[k], (long long)got64[k], (long long)w64);
  }
  tj_spec_destroy(sp);
  tj_program_destroy(p);
}
END_TEST

/* A counted loop whose bound is within a step of the counter type's limit
 * ends where the exact count says (for never wraps): i32 loops up to 2^31 - 1
 * and i64 loops up to 2^63 - 1, from starts a few steps below, in the
 * interpreter and in the PTX on the simulator. The loop counts its trips
 * and stores the count. Before the fix, the PTX's i32 counter wrapped to
 * -2^31 and went on. */
static const char loop_text[] = "kernel trips\n"
                                "%0 : ptr<i32> = param out\n"
                                "%1 : ELEM = param start\n"
                                "%2 : ELEM = param end\n"
                                "%3 : ELEM = param step\n"
                                "%4 : i32 = const 0\n"
                                "%5 : i32 = const 1\n"
                                "%6 : ELEM = for %1, %2, %3\n"
                                "  %7 : i32 = iter %4\n"
                                "  %8 : i32 = add %7, %5\n"
                                "  yield %7, %8\n"
                                "endfor\n"
                                "%9 : tile<i32,BLOCK> = arange\n"
                                "%10 : tile<i32,BLOCK> = mul %9, %4\n"
                                "%11 : tile<i32,BLOCK> = add %10, %7\n"
                                "store %0, %9, %11\n";

static void loop_trips(const char *elem, int64_t start, int64_t end, int64_t step) {
  char text[1024];
  const char *at = strstr(loop_text, "ELEM");
  size_t n = 0;
  for (const char *q = loop_text; *q;) {
    if (q == at || (at && strncmp(q, "ELEM", 4) == 0)) {
      n += (size_t)snprintf(text + n, sizeof text - n, "%s", elem);
      q += 4;
    } else {
      text[n++] = *q++;
    }
  }
  text[n] = '\0';
  tj_program *p;
  tj_spec *sp;
  ck_assert_msg(tj_program_parse(text, strlen(text), &p) == TJ_OK, "%s", tj_program_error(p));
  tj_spec_options o = {.n = 1, .dtype = TJ_DTYPE_F32, .num_warps = 1};
  ck_assert_int_eq(tj_specialize(p, &o, &sp), TJ_OK);
  uint64_t span = start < end ? (uint64_t)end - (uint64_t)start : 0;
  int64_t want = (int64_t)(span / (uint64_t)step + (span % (uint64_t)step != 0));
  int32_t got = -7, interp = -7;
  tj_arg args[4] = {{TJ_ARG_PTR, {.ptr = &interp}, sizeof interp},
                    {TJ_ARG_INT, {.i = start}, 0},
                    {TJ_ARG_INT, {.i = end}, 0},
                    {TJ_ARG_INT, {.i = step}, 0}};
  ck_assert_msg(tj_interpret(sp, args, 4, 1) == TJ_OK, "%s", tj_spec_error(sp));
  args[0].u.ptr = &got;
  char why[512];
  ck_assert_msg(simulate(sp, 90, args, 4, 1, why, sizeof why), "%s", why);
  ck_assert_msg(interp == want && got == want,
                "%s for %lld, %lld, %lld: %lld trips, interpreter %d, PTX %d", elem,
                (long long)start, (long long)end, (long long)step, (long long)want, interp, got);
  tj_spec_destroy(sp);
  tj_program_destroy(p);
}

START_TEST(loops_end_at_the_type_limit) {
  static const int64_t steps[] = {1, 3, 4096, 1 << 28, (int64_t)1 << 30};
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    int64_t step = steps[i];
    for (int64_t back = -1; back <= 1; back++) {
      loop_trips("i32", INT32_MAX - 2 * step + back, INT32_MAX, step);
      loop_trips("i32", INT32_MAX - step + back, INT32_MAX - 1, step);
      loop_trips("i32", INT32_MIN, INT32_MIN + 3 * step + back, step);
      loop_trips("i64", INT64_MAX - 3 * step + back, INT64_MAX, step);
      loop_trips("i64", INT64_MAX - step, INT64_MAX - 1 + back, step);
    }
  }
  loop_trips("i32", 5, 5, 1);
  loop_trips("i32", INT32_MAX - 1, INT32_MAX, INT32_MAX);
  loop_trips("i64", INT64_MIN, INT64_MIN + 2, INT64_MAX);
}
END_TEST

Suite *suite(void) {
  Suite *s = suite_create("ptx_sim");
  TCase *t = tcase_create("softmax");
  tcase_set_timeout(t, 300);
  tcase_add_loop_test(t, softmax_matches_interpreter, 0, (int)(sizeof widths / sizeof widths[0]));
  tcase_add_test(t, online_softmax_matches_interpreter);
  tcase_add_test(t, streamed_softmax_matches_interpreter);
  tcase_add_test(t, log_softmax_matches_interpreter);
  tcase_add_test(t, i32_max_and_min_of_negations);
  tcase_add_test(t, remainders_match_interpreter);
  tcase_add_test(t, loops_end_at_the_type_limit);
  suite_add_tcase(s, t);
  TCase *r = tcase_create("random");
  tcase_set_timeout(r, 300);
  tcase_add_loop_test(r, random_programs_match_interpreter, 0,
                      RANDOM_PROGRAMS + PHASED_PROGRAMS);
  suite_add_tcase(s, r);
  return s;
}

int main(void) {
  return test_run_suite(suite());
}
