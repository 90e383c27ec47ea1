/*
 * phase_times.c — where a row split over the grid spends its time, CTA by
 * CTA. A hand-written probe, not part of tilejit: it needs a build of the
 * code generator with phase_times.patch (beside this file) applied, whose
 * kernels have thread 0 of every CTA of a grid split store %globaltimer at
 * six points of each instance into an unused part of the stream's
 * workspace (1.5 MiB in, 64 bytes per instance and CTA):
 *
 *   0 the first phase starts        3 the release of that barrier is seen
 *   1 the first phase's loop ends   4 the last phase starts
 *   2 the CTA arrives at the barrier 5 the last phase's loop ends
 *
 * with %smid and %nctaid beside the first. It runs tj_softmax four times,
 * each after a 512 MiB memset that flushes L2, reads the last run's stamps
 * back (it links the static library to reach the context's workspace) and
 * prints, row by row, min / p10 / median / p90 / max over the CTAs in µs
 * from the kernel's first stamp; then row 0's ends by how many CTAs share
 * an SM. The stamps are thread 0's: a CTA's other warps may end later.
 * The records cover rows x CTAs <= 8192 (the workspace is 2 MiB).
 *
 *   git apply bench/experiments/phase_times.patch
 *   cmake -S . -B /tmp/X -DCMAKE_BUILD_TYPE=Release -DTJ_TESTS=OFF && cmake --build /tmp/X -j
 *   git apply -R bench/experiments/phase_times.patch
 *   cc -O1 -std=c11 -Isrc -Iinclude bench/experiments/phase_times.c /tmp/X/libtilejit.a \
 *      -lm -ldl -lpthread -o /tmp/phase_times
 *   TILEJIT_CACHE_DISABLE=1 /tmp/phase_times 1 10000000 bf16
 *
 * bench/RESULTS.md, MM4, has what it showed on an H200.
 */
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECORDS_AT (3u << 19) /* as phase_times.patch */
#define RECORDS_BYTES (1u << 19)

static int by_value(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static void stats(const char *what, int64_t *v, int n) {
  if (n == 0) return;
  qsort(v, (size_t)n, sizeof *v, by_value);
  printf("  %-40s min %7.2f  p10 %7.2f  med %7.2f  p90 %7.2f  max %7.2f us\n", what, v[0] / 1e3,
         v[n / 10] / 1e3, v[n / 2] / 1e3, v[n * 9 / 10] / 1e3, v[n - 1] / 1e3);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: phase_times M N f32|f16|bf16\n");
    return 2;
  }
  int64_t m = atoll(argv[1]), n = atoll(argv[2]);
  tj_dtype dt = !strcmp(argv[3], "f32")   ? TJ_DTYPE_F32
                : !strcmp(argv[3], "f16") ? TJ_DTYPE_F16
                                          : TJ_DTYPE_BF16;
  size_t bytes = (size_t)m * (size_t)n * (dt == TJ_DTYPE_F32 ? 4 : 2), flush_bytes = 512u << 20;
  tj_context *ctx;
  if (tj_context_create(NULL, &ctx) != TJ_OK) {
    fprintf(stderr, "phase_times: no CUDA context\n");
    return 77;
  }
  uint64_t x, y, flush;
  if (tj_device_alloc(ctx, bytes, &x) || tj_device_alloc(ctx, bytes, &y) ||
      tj_device_alloc(ctx, flush_bytes, &flush)) {
    fprintf(stderr, "phase_times: %s\n", tj_context_error(ctx));
    return 1;
  }
  ctx->cu->cuMemsetD8((CuDevicePtr)x, 0x3c, bytes); /* the values do not matter here */
  for (int rep = 0; rep < 4; rep++) {
    ctx->cu->cuMemsetD8((CuDevicePtr)flush, (unsigned char)rep, flush_bytes);
    if (tj_softmax(ctx, dt, m, n, y, n, x, n, NULL, NULL) != TJ_OK ||
        tj_context_synchronize(ctx) != TJ_OK) {
      fprintf(stderr, "phase_times: %s\n", tj_context_error(ctx));
      return 1;
    }
  }
  if (ctx->nworkspaces < 1) {
    fprintf(stderr, "phase_times: the kernel is not split over the grid\n");
    return 1;
  }
  int64_t *rec = malloc(RECORDS_BYTES), *v = malloc(RECORDS_BYTES);
  ctx->cu->cuMemcpyDtoH(rec, ctx->workspaces[0].ptr + RECORDS_AT, RECORDS_BYTES);
  int ctas = (int)(rec[7] & 0xffffffff); /* CTA 0 of row 0: %nctaid */
  int rows = ctas > 0 ? (int)(RECORDS_BYTES / 64 / ctas) : 0;
  if (rows > m) rows = (int)m;
  printf("%lld x %lld %s: %d CTAs\n", (long long)m, (long long)n, argv[3], ctas);
  int64_t t0 = INT64_MAX;
  for (int i = 0; i < rows * ctas; i++)
    if (rec[i * 8] && rec[i * 8] < t0) t0 = rec[i * 8];
  static const char *const names[6] = {"first phase starts",   "first phase's loop ends",
                                       "arrived at the barrier", "release seen",
                                       "last phase starts",      "last phase's loop ends"};
  for (int r = 0; r < rows && r < 8; r++) {
    printf(" row %d, from the kernel's first stamp\n", r);
    for (int k = 0; k < 6; k++) {
      int count = 0;
      for (int c = 0; c < ctas; c++) {
        int64_t t = rec[(r * ctas + c) * 8 + k];
        if (t) v[count++] = t - t0;
      }
      stats(names[k], v, count);
    }
    for (int k = 0; k < 6; k += 4) {
      int count = 0;
      for (int c = 0; c < ctas; c++) {
        const int64_t *q = &rec[(r * ctas + c) * 8];
        if (q[k] && q[k + 1]) v[count++] = q[k + 1] - q[k];
      }
      stats(k ? "last phase's loop takes" : "first phase's loop takes", v, count);
    }
  }
  /* Row 0's CTAs by how many of them share their SM (its CTAs only). */
  static int per_sm[1024];
  for (int c = 0; c < ctas; c++)
    if (rec[c * 8]) per_sm[rec[c * 8 + 6] & 1023]++;
  for (int share = 1; share <= 4; share++)
    for (int k = 1; k < 6; k += 4) {
      int count = 0;
      for (int c = 0; c < ctas; c++)
        if (rec[c * 8] && per_sm[rec[c * 8 + 6] & 1023] == share && rec[c * 8 + k])
          v[count++] = rec[c * 8 + k] - t0;
      char what[64];
      snprintf(what, sizeof what, "row 0, %s, %d a SM", k == 1 ? "first loop ends" : "row ends",
               share);
      stats(what, v, count);
    }
  free(rec);
  free(v);
  tj_context_destroy(ctx);
  return 0;
}
