/*
 * ptx_probe.c - loads PTX files through the driver, with no tilejit in
 * between: how long the driver's JIT takes on each, and a launch of a
 * generated softmax kernel from a (possibly hand-edited) PTX file, for
 * compute-sanitizer to look at.
 *
 * A hand-written check, not part of tilejit (it links the driver directly).
 *
 *   nvcc -O2 -o /tmp/ptx_probe bench/experiments/ptx_probe.c -lcuda
 *   CUDA_CACHE_DISABLE=1 /tmp/ptx_probe jit LEVEL FILE.ptx ...
 *       every file JIT-compiled 7 times (LEVEL: CU_JIT_OPTIMIZATION_LEVEL
 *       0..4, or -1 for none given), the median wall time of
 *       cuModuleLoadDataEx printed per file
 *   /tmp/ptx_probe softmax FILE.ptx CLUSTER M N [DYNAMIC_SMEM [CLUSTERS]]
 *       launches the f32 entry tj_softmax(y, x, y_stride, x_stride, n,
 *       programs) over M rows of N, CLUSTER CTAs a row (its .reqntid read
 *       from the file), on CLUSTERS clusters (default M; fewer make each
 *       loop over rows), and checks that every row sums to 1
 */
#include <cuda.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                                                \
  do {                                                                                             \
    CUresult r_ = (call);                                                                          \
    if (r_ != CUDA_SUCCESS) {                                                                      \
      const char *s_ = "?";                                                                        \
      cuGetErrorName(r_, &s_);                                                                     \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, s_);                           \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (fread(s, 1, (size_t)n, f) != (size_t)n)
    exit(1);
  s[n] = 0;
  fclose(f);
  return s;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int jit(int level, int count, char **files) {
  for (int f = 0; f < count; f++) {
    char *ptx = slurp(files[f]);
    double t[7];
    for (int i = 0; i < 7; i++) {
      CUjit_option key = CU_JIT_OPTIMIZATION_LEVEL;
      void *value = (void *)(size_t)(level < 0 ? 4 : level);
      CUmodule m;
      double t0 = now_ms();
      CHECK(cuModuleLoadDataEx(&m, ptx, level < 0 ? 0 : 1, &key, &value));
      t[i] = now_ms() - t0;
      CHECK(cuModuleUnload(m));
    }
    qsort(t, 7, sizeof t[0], cmp);
    printf("jit level %d %-40s median %.2f ms (min %.2f)\n", level, files[f], t[3], t[0]);
    free(ptx);
  }
  return 0;
}

static int softmax(const char *file, int cluster, int rows, int n, int smem, int clusters) {
  char *ptx = slurp(file);
  const char *r = strstr(ptx, ".reqntid");
  int threads = r ? atoi(r + 8) : 0;
  if (threads <= 0) {
    fprintf(stderr, "%s: no .reqntid\n", file);
    return 1;
  }
  CUmodule mod;
  CUfunction fn;
  CHECK(cuModuleLoadData(&mod, ptx));
  CHECK(cuModuleGetFunction(&fn, mod, "tj_softmax"));
  if (cluster > 8)
    CHECK(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1));
  if (smem > 0)
    CHECK(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem));
  size_t elems = (size_t)rows * n;
  float *h = malloc(elems * sizeof *h);
  for (size_t i = 0; i < elems; i++) h[i] = (float)((i * 2654435761u) % 1000) / 100.0f;
  CUdeviceptr x, y;
  CHECK(cuMemAlloc(&x, elems * 4));
  CHECK(cuMemAlloc(&y, elems * 4));
  CHECK(cuMemcpyHtoD(x, h, elems * 4));
  CHECK(cuMemsetD8(y, 0xff, elems * 4));
  unsigned long long stride = (unsigned long long)n, programs = (unsigned long long)rows;
  int nn = n;
  void *args[] = {&y, &x, &stride, &stride, &nn, &programs};
  CUlaunchAttribute attr;
  memset(&attr, 0, sizeof attr);
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = (unsigned)cluster;
  attr.value.clusterDim.y = attr.value.clusterDim.z = 1;
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = (unsigned)((clusters > 0 ? clusters : rows) * cluster);
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = (unsigned)threads;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = (unsigned)(smem > 0 ? smem : 0);
  cfg.attrs = cluster > 1 ? &attr : NULL;
  cfg.numAttrs = cluster > 1 ? 1 : 0;
  CHECK(cuLaunchKernelEx(&cfg, fn, args, NULL));
  CHECK(cuCtxSynchronize());
  CHECK(cuMemcpyDtoH(h, y, elems * 4));
  int bad = 0;
  for (int i = 0; i < rows; i++) {
    double s = 0;
    for (int j = 0; j < n; j++) s += h[(size_t)i * n + j];
    if (!(fabs(s - 1) < 1e-3))
      bad++;
  }
  printf("softmax %s: cluster %d, %d threads, %d x %d, smem %d, %u CTAs: %d bad rows\n", file,
         cluster, threads, rows, n, smem, cfg.gridDimX, bad);
  return bad != 0;
}

int main(int argc, char **argv) {
  CHECK(cuInit(0));
  CUdevice dev;
  CUcontext ctx;
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  if (argc >= 4 && !strcmp(argv[1], "jit"))
    return jit(atoi(argv[2]), argc - 3, argv + 3);
  if (argc >= 6 && !strcmp(argv[1], "softmax"))
    return softmax(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]),
                   argc > 6 ? atoi(argv[6]) : 0, argc > 7 ? atoi(argv[7]) : 0);
  fprintf(stderr, "usage: see the header of ptx_probe.c\n");
  return 2;
}
