/*
 * support_gpu.h — helpers of the GPU suites (tests/gpu_*.c), on top of
 * support.h: running a Check suite only where a GPU is usable, and running
 * many softmax cases in one batch.
 *
 * CUDA does not survive fork(), and Check forks per test: the suites never
 * touch CUDA outside test bodies. gpu_main probes for a driver and a device
 * in a child process and returns 77 (CTest's skip) when there is none.
 *
 * A batch lays all its cases' matrices (inputs, poisoned outputs, gaps and
 * guards) into one device buffer, uploads it once, launches every case on
 * one stream, downloads once and checks each case against the float64
 * reference: every row element close, gaps and guards still poisoned, the
 * input untouched, and exact zeros where x is -inf in a row with a finite
 * value. Device time is scarce, so big sweeps are a few copies and many
 * launches, never a copy per case.
 */
#ifndef TJ_TEST_SUPPORT_GPU_H
#define TJ_TEST_SUPPORT_GPU_H

#include "support.h"

#include <check.h>
#include <stdbool.h>

/* Runs the suite where a CUDA driver and device are usable, else prints why
 * and returns 77. Returns the process exit status. */
int gpu_main(Suite *suite);

/* TJ_GPU_QUICK set (compute-sanitizer runs): sweeps take a subset. */
bool gpu_quick(void);

/* A context on device 0 for a test body; fails the test when there is none. */
tj_context *gpu_context(const tj_context_options *options);

/* Fills x for a case: a row-kind table, random values, ... */
typedef void (*GpuFill)(TjMatrix *x, TjRng *rng, int arg);

typedef struct GpuCase {
  tj_row_op op; /* 0: softmax */
  tj_dtype dtype;
  int64_t m, n;
  int64_t x_stride, y_stride; /* 0: n */
  int64_t offset;             /* elements past a 256-byte boundary, for x and y */
  int64_t y_offset;           /* y's instead, when not 0 (x and y at two phases) */
  bool in_place;
  tj_softmax_options opts;
  GpuFill fill; /* NULL: 3 * normal + a per-row offset */
  int fill_arg;
  uint64_t seed;
} GpuCase;

typedef struct GpuTally {
  int cases, skipped; /* skipped: the NVRTC backend without libnvrtc, or
                         an UNSUPPORTED forced option where allowed */
  double max_abs, max_ratio;
  char skip_reason[512]; /* the first skipped case's message */
} GpuTally;

/* Runs every case (in batches of bounded memory) on ctx and stream, failing
 * the test at the first bad case with a description. allow_unsupported:
 * a case that is TJ_ERR_UNSUPPORTED (a forced option the backend cannot
 * do, NVRTC's PTX newer than the driver) counts as skipped. */
void gpu_run_cases(tj_context *ctx, const GpuCase *cases, int count, void *stream,
                   bool allow_unsupported, GpuTally *tally);
/* One line on stderr: "name: N cases (S skipped), max error ..." */
void gpu_report(const char *name, const GpuTally *tally);

/* "f32 M=3 N=1000 strides 1005/1013 offset 1/1 in-place warps 4 nvrtc online" */
void gpu_case_label(const GpuCase *c, char *out, size_t size);

/* The default fill: scale 3 normal values around a row offset drawn from
 * [-spread, spread] (1e4 for f32, 100 for 16-bit types). */
void gpu_fill_default(TjMatrix *x, TjRng *rng, int arg);

#endif /* TJ_TEST_SUPPORT_GPU_H */
