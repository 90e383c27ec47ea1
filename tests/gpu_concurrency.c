/*
 * gpu_concurrency.c — many threads on one context: 8 threads share 2
 * streams and ask, all at once, for kernels that are new (one width per
 * thread, and two widths every thread wants first) and cached (a width
 * compiled before the threads start).
 *
 * Every key must compile once however many threads miss it together
 * (checked through the cache stats: misses = distinct kernels, and hits +
 * misses = calls), and every result must match the float64 reference.
 * Widths are chosen so that each has its own BLOCK, and row strides are
 * whole 16-byte vectors, so the kernel count is known in advance.
 *
 * The streams are blocking streams (flags 0): uploads and downloads through
 * tj_copy_* run on the legacy default stream, which orders them with the
 * launches. Threads record their first failure; the test body asserts
 * after joining them.
 */
#define _POSIX_C_SOURCE 200809L

#include "runtime/runtime.h"
#include "support_gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS       8
#define ROUNDS        3
#define ROWS          64
#define SHARED_WIDTHS 2

static const int64_t shared_widths[SHARED_WIDTHS] = {1000, 3000};  /* BLOCK 1024, 4096 */
static const int64_t warm_width = 100;                             /* BLOCK 128 */
static const int own_log2[THREADS] = {5, 6, 8, 9, 11, 13, 14, 15}; /* a BLOCK per thread */

typedef struct Worker {
  pthread_t thread;
  tj_context *ctx;
  CuStream stream;
  pthread_barrier_t *start;
  int index, calls;
  char failure[1024];
} Worker;

static int64_t row_stride(int64_t n) { return (n + 3) / 4 * 4; }

static void record_failure(Worker *w, const char *what, int64_t n, const char *detail) {
  if (!w->failure[0])
    snprintf(w->failure, sizeof w->failure, "thread %d, N=%lld: %s: %s", w->index, (long long)n,
             what, detail);
}

static void sync_stream(Worker *w) {
  RtBinding binding;
  if (rt_bind(w->ctx, &binding) != TJ_OK) {
    record_failure(w, "bind", 0, tj_context_error(w->ctx));
    return;
  }
  CuResult r = w->ctx->cu->cuStreamSynchronize(w->stream);
  rt_unbind(w->ctx, &binding);
  if (r != RT_CUDA_SUCCESS) record_failure(w, "cuStreamSynchronize", 0, "failed");
}

/* One softmax of ROWS x n on the worker's stream, checked. */
static void one_call(Worker *w, uint64_t x, uint64_t y, int64_t n, uint64_t seed) {
  int64_t stride = row_stride(n);
  TjMatrix hx, hy;
  TjRng rng;
  rng_seed(&rng, seed);
  if (!matrix_alloc(&hx, TJ_DTYPE_F32, ROWS, n, stride, 0) ||
      !matrix_alloc(&hy, TJ_DTYPE_F32, ROWS, n, stride, 0)) {
    record_failure(w, "host memory", n, "");
    return;
  }
  gpu_fill_default(&hx, &rng, 0);
  tj_status st = tj_copy_to_device(w->ctx, x, hx.data, hx.bytes);
  if (st == TJ_OK) st = tj_copy_to_device(w->ctx, y, hy.data, hy.bytes); /* poison */
  if (st == TJ_OK)
    st = tj_softmax(w->ctx, TJ_DTYPE_F32, ROWS, n, y, stride, x, stride, (void *)w->stream, NULL);
  w->calls++;
  if (st == TJ_OK) sync_stream(w);
  if (st == TJ_OK) st = tj_copy_to_host(w->ctx, hy.data, y, hy.bytes);
  if (st != TJ_OK) {
    record_failure(w, "tj_*", n, tj_context_error(w->ctx));
  } else {
    double *ref = malloc((size_t)(ROWS * n) * sizeof *ref);
    TjCompare cmp;
    char why[512];
    softmax_reference(&hx, ref);
    if (!compare_rows(&hy, ref, dtype_tolerance(TJ_DTYPE_F32), true, &cmp)) {
      compare_describe(&cmp, why, sizeof why);
      record_failure(w, "result", n, why);
    }
    free(ref);
  }
  matrix_free(&hx);
  matrix_free(&hy);
}

static void *work(void *arg) {
  Worker *w = arg;
  int64_t widths[SHARED_WIDTHS + 2] = {shared_widths[0], shared_widths[1], warm_width,
                                       ((int64_t)1 << own_log2[w->index]) - 3};
  size_t bytes = (size_t)(ROWS * row_stride((int64_t)1 << 15)) * 4;
  uint64_t x = 0, y = 0;
  if (tj_device_alloc(w->ctx, bytes, &x) != TJ_OK || tj_device_alloc(w->ctx, bytes, &y) != TJ_OK) {
    record_failure(w, "tj_device_alloc", 0, tj_context_error(w->ctx));
    pthread_barrier_wait(w->start);
    return NULL;
  }
  pthread_barrier_wait(w->start);
  for (int round = 0; round < ROUNDS && !w->failure[0]; round++)
    for (int i = 0; i < SHARED_WIDTHS + 2; i++) {
      int64_t n = widths[(i + w->index * (round + 1)) % (SHARED_WIDTHS + 2)];
      if (round == 0 && i == 0) n = shared_widths[w->index % 2]; /* everyone misses at once */
      one_call(w, x, y, n, test_seed((uint64_t)w->index, (uint64_t)round, (uint64_t)n));
    }
  tj_device_free(w->ctx, x);
  tj_device_free(w->ctx, y);
  return NULL;
}

static CuStream make_stream(tj_context *ctx) {
  RtBinding binding;
  CuStream s = NULL;
  ck_assert_int_eq(rt_bind(ctx, &binding), TJ_OK);
  ck_assert_int_eq(ctx->cu->cuStreamCreate(&s, 0), RT_CUDA_SUCCESS);
  rt_unbind(ctx, &binding);
  return s;
}

static void destroy_stream(tj_context *ctx, CuStream s) {
  RtBinding binding;
  ck_assert_int_eq(rt_bind(ctx, &binding), TJ_OK);
  ctx->cu->cuStreamDestroy(s);
  rt_unbind(ctx, &binding);
}

START_TEST(threads_share_streams_and_kernels) {
  tj_context *ctx = gpu_context(NULL);
  CuStream streams[2] = {make_stream(ctx), make_stream(ctx)};
  /* The cached kernel: compiled before the threads start. */
  Worker warm = {.ctx = ctx, .stream = streams[0], .index = -1};
  uint64_t x = 0, y = 0;
  size_t bytes = (size_t)(ROWS * row_stride(warm_width)) * 4;
  ck_assert_int_eq(tj_device_alloc(ctx, bytes, &x), TJ_OK);
  ck_assert_int_eq(tj_device_alloc(ctx, bytes, &y), TJ_OK);
  one_call(&warm, x, y, warm_width, 1);
  ck_assert_msg(!warm.failure[0], "%s", warm.failure);
  tj_device_free(ctx, x);
  tj_device_free(ctx, y);

  Worker workers[THREADS];
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, THREADS);
  for (int i = 0; i < THREADS; i++) {
    workers[i] = (Worker){.ctx = ctx, .stream = streams[i % 2], .start = &start, .index = i};
    ck_assert_int_eq(pthread_create(&workers[i].thread, NULL, work, &workers[i]), 0);
  }
  int calls = warm.calls;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(workers[i].thread, NULL);
    calls += workers[i].calls;
  }
  pthread_barrier_destroy(&start);
  for (int i = 0; i < THREADS; i++) ck_assert_msg(!workers[i].failure[0], "%s", workers[i].failure);

  tj_cache_stats s;
  tj_context_cache_stats(ctx, &s);
  fprintf(stderr, "concurrency: %d calls from %d threads on 2 streams: %llu misses, %llu hits\n",
          calls, THREADS, (unsigned long long)s.misses, (unsigned long long)s.hits);
  ck_assert_uint_eq(s.misses, THREADS + SHARED_WIDTHS + 1); /* each kernel compiled once */
  ck_assert_uint_eq(s.hits + s.misses, (uint64_t)calls);
  ck_assert_uint_eq(s.failures, 0);
  destroy_stream(ctx, streams[0]);
  destroy_stream(ctx, streams[1]);
  tj_context_destroy(ctx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("gpu concurrency");
  TCase *t = tcase_create("threads");
  tcase_set_timeout(t, 600);
  tcase_add_test(t, threads_share_streams_and_kernels);
  suite_add_tcase(s, t);
  return gpu_main(s);
}
