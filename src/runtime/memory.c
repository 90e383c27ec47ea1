/*
 * memory.c — device memory helpers for callers without the CUDA runtime:
 * tj_device_alloc, tj_device_free and two synchronous copies.
 *
 * They exist so that tools, tests and small programs can run tilejit's
 * kernels with nothing but libtilejit and a driver; a program that already
 * uses cudaMalloc passes its own pointers to tj_softmax and tj_launch. Each
 * call binds the context to the calling thread for its duration, like every
 * other runtime call.
 */
#include "runtime/runtime.h"

static tj_status finish(tj_context *ctx, RtBinding *binding, const char *call, CuResult r) {
  rt_unbind(ctx, binding);
  return r == RT_CUDA_SUCCESS ? TJ_OK : rt_fail_driver(ctx, call, r);
}

tj_status tj_device_alloc(tj_context *ctx, size_t bytes, uint64_t *ptr) {
  if (ptr) *ptr = 0;
  if (!ctx) return rt_fail_no_handle("tj_device_alloc", "context");
  if (!ptr || !bytes)
    return rt_fail(ctx, TJ_ERR_INVALID_ARGUMENT, "tj_device_alloc: %s",
                   ptr ? "zero bytes" : "ptr is NULL");
  RtBinding binding;
  tj_status st = rt_bind(ctx, &binding);
  if (st != TJ_OK) return st;
  CuDevicePtr p = 0;
  CuResult r = ctx->cu->cuMemAlloc(&p, bytes);
  *ptr = p;
  return finish(ctx, &binding, "cuMemAlloc", r);
}

tj_status tj_device_free(tj_context *ctx, uint64_t ptr) {
  if (!ctx) return rt_fail_no_handle("tj_device_free", "context");
  if (!ptr) return TJ_OK;
  RtBinding binding;
  tj_status st = rt_bind(ctx, &binding);
  if (st != TJ_OK) return st;
  return finish(ctx, &binding, "cuMemFree", ctx->cu->cuMemFree(ptr));
}

tj_status tj_copy_to_device(tj_context *ctx, uint64_t dst, const void *src, size_t bytes) {
  if (!ctx) return rt_fail_no_handle("tj_copy_to_device", "context");
  if (!bytes) return TJ_OK;
  if (!dst || !src) return rt_fail(ctx, TJ_ERR_INVALID_ARGUMENT, "tj_copy_to_device: NULL pointer");
  RtBinding binding;
  tj_status st = rt_bind(ctx, &binding);
  if (st != TJ_OK) return st;
  return finish(ctx, &binding, "cuMemcpyHtoD", ctx->cu->cuMemcpyHtoD(dst, src, bytes));
}

tj_status tj_copy_to_host(tj_context *ctx, void *dst, uint64_t src, size_t bytes) {
  if (!ctx) return rt_fail_no_handle("tj_copy_to_host", "context");
  if (!bytes) return TJ_OK;
  if (!dst || !src) return rt_fail(ctx, TJ_ERR_INVALID_ARGUMENT, "tj_copy_to_host: NULL pointer");
  RtBinding binding;
  tj_status st = rt_bind(ctx, &binding);
  if (st != TJ_OK) return st;
  return finish(ctx, &binding, "cuMemcpyDtoH", ctx->cu->cuMemcpyDtoH(dst, src, bytes));
}
