/*
 * launch.c — launching a loaded kernel: grid sizing from its launch shape,
 * argument packing, the workspace of grid-level kernels, and the launch on
 * the caller's stream.
 *
 * Generated kernels stride over their program instances (see the kernel ABI
 * in tilejit.h). rt_launch_ctas is the one place where a launch shape
 * becomes a grid:
 *   - instances spread over several CTAs (a cluster, or a group of SPLIT
 *     clusters or CTAs) take ctas_per_program CTAs each; a grid level needs
 *     all of a group's CTAs resident at once, so its grid is at most the
 *     groups the device holds (a persistent, cooperative grid), and so is a
 *     kernel with loops; a loop-free cluster kernel gets a cluster per
 *     instance;
 *   - otherwise ceil(instances / programs_per_cta) CTAs, capped at the
 *     number that can be resident at once unless the shape says all_ctas
 *     (the PTX backend's kernels without loops, measured faster uncapped:
 *     src/codegen/README.md).
 * Residency was found when the kernel was loaded (module.c). The hidden
 * parameters (tj_workspace, then the instance count) are filled here. A
 * plain kernel goes through cuLaunchKernel; a cluster or cooperative one
 * through cuLaunchKernelEx with those attributes. Nothing on the launch
 * path allocates, formats text on success, or waits for the device, except
 * the first grid-level launch on a stream, which allocates and clears that
 * stream's workspace.
 */
#include "runtime/runtime.h"

#include <string.h>

int64_t rt_launch_ctas(const tj_context *ctx, const tj_kernel *k, int64_t instances) {
  const tj_launch_shape *shape = &k->report.info.shape;
  int64_t max =
      k->report.max_ctas < ctx->info.max_grid_x ? k->report.max_ctas : ctx->info.max_grid_x;
  if (shape->ctas_per_program > 1) {
    int64_t per = shape->ctas_per_program, units = instances;
    bool capped = shape->cooperative || !shape->all_ctas;
    if (capped && units > max / per) units = max / per;
    if (shape->cooperative && units > TJ_WORKSPACE_COUNTERS / 128) /* its counters */
      units = TJ_WORKSPACE_COUNTERS / 128;
    if (units > ctx->info.max_grid_x / per) units = ctx->info.max_grid_x / per;
    return units * per;
  }
  int64_t per_cta = shape->programs_per_cta > 0 ? shape->programs_per_cta : 1;
  int64_t ctas = instances / per_cta + (instances % per_cta != 0);
  if (!shape->all_ctas && ctas > k->report.max_ctas) ctas = k->report.max_ctas;
  if (ctas > ctx->info.max_grid_x) ctas = ctx->info.max_grid_x;
  return ctas;
}

/* ---- workspaces ---------------------------------------------------------------- */

/* Grid-level kernels keep their barrier counters and partials in a
 * workspace. Kernels on one stream run one after another, so each stream
 * gets its own, allocated and cleared (on that stream) at its first use and
 * kept until the context is destroyed (a larger one replaces it, after the
 * stream's work); kernels on different streams may run at once and never
 * share one. A counter is left as it was found after every launch, whatever
 * the kernel's SPLIT, and counters and partials never share bytes
 * (reduce_ctas.c), so clearing once is enough. */
static tj_status workspace_for(tj_context *ctx, void *stream, size_t bytes, CuDevicePtr *out) {
  tj_status st = TJ_OK;
  pthread_mutex_lock(&ctx->workspace_lock);
  RtWorkspace *w = NULL;
  for (int i = 0; i < ctx->nworkspaces && !w; i++)
    if (ctx->workspaces[i].stream == stream) w = &ctx->workspaces[i];
  if (w && w->bytes < bytes) { /* a bigger one: the old one is done with once the stream is */
    CuResult r = ctx->cu->cuStreamSynchronize((CuStream)stream);
    if (r == RT_CUDA_SUCCESS) r = ctx->cu->cuMemFree(w->ptr);
    if (r != RT_CUDA_SUCCESS) st = rt_fail_driver(ctx, "cuMemFree (workspace)", r);
    w->ptr = 0;
    w->bytes = 0;
  }
  if (st == TJ_OK && !w && ctx->nworkspaces == RT_MAX_WORKSPACES)
    st = rt_fail(ctx, TJ_ERR_UNSUPPORTED,
                 "grid-level kernels run on at most %d streams per context", RT_MAX_WORKSPACES);
  if (st == TJ_OK && !w) {
    w = &ctx->workspaces[ctx->nworkspaces++];
    w->stream = stream;
  }
  if (st == TJ_OK && !w->ptr) {
    size_t want = bytes < ((size_t)2 << 20) ? (size_t)2 << 20 : bytes;
    CuResult r = ctx->cu->cuMemAlloc(&w->ptr, want);
    if (r == RT_CUDA_SUCCESS) r = ctx->cu->cuMemsetD8Async(w->ptr, 0, want, (CuStream)stream);
    if (r != RT_CUDA_SUCCESS) st = rt_fail_driver(ctx, "cuMemAlloc (workspace)", r);
    w->bytes = r == RT_CUDA_SUCCESS ? want : 0;
  }
  if (st == TJ_OK) *out = w->ptr;
  pthread_mutex_unlock(&ctx->workspace_lock);
  return st;
}

void rt_workspace_free_all(tj_context *ctx) {
  pthread_mutex_lock(&ctx->workspace_lock);
  for (int i = 0; i < ctx->nworkspaces; i++)
    if (ctx->workspaces[i].ptr) ctx->cu->cuMemFree(ctx->workspaces[i].ptr);
  ctx->nworkspaces = 0;
  pthread_mutex_unlock(&ctx->workspace_lock);
}

/* ---- launching ----------------------------------------------------------------- */

static CuResult launch_ex(tj_context *ctx, const tj_kernel *k, int64_t ctas, void *stream,
                          void **params) {
  const tj_launch_shape *shape = &k->report.info.shape;
  RtLaunchAttribute attrs[2];
  unsigned count = 0;
  memset(attrs, 0, sizeof attrs);
  if (shape->cluster > 1) {
    attrs[count].id = RT_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[count].value.cluster.x = (unsigned)shape->cluster;
    attrs[count].value.cluster.y = attrs[count].value.cluster.z = 1;
    count++;
  }
  if (shape->cooperative) {
    attrs[count].id = RT_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[count].value.cooperative = 1;
    count++;
  }
  RtLaunchConfig config = {(unsigned)ctas,
                           1,
                           1,
                           (unsigned)shape->threads,
                           1,
                           1,
                           (unsigned)shape->dynamic_shared_bytes,
                           (CuStream)stream,
                           attrs,
                           count};
  return ctx->cu->cuLaunchKernelEx(&config, k->function, params, NULL);
}

tj_status rt_launch(tj_context *ctx, const tj_kernel *k, void **params, uint64_t *hidden,
                    int64_t instances, void *stream) {
  const tj_launch_shape *shape = &k->report.info.shape;
  int64_t ctas = rt_launch_ctas(ctx, k, instances);
  int next = k->param_count - k->hidden_count;
  hidden[1] = (uint64_t)instances;
  if (k->hidden_count == 2) params[next++] = &hidden[0];
  params[next] = &hidden[1];
  if (ctas < 1)
    return rt_fail(ctx, TJ_ERR_UNSUPPORTED, "%s: no CTA can be launched", k->report.info.entry);
  RtBinding binding;
  tj_status st = rt_bind(ctx, &binding);
  if (st != TJ_OK) return st;
  if (shape->workspace_bytes > 0) {
    CuDevicePtr ws = 0;
    size_t groups = (size_t)(ctas / shape->ctas_per_program);
    st = workspace_for(ctx, stream, TJ_WORKSPACE_COUNTERS + groups * (size_t)shape->workspace_bytes,
                       &ws);
    if (st != TJ_OK) {
      rt_unbind(ctx, &binding);
      return st;
    }
    hidden[0] = ws;
  }
  bool ex = shape->cluster > 1 || shape->cooperative;
  CuResult r = ex ? launch_ex(ctx, k, ctas, stream, params)
                  : ctx->cu->cuLaunchKernel(
                        k->function, (unsigned)ctas, 1, 1, (unsigned)shape->threads, 1, 1,
                        (unsigned)shape->dynamic_shared_bytes, (CuStream)stream, params, NULL);
  rt_unbind(ctx, &binding);
  return r == RT_CUDA_SUCCESS ? TJ_OK
                              : rt_fail_driver(ctx, ex ? "cuLaunchKernelEx" : "cuLaunchKernel", r);
}

static const char *const arg_kind_names[] = {"TJ_ARG_PTR", "TJ_ARG_INT", "TJ_ARG_FLOAT"};

static tj_status bad_arg(tj_context *ctx, int index, const tj_arg *a, const char *wanted) {
  const char *kind = (unsigned)a->kind < TJ_COUNTOF(arg_kind_names) ? arg_kind_names[a->kind] : "?";
  return rt_fail(ctx, TJ_ERR_INVALID_ARGUMENT, "tj_launch: argument %d is %s, the kernel takes %s",
                 index, kind, wanted);
}

/* Stores argument i in its slot in the width the kernel reads. */
static tj_status pack_one(tj_context *ctx, RtParamKind kind, int i, const tj_arg *a,
                          uint64_t *slot) {
  switch (kind) {
  case RT_PARAM_B64:
    if (a->kind == TJ_ARG_PTR)
      *slot = (uint64_t)(uintptr_t)a->u.ptr;
    else if (a->kind == TJ_ARG_INT)
      *slot = (uint64_t)a->u.i;
    else
      return bad_arg(ctx, i, a, "a pointer or 64-bit integer");
    return TJ_OK;
  case RT_PARAM_I32: {
    if (a->kind != TJ_ARG_INT) return bad_arg(ctx, i, a, "a 32-bit integer");
    if (a->u.i < INT32_MIN || a->u.i > (int64_t)UINT32_MAX)
      return rt_fail(ctx, TJ_ERR_INVALID_ARGUMENT,
                     "tj_launch: argument %d (%lld) overflows 32 bits", i, (long long)a->u.i);
    uint32_t v = (uint32_t)a->u.i;
    memcpy(slot, &v, sizeof v);
    return TJ_OK;
  }
  case RT_PARAM_F32: {
    if (a->kind != TJ_ARG_FLOAT) return bad_arg(ctx, i, a, "f32");
    float v = (float)a->u.f;
    memcpy(slot, &v, sizeof v);
    return TJ_OK;
  }
  case RT_PARAM_F64:
    if (a->kind != TJ_ARG_FLOAT) return bad_arg(ctx, i, a, "f64");
    memcpy(slot, &a->u.f, sizeof a->u.f);
    return TJ_OK;
  }
  return rt_fail(ctx, TJ_ERR_INVALID_ARGUMENT, "tj_launch: parameter %d has no kind", i);
}

tj_status tj_launch(tj_context *ctx, const tj_kernel *k, const tj_arg *args, int count,
                    int64_t grid, void *stream) {
  if (!ctx) return rt_fail_no_handle("tj_launch", "context");
  if (!k || k->ctx != ctx)
    return rt_fail(ctx, TJ_ERR_INVALID_ARGUMENT, "tj_launch: the kernel is %s",
                   k ? "from another context" : "NULL");
  int wanted = k->param_count - k->hidden_count;
  if (count != wanted || (count > 0 && !args))
    return rt_fail(ctx, TJ_ERR_INVALID_ARGUMENT, "tj_launch: %s takes %d arguments, got %d%s",
                   k->report.info.entry, wanted, count, args ? "" : " (args NULL)");
  char why[512];
  if (rt_assume_check(&k->assume, args, count, why, sizeof why) != TJ_OK)
    return rt_fail(ctx, TJ_ERR_INVALID_ARGUMENT, "tj_launch: %s: %s", k->report.info.entry, why);
  return rt_launch_args(ctx, k, args, count, grid, stream);
}

tj_status rt_launch_args(tj_context *ctx, const tj_kernel *k, const tj_arg *args, int count,
                         int64_t grid, void *stream) {
  if (count != k->param_count - k->hidden_count)
    return rt_fail(ctx, TJ_ERR_UNSUPPORTED, "%s takes %d arguments, not %d", k->report.info.entry,
                   k->param_count - k->hidden_count, count);
  if (grid < 0 || grid > INT32_MAX)
    return rt_fail(ctx, TJ_ERR_INVALID_ARGUMENT,
                   "tj_launch: grid %lld is outside [0, 2^31-1] (program_id is i32)",
                   (long long)grid);
  uint64_t slots[RT_MAX_PARAMS], hidden[2] = {0, 0};
  void *params[RT_MAX_PARAMS + 2];
  for (int i = 0; i < count; i++) {
    tj_status st = pack_one(ctx, (RtParamKind)k->param_kind[i], i, &args[i], &slots[i]);
    if (st != TJ_OK) return st;
    params[i] = &slots[i];
  }
  if (grid == 0) return TJ_OK;
  return rt_launch(ctx, k, params, hidden, grid, stream);
}
