/*
 * tj-bench — tilejit's benchmarks. One mode per run; --bandwidth is the
 * default, and only --codegen runs without a CUDA driver and GPU.
 *
 *   tj-bench --codegen   [--iters K] [--arch sm_XX] [--csv FILE]
 *   tj-bench --bandwidth [--set large|small|wide|huge|all | --n LIST] [--m M]
 *                        [--dtype f32|f16|bf16|all] [--backend ptx|nvrtc|both]
 *                        [--warps W] [--cluster C] [--split S] [--stage K] [--stash B]
 *                        [--template T]
 *                        [--reps K] [--csv FILE]
 *   tj-bench --latency   [--warps W] [--cluster C] [--split S] [--template T]
 *                        [--csv FILE]
 *   tj-bench --all       (--latency, then --bandwidth; bandwidth options apply)
 *   tj-bench --warm-start (see its section below)
 *
 * The options are the table at the end (tj-bench --help prints it, with
 * the modes each applies to); an option of another mode is a usage error.
 * --csv - writes the CSV alone to stdout, and the report to stderr.
 *
 * --codegen times tj_specialize + tj_emit_ptx (what a cache miss costs
 * before the driver's JIT) for N = 1000 and 65536, each of K runs alone.
 *
 * --bandwidth times tj_softmax per shape. The large set has M =
 * ceil(256 MiB / (4 N)) for every dtype, so x is at least 256 MiB in f32
 * (half that in f16 and bf16); the small set is M = 1024 with N = 512 ...
 * 32768, plus 8765x4096 and 4096x2048; the wide set is N = 32768 ... 2^20
 * with x of at least 256 MiB in every dtype; the huge set is M = 1 and 4
 * with N = 10^6, 10^7, 2^24 and 5*10^7; the odd set is N = 77, 197, 577,
 * 1023, 3000, 12345, 32001 and 50257 (rows at every phase of 16 bytes) with
 * x of at least 256 MiB in every dtype. --warps, --cluster, --split and
 * --template override the plan (tj_softmax_options), to compare
 * strategies. Per shape and dtype, x is fresh
 * random data (4u - 2 plus a per-row offset, u uniform) uploaded once. The
 * first call runs on a NaN-poisoned y and is checked against a float64 CPU
 * reference (every row for small problems, else the first, the last and
 * random rows) with the testing rules' tolerances (|y - ref| <= atol +
 * rtol |ref|; f32 1.3e-6/1e-5, f16 1e-3/1e-5, bf16 1.6e-2/1e-5). Then 3
 * warm-up calls and K repetitions, each preceded by an L2 flush (cuMemsetD8
 * over 512 MiB, outside the timed region) and timed by its own pair of CUDA
 * events on the legacy stream; the figure is the median. GB/s counts
 * 2*M*N*elem bytes.
 * --offset E starts x and y E elements past a 16-byte boundary (rows of odd
 * N start anywhere already). --log-softmax times tj_log_softmax instead;
 * --masked times tj_masked_softmax with attention's mask: scale 1/8, rows =
 * min(M, N) queries per matrix and the causal mask aligned to the bottom
 * right (offset N - rows), each checked against its own float64 reference;
 * GB/s still counts 2*M*N*elem, though the masked op reads only the kept
 * columns of x.
 * The copy bandwidth is measured the same way on the same buffers (x to y):
 * cuMemcpyDtoD, and a 16-byte-vector copy kernel written in PTX below and
 * loaded with tj_load_ptx; "% copy" is of the larger of the two. "% dev"
 * is of the device's copy bandwidth: the same measurement over 256 MiB at
 * the start of the run (for small problems the same-size copy pays the
 * launch and the tail too; the device's figure is what the targets use).
 *
 * --latency sets CUDA_CACHE_DISABLE=1 and TILEJIT_CACHE_DISABLE=1 before the
 * driver loads (so that every new kernel goes through codegen and the
 * driver's JIT, with no disk cache; it also applies to --all) and
 * measures: codegen (the --codegen path, 200 runs); cold compile, the first
 * tj_softmax call (codegen + JIT + launch + sync) for 8 kernels not built
 * yet, with the codegen/JIT split from the cache stats; the same through
 * NVRTC; and the host time per launch on a cache hit (M = 1, N = 32, 10000
 * calls in bursts of 100 on an idle device, and back to back: launch_rates)
 * beside tj_launch and a raw cuLaunchKernel
 * of the same kernel, and tj_function_launch of the template as a JIT
 * function (the variant compiled).
 *
 * Exit status (tools/common/cli.h): 0 success; 1 a correctness check
 * failed, or a library or driver error; 2 a usage error; 3 no CUDA driver
 * or GPU.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, setenv, gmtime_r */

#include "cli.h"
#include "data.h"
#include "tilejit.h"
#include "runtime/runtime.h" /* the driver table: events, raw launches */

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB                 ((size_t)1 << 20)
#define LARGE_X_BYTES       (256 * MIB)        /* x of the large set in f32 */
#define CODEGEN_M           65536              /* rows --codegen plans for */
#define FLUSH_BYTES         (512 * MIB)        /* L2 flush scratch (L2 is 50-60 MB) */
#define DEVICE_BUDGET       ((size_t)7 << 30)  /* x + y + scratch stay under it */
#define FULL_CHECK_ELEMENTS ((int64_t)1 << 22) /* check every row up to here */
#define SAMPLE_ELEMENTS     ((int64_t)1 << 20) /* else about this many, */
#define MIN_SAMPLE_ROWS     8                  /* in at least these rows */
#define MAX_SAMPLE_ROWS     2048               /* and at most these */
#define WARMUP              3
#define MAX_REPS            10000
#define MAX_LIST            64
#define LAUNCHES            10000
#define LAUNCH_BURST        100 /* calls between synchronizations (LAUNCHES a multiple) */
#define CODEGEN_RUNS        200
#define COLD_M              64

/* malloc / calloc that say what they could not allocate. */
static void *allocate(size_t count, size_t size, const char *what) {
  void *p = calloc(count ? count : 1, size);
  if (!p) fprintf(stderr, "tj-bench: cannot allocate %zu x %zu bytes for %s\n", count, size, what);
  return p;
}
#define COPY_CHUNK          1024 /* uint4 per program instance of the copy kernel */
#define TARGET_CODEGEN_US   100.0
#define TARGET_COLD_MS      25.0
#define TARGET_LAUNCH_US    3.0

enum Mode { MODE_CODEGEN = 1, MODE_BANDWIDTH, MODE_LATENCY, MODE_ALL, MODE_WARM_START };
enum { SET_LARGE = 1, SET_SMALL = 2, SET_WIDE = 4, SET_HUGE = 8, SET_ODD = 16 };

typedef struct Options {
  int mode;
  int iters;     /* --codegen runs */
  int arch;      /* --codegen target */
  unsigned sets; /* SET_* bits; 0: SET_LARGE unless --n */
  int64_t n_list[MAX_LIST];
  int n_count;
  int64_t m;                 /* 0: the set's M, or the 256 MiB rule with --n */
  unsigned dtypes, backends; /* one bit per tj_dtype, per tj_backend */
  int reps;
  int offset; /* --offset: elements from a 16-byte boundary to x's and y's start */
  int log_softmax; /* --log-softmax: tj_log_softmax instead of tj_softmax */
  int masked;      /* --masked: tj_masked_softmax (masked_of) instead */
  const char *csv_path;
  int which_template;      /* --template, for plan */
  tj_softmax_options plan; /* --warps, --cluster, --split, --stage, --stash, --template */
} Options;

typedef struct Shape {
  int64_t m, n; /* m 0: ceil(256 MiB / (elem N)) for the case's dtype */
} Shape;

static const char *const dtype_names[TJ_DTYPE_COUNT] = {"f32", "f16", "bf16"};
static const char *const dtype_choices[] = {"f32", "f16", "bf16", "all", NULL};
static const size_t dtype_sizes[TJ_DTYPE_COUNT] = {4, 2, 2};
static const char *const backend_names[TJ_BACKEND_COUNT] = {"ptx", "nvrtc"};
static const char *const backend_choices[] = {"ptx", "nvrtc", "both", NULL};
static const char *const set_choices[] = {"large", "small", "wide", "huge", "odd", "all", NULL};
static const char *const template_choices[] = {"auto", "single", "online", NULL};
static const int64_t large_ns[] = {32,   64,   128,  256,   500,   512,   1000,   1024,
                                   2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144};
static const Shape small_shapes[] = {{1024, 512},   {1024, 1024}, {1024, 2048},
                                     {1024, 4096},  {1024, 8192}, {1024, 16384},
                                     {1024, 32768}, {8765, 4096}, {4096, 2048}};
static const int64_t wide_ns[] = {32768, 65536, 131072, 262144, 524288, 1048576};
static const int64_t odd_ns[] = {77, 197, 577, 1023, 3000, 12345, 32001, 50257};
static const Shape huge_shapes[] = {{1, 1000000}, {1, 10000000}, {1, 16777216}, {1, 50000000},
                                    {4, 1000000}, {4, 10000000}, {4, 16777216}, {4, 50000000}};
/* Cold compiles: n is a kernel argument, not part of the cache key, so
 * each N here has its own BLOCK (128 ... 16384) and hence its own kernel. */
static const int64_t cold_ns[] = {100, 200, 400, 800, 1600, 3200, 6400, 12800};
#define COLD_COUNT ((int)(sizeof cold_ns / sizeof cold_ns[0]))

/* ---- small helpers ----------------------------------------------------- */

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int64_t count) {
  qsort(v, (size_t)count, sizeof *v, by_value);
  return count % 2 ? v[count / 2] : 0.5 * (v[count / 2 - 1] + v[count / 2]);
}

static const char *verdict(double value, double target) {
  return value <= target ? "met" : "MISSED";
}

/* GB/s of bytes moved in us microseconds. */
static double gbps(double bytes, double us) { return us > 0.0 ? bytes / us * 1e-3 : 0.0; }


/* ---- CSV ---------------------------------------------------------------- */

/* One CSV line: section,m,n,dtype,backend,metric,value,unit. */
typedef struct CsvKey {
  const char *section;
  int64_t m, n;
  const char *dtype, *backend;
} CsvKey;

/* The file of --csv with its header; NULL after saying why. --csv - takes
 * stdout for the CSV alone, and the report goes to stderr. */
static FILE *csv_open(const char *path) {
  FILE *f = strcmp(path, "-") ? cli_open_output("tj-bench", path) : cli_take_stdout("tj-bench");
  if (f) fprintf(f, "section,m,n,dtype,backend,metric,value,unit\n");
  return f;
}

static void csv_row(FILE *f, const CsvKey *k, const char *metric, double value, const char *unit) {
  if (!f) return;
  fprintf(f, "%s,%lld,%lld,%s,%s,%s,%.6g,%s\n", k->section, (long long)k->m, (long long)k->n,
          k->dtype, k->backend, metric, value, unit);
}

/* ---- --codegen --------------------------------------------------------- */

typedef struct CodegenStats {
  double median, p10, p90;
  int64_t block;
  tj_softmax_plan plan;
  size_t bytes;
} CodegenStats;

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

/* runs specializations + emissions of softmax for (n, dtype), each timed. */
static int codegen_stats(int64_t n, tj_dtype dtype, int arch, long runs, CodegenStats *out) {
  tj_program *p = NULL;
  tj_spec_options o;
  double *times = allocate((size_t)runs, sizeof *times, "codegen times");
  if (!times) return 1;
  tj_softmax_plan plan;
  int rc = tj_softmax_plan_for(NULL, dtype, CODEGEN_M, n, NULL, &plan) != TJ_OK ||
           tj_softmax_program(plan.which, n, &p) != TJ_OK ||
           tj_softmax_spec_options(&plan, dtype, n, &o) != TJ_OK;
  if (rc) fprintf(stderr, "tj-bench: no softmax program for n = %lld\n", (long long)n);
  o.align = 16;
  for (long i = 0; i < runs && !rc; i++)
    rc = (times[i] = codegen_once(p, &o, arch, &out->bytes)) < 0;
  if (!rc) {
    qsort(times, (size_t)runs, sizeof *times, by_value);
    out->median = times[runs / 2], out->p10 = times[runs / 10], out->p90 = times[runs * 9 / 10];
    out->block = o.block;
    out->plan = plan;
  }
  free(times);
  tj_program_destroy(p);
  return rc;
}

/* One line of --codegen, and its CSV rows (M is the plan's). */
static int codegen_row(const Options *opt, int64_t n, tj_dtype d, FILE *csv) {
  CodegenStats s;
  if (codegen_stats(n, d, opt->arch, opt->iters, &s)) return 1;
  printf("softmax %-6s N=%-6lld %-5s BLOCK=%-5lld cluster %-2d split %-3d median %7.1f us   "
         "p10 %7.1f us   p90 %7.1f us   %zu bytes of PTX\n",
         s.plan.which == TJ_SOFTMAX_SINGLE ? "single" : "online", (long long)n, dtype_names[d],
         (long long)s.block, s.plan.cluster, s.plan.split, s.median, s.p10, s.p90, s.bytes);
  CsvKey key = {"codegen", CODEGEN_M, n, dtype_names[d], "ptx"};
  csv_row(csv, &key, "codegen_us", s.median, "us");
  csv_row(csv, &key, "codegen_p10_us", s.p10, "us");
  csv_row(csv, &key, "codegen_p90_us", s.p90, "us");
  csv_row(csv, &key, "ptx_bytes", (double)s.bytes, "bytes");
  return 0;
}

static int run_codegen(const Options *opt) {
  static const int64_t ns[] = {1000, 65536};
  FILE *csv = NULL;
  int rc = 0;
  if (opt->csv_path && !(csv = csv_open(opt->csv_path))) return CLI_EXIT_FAILED;
  printf("tj-bench --codegen: tj_specialize + tj_emit_ptx, sm_%d, %d runs each\n", opt->arch,
         opt->iters);
  for (size_t i = 0; i < sizeof ns / sizeof ns[0] && !rc; i++)
    for (int d = 0; d < TJ_DTYPE_COUNT && !rc; d++) rc = codegen_row(opt, ns[i], (tj_dtype)d, csv);
  fflush(stdout);
  if (csv && !cli_close_output("tj-bench", opt->csv_path, csv)) rc = CLI_EXIT_FAILED;
  return rc;
}

/* ---- the GPU: context, events, CSV ---------------------------------- */

typedef struct Bench {
  const Options *opt;
  tj_context *ctx;
  const RtDriver *cu;
  tj_device_info dev;
  RtBinding binding;
  bool bound;
  CuEvent *start, *stop; /* one pair per repetition */
  double *times;         /* one per repetition */
  uint64_t flush;        /* FLUSH_BYTES of scratch */
  tj_kernel *copy;       /* the copy kernel, loaded on first use */
  FILE *csv;
  uint64_t seed, rng;
  double copy_peak[2]; /* the best cuMemcpyDtoD and copy-kernel GB/s */
  double device_copy;  /* the better of the two over 256 MiB, first in the run */
  int failures;        /* correctness checks that failed */
  int errors;          /* library or driver errors */
  int said_no_nvrtc;   /* why NVRTC is missing was printed */
} Bench;

static tj_status check_driver(Bench *b, const char *call, CuResult r) {
  if (r == RT_CUDA_SUCCESS) return TJ_OK;
  char name[256];
  rt_driver_describe(b->cu, r, name, sizeof name);
  fprintf(stderr, "tj-bench: %s failed: %s\n", call, name);
  return TJ_ERR_DRIVER;
}

static tj_status check_tj(Bench *b, const char *call, tj_status st) {
  if (st != TJ_OK && st != TJ_ERR_NO_NVRTC)
    fprintf(stderr, "tj-bench: %s: %s\n", call, tj_context_error(b->ctx));
  return st;
}

/* "tj-bench: no CUDA driver (why); ...", without the prefixes of why. */
static int no_driver(tj_status st) {
  static const char *const prefixes[] = {"tj_context_create: ", "no CUDA driver: "};
  const char *why = tj_context_error(NULL);
  for (int i = 0; i < 2; i++)
    if (!strncmp(why, prefixes[i], strlen(prefixes[i]))) why += strlen(prefixes[i]);
  fprintf(stderr, "tj-bench: %s (%s); only --codegen runs here\n",
          st == TJ_ERR_NO_DRIVER ? "no CUDA driver" : "no CUDA GPU", why);
  return CLI_EXIT_NO_GPU;
}

static bool create_events(Bench *b) {
  int reps = b->opt->reps;
  b->start = allocate((size_t)reps, sizeof *b->start, "events");
  b->stop = allocate((size_t)reps, sizeof *b->stop, "events");
  b->times = allocate((size_t)reps, sizeof *b->times, "event times");
  if (!b->start || !b->stop || !b->times) return false;
  for (int i = 0; i < reps; i++)
    if (check_driver(b, "cuEventCreate", b->cu->cuEventCreate(&b->start[i], RT_EVENT_DEFAULT)) ||
        check_driver(b, "cuEventCreate", b->cu->cuEventCreate(&b->stop[i], RT_EVENT_DEFAULT)))
      return false;
  return true;
}

/* The context (CLI_EXIT_NO_GPU without a driver or GPU), events, flush
 * scratch, CSV. */
static int bench_open(Bench *b, const Options *o) {
  memset(b, 0, sizeof *b);
  b->opt = o;
  b->seed = b->rng = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t)clock();
  tj_status st = tj_context_create(NULL, &b->ctx);
  if (st == TJ_ERR_NO_DRIVER || st == TJ_ERR_NO_DEVICE) return no_driver(st);
  if (st != TJ_OK) return fprintf(stderr, "tj-bench: %s\n", tj_context_error(NULL)), 1;
  b->cu = b->ctx->cu;
  if (check_tj(b, "device info", tj_context_device_info(b->ctx, &b->dev)) ||
      check_tj(b, "context", rt_bind(b->ctx, &b->binding)))
    return 1;
  b->bound = true;
  if (!create_events(b)) return 1;
  if (check_tj(b, "flush buffer", tj_device_alloc(b->ctx, FLUSH_BYTES, &b->flush))) return 1;
  if (o->csv_path && !(b->csv = csv_open(o->csv_path))) return 1;
  return 0;
}

static void bench_close(Bench *b) {
  if (!b->ctx) return;
  for (int i = 0; b->start && b->stop && i < b->opt->reps; i++) {
    if (b->start[i]) b->cu->cuEventDestroy(b->start[i]);
    if (b->stop[i]) b->cu->cuEventDestroy(b->stop[i]);
  }
  free(b->start);
  free(b->stop);
  free(b->times);
  if (b->flush) tj_device_free(b->ctx, b->flush);
  if (b->bound) rt_unbind(b->ctx, &b->binding);
  tj_context_destroy(b->ctx);
  if (b->csv) cli_close_output("tj-bench", b->opt->csv_path, b->csv);
}

static void print_header(const Bench *b) {
  char date[64];
  struct tm tm;
  time_t t = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime_r(&t, &tm));
  printf("tj-bench: %s, %d SMs, sm_%d, driver %d.%d, tilejit %s, %s, seed %llu\n", b->dev.name,
         b->dev.sm_count, b->dev.arch, b->dev.driver_version / 1000,
         b->dev.driver_version % 1000 / 10, tj_version(), date, (unsigned long long)b->seed);
}

static void csv(Bench *b, const CsvKey *k, const char *metric, double value, const char *unit) {
  csv_row(b->csv, k, metric, value, unit);
}

/* ---- one problem: buffers, data, the softmax call ---------------------- */

typedef struct Case {
  int64_t m, n;
  tj_dtype dtype;
  tj_backend backend;
  size_t bytes;  /* of x and of y */
  uint64_t x, y; /* device: the matrices, --offset elements into their buffers */
  void *host_x;
  uint64_t x_buffer, y_buffer; /* 16-byte aligned, bytes + 16 */
} Case;

/* x = 4u - 2 plus a row offset (+-100 in f32, +-20 in 16 bits), so that the
 * max subtraction matters; fresh for every case. */
static void fill_x(Bench *b, Case *c) {
  double spread = c->dtype == TJ_DTYPE_F32 ? 100.0 : 20.0;
  for (int64_t r = 0; r < c->m; r++) {
    double offset = (2.0 * data_uniform(&b->rng) - 1.0) * spread - 2.0;
    for (int64_t i = r * c->n, end = i + c->n; i < end; i++)
      data_set(c->host_x, data_elem_of(c->dtype), i, 4.0 * data_uniform(&b->rng) + offset);
  }
}

/* Allocates x and y (within DEVICE_BUDGET with the flush scratch), fills x
 * on the host and uploads it. */
static tj_status case_open(Bench *b, Case *c) {
  size_t elem = dtype_sizes[c->dtype];
  if ((uint64_t)c->m > (DEVICE_BUDGET - FLUSH_BYTES) / 2 / elem / (uint64_t)c->n) {
    fprintf(stderr, "tj-bench: %lldx%lld %s is over the device memory budget\n", (long long)c->m,
            (long long)c->n, dtype_names[c->dtype]);
    return TJ_ERR_INVALID_ARGUMENT;
  }
  c->bytes = (size_t)c->m * (size_t)c->n * elem;
  if (!(c->host_x = allocate(c->bytes, 1, "x on the host"))) return TJ_ERR_OUT_OF_MEMORY;
  fill_x(b, c);
  /* --offset E shifts x and y by E elements: room for them (at 20 bytes and
   * more, f32 at offsets from 5, the upload ran past a 16-byte margin). */
  size_t shift = (size_t)b->opt->offset * elem;
  tj_status st = tj_device_alloc(b->ctx, c->bytes + shift + 16, &c->x_buffer);
  if (st == TJ_OK) st = tj_device_alloc(b->ctx, c->bytes + shift + 16, &c->y_buffer);
  c->x = c->x_buffer + shift;
  c->y = c->y_buffer + shift;
  if (st == TJ_OK) st = tj_copy_to_device(b->ctx, c->x, c->host_x, c->bytes);
  return check_tj(b, "device buffers", st);
}

static void case_close(Bench *b, Case *c) {
  if (c->x_buffer) tj_device_free(b->ctx, c->x_buffer);
  if (c->y_buffer) tj_device_free(b->ctx, c->y_buffer);
  free(c->host_x);
  c->x = c->y = c->x_buffer = c->y_buffer = 0;
  c->host_x = NULL;
}

/* Enqueues one operation on the legacy stream. */
typedef tj_status (*Enqueue)(Bench *b, void *arg);

/* --masked's mask: attention's of head size 64 (scale 1/8), rows =
 * min(M, N) queries per matrix, causal and aligned to the bottom right. */
static tj_softmax_mask masked_of(const Case *c) {
  int64_t rows = c->m < c->n ? c->m : c->n;
  return (tj_softmax_mask){.scale = 0.125f, .causal = 1, .rows = rows, .offset = c->n - rows};
}

static tj_status enqueue_softmax(Bench *b, void *arg) {
  const Case *c = arg;
  tj_softmax_options so = b->opt->plan;
  so.backend = c->backend;
  if (b->opt->masked) {
    tj_softmax_mask mask = masked_of(c);
    return check_tj(
        b, "tj_masked_softmax",
        tj_masked_softmax(b->ctx, c->dtype, c->m, c->n, c->y, c->n, c->x, c->n, &mask, NULL, &so));
  }
  if (b->opt->log_softmax)
    return check_tj(b, "tj_log_softmax", tj_log_softmax(b->ctx, c->dtype, c->m, c->n, c->y, c->n,
                                                        c->x, c->n, NULL, &so));
  return check_tj(b, "tj_softmax",
                  tj_softmax(b->ctx, c->dtype, c->m, c->n, c->y, c->n, c->x, c->n, NULL, &so));
}

/* ---- timing ------------------------------------------------------------ */

static tj_status flush_l2(Bench *b) {
  return check_driver(b, "cuMemsetD8", b->cu->cuMemsetD8(b->flush, 0x5a, FLUSH_BYTES));
}

static tj_status record(Bench *b, CuEvent e) {
  return check_driver(b, "cuEventRecord", b->cu->cuEventRecord(e, NULL));
}

/* WARMUP untimed calls of op, then reps, each after an L2 flush and between
 * its own pair of events; the median in us, or -1 on a failure. */
static double time_op(Bench *b, Enqueue op, void *arg) {
  int reps = b->opt->reps;
  for (int i = 0; i < WARMUP; i++)
    if (op(b, arg) != TJ_OK) return -1.0;
  for (int i = 0; i < reps; i++)
    if (flush_l2(b) || record(b, b->start[i]) || op(b, arg) || record(b, b->stop[i])) return -1.0;
  if (check_driver(b, "cuEventSynchronize", b->cu->cuEventSynchronize(b->stop[reps - 1])))
    return -1.0;
  for (int i = 0; i < reps; i++) {
    float ms = 0.0f;
    if (check_driver(b, "cuEventElapsedTime",
                     b->cu->cuEventElapsedTime(&ms, b->start[i], b->stop[i])))
      return -1.0;
    b->times[i] = 1e3 * ms;
  }
  return median(b->times, reps);
}

/* ---- copy bandwidth ---------------------------------------------------- */

/* The copy kernel, in the kernel ABI of generated code: program instance i
 * copies uint4s [1024 i, 1024 i + 1024) of src to dst, four per thread,
 * 4 KiB apart; CTAs stride over the instances (the hidden last parameter). */
static const char copy_ptx_body[] =
    ".visible .entry tj_bench_copy(\n"
    "\t.param .u64 p_dst,\n\t.param .u64 p_src,\n\t.param .u64 p_count16,\n"
    "\t.param .u64 tj_programs\n)\n"
    ".reqntid 256, 1, 1\n"
    "{\n"
    "\t.reg .pred %p<6>;\n\t.reg .b32 %r<20>;\n\t.reg .b64 %rd<15>;\n\n"
    "\tld.param.u64 %rd1, [p_dst];\n\tcvta.to.global.u64 %rd1, %rd1;\n"
    "\tld.param.u64 %rd2, [p_src];\n\tcvta.to.global.u64 %rd2, %rd2;\n"
    "\tld.param.u64 %rd3, [p_count16];\n\tld.param.u64 %rd4, [tj_programs];\n"
    "\tmov.u32 %r1, %ctaid.x;\n\tcvt.u64.u32 %rd5, %r1;\n"
    "\tmov.u32 %r2, %nctaid.x;\n\tcvt.u64.u32 %rd6, %r2;\n"
    "\tmov.u32 %r3, %tid.x;\n\tcvt.u64.u32 %rd7, %r3;\n"
    "\tsetp.ge.u64 %p1, %rd5, %rd4;\n\t@%p1 bra.uni $Ldone;\n"
    "$Linst:\n"
    "\tshl.b64 %rd8, %rd5, 10;\n\tadd.s64 %rd8, %rd8, %rd7;\n"
    "\tadd.s64 %rd9, %rd8, 256;\n\tadd.s64 %rd10, %rd8, 512;\n\tadd.s64 %rd11, %rd8, 768;\n"
    "\tsetp.lt.u64 %p2, %rd8, %rd3;\n\tsetp.lt.u64 %p3, %rd9, %rd3;\n"
    "\tsetp.lt.u64 %p4, %rd10, %rd3;\n\tsetp.lt.u64 %p5, %rd11, %rd3;\n"
    "\tshl.b64 %rd12, %rd8, 4;\n\tadd.s64 %rd13, %rd2, %rd12;\n\tadd.s64 %rd14, %rd1, %rd12;\n"
    "\t@%p2 ld.global.v4.b32 {%r4, %r5, %r6, %r7}, [%rd13];\n"
    "\t@%p3 ld.global.v4.b32 {%r8, %r9, %r10, %r11}, [%rd13+4096];\n"
    "\t@%p4 ld.global.v4.b32 {%r12, %r13, %r14, %r15}, [%rd13+8192];\n"
    "\t@%p5 ld.global.v4.b32 {%r16, %r17, %r18, %r19}, [%rd13+12288];\n"
    "\t@%p2 st.global.v4.b32 [%rd14], {%r4, %r5, %r6, %r7};\n"
    "\t@%p3 st.global.v4.b32 [%rd14+4096], {%r8, %r9, %r10, %r11};\n"
    "\t@%p4 st.global.v4.b32 [%rd14+8192], {%r12, %r13, %r14, %r15};\n"
    "\t@%p5 st.global.v4.b32 [%rd14+12288], {%r16, %r17, %r18, %r19};\n"
    "\tadd.s64 %rd5, %rd5, %rd6;\n\tsetp.lt.u64 %p1, %rd5, %rd4;\n\t@%p1 bra.uni $Linst;\n"
    "$Ldone:\n\tret;\n}\n";

static tj_status load_copy_kernel(Bench *b) {
  if (b->copy) return TJ_OK;
  char ptx[sizeof copy_ptx_body + 128];
  int head = snprintf(ptx, sizeof ptx, ".version %d.%d\n.target sm_%d\n.address_size 64\n\n",
                      b->dev.ptx_version / 10, b->dev.ptx_version % 10, b->dev.target_arch);
  memcpy(ptx + head, copy_ptx_body, sizeof copy_ptx_body);
  return check_tj(b, "tj_load_ptx (copy kernel)",
                  tj_load_ptx(b->ctx, ptx, "tj_bench_copy", &b->copy));
}

/* The copies move the aligned buffers' first c->bytes. */
static tj_status enqueue_dtod(Bench *b, void *arg) {
  const Case *c = arg;
  return check_driver(b, "cuMemcpyDtoD", b->cu->cuMemcpyDtoD(c->y_buffer, c->x_buffer, c->bytes));
}

static tj_status enqueue_copy_kernel(Bench *b, void *arg) {
  const Case *c = arg;
  int64_t count16 = (int64_t)(c->bytes / 16);
  tj_arg args[3] = {{TJ_ARG_INT, {.i = (int64_t)c->y_buffer}, 0},
                    {TJ_ARG_INT, {.i = (int64_t)c->x_buffer}, 0},
                    {TJ_ARG_INT, {.i = count16}, 0}};
  int64_t grid = (count16 + COPY_CHUNK - 1) / COPY_CHUNK;
  return check_tj(b, "tj_launch (copy kernel)", tj_launch(b->ctx, b->copy, args, 3, grid, NULL));
}

typedef struct Copy {
  double gbps[2]; /* cuMemcpyDtoD, the copy kernel; 0 when not measured */
} Copy;

/* Whether y's buffer holds x's in its first and last MiB of copied bytes. */
static bool copy_matches(Bench *b, const Case *c, size_t copied) {
  size_t span = copied < MIB ? copied : MIB;
  char *buf = allocate(span, 2, "the copy check");
  if (!buf) return false;
  bool ok = true;
  for (int end = 0; end < 2 && ok; end++) {
    size_t at = end ? copied - span : 0;
    ok = tj_copy_to_host(b->ctx, buf, c->y_buffer + at, span) == TJ_OK &&
         tj_copy_to_host(b->ctx, buf + span, c->x_buffer + at, span) == TJ_OK &&
         memcmp(buf, buf + span, span) == 0;
  }
  free(buf);
  if (!ok) fprintf(stderr, "tj-bench: the copy kernel did not copy x to y\n");
  return ok;
}

/* Both copies of x to y, timed like the softmax; read + write counted. The
 * copy kernel writes over a poisoned y and its result is checked. */
static void measure_copy(Bench *b, Case *c, Copy *out) {
  double dtod = time_op(b, enqueue_dtod, c), kernel = -1.0;
  size_t copied = c->bytes / 16 * 16; /* the copy kernel moves whole uint4s */
  if (copied && load_copy_kernel(b) == TJ_OK &&
      !check_driver(b, "cuMemsetD8", b->cu->cuMemsetD8(c->y_buffer, 0xff, c->bytes)))
    kernel = time_op(b, enqueue_copy_kernel, c);
  if (kernel > 0.0 && !copy_matches(b, c, copied)) kernel = -1.0;
  out->gbps[0] = dtod > 0.0 ? gbps(2.0 * (double)c->bytes, dtod) : 0.0;
  out->gbps[1] = kernel > 0.0 ? gbps(2.0 * (double)copied, kernel) : 0.0;
  for (int i = 0; i < 2; i++)
    if (out->gbps[i] > b->copy_peak[i]) b->copy_peak[i] = out->gbps[i];
  if (dtod < 0.0 || (copied && kernel < 0.0)) b->errors++;
}

/* ---- correctness ------------------------------------------------------- */

typedef struct Check {
  double max_abs, max_ratio; /* max |y - ref| and max |y - ref| / (atol + rtol |ref|) */
  int64_t rows;
  bool pass;
} Check;

/* Compares one row of y with the float64 softmax (or log-softmax, or
 * masked softmax) of row r of x. */
static void check_row(const Case *c, const Options *o, const void *y_row, int64_t r, double *ref,
                      Check *k) {
  const void *x_row = (const char *)c->host_x + (size_t)(r * c->n) * dtype_sizes[c->dtype];
  tj_elem elem = data_elem_of(c->dtype);
  DataTolerance t = data_tolerance(elem);
  tj_softmax_mask mask = masked_of(c);
  if (o->masked)
    data_row_masked_reference(x_row, elem, c->n, r, c->m, &mask, ref);
  else
    data_row_reference(x_row, elem, c->n, o->log_softmax, ref);
  for (int64_t i = 0; i < c->n; i++) {
    double want = ref[i], err = fabs(data_get(y_row, elem, i) - want);
    double ratio = err / (t.atol + t.rtol * fabs(want));
    if (!(ratio <= 1.0)) k->pass = false;
    if (isnan(err)) err = ratio = INFINITY; /* an unwritten (NaN) element */
    if (err > k->max_abs) k->max_abs = err;
    if (ratio > k->max_ratio) k->max_ratio = ratio;
  }
  k->rows++;
}

/* The i-th row to check: all of them for small problems, else the first,
 * the last and random ones. */
static int64_t row_to_check(Bench *b, const Case *c, int64_t i, bool all) {
  if (all || i == 0) return i;
  return i == 1 ? c->m - 1 : (int64_t)(data_next(&b->rng) % (uint64_t)c->m);
}

static int64_t rows_to_check(const Case *c, bool all) {
  if (all) return c->m;
  int64_t rows = SAMPLE_ELEMENTS / c->n;
  rows = rows < MIN_SAMPLE_ROWS ? MIN_SAMPLE_ROWS : rows > MAX_SAMPLE_ROWS ? MAX_SAMPLE_ROWS : rows;
  return rows < c->m ? rows : c->m;
}

/* One tj_softmax on a NaN-poisoned y, then the check of sampled rows. */
static tj_status check_case(Bench *b, Case *c, Check *k) {
  size_t row_bytes = (size_t)c->n * dtype_sizes[c->dtype];
  bool all = c->m * c->n <= FULL_CHECK_ELEMENTS || rows_to_check(c, false) == c->m;
  memset(k, 0, sizeof *k);
  k->pass = true;
  tj_status st = check_driver(b, "cuMemsetD8", b->cu->cuMemsetD8(c->y, 0xff, c->bytes));
  if (st == TJ_OK) st = enqueue_softmax(b, c);
  if (st == TJ_OK) st = check_tj(b, "the first run", tj_context_synchronize(b->ctx));
  void *y_row = allocate(row_bytes, 1, "a row of y");
  double *ref = allocate((size_t)c->n, sizeof *ref, "the reference row");
  if (st == TJ_OK && (!y_row || !ref)) st = TJ_ERR_OUT_OF_MEMORY;
  for (int64_t i = 0, rows = rows_to_check(c, all); st == TJ_OK && i < rows; i++) {
    int64_t r = row_to_check(b, c, i, all);
    st = check_tj(b, "download",
                  tj_copy_to_host(b->ctx, y_row, c->y + (uint64_t)r * row_bytes, row_bytes));
    if (st == TJ_OK) check_row(c, b->opt, y_row, r, ref, k);
  }
  free(y_row);
  free(ref);
  return st;
}

/* ---- --bandwidth ------------------------------------------------------- */

static int64_t large_m(int64_t n) {
  int64_t row = n * (int64_t)sizeof(float);
  return ((int64_t)LARGE_X_BYTES + row - 1) / row;
}

/* The shapes of the chosen sets, or of --n / --m. Returns the count. */
static int shape_list(const Options *o, Shape *out) {
  int count = 0;
  if (o->n_count) {
    for (int i = 0; i < o->n_count; i++)
      out[count++] = (Shape){o->m ? o->m : large_m(o->n_list[i]), o->n_list[i]};
    return count;
  }
  for (size_t i = 0; (o->sets & SET_LARGE) && i < sizeof large_ns / sizeof large_ns[0]; i++)
    out[count++] = (Shape){o->m ? o->m : large_m(large_ns[i]), large_ns[i]};
  for (size_t i = 0; (o->sets & SET_SMALL) && i < sizeof small_shapes / sizeof small_shapes[0]; i++)
    out[count++] = (Shape){o->m ? o->m : small_shapes[i].m, small_shapes[i].n};
  for (size_t i = 0; (o->sets & SET_WIDE) && i < sizeof wide_ns / sizeof wide_ns[0]; i++)
    out[count++] = (Shape){o->m, wide_ns[i]};
  for (size_t i = 0; (o->sets & SET_HUGE) && i < sizeof huge_shapes / sizeof huge_shapes[0]; i++)
    out[count++] = huge_shapes[i];
  for (size_t i = 0; (o->sets & SET_ODD) && i < sizeof odd_ns / sizeof odd_ns[0]; i++)
    out[count++] = (Shape){o->m, odd_ns[i]};
  return count;
}

static void print_bandwidth_header(const Bench *b) {
  if (b->opt->log_softmax) printf("\nthe op: tj_log_softmax");
  if (b->opt->masked)
    printf("\nthe op: tj_masked_softmax, scale 1/8, causal over rows = min(M, N) queries per "
           "matrix, offset N - rows\n(bottom right); GB/s counts 2*M*N*elem, though it reads "
           "only the kept columns of x");
  printf("\nbandwidth: GB/s = 2*M*N*elem / median kernel time; median of %d reps, each after an "
         "L2 flush\n(cuMemsetD8 over 512 MiB) and timed by its own CUDA events. Large set: M = "
         "ceil(256 MiB / (4 N))\nfor every dtype (x >= 256 MiB in f32, half that in f16/bf16). "
         "copy = cuMemcpyDtoD and a 16-byte\ncopy kernel over the same bytes, read + write; "
         "%% copy is of the larger. err/tol = max |y - ref| /\n(atol + rtol |ref|) over the "
         "checked rows (PASS if <= 1).\n",
         b->opt->reps);
  if (b->opt->offset)
    printf("x and y start %d elements past a 16-byte boundary (--offset).\n", b->opt->offset);
  printf("%9s %8s %-5s %-7s %10s %8s %7s %6s %9s %9s %9s %6s\n", "M", "N", "dtype", "backend",
         "us", "GB/s", "%copy", "%dev", "dtod GB/s", "kern GB/s", "err/tol", "check");
}

static void print_row(Bench *b, const Case *c, const Copy *copy, double us, const Check *k) {
  double bw = gbps(2.0 * (double)c->bytes, us);
  double best = copy->gbps[0] > copy->gbps[1] ? copy->gbps[0] : copy->gbps[1];
  double pct = best > 0.0 ? 100.0 * bw / best : 0.0;
  double dev = b->device_copy > 0.0 ? 100.0 * bw / b->device_copy : 0.0;
  printf("%9lld %8lld %-5s %-7s %10.2f %8.1f %6.1f%% %5.1f%% %9.1f %9.1f %9.3g %6s\n",
         (long long)c->m, (long long)c->n, dtype_names[c->dtype], backend_names[c->backend], us, bw,
         pct, dev, copy->gbps[0], copy->gbps[1], k->max_ratio, k->pass ? "PASS" : "FAIL");
  fflush(stdout);
  CsvKey key = {"bandwidth", c->m, c->n, dtype_names[c->dtype], backend_names[c->backend]};
  csv(b, &key, "kernel_us", us, "us");
  csv(b, &key, "gbps", bw, "GB/s");
  csv(b, &key, "pct_copy", pct, "%");
  csv(b, &key, "pct_device_copy", dev, "%");
  csv(b, &key, "copy_dtod_gbps", copy->gbps[0], "GB/s");
  csv(b, &key, "copy_kernel_gbps", copy->gbps[1], "GB/s");
  csv(b, &key, "max_abs_err", k->max_abs, "");
  csv(b, &key, "max_err_over_tol", k->max_ratio, "");
  csv(b, &key, "checked_rows", (double)k->rows, "rows");
  csv(b, &key, "pass", k->pass, "");
}

static void print_error_row(const Case *c, const char *what) {
  printf("%9lld %7lld %-5s %-7s %s\n", (long long)c->m, (long long)c->n, dtype_names[c->dtype],
         backend_names[c->backend], what);
  fflush(stdout);
}

/* Check, then time, the softmax of one case with c->backend. */
static void bench_backend(Bench *b, Case *c, const Copy *copy) {
  Check k;
  tj_status st = check_case(b, c, &k);
  if (st == TJ_ERR_NO_NVRTC) {
    if (!b->said_no_nvrtc++) fprintf(stderr, "tj-bench: %s\n", tj_context_error(b->ctx));
    print_error_row(c, "skipped: no NVRTC");
    return;
  }
  double us = st == TJ_OK ? time_op(b, enqueue_softmax, c) : -1.0;
  if (us < 0.0) {
    b->errors++;
    print_error_row(c, "ERROR (see stderr)");
    return;
  }
  if (!k.pass) b->failures++;
  print_row(b, c, copy, us, &k);
}

static void bench_shape(Bench *b, Shape shape, tj_dtype dtype) {
  int64_t row = shape.n * (int64_t)dtype_sizes[dtype];
  int64_t m = shape.m ? shape.m : ((int64_t)LARGE_X_BYTES + row - 1) / row;
  Case c = {m, shape.n, dtype, TJ_BACKEND_PTX, 0, 0, 0, NULL, 0, 0};
  Copy copy = {{0.0, 0.0}};
  if (case_open(b, &c) != TJ_OK) {
    b->errors++;
    print_error_row(&c, "ERROR (see stderr)");
  } else {
    measure_copy(b, &c, &copy);
    for (int be = 0; be < TJ_BACKEND_COUNT; be++)
      if (b->opt->backends & 1u << be) c.backend = (tj_backend)be, bench_backend(b, &c, &copy);
  }
  case_close(b, &c);
}

/* The device's copy bandwidth: the copies of 256 MiB, for "% dev". */
static void measure_device_copy(Bench *b) {
  Case c = {(int64_t)LARGE_X_BYTES / 4096, 1024, TJ_DTYPE_F32, TJ_BACKEND_PTX, 0, 0, 0, NULL, 0, 0};
  Copy copy = {{0.0, 0.0}};
  if (case_open(b, &c) == TJ_OK) measure_copy(b, &c, &copy);
  case_close(b, &c);
  b->device_copy = copy.gbps[0] > copy.gbps[1] ? copy.gbps[0] : copy.gbps[1];
  printf("device copy over 256 MiB: cuMemcpyDtoD %.1f GB/s, copy kernel %.1f GB/s\n",
         copy.gbps[0], copy.gbps[1]);
}

static int run_bandwidth(Bench *b) {
  Shape shapes[MAX_LIST + 64];
  int count = shape_list(b->opt, shapes);
  measure_device_copy(b);
  print_bandwidth_header(b);
  for (int d = 0; d < TJ_DTYPE_COUNT; d++)
    for (int i = 0; (b->opt->dtypes & 1u << d) && i < count; i++)
      bench_shape(b, shapes[i], (tj_dtype)d);
  printf("copy, best of this run: cuMemcpyDtoD %.1f GB/s, copy kernel %.1f GB/s\n", b->copy_peak[0],
         b->copy_peak[1]);
  printf("bandwidth: %d correctness failure%s, %d error%s\n", b->failures,
         b->failures == 1 ? "" : "s", b->errors, b->errors == 1 ? "" : "s");
  return b->failures || b->errors ? 1 : 0;
}

/* ---- --latency --------------------------------------------------------- */

static int latency_codegen(Bench *b) {
  static const int64_t ns[] = {1000, 65536};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    CodegenStats s;
    if (codegen_stats(ns[i], TJ_DTYPE_F32, b->dev.target_arch, CODEGEN_RUNS, &s)) return 1;
    printf("codegen         N=%-6lld f32  %8.1f us  median of %d (p10 %.1f, p90 %.1f)   target "
           "<= %.0f us: %s\n",
           (long long)ns[i], s.median, CODEGEN_RUNS, s.p10, s.p90, TARGET_CODEGEN_US,
           verdict(s.median, TARGET_CODEGEN_US));
    CsvKey key = {"latency", 0, ns[i], "f32", "ptx"};
    csv(b, &key, "codegen_us", s.median, "us");
  }
  return 0;
}

typedef struct Cold {
  double ms, codegen_us, jit_ms;
} Cold;

/* The first tj_softmax of c (not compiled yet) and its synchronization. */
static tj_status cold_call(Bench *b, Case *c, Cold *out) {
  tj_cache_stats s0, s1;
  tj_context_cache_stats(b->ctx, &s0);
  double t0 = now_us();
  tj_status st = enqueue_softmax(b, c);
  if (st == TJ_OK) st = check_tj(b, "synchronize", tj_context_synchronize(b->ctx));
  double t1 = now_us();
  tj_context_cache_stats(b->ctx, &s1);
  out->ms = (t1 - t0) / 1e3;
  out->codegen_us = s1.codegen_us - s0.codegen_us;
  out->jit_ms = s1.jit_ms - s0.jit_ms;
  if (st == TJ_OK && s1.misses != s0.misses + 1)
    fprintf(stderr, "tj-bench: N=%lld was not a single cache miss\n", (long long)c->n);
  return st;
}

/* The first compile separately (it includes one-time JIT or NVRTC set-up),
 * and the medians of the others; the target applies to tilejit's own PTX. */
static void print_cold_summary(Bench *b, tj_backend be, const Cold *cold, int count) {
  double ms[COLD_COUNT], codegen_us[COLD_COUNT], jit_ms[COLD_COUNT];
  for (int i = 1; i < count; i++) {
    ms[i - 1] = cold[i].ms;
    codegen_us[i - 1] = cold[i].codegen_us;
    jit_ms[i - 1] = cold[i].jit_ms;
  }
  double med = median(ms, count - 1);
  printf("cold compile    %-5s first in process %.2f ms; median of the other %d: %.2f ms "
         "(codegen %.0f us, JIT %.2f ms)",
         backend_names[be], cold[0].ms, count - 1, med, median(codegen_us, count - 1),
         median(jit_ms, count - 1));
  if (be == TJ_BACKEND_PTX)
    printf("   target <= %.0f ms: %s", TARGET_COLD_MS, verdict(med, TARGET_COLD_MS));
  printf("\n");
  CsvKey key = {"latency", COLD_M, 0, "f32", backend_names[be]};
  csv(b, &key, "cold_first_ms", cold[0].ms, "ms");
  csv(b, &key, "cold_median_ms", med, "ms");
}

/* Cold compiles of the cold_ns kernels through backend be. */
static int latency_cold(Bench *b, tj_backend be) {
  Cold cold[COLD_COUNT];
  Case c = {COLD_M, cold_ns[COLD_COUNT - 1], TJ_DTYPE_F32, be, 0, 0, 0, NULL, 0, 0};
  int rc = case_open(b, &c) != TJ_OK;
  for (int i = 0; i < COLD_COUNT && !rc; i++) {
    c.n = cold_ns[i];
    tj_status st = cold_call(b, &c, &cold[i]);
    if (st == TJ_ERR_NO_NVRTC) {
      printf("cold compile    %-5s skipped: %s\n", backend_names[be], tj_context_error(b->ctx));
      break;
    }
    if ((rc = st != TJ_OK)) break;
    printf("  %-5s M=%d N=%-6lld first call %8.2f ms  (codegen %7.0f us, driver JIT %6.2f ms)\n",
           backend_names[be], COLD_M, (long long)c.n, cold[i].ms, cold[i].codegen_us,
           cold[i].jit_ms);
    CsvKey key = {"latency", COLD_M, c.n, "f32", backend_names[be]};
    csv(b, &key, "cold_ms", cold[i].ms, "ms");
    csv(b, &key, "cold_codegen_us", cold[i].codegen_us, "us");
    csv(b, &key, "cold_jit_ms", cold[i].jit_ms, "ms");
    if (i == COLD_COUNT - 1) print_cold_summary(b, be, cold, COLD_COUNT);
  }
  case_close(b, &c);
  return rc;
}

typedef struct Rate {
  double mean_us, median_us; /* in bursts: the host's own time per call */
  double sustained_us;       /* back to back: the device's pace once its queue is full */
} Rate;

/* One path to launch the same kernel: how, and its times. */
typedef struct LaunchPath {
  Enqueue op;
  void *arg;
  double *t; /* LAUNCHES single calls */
  double total;
} LaunchPath;

/* Host time per call of each path, LAUNCHES calls each: rounds of one
 * burst of LAUNCH_BURST calls per path, the paths' order alternating
 * between rounds, each burst started on an idle device (a synchronization
 * before it, untimed) so that no call waits for room in the launch queue.
 * That is the time the caller spends in the call: the mean over every call
 * and the median of the single calls. Then, per path, LAUNCHES calls back
 * to back with one synchronization at the end: once the queue is full
 * every call waits for the device to take one, so that figure is the
 * device's pace for this kernel, not host overhead. */
static int launch_rates(Bench *b, LaunchPath *p, int count, Rate *out) {
  int rc = 0;
  for (int i = 0; i < count && !rc; i++) {
    p[i].total = 0.0;
    rc = !(p[i].t = allocate(LAUNCHES, sizeof *p[i].t, "launch times"));
    for (int j = 0; j < 100 && !rc; j++) rc = p[i].op(b, p[i].arg) != TJ_OK; /* warm-up */
  }
  for (int round = 0; round < LAUNCHES / LAUNCH_BURST && !rc; round++) {
    for (int k = 0; k < count && !rc; k++) {
      LaunchPath *q = &p[round % 2 ? count - 1 - k : k];
      rc = check_tj(b, "synchronize", tj_context_synchronize(b->ctx)) != TJ_OK;
      double start = now_us(), last = start;
      for (int j = round * LAUNCH_BURST; j < (round + 1) * LAUNCH_BURST && !rc; j++) {
        rc = q->op(b, q->arg) != TJ_OK;
        double now = now_us();
        q->t[j] = now - last;
        last = now;
      }
      q->total += last - start;
    }
  }
  for (int i = 0; i < count && !rc; i++) {
    rc = check_tj(b, "synchronize", tj_context_synchronize(b->ctx)) != TJ_OK;
    double start = now_us();
    for (int j = 0; j < LAUNCHES && !rc; j++) rc = p[i].op(b, p[i].arg) != TJ_OK;
    out[i].sustained_us = (now_us() - start) / LAUNCHES;
    out[i].mean_us = p[i].total / LAUNCHES;
    out[i].median_us = median(p[i].t, LAUNCHES);
  }
  if (!rc) rc = check_tj(b, "synchronize", tj_context_synchronize(b->ctx)) != TJ_OK;
  for (int i = 0; i < count; i++) free(p[i].t);
  return rc;
}

/* The softmax kernel for M = 1, N = 32, through tj_launch and raw. */
typedef struct Launch {
  tj_kernel *kernel;
  tj_function *function; /* the softmax template as a JIT function, BLOCK from n */
  tj_arg args[5];
  uint64_t slots[6];
  void *params[6];
} Launch;

static tj_status enqueue_tj_launch(Bench *b, void *arg) {
  Launch *l = arg;
  return check_tj(b, "tj_launch", tj_launch(b->ctx, l->kernel, l->args, 5, 1, NULL));
}

static tj_status enqueue_function(Bench *b, void *arg) {
  Launch *l = arg;
  return check_tj(b, "tj_function_launch", tj_function_launch(l->function, l->args, 5, 1, NULL));
}

static tj_status enqueue_raw(Bench *b, void *arg) {
  Launch *l = arg;
  unsigned threads = (unsigned)l->kernel->report.info.shape.threads;
  return check_driver(
      b, "cuLaunchKernel",
      b->cu->cuLaunchKernel(l->kernel->function, 1, 1, 1, threads, 1, 1, 0, NULL, l->params, NULL));
}

/* The kernel tj_softmax uses for c (the same spec: 16-byte alignment, and
 * DIV from n as tj_softmax takes it). */
static tj_status launch_setup(Bench *b, const Case *c, Launch *l) {
  tj_program *p = NULL;
  tj_spec *s = NULL;
  tj_spec_options o;
  tj_softmax_plan plan;
  tj_status st = tj_softmax_plan_for(NULL, c->dtype, c->m, c->n, NULL, &plan);
  if (st == TJ_OK) st = tj_softmax_program(plan.which, c->n, &p);
  if (st == TJ_OK) st = tj_softmax_spec_options(&plan, c->dtype, c->n, &o);
  o.align = 16;
  o.multiple = rt_size_multiple(c->n, o.align, ir_dtype_size(c->dtype));
  if (st == TJ_OK) st = tj_specialize(p, &o, &s);
  if (st == TJ_OK)
    st = check_tj(b, "tj_compile", tj_compile(b->ctx, s, TJ_BACKEND_PTX, &l->kernel));
  tj_spec_destroy(s);
  tj_program_destroy(p);
  if (st != TJ_OK || l->kernel->param_count != 6) return st ? st : TJ_ERR_UNSUPPORTED;
  tj_function_options fo = {.dtype = c->dtype, .num_warps = o.num_warps, .size_param = "n"};
  if ((st = tj_softmax_program(TJ_SOFTMAX_SINGLE, c->n, &p)) == TJ_OK)
    st = check_tj(b, "tj_function_create", tj_function_create(b->ctx, p, &fo, &l->function));
  tj_program_destroy(p);
  if (st != TJ_OK) return st;
  int64_t values[5] = {(int64_t)c->y, (int64_t)c->x, c->n, c->n, c->n};
  uint32_t n32 = (uint32_t)c->n;
  memset(l->slots, 0, sizeof l->slots);
  for (int i = 0; i < 5; i++) l->args[i] = (tj_arg){TJ_ARG_INT, {.i = values[i]}, 0};
  for (int i = 0; i < 4; i++) l->slots[i] = (uint64_t)values[i];
  for (int i = 0; i < 6; i++) l->params[i] = &l->slots[i];
  memcpy(&l->slots[4], &n32, sizeof n32); /* the kernel's n is .u32 */
  l->slots[5] = (uint64_t)c->m;           /* the hidden instance count */
  return TJ_OK;
}

static void print_rate(Bench *b, const char *what, const char *metric, const Rate *r, bool target) {
  printf("%-44s %6.2f us per call (median %.2f; back to back %.2f)", what, r->mean_us,
         r->median_us, r->sustained_us);
  if (target)
    printf("   target <= %.0f us: %s", TARGET_LAUNCH_US, verdict(r->mean_us, TARGET_LAUNCH_US));
  printf("\n");
  CsvKey key = {"latency", 1, 32, "f32", "ptx"};
  char sustained[64];
  snprintf(sustained, sizeof sustained, "%s_back_to_back", metric);
  csv(b, &key, metric, r->mean_us, "us");
  csv(b, &key, sustained, r->sustained_us, "us");
}

/* Host time per launch on a cache hit: tj_softmax, tj_launch, cuLaunchKernel. */
static int latency_launch(Bench *b) {
  Case c = {1, 32, TJ_DTYPE_F32, TJ_BACKEND_PTX, 0, 0, 0, NULL, 0, 0};
  Launch l = {0};
  Rate r[4];
  Check k;
  int rc = case_open(b, &c) != TJ_OK || check_case(b, &c, &k) != TJ_OK;
  if (!rc && !k.pass) fprintf(stderr, "tj-bench: M=1 N=32 softmax FAILED its check\n");
  rc = rc || !k.pass || launch_setup(b, &c, &l) != TJ_OK;
  LaunchPath paths[4] = {{enqueue_softmax, &c, NULL, 0.0},
                         {enqueue_tj_launch, &l, NULL, 0.0},
                         {enqueue_raw, &l, NULL, 0.0},
                         {enqueue_function, &l, NULL, 0.0}};
  rc = rc || launch_rates(b, paths, 4, r);
  if (!rc) {
    printf("host time per launch, M=1 N=32 f32, %d calls in bursts of %d on an idle device,\n"
           "the four paths interleaved (back to back: %d calls, the device's pace once the\n"
           "launch queue is full):\n",
           LAUNCHES, LAUNCH_BURST, LAUNCHES);
    print_rate(b, "  tj_softmax (cache hit)", "launch_tj_softmax_us", &r[0], true);
    print_rate(b, "  tj_launch of the same kernel", "launch_tj_launch_us", &r[1], false);
    print_rate(b, "  cuLaunchKernel of the same kernel", "launch_raw_us", &r[2], false);
    print_rate(b, "  tj_function_launch (a compiled variant)", "launch_function_us", &r[3],
               true);
    printf("  tilejit adds %.2f us per tj_softmax call over a raw cuLaunchKernel\n",
           r[0].mean_us - r[2].mean_us);
  }
  tj_function_destroy(l.function);
  case_close(b, &c);
  return rc;
}

static int run_latency(Bench *b) {
  printf("\nlatency (CUDA_CACHE_DISABLE=1: every new kernel goes through the driver's JIT)\n");
  int rc = latency_codegen(b);
  rc |= latency_cold(b, TJ_BACKEND_PTX);
  rc |= latency_cold(b, TJ_BACKEND_NVRTC);
  rc |= latency_launch(b);
  fflush(stdout);
  return rc;
}

/* ---- --warm-start ------------------------------------------------------ */

/*
 * --warm-start: the first tj_softmax of a new process (context creation
 * excluded), with tilejit's disk cache cold and then warm. tj-bench runs
 * itself twice as a child (WARM_CHILD_ENV set) over one fresh
 * TILEJIT_CACHE_DIR, with CUDA_CACHE_DISABLE=1 so that the driver's own
 * cache helps neither run. A child creates its context, uploads x, times
 * its first tj_softmax call on the host (and the call with its
 * synchronization), checks that every row of y sums to 1, and prints one
 * line with the times and the disk counters, which the parent reads.
 */
#define WARM_M          4096
#define WARM_N          1000
#define WARM_CHILD_ENV  "TJ_BENCH_WARM_CHILD"
#define TARGET_WARM_MS  1.0

static int warm_child(void) {
  tj_context *ctx = NULL;
  tj_status st = tj_context_create(NULL, &ctx);
  if (st == TJ_ERR_NO_DRIVER || st == TJ_ERR_NO_DEVICE) return no_driver(st);
  if (st != TJ_OK) return fprintf(stderr, "tj-bench: %s\n", tj_context_error(NULL)), 1;
  size_t count = (size_t)WARM_M * WARM_N, bytes = count * sizeof(float);
  float *host = allocate(count, sizeof *host, "x on the host");
  uint64_t x = 0, y = 0, rng = 42;
  for (size_t i = 0; host && i < count; i++) host[i] = (float)(8.0 * data_uniform(&rng) - 4.0);
  if (host) st = tj_device_alloc(ctx, bytes, &x);
  if (host && st == TJ_OK) st = tj_device_alloc(ctx, bytes, &y);
  if (host && st == TJ_OK) st = tj_copy_to_device(ctx, x, host, bytes);
  double t0 = now_us(), t1 = t0, t2 = t0;
  if (host && st == TJ_OK) {
    t0 = now_us();
    st = tj_softmax(ctx, TJ_DTYPE_F32, WARM_M, WARM_N, y, WARM_N, x, WARM_N, NULL, NULL);
    t1 = now_us();
    if (st == TJ_OK) st = tj_context_synchronize(ctx);
    t2 = now_us();
  }
  if (host && st == TJ_OK) st = tj_copy_to_host(ctx, host, y, bytes);
  int bad_rows = 0;
  for (int64_t r = 0; host && st == TJ_OK && r < WARM_M; r++) {
    double sum = 0;
    for (int64_t i = 0; i < WARM_N; i++) sum += host[r * WARM_N + i];
    bad_rows += !(fabs(sum - 1.0) <= 1e-4);
  }
  tj_cache_stats cs = {0};
  tj_context_cache_stats(ctx, &cs);
  if (st != TJ_OK) fprintf(stderr, "tj-bench: %s\n", tj_context_error(ctx));
  else
    printf("%.3f %.3f %llu %llu %llu %d\n", (t1 - t0) / 1e3, (t2 - t0) / 1e3,
           (unsigned long long)cs.disk_hits, (unsigned long long)cs.disk_writes,
           (unsigned long long)cs.disk_errors, bad_rows);
  if (x) tj_device_free(ctx, x);
  if (y) tj_device_free(ctx, y);
  free(host);
  tj_context_destroy(ctx);
  return st != TJ_OK || bad_rows;
}

typedef struct WarmRun {
  double call_ms, sync_ms;
  unsigned long long disk_hits, disk_writes, disk_errors;
  int bad_rows;
} WarmRun;

/* Runs tj-bench --warm-start as a child over dir; its line into *out. */
static int warm_run(const char *dir, WarmRun *out) {
  char self[4096], line[256] = "";
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  int fds[2];
  if (n <= 0 || pipe(fds) != 0) return fprintf(stderr, "tj-bench: cannot run itself\n"), 1;
  self[n] = '\0';
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    if (setenv(WARM_CHILD_ENV, "1", 1) || setenv("TILEJIT_CACHE_DIR", dir, 1) ||
        setenv("CUDA_CACHE_DISABLE", "1", 1) || unsetenv("TILEJIT_CACHE_DISABLE") ||
        unsetenv("TILEJIT_DUMP"))
      _exit(1);
    execl(self, self, "--warm-start", (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  FILE *f = pid > 0 ? fdopen(fds[0], "r") : NULL;
  if (f && !fgets(line, sizeof line, f)) line[0] = '\0';
  if (f) fclose(f);
  else close(fds[0]);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return 1;
  if (WEXITSTATUS(status) == CLI_EXIT_NO_GPU) return CLI_EXIT_NO_GPU; /* the child said why */
  if (sscanf(line, "%lf %lf %llu %llu %llu %d", &out->call_ms, &out->sync_ms, &out->disk_hits,
             &out->disk_writes, &out->disk_errors, &out->bad_rows) != 6)
    return fprintf(stderr, "tj-bench: the --warm-start child failed\n"), 1;
  return WEXITSTATUS(status) != 0;
}

/* Empties and removes the child's cache directory (files only). */
static void remove_cache_dir(const char *dir) {
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlinkat(dirfd(d), e->d_name, 0);
  if (d) closedir(d);
  rmdir(dir);
}

static int run_warm_start(void) {
  char base[512], dir[600];
  const char *tmp = getenv("TMPDIR");
  snprintf(base, sizeof base, "%s/tj-bench-warm-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(base)) return fprintf(stderr, "tj-bench: mkdtemp: %s\n", strerror(errno)), 1;
  snprintf(dir, sizeof dir, "%s/cache", base);
  WarmRun cold = {0}, warm = {0};
  int rc = warm_run(dir, &cold);
  if (rc == 0) rc = warm_run(dir, &warm);
  remove_cache_dir(dir);
  rmdir(base);
  if (rc) return rc;
  printf("warm start: a new process's first tj_softmax, M=%d N=%d f32, context creation "
         "excluded\n(a fresh TILEJIT_CACHE_DIR, CUDA_CACHE_DISABLE=1)\n",
         WARM_M, WARM_N);
  const WarmRun *runs[2] = {&cold, &warm};
  for (int i = 0; i < 2; i++)
    printf("  %s disk cache: first call %8.3f ms, with its sync %8.3f ms; disk hits %llu, "
           "writes %llu, errors %llu; rows off %d\n",
           i ? "warm" : "cold", runs[i]->call_ms, runs[i]->sync_ms, runs[i]->disk_hits,
           runs[i]->disk_writes, runs[i]->disk_errors, runs[i]->bad_rows);
  printf("  warm first call %.3f ms   target <= %.0f ms: %s\n", warm.call_ms, TARGET_WARM_MS,
         verdict(warm.call_ms, TARGET_WARM_MS));
  bool as_expected = cold.disk_writes >= 1 && warm.disk_hits >= 1 && warm.disk_writes == 0;
  if (!as_expected) fprintf(stderr, "tj-bench: the warm run did not load from the disk cache\n");
  return !as_expected || cold.bad_rows || warm.bad_rows;
}

/* ---- arguments --------------------------------------------------------- */

/* --n LIST: comma-separated N values. */
static bool parse_n_list(void *opts, const CliOption *opt, char *text, char *why, size_t size) {
  Options *o = opts;
  char *save = NULL;
  int64_t v;
  (void)opt;
  o->n_count = 0;
  for (char *tok = strtok_r(text, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (o->n_count == MAX_LIST)
      return snprintf(why, size, "--n takes at most %d values", MAX_LIST), false;
    if (!tj_parse_decimal(tok, 1, INT32_MAX, &v))
      return snprintf(why, size, "--n takes decimal integers from 1 to %d, not '%.40s'", INT32_MAX,
                      tok),
             false;
    o->n_list[o->n_count++] = v;
  }
  return o->n_count > 0 || (snprintf(why, size, "--n needs at least one N"), false);
}

#define BANDWIDTH (CLI_MODE(MODE_BANDWIDTH) | CLI_MODE(MODE_ALL))
#define PLAN      (BANDWIDTH | CLI_MODE(MODE_LATENCY))

/* clang-format off */
#define AT(f) offsetof(Options, f)
static const CliOption option_table[] = {
    {.name = "bandwidth", .kind = CLI_SELECT, .mode = MODE_BANDWIDTH,
     .help = "softmax GB/s and % of copy bandwidth (the default)"},
    {.name = "latency", .kind = CLI_SELECT, .mode = MODE_LATENCY,
     .help = "codegen, cold compile, NVRTC compile, host time per launch"},
    {.name = "all", .kind = CLI_SELECT, .mode = MODE_ALL, .help = "--latency, then --bandwidth"},
    {.name = "codegen", .kind = CLI_SELECT, .mode = MODE_CODEGEN,
     .help = "tj_specialize + tj_emit_ptx only (needs no GPU)"},
    {.name = "warm-start", .kind = CLI_SELECT, .mode = MODE_WARM_START,
     .help = "a new process's first tj_softmax, disk cache cold and warm"},
    {.name = "set", .kind = CLI_MASK, .offset = AT(sets), .choices = set_choices,
     .modes = BANDWIDTH, .value = "S",
     .help = "large, small, wide, huge, odd or all (default large)"},
    {.name = "n", .letter = 'n', .kind = CLI_CUSTOM, .modes = BANDWIDTH, .value = "LIST",
     .help = "N values, comma-separated, instead of --set; M from --m or 256 MiB / (4 N)"},
    {.name = "m", .letter = 'm', .kind = CLI_INT64, .offset = AT(m), .lo = 1, .hi = INT32_MAX,
     .modes = BANDWIDTH, .value = "M", .help = "M for every shape"},
    {.name = "dtype", .kind = CLI_MASK, .offset = AT(dtypes), .choices = dtype_choices,
     .modes = BANDWIDTH, .value = "D", .help = "f32, f16, bf16 or all (default f32)"},
    {.name = "backend", .kind = CLI_MASK, .offset = AT(backends), .choices = backend_choices,
     .modes = BANDWIDTH, .value = "B", .help = "ptx, nvrtc or both (default ptx)"},
    {.name = "warps", .kind = CLI_INT, .offset = AT(plan.num_warps), .lo = 1, .hi = 32,
     .modes = PLAN, .value = "W", .help = "NUM_WARPS of tj_softmax's plan"},
    {.name = "cluster", .kind = CLI_INT, .offset = AT(plan.cluster), .lo = 1, .hi = 16,
     .modes = PLAN, .value = "C", .help = "CTAs of a cluster per row, in the plan"},
    {.name = "split", .kind = CLI_INT, .offset = AT(plan.split), .lo = 1, .hi = 1024,
     .modes = PLAN, .value = "S", .help = "clusters (or CTAs) of the grid per row, in the plan"},
    {.name = "stage", .kind = CLI_INT, .offset = AT(plan.stage), .lo = -1, .hi = 128,
     .modes = PLAN, .value = "K",
     .help = "STAGE of the plan: elements a thread holds at a time, the row kept in shared "
             "memory (-1: none)"},
    {.name = "stash", .kind = CLI_INT, .offset = AT(plan.stash), .lo = 1, .hi = 1 << 30,
     .modes = PLAN, .value = "BYTES",
     .help = "STASH of the plan: the most shared memory a staged CTA keeps the row in"},
    {.name = "template", .kind = CLI_CHOICE, .offset = AT(which_template),
     .choices = template_choices, .modes = PLAN, .value = "T",
     .help = "auto, single or online, in the plan"},
    {.name = "reps", .kind = CLI_INT, .offset = AT(reps), .lo = 1, .hi = MAX_REPS,
     .modes = BANDWIDTH, .value = "K", .help = "timed repetitions per measurement (default 30)"},
    {.name = "offset", .kind = CLI_INT, .offset = AT(offset), .lo = 0, .hi = 15,
     .modes = BANDWIDTH, .value = "E",
     .help = "x and y start E elements past a 16-byte boundary (default 0)"},
    {.name = "log-softmax", .kind = CLI_FLAG, .offset = AT(log_softmax), .modes = BANDWIDTH,
     .help = "tj_log_softmax (checked against the float64 log-softmax) instead"},
    {.name = "masked", .kind = CLI_FLAG, .offset = AT(masked), .modes = BANDWIDTH,
     .help = "tj_masked_softmax, scale 1/8, bottom-right causal over min(M, N) rows, instead"},
    {.name = "csv", .kind = CLI_TEXT, .offset = AT(csv_path), .value = "FILE",
     .modes = PLAN | CLI_MODE(MODE_CODEGEN),
     .help = "also write section,m,n,dtype,backend,metric,value,unit rows"},
    {.name = "iters", .kind = CLI_INT, .offset = AT(iters), .lo = 1, .hi = 100000000,
     .modes = CLI_MODE(MODE_CODEGEN), .value = "K", .help = "runs per shape (default 2000)"},
    {.name = "arch", .kind = CLI_ARCH, .offset = AT(arch), .modes = CLI_MODE(MODE_CODEGEN),
     .value = "sm_XX", .help = "the target (default sm_90)"},
};
/* clang-format on */

static const CliTool tool = {
    .name = "tj-bench",
    .usage = "tj-bench [--bandwidth | --latency | --all | --codegen | --warm-start] [options]",
    .about = "--warps, --cluster, --split, --stage, --stash and --template override tj_softmax's "
             "plan\n"
             "(tj_softmax_options). Only --codegen runs without a CUDA driver and GPU.\n",
    .options = option_table,
    .count = sizeof option_table / sizeof option_table[0],
    .mode_offset = AT(mode),
    .default_mode = MODE_BANDWIDTH,
    .custom = parse_n_list,
};

/* -1 to go on, or the exit status. */
static int parse_args(int argc, char **argv, Options *o) {
  *o = (Options){.iters = 2000,
                 .arch = 90,
                 .dtypes = 1u << TJ_DTYPE_F32,
                 .backends = 1u << TJ_BACKEND_PTX,
                 .reps = 30};
  int rc = cli_parse(&tool, argc, argv, o);
  if (rc >= 0) return rc;
  if (o->sets && o->n_count) return cli_usage_error(&tool, "give --set or --n, not both");
  if (o->log_softmax && o->masked)
    return cli_usage_error(&tool, "--log-softmax and --masked: one op at a time");
  if (!o->sets) o->sets = SET_LARGE;
  o->plan.which_template = (tj_softmax_template)o->which_template;
  return -1;
}

int main(int argc, char **argv) {
  Options o;
  int rc = parse_args(argc, argv, &o);
  if (rc >= 0) return rc;
  if (o.mode == MODE_CODEGEN) return run_codegen(&o);
  if (o.mode == MODE_WARM_START) return getenv(WARM_CHILD_ENV) ? warm_child() : run_warm_start();
  /* Before the driver loads (tj_context_create), so that it takes effect;
   * cold compiles must compile: tilejit's disk cache off too. */
  if (o.mode != MODE_BANDWIDTH && (setenv("CUDA_CACHE_DISABLE", "1", 1) != 0 ||
                                   setenv("TILEJIT_CACHE_DISABLE", "1", 1) != 0))
    return 1;
  Bench b;
  rc = bench_open(&b, &o);
  if (rc == 0) {
    print_header(&b);
    if (o.mode == MODE_LATENCY || o.mode == MODE_ALL) rc |= run_latency(&b);
    if (o.mode == MODE_BANDWIDTH || o.mode == MODE_ALL) rc |= run_bandwidth(&b);
  }
  bench_close(&b);
  return rc;
}
