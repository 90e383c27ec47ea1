/*
 * test_launch_checks.c — tj_launch's checks of a launch's arguments against
 * what the kernel's specialization assumed (runtime/assume.c), without a
 * GPU: the assumptions derived from specs, and the check tj_launch runs
 * before anything is launched, on the embedding scenario (a user's
 * log-softmax specialized with align = 16, launched on rows of 31 floats),
 * and DIV (tj_spec_options.multiple), which holds every i32 argument.
 * The GPU half, where the refused launch leaves the context working, is in
 * gpu_errors.c.
 */
#include "runtime/runtime.h"
#include "support.h"
#include "support_logsoftmax.h"

#include <check.h>
#include <string.h>

static tj_spec *spec_div(int align, int phased, int multiple, tj_program **p) {
  tj_spec *s;
  ck_assert_msg(tj_program_parse(logsoftmax_text, strlen(logsoftmax_text), p) == TJ_OK, "%s",
                tj_program_error(*p));
  tj_spec_options o = {
      .n = 31, .dtype = TJ_DTYPE_F32, .align = align, .phased = phased, .multiple = multiple};
  ck_assert_msg(tj_specialize(*p, &o, &s) == TJ_OK, "%s", tj_program_error(*p));
  return s;
}

static tj_spec *spec_of(int align, int phased, tj_program **p) {
  return spec_div(align, phased, 0, p);
}

/* y, x, stride, n = 31, tag */
static void args_of(tj_arg *a, uint64_t y, uint64_t x, int64_t stride, int64_t tag) {
  a[0] = (tj_arg){TJ_ARG_INT, {.i = (int64_t)y}, 0};
  a[1] = (tj_arg){TJ_ARG_PTR, {.ptr = (void *)(uintptr_t)x}, 0};
  a[2] = (tj_arg){TJ_ARG_INT, {.i = stride}, 0};
  a[3] = (tj_arg){TJ_ARG_INT, {.i = 31}, 0};
  a[4] = (tj_arg){TJ_ARG_INT, {.i = tag}, 0};
}

static tj_status check(const RtAssume *a, uint64_t y, uint64_t x, int64_t stride, int64_t tag,
                       char *why) {
  tj_arg args[5];
  args_of(args, y, x, stride, tag);
  why[0] = '\0';
  return rt_assume_check(a, args, 5, why, 512);
}

START_TEST(align_16_assumes_aligned_rows) {
  tj_program *p;
  tj_spec *s = spec_of(16, 0, &p);
  RtAssume a;
  rt_assume_from_spec(s, &a);
  char why[512];
  /* Pointers 16-byte aligned; the stride that reaches addresses a multiple
   * of 16 / 4 elements; n (i32) and tag (reaches no address) free. */
  ck_assert_uint_eq(a.mask[0], 15);
  ck_assert_uint_eq(a.mask[1], 15);
  ck_assert_uint_eq(a.mask[2], 3);
  ck_assert_uint_eq(a.mask[3], 0);
  ck_assert_uint_eq(a.mask[4], 0);
  ck_assert_int_eq(check(&a, 0x20000, 0x10000, 32, 3, why), TJ_OK);
  /* The scenario: rows of 31 floats, a 124-byte stride. */
  ck_assert_int_eq(check(&a, 0x20000, 0x10000, 31, 0, why), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_msg(strstr(why, "argument 2 (stride) = 31") && strstr(why, "multiple of 4 elements") &&
                    strstr(why, "ALIGN = 16"),
                "%s", why);
  ck_assert_int_eq(check(&a, 0x20000, 0x10004, 32, 0, why), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_msg(strstr(why, "argument 1 (x) = 0x10004") && strstr(why, "16-byte aligned"), "%s",
                why);
  ck_assert_int_eq(check(&a, 0x20008, 0x10000, 32, 0, why), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_msg(strstr(why, "argument 0 (y)"), "%s", why);
  tj_spec_destroy(s);
  tj_program_destroy(p);
}
END_TEST

START_TEST(smaller_align_and_phased_assume_less) {
  for (int phased = 0; phased < 2; phased++) {
    tj_program *p;
    tj_spec *s = spec_of(4, phased, &p);
    RtAssume a;
    rt_assume_from_spec(s, &a);
    char why[512];
    ck_assert_int_eq(check(&a, 0x20004, 0x10008, 31, 0, why), TJ_OK);
    ck_assert_int_eq(check(&a, 0x20000, 0x10002, 31, 0, why), TJ_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(why, "argument 1 (x)") && strstr(why, "4-byte aligned"), "%s", why);
    tj_spec_destroy(s);
    tj_program_destroy(p);
  }
}
END_TEST

/* A kernel with no assumptions (tj_load_ptx's) checks nothing. */
START_TEST(no_assumptions_check_nothing) {
  RtAssume a;
  memset(&a, 0, sizeof a);
  char why[512];
  ck_assert_int_eq(check(&a, 1, 3, 7, 9, why), TJ_OK);
}
END_TEST

/* An i64 that reaches an address only through a loop-carried value is
 * still held to the assumption. */
START_TEST(offsets_through_a_loop_are_found) {
  static const char text[] = "kernel looped\n"
                             "%0 : ptr<f32> = param y\n"
                             "%1 : i64 = param step\n"
                             "%2 : i64 = param other\n"
                             "%3 : i32 = const 0\n"
                             "%4 : i32 = const 3\n"
                             "%5 : i32 = const 1\n"
                             "%6 : i64 = const 0\n"
                             "%7 : i32 = for %3, %4, %5\n"
                             "%8 : i64 = iter %6\n"
                             "%9 : i64 = add %8, %1\n"
                             "yield %8, %9\n"
                             "endfor\n"
                             "%10 : ptr<f32> = ptr_add %0, %8\n"
                             "%11 : tile<i32,BLOCK> = arange\n"
                             "%12 : f32 = cast %2\n"
                             "store %10, %11, %12\n";
  tj_program *p;
  tj_spec *s;
  ck_assert_msg(tj_program_parse(text, strlen(text), &p) == TJ_OK, "%s", tj_program_error(p));
  tj_spec_options o = {.n = 64, .dtype = TJ_DTYPE_F32, .align = 16};
  ck_assert_msg(tj_specialize(p, &o, &s) == TJ_OK, "%s", tj_program_error(p));
  RtAssume a;
  rt_assume_from_spec(s, &a);
  ck_assert_uint_eq(a.mask[1], 3); /* step: through the iter */
  ck_assert_uint_eq(a.mask[2], 0); /* other: data only */
  tj_spec_destroy(s);
  tj_program_destroy(p);
}
END_TEST

/* DIV = 4: n (the i32) must be a multiple of 4, the i64 tag stays free;
 * the multiple a launch allows is the vector's elements at its ALIGN where
 * n is theirs, else 1; the key and the PTX's header name it. */
START_TEST(div_holds_every_i32_argument) {
  tj_program *p, *q;
  tj_spec *s = spec_div(16, 0, 4, &p), *plain = spec_of(16, 0, &q);
  RtAssume a, free_n;
  rt_assume_from_spec(s, &a);
  rt_assume_from_spec(plain, &free_n);
  ck_assert_uint_eq(a.mask[3], 3);
  ck_assert_uint_eq(a.mask[4], 0);
  ck_assert_uint_eq(free_n.mask[3], 0);
  tj_arg args[5];
  args_of(args, 0x20000, 0x10000, 32, 5);
  char why[512] = "";
  ck_assert_int_eq(rt_assume_check(&a, args, 5, why, sizeof why), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_msg(strstr(why, "argument 3 (n) = 31") && strstr(why, "multiple of 4") &&
                    strstr(why, "DIV = 4"),
                "%s", why);
  ck_assert_int_eq(rt_assume_check(&free_n, args, 5, why, sizeof why), TJ_OK);
  ck_assert_int_eq(rt_assume_multiple(&free_n, args, 5, 16), 1); /* 31 */
  args[3].u.i = 32;
  ck_assert_int_eq(rt_assume_check(&a, args, 5, why, sizeof why), TJ_OK);
  ck_assert_int_eq(rt_assume_multiple(&free_n, args, 5, 16), 4);
  ck_assert_int_eq(rt_assume_multiple(&free_n, args, 5, 8), 2);
  ck_assert_int_eq(rt_assume_multiple(&free_n, args, 5, 4), 1);
  args[3].u.i = 1000; /* 4 x 250 */
  ck_assert_int_eq(rt_assume_multiple(&free_n, args, 5, 16), 4);
  args[3].u.i = 1002;
  ck_assert_int_eq(rt_assume_multiple(&free_n, args, 5, 16), 1);
  ck_assert_int_eq(rt_size_multiple(1000, 16, 4), 4);
  ck_assert_int_eq(rt_size_multiple(1000, 16, 2), 8);
  ck_assert_int_eq(rt_size_multiple(1004, 16, 2), 1);
  ck_assert_int_eq(rt_size_multiple(1000, 2, 2), 1);
  ck_assert_ptr_nonnull(strstr(tj_spec_key(s), "|DIV=4"));
  ck_assert_ptr_null(strstr(tj_spec_key(plain), "DIV"));
  tj_spec_destroy(s);
  tj_spec_destroy(plain);
  tj_program_destroy(p);
  tj_program_destroy(q);
}
END_TEST

/* DIV is 1, 2, 4, 8 or 16. */
START_TEST(div_is_a_power_of_two_up_to_16) {
  static const int bad[] = {3, 6, 32, -4};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tj_program *p;
    tj_spec *s = NULL;
    ck_assert_int_eq(tj_program_parse(logsoftmax_text, strlen(logsoftmax_text), &p), TJ_OK);
    tj_spec_options o = {.n = 31, .dtype = TJ_DTYPE_F32, .align = 16, .multiple = bad[i]};
    ck_assert_int_eq(tj_specialize(p, &o, &s), TJ_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(tj_program_error(p), "multiple"), "%s", tj_program_error(p));
    tj_program_destroy(p);
  }
}
END_TEST

Suite *suite(void) {
  Suite *s = suite_create("launch_checks");
  TCase *t = tcase_create("assume");
  tcase_add_test(t, align_16_assumes_aligned_rows);
  tcase_add_test(t, smaller_align_and_phased_assume_less);
  tcase_add_test(t, no_assumptions_check_nothing);
  tcase_add_test(t, offsets_through_a_loop_are_found);
  tcase_add_test(t, div_holds_every_i32_argument);
  tcase_add_test(t, div_is_a_power_of_two_up_to_16);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  return test_run_suite(suite());
}
