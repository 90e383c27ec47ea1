/*
 * kernel_image.c — a generated kernel in the form the disk cache keeps: the
 * driver-ready image (a cubin) and what loading it needs besides.
 *
 * With the disk cache on, module.c gives PTX to the driver's linker
 * (cuLinkCreate, cuLinkAddData, cuLinkComplete) rather than to
 * cuModuleLoadDataEx: the same JIT with the same logs, but it hands back the
 * cubin, which a later process loads without codegen or JIT. The blob
 * stored on disk (disk_cache.c keeps it opaque) is, in host byte order:
 *
 *   "TJKI" format | tj_kernel_info (entry and 11 integers) | parameter
 *   count, hidden count, one kind byte per parameter | JIT info log with
 *   its NUL | cubin size, cubin
 *
 * The disk key is the cache key of module.c with the context id 0 (a disk
 * entry serves any context) plus a hash of the code generator's sources
 * (the version number alone stays the same across changes to it), the
 * driver's version and the device's arch, since the cubin is the driver's
 * code for that device.
 */
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define IMAGE_MAGIC  "TJKI"
#define IMAGE_FORMAT 1u
#define INFO_INTS    12

char *rt_disk_key(tj_context *ctx, const char *spec_key, const RtKeyParts *parts) {
  RtKeyParts any = *parts;
  any.context_id = 0;
  char *base = rt_key_build(spec_key, &any);
  if (!base) return NULL;
  TjBuf b;
  buf_init(&b);
  buf_printf(&b, "%s|src=%s|driver=%d|device=sm_%d", base, tj_source_hash, ctx->info.driver_version,
             ctx->info.arch);
  free(base);
  return buf_take(&b);
}

/* ------------------------------------------------------------- linking */

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

tj_status rt_link_ptx(tj_context *ctx, const char *ptx, char *info_log, size_t log_size,
                      void **cubin, size_t *size, double *jit_ms, char *error) {
  const RtDriver *cu = ctx->cu;
  char error_log[4096] = "";
  info_log[0] = '\0';
  *cubin = NULL;
  *size = 0;
  RtJitOptions jit; /* lives as long as the link state, which writes through it */
  rt_jit_options(&jit, info_log, log_size, error_log, sizeof error_log);
  double start = now_ms();
  CuLinkState state = NULL;
  CuResult r = cu->cuLinkCreate((unsigned)TJ_COUNTOF(jit.keys), jit.keys, jit.values, &state);
  if (r != RT_CUDA_SUCCESS) return rt_driver_fail(cu, error, "cuLinkCreate", r, NULL);
  void *image = NULL;
  size_t image_size = 0;
  const char *call = "cuLinkAddData";
  r = cu->cuLinkAddData(state, RT_JIT_INPUT_PTX, ptx, strlen(ptx) + 1, "tilejit.ptx", 0, NULL,
                        NULL);
  if (r == RT_CUDA_SUCCESS) {
    call = "cuLinkComplete";
    r = cu->cuLinkComplete(state, &image, &image_size);
  }
  tj_status st = TJ_OK;
  if (r != RT_CUDA_SUCCESS)
    st = rt_driver_fail(cu, error, call, r, error_log);
  else if (!image || !image_size || !(*cubin = malloc(image_size)))
    st = (snprintf(error, RT_ERROR_MAX, "cuLinkComplete: no image (or out of memory)"),
          TJ_ERR_OUT_OF_MEMORY);
  else
    memcpy(*cubin, image, *size = image_size);
  double wall = rt_jit_wall_ms(&jit);
  *jit_ms = wall > 0 ? wall : now_ms() - start;
  cu->cuLinkDestroy(state);
  return st;
}

/* ---------------------------------------------------------------- blobs */

static void info_ints(const tj_kernel_info *info, int32_t *out) {
  const tj_launch_shape *s = &info->shape;
  int32_t v[INFO_INTS] = {s->threads,          s->programs_per_cta, s->cluster,
                          s->ctas_per_program, s->shared_bytes,     s->all_ctas,
                          s->cooperative,      s->workspace_bytes,  info->arch,
                          info->ptx_version,   info->param_count,   s->dynamic_shared_bytes};
  memcpy(out, v, sizeof v);
}

static void set_info_ints(tj_kernel_info *info, const int32_t *v) {
  tj_launch_shape *s = &info->shape;
  s->threads = v[0];
  s->programs_per_cta = v[1];
  s->cluster = v[2];
  s->ctas_per_program = v[3];
  s->shared_bytes = v[4];
  s->all_ctas = v[5];
  s->cooperative = v[6];
  s->workspace_bytes = v[7];
  info->arch = v[8];
  info->ptx_version = v[9];
  info->param_count = v[10];
  s->dynamic_shared_bytes = v[11];
}

void *rt_image_encode(const RtImage *image, size_t *size) {
  size_t log_len = strlen(image->log ? image->log : "") + 1;
  int32_t ints[INFO_INTS + 2];
  info_ints(&image->info, ints);
  ints[INFO_INTS] = image->param_count;
  ints[INFO_INTS + 1] = image->hidden_count;
  uint32_t format = IMAGE_FORMAT, log32 = (uint32_t)log_len;
  uint64_t cubin64 = image->cubin_size;
  *size = 4 + sizeof format + sizeof image->info.entry + sizeof ints + (size_t)image->param_count +
          sizeof log32 + log_len + sizeof cubin64 + image->cubin_size;
  unsigned char *blob = malloc(*size), *p = blob;
  if (!blob) return NULL;
#define PUT(src, n) (memcpy(p, (src), (n)), p += (n))
  PUT(IMAGE_MAGIC, 4);
  PUT(&format, sizeof format);
  PUT(image->info.entry, sizeof image->info.entry);
  PUT(ints, sizeof ints);
  PUT(image->param_kind, (size_t)image->param_count);
  PUT(&log32, sizeof log32);
  PUT(image->log ? image->log : "", log_len);
  PUT(&cubin64, sizeof cubin64);
  PUT(image->cubin, image->cubin_size);
#undef PUT
  return blob;
}

/* Reads n bytes at *p into dst when they lie before end. */
static bool take(const unsigned char **p, const unsigned char *end, void *dst, size_t n) {
  if ((size_t)(end - *p) < n) return false;
  memcpy(dst, *p, n);
  *p += n;
  return true;
}

bool rt_image_decode(const void *blob, size_t size, RtImage *image) {
  const unsigned char *p = blob, *end = p + size;
  char magic[4];
  uint32_t format = 0, log_len = 0;
  uint64_t cubin_size = 0;
  int32_t ints[INFO_INTS + 2];
  memset(image, 0, sizeof *image);
  if (!take(&p, end, magic, 4) || memcmp(magic, IMAGE_MAGIC, 4) != 0 ||
      !take(&p, end, &format, sizeof format) || format != IMAGE_FORMAT ||
      !take(&p, end, image->info.entry, sizeof image->info.entry) ||
      !memchr(image->info.entry, '\0', sizeof image->info.entry) ||
      !take(&p, end, ints, sizeof ints))
    return false;
  set_info_ints(&image->info, ints);
  image->param_count = ints[INFO_INTS];
  image->hidden_count = ints[INFO_INTS + 1];
  if (image->param_count < 1 || image->param_count > RT_MAX_PARAMS || image->hidden_count < 1 ||
      image->hidden_count > 2 ||
      image->info.param_count + image->hidden_count != image->param_count ||
      !take(&p, end, image->param_kind, (size_t)image->param_count) ||
      !take(&p, end, &log_len, sizeof log_len) || log_len < 1 || (size_t)(end - p) < log_len ||
      p[log_len - 1] != '\0')
    return false;
  image->log = (const char *)p;
  p += log_len;
  if (!take(&p, end, &cubin_size, sizeof cubin_size) || cubin_size == 0 ||
      cubin_size != (uint64_t)(end - p))
    return false;
  image->cubin = p;
  image->cubin_size = (size_t)cubin_size;
  return true;
}
