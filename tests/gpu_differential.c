/*
 * gpu_differential.c — the interpreter and the GPU agree on random tile
 * programs (tests/support_randprog.h: seed -> program, specialization and
 * arguments).
 *
 * For each seed: the outputs are poisoned, every buffer is copied to the
 * device, the program is compiled with tj_compile and launched with
 * tj_launch over the program's grid, and the interpreter runs the same
 * specialization on the host copies. Each output element must then be
 * poison on both sides (never written) or close on both: f32 outputs within
 * 1e-4 relative plus 1e-4 absolute (the GPU's exp2 and log are
 * approximations that random arithmetic can amplify a little), DTYPE
 * outputs within the storage type's tolerance widened by its rounding step,
 * NaN only against NaN, inf against inf or a value within a rounding of
 * overflow. Every seed runs, and the test fails at the end listing the
 * programs that disagree. Every tenth seed also goes through the NVRTC
 * backend where libnvrtc and a driver for its PTX exist.
 * TJ_GPU_QUICK=1 runs fewer seeds.
 */
#define _POSIX_C_SOURCE 200809L

#include "ir/ir.h" /* TJ_PRINTF */
#include "support_gpu.h"
#include "support_randprog.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int outputs[] = {RP_OUT, RP_OUTD, RP_OUTS};

typedef struct Totals {
  int programs, nvrtc, nvrtc_skipped, failed;
  int64_t elements;
  double max_ratio;
  char nvrtc_skip_reason[256];
  char failures[2048]; /* one line per failed program, the first few */
} Totals;

static TjTolerance output_tolerance(tj_dtype d) {
  static const TjTolerance t[TJ_DTYPE_COUNT] = {{1e-4, 1e-4}, {2e-3, 1e-4}, {1.6e-2, 1e-4}};
  return t[d];
}

/* Close, or both past the edge of overflow (one rounding from inf). */
static bool agree(double got, double want, TjTolerance tol) {
  if (close_enough(got, want, tol)) return true;
  double big = 0.5 * FLT_MAX;
  return (isinf(got) || isinf(want)) && got * want > 0 && fabs(got) >= big && fabs(want) >= big;
}

static void note_failure(Totals *t, const char *fmt, ...) TJ_PRINTF(2, 3);
static void note_failure(Totals *t, const char *fmt, ...) {
  size_t used = strlen(t->failures);
  if (t->failed++ < 8 && used < sizeof t->failures - 1) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->failures + used, sizeof t->failures - used, fmt, ap);
    va_end(ap);
  }
}

/* Compares one output buffer: host (interpreter) against device results;
 * false (and a note) at the first element that differs. */
static bool compare_output(const RandProg *rp, int param, tj_dtype d, const void *want,
                           const void *got, const char *label, Totals *t) {
  size_t count = randprog_elements(rp, param);
  TjTolerance tol = output_tolerance(d);
  for (size_t i = 0; i < count; i++) {
    bool want_poison = is_poison(want, d, i), got_poison = is_poison(got, d, i);
    double w = elem_get(want, d, i), g = elem_get(got, d, i);
    if (want_poison != got_poison || (!want_poison && !agree(g, w, tol))) {
      note_failure(t,
                   "\n  %s: parameter %d element %zu (row %zu, column %zu): GPU %.9g%s, "
                   "interpreter %.9g%s",
                   label, param, i, i / (size_t)rp->stride, i % (size_t)rp->stride, g,
                   got_poison ? " (unwritten)" : "", w, want_poison ? " (unwritten)" : "");
      return false;
    }
    if (!want_poison && isfinite(w) && isfinite(g))
      t->max_ratio = fmax(t->max_ratio, fabs(g - w) / (tol.atol + tol.rtol * fabs(w)));
  }
  t->elements += (int64_t)count;
  return true;
}

/* Device copies of every buffer argument; scalars as they are. */
static void upload(tj_context *ctx, const RandProg *rp, tj_arg *gpu, uint64_t *dev) {
  for (int i = 0; i < RANDPROG_ARGS; i++) {
    gpu[i] = rp->args[i];
    dev[i] = 0;
    if (rp->args[i].kind != TJ_ARG_PTR) continue;
    size_t bytes = rp->args[i].bytes;
    ck_assert_msg(tj_device_alloc(ctx, bytes, &dev[i]) == TJ_OK, "%s", tj_context_error(ctx));
    ck_assert_int_eq(tj_copy_to_device(ctx, dev[i], rp->args[i].u.ptr, bytes), TJ_OK);
    gpu[i].u.ptr = (void *)(uintptr_t)dev[i];
  }
}

/* Compiles and launches spec on the device; false when the backend is
 * not available here (the NVRTC backend only). */
static bool run_on_gpu(tj_context *ctx, tj_spec *spec, tj_backend backend, const RandProg *rp,
                       const tj_arg *gpu, const char *label, Totals *t) {
  tj_kernel *k = NULL;
  tj_status st = tj_compile(ctx, spec, backend, &k);
  if (backend == TJ_BACKEND_NVRTC && (st == TJ_ERR_NO_NVRTC || st == TJ_ERR_UNSUPPORTED)) {
    if (!t->nvrtc_skip_reason[0])
      snprintf(t->nvrtc_skip_reason, sizeof t->nvrtc_skip_reason, "%s", tj_context_error(ctx));
    return false;
  }
  ck_assert_msg(st == TJ_OK, "%s: tj_compile: %s", label, tj_context_error(ctx));
  st = tj_launch(ctx, k, gpu, RANDPROG_ARGS, rp->grid, NULL);
  ck_assert_msg(st == TJ_OK, "%s: tj_launch: %s", label, tj_context_error(ctx));
  ck_assert_msg(tj_context_synchronize(ctx) == TJ_OK, "%s: %s", label, tj_context_error(ctx));
  return true;
}

static void check_outputs(tj_context *ctx, const RandProg *rp, const uint64_t *dev,
                          const char *label, Totals *t) {
  bool ok = true;
  for (size_t o = 0; ok && o < sizeof outputs / sizeof outputs[0]; o++) {
    int param = outputs[o];
    tj_dtype d = param == RP_OUTD ? rp->options.dtype : TJ_DTYPE_F32;
    void *got = malloc(rp->args[param].bytes);
    ck_assert_int_eq(tj_copy_to_host(ctx, got, dev[param], rp->args[param].bytes), TJ_OK);
    ok = compare_output(rp, param, d, rp->args[param].u.ptr, got, label, t);
    free(got);
  }
}

static void run_seed(tj_context *ctx, uint64_t seed, Totals *t) {
  RandProg rp;
  char why[256], label[320];
  ck_assert_msg(randprog_make(seed, &rp, why, sizeof why), "seed %llu: %s",
                (unsigned long long)seed, why);
  snprintf(label, sizeof label, "seed %llu (%s)", (unsigned long long)seed, rp.summary);
  randprog_poison_outputs(&rp);
  tj_spec *spec = NULL;
  tj_status st = tj_specialize(rp.program, &rp.options, &spec);
  ck_assert_msg(st == TJ_OK, "%s: %s", label, tj_program_error(rp.program));
  tj_arg gpu[RANDPROG_ARGS];
  uint64_t dev[RANDPROG_ARGS];
  upload(ctx, &rp, gpu, dev);
  run_on_gpu(ctx, spec, TJ_BACKEND_PTX, &rp, gpu, label, t);
  st = tj_interpret(spec, rp.args, RANDPROG_ARGS, rp.grid);
  ck_assert_msg(st == TJ_OK, "%s: interpreter: %s", label, tj_spec_error(spec));
  check_outputs(ctx, &rp, dev, label, t);
  t->programs++;
  for (int i = 0; i < RANDPROG_ARGS; i++) tj_device_free(ctx, dev[i]);
  tj_spec_destroy(spec);
  randprog_free(&rp);
}

/* The NVRTC backend on one seed, from a fresh copy of its arguments. */
static void run_seed_nvrtc(tj_context *ctx, uint64_t seed, Totals *t) {
  RandProg rp;
  char why[256], label[320];
  ck_assert(randprog_make(seed, &rp, why, sizeof why));
  snprintf(label, sizeof label, "NVRTC seed %llu (%s)", (unsigned long long)seed, rp.summary);
  randprog_poison_outputs(&rp);
  tj_spec *spec = NULL;
  ck_assert_int_eq(tj_specialize(rp.program, &rp.options, &spec), TJ_OK);
  tj_arg gpu[RANDPROG_ARGS];
  uint64_t dev[RANDPROG_ARGS];
  upload(ctx, &rp, gpu, dev);
  if (run_on_gpu(ctx, spec, TJ_BACKEND_NVRTC, &rp, gpu, label, t)) {
    ck_assert_int_eq(tj_interpret(spec, rp.args, RANDPROG_ARGS, rp.grid), TJ_OK);
    check_outputs(ctx, &rp, dev, label, t);
    t->nvrtc++;
  } else {
    t->nvrtc_skipped++;
  }
  for (int i = 0; i < RANDPROG_ARGS; i++) tj_device_free(ctx, dev[i]);
  tj_spec_destroy(spec);
  randprog_free(&rp);
}

START_TEST(interpreter_and_gpu_agree) {
  tj_context *ctx = gpu_context(NULL);
  Totals t = {0};
  int seeds = gpu_quick() ? 60 : 400;
  for (int s = 1; s <= seeds; s++) run_seed(ctx, (uint64_t)s, &t);
  for (int s = 10; s <= seeds; s += 10) run_seed_nvrtc(ctx, (uint64_t)s, &t);
  tj_cache_stats cs;
  tj_context_cache_stats(ctx, &cs);
  fprintf(stderr,
          "differential: %d programs (PTX) and %d (NVRTC, %d skipped), %lld output elements, "
          "max error/tolerance %.3g; %llu kernels compiled, codegen %.1f ms, driver JIT %.1f ms\n",
          t.programs, t.nvrtc, t.nvrtc_skipped, (long long)t.elements, t.max_ratio,
          (unsigned long long)cs.misses, cs.codegen_us / 1e3, cs.jit_ms);
  if (t.nvrtc_skipped) fprintf(stderr, "  NVRTC skipped: %s\n", t.nvrtc_skip_reason);
  tj_context_destroy(ctx);
  ck_assert_msg(t.failed == 0, "%d programs disagree:%s", t.failed, t.failures);
}
END_TEST

int main(void) {
  Suite *s = suite_create("gpu differential");
  TCase *t = tcase_create("random programs");
  tcase_set_timeout(t, 1200);
  tcase_add_test(t, interpreter_and_gpu_agree);
  suite_add_tcase(s, t);
  return gpu_main(s);
}
