/*
 * module.c — from a specialized program (or hand-written PTX) to a loaded,
 * checked tj_kernel, through the kernel cache.
 *
 *   spec --tj_emit_ptx / tj_nvrtc_ptx--> PTX --cuModuleLoadDataEx--> CUmodule
 *        --cuModuleGetFunction--> CUfunction + attributes + occupancy
 *
 * Loading passes the error and info log buffers (verbose, so the info log
 * has ptxas's register and spill lines) and asks for the JIT wall time. A
 * failed load becomes TJ_ERR_DRIVER with the driver's error name and the
 * ptxas log. Limits the launch must respect (threads per CTA against the
 * function's maximum, static shared memory against the device's, how many
 * CTAs, or clusters of them, can be resident at once) are checked once
 * here, so the launch path only compares the grid. A kernel whose instances
 * span several CTAs that can never be resident together is refused here.
 *
 * The cache key is the specialization key plus arch, requested ISA, backend
 * (with NVRTC's version) and the context id; hand-written PTX is keyed by
 * its entry and full text. Parameter kinds come from the PTX's .entry list,
 * one reader for both generated and hand-written kernels.
 *
 * Generated kernels also go through the disk cache when it is on: a miss
 * looks for the kernel's cubin on disk (kernel_image.c's blob, under the
 * disk key) and loads it with no codegen and no JIT; otherwise the PTX is
 * linked to a cubin (the same JIT, through cuLink*), loaded, and stored.
 * Whatever fails on the disk's side (a file the driver refuses, a linker
 * error, a write) falls back to the plain path: the disk never fails a
 * compile. TILEJIT_DUMP (dump.c) gets the IR, PTX and log of each compile.
 */
#include "runtime/runtime.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define JIT_LOG_SIZE 16384

/* ---------------------------------------------------------------- keys */

char *rt_key_build(const char *spec_key, const RtKeyParts *parts) {
  TjBuf b;
  buf_init(&b);
  buf_printf(&b, "%s|sm_%d|isa=%d|", spec_key, parts->arch, parts->ptx_version);
  if (parts->backend == TJ_BACKEND_NVRTC)
    buf_printf(&b, "nvrtc-%d", parts->nvrtc_version);
  else
    buf_puts(&b, "ptx");
  buf_printf(&b, "|ctx=%llu", (unsigned long long)parts->context_id);
  return buf_take(&b);
}

tj_status rt_key_parts(tj_context *ctx, tj_backend backend, RtKeyParts *parts) {
  memset(parts, 0, sizeof *parts);
  parts->arch = ctx->info.target_arch;
  parts->ptx_version = ctx->ptx_request;
  parts->backend = backend;
  parts->context_id = ctx->id;
  if (backend != TJ_BACKEND_NVRTC) return TJ_OK;
  tj_status st = tj_nvrtc_version(&parts->nvrtc_version);
  if (st != TJ_OK)
    return rt_fail(ctx, st, "NVRTC backend: cannot read NVRTC's version (%s)",
                   tj_status_string(st));
  return TJ_OK;
}

/* --------------------------------------------------- reading signatures */

static const char *skip_blank(const char *p) {
  for (;;) {
    while (isspace((unsigned char)*p)) p++;
    if (p[0] == '/' && p[1] == '/') {
      while (*p && *p != '\n') p++;
    } else if (p[0] == '/' && p[1] == '*') {
      const char *end = strstr(p + 2, "*/");
      p = end ? end + 2 : p + strlen(p);
    } else {
      return p;
    }
  }
}

/* The character after "NAME (" of ".entry NAME (", or NULL. */
static const char *find_entry(const char *ptx, const char *entry) {
  size_t n = strlen(entry);
  for (const char *p = strstr(ptx, ".entry"); p; p = strstr(p + 6, ".entry")) {
    const char *q = skip_blank(p + 6);
    if (strncmp(q, entry, n) != 0) continue;
    q = skip_blank(q + n);
    if (*q == '(') return q + 1;
  }
  return NULL;
}

static const struct {
  const char *type;
  RtParamKind kind;
} param_types[] = {
    {".u64", RT_PARAM_B64}, {".s64", RT_PARAM_B64}, {".b64", RT_PARAM_B64}, {".u32", RT_PARAM_I32},
    {".s32", RT_PARAM_I32}, {".b32", RT_PARAM_I32}, {".f32", RT_PARAM_F32}, {".f64", RT_PARAM_F64},
};

/* Reads ".param .TYPE ... name" at p; returns the text after it or NULL. */
static const char *read_param(const char *p, uint8_t *kind) {
  if (strncmp(p, ".param", 6) != 0) return NULL;
  p = skip_blank(p + 6);
  size_t len = 0;
  while (p[len] && !isspace((unsigned char)p[len])) len++;
  int found = -1;
  for (size_t i = 0; i < TJ_COUNTOF(param_types); i++)
    if (strlen(param_types[i].type) == len && strncmp(p, param_types[i].type, len) == 0)
      found = (int)i;
  if (found < 0) return NULL;
  *kind = (uint8_t)param_types[found].kind;
  while (*p && *p != ',' && *p != ')') p++;
  return p;
}

/* .reqntid between the parameter list and the body: "N" or "N, 1[, 1]". */
static int read_reqntid(const char *p) {
  const char *body = strchr(p, '{');
  const char *d = strstr(p, ".reqntid");
  if (!d || (body && d > body)) return 0;
  char *end;
  long x = strtol(d + 8, &end, 10);
  for (int dim = 0; dim < 2; dim++) {
    const char *q = skip_blank(end);
    if (*q != ',') break;
    if (strtol(q + 1, &end, 10) != 1) return -1;
  }
  return x > 0 && x <= 1024 ? (int)x : -1;
}

bool rt_ptx_signature(const char *ptx, const char *entry, uint8_t *kinds, int *count, int *reqntid,
                      char *why, size_t why_size) {
  const char *p = find_entry(ptx, entry);
  *count = 0;
  if (!p) {
    snprintf(why, why_size, "no .entry %s in the PTX", entry);
    return false;
  }
  for (p = skip_blank(p); *p != ')'; p = skip_blank(p)) {
    if (*count == RT_MAX_PARAMS || !(p = read_param(p, &kinds[*count]))) {
      snprintf(why, why_size, "parameter %d of %s: not a 32- or 64-bit scalar (or over %d)", *count,
               entry, RT_MAX_PARAMS);
      return false;
    }
    ++*count;
    if (*p == ',') p++;
  }
  *reqntid = read_reqntid(p + 1);
  if (*reqntid < 0) {
    snprintf(why, why_size, "%s: .reqntid must be one dimension of 1 to 1024 threads", entry);
    return false;
  }
  return true;
}

/* ------------------------------------------------------------- loading */

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static tj_status fail_into(char *error, tj_status st, const char *fmt, ...) TJ_PRINTF(3, 4);
static tj_status fail_into(char *error, tj_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(error, RT_ERROR_MAX, fmt, ap);
  va_end(ap);
  return st;
}

/* cuModuleLoadDataEx with both logs and the wall time; ctx is bound. */
static tj_status load_module(tj_context *ctx, const char *ptx, tj_kernel *k, double *jit_ms,
                             char *error) {
  char error_log[JIT_LOG_SIZE] = "";
  if (!(k->log = tj_alloc(JIT_LOG_SIZE)))
    return fail_into(error, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  RtJitOptions jit;
  rt_jit_options(&jit, k->log, JIT_LOG_SIZE, error_log, JIT_LOG_SIZE);
  CuResult r = ctx->cu->cuModuleLoadDataEx(&k->module, ptx, (unsigned)TJ_COUNTOF(jit.keys),
                                           jit.keys, jit.values);
  *jit_ms = rt_jit_wall_ms(&jit);
  if (r != RT_CUDA_SUCCESS) {
    k->module = NULL;
    return rt_driver_fail(ctx->cu, error, "cuModuleLoadDataEx", r, error_log);
  }
  return TJ_OK;
}

/* Clusters: the non-portable sizes above 8 allowed, and how many clusters
 * can be resident at once (cuOccupancyMaxActiveClusters): *ctas becomes
 * that many clusters' CTAs. */
static tj_status resident_clusters(tj_context *ctx, tj_kernel *k, int64_t *ctas, char *error) {
  const RtDriver *cu = ctx->cu;
  const tj_launch_shape *shape = &k->report.info.shape;
  if (!ctx->info.cluster_launch)
    return fail_into(error, TJ_ERR_UNSUPPORTED,
                     "%s: clusters of %d CTAs, but %s launches none (clusters need sm_90 and a "
                     "driver that loads PTX ISA %d.%d)",
                     k->report.info.entry, shape->cluster, ctx->info.name,
                     rt_cluster_ptx() / 10, rt_cluster_ptx() % 10);
  CuResult r = RT_CUDA_SUCCESS;
  if (shape->cluster > 8)
    r = cu->cuFuncSetAttribute(k->function, RT_FUNC_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
  if (r != RT_CUDA_SUCCESS)
    return rt_driver_fail(ctx->cu, error, "cuFuncSetAttribute (non-portable cluster size)", r,
                          NULL);
  RtLaunchAttribute attr;
  memset(&attr, 0, sizeof attr);
  attr.id = RT_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.cluster.x = (unsigned)shape->cluster;
  attr.value.cluster.y = attr.value.cluster.z = 1;
  RtLaunchConfig config = {(unsigned)shape->cluster,
                           1,
                           1,
                           (unsigned)shape->threads,
                           1,
                           1,
                           (unsigned)shape->dynamic_shared_bytes,
                           NULL,
                           &attr,
                           1};
  int clusters = 0;
  r = cu->cuOccupancyMaxActiveClusters(&clusters, k->function, &config);
  if (r != RT_CUDA_SUCCESS)
    return rt_driver_fail(ctx->cu, error, "cuOccupancyMaxActiveClusters", r, NULL);
  *ctas = (int64_t)clusters * shape->cluster;
  return TJ_OK;
}

/* The CTAs of one instance must fit on the device at once: all of them for
 * a grid level, whose CTAs wait for each other (cooperative launch). */
static tj_status check_spread(tj_context *ctx, tj_kernel *k, char *error) {
  const tj_kernel_report *rep = &k->report;
  const tj_launch_shape *shape = &rep->info.shape;
  int per = shape->ctas_per_program > 0 ? shape->ctas_per_program : 1;
  if (rep->max_ctas >= per && (!shape->cooperative || ctx->info.cooperative_launch)) return TJ_OK;
  if (shape->cooperative && !ctx->info.cooperative_launch)
    return fail_into(error, TJ_ERR_UNSUPPORTED, "%s: needs a cooperative launch, which %s lacks",
                     rep->info.entry, ctx->info.name);
  return fail_into(error, TJ_ERR_UNSUPPORTED,
                   "%s: one program instance spans %d CTAs (cluster %d) of %d threads, but %s "
                   "holds %d such CTAs at once (%d registers, %d bytes of shared memory each)",
                   rep->info.entry, per, shape->cluster, shape->threads, ctx->info.name,
                   rep->max_ctas, rep->registers, shape->shared_bytes);
}

/* The function, its attributes, and the checks a launch relies on. */
static tj_status inspect_function(tj_context *ctx, tj_kernel *k, char *error) {
  const RtDriver *cu = ctx->cu;
  tj_kernel_report *rep = &k->report;
  int max_threads = 0, shared = 0, per_sm = 0;
  CuResult r = cu->cuModuleGetFunction(&k->function, k->module, rep->info.entry);
  if (r != RT_CUDA_SUCCESS) return rt_driver_fail(ctx->cu, error, "cuModuleGetFunction", r, NULL);
  r = cu->cuFuncGetAttribute(&rep->registers, RT_FUNC_NUM_REGS, k->function);
  if (!r) r = cu->cuFuncGetAttribute(&rep->local_bytes, RT_FUNC_LOCAL_SIZE_BYTES, k->function);
  if (!r) r = cu->cuFuncGetAttribute(&max_threads, RT_FUNC_MAX_THREADS_PER_BLOCK, k->function);
  if (!r) r = cu->cuFuncGetAttribute(&shared, RT_FUNC_SHARED_SIZE_BYTES, k->function);
  if (r != RT_CUDA_SUCCESS) return rt_driver_fail(ctx->cu, error, "cuFuncGetAttribute", r, NULL);
  rep->info.shape.shared_bytes = shared;
  int threads = rep->info.shape.threads;
  if (threads < 1 || threads > max_threads)
    return fail_into(error, TJ_ERR_UNSUPPORTED,
                     "%s: %d threads per CTA, but the function allows %d (%d registers per thread)",
                     rep->info.entry, threads, max_threads, rep->registers);
  if (shared > ctx->info.max_shared_per_block)
    return fail_into(error, TJ_ERR_UNSUPPORTED, "%s: %d bytes of shared memory, the device has %d",
                     rep->info.entry, shared, ctx->info.max_shared_per_block);
  /* A staged kernel's shared memory, over the 48 KiB a CTA gets unasked. */
  int dynamic = rep->info.shape.dynamic_shared_bytes;
  if (dynamic > 0 && shared + dynamic > ctx->info.max_shared_per_block_optin)
    return fail_into(error, TJ_ERR_UNSUPPORTED,
                     "%s: %d bytes of shared memory a CTA, the device allows %d", rep->info.entry,
                     shared + dynamic, ctx->info.max_shared_per_block_optin);
  if (dynamic > 0)
    r = cu->cuFuncSetAttribute(k->function, RT_FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic);
  if (r != RT_CUDA_SUCCESS)
    return rt_driver_fail(ctx->cu, error, "cuFuncSetAttribute (dynamic shared memory)", r, NULL);
  r = cu->cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k->function, threads,
                                                      (size_t)dynamic);
  if (r != RT_CUDA_SUCCESS)
    return rt_driver_fail(ctx->cu, error, "cuOccupancyMaxActiveBlocksPerMultiprocessor", r, NULL);
  if (per_sm < 1)
    return fail_into(error, TJ_ERR_UNSUPPORTED, "%s: no CTA of %d threads fits on an SM",
                     rep->info.entry, threads);
  int64_t ctas = (int64_t)per_sm * ctx->info.sm_count;
  if (rep->info.shape.cluster > 1) {
    tj_status st = resident_clusters(ctx, k, &ctas, error);
    if (st != TJ_OK) return st;
  }
  rep->max_ctas = (int)(ctas < ctx->info.max_grid_x ? ctas : ctx->info.max_grid_x);
  return check_spread(ctx, k, error);
}

/* The parameter kinds from the PTX, checked against the kernel ABI: the
 * program's parameters (generated) or any (hand-written, which must give
 * .reqntid), then tj_workspace for a grid level, then the .u64 instance
 * count. A mismatch in generated code is ours (UNSUPPORTED); in
 * hand-written PTX it is the caller's. */
static tj_status read_signature(tj_kernel *k, const char *ptx, bool generated, char *error) {
  tj_kernel_info *info = &k->report.info;
  tj_status bad = generated ? TJ_ERR_UNSUPPORTED : TJ_ERR_INVALID_ARGUMENT;
  int reqntid = 0;
  char why[256];
  if (!rt_ptx_signature(ptx, info->entry, k->param_kind, &k->param_count, &reqntid, why,
                        sizeof why))
    return fail_into(error, bad, "%s", why);
  k->hidden_count = info->shape.workspace_bytes > 0 ? 2 : 1;
  if (!generated) {
    if (reqntid == 0)
      return fail_into(error, bad, "%s: hand-written PTX needs .reqntid", info->entry);
    info->shape.threads = reqntid;
    info->param_count = k->param_count - 1;
  }
  bool wide = true;
  for (int i = info->param_count; i < k->param_count; i++) wide &= k->param_kind[i] == RT_PARAM_B64;
  if (k->param_count != info->param_count + k->hidden_count || !wide)
    return fail_into(error, bad, "%s: %d parameters, expected %d with the .u64 instance count last",
                     info->entry, k->param_count, info->param_count + k->hidden_count);
  return TJ_OK;
}

/* With the disk cache on: PTX -> cubin through the linker, then the cubin
 * -> module; *cubin keeps the image for the disk. A failure on this path
 * falls back to load_module, which also gives the error message a failed
 * JIT is expected to give. ctx is bound. */
static tj_status link_module(tj_context *ctx, const char *ptx, tj_kernel *k, double *jit_ms,
                             void **cubin, size_t *size, char *error) {
  if (!(k->log = tj_alloc(JIT_LOG_SIZE)))
    return fail_into(error, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  tj_status st = rt_link_ptx(ctx, ptx, k->log, JIT_LOG_SIZE, cubin, size, jit_ms, error);
  if (st == TJ_OK &&
      ctx->cu->cuModuleLoadDataEx(&k->module, *cubin, 0, NULL, NULL) == RT_CUDA_SUCCESS)
    return TJ_OK;
  free(*cubin);
  *cubin = NULL;
  free(k->log);
  k->log = NULL;
  k->module = NULL;
  error[0] = '\0';
  return load_module(ctx, ptx, k, jit_ms, error);
}

/* Writes k and its cubin to the disk cache under disk_key; failures are
 * only counted (disk_cache.c). */
static void store_kernel(tj_context *ctx, const tj_kernel *k, const char *disk_key,
                         const void *cubin, size_t cubin_size) {
  RtImage image;
  memset(&image, 0, sizeof image);
  image.info = k->report.info;
  image.param_count = k->param_count;
  image.hidden_count = k->hidden_count;
  memcpy(image.param_kind, k->param_kind, sizeof image.param_kind);
  image.log = k->log;
  image.cubin = cubin;
  image.cubin_size = cubin_size;
  size_t size = 0;
  void *blob = rt_image_encode(&image, &size);
  if (blob) rt_disk_store(ctx->disk, disk_key, blob, size);
  free(blob);
}

/* PTX -> a kernel in ctx. info names the entry (and for generated code the
 * threads and parameters). disk_key: link to a cubin and store it there. */
static tj_status make_kernel(tj_context *ctx, const char *ptx, const tj_kernel_info *info,
                             bool generated, const char *disk_key, RtCompiled *out) {
  tj_kernel *k = tj_alloc(sizeof *k);
  if (!k) return fail_into(out->error, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  k->ctx = ctx;
  k->report.info = *info;
  k->report.codegen_us = out->codegen_us;
  RtBinding binding;
  tj_status st = rt_bind(ctx, &binding);
  if (st != TJ_OK) {
    free(k);
    return fail_into(out->error, st, "%s", tj_context_error(ctx));
  }
  void *cubin = NULL;
  size_t cubin_size = 0;
  st = disk_key ? link_module(ctx, ptx, k, &out->jit_ms, &cubin, &cubin_size, out->error)
                : load_module(ctx, ptx, k, &out->jit_ms, out->error);
  if (st == TJ_OK) st = read_signature(k, ptx, generated, out->error);
  if (st == TJ_OK) st = inspect_function(ctx, k, out->error);
  rt_unbind(ctx, &binding);
  k->report.jit_ms = out->jit_ms;
  if (st == TJ_OK && cubin) store_kernel(ctx, k, disk_key, cubin, cubin_size);
  free(cubin);
  if (st != TJ_OK) {
    rt_kernel_free(ctx, k);
    return st;
  }
  out->value = k;
  return TJ_OK;
}

/* A kernel from a disk image: load the cubin, inspect the function. */
static tj_status image_kernel(tj_context *ctx, const RtImage *image, RtCompiled *out) {
  tj_kernel *k = tj_alloc(sizeof *k);
  if (!k || !(k->log = tj_strdup(image->log))) {
    free(k);
    return fail_into(out->error, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  }
  k->ctx = ctx;
  k->report.info = image->info;
  k->param_count = image->param_count;
  k->hidden_count = image->hidden_count;
  memcpy(k->param_kind, image->param_kind, sizeof k->param_kind);
  RtBinding binding;
  tj_status st = rt_bind(ctx, &binding);
  if (st != TJ_OK) {
    rt_kernel_free(ctx, k);
    return fail_into(out->error, st, "%s", tj_context_error(ctx));
  }
  CuResult r = ctx->cu->cuModuleLoadDataEx(&k->module, image->cubin, 0, NULL, NULL);
  if (r != RT_CUDA_SUCCESS) {
    k->module = NULL;
    st = rt_driver_fail(ctx->cu, out->error, "cuModuleLoadDataEx (cached cubin)", r, NULL);
  }
  if (st == TJ_OK) st = inspect_function(ctx, k, out->error);
  rt_unbind(ctx, &binding);
  if (st != TJ_OK) {
    rt_kernel_free(ctx, k);
    return st;
  }
  out->value = k;
  return TJ_OK;
}

/* A kernel from the disk cache, or false: then nothing is left behind and
 * the caller compiles (a file the driver refuses counts as a reject). */
static bool load_from_disk(tj_context *ctx, const char *disk_key, RtCompiled *out) {
  void *blob = NULL;
  size_t size = 0;
  RtImage image;
  if (!rt_disk_load(ctx->disk, disk_key, &blob, &size)) return false;
  bool ok = rt_image_decode(blob, size, &image) && image_kernel(ctx, &image, out) == TJ_OK;
  free(blob);
  if (!ok) rt_disk_count_reject(ctx->disk);
  out->error[0] = '\0';
  return ok;
}

void rt_kernel_free(void *owner, void *kernel) {
  tj_context *ctx = owner;
  tj_kernel *k = kernel;
  if (!k) return;
  if (k->module) {
    RtBinding binding;
    if (rt_bind(ctx, &binding) == TJ_OK) {
      /* Work queued with this module may still run: wait before unloading. */
      ctx->cu->cuCtxSynchronize();
      ctx->cu->cuModuleUnload(k->module);
      rt_unbind(ctx, &binding);
    }
  }
  free(k->log);
  free(k);
}

/* ---------------------------------------------------- compile functions */

typedef struct CompileJob {
  tj_context *ctx;
  tj_spec *spec; /* generated kernels */
  tj_backend backend;
  const RtKeyParts *parts; /* generated kernels */
  char *disk_key;          /* made by compile_spec, with a disk cache or dumps */
  const char *ptx;         /* hand-written PTX */
  const char *entry;
} CompileJob;

/* TILEJIT_DUMP: the IR, the PTX and the JIT log (or error) of a compile. */
static void dump(const CompileJob *job, const char *ptx, const tj_kernel_info *info,
                 const RtCompiled *out, tj_status st) {
  char name[128];
  char *ir = NULL;
  snprintf(name, sizeof name, "%s-%016llx", info->entry,
           (unsigned long long)tj_fnv1a(job->disk_key, strlen(job->disk_key), TJ_FNV_SEED));
  if (tj_spec_print(job->spec, &ir) != TJ_OK) ir = NULL;
  const tj_kernel *k = out->value;
  rt_dump_kernel(job->ctx->dump_dir, name, ir, ptx, st == TJ_OK ? k->log : out->error);
  free(ir);
}

static tj_status compile_spec(void *arg, RtCompiled *out) {
  CompileJob *job = arg;
  tj_context *ctx = job->ctx;
  bool disk = rt_disk_enabled(ctx->disk);
  if (disk || ctx->dump_dir)
    job->disk_key = rt_disk_key(ctx, tj_spec_key(job->spec), job->parts); /* NULL: no disk */
  disk = disk && job->disk_key;
  if (disk && !ctx->dump_dir && load_from_disk(ctx, job->disk_key, out)) {
    rt_assume_from_spec(job->spec, &((tj_kernel *)out->value)->assume);
    return TJ_OK;
  }
  tj_codegen_options o = {.arch = ctx->info.target_arch, .ptx_version = ctx->ptx_request};
  tj_kernel_info info;
  char *ptx = NULL;
  memset(&info, 0, sizeof info);
  double start = now_us();
  tj_status st = job->backend == TJ_BACKEND_NVRTC ? tj_nvrtc_ptx(job->spec, &o, &ptx, &info)
                                                  : tj_emit_ptx(job->spec, &o, &ptx, &info);
  out->codegen_us = now_us() - start;
  if (st != TJ_OK) {
    free(ptx);
    return fail_into(out->error, st, "%s: %s",
                     job->backend == TJ_BACKEND_NVRTC ? "tj_nvrtc_ptx" : "tj_emit_ptx",
                     tj_spec_error(job->spec));
  }
  if (info.ptx_version > ctx->info.ptx_version)
    st = fail_into(out->error, TJ_ERR_UNSUPPORTED,
                   "%s: PTX ISA %d.%d, but the driver (CUDA %d.%d) loads up to %d.%d", info.entry,
                   info.ptx_version / 10, info.ptx_version % 10, ctx->info.driver_version / 1000,
                   ctx->info.driver_version % 1000 / 10, ctx->info.ptx_version / 10,
                   ctx->info.ptx_version % 10);
  else
    st = make_kernel(ctx, ptx, &info, true, disk ? job->disk_key : NULL, out);
  if (ctx->dump_dir && job->disk_key) dump(job, ptx, &info, out, st);
  free(ptx);
  if (st == TJ_OK) rt_assume_from_spec(job->spec, &((tj_kernel *)out->value)->assume);
  return st;
}

static tj_status compile_raw(void *arg, RtCompiled *out) {
  CompileJob *job = arg;
  tj_kernel_info info;
  memset(&info, 0, sizeof info);
  snprintf(info.entry, sizeof info.entry, "%s", job->entry);
  info.shape.programs_per_cta = 1;
  info.shape.cluster = 1;
  info.shape.ctas_per_program = 1;
  info.arch = job->ctx->info.target_arch;
  return make_kernel(job->ctx, job->ptx, &info, false, NULL, out);
}

tj_status rt_compile_entry(tj_context *ctx, tj_spec *spec, tj_backend backend, RtEntry **out) {
  RtKeyParts parts;
  tj_status st = rt_key_parts(ctx, backend, &parts);
  if (st != TJ_OK) return st;
  char *key = rt_key_build(tj_spec_key(spec), &parts);
  if (!key) return rt_fail(ctx, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  CompileJob job = {.ctx = ctx, .spec = spec, .backend = backend, .parts = &parts};
  char error[RT_ERROR_MAX];
  st = rt_cache_get(ctx->cache, key, compile_spec, &job, out, error);
  free(key);
  free(job.disk_key);
  return st == TJ_OK ? TJ_OK : rt_fail(ctx, st, "%s", error);
}

/* ---------------------------------------------------------- public API */

/* Pins a freshly returned entry: the caller keeps the kernel until destroy. */
static tj_kernel *pin(tj_context *ctx, RtEntry *e) {
  rt_cache_pin(ctx->cache, e);
  rt_entry_release(e);
  return rt_entry_value(e);
}

tj_status tj_compile(tj_context *ctx, tj_spec *s, tj_backend backend, tj_kernel **kernel) {
  if (kernel) *kernel = NULL;
  if (!ctx) return rt_fail_no_handle("tj_compile", "context");
  if (!s || !kernel || (unsigned)backend >= TJ_BACKEND_COUNT)
    return rt_fail(ctx, TJ_ERR_INVALID_ARGUMENT, "tj_compile: %s",
                   !s        ? "spec is NULL"
                   : !kernel ? "kernel is NULL"
                             : "unknown backend");
  RtEntry *e;
  tj_status st = rt_compile_entry(ctx, s, backend, &e);
  if (st != TJ_OK) return st;
  *kernel = pin(ctx, e);
  return TJ_OK;
}

tj_status tj_load_ptx(tj_context *ctx, const char *ptx, const char *entry, tj_kernel **kernel) {
  if (kernel) *kernel = NULL;
  if (!ctx) return rt_fail_no_handle("tj_load_ptx", "context");
  if (!ptx || !entry || !kernel || !*entry || strlen(entry) >= sizeof((tj_kernel_info *)0)->entry)
    return rt_fail(ctx, TJ_ERR_INVALID_ARGUMENT, "tj_load_ptx: NULL or bad ptx, entry or kernel");
  TjBuf key;
  buf_init(&key);
  buf_printf(&key, "tilejit %s|raw|ctx=%llu|entry=%s|", TJ_VERSION_STRING,
             (unsigned long long)ctx->id, entry);
  buf_puts(&key, ptx);
  char *text = buf_take(&key);
  if (!text) return rt_fail(ctx, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  CompileJob job = {.ctx = ctx, .ptx = ptx, .entry = entry};
  char error[RT_ERROR_MAX];
  RtEntry *e;
  tj_status st = rt_cache_get(ctx->cache, text, compile_raw, &job, &e, error);
  free(text);
  if (st != TJ_OK) return rt_fail(ctx, st, "tj_load_ptx: %s", error);
  *kernel = pin(ctx, e);
  return TJ_OK;
}

tj_status tj_kernel_describe(const tj_kernel *k, tj_kernel_report *report) {
  if (!k) return rt_fail_no_handle("tj_kernel_describe", "kernel");
  if (!report)
    return rt_fail(k->ctx, TJ_ERR_INVALID_ARGUMENT, "tj_kernel_describe: report is NULL");
  *report = k->report;
  return TJ_OK;
}

const char *tj_kernel_log(const tj_kernel *k) { return k && k->log ? k->log : ""; }
