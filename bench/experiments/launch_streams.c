/*
 * launch_streams.c — host time per launch by the kind of stream: a raw
 * cuLaunchKernel of an empty kernel and a cached tj_softmax (M = 1, N =
 * 32) on the legacy stream, the per-thread default stream, a created
 * non-blocking stream and a created blocking one; 199 bursts of 100 calls
 * each (the first round untimed), each burst on an idle device, the kinds'
 * order alternating between rounds, as tj-bench --latency times its paths.
 * An experiment, not part of tilejit: it links libcuda itself.
 *
 *   cc -O2 -std=c11 -Iinclude -I<cuda>/include bench/experiments/launch_streams.c \
 *      -L<build> -ltilejit -lcuda -o /tmp/launch_streams && /tmp/launch_streams
 */
#define _POSIX_C_SOURCE 200809L
#include "tilejit.h"
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
static const char *ptx =
    ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 p){ret;}\n";
int main(void) {
  CUdevice dev;
  CUcontext pc;
  cuInit(0);
  cuDeviceGet(&dev, 0);
  cuDevicePrimaryCtxRetain(&pc, dev);
  cuCtxSetCurrent(pc);
  tj_context *ctx = NULL;
  tj_context_options co = {.device = 0};
  if (tj_context_create(&co, &ctx)) {
    fprintf(stderr, "launch_streams: no tilejit context\n");
    return 1;
  }
  uint64_t x, y;
  tj_device_alloc(ctx, 4096, &x);
  tj_device_alloc(ctx, 4096, &y);
  CUmodule mod;
  CUfunction fn;
  if (cuModuleLoadData(&mod, ptx) || cuModuleGetFunction(&fn, mod, "k")) {
    fprintf(stderr, "launch_streams: the empty kernel did not load\n");
    return 1;
  }
  CUstream made, blocking;
  cuStreamCreate(&made, CU_STREAM_NON_BLOCKING);
  cuStreamCreate(&blocking, CU_STREAM_DEFAULT);
  CUstream s[4] = {NULL, CU_STREAM_PER_THREAD, made, blocking};
  const char *names[4] = {"legacy", "per-thread", "non-blocking", "blocking created"};
  double tot[2][4] = {{0}};
  int calls[2][4] = {{0}};
  void *params[1] = {&x};
  for (int round = 0; round < 200; round++)
    for (int kind = 0; kind < 2; kind++)
      for (int i = 0; i < 4; i++) {
        int j = (round % 2) ? 3 - i : i;
        cuCtxSynchronize();
        double t0 = now_us();
        for (int c = 0; c < 100; c++) {
          if (kind == 0)
            cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s[j], params, NULL);
          else
            tj_softmax(ctx, TJ_DTYPE_F32, 1, 32, y, 32, x, 32, s[j], NULL);
        }
        if (round) {
          tot[kind][j] += now_us() - t0;
          calls[kind][j] += 100;
        }
      }
  cuCtxSynchronize();
  for (int kind = 0; kind < 2; kind++)
    for (int j = 0; j < 4; j++)
      printf("%-18s %-14s %.3f us per call\n", kind ? "tj_softmax" : "cuLaunchKernel", names[j],
             tot[kind][j] / calls[kind][j]);
  return 0;
}
