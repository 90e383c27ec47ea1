/*
 * driver.c — loading the CUDA driver at run time.
 *
 * tilejit never links libcuda: the first GPU call dlopens libcuda.so.1 (or
 * the path in TILEJIT_LIBCUDA), finds cuGetProcAddress_v2 with dlsym, and
 * asks it for every entry point of RT_DRIVER_LIST with the CUDA version whose
 * ABI our prototypes match. Plain dlsym would return the oldest ABI of a
 * versioned name (cuMemAlloc rather than cuMemAlloc_v2); asking by version
 * gets the right one on any newer driver too.
 *
 * The load runs once per process under pthread_once; the table, its status
 * and the message are written there and only read afterwards. The library
 * stays loaded until the process exits. Also here: error names for messages
 * and the driver version -> highest PTX ISA table.
 */
#include "runtime/runtime.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus). */
typedef CuResult (*GetProcAddressFn)(const char *symbol, void **pfn, int version, uint64_t flags,
                                     int *symbol_status);
/* CU_GET_PROC_ADDRESS_LEGACY_STREAM: stream 0 is the legacy default stream. */
#define GET_PROC_LEGACY_STREAM 1ull

static struct {
  pthread_once_t once;
  RtDriver table;
  tj_status status;
  char why[512];
} loaded = {.once = PTHREAD_ONCE_INIT};

static bool resolve(GetProcAddressFn get, const char *name, int version, void **slot) {
  int symbol_status = 0;
  CuResult r = get(name, slot, version, GET_PROC_LEGACY_STREAM, &symbol_status);
  if (r == RT_CUDA_SUCCESS && *slot) return true;
  snprintf(loaded.why, sizeof loaded.why,
           "no CUDA driver: libcuda.so.1 has no %s for CUDA %d.%d (result %d, symbol status %d); "
           "the driver is too old",
           name, version / 1000, version % 1000 / 10, r, symbol_status);
  return false;
}

/* Fills the table through cuGetProcAddress_v2; false when an entry is missing. */
static bool resolve_all(GetProcAddressFn get) {
  void *slot;
#define RT_DRIVER_RESOLVE(name, version, params)                                                   \
  if (!resolve(get, #name, version, &slot)) return false;                                          \
  memcpy(&loaded.table.name, &slot, sizeof slot);
  RT_DRIVER_LIST(RT_DRIVER_RESOLVE)
#undef RT_DRIVER_RESOLVE
  return true;
}

static tj_status open_library(GetProcAddressFn *get) {
  const char *path = getenv(RT_LIBCUDA_ENV);
  if (!path || !*path) path = "libcuda.so.1";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(loaded.why, sizeof loaded.why, "no CUDA driver: cannot load %s (%s)", path,
             e ? e : "unknown error");
    return TJ_ERR_NO_DRIVER;
  }
  void *sym = dlsym(lib, "cuGetProcAddress_v2");
  if (!sym) {
    snprintf(loaded.why, sizeof loaded.why,
             "no CUDA driver: %s has no cuGetProcAddress_v2 (a driver older than CUDA 12.0)", path);
    return TJ_ERR_NO_DRIVER;
  }
  memcpy(get, &sym, sizeof sym);
  return TJ_OK;
}

static void load_once(void) {
  GetProcAddressFn get;
  loaded.status = open_library(&get);
  if (loaded.status != TJ_OK) return;
  if (!resolve_all(get)) {
    loaded.status = TJ_ERR_NO_DRIVER;
    return;
  }
  RtDriver *cu = &loaded.table;
  CuResult r = cu->cuInit(0);
  if (r != RT_CUDA_SUCCESS) {
    char name[256];
    rt_driver_describe(cu, r, name, sizeof name);
    loaded.status = r == RT_CUDA_ERROR_NO_DEVICE ? TJ_ERR_NO_DEVICE : TJ_ERR_DRIVER;
    snprintf(loaded.why, sizeof loaded.why, "%s: cuInit failed: %s",
             r == RT_CUDA_ERROR_NO_DEVICE ? "no CUDA device" : "CUDA driver unusable", name);
    return;
  }
  if ((r = cu->cuDriverGetVersion(&cu->version)) != RT_CUDA_SUCCESS) cu->version = 0;
  loaded.status = TJ_OK;
}

tj_status rt_driver_load(const RtDriver **out, const char **why) {
  pthread_once(&loaded.once, load_once);
  *out = loaded.status == TJ_OK ? &loaded.table : NULL;
  *why = loaded.why;
  return loaded.status;
}

void rt_driver_describe(const RtDriver *cu, CuResult result, char *out, size_t size) {
  const char *name = NULL, *text = NULL;
  if (cu && cu->cuGetErrorName && cu->cuGetErrorName(result, &name) != RT_CUDA_SUCCESS) name = NULL;
  if (cu && cu->cuGetErrorString && cu->cuGetErrorString(result, &text) != RT_CUDA_SUCCESS)
    text = NULL;
  if (name)
    snprintf(out, size, "%s (%s)", name, text ? text : "no description");
  else
    snprintf(out, size, "CUresult %d", result);
}

/* The first driver release that loads each PTX ISA, newest first (from the
 * PTX ISA release history: 8.6 came with 12.7, 9.0 with 13.0). */
static const struct {
  int driver, ptx;
} ptx_by_driver[] = {
    {13010, 91}, {13000, 90}, {12090, 88}, {12080, 87}, {12070, 86}, {12050, 85}, {12040, 84},
    {12030, 83}, {12020, 82}, {12010, 81}, {12000, 80}, {11080, 78}, {11070, 77}, {11060, 76},
    {11050, 75}, {11040, 74}, {11030, 73}, {11020, 72}, {11010, 71}, {11000, 70},
};

int rt_driver_max_ptx(int driver_version) {
  for (size_t i = 0; i < TJ_COUNTOF(ptx_by_driver); i++)
    if (driver_version >= ptx_by_driver[i].driver) return ptx_by_driver[i].ptx;
  return 0;
}

tj_status rt_driver_fail(const RtDriver *cu, char *error, const char *call, CuResult result,
                         const char *log) {
  char name[256];
  rt_driver_describe(cu, result, name, sizeof name);
  snprintf(error, RT_ERROR_MAX, "%s failed: %s%s%s", call, name, log && *log ? "\n" : "",
           log ? log : "");
  return TJ_ERR_DRIVER;
}

void rt_jit_options(RtJitOptions *o, char *info_log, size_t info_size, char *error_log,
                    size_t error_size) {
  const int keys[6] = {RT_JIT_WALL_TIME,
                       RT_JIT_INFO_LOG_BUFFER,
                       RT_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                       RT_JIT_ERROR_LOG_BUFFER,
                       RT_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                       RT_JIT_LOG_VERBOSE};
  void *values[6] = {NULL,
                     info_log,
                     (void *)(uintptr_t)info_size,
                     error_log,
                     (void *)(uintptr_t)error_size,
                     (void *)(uintptr_t)1};
  memcpy(o->keys, keys, sizeof keys);
  memcpy(o->values, values, sizeof values);
}

double rt_jit_wall_ms(const RtJitOptions *o) {
  float wall = 0;
  memcpy(&wall, &o->values[0], sizeof wall);
  return wall;
}
