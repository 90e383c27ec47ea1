/* support_gpu.c — see support_gpu.h. */
#define _POSIX_C_SOURCE 200809L

#include "support_gpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ARENA_MAX    ((size_t)768 << 20) /* device bytes per batch */
#define REGION_ALIGN 256
#define GUARD        61 /* elements after each matrix */

/* ------------------------------------------------------- running suites */

/* In a child: can a context be created? 0 yes, 77 no driver or device. */
static int probe(void) {
  tj_context *ctx = NULL;
  tj_status st = tj_context_create(NULL, &ctx);
  if (st != TJ_OK) {
    fprintf(stderr, "%s: %s\n",
            st == TJ_ERR_NO_DRIVER || st == TJ_ERR_NO_DEVICE ? "skipped" : "error",
            tj_context_error(NULL));
    return st == TJ_ERR_NO_DRIVER || st == TJ_ERR_NO_DEVICE ? 77 : 1;
  }
  tj_device_info d;
  tj_context_device_info(ctx, &d);
  fprintf(stderr, "device: %s, sm_%d (PTX for sm_%d), %d SMs, driver %d.%d (PTX ISA up to %d.%d)\n",
          d.name, d.arch, d.target_arch, d.sm_count, d.driver_version / 1000,
          d.driver_version % 1000 / 10, d.ptx_version / 10, d.ptx_version % 10);
  tj_context_destroy(ctx);
  return 0;
}

int gpu_main(Suite *suite) {
  fflush(stdout);
  fflush(stderr);
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) _exit(probe());
  int status = 0;
  bool probed = waitpid(child, &status, 0) == child && WIFEXITED(status);
  if (probed && WEXITSTATUS(status) == 0) return test_run_suite(suite);
  srunner_free(srunner_create(suite)); /* frees the suite: a clean exit under LeakSanitizer */
  return probed ? WEXITSTATUS(status) : 1;
}

bool gpu_quick(void) {
  const char *q = getenv("TJ_GPU_QUICK");
  return q && *q && strcmp(q, "0") != 0;
}

tj_context *gpu_context(const tj_context_options *options) {
  tj_context *ctx = NULL;
  tj_status st = tj_context_create(options, &ctx);
  ck_assert_msg(st == TJ_OK, "tj_context_create: %s: %s", tj_status_string(st),
                tj_context_error(NULL));
  return ctx;
}

/* ------------------------------------------------------------- labels */

void gpu_case_label(const GpuCase *c, char *out, size_t size) {
  static const char *const templates[] = {"auto", "single", "online"};
  snprintf(out, size,
           "%s%s M=%lld N=%lld strides %lld/%lld offset %lld/%lld%s warps %d cluster %d split %d "
           "%s %s seed %llu",
           c->op == TJ_ROW_LOG_SOFTMAX ? "log-softmax " : "", dtype_label(c->dtype), (long long)c->m, (long long)c->n, (long long)c->x_stride,
           (long long)c->y_stride, (long long)c->offset,
           (long long)(c->y_offset ? c->y_offset : c->offset), c->in_place ? " in-place" : "",
           c->opts.num_warps, c->opts.cluster, c->opts.split,
           c->opts.backend == TJ_BACKEND_NVRTC ? "nvrtc" : "ptx",
           templates[c->opts.which_template % 3], (unsigned long long)c->seed);
}

void gpu_report(const char *name, const GpuTally *t) {
  fprintf(stderr, "%s: %d cases (%d skipped), max abs error %.3g, max error/tolerance %.3g\n", name,
          t->cases, t->skipped, t->max_abs, t->max_ratio);
  if (t->skipped) fprintf(stderr, "  first skipped: %s\n", t->skip_reason);
}

void gpu_fill_default(TjMatrix *x, TjRng *rng, int arg) {
  (void)arg;
  matrix_fill_random(x, rng, 3.0, x->dtype == TJ_DTYPE_F32 ? 1e4 : 100.0);
}

/* ------------------------------------------------------------- batches */

typedef struct Placed {
  GpuCase c;
  TjMatrix x, y; /* host; in place, y receives x's region */
  size_t x_at, y_at;
  bool skipped;
} Placed;

static void prepare(Placed *p) {
  GpuCase *c = &p->c;
  if (!c->x_stride) c->x_stride = c->n;
  if (!c->y_stride) c->y_stride = c->in_place ? c->x_stride : c->n;
  ck_assert(matrix_alloc(&p->x, c->dtype, c->m, c->n, c->x_stride, GUARD));
  ck_assert(matrix_alloc(&p->y, c->dtype, c->m, c->n, c->y_stride, GUARD));
  TjRng rng;
  rng_seed(&rng, c->seed);
  (c->fill ? c->fill : gpu_fill_default)(&p->x, &rng, c->fill_arg);
}

/* The next region of bytes, 256-aligned and then offset elements further. */
static size_t place(size_t *at, size_t bytes, const GpuCase *c, int64_t offset) {
  size_t start = (*at + REGION_ALIGN - 1) / REGION_ALIGN * REGION_ALIGN;
  start += (size_t)offset * dtype_bytes(c->dtype);
  *at = start + bytes;
  return start;
}

static void launch(tj_context *ctx, Placed *p, uint64_t dev, void *stream, bool allow_unsupported,
                   GpuTally *t) {
  GpuCase *c = &p->c;
  uint64_t x = dev + p->x_at, y = c->in_place ? x : dev + p->y_at;
  if (getenv("TJ_GPU_PROGRESS")) { /* which case a hang or a crash was in */
    char now[256];
    gpu_case_label(c, now, sizeof now);
    fprintf(stderr, "  launch %s\n", now);
  }
  tj_status st =
      c->op == TJ_ROW_LOG_SOFTMAX
          ? tj_log_softmax(ctx, c->dtype, c->m, c->n, y, c->y_stride, x, c->x_stride, stream,
                           &c->opts)
          : tj_softmax(ctx, c->dtype, c->m, c->n, y, c->y_stride, x, c->x_stride, stream, &c->opts);
  p->skipped = (st == TJ_ERR_NO_NVRTC && c->opts.backend == TJ_BACKEND_NVRTC) ||
               (st == TJ_ERR_UNSUPPORTED && allow_unsupported);
  char label[256];
  gpu_case_label(c, label, sizeof label);
  if (p->skipped && !t->skip_reason[0])
    snprintf(t->skip_reason, sizeof t->skip_reason, "%.200s: %.300s", label, tj_context_error(ctx));
  if (st == TJ_OK || p->skipped) return;
  ck_abort_msg("%s %s: %s: %s", c->op ? "tj_log_softmax" : "tj_softmax", label,
               tj_status_string(st), tj_context_error(ctx));
}

/* Where x is -inf in a row holding a finite value, y must be exactly 0. */
static void check_exact_zeros(const Placed *p, const double *ref, const char *label) {
  for (int64_t r = 0; r < p->c.m; r++)
    for (int64_t col = 0; col < p->c.n; col++) {
      double xv = matrix_get(&p->x, r, col);
      if (!(isinf(xv) && xv < 0) || ref[r * p->c.n + col] != 0.0) continue;
      double got = matrix_get(&p->y, r, col);
      ck_assert_msg(got == 0.0, "%s: row %lld col %lld: x = -inf, y = %g, want exactly 0", label,
                    (long long)r, (long long)col, got);
    }
}

static void check(Placed *p, const unsigned char *host, GpuTally *t) {
  GpuCase *c = &p->c;
  char label[256], why[512];
  gpu_case_label(c, label, sizeof label);
  memcpy(p->y.data, host + (c->in_place ? p->x_at : p->y_at), p->y.bytes);
  if (!c->in_place)
    ck_assert_msg(memcmp(host + p->x_at, p->x.data, p->x.bytes) == 0, "%s: x was written", label);
  double *ref = malloc((size_t)(c->m * c->n) * sizeof *ref);
  ck_assert_ptr_nonnull(ref);
  row_reference(c->op, &p->x, ref);
  TjCompare cmp;
  bool ok = compare_rows(&p->y, ref, dtype_tolerance(c->dtype), !c->in_place, &cmp);
  compare_describe(&cmp, why, sizeof why);
  ck_assert_msg(ok, "%s: %s", label, why);
  if (c->op == TJ_ROW_SOFTMAX) check_exact_zeros(p, ref, label); /* log: -inf, exact already */
  free(ref);
  if (cmp.max_abs > t->max_abs) t->max_abs = cmp.max_abs;
  if (cmp.max_ratio > t->max_ratio) t->max_ratio = cmp.max_ratio;
}

/* One upload, count launches, one download, count checks. */
static void run_batch(tj_context *ctx, Placed *ps, int count, void *stream, bool allow_unsupported,
                      GpuTally *t) {
  size_t total = 0;
  for (int i = 0; i < count; i++) {
    ps[i].x_at = place(&total, ps[i].x.bytes, &ps[i].c, ps[i].c.offset);
    const GpuCase *c = &ps[i].c;
    int64_t y_offset = c->y_offset ? c->y_offset : c->offset;
    ps[i].y_at = c->in_place ? ps[i].x_at : place(&total, ps[i].y.bytes, c, y_offset);
  }
  unsigned char *host = calloc(total, 1);
  ck_assert_ptr_nonnull(host);
  for (int i = 0; i < count; i++) {
    memcpy(host + ps[i].x_at, ps[i].x.data, ps[i].x.bytes);
    if (!ps[i].c.in_place) memcpy(host + ps[i].y_at, ps[i].y.data, ps[i].y.bytes);
  }
  uint64_t dev = 0;
  ck_assert_msg(tj_device_alloc(ctx, total, &dev) == TJ_OK, "%s", tj_context_error(ctx));
  ck_assert_msg(tj_copy_to_device(ctx, dev, host, total) == TJ_OK, "%s", tj_context_error(ctx));
  for (int i = 0; i < count; i++) launch(ctx, &ps[i], dev, stream, allow_unsupported, t);
  ck_assert_msg(tj_context_synchronize(ctx) == TJ_OK, "%s", tj_context_error(ctx));
  ck_assert_msg(tj_copy_to_host(ctx, host, dev, total) == TJ_OK, "%s", tj_context_error(ctx));
  ck_assert_int_eq(tj_device_free(ctx, dev), TJ_OK);
  for (int i = 0; i < count; i++) {
    t->cases++;
    if (ps[i].skipped)
      t->skipped++;
    else
      check(&ps[i], host, t);
  }
  free(host);
}

static size_t device_bytes(const Placed *p) {
  return p->x.bytes + (p->c.in_place ? 0 : p->y.bytes) + 2 * REGION_ALIGN;
}

void gpu_run_cases(tj_context *ctx, const GpuCase *cases, int count, void *stream,
                   bool allow_unsupported, GpuTally *tally) {
  Placed *ps = calloc((size_t)(count ? count : 1), sizeof *ps);
  ck_assert_ptr_nonnull(ps);
  for (int first = 0; first < count;) {
    size_t bytes = 0;
    int end = first;
    for (; end < count && (end == first || bytes < ARENA_MAX); end++) {
      ps[end].c = cases[end];
      prepare(&ps[end]);
      bytes += device_bytes(&ps[end]);
    }
    run_batch(ctx, ps + first, end - first, stream, allow_unsupported, tally);
    for (int i = first; i < end; i++) {
      matrix_free(&ps[i].x);
      matrix_free(&ps[i].y);
    }
    first = end;
  }
  free(ps);
}
