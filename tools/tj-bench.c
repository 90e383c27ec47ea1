/*
 * tj-bench — tilejit's benchmarks, one mode per run:
 *
 *   tj-bench --codegen [--iters K] [--arch sm_XX]
 *       The time to specialize the softmax program and generate its PTX
 *       (tj_specialize + tj_emit_ptx, what a cache miss costs before the
 *       driver's JIT), for N = 1000 and N = 65536 in f32, f16 and bf16.
 *       The program is parsed once; each of K runs (default 2000) is timed
 *       alone. Prints the median, the 10th and 90th percentiles, and the
 *       PTX size. Target: a median of at most 100 us on a CI-class CPU.
 *
 * Other modes are added beside run_codegen (see `modes` below).
 *
 * Exit status: 0 success, 1 failure, 2 usage error.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include "tilejit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct Options {
  long iters;
  int arch;
} Options;

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* One specialize + emit; its duration in us, or -1 on failure. */
static double codegen_once(tj_program *p, const tj_spec_options *o, int arch, size_t *bytes) {
  tj_codegen_options co = {arch, 0, 0};
  tj_spec *s = NULL;
  char *ptx = NULL;
  double t0 = now_us();
  tj_status st = tj_specialize(p, o, &s);
  if (st == TJ_OK) st = tj_emit_ptx(s, &co, &ptx, NULL);
  double t1 = now_us();
  if (st != TJ_OK)
    fprintf(stderr, "tj-bench: %s: %s\n", tj_status_string(st),
            s ? tj_spec_error(s) : tj_program_error(p));
  *bytes = ptx ? strlen(ptx) : 0;
  tj_free(ptx);
  tj_spec_destroy(s);
  return st == TJ_OK ? t1 - t0 : -1;
}

static int codegen_case(const Options *opt, int64_t n, tj_dtype dtype, double *times) {
  static const char *const names[] = {"f32", "f16", "bf16"};
  tj_program *p = NULL;
  tj_spec_options o;
  if (tj_softmax_program(TJ_SOFTMAX_AUTO, n, &p) != TJ_OK ||
      tj_softmax_spec_options(TJ_SOFTMAX_AUTO, dtype, n, &o) != TJ_OK) {
    fprintf(stderr, "tj-bench: no softmax program for n = %lld\n", (long long)n);
    tj_program_destroy(p);
    return 1;
  }
  o.align = 16;
  size_t bytes = 0;
  for (long i = 0; i < opt->iters; i++)
    if ((times[i] = codegen_once(p, &o, opt->arch, &bytes)) < 0) return tj_program_destroy(p), 1;
  qsort(times, (size_t)opt->iters, sizeof *times, by_value);
  printf("softmax %-6s N=%-6lld %-5s BLOCK=%-5lld  median %7.1f us   p10 %7.1f us   p90 %7.1f us   "
         "%zu bytes of PTX\n",
         tj_softmax_pick(n) == TJ_SOFTMAX_SINGLE ? "single" : "online", (long long)n, names[dtype],
         (long long)o.block, times[opt->iters / 2], times[opt->iters / 10],
         times[opt->iters * 9 / 10], bytes);
  tj_program_destroy(p);
  return 0;
}

static int run_codegen(const Options *opt) {
  static const int64_t ns[] = {1000, 65536};
  double *times = malloc(sizeof *times * (size_t)opt->iters);
  if (!times) return 1;
  printf("tj-bench --codegen: tj_specialize + tj_emit_ptx, sm_%d, %ld runs each\n", opt->arch,
         opt->iters);
  int rc = 0;
  for (size_t i = 0; i < sizeof ns / sizeof ns[0] && !rc; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT && !rc; d++)
      rc = codegen_case(opt, ns[i], (tj_dtype)d, times);
  free(times);
  return rc;
}

static const struct {
  const char *flag;
  int (*run)(const Options *);
} modes[] = {{"--codegen", run_codegen}};

static int usage(void) {
  fprintf(stderr, "usage: tj-bench --codegen [--iters K] [--arch sm_XX]\n");
  return 2;
}

int main(int argc, char **argv) {
  Options opt = {2000, 90};
  int mode = -1;
  for (int i = 1; i < argc; i++) {
    bool known = false;
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
      if (!strcmp(argv[i], modes[m].flag)) mode = (int)m, known = true;
    if (known) continue;
    if (!strcmp(argv[i], "--iters") && i + 1 < argc)
      opt.iters = strtol(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--arch") && i + 1 < argc) {
      const char *a = argv[++i];
      opt.arch = atoi(strncmp(a, "sm_", 3) ? a : a + 3);
    } else
      return usage();
  }
  if (mode < 0 || opt.iters < 1 || opt.arch < 1) return usage();
  return modes[mode].run(&opt);
}
