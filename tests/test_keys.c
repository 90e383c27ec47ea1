/*
 * test_keys.c — what a program's text and its specialization key hold.
 *
 * - Every bit of a constant: NaN signs and payloads ("-nan",
 *   "nan:0x7fc00001") and -0 print and read back exactly, from the parser
 *   and the builder; programs that differ only there get different keys and
 *   PTX with each constant's own bits.
 * - One rule for the values of constants, in the builder and the parser
 *   alike (the same verdict, reason and kept value): exact integers of the
 *   range for i32 and i64, f32 values that round to a finite float.
 * - A key is never built from part of the text: every allocation of
 *   tj_specialize is failed in turn (tj_test_fail_allocation), and each run
 *   fails with TJ_ERR_OUT_OF_MEMORY or gives the undisturbed key.
 * - Printing is linear: 100000 nested loops print in well under a second
 *   (indentation stops at 16 levels) and read back; so are building and
 *   specializing them; programs that differ only 60000 loops deep get
 *   different keys.
 */
#include "ir/ir.h"

#include "support.h"
#include "support_text.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Seconds that printing, and building and specializing, 100000 nested loops
 * may take: about a second or less in an optimized build; sanitizers and -O0
 * are several times slower. (Printing took 38 s when every level indented,
 * building 26 s when it was quadratic.) */
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define PRINT_SECONDS 0.5
#define BUILD_SECONDS 3.0
#else
#define PRINT_SECONDS 2.0
#define BUILD_SECONDS 8.0 /* ASan took 3.6 s on a loaded 2-core machine */
#endif

/* ---- every bit of a constant ---------------------------------------------- */

/* f32 constants whose bits a decimal would lose: NaN signs and payloads, -0. */
static const char canon_bits[] = "kernel bits\n"
                                 "%0 : f32 = const nan\n"
                                 "%1 : f32 = const -nan\n"
                                 "%2 : f32 = const nan:0x7fc00001\n"
                                 "%3 : f32 = const nan:0xffc12345\n"
                                 "%4 : f32 = const nan:0x7fffffff\n"
                                 "%5 : f32 = const -0\n"
                                 "%6 : f32 = const 0\n"
                                 "%7 : tile<f32,BLOCK> = const -nan\n"
                                 "%8 : f32 = const 1.401298464324817e-45\n";
static const uint32_t canon_bits_want[] = {0x7fc00000, 0xffc00000, 0x7fc00001,
                                           0xffc12345, 0x7fffffff, 0x80000000,
                                           0x00000000, 0xffc00000, 0x00000001};

static uint32_t f32_bits(double v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static double double_of_bits(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

/* "kernel k\n%0 : f32 = const VALUE\n" printed back. */
static char *print_one_const(const char *value) {
  char text[128];
  snprintf(text, sizeof text, "kernel k\n%%0 : f32 = const %s\n", value);
  tj_program *p = text_parse_ok(text);
  char *printed = text_print_ok(p);
  tj_program_destroy(p);
  return printed;
}

START_TEST(float_constants_keep_every_bit) {
  char *canonical = text_round_trip(canon_bits);
  ck_assert_str_eq(canonical, canon_bits); /* it comes back byte for byte */
  tj_free(canonical);
  tj_program *p = text_parse_ok(canon_bits);
  for (size_t i = 0; i < TJ_COUNTOF(canon_bits_want); i++)
    ck_assert_msg(f32_bits(p->insts[i].fimm) == canon_bits_want[i], "const %zu: 0x%08lx", i,
                  (unsigned long)f32_bits(p->insts[i].fimm));
  tj_program_destroy(p);
  /* Other spellings of the same bits print the canonical one. */
  const char *spellings[][2] = {{"nan:0x7fc00000", "nan"},
                                {"nan:0XFFC00000", "-nan"},
                                {"+nan", "nan"},
                                {"nan:0x7FC00001", "nan:0x7fc00001"},
                                {"-0.0", "-0"},
                                {"-0e5", "-0"}};
  for (size_t i = 0; i < TJ_COUNTOF(spellings); i++) {
    char want[128], *got = print_one_const(spellings[i][0]);
    snprintf(want, sizeof want, "kernel k\n%%0 : f32 = const %s\n", spellings[i][1]);
    ck_assert_str_eq(got, want);
    tj_free(got);
  }
  /* The builder keeps a NaN's sign and the payload bits an f32 has. */
  const double built[] = {-NAN, double_of_bits(0x7ff8000020000000ull),
                          double_of_bits(0xfff8000000000000ull), -0.0};
  ck_assert_int_eq(tj_program_create("built", &p), TJ_OK);
  for (size_t i = 0; i < TJ_COUNTOF(built); i++) {
    tj_value v;
    ck_assert_int_eq(tj_build_const(p, tj_scalar_type(TJ_F32), built[i], &v), TJ_OK);
  }
  char *text = text_print_ok(p);
  ck_assert_str_eq(text, "kernel built\n"
                         "%0 : f32 = const -nan\n"
                         "%1 : f32 = const nan:0x7fc00001\n"
                         "%2 : f32 = const -nan\n"
                         "%3 : f32 = const -0\n");
  tj_free(text);
  tj_program_destroy(p);
}
END_TEST

/* A spec of "store CONST to y" for one spelling of the constant. */
static tj_spec *store_const_spec(const char *value) {
  char text[256];
  snprintf(text, sizeof text,
           "kernel k\n%%y : ptr<f32> = param y\n%%i : tile<i32,BLOCK> = arange\n"
           "%%c : f32 = const %s\nstore %%y, %%i, %%c\n",
           value);
  tj_program *p = text_parse_ok(text);
  tj_spec_options o = {.n = 64, .dtype = TJ_DTYPE_F32};
  tj_spec *s = NULL;
  ck_assert_msg(tj_specialize(p, &o, &s) == TJ_OK, "%s", tj_program_error(p));
  tj_program_destroy(p);
  return s;
}

/* Programs that differ only in a constant's bits get different keys, and
 * the PTX, which differs, holds each constant's own bits. */
START_TEST(keys_differ_for_constants_that_differ_in_bits) {
  const char *values[] = {"nan", "-nan", "nan:0x7fc00001", "0", "-0"};
  const char *ptx_bits[] = {"0f7FC00000", "0fFFC00000", "0f7FC00001", "0f00000000", "0f80000000"};
  enum { COUNT = TJ_COUNTOF(values) };
  tj_spec *specs[COUNT];
  for (int i = 0; i < COUNT; i++) {
    specs[i] = store_const_spec(values[i]);
    char *ptx = NULL;
    ck_assert_int_eq(tj_emit_ptx(specs[i], NULL, &ptx, NULL), TJ_OK);
    ck_assert_msg(strstr(ptx, ptx_bits[i]), "const %s: no %s in the PTX", values[i], ptx_bits[i]);
    tj_free(ptx);
  }
  for (int i = 0; i < COUNT; i++)
    for (int j = i + 1; j < COUNT; j++) {
      ck_assert_msg(strcmp(tj_spec_key(specs[i]), tj_spec_key(specs[j])) != 0,
                    "const %s and const %s share the key %s", values[i], values[j],
                    tj_spec_key(specs[i]));
      ck_assert_uint_ne(tj_spec_hash(specs[i]), tj_spec_hash(specs[j]));
    }
  for (int i = 0; i < COUNT; i++) tj_spec_destroy(specs[i]);
}
END_TEST

/* ---- keys and deep nests ---------------------------------------------------- */

/* Every allocation tj_specialize makes, failed one at a time: each run
 * either fails with TJ_ERR_OUT_OF_MEMORY and no spec, or succeeds with the
 * key of an undisturbed run; never a spec with a key built from part of
 * the program's text. */
START_TEST(specialize_never_keys_a_truncated_text) {
  const char *sources[] = {tj_template_softmax, canon_bits};
  for (size_t k = 0; k < TJ_COUNTOF(sources); k++) {
    tj_program *p = text_parse_ok(sources[k]);
    tj_spec_options o = {.n = 1000, .dtype = TJ_DTYPE_F32};
    tj_spec *ref = NULL;
    ck_assert_int_eq(tj_specialize(p, &o, &ref), TJ_OK);
    int failed = 0;
    for (long n = 1;; n++) {
      tj_spec *s = NULL;
      tj_test_fail_allocation(n);
      tj_status st = tj_specialize(p, &o, &s);
      bool injected = tj_test_fail_allocation(0) == 0;
      if (st == TJ_OK) {
        ck_assert_str_eq(tj_spec_key(s), tj_spec_key(ref));
        ck_assert_uint_eq(tj_spec_hash(s), tj_spec_hash(ref));
      } else {
        ck_assert_msg(st == TJ_ERR_OUT_OF_MEMORY, "allocation %ld: %s: %s", n, tj_status_string(st),
                      tj_program_error(p));
        ck_assert_ptr_null(s);
        ck_assert_ptr_nonnull(strstr(tj_program_error(p), "out of memory"));
        failed++;
      }
      tj_spec_destroy(s);
      if (!injected) break; /* every allocation has been failed once */
    }
    ck_assert_int_gt(failed, 10);
    tj_spec_destroy(ref);
    tj_program_destroy(p);
  }
}
END_TEST

static double seconds_now(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* depth nested loops over i32 0..0, with `const VALUE` in the innermost;
 * chained: each loop's bounds are the counter of the loop around it. */
static tj_program *nest_of(int depth, double value, bool chained) {
  tj_program *p;
  tj_value zero, loop, v;
  ck_assert_int_eq(tj_program_create("nest", &p), TJ_OK);
  ck_assert_int_eq(tj_build_const(p, tj_scalar_type(TJ_I32), 0, &zero), TJ_OK);
  tj_value bounds[3] = {zero, zero, zero};
  for (int i = 0; i < depth; i++) {
    ck_assert_int_eq(tj_build(p, TJ_OP_FOR, bounds, 3, &loop), TJ_OK);
    if (chained) bounds[0] = bounds[1] = bounds[2] = loop;
  }
  ck_assert_int_eq(tj_build_const(p, tj_scalar_type(TJ_F32), value, &v), TJ_OK);
  for (int i = 0; i < depth; i++) ck_assert_int_eq(tj_build(p, TJ_OP_ENDFOR, NULL, 0, NULL), TJ_OK);
  return p;
}

static tj_program *nest(int depth, double value) { return nest_of(depth, value, false); }

/* Printing is linear in the program: indentation stops growing at 16
 * levels, and 100000 nested loops print in well under a second (it took
 * 38 s and 4.2 GB when every level indented). */
START_TEST(deep_nests_print_in_linear_time) {
  enum { DEPTH = 100000 };
  tj_program *p = nest(DEPTH, 1.0);
  double start = seconds_now();
  char *text = text_print_ok(p);
  double took = seconds_now() - start;
  ck_assert_msg(took < PRINT_SECONDS, "printing %d nested loops took %.2f s", DEPTH, took);
  ck_assert_uint_lt(strlen(text), (size_t)DEPTH * 2 * 64);
  ck_assert_ptr_nonnull(
      strstr(text, "\n                                %17 : i32 = for %0, %0, %0\n"));
  ck_assert_ptr_nonnull(
      strstr(text, "\n                                %100001 : f32 = const 1\n"));
  ck_assert_ptr_nonnull(strstr(text, "\n  endfor\nendfor\n"));
  tj_free(text_round_trip(text)); /* and reads back exactly */
  tj_free(text);
  tj_program_destroy(p);
}
END_TEST

/* Building, verifying and specializing are linear too: with each of 100000
 * nested loops using the counter of the one around it, checking that an
 * operand's loop is still open took time in the depth (26 s in all). */
START_TEST(deep_chained_nests_build_and_specialize_in_linear_time) {
  enum { DEPTH = 100000 };
  double start = seconds_now();
  tj_program *p = nest_of(DEPTH, 1.0, true);
  tj_spec_options o = {.n = 8};
  tj_spec *s = NULL;
  ck_assert_msg(tj_specialize(p, &o, &s) == TJ_OK, "%s", tj_program_error(p));
  double took = seconds_now() - start;
  ck_assert_msg(took < BUILD_SECONDS, "building and specializing took %.2f s", took);
  tj_spec_destroy(s);
  /* Past its loop, a counter is out of scope, at any depth. */
  tj_value late = ir_value_handle(p, 1), v;
  ck_assert_int_eq(tj_build(p, TJ_OP_NEG, &late, 1, &v), TJ_ERR_VERIFY);
  ck_assert_str_eq(tj_program_error(p),
                   "neg: operand 1 (%1) is defined inside a loop that has ended");
  tj_program_destroy(p);
}
END_TEST

/* Two programs that differ only in a constant 60000 loops deep. */
START_TEST(keys_differ_deep_in_a_nest) {
  enum { DEPTH = 60000 };
  tj_program *a = nest(DEPTH, 1.0), *b = nest(DEPTH, 2.0);
  tj_spec_options o = {.n = 64, .dtype = TJ_DTYPE_F32};
  tj_spec *sa = NULL, *sb = NULL;
  ck_assert_msg(tj_specialize(a, &o, &sa) == TJ_OK, "%s", tj_program_error(a));
  ck_assert_msg(tj_specialize(b, &o, &sb) == TJ_OK, "%s", tj_program_error(b));
  ck_assert_str_ne(tj_spec_key(sa), tj_spec_key(sb));
  ck_assert_uint_ne(tj_spec_hash(sa), tj_spec_hash(sb));
  tj_spec_destroy(sa);
  tj_spec_destroy(sb);
  tj_program_destroy(a);
  tj_program_destroy(b);
}
END_TEST

/* ---- one rule for the values of constants ---------------------------------- */

/* One rule for the values of constants, in the parser and the builder
 * alike: same verdict, same reason, same value kept. */
typedef struct ConstCase {
  tj_elem elem;
  const char *text;
  double value;       /* what the builder is given: the text's exact value */
  const char *reason; /* NULL: accepted */
  double kept;        /* accepted: the value the program keeps */
} ConstCase;

static const ConstCase const_cases[] = {
    {TJ_I32, "0.5", 0.5, "is not a value of i32", 0},
    {TJ_I32, "3e9", 3e9, "is not a value of i32", 0},
    {TJ_I32, "2147483648", 2147483648.0, "is not a value of i32", 0},
    {TJ_I32, "2147483647", 2147483647.0, NULL, 2147483647.0},
    {TJ_I32, "-2147483648", -2147483648.0, NULL, -2147483648.0},
    {TJ_I32, "1.5e3", 1500, NULL, 1500},
    {TJ_I32, "-0", -0.0, NULL, 0.0},
    {TJ_I32, "inf", INFINITY, "is not a value of i32", 0},
    {TJ_I64, "9223372036854775808", 0x1p63, "is not a value of i64", 0},
    {TJ_I64, "-9223372036854775808", -0x1p63, NULL, -0x1p63},
    {TJ_I64, "nan", NAN, "is not a value of i64", 0},
    {TJ_F32, "1e300", 1e300, "is out of range for f32", 0},
    {TJ_F32, "-3.5e38", -3.5e38, "is out of range for f32", 0},
    {TJ_F32, "3.4028235e38", 3.4028235e38, NULL, 3.4028234663852886e38},
    {TJ_F32, "-inf", -INFINITY, NULL, -INFINITY},
    {TJ_F32, "1e-50", 1e-50, NULL, 0.0},
    {TJ_F32, "0.1", 0.1, NULL, (double)0.1f},
};

START_TEST(const_values_follow_one_rule) {
  const ConstCase *c = &const_cases[_i];
  char text[128];
  snprintf(text, sizeof text, "kernel k\n%%0 : %s = const %s\n", ir_elem_name(c->elem), c->text);
  tj_program *parsed = NULL, *built = NULL;
  tj_value v;
  tj_status ps = text_parse_exact(text, strlen(text), &parsed);
  ck_assert_int_eq(tj_program_create("k", &built), TJ_OK);
  tj_status bs = tj_build_const(built, tj_scalar_type(c->elem), c->value, &v);
  if (c->reason) {
    char want[128];
    snprintf(want, sizeof want, "2:18: const: %s %s", c->text, c->reason);
    ck_assert_int_eq(ps, TJ_ERR_TYPE);
    ck_assert_str_eq(tj_program_error(parsed), want);
    ck_assert_int_eq(bs, TJ_ERR_TYPE);
    ck_assert_msg(strstr(tj_program_error(built), c->reason), "%s", tj_program_error(built));
    ck_assert_int_eq(built->ninsts, 0);
  } else {
    ck_assert_msg(ps == TJ_OK, "%s: %s", c->text, tj_program_error(parsed));
    ck_assert_msg(bs == TJ_OK, "%s: %s", c->text, tj_program_error(built));
    ck_assert(memcmp(&parsed->insts[0].fimm, &c->kept, sizeof c->kept) == 0);
    ck_assert(memcmp(&built->insts[0].fimm, &c->kept, sizeof c->kept) == 0);
  }
  tj_program_destroy(parsed);
  tj_program_destroy(built);
}
END_TEST

static Suite *keys_suite(void) {
  Suite *s = suite_create("keys");
  TCase *bits = tcase_create("bits");
  tcase_add_test(bits, float_constants_keep_every_bit);
  tcase_add_test(bits, keys_differ_for_constants_that_differ_in_bits);
  tcase_add_loop_test(bits, const_values_follow_one_rule, 0, (int)TJ_COUNTOF(const_cases));
  suite_add_tcase(s, bits);
  TCase *keys = tcase_create("keys");
  tcase_set_timeout(keys, 60);
  tcase_add_test(keys, specialize_never_keys_a_truncated_text);
  tcase_add_test(keys, deep_nests_print_in_linear_time);
  tcase_add_test(keys, keys_differ_deep_in_a_nest);
  tcase_add_test(keys, deep_chained_nests_build_and_specialize_in_linear_time);
  suite_add_tcase(s, keys);
  return s;
}

int main(void) { return test_run_suite(keys_suite()); }
