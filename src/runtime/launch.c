/*
 * launch.c — launching a loaded kernel: argument packing, grid sizing and
 * cuLaunchKernel on the caller's stream.
 *
 * Generated kernels stride over their program instances (see the kernel ABI
 * in tilejit.h), so the grid is ceil(instances / programs_per_cta) CTAs,
 * capped at the number that can be resident at once (occupancy x SMs, found
 * when the kernel was loaded): a persistent grid, unless the kernel's info
 * says all_ctas (the PTX backend's kernels without loops, measured faster
 * uncapped: src/codegen/README.md). The instance count travels as the
 * hidden last parameter. Threads per CTA and shared memory were checked
 * against the device when the kernel was loaded; here only the grid is
 * computed, so a launch costs a few comparisons, one cuCtxGetCurrent and
 * cuLaunchKernel. Nothing here allocates, formats text on success, or waits
 * for the device.
 */
#include "runtime/runtime.h"

#include <string.h>

/* The CTAs of a launch of `instances` program instances: the one place
 * where the launch shape (tj_launch_shape) becomes a grid. */
int64_t rt_launch_ctas(const tj_context *ctx, const tj_kernel *k, int64_t instances) {
  const tj_launch_shape *shape = &k->report.info.shape;
  int64_t per_cta = shape->programs_per_cta > 0 ? shape->programs_per_cta : 1;
  int64_t ctas = instances / per_cta + (instances % per_cta != 0);
  if (!shape->all_ctas && ctas > k->report.max_ctas) ctas = k->report.max_ctas;
  if (ctas > ctx->info.max_grid_x) ctas = ctx->info.max_grid_x;
  return ctas;
}

tj_status rt_launch(tj_context *ctx, const tj_kernel *k, void **params, uint64_t *count_slot,
                    int64_t instances, void *stream) {
  int64_t ctas = rt_launch_ctas(ctx, k, instances);
  *count_slot = (uint64_t)instances;
  RtBinding binding;
  tj_status st = rt_bind(ctx, &binding);
  if (st != TJ_OK) return st;
  CuResult r = ctx->cu->cuLaunchKernel(k->function, (unsigned)ctas, 1, 1,
                                       (unsigned)k->report.info.shape.threads, 1, 1, 0,
                                       (CuStream)stream, params, NULL);
  rt_unbind(ctx, &binding);
  return r == RT_CUDA_SUCCESS ? TJ_OK : rt_fail_driver(ctx, "cuLaunchKernel", r);
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
  if (count != k->param_count - 1 || (count > 0 && !args))
    return rt_fail(ctx, TJ_ERR_INVALID_ARGUMENT, "tj_launch: %s takes %d arguments, got %d%s",
                   k->report.info.entry, k->param_count - 1, count, args ? "" : " (args NULL)");
  if (grid < 0 || grid > INT32_MAX)
    return rt_fail(ctx, TJ_ERR_INVALID_ARGUMENT,
                   "tj_launch: grid %lld is outside [0, 2^31-1] (program_id is i32)",
                   (long long)grid);
  uint64_t slots[RT_MAX_PARAMS];
  void *params[RT_MAX_PARAMS];
  for (int i = 0; i < count; i++) {
    tj_status st = pack_one(ctx, (RtParamKind)k->param_kind[i], i, &args[i], &slots[i]);
    if (st != TJ_OK) return st;
    params[i] = &slots[i];
  }
  params[count] = &slots[count];
  if (grid == 0) return TJ_OK;
  return rt_launch(ctx, k, params, &slots[count], grid, stream);
}
