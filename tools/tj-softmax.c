/*
 * tj-softmax — row-wise softmax of an M x N matrix of fresh random data,
 * checked against a float64 reference.
 *
 *   tj-softmax [--interp] [--log-softmax | --backward | --masked [--scale F]
 *              [--causal [--offset K] [--rows R]]] -m M -n N [--dtype f32|f16|bf16]
 *              [--seed S] [--warps W] [--iters K]
 *
 * With --interp the softmax program (as specialize() below plans it) runs
 * through the CPU interpreter; without it, on the GPU through
 * the runtime (run_gpu). Inputs are normal values scaled by 3 around a
 * per-row offset, so the max subtraction matters. With --backward the op is
 * softmax backward (tj_softmax_backward): y is the softmax of such rows, dy
 * 3 * normal, and the output dx = y * (dy - sum(dy * y)). With --masked it is
 * the scaled, causally masked softmax of attention (tj_masked_softmax):
 * softmax(F * x) over the kept columns, 0 in the others; with --causal row
 * r keeps columns j <= r % R + K (R defaults to M, K to 0), else every
 * column. --scale, --causal, --offset and --rows apply to --masked alone,
 * and --offset and --rows to --causal alone. The tool prints the max
 * absolute error and the max of |out - ref| / (atol + rtol |ref|) with the
 * tolerances of the testing rules (f32 1.3e-6/1e-5, f16 1e-3/1e-5, bf16
 * 1.6e-2/1e-5), then PASS or FAIL. On the GPU it also prints the compile
 * time (codegen and driver JIT), the kernel time (CUDA events, the median
 * of K runs) and the bandwidth, counting 2*M*N*elem bytes (3*M*N*elem
 * for the backward op, which reads two matrices; 2*M*N*elem for --masked
 * too, though it reads only the kept columns of x).
 *
 * The options are the table below (tj-softmax --help prints it); numbers
 * are decimal integers within each option's range ("-n 010" is ten). The
 * host buffers (x, y and a reference row) are allocated before anything
 * runs; when one cannot be, the tool says which and how large, and exits 1.
 *
 * Exit status (tools/common/cli.h): 0 within tolerance, 1 not (or a library
 * error, or no host memory), 2 a usage error, 3 on the GPU path without a
 * CUDA driver or GPU.
 */
#include "cli.h"
#include "data.h"
#include "tilejit.h"
#include "runtime/runtime.h" /* the GPU path: the driver table, for events */

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_ELEMENTS ((int64_t)1 << 30) /* M * N the tool will allocate */

enum { MODE_GPU = 1, MODE_INTERP };

typedef struct Options {
  int mode;
  int64_t m, n;
  int dtype; /* tj_dtype */
  int64_t seed;
  int64_t warps; /* 0: tilejit's default */
  int64_t iters;
  int log_softmax; /* --log-softmax: tj_log_softmax and its reference */
  int backward;    /* --backward: tj_softmax_backward; x holds y, dy its own buffer */
  int masked;      /* --masked: tj_masked_softmax with the mask below */
  int causal;      /* --causal */
  double scale;    /* --scale; 0: not given (1) */
  int64_t offset;  /* --offset; NOT_GIVEN: 0 */
  int64_t rows;    /* --rows; NOT_GIVEN: 0 (M) */
} Options;

#define NOT_GIVEN INT64_MIN /* --offset or --rows, not on the command line */

static tj_row_op op_of(const Options *o) {
  return o->masked        ? TJ_ROW_MASKED_SOFTMAX
         : o->backward    ? TJ_ROW_SOFTMAX_BACKWARD
         : o->log_softmax ? TJ_ROW_LOG_SOFTMAX
                          : TJ_ROW_SOFTMAX;
}

/* The mask of --masked, as tj_masked_softmax takes it. */
static tj_softmax_mask mask_of(const Options *o) {
  return (tj_softmax_mask){.scale = o->scale > 0.0 ? (float)o->scale : 1.0f,
                           .causal = o->causal,
                           .rows = o->rows == NOT_GIVEN ? 0 : o->rows,
                           .offset = o->offset == NOT_GIVEN ? 0 : o->offset};
}

static const char *const dtype_names[TJ_DTYPE_COUNT + 1] = {"f32", "f16", "bf16", NULL};
static const size_t dtype_sizes[TJ_DTYPE_COUNT] = {4, 2, 2};

/* ---- arguments --------------------------------------------------------- */

/* --scale F: a decimal number (1e-3 too, no hex, sign or blanks) that is
 * positive and finite as a float. */
static bool parse_scale(void *options, const CliOption *opt, char *value, char *why,
                        size_t why_size) {
  char *end = value;
  double v = value[0] == '.' || (value[0] >= '0' && value[0] <= '9') ? strtod(value, &end) : 0.0;
  float f = (float)v;
  if (end != value && *end == '\0' && !strpbrk(value, "xX") && f > 0.0f && isfinite(f)) {
    *(double *)((char *)options + opt->offset) = v;
    return true;
  }
  snprintf(why, why_size, "--%s takes a positive, finite number (as a float), not '%.40s'",
           opt->name, value);
  return false;
}

/* clang-format off */
#define AT(f) offsetof(Options, f)
static const CliOption option_table[] = {
    {.name = "interp", .kind = CLI_SELECT, .mode = MODE_INTERP,
     .help = "run through the CPU interpreter (else on the GPU)"},
    {.letter = 'm', .kind = CLI_INT64, .offset = AT(m), .lo = 0, .hi = INT32_MAX, .value = "M",
     .needed = CLI_ALL_MODES, .help = "rows"},
    {.letter = 'n', .kind = CLI_INT64, .offset = AT(n), .lo = 0, .hi = INT32_MAX, .value = "N",
     .needed = CLI_ALL_MODES, .help = "row width (M * N at most 2^30)"},
    {.name = "dtype", .kind = CLI_CHOICE, .offset = AT(dtype), .choices = dtype_names,
     .value = "T", .help = "storage type: f32, f16 or bf16 (default f32)"},
    {.name = "seed", .kind = CLI_INT64, .offset = AT(seed), .lo = 0, .hi = INT64_MAX,
     .value = "S", .help = "random seed (default: from the clock; printed)"},
    {.name = "log-softmax", .kind = CLI_FLAG, .offset = AT(log_softmax),
     .help = "log-softmax (tj_log_softmax, templates/log_softmax*.tj) instead"},
    {.name = "backward", .kind = CLI_FLAG, .offset = AT(backward),
     .help = "softmax backward (tj_softmax_backward, templates/softmax_backward*.tj) instead"},
    {.name = "masked", .kind = CLI_FLAG, .offset = AT(masked),
     .help = "the scaled, masked softmax of attention (tj_masked_softmax) instead"},
    {.name = "scale", .kind = CLI_CUSTOM, .offset = AT(scale), .value = "F",
     .help = "--masked: softmax(F * x), F positive and finite (default 1)"},
    {.name = "causal", .kind = CLI_FLAG, .offset = AT(causal),
     .help = "--masked: row r keeps columns j <= r % R + K (default: every column)"},
    {.name = "offset", .kind = CLI_INT64, .offset = AT(offset), .lo = -INT32_MAX,
     .hi = INT32_MAX, .value = "K",
     .help = "--causal: the diagonal K (default 0, torch.tril; N - R: bottom right)"},
    {.name = "rows", .kind = CLI_INT64, .offset = AT(rows), .lo = 0, .hi = INT32_MAX,
     .value = "R", .help = "--causal: queries per attention matrix (default 0: M)"},
    {.name = "warps", .kind = CLI_INT64, .offset = AT(warps), .lo = 1, .hi = 32, .value = "W",
     .help = "NUM_WARPS, a power of two (default: tilejit's choice)"},
    {.name = "iters", .kind = CLI_INT64, .offset = AT(iters), .lo = 1, .hi = 1000000,
     .value = "K", .help = "runs to time (default 1)"},
};
/* clang-format on */

static const CliTool tool = {
    .name = "tj-softmax",
    .usage =
        "tj-softmax [--interp] [--log-softmax | --backward] -m M -n N\n"
        "                  [--dtype f32|f16|bf16] [--seed S] [--warps W] [--iters K]\n"
        "       tj-softmax [--interp] --masked [--scale F] [--causal [--offset K] [--rows R]]\n"
        "                  -m M -n N [--dtype f32|f16|bf16] [--seed S] [--warps W] [--iters K]",
    .about = "Softmax of fresh random data, checked against a float64 reference: on the\n"
             "GPU (compile time, kernel time, GB/s) or, with --interp, the interpreter.\n",
    .options = option_table,
    .count = sizeof option_table / sizeof option_table[0],
    .mode_offset = AT(mode),
    .default_mode = MODE_GPU,
    .custom = parse_scale,
};

/* The mask's options apply to --masked alone, --offset and --rows to
 * --causal alone: -1, or a usage error. */
static int check_mask_options(const Options *o) {
  const char *const names[] = {"--scale", "--causal", "--offset", "--rows"};
  const bool given[] = {o->scale > 0.0, o->causal, o->offset != NOT_GIVEN, o->rows != NOT_GIVEN};
  for (int i = 0; i < 4; i++) {
    if (given[i] && !o->masked)
      return cli_usage_error(&tool, "%s applies to --masked only", names[i]);
    if (given[i] && i >= 2 && !o->causal)
      return cli_usage_error(&tool, "%s applies to --causal only", names[i]);
  }
  return -1;
}

/* -1 to go on, or the exit status. */
static int parse_args(int argc, char **argv, Options *o) {
  memset(o, 0, sizeof *o);
  o->offset = o->rows = NOT_GIVEN;
  o->iters = 1;
  o->seed = (int64_t)time(NULL);
  int rc = cli_parse(&tool, argc, argv, o);
  if (rc >= 0) return rc;
  if (o->warps & (o->warps - 1))
    return cli_usage_error(&tool, "--warps takes a power of two, not %lld", (long long)o->warps);
  if (o->n > 0 && o->m > MAX_ELEMENTS / o->n)
    return cli_usage_error(&tool, "M * N is over 2^30 elements");
  if (o->log_softmax + o->backward + o->masked > 1)
    return cli_usage_error(&tool, "--log-softmax, --backward and --masked: one op at a time");
  return check_mask_options(o);
}

/* ---- data -------------------------------------------------------------- */

/* The host buffers: x and y of M x N elements (and dy for --backward, where
 * x holds the softmax output and y the gradient dx), one reference row, and
 * the kernel times of the GPU path. */
typedef struct Host {
  void *x, *y, *dy;
  double *ref, *times;
  size_t bytes; /* of x and of y */
} Host;

static void *allocate(size_t bytes, const char *what) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) fprintf(stderr, "tj-softmax: cannot allocate %zu bytes for %s\n", bytes, what);
  return p;
}

/* All of them, or none and a message naming the one that failed. */
static int host_alloc(Host *h, const Options *o) {
  size_t count = o->m > 0 && o->n > 0 ? (size_t)(o->m * o->n) : 1;
  h->bytes = count * dtype_sizes[o->dtype];
  h->y = h->dy = h->ref = h->times = NULL;
  if ((h->x = allocate(h->bytes, "x")) && (h->y = allocate(h->bytes, "y")) &&
      (!o->backward || (h->dy = allocate(h->bytes, "dy"))) &&
      (h->ref = allocate((size_t)(o->n ? o->n : 1) * sizeof *h->ref, "the reference row")) &&
      (h->times = allocate((size_t)o->iters * sizeof *h->times, "the kernel times")))
    return 1;
  free(h->x);
  free(h->y);
  free(h->dy);
  free(h->ref);
  return 0;
}

static void host_free(Host *h) {
  free(h->x);
  free(h->y);
  free(h->dy);
  free(h->ref);
  free(h->times);
}


/* x = 3 * normal + a row offset: up to +-1e4 in f32, +-100 in 16 bits.
 * --backward: x = the softmax of such rows (as the dtype holds it), and
 * dy = 3 * normal. */
static void fill(const Host *h, const Options *o) {
  uint64_t state = (uint64_t)o->seed;
  double spread = o->dtype == TJ_DTYPE_F32 ? 1e4 : 100.0;
  tj_elem elem = data_elem_of(o->dtype);
  for (int64_t r = 0; r < o->m; r++) {
    double offset = (2.0 * data_uniform(&state) - 1.0) * spread;
    for (int64_t c = 0; c < o->n; c++)
      data_set(h->x, elem, r * o->n + c, 3.0 * data_normal(&state) + offset);
    if (!o->backward) continue;
    void *row = (char *)h->x + (size_t)(r * o->n) * dtype_sizes[o->dtype];
    data_row_reference(row, elem, o->n, false, h->ref);
    for (int64_t c = 0; c < o->n; c++) {
      data_set(row, elem, c, h->ref[c]);
      data_set(h->dy, elem, r * o->n + c, 3.0 * data_normal(&state));
    }
  }
}

/* The float64 reference of row r: the op of x (--backward: of x and dy). */
static void reference_row(const Host *h, const Options *o, int64_t r) {
  tj_elem elem = data_elem_of(o->dtype);
  size_t at = (size_t)(r * o->n) * dtype_sizes[o->dtype];
  if (o->masked) {
    tj_softmax_mask mask = mask_of(o);
    data_row_masked_reference((const char *)h->x + at, elem, o->n, r, o->m, &mask, h->ref);
    return;
  }
  if (!o->backward) {
    data_row_reference((const char *)h->x + at, elem, o->n, o->log_softmax, h->ref);
    return;
  }
  const void *y = (const char *)h->x + at, *dy = (const char *)h->dy + at;
  double sum = 0.0;
  for (int64_t c = 0; c < o->n; c++) sum += data_get(y, elem, c) * data_get(dy, elem, c);
  for (int64_t c = 0; c < o->n; c++)
    h->ref[c] = data_get(y, elem, c) * (data_get(dy, elem, c) - sum);
}

/* ---- checking ---------------------------------------------------------- */

typedef struct Errors {
  double max_abs, max_ratio;
  int64_t bad;
} Errors;

/* Compares row r of y with the float64 reference of row r. */
static void check_row(const Host *h, const Options *o, int64_t r, Errors *e) {
  tj_elem elem = data_elem_of(o->dtype);
  DataTolerance t = data_tolerance(elem);
  int64_t base = r * o->n;
  reference_row(h, o, r);
  for (int64_t c = 0; c < o->n; c++) {
    double want = h->ref[c], got = data_get(h->y, elem, base + c);
    double err = fabs(got - want), ratio = err / (t.atol + t.rtol * fabs(want));
    if (isnan(want) && isnan(got)) continue;
    if (!(ratio <= 1.0)) e->bad++;
    if (err > e->max_abs || isnan(err)) e->max_abs = err;
    if (ratio > e->max_ratio || isnan(ratio)) e->max_ratio = ratio;
  }
}

static void check(const Host *h, const Options *o, Errors *e) {
  memset(e, 0, sizeof *e);
  for (int64_t r = 0; r < o->m; r++) check_row(h, o, r, e);
}

/* ---- running ----------------------------------------------------------- */

static double seconds(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The interpreter runs softmax as tj_softmax plans it, except that rows of
 * over 2^20 elements take the online template, whose tiles are its chunk:
 * the interpreter holds every tile whole, and BLOCK-long tiles of such rows
 * would take gigabytes. */
static tj_spec *specialize(const Options *o, tj_program **p) {
  tj_spec_options so;
  tj_spec *s = NULL;
  tj_softmax_plan plan;
  tj_softmax_options options = {.num_warps = (int)o->warps,
                                .which_template = o->n > (1 << 20) ? TJ_SOFTMAX_ONLINE
                                                                   : TJ_SOFTMAX_AUTO};
  tj_status st = tj_row_plan_for(NULL, op_of(o), o->dtype, o->m, o->n, &options, &plan);
  if (st == TJ_OK) st = tj_row_program(op_of(o), plan.which, o->n, p);
  if (st == TJ_OK) st = tj_softmax_spec_options(&plan, o->dtype, o->n, &so);
  if (st == TJ_OK) st = tj_specialize(*p, &so, &s);
  if (st != TJ_OK)
    fprintf(stderr, "tj-softmax: %s: %s\n", tj_status_string(st), *p ? tj_program_error(*p) : "");
  return s;
}

/* The masked programs' scalars after n, as tj_masked_softmax passes them:
 * scale, rows (M for 0) and the offset clamped to [-2^31, 2^31] (n when not
 * causal); returns their count. */
static int mask_args(const Options *o, tj_arg *args) {
  const int64_t limit = (int64_t)1 << 31;
  tj_softmax_mask mask = mask_of(o);
  int64_t offset = mask.causal ? mask.offset : o->n;
  offset = offset < -limit ? -limit : offset > limit ? limit : offset;
  int64_t rows = mask.rows ? mask.rows : o->m > 0 ? o->m : 1;
  args[0] = (tj_arg){TJ_ARG_FLOAT, {.f = mask.scale}, 0};
  args[1] = (tj_arg){TJ_ARG_INT, {.i = rows}, 0};
  args[2] = (tj_arg){TJ_ARG_INT, {.i = offset}, 0};
  return 3;
}

/* Runs the interpreter o->iters times; the time per run, or -1 on error.
 * The arguments: the pointers (y, x; --backward dx = y, y = x, dy), a stride
 * of n for each, then n (then --masked's scalars). */
static double interpret(tj_spec *s, const Host *h, const Options *o) {
  void *ptrs[3] = {h->y, h->x, h->dy};
  int count = o->backward ? 3 : 2, nargs = 2 * count + 1;
  tj_arg args[10];
  for (int i = 0; i < count; i++) {
    args[i] = (tj_arg){TJ_ARG_PTR, {.ptr = ptrs[i]}, h->bytes};
    args[count + i] = (tj_arg){TJ_ARG_INT, {.i = o->n}, 0};
  }
  args[2 * count] = (tj_arg){TJ_ARG_INT, {.i = o->n}, 0};
  if (o->masked) nargs += mask_args(o, &args[nargs]);
  double start = seconds();
  for (int i = 0; i < o->iters; i++) {
    tj_status st = tj_interpret(s, args, nargs, o->m);
    if (st != TJ_OK) {
      fprintf(stderr, "tj-softmax: %s: %s\n", tj_status_string(st), tj_spec_error(s));
      return -1.0;
    }
  }
  return (seconds() - start) / o->iters;
}

static int report(const Options *o, const tj_spec *s, double run_s, const Errors *e) {
  DataTolerance t = data_tolerance(data_elem_of(o->dtype));
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
  Host h;
  if (!host_alloc(&h, o)) return 1;
  tj_program *p = NULL;
  tj_spec *s = specialize(o, &p);
  int rc = 1;
  Errors e;
  if (s) {
    fill(&h, o);
    memset(h.y, 0xff, h.bytes); /* NaN in every dtype: unwritten elements fail */
    double run_s = interpret(s, &h, o);
    if (run_s >= 0.0) {
      check(&h, o, &e);
      rc = report(o, s, run_s, &e);
    }
  }
  host_free(&h);
  tj_spec_destroy(s);
  tj_program_destroy(p);
  return rc;
}

/* ---- the GPU path ------------------------------------------------------ */

/* What a GPU run holds: the context, device copies of x, y (and dy), two events. */
typedef struct Gpu {
  tj_context *ctx;
  uint64_t x, y, dy;
  CuEvent start, stop;
} Gpu;

static int gpu_error(Gpu *g, const char *what) {
  fprintf(stderr, "tj-softmax: %s: %s\n", what, tj_context_error(g->ctx));
  return 1;
}

/* The context (or CLI_EXIT_NO_GPU without a driver or GPU), buffers, events. */
static int gpu_open(Gpu *g, const Options *o, size_t bytes) {
  memset(g, 0, sizeof *g);
  tj_status st = tj_context_create(NULL, &g->ctx);
  if (st == TJ_ERR_NO_DRIVER || st == TJ_ERR_NO_DEVICE) {
    fprintf(stderr, "tj-softmax: %s\n%s: run `tj-softmax --interp -m %lld -n %lld` instead\n",
            tj_context_error(NULL), st == TJ_ERR_NO_DRIVER ? "no CUDA driver" : "no CUDA GPU",
            (long long)o->m, (long long)o->n);
    return CLI_EXIT_NO_GPU;
  }
  if (st != TJ_OK) return fprintf(stderr, "tj-softmax: %s\n", tj_context_error(NULL)), 1;
  if (tj_device_alloc(g->ctx, bytes, &g->x) != TJ_OK ||
      tj_device_alloc(g->ctx, bytes, &g->y) != TJ_OK ||
      (o->backward && tj_device_alloc(g->ctx, bytes, &g->dy) != TJ_OK))
    return gpu_error(g, "device memory");
  RtBinding b;
  if (rt_bind(g->ctx, &b) != TJ_OK) return gpu_error(g, "context");
  CuResult r = g->ctx->cu->cuEventCreate(&g->start, RT_EVENT_DEFAULT);
  if (r == RT_CUDA_SUCCESS) r = g->ctx->cu->cuEventCreate(&g->stop, RT_EVENT_DEFAULT);
  rt_unbind(g->ctx, &b);
  return r == RT_CUDA_SUCCESS ? 0 : (fprintf(stderr, "tj-softmax: cuEventCreate failed\n"), 1);
}

static void gpu_close(Gpu *g) {
  RtBinding b;
  if (g->ctx && rt_bind(g->ctx, &b) == TJ_OK) {
    if (g->start) g->ctx->cu->cuEventDestroy(g->start);
    if (g->stop) g->ctx->cu->cuEventDestroy(g->stop);
    rt_unbind(g->ctx, &b);
  }
  if (g->ctx) {
    tj_device_free(g->ctx, g->x);
    tj_device_free(g->ctx, g->y);
    if (g->dy) tj_device_free(g->ctx, g->dy);
  }
  tj_context_destroy(g->ctx);
}

static tj_status gpu_softmax(Gpu *g, const Options *o) {
  tj_softmax_options so = {.num_warps = (int)o->warps};
  if (o->masked) {
    tj_softmax_mask mask = mask_of(o);
    return tj_masked_softmax(g->ctx, o->dtype, o->m, o->n, g->y, o->n, g->x, o->n, &mask, NULL,
                             &so);
  }
  if (o->backward)
    return tj_softmax_backward(g->ctx, o->dtype, o->m, o->n, g->y, o->n, g->x, o->n, g->dy, o->n,
                               NULL, &so);
  if (o->log_softmax)
    return tj_log_softmax(g->ctx, o->dtype, o->m, o->n, g->y, o->n, g->x, o->n, NULL, &so);
  return tj_softmax(g->ctx, o->dtype, o->m, o->n, g->y, o->n, g->x, o->n, NULL, &so);
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int64_t count) {
  qsort(v, (size_t)count, sizeof *v, compare_doubles);
  return count % 2 ? v[count / 2] : 0.5 * (v[count / 2 - 1] + v[count / 2]);
}

/* One launch between two events; its time in microseconds, or -1. */
static double gpu_time_one(Gpu *g, const Options *o) {
  RtBinding b;
  float ms = -1.0f;
  if (rt_bind(g->ctx, &b) != TJ_OK) return -1.0;
  const RtDriver *cu = g->ctx->cu;
  CuResult r = cu->cuEventRecord(g->start, NULL);
  tj_status st = r == RT_CUDA_SUCCESS ? gpu_softmax(g, o) : TJ_ERR_DRIVER;
  if (st == TJ_OK) r = cu->cuEventRecord(g->stop, NULL);
  if (st == TJ_OK && r == RT_CUDA_SUCCESS) r = cu->cuEventSynchronize(g->stop);
  if (st == TJ_OK && r == RT_CUDA_SUCCESS) r = cu->cuEventElapsedTime(&ms, g->start, g->stop);
  rt_unbind(g->ctx, &b);
  return st == TJ_OK && r == RT_CUDA_SUCCESS ? 1e3 * ms : -1.0;
}

/* The median kernel time over o->iters launches (after one warm-up), with
 * t holding o->iters times. */
static double gpu_time(Gpu *g, const Options *o, double *t) {
  if (gpu_time_one(g, o) < 0.0) return -1.0;
  for (int64_t i = 0; i < o->iters; i++)
    if ((t[i] = gpu_time_one(g, o)) < 0.0) return -1.0;
  return median(t, o->iters);
}

/* Uploads x and a poisoned y, runs once (compiling), checks, then times. */
static int gpu_run(Gpu *g, const Options *o, Host *h) {
  tj_cache_stats s;
  Errors e;
  memset(h->y, 0xff, h->bytes); /* NaN in every dtype: unwritten elements fail */
  if (tj_copy_to_device(g->ctx, g->x, h->x, h->bytes) != TJ_OK ||
      tj_copy_to_device(g->ctx, g->y, h->y, h->bytes) != TJ_OK ||
      (o->backward && tj_copy_to_device(g->ctx, g->dy, h->dy, h->bytes) != TJ_OK))
    return gpu_error(g, "upload");
  double start = seconds();
  if (gpu_softmax(g, o) != TJ_OK) return gpu_error(g, "tj_softmax");
  if (tj_context_synchronize(g->ctx) != TJ_OK) return gpu_error(g, "the first run");
  double first_ms = (seconds() - start) * 1e3;
  if (tj_copy_to_host(g->ctx, h->y, g->y, h->bytes) != TJ_OK) return gpu_error(g, "download");
  check(h, o, &e);
  tj_context_cache_stats(g->ctx, &s);
  double us = o->m && o->n ? gpu_time(g, o, h->times) : 0.0;
  if (us < 0.0) return gpu_error(g, "timing");
  tj_device_info d;
  tj_context_device_info(g->ctx, &d);
  double bytes_moved =
      (o->backward ? 3.0 : 2.0) * (double)o->m * (double)o->n * (double)dtype_sizes[o->dtype];
  printf("tj-softmax: gpu %s M=%lld N=%lld seed=%lld on %s (sm_%d, driver %d.%d)\n",
         dtype_names[o->dtype], (long long)o->m, (long long)o->n, (long long)o->seed, d.name,
         d.arch, d.driver_version / 1000, d.driver_version % 1000 / 10);
  printf("  compile %.2f ms (codegen %.0f us + driver JIT %.2f ms); first call %.2f ms\n",
         s.codegen_us / 1e3 + s.jit_ms, s.codegen_us, s.jit_ms, first_ms);
  printf("  kernel %.2f us (median of %lld), %.1f GB/s\n", us, (long long)o->iters,
         us > 0.0 ? bytes_moved / us * 1e-3 : 0.0);
  printf("  max abs error %.3g, max error / (atol + rtol |ref|) %.3g (rtol %g, atol %g)\n",
         e.max_abs, e.max_ratio, data_tolerance(data_elem_of(o->dtype)).rtol,
         data_tolerance(data_elem_of(o->dtype)).atol);
  printf("%s\n", e.bad == 0 ? "PASS" : "FAIL");
  return e.bad == 0 ? 0 : 1;
}

/* The GPU path, through the runtime's tj_softmax. */
static int run_gpu(const Options *o) {
  Host h;
  if (!host_alloc(&h, o)) return 1;
  Gpu g;
  int rc = gpu_open(&g, o, h.bytes);
  if (rc == 0) {
    fill(&h, o);
    rc = gpu_run(&g, o, &h);
  }
  gpu_close(&g);
  host_free(&h);
  return rc;
}

int main(int argc, char **argv) {
  Options o;
  int rc = parse_args(argc, argv, &o);
  if (rc >= 0) return rc;
  return o.mode == MODE_INTERP ? run_interp(&o) : run_gpu(&o);
}
