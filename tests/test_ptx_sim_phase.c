/*
 * test_ptx_sim_phase.c — phased kernels (codegen/phase.c) on the PTX
 * simulator: rows that start at any element of a 16-byte line, moved in
 * 16-byte vectors from each row's own boundary, compared with the
 * interpreter.
 *
 * x lives in a buffer that holds exactly its rows, so the simulator, which
 * fails on any access outside an argument's buffer or misaligned for its
 * size, proves that nothing outside them is read; y is poisoned, with a
 * guard after its last row and gaps between rows that must stay poisoned.
 * Softmax in three dtypes at every phase 0 .. VEC-1 of its first row, one
 * row and many (stride n, n+1 and n+3: every row at another phase), rows of
 * -inf, NaN and +inf; x and y at different phases (their accesses disagree,
 * so y's move element by element, still right); in place; clusters and a
 * split; a streamed row; a user's program that reduces its arange before
 * its first access; 16-bit rows over 16 lanes of 5 vectors. The PTX: a
 * phased kernel moves vectors where the scalar one moves none, and is the
 * same twice. (Random programs specialized phased run in test_ptx_sim.c.)
 */
#include "support.h"
#include "support_ptxsim.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Case {
  tj_dtype dtype;
  int64_t n;
  int warps, cluster, split, arch; /* warps 0: the table's */
  int64_t rows, x_stride, y_stride;
  int64_t x_at, y_at; /* elements from a 16-byte boundary to the first row */
  bool in_place;
  int stage, stash; /* STAGE and STASH: a staged row (stream.c) */
  int64_t block;    /* BLOCK, 0: next_pow2(n) */
} Case;

static tj_spec *phased_spec(const Case *k, tj_program **p) {
  tj_spec_options o = {.n = k->n,
                       .num_warps = k->warps,
                       .dtype = k->dtype,
                       .align = (int)dtype_bytes(k->dtype),
                       .cluster = k->cluster,
                       .split = k->split,
                       .phased = 1,
                       .stage = k->stage,
                       .stash = k->stash,
                       .block = k->block};
  tj_spec *s = NULL;
  ck_assert_int_eq(tj_softmax_program(TJ_SOFTMAX_SINGLE, k->n, p), TJ_OK);
  ck_assert_msg(tj_specialize(*p, &o, &s) == TJ_OK, "%s", tj_program_error(*p));
  return s;
}

/* A poisoned buffer of `elems` elements starting `at` elements past a
 * 16-byte boundary; the argument covers exactly those elements. */
typedef struct Buffer {
  void *base;
  tj_arg arg;
} Buffer;

static void buffer_make(Buffer *b, tj_dtype d, int64_t at, int64_t elems) {
  size_t size = dtype_bytes(d), bytes = (size_t)(at + elems) * size;
  b->base = aligned_alloc(16, (bytes + 15) / 16 * 16);
  ck_assert(b->base != NULL);
  uint32_t bits = poison_bits(d);
  for (size_t i = 0; i < (size_t)(at + elems); i++) memcpy((char *)b->base + i * size, &bits, size);
  b->arg = (tj_arg){TJ_ARG_PTR, {.ptr = (char *)b->base + (size_t)at * size}, (size_t)elems * size};
}

static int64_t span(int64_t rows, int64_t n, int64_t stride) { return (rows - 1) * stride + n; }

/* Row r: 0 random, 1 all -inf, 2 one NaN, 3 one +inf (kinds repeat). */
static void fill(void *x, const Case *k, TjRng *rng) {
  for (int64_t r = 0; r < k->rows; r++) {
    int64_t at = rng_range(rng, 0, k->n - 1);
    for (int64_t c = 0; c < k->n; c++) {
      double v = 3 * rng_normal(rng);
      if (r % 4 == 1) v = -INFINITY;
      if (r % 4 == 2 && c == at) v = NAN;
      if (r % 4 == 3 && c == at) v = INFINITY;
      elem_set(x, k->dtype, (size_t)(r * k->x_stride + c), v);
    }
  }
}

static void label(const Case *k, char *out, size_t size) {
  snprintf(out, size,
           "%s n=%lld rows=%lld strides %lld/%lld at %lld/%lld%s cluster=%d split=%d stage=%d "
           "stash=%d sm_%d",
           dtype_label(k->dtype), (long long)k->n, (long long)k->rows, (long long)k->y_stride,
           (long long)k->x_stride, (long long)k->y_at, (long long)k->x_at,
           k->in_place ? " in place" : "", k->cluster, k->split, k->stage, k->stash, k->arch);
}

static void run(const Case *k) {
  char name[200], why[2048];
  label(k, name, sizeof name);
  tj_program *p;
  tj_spec *s = phased_spec(k, &p);
  tj_dtype d = k->dtype;
  int64_t x_span = span(k->rows, k->n, k->x_stride), y_span = span(k->rows, k->n, k->y_stride);
  Buffer x, y, want, copy;
  buffer_make(&x, d, k->x_at, x_span);
  buffer_make(&y, d, k->y_at, y_span + 8); /* a guard after the last row */
  buffer_make(&want, d, 0, y_span + 8);
  buffer_make(&copy, d, 0, x_span);
  TjRng rng;
  rng_seed(&rng, test_seed((uint64_t)k->n, (uint64_t)(k->x_at * 16 + k->y_at), (uint64_t)d));
  fill(x.arg.u.ptr, k, &rng);
  memcpy(copy.arg.u.ptr, x.arg.u.ptr, x.arg.bytes);
  tj_arg args[5] = {want.arg,
                    copy.arg,
                    {TJ_ARG_INT, {.i = k->y_stride}, 0},
                    {TJ_ARG_INT, {.i = k->x_stride}, 0},
                    {TJ_ARG_INT, {.i = k->n}, 0}};
  if (k->in_place) args[0] = args[1];
  ck_assert_msg(tj_interpret(s, args, 5, k->rows) == TJ_OK, "%s: %s", name, tj_spec_error(s));
  const void *ref = k->in_place ? copy.arg.u.ptr : want.arg.u.ptr;
  args[0] = k->in_place ? x.arg : y.arg;
  args[1] = x.arg;
  ck_assert_msg(ptxsim_run_spec(s, k->arch, args, 5, k->rows, 0, NULL, why, sizeof why), "%s: %s", name,
                why);
  const void *got = args[0].u.ptr;
  TjTolerance t = dtype_tolerance(d);
  t.rtol *= 4;
  for (int64_t r = 0; r < k->rows; r++)
    for (int64_t c = 0; c < k->n; c++) {
      size_t i = (size_t)(r * k->y_stride + c);
      double g = elem_get(got, d, i), w = elem_get(ref, d, i);
      ck_assert_msg(close_enough(g, w, t), "%s: row %lld col %lld: %g, want %g", name, (long long)r,
                    (long long)c, g, w);
    }
  for (int64_t i = 0; i < y_span + 8 && !k->in_place; i++)
    if (i % k->y_stride >= k->n || i >= y_span)
      ck_assert_msg(is_poison(got, d, (size_t)i), "%s: y element %lld, outside every row, written",
                    name, (long long)i);
  free(x.base);
  free(y.base);
  free(want.base);
  free(copy.base);
  tj_spec_destroy(s);
  tj_program_destroy(p);
}

static int vec_of(tj_dtype d) { return 16 / (int)dtype_bytes(d); }

static const int64_t widths[] = {1, 2, 3, 7, 31, 77, 197, 577, 1000, 1023, 2049, 5003};

/* One row at each phase, in a buffer of exactly that row. */
START_TEST(one_row_at_every_phase) {
  int64_t n = widths[_i];
  for (int d = 0; d < TJ_DTYPE_COUNT; d++)
    for (int at = 0; at < vec_of((tj_dtype)d); at++) {
      Case k = {(tj_dtype)d, n, 0, 1, 1, (d + at) % 2 ? 80 : 90, 1, n, n, at, at, false, 0, 0, 0};
      run(&k);
    }
}
END_TEST

/* Many rows, each at another phase. */
START_TEST(rows_at_every_phase) {
  static const int64_t ns[] = {5, 77, 197, 1023, 3000};
  static const int64_t extra[] = {0, 1, 3};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++)
      for (int e = 0; e < 3; e++) {
        int64_t n = ns[i], stride = n + extra[e];
        int64_t at = (int64_t)(i + (size_t)e) % vec_of((tj_dtype)d);
        Case k = {(tj_dtype)d, n, 0, 1, 1, e == 1 ? 75 : 90, 9, stride, stride, at, at, false, 0, 0, 0};
        run(&k);
      }
}
END_TEST

/* y at another phase than x: y's accesses move element by element. */
START_TEST(x_and_y_at_different_phases) {
  static const int64_t ns[] = {1, 77, 1000, 2049};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      int64_t n = ns[i];
      Case a = {(tj_dtype)d, n, 0, 1, 1, 90, 5, n, n, 1, 2, false, 0, 0, 0};
      Case b = {(tj_dtype)d, n, 0, 1, 1, 80, 5, n + 1, n, 0, 3, false, 0, 0, 0};
      run(&a);
      run(&b);
    }
}
END_TEST

START_TEST(in_place) {
  for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
    Case k = {(tj_dtype)d, 999, 0, 1, 1, 90, 6, 1001, 1001, 3, 3, true, 0, 0, 0};
    run(&k);
  }
}
END_TEST

/* Streamed rows (one warp holds 8192 elements in pieces), read twice or
 * staged (their pieces kept in shared memory, all or the first ones), in
 * one CTA, a cluster or a staged split, rows at every phase: the streamed
 * layout is phased (phase.c), only the first piece's first vector wraps. */
START_TEST(streamed_rows) {
  static const struct {
    int64_t n, extra;
    int cluster, stage, stash;
    int split;     /* staged splits over the grid are phased too */
    int64_t block; /* a fitted BLOCK: pieces of uneven length (stream.c, tail_lowered) */
  } shapes[] = {{8001, 2, 1, 0, 0, 1, 0},      {8001, 3, 1, 16, 0, 1, 0},
                {3000, 1, 2, 8, 0, 1, 0},      {20000, 5, 1, 32, 8192, 1, 0},
                {4093, 0, 1, 4, 0, 1, 0},      {9000, 7, 3, 16, 3000, 1, 0},
                {7001, 1, 1, 8, 0, 3, 0},      {12000, 3, 1, 16, 2048, 2, 0},
                {6501, 1, 2, 40, 0, 1, 6656}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      int64_t n = shapes[i].n, stride = n + shapes[i].extra;
      int64_t at = (int64_t)(i + (size_t)d) % vec_of((tj_dtype)d);
      int arch = shapes[i].cluster == 1 && i % 2 ? 80 : 90;
      Case k = {(tj_dtype)d, n, 1, shapes[i].cluster, shapes[i].split, arch, 5,
                stride, stride, at, at, false, shapes[i].stage, shapes[i].stash, shapes[i].block};
      run(&k);
    }
}
END_TEST

/* Programs of y, x and w (n a row, rows contiguous) on rows `at` elements
 * past a 16-byte boundary (w's `w_at`), staged (and capped by STASH),
 * phased: the simulator against the interpreter, y poisoned with a guard
 * after it. The data are d's (the program's pointers), the math f32. */
static void run_weighted(const char *text, tj_dtype d, int64_t n, int64_t at, int64_t w_at,
                         int stage, int stash) {
  enum { ROWS = 3 };
  tj_program *p;
  tj_spec *s;
  ck_assert_msg(tj_program_parse(text, strlen(text), &p) == TJ_OK, "%s", tj_program_error(p));
  tj_spec_options o = {.n = n, .num_warps = 1, .dtype = d, .align = (int)dtype_bytes(d),
                       .phased = 1, .stage = stage, .stash = stash};
  ck_assert_msg(tj_specialize(p, &o, &s) == TJ_OK, "%s", tj_program_error(p));
  int64_t count = ROWS * n;
  Buffer x, w, y, want;
  buffer_make(&x, d, at, count);
  buffer_make(&w, d, w_at, count);
  buffer_make(&y, d, at, count + 8);
  buffer_make(&want, d, 0, count + 8);
  TjRng rng;
  rng_seed(&rng, test_seed((uint64_t)n, (uint64_t)(at * 4 + w_at), (uint64_t)stash));
  for (int64_t i = 0; i < count; i++) {
    elem_set(x.arg.u.ptr, d, (size_t)i, 3 * rng_normal(&rng));
    elem_set(w.arg.u.ptr, d, (size_t)i, 0.5 + fabs(rng_normal(&rng))); /* no cancelling sums */
  }
  tj_arg args[4] = {want.arg, x.arg, w.arg, {TJ_ARG_INT, {.i = n}, 0}};
  ck_assert_msg(tj_interpret(s, args, 4, ROWS) == TJ_OK, "%s", tj_spec_error(s));
  args[0] = y.arg;
  char why[2048];
  ck_assert_msg(ptxsim_run_spec(s, 90, args, 4, ROWS, 0, NULL, why, sizeof why),
                "n=%lld at %lld (w %lld) stage %d stash %d: %s", (long long)n, (long long)at,
                (long long)w_at, stage, stash, why);
  TjTolerance t = dtype_tolerance(d);
  t.rtol *= 4;
  for (int64_t i = 0; i < count + 8; i++) {
    double g = elem_get(y.arg.u.ptr, d, (size_t)i);
    if (i >= count) {
      ck_assert_msg(is_poison(y.arg.u.ptr, d, (size_t)i), "y[%lld] written past the rows",
                    (long long)i);
      continue;
    }
    double r = elem_get(want.arg.u.ptr, d, (size_t)i);
    ck_assert_msg(close_enough(g, r, t),
                  "n=%lld at %lld (w %lld) stage %d stash %d: y[%lld] %g, want %g", (long long)n,
                  (long long)at, (long long)w_at, stage, stash, (long long)i, g, r);
  }
  free(x.base);
  free(w.base);
  free(y.base);
  free(want.base);
  tj_spec_destroy(s);
  tj_program_destroy(p);
}

/* The layout's first access (its phase source) is a load that only a later
 * stream phase uses (w), so the first phase lowers x's load first: that
 * layout is not phased (x was stashed unrotated and w read rotated). And a
 * source first loaded in a middle phase of three, its stash capped: the
 * phase comes from one place, not from the branch of the pieces the stash
 * does not keep (registers read before written). And w at another phase
 * than x: its accesses move element by element, the middle phase's copies
 * into the stash (cp.async) included. */
START_TEST(a_phase_source_that_the_first_phase_does_not_load) {
  static const char weighted[] =
      "kernel weighted\n%0 : ptr<f32> = param y\n%1 : ptr<f32> = param x\n"
      "%2 : ptr<f32> = param w\n%3 : i32 = param n\n%4 : i32 = program_id\n"
      "%5 : i32 = mul %4, %3\n%6 : ptr<f32> = ptr_add %1, %5\n%7 : ptr<f32> = ptr_add %0, %5\n"
      "%8 : tile<i32,BLOCK> = arange\n%9 : tile<pred,BLOCK> = lt %8, %3\n%10 : f32 = const -inf\n"
      "%11 : tile<f32,BLOCK> = load %2, %8, %9\n%12 : tile<f32,BLOCK> = load %6, %8, %9, %10\n"
      "%13 : f32 = reduce_max %12\n%14 : tile<f32,BLOCK> = sub %12, %13\n"
      "%15 : tile<f32,BLOCK> = exp %14\n%16 : f32 = reduce_sum %15\n"
      "%17 : tile<f32,BLOCK> = div %15, %16\n%18 : tile<f32,BLOCK> = mul %17, %11\n"
      "store %7, %8, %18, %9\n";
  static const char three_phases[] =
      "kernel three\n%0 : ptr<f32> = param y\n%1 : ptr<f32> = param x\n"
      "%2 : ptr<f32> = param w\n%3 : i32 = param n\n%4 : i32 = program_id\n"
      "%5 : i32 = mul %4, %3\n%6 : ptr<f32> = ptr_add %1, %5\n%7 : ptr<f32> = ptr_add %0, %5\n"
      "%8 : ptr<f32> = ptr_add %2, %5\n%9 : tile<i32,BLOCK> = arange\n"
      "%10 : tile<pred,BLOCK> = lt %9, %3\n%11 : f32 = const 0\n"
      "%12 : tile<f32,BLOCK> = load %6, %9, %10, %11\n%13 : f32 = reduce_max %12\n"
      "%14 : tile<f32,BLOCK> = load %8, %9, %10, %11\n%15 : tile<f32,BLOCK> = sub %12, %13\n"
      "%16 : tile<f32,BLOCK> = mul %15, %14\n%17 : f32 = reduce_sum %16\n"
      "%18 : tile<f32,BLOCK> = div %16, %17\nstore %7, %9, %18, %10\n";
  /* 16-bit rows, where phased rows take the prefetch (stream.c): w, the
   * middle phase's one stashed load, copied ahead where it shares x's
   * phase; at another, its element path writes the stash. */
  static const char three_16bit[] =
      "kernel three16\n%0 : ptr<bf16> = param y\n%1 : ptr<bf16> = param x\n"
      "%2 : ptr<bf16> = param w\n%3 : i32 = param n\n%4 : i32 = program_id\n"
      "%5 : i32 = mul %4, %3\n%6 : ptr<bf16> = ptr_add %1, %5\n%7 : ptr<bf16> = ptr_add %0, %5\n"
      "%8 : ptr<bf16> = ptr_add %2, %5\n%9 : tile<i32,BLOCK> = arange\n"
      "%10 : tile<pred,BLOCK> = lt %9, %3\n%11 : f32 = const 0\n"
      "%12 : tile<bf16,BLOCK> = load %6, %9, %10, %11\n%13 : tile<f32,BLOCK> = cast %12\n"
      "%14 : f32 = reduce_max %13\n%15 : tile<bf16,BLOCK> = load %8, %9, %10, %11\n"
      "%16 : tile<f32,BLOCK> = cast %15\n%17 : tile<f32,BLOCK> = sub %13, %14\n"
      "%18 : tile<f32,BLOCK> = mul %17, %16\n%19 : f32 = reduce_sum %18\n"
      "%20 : tile<f32,BLOCK> = div %18, %19\n%21 : tile<bf16,BLOCK> = cast %20\n"
      "store %7, %9, %21, %10\n";
  const tj_dtype f32 = TJ_DTYPE_F32, bf16 = TJ_DTYPE_BF16;
  for (int64_t at = 0; at < 4; at++) {
    run_weighted(weighted, f32, 3000, at, at, 16, 0);
    run_weighted(three_phases, f32, 3000, at, at, 16, 0);
    run_weighted(three_phases, f32, 20000, at, at, 32, 32768);
    run_weighted(three_phases, f32, 20000, at, at, 32, 65536);
    run_weighted(three_phases, f32, 3000, at, (at + 1) % 4, 16, 0);
    run_weighted(three_phases, f32, 20000, at, (at + 3) % 4, 32, 32768);
  }
  for (int64_t at = 0; at < 8; at += 3) {
    run_weighted(three_16bit, bf16, 3000, at, at, 16, 0);
    run_weighted(three_16bit, bf16, 20000, at, at, 32, 32768);
    run_weighted(three_16bit, bf16, 3000, at, (at + 1) % 8, 16, 0);
    run_weighted(three_16bit, bf16, 20000, at, (at + 5) % 8, 32, 32768);
  }
}
END_TEST

/* A user's program that reduces its arange before its first access: the
 * reduction reads the slots before the phase is known, so that layout is
 * not phased (it failed to compile before), and the result is right. */
START_TEST(a_reduction_before_the_first_access) {
  static const char text[] = "kernel early_sum\n"
                             "%0 : ptr<f32> = param y\n"
                             "%1 : ptr<f32> = param x\n"
                             "%2 : i64 = param stride\n"
                             "%3 : i32 = param n\n"
                             "%4 : i32 = program_id\n"
                             "%5 : i64 = cast %4\n"
                             "%6 : i64 = mul %5, %2\n"
                             "%7 : tile<i32,BLOCK> = arange\n"
                             "%8 : i32 = reduce_sum %7\n"
                             "%9 : f32 = cast %8\n"
                             "%10 : ptr<f32> = ptr_add %1, %6\n"
                             "%11 : tile<pred,BLOCK> = lt %7, %3\n"
                             "%12 : tile<f32,BLOCK> = load %10, %7, %11\n"
                             "%13 : tile<f32,BLOCK> = add %12, %9\n"
                             "%14 : ptr<f32> = ptr_add %0, %6\n"
                             "store %14, %7, %13, %11\n";
  tj_program *p;
  tj_spec *s;
  ck_assert_msg(tj_program_parse(text, strlen(text), &p) == TJ_OK, "%s", tj_program_error(p));
  tj_spec_options o = {.n = 1000, .dtype = TJ_DTYPE_F32, .align = 4, .phased = 1};
  ck_assert_msg(tj_specialize(p, &o, &s) == TJ_OK, "%s", tj_program_error(p));
  int64_t rows = 5, n = 1000, stride = 1001;
  Buffer x, y, want;
  buffer_make(&x, TJ_DTYPE_F32, 1, span(rows, n, stride));
  buffer_make(&y, TJ_DTYPE_F32, 1, span(rows, n, stride));
  buffer_make(&want, TJ_DTYPE_F32, 0, span(rows, n, stride));
  for (int64_t i = 0; i < span(rows, n, stride); i++)
    elem_set(x.arg.u.ptr, TJ_DTYPE_F32, (size_t)i, (double)(i % 7) - 3.0);
  tj_arg args[4] = {want.arg, x.arg, {TJ_ARG_INT, {.i = stride}, 0}, {TJ_ARG_INT, {.i = n}, 0}};
  ck_assert_msg(tj_interpret(s, args, 4, rows) == TJ_OK, "%s", tj_spec_error(s));
  args[0] = y.arg;
  char *ptx = NULL, why[1024];
  ck_assert_msg(tj_emit_ptx(s, NULL, &ptx, NULL) == TJ_OK, "%s", tj_spec_error(s));
  ck_assert_msg(ptxsim_run(ptx, args, 4, rows, 2, why, sizeof why), "%s", why);
  for (int64_t i = 0; i < span(rows, n, stride); i++) {
    size_t k = (size_t)i;
    bool row = i % stride < n;
    ck_assert_msg(row ? elem_get(y.arg.u.ptr, TJ_DTYPE_F32, k) ==
                            elem_get(want.arg.u.ptr, TJ_DTYPE_F32, k)
                      : is_poison(y.arg.u.ptr, TJ_DTYPE_F32, k),
                  "element %lld: %g, want %g", (long long)i, elem_get(y.arg.u.ptr, TJ_DTYPE_F32, k),
                  elem_get(want.arg.u.ptr, TJ_DTYPE_F32, k));
  }
  tj_free(ptx);
  free(x.base);
  free(y.base);
  free(want.base);
  tj_spec_destroy(s);
  tj_program_destroy(p);
}
END_TEST

/* A row over a cluster and over a split of the grid. */
START_TEST(clusters_and_splits) {
  for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
    Case cluster = {(tj_dtype)d, 3001, 1, 2, 1, 90, 5, 3001, 3001, 1, 1, false, 0, 0, 0};
    Case split = {(tj_dtype)d, 5001, 1, 1, 3, 80, 5, 5003, 5003, 2, 2, false, 0, 0, 0};
    run(&cluster);
    run(&split);
  }
}
END_TEST

/* The PTX of k's phased kernel (release with tj_free). */
static char *case_ptx(const Case *k) {
  tj_program *p;
  tj_spec *s = phased_spec(k, &p);
  char *ptx = NULL;
  ck_assert_int_eq(tj_emit_ptx(s, NULL, &ptx, NULL), TJ_OK);
  tj_spec_destroy(s);
  tj_program_destroy(p);
  return ptx;
}

/* 16-bit rows of 513 to 640 at their phase take 16 lanes of 5 vectors
 * (cg_group_size), in the BLOCK of 640 the plan fits them to: one row at
 * each phase, many rows each at another, a row that fills the tile. */
START_TEST(sixteen_lanes_of_five_vectors) {
  static const int64_t ns[] = {520, 577, 640};
  static const tj_dtype dtypes[] = {TJ_DTYPE_F16, TJ_DTYPE_BF16};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (size_t d = 0; d < 2; d++) {
      int64_t n = ns[i];
      Case layout = {dtypes[d], n, 4, 1, 1, 90, 1, n, n, 0, 0, false, 0, 0, 640};
      char *ptx = case_ptx(&layout);
      ck_assert_msg(strstr(ptx, "8 program instances of 16 threads each; tile 640: VEC 8 x 5"),
                    "%s n=%lld: not 16 lanes of 5 vectors", dtype_label(dtypes[d]), (long long)n);
      tj_free(ptx);
      for (int at = 0; at < 8; at++) {
        Case one = {dtypes[d], n, 4, 1, 1, 90, 1, n, n, at, at, false, 0, 0, 640};
        run(&one);
      }
      for (int64_t e = 0; e <= 3; e += 3) {
        Case many = {dtypes[d], n, 4, 1, 1, 80, 9, n + e, n + e, (int64_t)i, (int64_t)i, false,
                     0, 0, 640};
        run(&many);
      }
    }
}
END_TEST

/* 16-bit rows at one phase of more than 10 vectors a thread, as the plan
 * stages them (rt_softmax_rows_plan): 4 warps at STAGE 32, 10300 in
 * pieces of 4, 4 and 3 vectors (BLOCK 11264: log-softmax's and masked
 * softmax's plan; softmax's is 8 warps unstaged), 14001 in seven of 2
 * (BLOCK 14336, stream.c's piece_repeats); a row at each of a few phases,
 * and rows of strides n + 3. */
START_TEST(staged_rows_of_a_cta) {
  static const struct {
    int64_t n, block;
  } shapes[] = {{10300, 11264}, {14001, 14336}};
  static const tj_dtype dtypes[] = {TJ_DTYPE_BF16, TJ_DTYPE_F16};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (size_t d = 0; d < 2; d++) {
      int64_t n = shapes[i].n;
      Case layout = {dtypes[d], n, 4, 1, 1, 90, 1, n, n, 0, 0, false, 32, 0, shapes[i].block};
      char *ptx = case_ptx(&layout);
      ck_assert_msg(strstr(ptx, "STAGE=32") && strstr(ptx, "PHASE=1"), "%s n=%lld: not staged",
                    dtype_label(dtypes[d]), (long long)n);
      tj_free(ptx);
      for (int at = 1; at < 8; at += 3) {
        Case one = {dtypes[d], n, 4, 1, 1, 90, 1, n, n, at, at, false, 32, 0, shapes[i].block};
        run(&one);
      }
      Case many = {dtypes[d], n, 4, 1, 1, 80, 3, n + 3, n + 3, 5, 5, false, 32, 0, shapes[i].block};
      run(&many);
    }
}
END_TEST

static char *ptx_of(tj_dtype d, int64_t n, bool phased) {
  tj_program *p;
  tj_spec *s;
  tj_spec_options o = {.n = n, .dtype = d, .align = (int)dtype_bytes(d), .phased = phased};
  ck_assert_int_eq(tj_softmax_program(TJ_SOFTMAX_SINGLE, n, &p), TJ_OK);
  ck_assert_int_eq(tj_specialize(p, &o, &s), TJ_OK);
  char *ptx = NULL;
  ck_assert_int_eq(tj_emit_ptx(s, NULL, &ptx, NULL), TJ_OK);
  ck_assert(strstr(tj_spec_key(s), "|PHASE=1") ? phased : !phased);
  tj_spec_destroy(s);
  tj_program_destroy(p);
  return ptx;
}

START_TEST(phased_kernels_move_vectors) {
  static const char *const vectors[] = {"ld.global.v4.f32", "ld.global.v4.b32"};
  for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
    const char *v = vectors[d != TJ_DTYPE_F32];
    char *scalar = ptx_of((tj_dtype)d, 1023, false), *a = ptx_of((tj_dtype)d, 1023, true),
         *b = ptx_of((tj_dtype)d, 1023, true);
    ck_assert_msg(!strstr(scalar, v), "%s: the scalar kernel moves vectors", dtype_label(d));
    ck_assert_msg(strstr(a, v) && strstr(a, "st.global.v4"), "%s: no vectors in the phased kernel",
                  dtype_label(d));
    ck_assert_msg(strcmp(a, b) == 0, "%s: two phased kernels differ", dtype_label(d));
    tj_free(scalar);
    tj_free(a);
    tj_free(b);
  }
}
END_TEST

Suite *suite(void) {
  Suite *s = suite_create("ptx_sim_phase");
  TCase *t = tcase_create("softmax");
  tcase_set_timeout(t, 300);
  tcase_add_loop_test(t, one_row_at_every_phase, 0, (int)(sizeof widths / sizeof widths[0]));
  tcase_add_test(t, rows_at_every_phase);
  tcase_add_test(t, x_and_y_at_different_phases);
  tcase_add_test(t, in_place);
  tcase_add_test(t, clusters_and_splits);
  tcase_add_test(t, streamed_rows);
  tcase_add_test(t, a_reduction_before_the_first_access);
  tcase_add_test(t, a_phase_source_that_the_first_phase_does_not_load);
  tcase_add_test(t, phased_kernels_move_vectors);
  tcase_add_test(t, sixteen_lanes_of_five_vectors);
  tcase_add_test(t, staged_rows_of_a_cta);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  return test_run_suite(suite());
}
