/*
 * gpu_function.c — JIT functions on the GPU: a user's log-softmax (the
 * embedding scenario's program) created once and launched on rows of
 * several widths, strides and alignments. Each launch compiles the variant
 * its arguments select at most once (counted), and every output element is
 * checked against a float64 reference, with a poisoned guard after the
 * rows. A launch with wrong arguments is refused and the function and
 * context keep working; threads launching a new variant at once get one
 * compile and right rows. Exit 77 without a GPU.
 */
#include "support.h"
#include "support_gpu.h"
#include "support_logsoftmax.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 64, MAX_STRIDE = 1040, GUARD = 16 };
#define CAPACITY (ROWS * MAX_STRIDE + GUARD + 4)

typedef struct Fixture {
  tj_context *ctx;
  tj_function *f;
  uint64_t x, y;
  float host[CAPACITY];
} Fixture;

static void setup(Fixture *fx) {
  fx->ctx = gpu_context(NULL);
  tj_program *p;
  ck_assert(tj_program_parse(logsoftmax_text, strlen(logsoftmax_text), &p) == TJ_OK);
  tj_function_options o = {.dtype = TJ_DTYPE_F32, .size_param = "n"};
  ck_assert_msg(tj_function_create(fx->ctx, p, &o, &fx->f) == TJ_OK, "%s",
                tj_context_error(fx->ctx));
  tj_program_destroy(p); /* the function holds a copy */
  ck_assert_int_eq(tj_device_alloc(fx->ctx, sizeof fx->host, &fx->x), TJ_OK);
  ck_assert_int_eq(tj_device_alloc(fx->ctx, sizeof fx->host, &fx->y), TJ_OK);
  TjRng rng;
  rng_seed(&rng, test_seed(7, 31, 1040));
  for (int i = 0; i < CAPACITY; i++) fx->host[i] = (float)(rng_normal(&rng) * 3.0);
  ck_assert_int_eq(tj_copy_to_device(fx->ctx, fx->x, fx->host, sizeof fx->host), TJ_OK);
}

static void teardown(Fixture *fx) {
  tj_device_free(fx->ctx, fx->x);
  tj_device_free(fx->ctx, fx->y);
  tj_function_destroy(fx->f);
  tj_context_destroy(fx->ctx);
}

/* Launches rows of n, stride apart, x x_off and y y_off floats into their
 * buffers, on stream; checks every element and that the guard after the
 * last row is untouched. */
static void run_rows_at(Fixture *fx, int64_t n, int64_t stride, int x_off, int y_off,
                        void *stream) {
  static float out[CAPACITY];
  for (int i = 0; i < CAPACITY; i++) out[i] = NAN;
  ck_assert_int_eq(tj_copy_to_device(fx->ctx, fx->y, out, sizeof out), TJ_OK);
  tj_arg args[5] = {{TJ_ARG_PTR, {.ptr = (void *)(uintptr_t)(fx->y + 4u * y_off)}, 0},
                    {TJ_ARG_PTR, {.ptr = (void *)(uintptr_t)(fx->x + 4u * x_off)}, 0},
                    {TJ_ARG_INT, {.i = stride}, 0},
                    {TJ_ARG_INT, {.i = n}, 0},
                    {TJ_ARG_INT, {.i = 3}, 0}};
  ck_assert_msg(tj_function_launch(fx->f, args, 5, ROWS, stream) == TJ_OK, "n %lld: %s",
                (long long)n, tj_context_error(fx->ctx));
  ck_assert_int_eq(tj_context_synchronize(fx->ctx), TJ_OK);
  ck_assert_int_eq(tj_copy_to_host(fx->ctx, out, fx->y, sizeof out), TJ_OK);
  const float *x = fx->host + x_off, *y = out + y_off;
  for (int r = 0; r < ROWS; r++) {
    double max = -INFINITY, sum = 0;
    for (int c = 0; c < n; c++) max = fmax(max, x[r * stride + c]);
    for (int c = 0; c < n; c++) sum += exp(x[r * stride + c] - max);
    for (int c = 0; c < n; c++) {
      double want = x[r * stride + c] - max - log(sum), got = y[r * stride + c];
      ck_assert_msg(fabs(got - want) <= 1e-5 + 1.3e-6 * fabs(want),
                    "n %lld stride %lld offsets %d, %d: row %d col %d: %.9g, want %.9g",
                    (long long)n, (long long)stride, x_off, y_off, r, c, got, want);
    }
  }
  for (int g = 0; g < GUARD; g++)
    ck_assert_msg(isnan(y[(ROWS - 1) * stride + n + g]), "n %lld: the guard's %d written",
                  (long long)n, g);
}

static void run_rows(Fixture *fx, int64_t n, int64_t stride, int offset, void *stream) {
  run_rows_at(fx, n, stride, offset, offset, stream);
}

START_TEST(each_variant_compiles_once_and_runs_right) {
  Fixture *fx = calloc(1, sizeof *fx);
  ck_assert(fx);
  setup(fx);
  run_rows(fx, 32, 32, 0, NULL); /* ALIGN 16, BLOCK 32, n a multiple of 4: DIV 4 */
  ck_assert_int_eq(tj_function_variants(fx->f), 1);
  run_rows(fx, 31, 32, 0, NULL); /* BLOCK 32, 128-byte rows, n no multiple of 4: DIV 1 */
  ck_assert_int_eq(tj_function_variants(fx->f), 2);
  run_rows(fx, 30, 32, 0, NULL); /* the same variant */
  run_rows(fx, 28, 32, 0, NULL); /* and DIV 4's */
  ck_assert_int_eq(tj_function_variants(fx->f), 2);
  run_rows(fx, 31, 31, 0, NULL); /* 124-byte rows: ALIGN 4 */
  ck_assert_int_eq(tj_function_variants(fx->f), 3);
  run_rows(fx, 1000, 1040, 1, NULL); /* x and y one float past 16 bytes: ALIGN 4, BLOCK 1024,
                                        phased */
  ck_assert_int_eq(tj_function_variants(fx->f), 4);
  run_rows(fx, 1000, 1040, 2, NULL); /* ALIGN 8, DIV 2 */
  run_rows(fx, 1000, 1040, 0, NULL); /* ALIGN 16, DIV 4 */
  run_rows(fx, 1, 1, 0, NULL);
  ck_assert_int_eq(tj_function_variants(fx->f), 7);
  run_rows_at(fx, 1000, 1040, 1, 3, NULL); /* x and y at two phases: ALIGN 4, not phased */
  ck_assert_int_eq(tj_function_variants(fx->f), 8);
  run_rows(fx, 1000, 1001, 3, NULL); /* a phase a row, x's and y's alike: the phased one */
  ck_assert_int_eq(tj_function_variants(fx->f), 8);
  run_rows(fx, 31, 31, 0, NULL);
  ck_assert_int_eq(tj_function_variants(fx->f), 8);
  teardown(fx);
  free(fx);
}
END_TEST

START_TEST(wrong_launches_are_refused_and_it_keeps_working) {
  Fixture *fx = calloc(1, sizeof *fx);
  ck_assert(fx);
  setup(fx);
  tj_arg args[5] = {{TJ_ARG_PTR, {.ptr = (void *)(uintptr_t)fx->y}, 0},
                    {TJ_ARG_PTR, {.ptr = (void *)(uintptr_t)(fx->x + 2)}, 0},
                    {TJ_ARG_INT, {.i = 32}, 0},
                    {TJ_ARG_INT, {.i = 32}, 0},
                    {TJ_ARG_INT, {.i = 0}, 0}};
  ck_assert_int_eq(tj_function_launch(fx->f, args, 5, ROWS, NULL), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(tj_context_error(fx->ctx), "is not aligned to its 4-byte elements"));
  ck_assert_int_eq(tj_function_launch(fx->f, args, 4, ROWS, NULL), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(tj_context_error(fx->ctx), "takes 5 arguments, got 4"));
  args[1].u.ptr = (void *)(uintptr_t)fx->x;
  ck_assert_int_eq(tj_function_launch(fx->f, args, 5, -1, NULL), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_function_variants(fx->f), 1); /* the last selected, then refused */
  run_rows(fx, 32, 32, 0, NULL);
  teardown(fx);
  free(fx);
}
END_TEST

typedef struct Racer {
  Fixture *fx;
  tj_status status;
} Racer;

static void *race(void *arg) {
  Racer *r = arg;
  Fixture *fx = r->fx;
  tj_arg args[5] = {{TJ_ARG_PTR, {.ptr = (void *)(uintptr_t)fx->y}, 0},
                    {TJ_ARG_PTR, {.ptr = (void *)(uintptr_t)fx->x}, 0},
                    {TJ_ARG_INT, {.i = 520}, 0},
                    {TJ_ARG_INT, {.i = 513}, 0},
                    {TJ_ARG_INT, {.i = 0}, 0}};
  r->status = tj_function_launch(fx->f, args, 5, ROWS, NULL);
  return NULL;
}

/* Four threads launch one new variant at once (ALIGN 16, BLOCK 1024): one
 * variant, and the rows are right. */
START_TEST(threads_share_a_new_variant) {
  Fixture *fx = calloc(1, sizeof *fx);
  ck_assert(fx);
  setup(fx);
  enum { THREADS = 4 };
  pthread_t t[THREADS];
  Racer r[THREADS];
  for (int i = 0; i < THREADS; i++) {
    r[i] = (Racer){fx, TJ_OK};
    ck_assert_int_eq(pthread_create(&t[i], NULL, race, &r[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(t[i], NULL);
    ck_assert_msg(r[i].status == TJ_OK, "%s", tj_context_error(fx->ctx));
  }
  ck_assert_int_eq(tj_function_variants(fx->f), 1);
  run_rows(fx, 513, 520, 0, NULL);
  ck_assert_int_eq(tj_function_variants(fx->f), 1);
  teardown(fx);
  free(fx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("gpu_function");
  TCase *t = tcase_create("function");
  tcase_set_timeout(t, 300);
  tcase_add_test(t, each_variant_compiles_once_and_runs_right);
  tcase_add_test(t, wrong_launches_are_refused_and_it_keeps_working);
  tcase_add_test(t, threads_share_a_new_variant);
  suite_add_tcase(s, t);
  return gpu_main(s);
}
