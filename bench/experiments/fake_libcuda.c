/*
 * fake_libcuda.c — a stand-in libcuda.so.1 that does nothing, for measuring
 * tilejit's own host time per launch on a machine with no GPU (with perf or
 * valgrind): every entry point of RT_DRIVER_LIST answers success at once,
 * the queries an H100's numbers, the launch nothing. Not a driver for
 * correctness: no memory, no kernel runs.
 *
 *   cc -O2 -shared -fPIC -Isrc -Iinclude bench/experiments/fake_libcuda.c \
 *      -o /tmp/libcuda.so.1
 *   TILEJIT_LIBCUDA=/tmp/libcuda.so.1 TILEJIT_CACHE_DISABLE=1 ./launch_probe
 *
 * See launch_probe.c beside it.
 */
#include "runtime/runtime.h"

#include <stdio.h>
#include <string.h>

static int fake_object; /* what every handle points at */
#define HANDLE(type) ((type)(void *)&fake_object)

/* The entry points that only answer success. */
#pragma GCC diagnostic ignored "-Wunused-parameter" /* stubs ignore most */
#define IGNORE(...) ((void)0)
static CuResult ok_init(unsigned f) { IGNORE(f); return 0; }
static CuResult ok_ctx(CuContext c) { IGNORE(c); return 0; }
static CuResult ok_dev(CuDevice d) { IGNORE(d); return 0; }
static CuResult ok_void(void) { return 0; }
static CuResult ok_module(CuModule m) { IGNORE(m); return 0; }
static CuResult ok_stream(CuStream s) { IGNORE(s); return 0; }
static CuResult ok_event(CuEvent e) { IGNORE(e); return 0; }
static CuResult ok_ptr(CuDevicePtr p) { IGNORE(p); return 0; }

static CuResult error_name(CuResult e, const char **name) {
  IGNORE(e);
  *name = "CUDA_SUCCESS";
  return 0;
}
static CuResult version(int *v) { *v = 13000; return 0; }
static CuResult device_count(int *n) { *n = 1; return 0; }
static CuResult device_get(CuDevice *d, int ordinal) { *d = ordinal; return 0; }
static CuResult device_name(char *name, int length, CuDevice d) {
  IGNORE(d);
  snprintf(name, (size_t)length, "fake H100 (no GPU)");
  return 0;
}
static CuResult device_attribute(int *value, int attribute, CuDevice d) {
  IGNORE(d);
  switch (attribute) {
  case RT_ATTR_SM_COUNT: *value = 132; break;
  case RT_ATTR_MAX_THREADS_PER_BLOCK: *value = 1024; break;
  case RT_ATTR_MAX_THREADS_PER_SM: *value = 2048; break;
  case RT_ATTR_MAX_BLOCKS_PER_SM: *value = 32; break;
  case RT_ATTR_MAX_SHARED_PER_BLOCK: *value = 48 * 1024; break;
  case RT_ATTR_MAX_SHARED_PER_BLOCK_OPTIN: *value = 227 * 1024; break;
  case RT_ATTR_MAX_SHARED_PER_SM: *value = 228 * 1024; break;
  case RT_ATTR_MAX_REGISTERS_PER_SM: *value = 65536; break;
  case RT_ATTR_L2_CACHE_SIZE: *value = 50 << 20; break;
  case RT_ATTR_CC_MAJOR: *value = 9; break;
  case RT_ATTR_CC_MINOR: *value = 0; break;
  case RT_ATTR_MAX_GRID_DIM_X: *value = 2147483647; break;
  default: *value = 1; break; /* cooperative and cluster launch */
  }
  return 0;
}
static CuResult ctx_out(CuContext *c) { *c = HANDLE(CuContext); return 0; }
static CuResult primary_retain(CuContext *c, CuDevice d) { IGNORE(d); return ctx_out(c); }
static CuResult ctx_device(CuDevice *d) { *d = 0; return 0; }
static CuResult module_load(CuModule *m, const void *image, unsigned n, int *o, void **v) {
  IGNORE(image, n, o, v);
  *m = HANDLE(CuModule);
  return 0;
}
static CuResult link_create(unsigned n, int *o, void **v, CuLinkState *s) {
  IGNORE(n, o, v);
  *s = HANDLE(CuLinkState);
  return 0;
}
static CuResult link_add(CuLinkState s, int type, const void *data, size_t size, const char *name,
                         unsigned n, int *o, void **v) {
  IGNORE(s, type, data, size, name, n, o, v);
  return 0;
}
static CuResult link_complete(CuLinkState s, void **cubin, size_t *size) {
  IGNORE(s);
  *cubin = &fake_object;
  *size = sizeof fake_object;
  return 0;
}
static CuResult link_destroy(CuLinkState s) { IGNORE(s); return 0; }
static CuResult get_function(CuFunction *f, CuModule m, const char *name) {
  IGNORE(m, name);
  *f = HANDLE(CuFunction);
  return 0;
}
static CuResult func_attribute(int *value, int attribute, CuFunction f) {
  IGNORE(f);
  *value = attribute == RT_FUNC_NUM_REGS ? 32 : attribute == RT_FUNC_MAX_THREADS_PER_BLOCK ? 1024 : 0;
  return 0;
}
static CuResult occupancy(int *blocks, CuFunction f, int size, size_t shared) {
  IGNORE(f, size, shared);
  *blocks = 8;
  return 0;
}
static CuResult func_set(CuFunction f, int attribute, int value) { IGNORE(f, attribute, value); return 0; }
static CuResult clusters(int *n, CuFunction f, const RtLaunchConfig *c) {
  IGNORE(f, c);
  *n = 16;
  return 0;
}
static CuResult launch(CuFunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned shared, CuStream s, void **params,
                       void **extra) {
  IGNORE(f, gx, gy, gz, bx, by, bz, shared, s, params, extra);
  return 0;
}
static CuResult launch_ex(const RtLaunchConfig *c, CuFunction f, void **params, void **extra) {
  IGNORE(c, f, params, extra);
  return 0;
}
static CuResult mem_alloc(CuDevicePtr *p, size_t bytes) {
  IGNORE(bytes);
  *p = 1u << 20;
  return 0;
}
static CuResult copy_htod(CuDevicePtr d, const void *s, size_t n) { IGNORE(d, s, n); return 0; }
static CuResult copy_dtoh(void *d, CuDevicePtr s, size_t n) { IGNORE(d, s, n); return 0; }
static CuResult copy_dtod(CuDevicePtr d, CuDevicePtr s, size_t n) { IGNORE(d, s, n); return 0; }
static CuResult memset8(CuDevicePtr d, unsigned char v, size_t n) { IGNORE(d, v, n); return 0; }
static CuResult memset8_async(CuDevicePtr d, unsigned char v, size_t n, CuStream s) {
  IGNORE(d, v, n, s);
  return 0;
}
static CuResult stream_create(CuStream *s, unsigned flags) {
  IGNORE(flags);
  *s = HANDLE(CuStream);
  return 0;
}
static CuResult event_create(CuEvent *e, unsigned flags) {
  IGNORE(flags);
  *e = HANDLE(CuEvent);
  return 0;
}
static CuResult event_record(CuEvent e, CuStream s) { IGNORE(e, s); return 0; }
static CuResult elapsed(float *ms, CuEvent a, CuEvent b) {
  IGNORE(a, b);
  *ms = 0.0f;
  return 0;
}

static const struct {
  const char *name;
  void (*fn)(void);
} entries[] = {
#define E(name, fn) {#name, (void (*)(void))fn}
    E(cuGetErrorName, error_name), E(cuGetErrorString, error_name), E(cuInit, ok_init),
    E(cuDriverGetVersion, version), E(cuDeviceGetCount, device_count),
    E(cuDeviceGet, device_get), E(cuDeviceGetName, device_name),
    E(cuDeviceGetAttribute, device_attribute), E(cuDevicePrimaryCtxRetain, primary_retain),
    E(cuDevicePrimaryCtxRelease, ok_dev), E(cuCtxGetCurrent, ctx_out),
    E(cuCtxGetDevice, ctx_device), E(cuCtxPushCurrent, ok_ctx), E(cuCtxPopCurrent, ctx_out),
    E(cuCtxSetCurrent, ok_ctx), E(cuCtxSynchronize, ok_void), E(cuModuleLoadDataEx, module_load),
    E(cuModuleUnload, ok_module), E(cuLinkCreate, link_create), E(cuLinkAddData, link_add),
    E(cuLinkComplete, link_complete), E(cuLinkDestroy, link_destroy),
    E(cuModuleGetFunction, get_function), E(cuFuncGetAttribute, func_attribute),
    E(cuOccupancyMaxActiveBlocksPerMultiprocessor, occupancy),
    E(cuFuncSetAttribute, func_set), E(cuOccupancyMaxActiveClusters, clusters),
    E(cuLaunchKernel, launch), E(cuLaunchKernelEx, launch_ex), E(cuMemAlloc, mem_alloc),
    E(cuMemFree, ok_ptr), E(cuMemcpyHtoD, copy_htod), E(cuMemcpyDtoH, copy_dtoh),
    E(cuMemcpyDtoD, copy_dtod), E(cuMemsetD8, memset8), E(cuMemsetD8Async, memset8_async),
    E(cuStreamCreate, stream_create), E(cuStreamDestroy, ok_stream),
    E(cuStreamSynchronize, ok_stream), E(cuEventCreate, event_create),
    E(cuEventRecord, event_record), E(cuEventSynchronize, ok_event),
    E(cuEventElapsedTime, elapsed), E(cuEventDestroy, ok_event),
#undef E
};

CuResult cuGetProcAddress_v2(const char *symbol, void **pfn, int version_, uint64_t flags,
                             int *status);

CuResult cuGetProcAddress_v2(const char *symbol, void **pfn, int version_, uint64_t flags,
                             int *status) {
  IGNORE(version_, flags);
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
    if (strcmp(entries[i].name, symbol) == 0) {
      memcpy(pfn, &entries[i].fn, sizeof *pfn);
      if (status) *status = 1;
      return 0;
    }
  *pfn = NULL;
  if (status) *status = 0;
  return 500; /* CUDA_ERROR_NOT_FOUND */
}
