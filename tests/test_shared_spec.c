/*
 * test_shared_spec.c — one spec, and the program it came from, shared by
 * many threads. A spec never changes after tj_specialize made it, and a call
 * that succeeds writes nothing to the handle it was given, not even its
 * message. So THREADS threads that each emit PTX and CUDA C, interpret, print
 * and read the key of one spec, and specialize its program again, all at
 * once, must each get what one thread alone gets; and ThreadSanitizer (the
 * tsan preset, which CI runs) must see no race.
 *
 * Also, single-threaded: a successful call leaves the message of an earlier
 * failure as it was, on specs and on programs.
 */
#define _POSIX_C_SOURCE 200809L

#include "ir/ir.h"

#include "support.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 8
#define ROUNDS  10
#define ROWS    4
#define WIDTH   100

/* What one thread alone gets from the shared handles. */
typedef struct Expected {
  char *ptx, *cuda, *text, *key;
  uint64_t hash;
  float y[ROWS * WIDTH];
} Expected;

typedef struct Shared {
  tj_program *program;
  tj_spec *spec;
  tj_spec_options options;
  const float *x;
  Expected want;
  pthread_barrier_t start;
} Shared;

typedef struct Worker {
  Shared *shared;
  pthread_t thread;
  char failure[256]; /* "" if every round matched */
} Worker;

static tj_program *softmax_program(tj_spec_options *o) {
  tj_program *p = NULL;
  ck_assert_int_eq(tj_softmax_program(TJ_SOFTMAX_SINGLE, WIDTH, &p), TJ_OK);
  ck_assert_int_eq(softmax_spec_options(TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, ROWS, WIDTH, 0, 0, o), TJ_OK);
  return p;
}

static tj_status interpret(tj_spec *s, const float *x, float *y) {
  tj_arg args[5] = {{TJ_ARG_PTR, {.ptr = y}, sizeof(float) * ROWS * WIDTH},
                    {TJ_ARG_PTR, {.ptr = (void *)(uintptr_t)x}, sizeof(float) * ROWS * WIDTH},
                    {TJ_ARG_INT, {.i = WIDTH}, 0},
                    {TJ_ARG_INT, {.i = WIDTH}, 0},
                    {TJ_ARG_INT, {.i = WIDTH}, 0}};
  return tj_interpret(s, args, 5, ROWS);
}

/* One round of every read-only call; a description of the first mismatch. */
static const char *one_round(Shared *sh, float *y) {
  static const char *const mismatch[] = {"emit_ptx", "emit_cuda", "spec_print",
                                         "key",      "interpret", "specialize"};
  const Expected *w = &sh->want;
  char *ptx = NULL, *cuda = NULL, *text = NULL;
  int bad = -1;
  if (tj_emit_ptx(sh->spec, NULL, &ptx, NULL) != TJ_OK || strcmp(ptx, w->ptx)) bad = 0;
  if (bad < 0 && (tj_emit_cuda(sh->spec, NULL, &cuda, NULL) != TJ_OK || strcmp(cuda, w->cuda)))
    bad = 1;
  if (bad < 0 && (tj_spec_print(sh->spec, &text) != TJ_OK || strcmp(text, w->text))) bad = 2;
  if (bad < 0 && (strcmp(tj_spec_key(sh->spec), w->key) || tj_spec_hash(sh->spec) != w->hash))
    bad = 3;
  if (bad < 0 && (interpret(sh->spec, sh->x, y) != TJ_OK || memcmp(y, w->y, sizeof w->y))) bad = 4;
  tj_spec *again = NULL;
  if (bad < 0 && (tj_specialize(sh->program, &sh->options, &again) != TJ_OK ||
                  strcmp(tj_spec_key(again), w->key)))
    bad = 5;
  tj_spec_destroy(again);
  tj_free(ptx);
  tj_free(cuda);
  tj_free(text);
  return bad < 0 ? NULL : mismatch[bad];
}

static void *work(void *arg) {
  Worker *wk = arg;
  float *y = malloc(sizeof(float) * ROWS * WIDTH);
  pthread_barrier_wait(&wk->shared->start);
  for (int round = 0; y && round < ROUNDS && !wk->failure[0]; round++) {
    const char *what = one_round(wk->shared, y);
    if (what) snprintf(wk->failure, sizeof wk->failure, "round %d: %s differs", round, what);
  }
  if (!y) snprintf(wk->failure, sizeof wk->failure, "out of memory");
  free(y);
  return NULL;
}

static void expect(Shared *sh) {
  Expected *w = &sh->want;
  ck_assert_int_eq(tj_emit_ptx(sh->spec, NULL, &w->ptx, NULL), TJ_OK);
  ck_assert_int_eq(tj_emit_cuda(sh->spec, NULL, &w->cuda, NULL), TJ_OK);
  ck_assert_int_eq(tj_spec_print(sh->spec, &w->text), TJ_OK);
  w->key = tj_strdup(tj_spec_key(sh->spec));
  w->hash = tj_spec_hash(sh->spec);
  ck_assert_int_eq(interpret(sh->spec, sh->x, w->y), TJ_OK);
}

START_TEST(threads_share_one_spec) {
  static Shared sh;
  static Worker workers[THREADS];
  static float x[ROWS * WIDTH];
  TjRng rng;
  rng_seed(&rng, test_seed(12, ROWS, WIDTH));
  for (int i = 0; i < ROWS * WIDTH; i++) x[i] = (float)(3.0 * rng_normal(&rng) + 7.0);
  memset(&sh, 0, sizeof sh);
  sh.x = x;
  sh.program = softmax_program(&sh.options);
  ck_assert_int_eq(tj_specialize(sh.program, &sh.options, &sh.spec), TJ_OK);
  expect(&sh);
  ck_assert_int_eq(pthread_barrier_init(&sh.start, NULL, THREADS), 0);
  for (int t = 0; t < THREADS; t++) {
    workers[t] = (Worker){.shared = &sh};
    ck_assert_int_eq(pthread_create(&workers[t].thread, NULL, work, &workers[t]), 0);
  }
  for (int t = 0; t < THREADS; t++) ck_assert_int_eq(pthread_join(workers[t].thread, NULL), 0);
  pthread_barrier_destroy(&sh.start);
  for (int t = 0; t < THREADS; t++)
    ck_assert_msg(workers[t].failure[0] == '\0', "thread %d: %s", t, workers[t].failure);
  ck_assert_str_eq(tj_spec_error(sh.spec), "");
  ck_assert_str_eq(tj_program_error(sh.program), "");
  tj_free(sh.want.ptx);
  tj_free(sh.want.cuda);
  tj_free(sh.want.text);
  tj_free(sh.want.key);
  tj_spec_destroy(sh.spec);
  tj_program_destroy(sh.program);
}
END_TEST

/* A failure's message stays until the next failure: successful calls in
 * between write nothing. */
START_TEST(successful_calls_leave_the_message_alone) {
  tj_spec_options o;
  tj_program *p = softmax_program(&o);
  tj_spec *s = NULL;
  ck_assert_int_eq(tj_specialize(p, &o, &s), TJ_OK);
  tj_codegen_options bad_arch = {.arch = 1};
  char *text = NULL;
  ck_assert_int_eq(tj_emit_ptx(s, &bad_arch, &text, NULL), TJ_ERR_UNSUPPORTED);
  const char *want = "codegen: unsupported arch sm_1 (sm_75 and later)";
  ck_assert_str_eq(tj_spec_error(s), want);
  ck_assert_int_eq(tj_emit_ptx(s, NULL, &text, NULL), TJ_OK);
  tj_free(text);
  ck_assert_str_eq(tj_spec_error(s), want);
  ck_assert_int_eq(tj_emit_cuda(s, NULL, &text, NULL), TJ_OK);
  tj_free(text);
  ck_assert_str_eq(tj_spec_error(s), want);
  float x[ROWS * WIDTH] = {0}, y[ROWS * WIDTH];
  ck_assert_int_eq(interpret(s, x, y), TJ_OK);
  ck_assert_str_eq(tj_spec_error(s), want);
  ck_assert_int_eq(tj_spec_print(s, &text), TJ_OK);
  tj_free(text);
  int64_t block;
  ck_assert_int_eq(tj_spec_const(s, "BLOCK", &block), TJ_OK);
  ck_assert_str_eq(tj_spec_error(s), want);
  tj_spec_destroy(s);
  /* The same on a program. */
  tj_spec_options bad = o;
  bad.dtype = TJ_DTYPE_COUNT;
  ck_assert_int_eq(tj_specialize(p, &bad, &s), TJ_ERR_INVALID_ARGUMENT);
  want = "specialize: unknown dtype 3";
  ck_assert_str_eq(tj_program_error(p), want);
  ck_assert_int_eq(tj_program_verify(p), TJ_OK);
  ck_assert_str_eq(tj_program_error(p), want);
  ck_assert_int_eq(tj_specialize(p, &o, &s), TJ_OK);
  ck_assert_str_eq(tj_program_error(p), want);
  ck_assert_int_eq(tj_program_print(p, &text), TJ_OK);
  tj_free(text);
  ck_assert_str_eq(tj_program_error(p), want);
  tj_spec_destroy(s);
  tj_program_destroy(p);
}
END_TEST

static Suite *shared_spec_suite(void) {
  Suite *s = suite_create("shared_spec");
  TCase *c = tcase_create("threads");
  tcase_set_timeout(c, 120); /* ThreadSanitizer is slow */
  tcase_add_test(c, threads_share_one_spec);
  tcase_add_test(c, successful_calls_leave_the_message_alone);
  suite_add_tcase(s, c);
  return s;
}

int main(void) { return test_run_suite(shared_spec_suite()); }
