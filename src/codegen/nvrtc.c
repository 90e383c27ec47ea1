/*
 * nvrtc.c — NVRTC, loaded at run time: tj_nvrtc_ptx (IR -> CUDA C -> PTX)
 * and tj_nvrtc_version. tilejit never links libnvrtc, so it builds and runs
 * (PTX backend, interpreter) where NVRTC is absent.
 *
 * The library is looked up once per process (pthread_once): the path in
 * TILEJIT_LIBNVRTC if that is set (and then only it), else libnvrtc.so.13,
 * libnvrtc.so.12 and libnvrtc.so. The functions are resolved with dlsym
 * through our own prototypes, so no CUDA header is needed to build. After
 * that one-time load nothing here is shared: each compile owns its
 * nvrtcProgram, and NVRTC allows concurrent calls on distinct programs.
 *
 * Options: compute_<arch> (PTX only, so ptxas or the driver finishes it),
 * -default-device, C++17 and --fmad=false; no fast math, whose flush-to-zero
 * and approximate division would change the IR's semantics.
 */
#include "codegen/cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct NvrtcProgram *NvrtcProgram; /* nvrtcProgram */
typedef int NvrtcResult;                   /* nvrtcResult; 0 is success */
enum { NVRTC_OK = 0, NVRTC_OUT_OF_MEMORY = 1 };

typedef struct NvrtcApi {
  NvrtcResult (*version)(int *major, int *minor);
  NvrtcResult (*create)(NvrtcProgram *prog, const char *src, const char *name, int num_headers,
                        const char *const *headers, const char *const *include_names);
  NvrtcResult (*compile)(NvrtcProgram prog, int num_options, const char *const *options);
  NvrtcResult (*ptx_size)(NvrtcProgram prog, size_t *size);
  NvrtcResult (*ptx)(NvrtcProgram prog, char *ptx);
  NvrtcResult (*log_size)(NvrtcProgram prog, size_t *size);
  NvrtcResult (*log)(NvrtcProgram prog, char *log);
  NvrtcResult (*destroy)(NvrtcProgram *prog);
  const char *(*error_string)(NvrtcResult result);
  bool loaded;
  char why[512]; /* why loading failed */
} NvrtcApi;

/* Written once under pthread_once, read-only afterwards. */
static NvrtcApi api;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

/* dlsym into a function pointer without converting an object pointer to a
 * function pointer, which ISO C leaves undefined. */
static bool resolve(void *lib, const char *name, void *slot) {
  void *sym = dlsym(lib, name);
  if (sym) memcpy(slot, &sym, sizeof sym);
  return sym != NULL;
}

static bool resolve_all(void *lib) {
  bool ok = resolve(lib, "nvrtcVersion", &api.version);
  ok = ok && resolve(lib, "nvrtcCreateProgram", &api.create);
  ok = ok && resolve(lib, "nvrtcCompileProgram", &api.compile);
  ok = ok && resolve(lib, "nvrtcGetPTXSize", &api.ptx_size);
  ok = ok && resolve(lib, "nvrtcGetPTX", &api.ptx);
  ok = ok && resolve(lib, "nvrtcGetProgramLogSize", &api.log_size);
  ok = ok && resolve(lib, "nvrtcGetProgramLog", &api.log);
  ok = ok && resolve(lib, "nvrtcDestroyProgram", &api.destroy);
  ok = ok && resolve(lib, "nvrtcGetErrorString", &api.error_string);
  return ok;
}

static void load_api(void) {
  static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  const char *override = getenv("TILEJIT_LIBNVRTC");
  const char *tried =
      override && *override ? override : "libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so";
  void *lib = NULL;
  if (override && *override) lib = dlopen(override, RTLD_NOW | RTLD_LOCAL);
  for (size_t i = 0; !lib && !(override && *override) && i < TJ_COUNTOF(names); i++)
    lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    snprintf(api.why, sizeof api.why, "cannot load libnvrtc (tried %s): %s", tried,
             why ? why : "not found");
    return;
  }
  if (!resolve_all(lib)) {
    snprintf(api.why, sizeof api.why, "libnvrtc lacks an NVRTC entry point (tried %s)", tried);
    dlclose(lib);
    return;
  }
  api.loaded = true;
}

static const NvrtcApi *nvrtc(void) {
  pthread_once(&api_once, load_api);
  return api.loaded ? &api : NULL;
}

/* ---- compiling ------------------------------------------------------------ */

static char *program_log(NvrtcProgram prog) {
  size_t size = 0;
  if (api.log_size(prog, &size) != NVRTC_OK || size == 0) return NULL;
  char *log = tj_alloc(size + 1);
  if (log && api.log(prog, log) != NVRTC_OK) log[0] = '\0';
  return log;
}

static char *program_ptx(NvrtcProgram prog) {
  size_t size = 0;
  if (api.ptx_size(prog, &size) != NVRTC_OK) return NULL;
  char *ptx = tj_alloc(size + 1);
  if (ptx && api.ptx(prog, ptx) != NVRTC_OK) {
    tj_free(ptx);
    return NULL;
  }
  return ptx;
}

static const char *result_name(NvrtcResult r) {
  const char *name = api.error_string(r);
  return name ? name : "unknown NVRTC error";
}

static tj_status compile_failed(NvrtcProgram prog, NvrtcResult r, int arch, char *error) {
  char *log = program_log(prog);
  tj_set_error(error, "NVRTC: %s for compute_%d:\n%s", result_name(r), arch,
               log && log[0] ? log : "(no log)");
  tj_free(log);
  return r == NVRTC_OUT_OF_MEMORY ? TJ_ERR_OUT_OF_MEMORY : TJ_ERR_NVRTC;
}

tj_status cg_nvrtc_compile(const char *source, int arch, char **ptx, char *error) {
  if (!nvrtc()) {
    tj_set_error(error, "NVRTC: %s", api.why);
    return TJ_ERR_NO_NVRTC;
  }
  char target[48];
  snprintf(target, sizeof target, "--gpu-architecture=compute_%d", arch);
  const char *const options[] = {target, "-default-device", "--std=c++17", "--fmad=false"};
  NvrtcProgram prog = NULL;
  NvrtcResult r = api.create(&prog, source, "tilejit.cu", 0, NULL, NULL);
  if (r != NVRTC_OK) {
    tj_set_error(error, "NVRTC: nvrtcCreateProgram: %s", result_name(r));
    return r == NVRTC_OUT_OF_MEMORY ? TJ_ERR_OUT_OF_MEMORY : TJ_ERR_NVRTC;
  }
  tj_status st = TJ_OK;
  r = api.compile(prog, (int)TJ_COUNTOF(options), options);
  if (r != NVRTC_OK)
    st = compile_failed(prog, r, arch, error);
  else if (!(*ptx = program_ptx(prog))) {
    tj_set_error(error, "NVRTC: could not read the PTX");
    st = TJ_ERR_NVRTC;
  }
  api.destroy(&prog);
  return st;
}

/* The ".version X.Y" NVRTC wrote, as 10*X+Y (0 if absent). */
static int ptx_isa(const char *ptx) {
  const char *v = strstr(ptx, ".version ");
  int major = 0, minor = 0;
  if (!v || sscanf(v + 9, "%d.%d", &major, &minor) != 2) return 0;
  return 10 * major + minor;
}

/* options->ptx_version is not ours to choose: NVRTC writes the ISA version of
 * its release, and info->ptx_version reports it. */
tj_status tj_nvrtc_ptx(tj_spec *s, const tj_codegen_options *options, char **ptx,
                       tj_kernel_info *info) {
  if (!s) return TJ_ERR_INVALID_ARGUMENT;
  if (!ptx) {
    tj_set_error(s->error, "nvrtc_ptx: NULL output");
    return TJ_ERR_INVALID_ARGUMENT;
  }
  *ptx = NULL;
  tj_kernel_info local;
  tj_kernel_info *ki = info ? info : &local;
  char *cuda = NULL;
  tj_status st = tj_emit_cuda(s, options, &cuda, ki);
  if (st != TJ_OK) return st;
  st = cg_nvrtc_compile(cuda, ki->arch, ptx, s->error);
  tj_free(cuda);
  if (st == TJ_OK) ki->ptx_version = ptx_isa(*ptx);
  return st;
}

tj_status tj_nvrtc_version(int *version) {
  if (!version) return TJ_ERR_INVALID_ARGUMENT;
  *version = 0;
  const NvrtcApi *a = nvrtc();
  if (!a) return TJ_ERR_NO_NVRTC;
  int major = 0, minor = 0;
  if (a->version(&major, &minor) != NVRTC_OK) return TJ_ERR_NVRTC;
  *version = 1000 * major + 10 * minor;
  return TJ_OK;
}
