/*
 * slow_i32_limit.c — every softmax template at the ends of the n it takes,
 * in the PTX simulator and in the interpreter: 2^31 − 1 (the largest n
 * tj_softmax documents) and 2^31 − BLOCK ± 1 for the online template, whose
 * i32 loop counter once wrapped there, and 2^30 (IR_MAX_TILE) for the single
 * tile, which refuses anything wider with a message.
 *
 * Each run is 2^31 elements: about 4·10^10 simulated thread-instructions,
 * 15–20 minutes on one core. So this suite is labelled "slow" and left out
 * of the default test preset and of CI; run it with `ctest --preset slow`
 * (one CTest test per case, so -j spreads them over cores).
 *
 * The interpreter holds every tile whole, so at 2^30 the single tile's
 * tiles (8.6·10^9 cells) may not fit in memory: that case then runs on the
 * simulator alone, which is checked against the exact softmax all the same.
 *
 * The row is bf16, in place (x = y, 4 GiB, mapped without a reserve), with
 * x[i] = (i mod 8) / 2, so softmax is known exactly: exp(x − 3.5) / S, S
 * summed per residue in float64. The buffer holds exactly the row: a read
 * or a write past either end fails the simulator and the interpreter. An
 * element left unwritten still holds x, which is off by a factor of 10^8
 * or more. Every element is checked to a relative 2^-6: bf16 rounds to
 * 2^-9 and the sum is 2^31 terms in f32, each thread adding up to 2^23 of
 * them in turn (an H200 gave 1.8·10^-3 on f32 rows at these n).
 *
 * The case comes from the command line: `slow_i32_limit WHICH N` with WHICH
 * auto, single or online.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include "codegen/codegen.h"
#include "support.h"
#include "support_ptxsim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static int report(const char *what, int64_t n, const char *why) {
  fprintf(stderr, "FAIL n %lld: %s: %s\n", (long long)n, what, why);
  return 1;
}

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void fill(uint16_t *x, int64_t n) {
  uint16_t v[8];
  for (int k = 0; k < 8; k++) elem_set(v, TJ_DTYPE_BF16, (size_t)k, 0.5 * k);
  for (int64_t i = 0; i < n; i++) x[i] = v[i & 7];
}

/* Every element against exp(x − 3.5) / S; false with the first bad one. */
static bool check(const uint16_t *y, int64_t n, double *worst, char *why, size_t size) {
  double want[8], sum = 0;
  for (int k = 0; k < 8; k++) sum += (double)((n - k + 7) / 8) * exp(0.5 * k - 3.5);
  for (int k = 0; k < 8; k++) want[k] = exp(0.5 * k - 3.5) / sum;
  *worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double got = elem_get(y, TJ_DTYPE_BF16, (size_t)i), err = fabs(got - want[i & 7]) / want[i & 7];
    if (!(err <= 1.0 / 64)) { /* NaN too */
      snprintf(why, size, "y[%lld] = %g, want %g", (long long)i, got, want[i & 7]);
      return false;
    }
    if (err > *worst) *worst = err;
  }
  return true;
}

int main(int argc, char **argv) {
  static const char *names[] = {"auto", "single", "online"};
  int which = -1;
  for (int i = 0; argc == 3 && i < 3; i++)
    if (strcmp(argv[1], names[i]) == 0) which = i;
  if (which < 0) {
    fprintf(stderr, "usage: slow_i32_limit auto|single|online N\n");
    return 2;
  }
  int64_t n = strtoll(argv[2], NULL, 10);
  tj_spec_options o;
  tj_status st = softmax_spec_options((tj_softmax_template)which, TJ_DTYPE_BF16, 1, n, 90, 0, &o);
  if (n > IR_MAX_TILE && which == TJ_SOFTMAX_SINGLE) { /* refused, and says why */
    if (st != TJ_ERR_UNSUPPORTED) return report("single tile", n, "a plan for a tile over 2^30");
    fprintf(stderr, "n %lld: the single tile is refused, as it should be\n", (long long)n);
    return 0;
  }
  if (st != TJ_OK) return report("plan", n, "no plan");
  tj_program *p;
  tj_spec *s;
  tj_softmax_template t = n > IR_MAX_TILE ? TJ_SOFTMAX_ONLINE : TJ_SOFTMAX_SINGLE;
  if (which) t = (tj_softmax_template)which;
  if (tj_softmax_program(t, n, &p) != TJ_OK) return report("program", n, "not built");
  if (tj_specialize(p, &o, &s) != TJ_OK) return report("specialize", n, tj_program_error(p));

  size_t bytes = (size_t)n * 2;
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  uint16_t *x = mmap(NULL, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (x == MAP_FAILED) return report("mmap", n, "no 4 GiB mapping");
  tj_arg args[5] = {{TJ_ARG_PTR, {.ptr = x}, bytes},
                    {TJ_ARG_PTR, {.ptr = x}, bytes},
                    {TJ_ARG_INT, {.i = n}, 0},
                    {TJ_ARG_INT, {.i = n}, 0},
                    {TJ_ARG_INT, {.i = n}, 0}};
  char why[1024];
  double worst, start = seconds();
  fill(x, n);
  st = tj_interpret(s, args, 5, 1);
  if (st == TJ_ERR_OUT_OF_MEMORY && t == TJ_SOFTMAX_SINGLE) /* its tiles are whole rows */
    fprintf(stderr, "n %lld, %s: the interpreter has no memory for tiles of 2^30: %s\n",
            (long long)n, names[t], tj_spec_error(s));
  else if (st != TJ_OK)
    return report("interpreter", n, tj_spec_error(s));
  else if (!check(x, n, &worst, why, sizeof why))
    return report("interpreter", n, why);
  else
    fprintf(stderr, "n %lld, %s: interpreter right (relative error %.2e, %.0f s)\n",
            (long long)n, names[t], worst, seconds() - start);
  start = seconds();
  fill(x, n);
  /* one row over the whole grid the plan asks for; 2^37 steps, not 4·10^8 */
  if (!ptxsim_run_spec(s, 90, args, 5, 1, (int64_t)1 << 37, NULL, why, sizeof why))
    return report("simulator", n, why);
  if (!check(x, n, &worst, why, sizeof why)) return report("simulator", n, why);
  fprintf(stderr, "n %lld, %s: simulator right (relative error %.2e, %.0f s)\n", (long long)n,
          names[t], worst, seconds() - start);
  munmap(x, bytes);
  tj_spec_destroy(s);
  tj_program_destroy(p);
  return 0;
}
