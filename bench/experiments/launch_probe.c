/*
 * launch_probe.c — host time per cached launch of tj_softmax,
 * tj_function_launch and tj_launch, on any driver: with
 * fake_libcuda.c's (TILEJIT_LIBCUDA) it is tilejit's own share alone, for
 * perf or valgrind; on a GPU the launch's too.
 *
 *   cc -O2 -Iinclude bench/experiments/launch_probe.c -Lbuild -ltilejit -o /tmp/launch_probe
 *   TILEJIT_LIBCUDA=/tmp/libcuda.so.1 TILEJIT_CACHE_DISABLE=1 /tmp/launch_probe [CALLS]
 */
#define _POSIX_C_SOURCE 200809L
#include "tilejit.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static int fail(tj_context *ctx, const char *what, tj_status st) {
  fprintf(stderr, "%s: %s: %s\n", what, tj_status_string(st), tj_context_error(ctx));
  return 1;
}

int main(int argc, char **argv) {
  long calls = argc > 1 ? atol(argv[1]) : 1000000;
  tj_context *ctx = NULL;
  tj_context_options co = {.device = 0};
  tj_status st = tj_context_create(&co, &ctx);
  if (st != TJ_OK) return fail(NULL, "tj_context_create", st);
  uint64_t x = 0, y = 0;
  if ((st = tj_device_alloc(ctx, 4096, &x)) != TJ_OK || (st = tj_device_alloc(ctx, 4096, &y)) != TJ_OK)
    return fail(ctx, "tj_device_alloc", st);
  if (y == x) y = x + 2048; /* the fake driver hands out one address */
  st = tj_softmax(ctx, TJ_DTYPE_F32, 1, 32, y, 32, x, 32, NULL, NULL);
  if (st != TJ_OK) return fail(ctx, "tj_softmax", st);
  double start = now_ns();
  for (long i = 0; i < calls && st == TJ_OK; i++)
    st = tj_softmax(ctx, TJ_DTYPE_F32, 1, 32, y, 32, x, 32, NULL, NULL);
  double per = (now_ns() - start) / (double)calls;
  if (st != TJ_OK) return fail(ctx, "tj_softmax", st);
  printf("tj_softmax: %.1f ns per call over %ld calls\n", per, calls);
  tj_context_destroy(ctx);
  return 0;
}
