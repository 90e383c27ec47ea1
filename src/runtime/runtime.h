/*
 * runtime.h — the internal header of the runtime (src/runtime): loading the
 * CUDA driver at run time, contexts, modules, the kernel cache and launches.
 *
 * Nothing here includes cuda.h or links libcuda: the few driver types and
 * constants the runtime needs are declared below under our own names, and
 * every entry point is fetched through cuGetProcAddress_v2 with the CUDA
 * version whose ABI we were written against.
 *
 * Sections below follow the files that define them:
 *   driver.c         the driver table (one X-macro list), error names
 *   context.c        tj_context: device queries, ISA choice, binding, errors
 *   memory.c         device memory helpers (alloc, free, copies)
 *   module.c         PTX -> CUmodule -> tj_kernel; cache keys; tj_compile
 *   cache.c          the single-flight, bounded LRU kernel cache
 *   disk_cache.c     the kernel cache on disk: opaque blobs under keys
 *   kernel_image.c   PTX -> cubin (cuLink*), a kernel's blob on disk
 *   dump.c           TILEJIT_DUMP: IR, PTX and JIT log of each compile
 *   launch.c         argument packing, grid sizing, workspaces, tj_launch
 *   assume.c         what a spec assumed of its arguments; tj_launch's check
 *   function.c       JIT functions: variants selected by the arguments
 *   softmax_plan.c   the softmax strategy (public: tj_softmax_plan_for)
 *   softmax_launch.c tj_softmax: checks, its plan as a JIT function's variant
 */
#ifndef TJ_RUNTIME_H
#define TJ_RUNTIME_H

#include "ir/ir.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ----------------------------------------------------------- driver.c */

/* The driver's types, under our names (cuda.h is never included). */
typedef int CuResult;
typedef int CuDevice;
typedef struct CuContextOpaque *CuContext;
typedef struct CuModuleOpaque *CuModule;
typedef struct CuFunctionOpaque *CuFunction;
typedef struct CuStreamOpaque *CuStream;
typedef struct CuEventOpaque *CuEvent;
typedef struct CuLinkStateOpaque *CuLinkState;
typedef unsigned long long CuDevicePtr;

/* CUlaunchAttribute and CUlaunchConfig (CUDA 12.0), field for field. */
typedef struct RtLaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    void *align; /* the driver's union holds pointers: 8-byte aligned */
    int cooperative;
    struct {
      unsigned x, y, z;
    } cluster;
  } value;
} RtLaunchAttribute;

typedef struct RtLaunchConfig {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  CuStream stream;
  RtLaunchAttribute *attrs;
  unsigned attr_count;
} RtLaunchConfig;

/* The driver's constants we use; the values are the driver API's. */
enum {
  RT_CUDA_SUCCESS = 0,
  RT_CUDA_ERROR_NO_DEVICE = 100,
  RT_ATTR_MAX_THREADS_PER_BLOCK = 1,
  RT_ATTR_MAX_GRID_DIM_X = 5,
  RT_ATTR_MAX_SHARED_PER_BLOCK = 8,
  RT_ATTR_SM_COUNT = 16,
  RT_ATTR_MAX_THREADS_PER_SM = 39,
  RT_ATTR_CC_MAJOR = 75,
  RT_ATTR_CC_MINOR = 76,
  RT_ATTR_L2_CACHE_SIZE = 38,
  RT_ATTR_MAX_SHARED_PER_SM = 81,
  RT_ATTR_MAX_REGISTERS_PER_SM = 82,
  RT_ATTR_COOPERATIVE_LAUNCH = 95,
  RT_ATTR_MAX_SHARED_PER_BLOCK_OPTIN = 97,
  RT_ATTR_MAX_BLOCKS_PER_SM = 106,
  RT_ATTR_CLUSTER_LAUNCH = 120,
  RT_FUNC_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14,
  RT_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
  RT_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
  RT_FUNC_MAX_THREADS_PER_BLOCK = 0,
  RT_FUNC_SHARED_SIZE_BYTES = 1,
  RT_FUNC_LOCAL_SIZE_BYTES = 3,
  RT_FUNC_NUM_REGS = 4,
  RT_FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  RT_JIT_WALL_TIME = 2,
  RT_JIT_INFO_LOG_BUFFER = 3,
  RT_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  RT_JIT_ERROR_LOG_BUFFER = 5,
  RT_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  RT_JIT_LOG_VERBOSE = 12,
  RT_JIT_INPUT_PTX = 1,
  RT_EVENT_DEFAULT = 0,
};

/*
 * Every driver entry point tilejit calls, with the CUDA version whose ABI the
 * parameter list below matches. cuGetProcAddress_v2 maps (base name, version)
 * to the versioned symbol: cuMemAlloc at 12000 is cuMemAlloc_v2, and
 * cuDevicePrimaryCtxRelease is its _v2. Columns: X(name, version, params).
 */
#define RT_DRIVER_LIST(X)                                                                          \
  X(cuGetErrorName, 12000, (CuResult error, const char **name))                                    \
  X(cuGetErrorString, 12000, (CuResult error, const char **text))                                  \
  X(cuInit, 12000, (unsigned flags))                                                               \
  X(cuDriverGetVersion, 12000, (int *version))                                                     \
  X(cuDeviceGetCount, 12000, (int *count))                                                         \
  X(cuDeviceGet, 12000, (CuDevice * device, int ordinal))                                          \
  X(cuDeviceGetName, 12000, (char *name, int length, CuDevice device))                             \
  X(cuDeviceGetAttribute, 12000, (int *value, int attribute, CuDevice device))                     \
  X(cuDevicePrimaryCtxRetain, 12000, (CuContext * ctx, CuDevice device))                           \
  X(cuDevicePrimaryCtxRelease, 12000, (CuDevice device))                                           \
  X(cuCtxGetCurrent, 12000, (CuContext * ctx))                                                     \
  X(cuCtxGetDevice, 12000, (CuDevice * device))                                                    \
  X(cuCtxPushCurrent, 12000, (CuContext ctx))                                                      \
  X(cuCtxPopCurrent, 12000, (CuContext * ctx))                                                     \
  X(cuCtxSetCurrent, 12000, (CuContext ctx))                                                       \
  X(cuCtxSynchronize, 12000, (void))                                                               \
  X(cuModuleLoadDataEx, 12000,                                                                     \
    (CuModule * module, const void *image, unsigned count, int *options, void **values))           \
  X(cuModuleUnload, 12000, (CuModule module))                                                      \
  X(cuLinkCreate, 12000, (unsigned count, int *options, void **values, CuLinkState *state))      \
  X(cuLinkAddData, 12000,                                                                          \
    (CuLinkState state, int type, const void *data, size_t size, const char *name, unsigned count,\
     int *options, void **values))                                                                 \
  X(cuLinkComplete, 12000, (CuLinkState state, void **cubin, size_t *size))                       \
  X(cuLinkDestroy, 12000, (CuLinkState state))                                                     \
  X(cuModuleGetFunction, 12000, (CuFunction * function, CuModule module, const char *name))        \
  X(cuFuncGetAttribute, 12000, (int *value, int attribute, CuFunction function))                   \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, 12000,                                            \
    (int *blocks, CuFunction function, int block_size, size_t dynamic_shared))                     \
  X(cuFuncSetAttribute, 12000, (CuFunction function, int attribute, int value))                   \
  X(cuOccupancyMaxActiveClusters, 12000,                                                           \
    (int *clusters, CuFunction function, const RtLaunchConfig *config))                            \
  X(cuLaunchKernel, 12000,                                                                         \
    (CuFunction function, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,     \
     unsigned block_y, unsigned block_z, unsigned shared, CuStream stream, void **params,          \
     void **extra))                                                                                \
  X(cuLaunchKernelEx, 12000,                                                                       \
    (const RtLaunchConfig *config, CuFunction function, void **params, void **extra))             \
  X(cuMemAlloc, 12000, (CuDevicePtr * ptr, size_t bytes))                                          \
  X(cuMemFree, 12000, (CuDevicePtr ptr))                                                           \
  X(cuMemcpyHtoD, 12000, (CuDevicePtr dst, const void *src, size_t bytes))                         \
  X(cuMemcpyDtoH, 12000, (void *dst, CuDevicePtr src, size_t bytes))                               \
  X(cuMemcpyDtoD, 12000, (CuDevicePtr dst, CuDevicePtr src, size_t bytes))                         \
  X(cuMemsetD8, 12000, (CuDevicePtr dst, unsigned char value, size_t count))                       \
  X(cuMemsetD8Async, 12000,                                                                        \
    (CuDevicePtr dst, unsigned char value, size_t count, CuStream stream))                         \
  X(cuStreamCreate, 12000, (CuStream * stream, unsigned flags))                                    \
  X(cuStreamDestroy, 12000, (CuStream stream))                                                     \
  X(cuStreamSynchronize, 12000, (CuStream stream))                                                 \
  X(cuEventCreate, 12000, (CuEvent * event, unsigned flags))                                       \
  X(cuEventRecord, 12000, (CuEvent event, CuStream stream))                                        \
  X(cuEventSynchronize, 12000, (CuEvent event))                                                    \
  X(cuEventElapsedTime, 12000, (float *ms, CuEvent start, CuEvent end))                            \
  X(cuEventDestroy, 12000, (CuEvent event))

typedef struct RtDriver {
#define RT_DRIVER_FIELD(name, version, params) CuResult(*name) params;
  RT_DRIVER_LIST(RT_DRIVER_FIELD)
#undef RT_DRIVER_FIELD
  int version; /* cuDriverGetVersion: 1000*major + 10*minor */
} RtDriver;

/* The environment variable that overrides the path of libcuda.so.1. */
#define RT_LIBCUDA_ENV "TILEJIT_LIBCUDA"

/* Loads the driver once per process (pthread_once) and calls cuInit. On
 * success *out is the table; otherwise the status is TJ_ERR_NO_DRIVER,
 * TJ_ERR_NO_DEVICE or TJ_ERR_DRIVER and *why says what happened. The result
 * never changes afterwards. */
tj_status rt_driver_load(const RtDriver **out, const char **why);
/* "CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed)" for a result. */
void rt_driver_describe(const RtDriver *cu, CuResult result, char *out, size_t size);
/* "CALL failed: NAME" and the driver's log, if any, into error
 * (RT_ERROR_MAX); returns TJ_ERR_DRIVER. */
tj_status rt_driver_fail(const RtDriver *cu, char *error, const char *call, CuResult result,
                         const char *log);

/* The JIT options both loaders pass (cuModuleLoadDataEx, cuLinkCreate):
 * the info and error logs, verbose, and the wall time. They must outlive
 * the call: the linker writes through them at cuLinkComplete. */
typedef struct RtJitOptions {
  int keys[6];
  void *values[6];
} RtJitOptions;
void rt_jit_options(RtJitOptions *o, char *info_log, size_t info_size, char *error_log,
                    size_t error_size);
/* The JIT's wall time in ms (the driver overwrites its value slot with a float). */
double rt_jit_wall_ms(const RtJitOptions *o);
/* The highest PTX ISA (10*major+minor) a driver of this version loads. */
int rt_driver_max_ptx(int driver_version);

/* ---------------------------------------------------------- context.c */

/* Messages kept per thread: room for a ptxas log. */
#define RT_ERROR_MAX 4096
/* tj_softmax's JIT functions (softmax_launch.c): one a row op, template
 * (single or online), dtype and backend. */
#define RT_ROW_FUNCTIONS (TJ_ROW_OP_COUNT * 2 * TJ_DTYPE_COUNT * TJ_BACKEND_COUNT)
/* ... each keeping at most so many variants (kernels it holds a reference
 * to), so that the kernel cache can evict the others (TJ_CACHE_DEFAULT_CAPACITY). */
#define RT_ROW_VARIANTS 8

typedef struct RtCache RtCache;
typedef struct RtEntry RtEntry;
typedef struct RtDisk RtDisk;

/* A stream's workspace for kernels with a grid level (launch.c). */
#define RT_MAX_WORKSPACES 16
typedef struct RtWorkspace {
  void *stream;
  CuDevicePtr ptr;
  size_t bytes;
} RtWorkspace;

struct tj_context {
  const RtDriver *cu;
  CuContext cuctx;
  CuDevice device;
  bool owns_primary; /* retained the device's primary context: release it */
  uint64_t id;       /* unique per process; part of every cache key */
  tj_device_info info;
  int ptx_request; /* tj_codegen_options.ptx_version: 0 = the arch's minimum */
  RtCache *cache;
  RtDisk *disk;    /* the kernel cache on disk (NULL or disabled: none) */
  char *dump_dir;  /* TILEJIT_DUMP, or NULL */
  pthread_mutex_t row_lock; /* makes the row functions; a made one is read without it */
  tj_function *_Atomic row_functions[RT_ROW_FUNCTIONS];
  pthread_mutex_t workspace_lock;
  RtWorkspace workspaces[RT_MAX_WORKSPACES];
  int nworkspaces;
};

/* Records a failure for the calling thread on ctx (NULL: no context) and
 * returns status, for `return rt_fail(ctx, ...)`. */
tj_status rt_fail(const tj_context *ctx, tj_status status, const char *fmt, ...) TJ_PRINTF(3, 4);
/* A failed driver call: TJ_ERR_DRIVER, naming the call and the result. */
tj_status rt_fail_driver(const tj_context *ctx, const char *call, CuResult result);
/* The status for an entry point given a NULL handle ("context", "kernel"):
 * TJ_ERR_NO_DRIVER (or NO_DEVICE) when the driver cannot be used, since no
 * handle can exist then; otherwise invalid argument. */
tj_status rt_fail_no_handle(const char *function, const char *handle);

/* Makes ctx current on the calling thread for the duration of a call. */
typedef struct RtBinding {
  bool pushed;
} RtBinding;
tj_status rt_bind(tj_context *ctx, RtBinding *binding);
void rt_unbind(tj_context *ctx, RtBinding *binding);

/* The arch table of the code generator: the lowest PTX ISA for an arch, or
 * 0 when the arch is not in it; *known lists the arches for messages. */
int rt_arch_min_ptx(int arch, char *known, size_t known_size);
/* The PTX ISA a cluster kernel needs (its st.async): a driver or request
 * below it leaves tj_device_info.cluster_launch 0. */
int rt_cluster_ptx(void);

/* ------------------------------------------------------------ module.c */

/* How the kernel reads one parameter: 8-byte integers and pointers, i32,
 * f32 or f64. */
typedef enum RtParamKind { RT_PARAM_B64, RT_PARAM_I32, RT_PARAM_F32, RT_PARAM_F64 } RtParamKind;
#define RT_MAX_PARAMS 64

/* Rows of at least this many bytes that start anywhere get a phased kernel
 * (tj_softmax, and tj_function's variants): 1 KiB, and 256 bytes for
 * 16-bit elements (ELEM the widest pointee) where the op was measured so
 * (tj_softmax, tj_log_softmax, tj_function). Below it, measured on an H200
 * (bench/RESULTS.md, DD1), the element-by-element kernel is as fast or
 * faster: its lane groups hold several short rows a warp, and a phased one
 * sends a lane of every row through its head and tail (f16 N = 77, 154
 * bytes: 67% of copy either way; f32 N = 77 lost 2 points phased on an
 * H100, AA8). Above it the phased kernel wins: f16 N = 128, 256 bytes, 81%
 * element by element and 89% phased; N = 400, 78% and 84%. */
#define RT_PHASED_ROW_BYTES    1024
#define RT_PHASED_ROW_BYTES_16 256
static inline int rt_phased_row_bytes(int elem) {
  return elem == 2 ? RT_PHASED_ROW_BYTES_16 : RT_PHASED_ROW_BYTES;
}

/* What a kernel compiled from a spec assumed of its arguments (assume.c):
 * argument i must have no bit of mask[i] set (a pointer's bytes, an i64's
 * elements, an i32's value); 0 where nothing is assumed. pointee[i]: a
 * pointer's element size in bytes, 0 for a scalar; widest, narrowest: the
 * largest and smallest of them; size[i]: an i32 parameter (DIV holds it). */
typedef struct RtAssume {
  uint32_t mask[RT_MAX_PARAMS];
  uint8_t pointee[RT_MAX_PARAMS];
  bool size[RT_MAX_PARAMS];
  char names[RT_MAX_PARAMS][32];
  int align, multiple, widest, narrowest;
} RtAssume;

void rt_assume_from_spec(const tj_spec *s, RtAssume *out);
/* The same for a program (DTYPE pointees as dtype) at align bytes, its i32
 * parameters multiples of `multiple`. */
void rt_assume_of(const tj_program *p, tj_dtype dtype, int align, int multiple, RtAssume *out);
/* The DIV (tj_spec_options.multiple) a launch's arguments allow at align:
 * a vector's elements (min(align, 16) / the narrowest pointee) where every
 * i32 argument is a multiple of them, else 1. Only that value changes the
 * code (whole vectors under a mask, codegen/memory.c), so sizes give a
 * kernel at most two variants. */
int rt_assume_multiple(const RtAssume *a, const tj_arg *args, int count, int align);
/* The same for one size n and pointees of elem bytes (dump-ptx, tests). */
int rt_size_multiple(int64_t n, int align, int elem);
/* TJ_OK, or TJ_ERR_INVALID_ARGUMENT with the argument and the assumption
 * it breaks in why. */
tj_status rt_assume_check(const RtAssume *a, const tj_arg *args, int count, char *why,
                          size_t size);

/* ---------------------------------------------------------- function.c */

/* What selects a JIT function's variant: the specialization options that
 * change its code. A launch of tj_function_launch fills the first four
 * from its arguments (num_warps is the function's); tj_softmax all, from
 * its plan. */
typedef struct RtVariantKey {
  int align;
  int64_t block;
  bool phased;
  int multiple; /* DIV: rt_assume_multiple */
  int num_warps, cluster, split, stage, stash;
} RtVariantKey;

typedef struct RtVariant {
  RtVariantKey key;
  RtEntry *entry; /* holds a reference: the cache keeps its kernel */
  uint64_t used;  /* the function's clock when last found */
} RtVariant;

/* A smaller key to compile instead, when a variant's CTAs cannot be
 * resident together (its compile says TJ_ERR_UNSUPPORTED); false when
 * there is none. */
typedef bool (*RtShrink)(RtVariantKey *key, const void *arg);

struct tj_function {
  tj_context *ctx; /* NULL: tests of the selection only */
  tj_program *prog; /* the caller's program, copied */
  const char *api;  /* what its errors name: tj_function_launch, or tj_softmax's op */
  tj_function_options options; /* bindings and size_param point into copies: */
  tj_binding *bindings;
  char **names;     /* the bindings' names */
  char *size_name;
  int size_param; /* parameter index, or -1 */
  bool size_i32;  /* the size parameter is an i32 */
  RtAssume assume; /* at ALIGN 16: the parameters ALIGN constrains, pointee sizes */
  pthread_mutex_t lock;         /* the table: held for look-ups and additions only */
  pthread_mutex_t compile_lock; /* one specialization of prog at a time */
  RtVariant *variants;
  int nvariants, capacity;
  int most;       /* 0, or at most so many variants kept (tj_softmax's), least recently used out */
  uint64_t clock; /* counts look-ups that found a variant, and additions */
};

/* tj_function_create without the context check (ctx may be NULL). */
tj_status rt_function_new(tj_context *ctx, const tj_program *p, const tj_function_options *o,
                          tj_function **out, char *why, size_t size);
/* The variant args select; TJ_ERR_INVALID_ARGUMENT with why when they are
 * wrong for the program. */
tj_status rt_function_select(const tj_function *f, const tj_arg *args, int count, int *align,
                             int64_t *block, char *why, size_t size);
/* Whether that variant is phased (its rows start off 16 bytes, all at one
 * phase); args are the selected ones. */
bool rt_function_phased(const tj_function *f, const tj_arg *args, int align, int64_t block);
/* That variant's DIV: 1 where it is phased (phase.c moves whole 16-byte
 * vectors from each row's own boundary whatever n), else
 * rt_assume_multiple's. */
int rt_function_multiple(const tj_function *f, const tj_arg *args, int count, int align,
                         bool phased);
/* The specialization options of f's variant key. */
tj_spec_options rt_variant_options(const tj_function *f, const RtVariantKey *key);
/* The cache entry (a tj_kernel) of f's variant key, with a reference the
 * caller releases after its launch: from f's table, else specialized and
 * compiled (through shrink's smaller keys while that is unsupported, where
 * shrink is given) and kept under key. The one way to a kernel for
 * tj_function_launch and tj_softmax alike. */
tj_status rt_function_entry(tj_function *f, const RtVariantKey *key, RtShrink shrink,
                            const void *arg, RtEntry **out);

struct tj_kernel {
  tj_context *ctx;
  CuModule module;
  CuFunction function;
  tj_kernel_report report;
  int param_count;  /* with the hidden ones: tj_workspace (grid level only), the instance count */
  int hidden_count; /* 1, or 2 with tj_workspace */
  uint8_t param_kind[RT_MAX_PARAMS];
  char *log;       /* the driver's JIT info log */
  RtAssume assume; /* from the spec; nothing for tj_load_ptx's kernels */
};

/* The parts of a cache key beyond the specialization key. */
typedef struct RtKeyParts {
  int arch;
  int ptx_version; /* as requested of codegen; 0 = the arch's minimum */
  tj_backend backend;
  int nvrtc_version; /* NVRTC backend only */
  uint64_t context_id;
} RtKeyParts;

/* The full cache key text (release with tj_free), NULL when out of memory:
 *   <spec key>|sm_<arch>|isa=<ptx>|<backend>|ctx=<id> */
char *rt_key_build(const char *spec_key, const RtKeyParts *parts);
/* The parts of ctx's key for a backend; fails with NO_NVRTC when NVRTC's
 * version cannot be read. */
tj_status rt_key_parts(tj_context *ctx, tj_backend backend, RtKeyParts *parts);

/* Reads the parameter list and .reqntid of entry in PTX text. Returns false
 * with why filled when the entry or a parameter cannot be read. */
bool rt_ptx_signature(const char *ptx, const char *entry, uint8_t *kinds, int *count, int *reqntid,
                      char *why, size_t why_size);

/* Looks spec up in ctx's cache, compiling on a miss; on success *out holds
 * a reference (rt_entry_release) and its value is a tj_kernel. */
tj_status rt_compile_entry(tj_context *ctx, tj_spec *spec, tj_backend backend, RtEntry **out);
/* Unloads and frees a kernel (the cache's destroy callback). */
void rt_kernel_free(void *owner, void *kernel);

/* ------------------------------------------------------------- cache.c */

/* What a compile function hands back to the cache. */
typedef struct RtCompiled {
  void *value;
  double codegen_us, jit_ms;
  char *error; /* RT_ERROR_MAX bytes, filled on failure */
} RtCompiled;

typedef tj_status (*RtCompileFn)(void *arg, RtCompiled *out);
typedef void (*RtDestroyFn)(void *owner, void *value);

/* A cache of at most capacity unreferenced values; destroy is called for each
 * evicted value and for every value at rt_cache_free. NULL on OOM. */
RtCache *rt_cache_new(int capacity, RtDestroyFn destroy, void *owner);
void rt_cache_free(RtCache *c);

/* Finds key, or compiles it once however many threads ask at the same time
 * (the others wait and share the result or the failure). On success *out is
 * a referenced entry; on failure error (RT_ERROR_MAX) holds the message. */
tj_status rt_cache_get(RtCache *c, const char *key, RtCompileFn compile, void *arg, RtEntry **out,
                       char *error);
void *rt_entry_value(const RtEntry *e);
/* Reference counting: an entry with references is never evicted. Retain
 * needs a reference already held (or the owning lock of a slot holding one). */
void rt_entry_retain(RtEntry *e);
void rt_entry_release(RtEntry *e);
/* Keeps e loaded until rt_cache_free, whatever its references. */
void rt_cache_pin(RtCache *c, RtEntry *e);
/* Counts a hit served outside rt_cache_get (a JIT function's own table). */
void rt_cache_count_hit(RtCache *c);
void rt_cache_stats(RtCache *c, tj_cache_stats *out);

/* ------------------------------------------------------- disk_cache.c */

/* The environment of the disk cache (tilejit.h documents them). */
#define RT_CACHE_DIR_ENV          "TILEJIT_CACHE_DIR"
#define RT_CACHE_DISABLE_ENV      "TILEJIT_CACHE_DISABLE"
#define RT_CACHE_MAX_ENV          "TILEJIT_CACHE_MAX_BYTES"
#define RT_DISK_DEFAULT_MAX_BYTES ((uint64_t)1 << 30)

typedef struct RtDiskStats {
  uint64_t hits, misses, writes, rejects, errors;
} RtDiskStats;

/* The cache in dir, at most max_bytes: creates dir 0700 (and its
 * parents) when missing and uses it only when it is a directory of the
 * effective user that group and others cannot write. Never fails: an
 * unusable directory or max_bytes 0 gives a disabled handle (lookups miss,
 * stores do nothing; rt_disk_status says why). NULL only when out of
 * memory; every function here takes NULL as a disabled cache. */
RtDisk *rt_disk_open(const char *dir, uint64_t max_bytes);
/* rt_disk_open as the environment says: TILEJIT_CACHE_DISABLE,
 * TILEJIT_CACHE_DIR, else $XDG_CACHE_HOME/tilejit, else
 * $HOME/.cache/tilejit; TILEJIT_CACHE_MAX_BYTES (default 1 GiB). */
RtDisk *rt_disk_open_env(void);
void rt_disk_close(RtDisk *d);
bool rt_disk_enabled(const RtDisk *d);
/* "enabled", or why not. */
const char *rt_disk_status(const RtDisk *d);
const char *rt_disk_dir(const RtDisk *d);
/* True with *blob (release with free) and *size when the file of key is
 * trusted, whole, and holds key; false otherwise (counted as a miss, and a
 * file that was there but unusable also as a reject). */
bool rt_disk_load(RtDisk *d, const char *key, void **blob, size_t *size);
/* A blob rt_disk_load returned that the caller could not use after all:
 * the hit becomes a miss and a reject. */
void rt_disk_count_reject(RtDisk *d);
/* Writes blob under key (a temporary file renamed over the name), then
 * trims; false when it could not (a failed write is counted as an error; a
 * blob over the cache's limits is not written). */
bool rt_disk_store(RtDisk *d, const char *key, const void *blob, size_t size);
void rt_disk_stats(const RtDisk *d, RtDiskStats *out);
/* Writes all n bytes to fd, retrying short writes and EINTR; false on error. */
bool rt_write_all(int fd, const void *data, size_t n);
/* The file name of key in the directory: "<32 hex digits>.tjc". */
void rt_disk_file_name(const char *key, char *out, size_t size);
/* Tests: trust files of uid instead of the effective user's. */
void rt_disk_trust_uid(RtDisk *d, unsigned uid);

/* ----------------------------------------------------- kernel_image.c */

/* A kernel as it goes to disk: what loading needs besides the image. */
typedef struct RtImage {
  tj_kernel_info info;
  int param_count, hidden_count;
  uint8_t param_kind[RT_MAX_PARAMS];
  const char *log;   /* the JIT info log */
  const void *cubin; /* the driver-ready image */
  size_t cubin_size;
} RtImage;

/* A hash of the code generator's sources (generated by
 * cmake/source_hash.cmake): builds that may emit other PTX differ in it. */
extern const char tj_source_hash[];

/* The disk key of a generated kernel: the cache key without the context
 * id, with the hash of the code generator's sources, the driver's version
 * and the device's arch (NULL on OOM). */
char *rt_disk_key(tj_context *ctx, const char *spec_key, const RtKeyParts *parts);
/* PTX -> cubin through cuLinkCreate / cuLinkAddData / cuLinkComplete, with
 * both logs and the wall time; ctx is bound. On success *cubin (release
 * with free) and *size; on failure error (RT_ERROR_MAX) says why. */
tj_status rt_link_ptx(tj_context *ctx, const char *ptx, char *info_log, size_t log_size,
                      void **cubin, size_t *size, double *jit_ms, char *error);
/* An image as one blob (release with free), NULL on OOM. */
void *rt_image_encode(const RtImage *image, size_t *size);
/* A blob back into an image pointing into it; false when malformed. */
bool rt_image_decode(const void *blob, size_t size, RtImage *image);

/* -------------------------------------------------------------- dump.c */

#define RT_DUMP_ENV "TILEJIT_DUMP"

/* Writes DIR/NAME.tjir, NAME.ptx and NAME.log (those given) for a kernel
 * compiled, creating dir; failures are ignored. name: "<entry>-<hash>". */
void rt_dump_kernel(const char *dir, const char *name, const char *ir, const char *ptx,
                    const char *log);

/* ------------------------------------------------------------ launch.c */

/* The CTAs a launch of `instances` instances of k takes (from its shape). */
int64_t rt_launch_ctas(const tj_context *ctx, const tj_kernel *k, int64_t instances);
/* Launches k over instances program instances on stream. params holds one
 * pointer per program parameter and room for the hidden ones, which are
 * filled here from hidden[2]. instances > 0. */
tj_status rt_launch(tj_context *ctx, const tj_kernel *k, void **params, uint64_t *hidden,
                    int64_t instances, void *stream);
/* tj_launch after its checks of the kernel, the count and the assumptions
 * (JIT functions, whose variants meet them by construction): the grid's
 * range, the arguments packed by kind, the launch. */
tj_status rt_launch_args(tj_context *ctx, const tj_kernel *k, const tj_arg *args, int count,
                         int64_t grid, void *stream);
/* Frees every stream's workspace (context teardown, after a synchronize). */
void rt_workspace_free_all(tj_context *ctx);

/* ------------------------------------------------------ softmax_plan.c */

/* How an op's rows move: in 16-byte vectors from an aligned start or from
 * each row's phase, or in narrower vectors. */
typedef enum { RT_VECTORS_ALIGNED, RT_VECTORS_PHASED, RT_VECTORS_NARROW } rt_vectors;

/* BLOCK for the plan's template, warps, cluster and split, for an op of
 * `tiles` row tiles moved as `how` says: the whole repeats of the lanes of
 * a row inside a warp (2 to 4 vectors each, 2 to 5 over 16 lanes or more
 * in 16-bit rows at their phase: codegen's cg_group_size) or of the
 * threads of a CTA, a cluster or a split, or next_pow2(n) when that is
 * less. Rows in narrower vectors and f32 rows of a CTA, unstaged and up to
 * 32768, keep next_pow2(n). */
void rt_softmax_fit_block(tj_softmax_plan *plan, tj_dtype dtype, int64_t n, int tiles,
                          rt_vectors how);
/* Row tiles an op keeps in registers across its reduction (softmax 1). */
int rt_row_tiles(tj_row_op op);
/* tj_row_plan_for for rows whose pointers and strides are multiples of
 * `align` bytes: a few staged shapes are only for rows on 16-byte
 * boundaries (align 16). */
tj_status rt_row_plan(const tj_device_info *device, tj_row_op op, tj_dtype dtype, int64_t m,
                      int64_t n, const tj_softmax_options *options, int align,
                      tj_softmax_plan *plan);
/* The plan (warps, BLOCK, STAGE) on device for rows whose pointers and
 * strides are aligned to `align` bytes, all at one phase or not, given
 * the caller's options (NULL: none); whether its kernel is phased. */
bool rt_softmax_rows_plan(const tj_device_info *device, tj_softmax_plan *plan, tj_row_op op,
                          tj_dtype dtype, int64_t n, int align, bool one_phase,
                          const tj_softmax_options *chosen);

/* A measured shape for staged rows (softmax_tuning.inc's TUNED_ROWS): CTAs
 * a row of BLOCK takes, in a cluster or over the grid. */
typedef struct RtTunedRows {
  int arch;
  tj_dtype dtype;
  int64_t block;
  int ctas;
  bool cluster;
} RtTunedRows;

/* The plan's cluster, split, warps and stage from the line of lines
 * (count of them) for d's arch, dtype and next_pow2(n), scaled to n; false
 * (plan untouched) when there is none or it does not apply to m rows of n
 * on d. tj_softmax's plan reads the table built in; tests give their own. */
bool rt_softmax_tuned_rows(const RtTunedRows *lines, size_t count, const tj_device_info *d,
                           tj_dtype dtype, int64_t m, int64_t n, tj_softmax_plan *plan);


/* ---------------------------------------------------- softmax_launch.c */

/* Destroys tj_softmax's JIT functions and their references (context teardown). */
void rt_softmax_reset(tj_context *ctx);

/* ------------------------------------------------------------ memory.c */

/* (public: tj_device_alloc, tj_device_free, tj_copy_to_device, tj_copy_to_host) */

#endif /* TJ_RUNTIME_H */
