/*
 * tj-softmax — row-wise softmax of an M x N matrix of fresh random data,
 * checked against a float64 reference.
 *
 *   tj-softmax --interp -m M -n N [--dtype f32|f16|bf16] [--seed S]
 *              [--warps W] [--iters K]
 *
 * With --interp the softmax program (the template tj_softmax_pick chooses
 * for N) runs through the CPU interpreter; without it, on the GPU through
 * the runtime (run_gpu). Inputs are normal values scaled by 3 around a
 * per-row offset, so the max subtraction matters. The tool prints the max
 * absolute error and the max of |out - ref| / (atol + rtol |ref|) with the
 * tolerances of the testing rules (f32 1.3e-6/1e-5, f16 1e-3/1e-5, bf16
 * 1.6e-2/1e-5), then PASS or FAIL.
 *
 * Exit status: 0 within tolerance, 1 not (or a library error), 2 on a usage
 * error.
 */
#include "tilejit.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_ELEMENTS ((int64_t)1 << 30) /* M * N the tool will allocate */

typedef struct Options {
  int interp;
  int64_t m, n;
  tj_dtype dtype;
  int64_t seed;
  int64_t warps; /* 0: tilejit's default */
  int64_t iters;
} Options;

typedef struct Tolerance {
  double rtol, atol;
} Tolerance;

static const char *const dtype_names[TJ_DTYPE_COUNT] = {"f32", "f16", "bf16"};
static const Tolerance tolerances[TJ_DTYPE_COUNT] = {{1.3e-6, 1e-5}, {1e-3, 1e-5}, {1.6e-2, 1e-5}};
static const size_t dtype_sizes[TJ_DTYPE_COUNT] = {4, 2, 2};

static void usage(void) {
  fprintf(stderr, "usage: tj-softmax [--interp] -m M -n N [--dtype f32|f16|bf16] [--seed S]\n"
                  "                  [--warps W] [--iters K]\n"
                  "  --interp   run through the CPU interpreter (else on the GPU)\n"
                  "  -m, -n     rows and row width (M, N >= 0)\n"
                  "  --dtype    storage type (default f32)\n"
                  "  --seed     random seed (default: from the clock; printed)\n"
                  "  --warps    NUM_WARPS (1, 2, 4, ..., 32; default: tilejit's choice)\n"
                  "  --iters    runs to time (default 1)\n");
}

/* ---- arguments --------------------------------------------------------- */

static int parse_int(const char *text, int64_t lo, int64_t hi, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno || end == text || *end || v < lo || v > hi) return 0;
  *out = v;
  return 1;
}

static int parse_dtype(const char *text, tj_dtype *out) {
  for (int d = 0; d < TJ_DTYPE_COUNT; d++)
    if (strcmp(text, dtype_names[d]) == 0) {
      *out = (tj_dtype)d;
      return 1;
    }
  return 0;
}

/* One option with its value at argv[*i + 1]; 0 if the option or value is bad. */
static int parse_option(int argc, char **argv, int *i, Options *o) {
  const char *name = argv[*i];
  if (strcmp(name, "--interp") == 0) return o->interp = 1;
  if (*i + 1 >= argc) return 0;
  const char *value = argv[++*i];
  if (strcmp(name, "-m") == 0) return parse_int(value, 0, INT32_MAX, &o->m);
  if (strcmp(name, "-n") == 0) return parse_int(value, 0, INT32_MAX, &o->n);
  if (strcmp(name, "--dtype") == 0) return parse_dtype(value, &o->dtype);
  if (strcmp(name, "--seed") == 0) return parse_int(value, 0, INT64_MAX, &o->seed);
  if (strcmp(name, "--iters") == 0) return parse_int(value, 1, 1000000, &o->iters);
  if (strcmp(name, "--warps") == 0)
    return parse_int(value, 1, 32, &o->warps) && (o->warps & (o->warps - 1)) == 0;
  return 0;
}

static int parse_args(int argc, char **argv, Options *o) {
  memset(o, 0, sizeof *o);
  o->m = o->n = -1;
  o->iters = 1;
  o->seed = (int64_t)time(NULL);
  for (int i = 1; i < argc; i++)
    if (!parse_option(argc, argv, &i, o)) {
      fprintf(stderr, "tj-softmax: bad option or value: %s\n", argv[i]);
      return 0;
    }
  if (o->m < 0 || o->n < 0) {
    fprintf(stderr, "tj-softmax: -m and -n are required\n");
    return 0;
  }
  if (o->n > 0 && o->m > MAX_ELEMENTS / o->n) {
    fprintf(stderr, "tj-softmax: M * N is over 2^30 elements\n");
    return 0;
  }
  return 1;
}

/* ---- data -------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double uniform(uint64_t *state) { return (double)(splitmix64(state) >> 11) * 0x1p-53; }

/* Box-Muller; one of the pair is enough here. */
static double normal(uint64_t *state) {
  double u = uniform(state), v = uniform(state);
  return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

static double get(const void *buf, tj_dtype d, int64_t i) {
  if (d == TJ_DTYPE_F32) return ((const float *)buf)[i];
  uint16_t h = ((const uint16_t *)buf)[i];
  return d == TJ_DTYPE_F16 ? tj_f16_to_f32(h) : tj_bf16_to_f32(h);
}

static void set(void *buf, tj_dtype d, int64_t i, double v) {
  if (d == TJ_DTYPE_F32) ((float *)buf)[i] = (float)v;
  else if (d == TJ_DTYPE_F16) ((uint16_t *)buf)[i] = tj_f32_to_f16((float)v);
  else ((uint16_t *)buf)[i] = tj_f32_to_bf16((float)v);
}

/* x = 3 * normal + a row offset: up to +-1e4 in f32, +-100 in 16 bits. */
static void fill(void *x, const Options *o) {
  uint64_t state = (uint64_t)o->seed;
  double spread = o->dtype == TJ_DTYPE_F32 ? 1e4 : 100.0;
  for (int64_t r = 0; r < o->m; r++) {
    double offset = (2.0 * uniform(&state) - 1.0) * spread;
    for (int64_t c = 0; c < o->n; c++)
      set(x, o->dtype, r * o->n + c, 3.0 * normal(&state) + offset);
  }
}

/* ---- checking ---------------------------------------------------------- */

typedef struct Errors {
  double max_abs, max_ratio;
  int64_t bad;
} Errors;

/* Compares row r of y with the float64 softmax of row r of x. */
static void check_row(const void *x, const void *y, const Options *o, int64_t r, double *ref,
                      Errors *e) {
  Tolerance t = tolerances[o->dtype];
  int64_t base = r * o->n;
  double m = -INFINITY, s = 0.0;
  for (int64_t c = 0; c < o->n; c++) m = fmax(m, get(x, o->dtype, base + c));
  for (int64_t c = 0; c < o->n; c++) s += ref[c] = exp(get(x, o->dtype, base + c) - m);
  for (int64_t c = 0; c < o->n; c++) {
    double want = ref[c] / s, got = get(y, o->dtype, base + c);
    double err = fabs(got - want), ratio = err / (t.atol + t.rtol * fabs(want));
    if (isnan(want) && isnan(got)) continue;
    if (!(ratio <= 1.0)) e->bad++;
    if (err > e->max_abs || isnan(err)) e->max_abs = err;
    if (ratio > e->max_ratio || isnan(ratio)) e->max_ratio = ratio;
  }
}

static int check(const void *x, const void *y, const Options *o, Errors *e) {
  double *ref = malloc((size_t)(o->n ? o->n : 1) * sizeof *ref);
  if (!ref) return 0;
  memset(e, 0, sizeof *e);
  for (int64_t r = 0; r < o->m; r++) check_row(x, y, o, r, ref, e);
  free(ref);
  return 1;
}

/* ---- running ----------------------------------------------------------- */

static double seconds(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static tj_spec *specialize(const Options *o, tj_program **p) {
  tj_spec_options so;
  tj_spec *s = NULL;
  tj_status st = tj_softmax_program(TJ_SOFTMAX_AUTO, o->n, p);
  if (st == TJ_OK) st = tj_softmax_spec_options(TJ_SOFTMAX_AUTO, o->dtype, o->n, &so);
  so.num_warps = (int)o->warps;
  if (st == TJ_OK) st = tj_specialize(*p, &so, &s);
  if (st != TJ_OK)
    fprintf(stderr, "tj-softmax: %s: %s\n", tj_status_string(st), *p ? tj_program_error(*p) : "");
  return s;
}

/* Runs the interpreter o->iters times; the time per run, or -1 on error. */
static double interpret(tj_spec *s, void *y, void *x, const Options *o, size_t bytes) {
  tj_arg args[5] = {{TJ_ARG_PTR, {.ptr = y}, bytes},
                    {TJ_ARG_PTR, {.ptr = x}, bytes},
                    {TJ_ARG_INT, {.i = o->n}, 0},
                    {TJ_ARG_INT, {.i = o->n}, 0},
                    {TJ_ARG_INT, {.i = o->n}, 0}};
  double start = seconds();
  for (int i = 0; i < o->iters; i++) {
    tj_status st = tj_interpret(s, args, 5, o->m);
    if (st != TJ_OK) {
      fprintf(stderr, "tj-softmax: %s: %s\n", tj_status_string(st), tj_spec_error(s));
      return -1.0;
    }
  }
  return (seconds() - start) / o->iters;
}

static int report(const Options *o, const tj_spec *s, double run_s, const Errors *e) {
  Tolerance t = tolerances[o->dtype];
  int pass = e->bad == 0;
  printf("tj-softmax: interp %s M=%lld N=%lld seed=%lld\n  %s\n", dtype_names[o->dtype],
         (long long)o->m, (long long)o->n, (long long)o->seed, tj_spec_key(s));
  printf("  %.3f ms per run (%lld run%s)\n", run_s * 1e3, (long long)o->iters,
         o->iters == 1 ? "" : "s");
  printf("  max abs error %.3g, max error / (atol + rtol |ref|) %.3g (rtol %g, atol %g)\n",
         e->max_abs, e->max_ratio, t.rtol, t.atol);
  printf("%s\n", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

static int run_interp(const Options *o) {
  tj_program *p = NULL;
  tj_spec *s = specialize(o, &p);
  size_t count = o->m > 0 && o->n > 0 ? (size_t)(o->m * o->n) : 1,
         bytes = count * dtype_sizes[o->dtype];
  void *x = malloc(bytes), *y = malloc(bytes);
  int rc = 1;
  Errors e;
  if (s && x && y) {
    fill(x, o);
    memset(y, 0xff, bytes); /* NaN in every dtype: unwritten elements fail */
    double run_s = interpret(s, y, x, o, bytes);
    if (run_s >= 0.0 && check(x, y, o, &e)) rc = report(o, s, run_s, &e);
  } else if (s) {
    fprintf(stderr, "tj-softmax: out of memory\n");
  }
  free(x);
  free(y);
  tj_spec_destroy(s);
  tj_program_destroy(p);
  return rc;
}

/* The GPU path, through the runtime's tj_softmax. */
static int run_gpu(const Options *o) {
  (void)o;
  fprintf(stderr, "tj-softmax: the GPU path needs the runtime; use --interp\n");
  return 2;
}

int main(int argc, char **argv) {
  Options o;
  if (!parse_args(argc, argv, &o)) {
    usage();
    return 2;
  }
  return o.interp ? run_interp(&o) : run_gpu(&o);
}
