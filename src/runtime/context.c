/*
 * context.c — tj_context: a CUDA context, what the device can do, and the
 * kernels compiled for it.
 *
 * A tj_context wraps the calling thread's current CUDA context when there is
 * one on the requested device, and otherwise retains that device's primary
 * context (released at destroy). Creation queries the device (arch, SMs,
 * thread and shared-memory limits), the driver version, and picks the PTX
 * target: the arch must be in the code generator's table and its ISA must
 * be one the driver loads.
 *
 * Every call that touches the driver binds the context to the calling
 * thread (rt_bind: one cuCtxGetCurrent when it is already current; made
 * current for good on a thread that has none; else a push and a pop), so
 * any thread can use a context.
 *
 * Creation also opens the kernel cache on disk (disk_cache.c) as the
 * environment says, and reads TILEJIT_DUMP (dump.c); neither can make it
 * fail.
 *
 * Error messages are kept per thread, tagged with the context's id: a
 * context is shared between threads, and a message on the handle would be a
 * data race. The one thread-local slot is the only mutable state here that
 * is not behind a lock, and no other thread can see it.
 */
#include "runtime/runtime.h"

#include "codegen/codegen.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The context rt_bind made current on this thread, if any, so that
 * tj_context_destroy can take it back before releasing it. */
static _Thread_local CuContext made_current;

static _Thread_local struct {
  uint64_t context_id; /* 0: a call given no context */
  char message[RT_ERROR_MAX];
} last_failure;

static atomic_uint_fast64_t next_context_id = 1;

tj_status rt_fail(const tj_context *ctx, tj_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_failure.message, sizeof last_failure.message, fmt, ap);
  va_end(ap);
  last_failure.context_id = ctx ? ctx->id : 0;
  return status;
}

tj_status rt_fail_driver(const tj_context *ctx, const char *call, CuResult result) {
  char name[256];
  rt_driver_describe(ctx ? ctx->cu : NULL, result, name, sizeof name);
  return rt_fail(ctx, TJ_ERR_DRIVER, "%s failed: %s", call, name);
}

tj_status rt_fail_no_handle(const char *function, const char *handle) {
  const RtDriver *cu;
  const char *why;
  tj_status st = rt_driver_load(&cu, &why);
  if (st != TJ_OK) return rt_fail(NULL, st, "%s: %s", function, why);
  return rt_fail(NULL, TJ_ERR_INVALID_ARGUMENT, "%s: the %s is NULL", function, handle);
}

const char *tj_context_error(const tj_context *ctx) {
  uint64_t id = ctx ? ctx->id : 0;
  return last_failure.context_id == id ? last_failure.message : "";
}

tj_status rt_bind(tj_context *ctx, RtBinding *binding) {
  CuContext current = NULL;
  binding->pushed = false;
  CuResult r = ctx->cu->cuCtxGetCurrent(&current);
  if (r != RT_CUDA_SUCCESS) return rt_fail_driver(ctx, "cuCtxGetCurrent", r);
  if (current == ctx->cuctx) return TJ_OK;
  /* A thread with no context gets ours for good, as the CUDA runtime does
   * with the primary context, so its later calls need no push and pop. */
  if (!current && ctx->cu->cuCtxSetCurrent(ctx->cuctx) == RT_CUDA_SUCCESS) {
    made_current = ctx->cuctx;
    return TJ_OK;
  }
  if ((r = ctx->cu->cuCtxPushCurrent(ctx->cuctx)) != RT_CUDA_SUCCESS)
    return rt_fail_driver(ctx, "cuCtxPushCurrent", r);
  binding->pushed = true;
  return TJ_OK;
}

void rt_unbind(tj_context *ctx, RtBinding *binding) {
  CuContext popped;
  if (binding->pushed) ctx->cu->cuCtxPopCurrent(&popped);
  binding->pushed = false;
}

int rt_arch_min_ptx(int arch, char *known, size_t known_size) {
  size_t used = 0;
  known[0] = '\0';
  for (int i = 0; i < cg_arch_count() && used < known_size; i++)
    used += (size_t)snprintf(known + used, known_size - used, "%s%s", i ? ", " : "",
                             cg_arch_at(i)->target);
  const CgArch *a = cg_arch_find(arch);
  return a ? a->ptx : 0;
}

/* ------------------------------------------------------------ creation */

/* The current context when it is on the requested device (or any device for
 * TJ_DEVICE_CURRENT); otherwise the device's primary context, retained. */
static tj_status attach(tj_context *ctx, int ordinal) {
  const RtDriver *cu = ctx->cu;
  CuContext current = NULL;
  CuDevice device;
  CuResult r = cu->cuCtxGetCurrent(&current);
  if (r != RT_CUDA_SUCCESS) return rt_fail_driver(NULL, "cuCtxGetCurrent", r);
  if (current && (r = cu->cuCtxGetDevice(&device)) != RT_CUDA_SUCCESS)
    return rt_fail_driver(NULL, "cuCtxGetDevice", r);
  if (current && (ordinal == TJ_DEVICE_CURRENT || device == ordinal)) {
    ctx->cuctx = current;
    ctx->device = device;
    return TJ_OK;
  }
  if (ordinal == TJ_DEVICE_CURRENT) ordinal = 0;
  int count = 0;
  if ((r = cu->cuDeviceGetCount(&count)) != RT_CUDA_SUCCESS)
    return rt_fail_driver(NULL, "cuDeviceGetCount", r);
  if (ordinal >= count)
    return rt_fail(NULL, TJ_ERR_NO_DEVICE, "no CUDA device %d: the driver sees %d", ordinal, count);
  if ((r = cu->cuDeviceGet(&ctx->device, ordinal)) != RT_CUDA_SUCCESS)
    return rt_fail_driver(NULL, "cuDeviceGet", r);
  if ((r = cu->cuDevicePrimaryCtxRetain(&ctx->cuctx, ctx->device)) != RT_CUDA_SUCCESS)
    return rt_fail_driver(NULL, "cuDevicePrimaryCtxRetain", r);
  ctx->owns_primary = true;
  return TJ_OK;
}

static const struct {
  int attribute;
  size_t offset;
} device_attributes[] = {
    {RT_ATTR_SM_COUNT, offsetof(tj_device_info, sm_count)},
    {RT_ATTR_MAX_THREADS_PER_BLOCK, offsetof(tj_device_info, max_threads_per_block)},
    {RT_ATTR_MAX_THREADS_PER_SM, offsetof(tj_device_info, max_threads_per_sm)},
    {RT_ATTR_MAX_BLOCKS_PER_SM, offsetof(tj_device_info, max_blocks_per_sm)},
    {RT_ATTR_MAX_SHARED_PER_BLOCK, offsetof(tj_device_info, max_shared_per_block)},
    {RT_ATTR_MAX_SHARED_PER_BLOCK_OPTIN, offsetof(tj_device_info, max_shared_per_block_optin)},
    {RT_ATTR_MAX_SHARED_PER_SM, offsetof(tj_device_info, max_shared_per_sm)},
    {RT_ATTR_MAX_REGISTERS_PER_SM, offsetof(tj_device_info, registers_per_sm)},
    {RT_ATTR_L2_CACHE_SIZE, offsetof(tj_device_info, l2_bytes)},
    {RT_ATTR_COOPERATIVE_LAUNCH, offsetof(tj_device_info, cooperative_launch)},
    {RT_ATTR_CLUSTER_LAUNCH, offsetof(tj_device_info, cluster_launch)},
};

static tj_status query_device(tj_context *ctx) {
  const RtDriver *cu = ctx->cu;
  tj_device_info *info = &ctx->info;
  int major = 0, minor = 0, grid_x = 0;
  CuResult r = cu->cuDeviceGetName(info->name, (int)sizeof info->name, ctx->device);
  for (size_t i = 0; r == RT_CUDA_SUCCESS && i < TJ_COUNTOF(device_attributes); i++)
    r = cu->cuDeviceGetAttribute((int *)((char *)info + device_attributes[i].offset),
                                 device_attributes[i].attribute, ctx->device);
  if (r == RT_CUDA_SUCCESS) r = cu->cuDeviceGetAttribute(&major, RT_ATTR_CC_MAJOR, ctx->device);
  if (r == RT_CUDA_SUCCESS) r = cu->cuDeviceGetAttribute(&minor, RT_ATTR_CC_MINOR, ctx->device);
  if (r == RT_CUDA_SUCCESS)
    r = cu->cuDeviceGetAttribute(&grid_x, RT_ATTR_MAX_GRID_DIM_X, ctx->device);
  if (r != RT_CUDA_SUCCESS) return rt_fail_driver(NULL, "cuDeviceGetAttribute", r);
  info->ordinal = ctx->device;
  info->arch = 10 * major + minor;
  info->max_grid_x = grid_x;
  info->driver_version = cu->version;
  return TJ_OK;
}

/* The PTX target: the requested or the device's arch, in the code
 * generator's table, at an ISA the driver loads. */
static tj_status choose_target(tj_context *ctx, const tj_context_options *o) {
  tj_device_info *info = &ctx->info;
  int arch = o->arch ? o->arch : info->arch;
  if (arch > info->arch)
    return rt_fail(NULL, TJ_ERR_UNSUPPORTED, "arch sm_%d is newer than the device (%s, sm_%d)",
                   arch, info->name, info->arch);
  char known[256] = "";
  int lowest = rt_arch_min_ptx(arch, known, sizeof known);
  if (!lowest)
    return rt_fail(NULL, TJ_ERR_UNSUPPORTED,
                   "arch sm_%d is not in the code generator's PTX table (it has %s); "
                   "set tj_context_options.arch to one of those",
                   arch, known);
  int highest = rt_driver_max_ptx(info->driver_version);
  if (lowest > highest || (o->ptx_version && (o->ptx_version < lowest || o->ptx_version > highest)))
    return rt_fail(NULL, TJ_ERR_UNSUPPORTED,
                   "sm_%d needs PTX ISA %d.%d%s but the driver (CUDA %d.%d) loads up to %d.%d",
                   arch, (o->ptx_version ? o->ptx_version : lowest) / 10,
                   (o->ptx_version ? o->ptx_version : lowest) % 10,
                   o->ptx_version ? " (requested)" : "", info->driver_version / 1000,
                   info->driver_version % 1000 / 10, highest / 10, highest % 10);
  info->target_arch = arch;
  info->ptx_version = highest;
  ctx->ptx_request = o->ptx_version;
  /* Cluster kernels need the ISA of their instructions (st.async): where
   * the driver or the request stops short of it, plans take none. */
  if ((o->ptx_version ? o->ptx_version : highest) < rt_cluster_ptx()) info->cluster_launch = 0;
  return TJ_OK;
}

int rt_cluster_ptx(void) { return cg_ptx_version(90, CG_FEAT_CLUSTER); }

static tj_status check_options(const tj_context_options *o) {
  if (o->device < TJ_DEVICE_CURRENT)
    return rt_fail(NULL, TJ_ERR_INVALID_ARGUMENT, "tj_context_create: device %d", o->device);
  if (o->arch < 0 || o->ptx_version < 0 || o->cache_capacity < 0)
    return rt_fail(NULL, TJ_ERR_INVALID_ARGUMENT,
                   "tj_context_create: negative arch, ptx_version or cache_capacity");
  return TJ_OK;
}

static tj_status build(tj_context *ctx, const tj_context_options *o) {
  tj_status st = attach(ctx, o->device);
  if (st == TJ_OK) st = query_device(ctx);
  if (st == TJ_OK) st = choose_target(ctx, o);
  if (st != TJ_OK) return st;
  int capacity = o->cache_capacity ? o->cache_capacity : TJ_CACHE_DEFAULT_CAPACITY;
  if (!(ctx->cache = rt_cache_new(capacity, rt_kernel_free, ctx)))
    return rt_fail(NULL, TJ_ERR_OUT_OF_MEMORY, "tj_context_create: out of memory");
  /* The disk cache and dumps are optional: out of memory here only turns
   * them off (every rt_disk_* takes NULL as a disabled cache). */
  ctx->disk = rt_disk_open_env();
  const char *dump = getenv(RT_DUMP_ENV);
  if (dump && *dump) ctx->dump_dir = tj_strdup(dump);
  return TJ_OK;
}

tj_status tj_context_create(const tj_context_options *options, tj_context **out) {
  const RtDriver *cu;
  const char *why;
  if (out) *out = NULL;
  tj_status st = rt_driver_load(&cu, &why);
  if (st != TJ_OK) return rt_fail(NULL, st, "tj_context_create: %s", why);
  if (!out) return rt_fail(NULL, TJ_ERR_INVALID_ARGUMENT, "tj_context_create: out is NULL");
  tj_context_options o = {.device = TJ_DEVICE_CURRENT};
  if (options) o = *options;
  if ((st = check_options(&o)) != TJ_OK) return st;
  tj_context *ctx = tj_alloc(sizeof *ctx);
  if (!ctx) return rt_fail(NULL, TJ_ERR_OUT_OF_MEMORY, "tj_context_create: out of memory");
  ctx->cu = cu;
  ctx->id = atomic_fetch_add(&next_context_id, 1);
  pthread_mutex_init(&ctx->row_lock, NULL);
  pthread_mutex_init(&ctx->workspace_lock, NULL);
  if ((st = build(ctx, &o)) != TJ_OK) {
    tj_context_destroy(ctx);
    return st;
  }
  *out = ctx;
  return TJ_OK;
}

/* Waits for the context's work, drops every kernel, then the context. */
void tj_context_destroy(tj_context *ctx) {
  if (!ctx) return;
  RtBinding binding = {false};
  bool bound = ctx->cuctx && rt_bind(ctx, &binding) == TJ_OK;
  if (bound) ctx->cu->cuCtxSynchronize();
  rt_softmax_reset(ctx);
  rt_cache_free(ctx->cache);
  rt_disk_close(ctx->disk);
  free(ctx->dump_dir);
  if (bound) rt_workspace_free_all(ctx);
  if (bound) rt_unbind(ctx, &binding);
  CuContext current = NULL;
  if (made_current == ctx->cuctx && ctx->cu->cuCtxGetCurrent(&current) == RT_CUDA_SUCCESS &&
      current == ctx->cuctx)
    ctx->cu->cuCtxSetCurrent(NULL);
  if (made_current == ctx->cuctx) made_current = NULL;
  if (ctx->owns_primary) ctx->cu->cuDevicePrimaryCtxRelease(ctx->device);
  pthread_mutex_destroy(&ctx->row_lock);
  pthread_mutex_destroy(&ctx->workspace_lock);
  free(ctx);
}

/* ------------------------------------------------------------- queries */

tj_status tj_context_device_info(const tj_context *ctx, tj_device_info *info) {
  if (!ctx) return rt_fail_no_handle("tj_context_device_info", "context");
  if (!info) return rt_fail(ctx, TJ_ERR_INVALID_ARGUMENT, "tj_context_device_info: info is NULL");
  *info = ctx->info;
  return TJ_OK;
}

tj_status tj_context_cache_stats(const tj_context *ctx, tj_cache_stats *stats) {
  if (!ctx) return rt_fail_no_handle("tj_context_cache_stats", "context");
  if (!stats) return rt_fail(ctx, TJ_ERR_INVALID_ARGUMENT, "tj_context_cache_stats: stats is NULL");
  rt_cache_stats(ctx->cache, stats);
  RtDiskStats disk;
  rt_disk_stats(ctx->disk, &disk);
  stats->disk_hits = disk.hits;
  stats->disk_misses = disk.misses;
  stats->disk_writes = disk.writes;
  stats->disk_rejects = disk.rejects;
  stats->disk_errors = disk.errors;
  return TJ_OK;
}

tj_status tj_context_synchronize(tj_context *ctx) {
  if (!ctx) return rt_fail_no_handle("tj_context_synchronize", "context");
  RtBinding binding;
  tj_status st = rt_bind(ctx, &binding);
  if (st != TJ_OK) return st;
  CuResult r = ctx->cu->cuCtxSynchronize();
  rt_unbind(ctx, &binding);
  return r == RT_CUDA_SUCCESS ? TJ_OK : rt_fail_driver(ctx, "cuCtxSynchronize", r);
}
