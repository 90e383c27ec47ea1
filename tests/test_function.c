/*
 * test_function.c — JIT functions (runtime/function.c) without a GPU: the
 * variant a launch's arguments select (ALIGN from the pointers and the i64
 * parameters that reach an address, BLOCK from the size parameter, phased
 * where rows start off 16 bytes at one phase), the
 * arguments refused, the options refused, and a selected variant run end to
 * end on the PTX simulator at its alignment against the interpreter. The
 * launch itself is gpu_function.c's.
 */
#include "runtime/runtime.h"
#include "support.h"
#include "support_logsoftmax.h"
#include "support_ptxsim.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The embedding scenario's log-softmax (y, x, stride, n, tag) as a
 * function whose BLOCK follows n; the program is gone once it exists. */
static tj_function *function_of_text(const char *text, tj_dtype dtype) {
  tj_program *p;
  ck_assert(tj_program_parse(text, strlen(text), &p) == TJ_OK);
  tj_function_options o = {.dtype = dtype, .size_param = "n"};
  tj_function *f;
  char why[256];
  ck_assert_msg(rt_function_new(NULL, p, &o, &f, why, sizeof why) == TJ_OK, "%s", why);
  tj_program_destroy(p);
  return f;
}

static tj_function *function_of(tj_dtype dtype) {
  return function_of_text(logsoftmax_text, dtype);
}

/* The same parameters over rows of DTYPE: a row copy. */
static const char copy_text[] = "kernel user_copy\n"
                                "%0 : ptr<DTYPE> = param y\n"
                                "%1 : ptr<DTYPE> = param x\n"
                                "%2 : i64 = param stride\n"
                                "%3 : i32 = param n\n"
                                "%4 : i64 = param tag\n"
                                "%5 : i32 = program_id\n"
                                "%6 : i64 = cast %5\n"
                                "%7 : i64 = mul %6, %2\n"
                                "%8 : ptr<DTYPE> = ptr_add %1, %7\n"
                                "%9 : tile<i32,BLOCK> = arange\n"
                                "%10 : tile<pred,BLOCK> = lt %9, %3\n"
                                "%11 : f32 = const 0\n"
                                "%12 : tile<DTYPE,BLOCK> = load %8, %9, %10, %11\n"
                                "%13 : ptr<DTYPE> = ptr_add %0, %7\n"
                                "store %13, %9, %12, %10\n";

static void args_of(tj_arg *a, uint64_t y, uint64_t x, int64_t stride, int64_t n, int64_t tag) {
  a[0] = (tj_arg){TJ_ARG_PTR, {.ptr = (void *)(uintptr_t)y}, 0};
  a[1] = (tj_arg){TJ_ARG_PTR, {.ptr = (void *)(uintptr_t)x}, 0};
  a[2] = (tj_arg){TJ_ARG_INT, {.i = stride}, 0};
  a[3] = (tj_arg){TJ_ARG_INT, {.i = n}, 0};
  a[4] = (tj_arg){TJ_ARG_INT, {.i = tag}, 0};
}

/* ALIGN and BLOCK of a launch, or -1 and the message. */
static int select_of(const tj_function *f, uint64_t y, uint64_t x, int64_t stride, int64_t n,
                     int64_t *block, char *why) {
  tj_arg a[5];
  int align;
  args_of(a, y, x, stride, n, 7);
  why[0] = '\0';
  if (rt_function_select(f, a, 5, &align, block, why, 256) != TJ_OK) return -1;
  return align;
}

START_TEST(arguments_select_the_variant) {
  tj_function *f = function_of(TJ_DTYPE_F32);
  char why[256];
  int64_t block;
  ck_assert_int_eq(select_of(f, 0x1000, 0x2000, 32, 32, &block, why), 16);
  ck_assert_int_eq(block, 32);
  ck_assert_int_eq(select_of(f, 0x1000, 0x2000, 31, 31, &block, why), 4); /* 124-byte rows */
  ck_assert_int_eq(block, 32);
  ck_assert_int_eq(select_of(f, 0x1000, 0x2000, 2, 1000, &block, why), 8);
  ck_assert_int_eq(block, 1024);
  ck_assert_int_eq(select_of(f, 0x1000, 0x2004, 32, 32, &block, why), 4); /* x one float on */
  ck_assert_int_eq(select_of(f, 0x1008, 0x2000, 32, 32, &block, why), 8);
  ck_assert_int_eq(select_of(f, 0x1000, 0x2000, -32, 0, &block, why), 16); /* rows backwards */
  ck_assert_int_eq(block, 1);
  ck_assert_int_eq(select_of(f, 0x1000, 0x2000, 32, 1 << 30, &block, why), 16);
  ck_assert_int_eq(block, 1 << 30);
  /* tag is an i64 that reaches no address: it changes nothing. */
  tj_arg a[5];
  int align;
  args_of(a, 0x1000, 0x2000, 32, 32, 31);
  ck_assert(rt_function_select(f, a, 5, &align, &block, why, sizeof why) == TJ_OK);
  ck_assert_int_eq(align, 16);
  /* A stride given as TJ_ARG_PTR counts the same (tj_launch reads both). */
  args_of(a, 0x1000, 0x2000, 32, 32, 7);
  a[2] = (tj_arg){TJ_ARG_PTR, {.ptr = (void *)(uintptr_t)31}, 0};
  ck_assert(rt_function_select(f, a, 5, &align, &block, why, sizeof why) == TJ_OK);
  ck_assert_int_eq(align, 4);
  /* The f32 pointees make the row 124 bytes whatever DTYPE is bound. */
  tj_function_destroy(f);
  f = function_of(TJ_DTYPE_F16);
  ck_assert_int_eq(select_of(f, 0x1000, 0x2000, 31, 31, &block, why), 4);
  tj_function_destroy(f);
  /* DTYPE pointees take DTYPE's size: softmax's f16 rows of 31 are 62 bytes. */
  tj_program *p;
  ck_assert(tj_softmax_program(TJ_SOFTMAX_SINGLE, 31, &p) == TJ_OK);
  tj_function_options o = {.dtype = TJ_DTYPE_F16, .size_param = "n"};
  ck_assert_msg(rt_function_new(NULL, p, &o, &f, why, sizeof why) == TJ_OK, "%s", why);
  tj_program_destroy(p);
  tj_arg s[5] = {{TJ_ARG_PTR, {.ptr = (void *)0x1000}, 0}, {TJ_ARG_PTR, {.ptr = (void *)0x2000}, 0},
                 {TJ_ARG_INT, {.i = 31}, 0}, {TJ_ARG_INT, {.i = 31}, 0}, {TJ_ARG_INT, {.i = 31}, 0}};
  ck_assert(rt_function_select(f, s, 5, &align, &block, why, sizeof why) == TJ_OK);
  ck_assert_int_eq(align, 2);
  s[2].u.i = s[3].u.i = 32;
  ck_assert(rt_function_select(f, s, 5, &align, &block, why, sizeof why) == TJ_OK);
  ck_assert_int_eq(align, 16);
  tj_function_destroy(f);
}
END_TEST

START_TEST(wrong_arguments_are_refused) {
  tj_function *f = function_of(TJ_DTYPE_F32);
  char why[256];
  int64_t block;
  ck_assert_int_eq(select_of(f, 0x1000, 0x2002, 32, 32, &block, why), -1);
  ck_assert_str_eq(why, "argument 1 (x) = 0x2002 is not aligned to its 4-byte elements");
  ck_assert_int_eq(select_of(f, 0x1000, 0x2000, 32, (1 << 30) + 1, &block, why), -1);
  ck_assert_str_eq(why, "argument 3 (n) = 1073741825 needs a BLOCK over 2^30, the largest tile");
  ck_assert_int_eq(select_of(f, 0x1000, 0x2000, 32, -1, &block, why), -1);
  ck_assert_str_eq(why, "argument 3 (n) = -1 is no size: it gives BLOCK");
  ck_assert_int_eq(select_of(f, 0x1000, 0x2000, 32, (int64_t)1 << 32, &block, why), -1);
  ck_assert_str_eq(why, "argument 3 (n) = 4294967296 is no size: it gives BLOCK");
  tj_arg a[5];
  int align;
  args_of(a, 0x1000, 0x2000, 32, 32, 7);
  ck_assert(rt_function_select(f, a, 4, &align, &block, why, sizeof why) != TJ_OK);
  ck_assert_str_eq(why, "user_log_softmax takes 5 arguments, got 4");
  a[3] = (tj_arg){TJ_ARG_FLOAT, {.f = 32.0}, 0};
  ck_assert(rt_function_select(f, a, 5, &align, &block, why, sizeof why) != TJ_OK);
  ck_assert_str_eq(why, "argument 3 (n) gives BLOCK: an integer");
  a[3] = (tj_arg){TJ_ARG_INT, {.i = 32}, 0};
  a[1] = (tj_arg){TJ_ARG_FLOAT, {.f = 1.0}, 0};
  ck_assert(rt_function_select(f, a, 5, &align, &block, why, sizeof why) != TJ_OK);
  ck_assert_str_eq(why, "argument 1 (x) is a pointer, not a float");
  tj_function_destroy(f);
  /* No context, no function; no function, no launch. */
  tj_program *p;
  ck_assert(tj_program_parse(logsoftmax_text, strlen(logsoftmax_text), &p) == TJ_OK);
  tj_function_options o = {.size_param = "n"};
  ck_assert(tj_function_create(NULL, p, &o, &f) != TJ_OK);
  ck_assert_ptr_null(f);
  ck_assert(tj_function_launch(NULL, a, 5, 1, NULL) != TJ_OK);
  ck_assert_int_eq(tj_function_variants(NULL), 0);
  tj_function_destroy(NULL);
  tj_program_destroy(p);
}
END_TEST

START_TEST(wrong_options_are_refused) {
  tj_program *p;
  tj_function *f;
  char why[256];
  ck_assert(tj_program_parse(logsoftmax_text, strlen(logsoftmax_text), &p) == TJ_OK);
  static const struct {
    tj_function_options o;
    const char *message;
  } bad[] = {
      {{.size_param = NULL}, "options: give block or size_param"},
      {{.size_param = "m"},
       "options: size_param 'm' is no i32 or i64 parameter of user_log_softmax"},
      {{.size_param = "x"},
       "options: size_param 'x' is no i32 or i64 parameter of user_log_softmax"},
      {{.block = 64, .dtype = TJ_DTYPE_COUNT},
       "options: unknown dtype or backend, negative warps, block or bindings"},
      {{.block = 64, .binding_count = 1}, "options: unknown dtype or backend, negative warps, "
                                          "block or bindings"},
  };
  /* What only a specialization finds is found at creation, not at launch. */
  static const tj_binding unknown[] = {{"NOPE", 3}};
  tj_function_options warps = {.block = 64, .num_warps = 3};
  ck_assert(rt_function_new(NULL, p, &warps, &f, why, sizeof why) != TJ_OK);
  ck_assert_ptr_null(f);
  ck_assert_msg(strstr(why, "num_warps") != NULL, "%s", why);
  tj_function_options constant = {.block = 64, .bindings = unknown, .binding_count = 1};
  ck_assert(rt_function_new(NULL, p, &constant, &f, why, sizeof why) != TJ_OK);
  ck_assert_msg(strstr(why, "NOPE") != NULL, "%s", why);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ck_assert(rt_function_new(NULL, p, &bad[i].o, &f, why, sizeof why) != TJ_OK);
    ck_assert_ptr_null(f);
    ck_assert_str_eq(why, bad[i].message);
  }
  /* A fixed BLOCK needs no size parameter; n then only masks. */
  tj_function_options fixed = {.block = 64};
  ck_assert(rt_function_new(NULL, p, &fixed, &f, why, sizeof why) == TJ_OK);
  tj_arg a[5];
  int align;
  int64_t block;
  args_of(a, 0x1000, 0x2000, 32, 1000, 7);
  ck_assert(rt_function_select(f, a, 5, &align, &block, why, sizeof why) == TJ_OK);
  ck_assert_int_eq(block, 64);
  tj_function_destroy(f);
  tj_program_destroy(p);
}
END_TEST

/* Whether the variant of a launch is phased. */
static bool phased_of(const tj_function *f, uint64_t y, uint64_t x, int64_t stride, int64_t n) {
  tj_arg a[5];
  int align;
  int64_t block;
  char why[256];
  args_of(a, y, x, stride, n, 7);
  ck_assert_msg(rt_function_select(f, a, 5, &align, &block, why, sizeof why) == TJ_OK, "%s", why);
  return rt_function_phased(f, a, align, block);
}

START_TEST(rows_at_one_phase_are_phased) {
  tj_function *f = function_of(TJ_DTYPE_F32);
  /* Rows of 1000 floats (BLOCK 1024, 4 KiB), x and y one float past 16
   * bytes, rows 1040 floats apart: one phase for all. */
  ck_assert(phased_of(f, 0x1004, 0x2004, 1040, 1000));
  /* ... 1001 apart: every row at its own phase, x's and y's alike. */
  ck_assert(phased_of(f, 0x1004, 0x2004, 1001, 1000));
  ck_assert(phased_of(f, 0x100c, 0x200c, 1040, 1000));
  /* x and y at different phases, aligned rows, and rows under 1 KiB (BLOCK
   * 128): not phased. */
  ck_assert(!phased_of(f, 0x1008, 0x2004, 1040, 1000));
  ck_assert(!phased_of(f, 0x1000, 0x2000, 1040, 1000));
  ck_assert(!phased_of(f, 0x1004, 0x2004, 100, 100));
  tj_function_destroy(f);
  /* 16-bit rows phase from 256 bytes: BLOCK 128 (rows of 100 halves, x
   * and y one half past a line) is phased, BLOCK 64 is not. */
  f = function_of_text(copy_text, TJ_DTYPE_F16);
  ck_assert(phased_of(f, 0x1002, 0x2002, 100, 100));
  ck_assert(phased_of(f, 0x1002, 0x2002, 128, 128));
  ck_assert(!phased_of(f, 0x1002, 0x2002, 64, 64));
  ck_assert(!phased_of(f, 0x1002, 0x2004, 100, 100));
  tj_function_destroy(f);
}
END_TEST

/* The variant that ROWS rows of n floats, stride n, with x and y x_off and
 * y_off floats past a 16-byte line select (ALIGN align, phased or not),
 * specialized with the options the launch would use and run on the PTX
 * simulator over buffers at exactly those addresses: the same values as
 * the interpreter's, every element written. */
static void run_variant(int64_t n, int x_off, int y_off, int align_want, bool phased_want) {
  enum { ROWS = 3, CAPACITY = 1024 };
  tj_function *f = function_of(TJ_DTYPE_F32);
  float *xbuf = aligned_alloc(16, 4 * CAPACITY), *ybuf = aligned_alloc(16, 4 * CAPACITY),
        *want = aligned_alloc(16, 4 * CAPACITY);
  ck_assert(xbuf && ybuf && want && ROWS * n + 4 <= CAPACITY);
  float *x = xbuf + x_off, *y = ybuf + y_off;
  TjRng rng;
  rng_seed(&rng, test_seed(31, 4, (uint64_t)n));
  for (int i = 0; i < ROWS * n; i++) x[i] = (float)(rng_normal(&rng) * 3.0);
  for (int i = 0; i < CAPACITY; i++) ybuf[i] = want[i] = NAN;
  tj_arg a[5];
  args_of(a, (uint64_t)(uintptr_t)y, (uint64_t)(uintptr_t)x, n, n, 7);
  a[0].bytes = a[1].bytes = (size_t)(ROWS * n) * sizeof(float);
  int align;
  int64_t block;
  char why[1024];
  ck_assert(rt_function_select(f, a, 5, &align, &block, why, sizeof why) == TJ_OK);
  ck_assert_int_eq(align, align_want);
  ck_assert_int_eq(block, tj_next_pow2(n));
  bool phased = rt_function_phased(f, a, align, block);
  ck_assert_int_eq(phased, phased_want);
  /* The options the function's own compile makes of the variant. */
  RtVariantKey key = {.align = align, .block = block, .phased = phased};
  tj_spec_options o = rt_variant_options(f, &key);
  ck_assert(o.phased == phased && o.align == align && o.block == block && o.dtype == TJ_DTYPE_F32);
  tj_spec *s;
  ck_assert(tj_specialize(f->prog, &o, &s) == TJ_OK);
  tj_codegen_options co = {90, 0, 0};
  char *ptx;
  ck_assert(tj_emit_ptx(s, &co, &ptx, NULL) == TJ_OK);
  ck_assert_msg(ptxsim_run(ptx, a, 5, ROWS, 2, why, sizeof why), "%s", why);
  a[0].u.ptr = want + y_off;
  ck_assert(tj_interpret(s, a, 5, ROWS) == TJ_OK);
  TjTolerance t = dtype_tolerance(TJ_DTYPE_F32);
  for (int i = 0; i < CAPACITY; i++)
    ck_assert_msg(close_enough(ybuf[i], want[i], t) || (isnan(ybuf[i]) && isnan(want[i])),
                  "n %lld: y[%d] = %g, want %g", (long long)n, i - y_off, ybuf[i], want[i]);
  tj_free(ptx);
  tj_spec_destroy(s);
  tj_function_destroy(f);
  free(xbuf);
  free(ybuf);
  free(want);
}

/* Rows of 31 floats with x one element past a 16-byte line: ALIGN 4, too
 * short to phase; rows of 300 with x and y one past: phased (BLOCK 512),
 * and x and y at different phases: not. */
START_TEST(a_selected_variant_runs_right) {
  run_variant(31, 1, 0, 4, false);
  run_variant(300, 1, 1, 4, true);
  run_variant(300, 3, 3, 4, true);
  run_variant(300, 1, 2, 4, false);
}
END_TEST

Suite *suite(void) {
  Suite *s = suite_create("function");
  TCase *t = tcase_create("select");
  tcase_add_test(t, arguments_select_the_variant);
  tcase_add_test(t, wrong_arguments_are_refused);
  tcase_add_test(t, wrong_options_are_refused);
  tcase_add_test(t, rows_at_one_phase_are_phased);
  tcase_add_test(t, a_selected_variant_runs_right);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  return test_run_suite(suite());
}
