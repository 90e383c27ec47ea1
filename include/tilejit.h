/*
 * tilejit.h — the one public header of tilejit.
 *
 * tilejit JIT-compiles small block-level tile programs to NVIDIA PTX at run
 * time. A program is built through the builder API below or parsed from its
 * text form, specialized on compile-time constants (BLOCK, NUM_WARPS, DTYPE,
 * ALIGN and any the program declares), and then either run on the CPU by the
 * interpreter or lowered to PTX and launched through the CUDA driver.
 *
 * Conventions:
 *   - Every object is an opaque handle created through an out-parameter and
 *     released by its destroy function; destroy accepts NULL.
 *   - Every fallible call returns a tj_status. When it fails, the handle it
 *     was given keeps a message naming what was wrong (tj_*_error); a call
 *     that succeeds leaves the message as it was. The library never prints,
 *     exits or aborts on a caller's error.
 *   - Strings returned through char ** are allocated by tilejit and released
 *     with tj_free.
 *
 * Lifecycle:
 *   tj_program  created by tj_program_create / tj_program_parse /
 *               tj_softmax_program; owned by the caller.
 *   tj_spec     created by tj_specialize from a verified program; it holds its
 *               own copy of the program, so the program may be destroyed first.
 *   tj_context  created by tj_context_create; owns the kernels it compiles
 *   tj_kernel   (tj_compile, tj_load_ptx). See the runtime section.
 *
 * Threads:
 *   - A tj_spec never changes after tj_specialize made it, except for its
 *     message, which only a failing call writes. So any number of threads
 *     may use one spec at once (tj_emit_ptx, tj_emit_cuda, tj_nvrtc_ptx,
 *     tj_interpret, tj_compile, tj_spec_*) as long as their calls succeed;
 *     calls that fail at the same time on one spec race on its message
 *     (give each thread its own spec where failures are expected).
 *   - The same holds for a tj_program under the calls that only read it:
 *     tj_program_verify, tj_program_print, tj_program_const and
 *     tj_specialize. The builder calls change it: one thread at a time, and
 *     no readers meanwhile.
 *   - tj_context: see the runtime section.
 */
#ifndef TILEJIT_H
#define TILEJIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TJ_VERSION_MAJOR 0
#define TJ_VERSION_MINOR 1
#define TJ_VERSION_PATCH 0
#define TJ_VERSION_STRING "0.1.0"

/* TJ_API marks the public functions. The library is compiled with hidden
 * visibility, so these are the only symbols libtilejit.so exports: its
 * internal functions (ir_*, cg_*, rt_*, buf_*) can neither clash with a
 * program's own functions of the same name nor be reached from outside. */
#ifndef TJ_API
#if defined(__GNUC__) || defined(__clang__)
#define TJ_API __attribute__((visibility("default")))
#else
#define TJ_API
#endif
#endif

/* ---------------------------------------------------------------- status */

typedef enum tj_status {
  TJ_OK = 0,
  TJ_ERR_INVALID_ARGUMENT, /* NULL handle or pointer, negative size, unknown dtype or option */
  TJ_ERR_TYPE,             /* builder: operands break the op's type rule */
  TJ_ERR_PARSE,            /* IR text: syntax error; the message gives line:column */
  TJ_ERR_VERIFY,           /* verifier: the program breaks an IR rule */
  TJ_ERR_UNSUPPORTED,      /* well-formed, but beyond this backend (arch, size, ...) */
  TJ_ERR_OUT_OF_MEMORY,    /* a host allocation failed */
  TJ_ERR_INTERP,           /* interpreter: out-of-bounds access or bad arguments */
  TJ_ERR_NO_DRIVER,        /* libcuda.so.1 could not be loaded */
  TJ_ERR_NO_DEVICE,        /* the driver has no such device */
  TJ_ERR_DRIVER,           /* a driver call failed; the message names it and holds the JIT log */
  TJ_ERR_NO_NVRTC,         /* libnvrtc could not be loaded */
  TJ_ERR_NVRTC,            /* NVRTC failed; the message holds its program log */
  TJ_ERR_TOOL,             /* an external tool (ptxas) failed or is missing */
  TJ_STATUS_COUNT
} tj_status;

/* A static, human-readable name for a status ("invalid argument", ...). */
TJ_API const char *tj_status_string(tj_status status);

/* The library's version, TJ_VERSION_STRING of the build ("0.1.0"). */
TJ_API const char *tj_version(void);

/* Releases a string or buffer that tilejit returned through a char **. */
TJ_API void tj_free(void *p);

/* ----------------------------------------------------------------- types */

/* Element types. DTYPE is the program's storage dtype, bound at specialization. */
typedef enum tj_elem {
  TJ_I32,
  TJ_I64,
  TJ_F32,
  TJ_F16,
  TJ_BF16,
  TJ_PRED,
  TJ_DTYPE,
  TJ_ELEM_COUNT
} tj_elem;

/* The storage dtypes a program (and softmax) can be specialized on. */
typedef enum tj_dtype { TJ_DTYPE_F32, TJ_DTYPE_F16, TJ_DTYPE_BF16, TJ_DTYPE_COUNT } tj_dtype;

typedef enum tj_shape { TJ_SCALAR, TJ_POINTER, TJ_TILE } tj_shape;

/* A value's type: a scalar, a pointer to elem, or a 1-D tile of elem whose
 * length is the compile-time constant with index len (see tj_program_const). */
typedef struct tj_type {
  uint8_t shape; /* tj_shape */
  uint8_t elem;  /* tj_elem */
  int16_t len;   /* tiles: constant index; otherwise -1 */
} tj_type;

/* Indices of the built-in compile-time constants every program has:
 * BLOCK, NUM_WARPS, ALIGN, and the geometry's CLUSTER (CTAs of a
 * thread-block cluster holding one program instance's tiles) and SPLIT
 * (clusters, or CTAs, of the grid holding them). */
enum {
  TJ_CONST_BLOCK = 0,
  TJ_CONST_NUM_WARPS = 1,
  TJ_CONST_ALIGN = 2,
  TJ_CONST_CLUSTER = 3,
  TJ_CONST_SPLIT = 4,
  TJ_CONST_BUILTIN_COUNT = 5
};

static inline tj_type tj_scalar_type(tj_elem e) { tj_type t = {TJ_SCALAR, (uint8_t)e, -1}; return t; }
static inline tj_type tj_pointer_type(tj_elem e) { tj_type t = {TJ_POINTER, (uint8_t)e, -1}; return t; }
static inline tj_type tj_tile_type(tj_elem e, int len_const) {
  tj_type t = {TJ_TILE, (uint8_t)e, (int16_t)len_const};
  return t;
}

/* ------------------------------------------------------------------- ops */

/*
 * The op table: one line per op, the only list of ops in tilejit. Columns:
 *   X(NAME, "text", min operands, max operands, kind, type rule, "semantics")
 * The enum below, the op names, the verifier's type rules, the printer, the
 * parser, the interpreter's dispatch and the PTX table are derived from it.
 * Elementwise ops broadcast a scalar operand against a tile.
 */
#define TJ_OP_LIST(X)                                                                             \
  X(PROGRAM_ID, "program_id", 0, 0, SOURCE, I32_SCALAR, "index of this program instance")         \
  X(NUM_PROGRAMS, "num_programs", 0, 0, SOURCE, I32_SCALAR, "number of program instances")        \
  X(PARAM, "param", 0, 0, SOURCE, DECLARED, "kernel parameter imm (name kept by the program)")     \
  X(CONST, "const", 0, 0, SOURCE, DECLARED, "scalar or tile filled with imm (may be +-inf)")       \
  X(CONSTEXPR, "constexpr", 0, 0, SOURCE, I32_SCALAR, "value of compile-time constant imm")        \
  X(ARANGE, "arange", 0, 0, SOURCE, DECLARED, "tile of i32 0, 1, ..., len-1")                      \
  X(ADD, "add", 2, 2, ELEMENTWISE, ARITH, "a + b")                                                 \
  X(SUB, "sub", 2, 2, ELEMENTWISE, ARITH, "a - b")                                                 \
  X(MUL, "mul", 2, 2, ELEMENTWISE, ARITH, "a * b")                                                 \
  X(DIV, "div", 2, 2, ELEMENTWISE, FLOAT2, "a / b, IEEE round-to-nearest")                         \
  X(REM, "rem", 2, 2, ELEMENTWISE, INT2, "a % b, truncated as C's %; 0 where b is 0 or -1")         \
  X(MAX, "max", 2, 2, ELEMENTWISE, ARITH, "max(a, b); a NaN operand yields the other (fmaxf)")     \
  X(MIN, "min", 2, 2, ELEMENTWISE, ARITH, "min(a, b); a NaN operand yields the other (fminf)")     \
  X(NEG, "neg", 1, 1, ELEMENTWISE, ARITH, "-a")                                                    \
  X(EXP, "exp", 1, 1, ELEMENTWISE, FLOAT1, "e^a; a subnormal result is flushed to 0")                                                  \
  X(EXP2, "exp2", 1, 1, ELEMENTWISE, FLOAT1, "2^a; a subnormal result is flushed to 0")                                                \
  X(LOG, "log", 1, 1, ELEMENTWISE, FLOAT1, "natural logarithm of a")                               \
  X(LT, "lt", 2, 2, ELEMENTWISE, COMPARE, "a < b (false if either is NaN)")                        \
  X(LE, "le", 2, 2, ELEMENTWISE, COMPARE, "a <= b (false if either is NaN)")                       \
  X(GT, "gt", 2, 2, ELEMENTWISE, COMPARE, "a > b (false if either is NaN)")                        \
  X(GE, "ge", 2, 2, ELEMENTWISE, COMPARE, "a >= b (false if either is NaN)")                       \
  X(EQ, "eq", 2, 2, ELEMENTWISE, COMPARE, "a == b (false if either is NaN)")                       \
  X(NE, "ne", 2, 2, ELEMENTWISE, COMPARE, "a != b (true if either is NaN)")                        \
  X(AND, "and", 2, 2, ELEMENTWISE, LOGIC, "a and b, on predicates")                                \
  X(OR, "or", 2, 2, ELEMENTWISE, LOGIC, "a or b, on predicates")                                   \
  X(SELECT, "select", 3, 3, ELEMENTWISE, SELECT, "a ? b : c, a a predicate")                       \
  X(CAST, "cast", 1, 1, ELEMENTWISE, CAST, "a converted: to float rounds to nearest even; float to int truncates, saturating, NaN to 0")     \
  X(PTR_ADD, "ptr_add", 2, 2, MEMORY, PTR_ADD, "pointer a advanced by b elements (b an int scalar)") \
  X(LOAD, "load", 2, 4, MEMORY, LOAD, "a[b] where mask c holds, else d (default 0)")               \
  X(STORE, "store", 3, 4, MEMORY, STORE, "a[b] = c where mask d holds (default all)")              \
  X(REDUCE_MAX, "reduce_max", 1, 1, REDUCE, REDUCE, "max over the tile (NaN ignored, as max)")     \
  X(REDUCE_SUM, "reduce_sum", 1, 1, REDUCE, REDUCE, "sum over the tile, in pairwise (tree) order")                           \
  X(FOR, "for", 3, 3, CONTROL, FOR, "counted loop: a, a+c, ... while < b (c > 0); never wraps")   \
  X(ITER, "iter", 1, 1, CONTROL, ITER, "loop-carried scalar, a on entry; after endfor, its last") \
  X(YIELD, "yield", 2, 2, CONTROL, YIELD, "iter a takes value b for the next iteration")           \
  X(ENDFOR, "endfor", 0, 0, CONTROL, ENDFOR, "closes the innermost for")

typedef enum tj_op {
#define TJ_OP_ENUM(name, text, lo, hi, kind, rule, doc) TJ_OP_##name,
  TJ_OP_LIST(TJ_OP_ENUM)
#undef TJ_OP_ENUM
  TJ_OP_COUNT
} tj_op;

/* The op's text name ("add"), or NULL for an out-of-range op. */
TJ_API const char *tj_op_name(tj_op op);

/* -------------------------------------------------------------- programs */

typedef struct tj_program tj_program;

/* A value of a program: an opaque index that names its program. 0 is no value. */
typedef uint32_t tj_value;
#define TJ_NO_VALUE ((tj_value)0)

/* Creates an empty program with the built-in constants BLOCK, NUM_WARPS,
 * ALIGN, CLUSTER and SPLIT. */
TJ_API tj_status tj_program_create(const char *name, tj_program **out);
TJ_API void tj_program_destroy(tj_program *p);

/* The message of the last failed call on p ("" if none failed); successful
 * calls leave it as it was. Valid until the next failing call on p. */
TJ_API const char *tj_program_error(const tj_program *p);

/* Declares a compile-time constant (bound at specialization); returns its index. */
TJ_API tj_status tj_program_declare_const(tj_program *p, const char *name, int *index);
/* Looks a constant up by name (a built-in one or a declared one). */
TJ_API tj_status tj_program_const(const tj_program *p, const char *name, int *index);

/* Builder. Each call appends one instruction and returns its result. On error
 * nothing is appended, the status says why and tj_program_error says what. */
/* A parameter's name is an identifier no other parameter of p has; a
 * program has at most 256 parameters. */
TJ_API tj_status tj_build_param(tj_program *p, const char *name, tj_type type, tj_value *out);
/* value must be one of type's elem, as in the text form: an integer of the
 * range for i32 and i64; for f32 any value that rounds to a finite float (it
 * is rounded to nearest), or inf, -inf or a NaN. Otherwise TJ_ERR_TYPE. */
TJ_API tj_status tj_build_const(tj_program *p, tj_type type, double value, tj_value *out);
TJ_API tj_status tj_build_constexpr(tj_program *p, int const_index, tj_value *out);
TJ_API tj_status tj_build_arange(tj_program *p, int len_const, tj_value *out);
TJ_API tj_status tj_build_cast(tj_program *p, tj_value a, tj_elem to, tj_value *out);
/* Any op whose result type follows from its operands: elementwise, reduce,
 * ptr_add, load, store, program_id, num_programs, for, iter, yield, endfor.
 * out may be NULL for ops without a result (store, yield, endfor). */
TJ_API tj_status tj_build(tj_program *p, tj_op op, const tj_value *operands, int count,
                          tj_value *out);

/* Checks every rule; on failure the message names the instruction and rule. */
TJ_API tj_status tj_program_verify(tj_program *p);

/* Text form: one instruction per line; print and parse round-trip exactly.
 * tj_program_parse reads length bytes (no NUL needed at the end; a NUL byte
 * among them is TJ_ERR_PARSE, comments included). It sets *out even on a
 * parse error (unless out of memory) so that tj_program_error can be read;
 * destroy it either way. */
TJ_API tj_status tj_program_print(tj_program *p, char **text);
TJ_API tj_status tj_program_parse(const char *text, size_t length, tj_program **out);

/* ------------------------------------------------------- specialization */

typedef struct tj_spec tj_spec;

typedef struct tj_binding {
  const char *name;
  int64_t value;
} tj_binding;

typedef struct tj_spec_options {
  int64_t n;          /* problem width; BLOCK defaults to next_pow2(n) */
  int64_t block;      /* BLOCK; 0 = next_pow2(n); no power of two: any for an unstaged
                         instance in one CTA, else a multiple of the instance's
                         32 x NUM_WARPS x CLUSTER x SPLIT threads */
  int num_warps;      /* 0 = tj_default_num_warps(BLOCK, dtype) */
  tj_dtype dtype;     /* binds DTYPE */
  int align;          /* bytes every pointer and row stride is a multiple of; 0 = element size */
  int cluster;        /* CLUSTER: CTAs of a thread-block cluster that hold one program
                         instance's tiles, 1 to 16 (sm_90 and later); 0 = 1, no cluster */
  int split;          /* SPLIT: clusters (or CTAs when cluster is 1) of the grid that hold
                         one instance's tiles, reduced through global memory, 1 to 1024;
                         0 = 1 */
  const tj_binding *bindings; /* the program's own constants */
  int binding_count;
  int phased;         /* 1: rows start at any phase of 16 bytes (pointers and strides
                         aligned only to align): tile accesses move 16-byte vectors
                         from each instance's first 16-byte boundary, with scalar
                         head and tail; an access whose phase differs from its
                         tile's first access moves element by element. 0: ALIGN
                         alone decides the vectors */
  int stage;          /* STAGE: elements of the widest tile a thread keeps in registers at
                         once, 0 to 128; 0 = as many as the registers take (32768 / threads).
                         A thread's share above it streams in pieces of STAGE elements, and
                         each load that a phase after its reduction needs again is kept in
                         shared memory (each thread its own), so it is read from memory once.
                         Shared memory then holds the CTA's share of every such tile: at most
                         what the arch allows a CTA (227 KiB on sm_90, 163 KiB on sm_80,
                         99 KiB on sm_86/89/120, 64 KiB on sm_75), else codegen refuses it */
  int stash;          /* STASH (with STAGE): the most bytes of shared memory a CTA's stash
                         takes; 0 = all its share needs. It keeps the first pieces that
                         fit; later phases read the others from memory again, the last
                         ones first (the likeliest to be still in L2) */
  int multiple;       /* DIV: every i32 parameter (a size such as n) is a multiple of this,
                         1, 2, 4, 8 or 16; 0 = 1, nothing assumed. A mask arange + s < n
                         whose s and n are multiples of the vector width then holds or
                         drops whole vectors, so no vector moves element by element */
} tj_spec_options;

/* next_pow2(n) for n >= 1 (1 for n <= 1). */
TJ_API int64_t tj_next_pow2(int64_t n);
/* The default warps for a tile of BLOCK elements (documented in README). */
TJ_API int tj_default_num_warps(int64_t block, tj_dtype dtype);

/* Verifies p, binds every constant, verifies again. On error, the message is
 * left on p. */
TJ_API tj_status tj_specialize(tj_program *p, const tj_spec_options *options, tj_spec **out);
TJ_API void tj_spec_destroy(tj_spec *s);
/* The message of the last failed call on s ("" if none failed). */
TJ_API const char *tj_spec_error(const tj_spec *s);
/* A stable, printable key holding every bound value, and its 64-bit hash. */
TJ_API const char *tj_spec_key(const tj_spec *s);
TJ_API uint64_t tj_spec_hash(const tj_spec *s);
/* The specialized program in text form. */
TJ_API tj_status tj_spec_print(tj_spec *s, char **text);
/* The value bound to a constant, by name. */
TJ_API tj_status tj_spec_const(const tj_spec *s, const char *name, int64_t *value);

/* ---------------------------------------------------------- interpreter */

typedef enum tj_arg_kind { TJ_ARG_PTR, TJ_ARG_INT, TJ_ARG_FLOAT } tj_arg_kind;

/* One kernel argument, in parameter order. Pointers carry the byte size of
 * their buffer so the interpreter can reject out-of-bounds accesses. f16 and
 * bf16 buffers hold the raw 16-bit patterns. */
typedef struct tj_arg {
  tj_arg_kind kind;
  union {
    void *ptr;
    int64_t i;
    double f;
  } u;
  size_t bytes;
} tj_arg;

/* Runs program instances 0 .. grid-1 of s on host memory, in order. */
TJ_API tj_status tj_interpret(tj_spec *s, const tj_arg *args, int arg_count, int64_t grid);

/* ------------------------------------------------------ code generation */

/*
 * Kernel ABI of generated code. The kernel's parameters are the program's
 * parameters in order (pointers and i64 as .u64, i32 as .u32, f32 as .f32),
 * then one hidden .u64: the number of program instances (the logical grid).
 * Launch it as info.shape says: shape.threads threads per CTA and any number
 * of CTAs >= 1 (a multiple of shape.ctas_per_program); CTAs stride over
 * program instances, shape.programs_per_cta at a time per CTA, so a grid
 * smaller than the number of instances still covers them all.
 */
typedef struct tj_codegen_options {
  int arch;        /* SM version, 10*major+minor (75, 80, 86, 89, 90, 100, ...); 0 = 90 */
  int ptx_version; /* PTX ISA, 10*major+minor; 0 = the lowest the arch and kernel need */
  int annotate;    /* interleave comments naming each IR instruction */
} tj_codegen_options;

/* How a kernel is launched: the one description of its grid, from which
 * the runtime sizes every launch. */
typedef struct tj_launch_shape {
  int threads;          /* threads per CTA (.reqntid) */
  int programs_per_cta; /* program instances one CTA runs side by side (lane groups) */
  int cluster;          /* CTAs per thread-block cluster (1: none; sm_90 and later) */
  int ctas_per_program; /* CTAs holding one instance: CLUSTER * SPLIT (1: one CTA or less) */
  int shared_bytes;     /* static shared memory per CTA */
  int all_ctas;         /* 1 = one CTA per programs_per_cta instances even past what the
                           device holds at once; 0 = at most that many CTAs, each striding
                           over the rest (a persistent grid) */
  int cooperative;      /* 1 = the CTAs of an instance wait for each other through global
                           memory (SPLIT > 1): all must be resident, launched cooperatively */
  int workspace_bytes;  /* SPLIT > 1: the hidden .u64 tj_workspace parameter (before the
                           instance count) points to TJ_WORKSPACE_COUNTERS bytes of barrier
                           counters, zeroed before their first use (128 bytes per group of
                           ctas_per_program CTAs), then this many bytes per group; 0: none */
  int dynamic_shared_bytes; /* shared memory each launch gives a CTA: a kernel whose tj_smem
                           is over 48 KiB declares it .extern (STAGE), and the runtime opts
                           its function in to this much when it loads it */
} tj_launch_shape;

/* The counters at the start of a workspace: room for 8192 groups. Every
 * kernel leaves them as it found them, whatever its SPLIT, so launches
 * that follow each other on a stream may share one workspace. */
#define TJ_WORKSPACE_COUNTERS (1 << 20)

typedef struct tj_kernel_info {
  char entry[64];        /* the .entry name */
  tj_launch_shape shape; /* how to launch it */
  int arch, ptx_version; /* as emitted */
  int param_count;       /* the program's parameters, without the hidden ones */
} tj_kernel_info;

/* Lowers a specialized program to PTX text (release with tj_free). The same
 * spec and options always give byte-identical text. info may be NULL. */
TJ_API tj_status tj_emit_ptx(tj_spec *s, const tj_codegen_options *options, char **ptx,
                             tj_kernel_info *info);

/* The second backend: IR -> CUDA C -> NVRTC (libnvrtc loaded at run time). */
typedef enum tj_backend { TJ_BACKEND_PTX, TJ_BACKEND_NVRTC, TJ_BACKEND_COUNT } tj_backend;

/* Lowers a specialized program to CUDA C with the same kernel ABI and the
 * same semantics as tj_emit_ptx (release with tj_free). Needs no NVRTC. */
TJ_API tj_status tj_emit_cuda(tj_spec *s, const tj_codegen_options *options, char **cuda,
                              tj_kernel_info *info);
/* tj_emit_cuda, then NVRTC to PTX. On TJ_ERR_NVRTC tj_spec_error holds the
 * program log; TJ_ERR_NO_NVRTC when libnvrtc cannot be loaded. */
TJ_API tj_status tj_nvrtc_ptx(tj_spec *s, const tj_codegen_options *options, char **ptx,
                              tj_kernel_info *info);
/* NVRTC's version as 1000*major + 10*minor (13000 for 13.0). */
TJ_API tj_status tj_nvrtc_version(int *version);

/* --------------------------------------------------------------- softmax */

typedef enum tj_softmax_template {
  TJ_SOFTMAX_AUTO,   /* the single tile, unless n needs a BLOCK over 2^30 */
  TJ_SOFTMAX_SINGLE, /* templates/softmax.tj: the row in one tile */
  TJ_SOFTMAX_ONLINE  /* templates/softmax_online.tj: chunks of BLOCK, x read twice */
} tj_softmax_template;

/* The chunk (BLOCK) the online template uses by default. */
#define TJ_SOFTMAX_CHUNK 4096

/* The softmax program. Its parameters, in order:
 *   y: ptr<DTYPE>, x: ptr<DTYPE>, y_stride: i64, x_stride: i64, n: i32
 * (strides in elements); its grid is M, one program instance per row. In the
 * single-tile template BLOCK >= n is the whole row; in the online template
 * BLOCK is the chunk, and n may be any size. AUTO gives the single tile for
 * n up to 2^30 and the online template beyond. */
TJ_API tj_status tj_softmax_program(tj_softmax_template which, int64_t n, tj_program **out);

/* The row ops shipped as templates, planned and launched the same way. */
typedef enum tj_row_op {
  TJ_ROW_SOFTMAX,          /* y = exp(x - max) / sum exp(x - max) */
  TJ_ROW_LOG_SOFTMAX,      /* y = (x - max) - log sum exp(x - max) */
  TJ_ROW_SOFTMAX_BACKWARD, /* dx = y * (dy - sum(dy * y)), from y = softmax(x) and dy */
  TJ_ROW_MASKED_SOFTMAX,   /* y = softmax(scale * x) over the kept columns, 0 elsewhere */
  TJ_ROW_OP_COUNT
} tj_row_op;

/* tj_softmax_program for any row op (templates/log_softmax*.tj,
 * templates/softmax_backward*.tj, templates/masked_softmax*.tj). The
 * backward programs' parameters are
 *   dx, y, dy: ptr<DTYPE>, dx_stride, y_stride, dy_stride: i64, n: i32;
 * the masked ones' softmax's, then scale: f32, rows: i32, offset: i64. */
TJ_API tj_status tj_row_program(tj_row_op op, tj_softmax_template which, int64_t n,
                                tj_program **out);

typedef struct tj_softmax_options {
  int num_warps;                      /* 0 = the plan's */
  tj_backend backend;                 /* TJ_BACKEND_PTX (0) or TJ_BACKEND_NVRTC */
  tj_softmax_template which_template; /* TJ_SOFTMAX_AUTO (0): the plan's */
  int cluster;                        /* CLUSTER; 0 = the plan's */
  int split;                          /* SPLIT; 0 = the plan's */
  int stage;                          /* STAGE (tj_spec_options); 0 = the plan's, -1 = none */
  int stash;                          /* STASH (tj_spec_options), bytes; 0 = the plan's */
} tj_softmax_options;

/* How softmax runs: a template and its specialization. */
typedef struct tj_softmax_plan {
  tj_softmax_template which; /* SINGLE or ONLINE, never AUTO */
  int64_t block;             /* BLOCK */
  int num_warps;             /* NUM_WARPS */
  int cluster;               /* CLUSTER: CTAs of a cluster per row (1: none) */
  int split;                 /* SPLIT: clusters (or CTAs) of the grid per row (1: none) */
  int stage;                 /* STAGE: the row streams through registers in pieces of this
                                many elements a thread, kept in shared memory (0: none) */
  int stash;                 /* STASH: the most bytes a CTA keeps (0: all of its share) */
} tj_softmax_plan;

typedef struct tj_device_info tj_device_info;

/*
 * The softmax strategy, in one place: for m rows of n elements of dtype on
 * a device (NULL: the nominal device of tj_device_nominal(90)), honouring
 * the options' choices (NULL: none):
 *   - rows of up to 32768 elements: one CTA (or a lane group) per row, the
 *     warps from the measured table (softmax_tuning.inc) or
 *     tj_default_num_warps (16-bit rows of a CTA: or half of them, where
 *     that pads the row less);
 *   - rows of 64 KiB and more (sm_80 and later): staged (STAGE), CTAs of
 *     256 threads holding at most 64 KiB of the row each in shared memory
 *     (on sm_90, for rows on 16-byte boundaries, which this plan assumes
 *     and tj_softmax checks: one CTA of 512 threads, up to 128 KiB in
 *     f32), in a cluster of up to 8 where it takes several (sm_90), else
 *     over the grid, so that x is read once and three CTAs share an SM; a row
 *     wider than the grid's shared memory holds, in every CTA the grid
 *     holds, the rows in turn, each CTA keeping the first part of its
 *     share (STASH) and reading the rest again; an even number of rows
 *     that take every CTA in turn run two at a time, over half of them
 *     each, where STASH keeps at least 70% of a CTA's share;
 *   - wider rows, enough of them to fill the GPU: a thread-block cluster of
 *     up to 16 CTAs per row (sm_90 and later); on sm_90 CTAs of 128 or 256
 *     threads at 64 elements a thread, elsewhere (or with the caller's
 *     warps) the split's CTAs;
 *   - wider rows still, few rows, or no clusters: the grid level, SPLIT
 *     CTAs of 512 threads per row so that the rows fill the device; a row
 *     larger than a quarter of L2 takes every CTA the device holds, the
 *     rows one after another, so that its second read comes from L2; a row
 *     the resident CTAs cannot hold streams in pieces through 1024-thread
 *     CTAs.
 * BLOCK is the least multiple of the 16-byte vectors the instance's
 * threads hold at least n in (a row inside a warp: the power of two of
 * lanes, 2 to 4 vectors each, or up to 5 over 16 lanes and more in 16-bit
 * rows at their phase, that pads it least), or next_pow2(n) where
 * that is less; f32 rows over a CTA's threads (unstaged, up to 32768)
 * and rows whose vectors are under 16 bytes keep next_pow2(n).
 * The runtime checks that the plan's CTAs can be resident together and
 * halves CLUSTER, then SPLIT, until they can (tj_softmax).
 */
TJ_API tj_status tj_softmax_plan_for(const tj_device_info *device, tj_dtype dtype, int64_t m,
                                     int64_t n, const tj_softmax_options *options,
                                     tj_softmax_plan *plan);
/* The plan for any row op: as tj_softmax_plan_for, sized for the row tiles
 * the op keeps (softmax backward keeps y and dy: its CTAs and clusters are
 * sized for a row of 2n, so a thread holds what a softmax thread does). */
TJ_API tj_status tj_row_plan_for(const tj_device_info *device, tj_row_op op, tj_dtype dtype,
                                 int64_t m, int64_t n, const tj_softmax_options *options,
                                 tj_softmax_plan *plan);

/* The specialization options of a plan for rows of n elements of dtype.
 * DIV (out->multiple) stays 1, so the kernel takes any n the plan's BLOCK
 * holds; tj_softmax specializes on n itself and sets it to the vector's
 * elements (16 / the element size) where n is a multiple of them (and its
 * rows start on 16-byte boundaries); a caller may do the same. */
TJ_API tj_status tj_softmax_spec_options(const tj_softmax_plan *plan, tj_dtype dtype, int64_t n,
                                         tj_spec_options *out);

/* Float conversions with the IR's exact rounding (round-to-nearest-even). */
TJ_API uint16_t tj_f32_to_f16(float f);
TJ_API float tj_f16_to_f32(uint16_t h);
TJ_API uint16_t tj_f32_to_bf16(float f);
TJ_API float tj_bf16_to_f32(uint16_t h);

/* --------------------------------------------------------------- runtime */

/*
 * The runtime loads libcuda.so.1 at run time (TILEJIT_LIBCUDA overrides the
 * path), compiles kernels on first use, caches them per context and launches
 * them on the caller's stream. Without a driver every call below returns
 * TJ_ERR_NO_DRIVER (TJ_ERR_NO_DEVICE without a GPU) with a message; the rest
 * of tilejit works as before. Device pointers are CUdeviceptr values
 * (uint64_t); streams are CUstream handles passed as void * (NULL: the
 * legacy default stream). Launches are asynchronous: nothing here
 * synchronizes with the device except the copies, tj_context_synchronize,
 * and the unloading of a module evicted from a full cache.
 *
 * Threads: one tj_context may be used by any number of threads at once,
 * except tj_context_destroy. Messages are per thread: tj_context_error(ctx)
 * is the message of the calling thread's last failed call on ctx.
 *
 * Lifecycle:
 *   tj_context  created by tj_context_create; destroyed by the caller after
 *               its work is done. It unloads every kernel it compiled and
 *               releases the primary context it retained.
 *   tj_kernel   returned by tj_compile / tj_load_ptx; owned by its context
 *               and valid until the context is destroyed.
 */
typedef struct tj_context tj_context;
typedef struct tj_kernel tj_kernel;

/* tj_context_options.device: the thread's current CUDA context. */
#define TJ_DEVICE_CURRENT (-1)
/* Kernels a context keeps loaded by default: beyond it the least recently
 * used are unloaded, except those tj_compile / tj_load_ptx returned, those
 * a live tj_function holds, and the at most 8 a row op holds for each
 * dtype, template (single, online) and backend it has run in (tj_softmax's
 * launch path: the ones it used last). */
#define TJ_CACHE_DEFAULT_CAPACITY 256

typedef struct tj_context_options {
  int device;         /* ordinal: the thread's current context if it is on this device,
                         else the device's primary context (retained);
                         TJ_DEVICE_CURRENT: the current context, else device 0's primary */
  int arch;           /* PTX target, 10*major+minor, at most the device's; 0 = the device's */
  int ptx_version;    /* PTX ISA to request; 0 = the lowest the arch needs */
  int cache_capacity; /* 0 = TJ_CACHE_DEFAULT_CAPACITY */
} tj_context_options;

struct tj_device_info {
  char name[128];
  int ordinal;
  int arch;           /* the device's compute capability, 10*major+minor */
  int target_arch;    /* the arch kernels are generated for */
  int ptx_version;    /* the highest PTX ISA the driver accepts */
  int driver_version; /* 1000*major + 10*minor (13000 for 13.0) */
  int sm_count;
  int max_threads_per_block;
  int max_threads_per_sm;
  int max_blocks_per_sm;
  int max_shared_per_block;       /* bytes, without opt-in */
  int max_shared_per_block_optin; /* bytes */
  int64_t max_grid_x;
  int max_shared_per_sm;          /* bytes */
  int registers_per_sm;
  int l2_bytes;
  int cooperative_launch;         /* the device launches cooperative kernels (SPLIT > 1) */
  int cluster_launch;             /* the device launches thread-block clusters (CLUSTER > 1),
                                     and the driver loads their PTX ISA (8.1) */
};

/* A nominal device of an arch, for planning without a GPU (dump-ptx): the
 * numbers of a common part of that arch (sm_90: an H100 SXM). */
TJ_API tj_status tj_device_nominal(int arch, tj_device_info *out);

/*
 * The kernel cache on disk. A kernel the context compiles from a spec
 * (tj_compile, tj_softmax; not tj_load_ptx) is also kept on disk as the
 * driver's cubin, so that another process loads it without codegen or JIT.
 * Read when the context is created:
 *   TILEJIT_CACHE_DIR        the directory; default $XDG_CACHE_HOME/tilejit,
 *                            else $HOME/.cache/tilejit. Created 0700; used only
 *                            if it is the user's own and not group- or
 *                            world-writable.
 *   TILEJIT_CACHE_MAX_BYTES  the size bound (default 1 GiB; 0 turns the cache
 *                            off); past it the least recently used files go.
 *   TILEJIT_CACHE_DISABLE=1  no disk cache.
 *   TILEJIT_DUMP=DIR         writes DIR/<entry>-<hash>.tjir, .ptx and .log (the
 *                            specialized IR, the PTX, the driver's JIT log) for
 *                            every kernel compiled; with it set, kernels are
 *                            compiled even when the disk cache holds them.
 * The key of a file is the kernel's cache key (without the context) plus the
 * driver version and the device's arch. Writes are atomic (a temporary file,
 * renamed); a file is loaded only if it is owned by the user, writable by no
 * one else, whole, its checksum matches and it holds the same key; any other
 * file is ignored and rewritten. The disk cache never makes a call fail: when
 * it cannot read or write, the kernel is compiled as without it (see
 * disk_errors).
 */
typedef struct tj_cache_stats {
  uint64_t hits;      /* lookups served by a loaded or loading kernel */
  uint64_t misses;    /* lookups that compiled (one per key, however many callers wait) */
  uint64_t evictions; /* kernels unloaded to stay within the capacity */
  uint64_t failures;  /* compiles that failed */
  int64_t entries;    /* kernels loaded now */
  int64_t capacity;
  double codegen_us; /* total time producing PTX (tj_emit_ptx or NVRTC) */
  double jit_ms;     /* total driver JIT wall time (CU_JIT_WALL_TIME) */
  /* The disk cache (appended: the fields above keep their offsets). A miss
   * that finds its kernel on disk is a disk hit: no codegen, no JIT. */
  uint64_t disk_hits;    /* misses served by a file of the disk cache */
  uint64_t disk_misses;  /* disk lookups that found no usable file */
  uint64_t disk_writes;  /* kernels written to the disk cache */
  uint64_t disk_rejects; /* files ignored: corrupt, truncated, another key, untrusted */
  uint64_t disk_errors;  /* an unusable directory, writes that failed */
} tj_cache_stats;

/* Creates a context (options NULL: device TJ_DEVICE_CURRENT, defaults).
 * Queries the device and picks the PTX ISA; an arch not in the code
 * generator's table, or one that needs a newer driver, is TJ_ERR_UNSUPPORTED.
 * On failure *out is NULL and tj_context_error(NULL) holds the message. */
TJ_API tj_status tj_context_create(const tj_context_options *options, tj_context **out);
TJ_API void tj_context_destroy(tj_context *ctx);
/* The calling thread's last failure on ctx ("" if none); NULL: its last
 * failure of a call given no context (tj_context_create among them). */
TJ_API const char *tj_context_error(const tj_context *ctx);
TJ_API tj_status tj_context_device_info(const tj_context *ctx, tj_device_info *info);
TJ_API tj_status tj_context_cache_stats(const tj_context *ctx, tj_cache_stats *stats);
/* Waits for all work in the context (cuCtxSynchronize). */
TJ_API tj_status tj_context_synchronize(tj_context *ctx);

/* Device memory in the context, for callers without the CUDA runtime.
 * The copies are synchronous. */
TJ_API tj_status tj_device_alloc(tj_context *ctx, size_t bytes, uint64_t *ptr);
TJ_API tj_status tj_device_free(tj_context *ctx, uint64_t ptr);
TJ_API tj_status tj_copy_to_device(tj_context *ctx, uint64_t dst, const void *src, size_t bytes);
TJ_API tj_status tj_copy_to_host(tj_context *ctx, void *dst, uint64_t src, size_t bytes);

/* Compiles s for ctx's arch with backend (cached: the same spec, backend and
 * context give the same kernel; concurrent callers compile once). s is only
 * read, except for its error message, which a failed compile writes; NVRTC
 * failures leave their log there and in the context's message.
 * TJ_ERR_NO_NVRTC without libnvrtc. */
TJ_API tj_status tj_compile(tj_context *ctx, tj_spec *s, tj_backend backend, tj_kernel **kernel);
/* Loads hand-written PTX. It follows the kernel ABI of generated code (the
 * last parameter is the .u64 instance count; .reqntid gives the threads; one
 * program instance per CTA, no cluster). A driver failure is TJ_ERR_DRIVER with the
 * driver's error name and the ptxas log in the message. */
TJ_API tj_status tj_load_ptx(tj_context *ctx, const char *ptx, const char *entry,
                             tj_kernel **kernel);

typedef struct tj_kernel_report {
  tj_kernel_info info; /* threads, programs per CTA, arch, ISA, ... */
  int registers;       /* per thread */
  int local_bytes;     /* local memory per thread; above 0 means spills */
  int max_ctas;        /* CTAs resident at once device-wide: the grid's cap */
  double codegen_us;   /* producing the PTX; 0 for tj_load_ptx */
  double jit_ms;       /* the driver's JIT wall time */
} tj_kernel_report;

TJ_API tj_status tj_kernel_describe(const tj_kernel *k, tj_kernel_report *report);
/* The driver's JIT info log (ptxas -v style lines); "" if none. */
TJ_API const char *tj_kernel_log(const tj_kernel *k);

/* Launches grid program instances of k on stream, with args in parameter
 * order (the hidden instance count is added here). Pointer parameters take
 * TJ_ARG_PTR (u.ptr holds the device address) or TJ_ARG_INT; i64 and i32
 * take TJ_ARG_INT (range-checked); f32 takes TJ_ARG_FLOAT. grid 0 launches
 * nothing; the CTA count is capped at k's resident maximum, since kernels
 * stride over their instances. A kernel compiled from a spec checks the
 * arguments against what the spec assumed before launching anything:
 * pointers ALIGN-byte aligned, and i64 arguments that reach an address
 * multiples of ALIGN / (the widest pointee's size) elements; a violation is
 * TJ_ERR_INVALID_ARGUMENT naming the argument and the assumption (a
 * misaligned vector access would fault and leave the context unusable). */
TJ_API tj_status tj_launch(tj_context *ctx, const tj_kernel *k, const tj_arg *args, int count,
                           int64_t grid, void *stream);

/* -------------------------------------------------------- JIT functions */

/*
 * A program bound to a context and specialized on each launch's actual
 * arguments, as Triton's kernel[grid](args) is. A launch picks its variant:
 *   - ALIGN: the largest of 16, 8, 4, 2 and 1 bytes that divides every
 *     pointer argument and, for every i64 parameter that reaches an address
 *     (a row stride), its value times the widest pointee's size;
 *   - BLOCK: options.block, or next_pow2 of the size parameter's value;
 *   - phased: where ALIGN is under 16 but those pointers all sit at one
 *     byte of their 16-byte lines and those i64s move them alike, on rows
 *     of BLOCK of at least 1 KiB, 16-byte vectors from each row's own
 *     boundary (tj_spec_options.phased), as tj_softmax does.
 * It compiles a variant on first use (through the context's kernel cache)
 * and keeps it in the function's own table, so a later launch of it costs a
 * look-up and tj_launch. Pointers must be aligned to their element size.
 * Launches may come from several threads. Destroy a function before its
 * context. Failures leave their message on the context (tj_context_error).
 */
typedef struct tj_function tj_function;

typedef struct tj_function_options {
  tj_dtype dtype;             /* binds DTYPE */
  int num_warps;              /* 0 = tj_default_num_warps(BLOCK, dtype) */
  int64_t block;              /* BLOCK; 0 = next_pow2 of size_param's value at each launch */
  const char *size_param;     /* an i32 or i64 parameter (with block 0), e.g. "n" */
  const tj_binding *bindings; /* the program's own constants (copied) */
  int binding_count;
  tj_backend backend;
} tj_function_options;

/* p is copied: it may be destroyed or changed afterwards. */
TJ_API tj_status tj_function_create(tj_context *ctx, const tj_program *p,
                                    const tj_function_options *options, tj_function **out);
TJ_API void tj_function_destroy(tj_function *f);
/* Launches grid program instances with args in parameter order on stream. */
TJ_API tj_status tj_function_launch(tj_function *f, const tj_arg *args, int count, int64_t grid,
                                    void *stream);
/* The variants compiled so far. */
TJ_API int tj_function_variants(tj_function *f);

/* y = softmax(x) over each row of the m x n row-major matrices x and y of
 * dtype, with row strides in elements (>= n when m > 1), on stream, as
 * tj_softmax_plan_for plans it for the context's device. y == x
 * (with equal strides) works in place; otherwise y and x must not overlap.
 * m and n are at most 2^31-1; offsets are 64-bit. m == 0 or n == 0 launches
 * nothing (NULL pointers allowed then). Pointers must be aligned to the
 * element size; pointers and strides that are not 16-byte multiples get a
 * kernel specialized for their alignment. opts NULL: defaults. The first
 * call for a shape compiles; later calls only launch. Arguments are checked
 * before anything is launched (TJ_ERR_INVALID_ARGUMENT). */
TJ_API tj_status tj_softmax(tj_context *ctx, tj_dtype dtype, int64_t m, int64_t n, uint64_t y,
                            int64_t y_stride, uint64_t x, int64_t x_stride, void *stream,
                            const tj_softmax_options *opts);

/* y = log_softmax(x), with everything as in tj_softmax: the same plan,
 * checks, alignment, in place and options; extreme rows as
 * torch.log_softmax (all -inf, +inf or NaN in a row: all NaN; -inf among
 * finite values: -inf). */
TJ_API tj_status tj_log_softmax(tj_context *ctx, tj_dtype dtype, int64_t m, int64_t n, uint64_t y,
                                int64_t y_stride, uint64_t x, int64_t x_stride, void *stream,
                                const tj_softmax_options *opts);

/* The mask of tj_masked_softmax: attention scores, one row per query. */
typedef struct tj_softmax_mask {
  float scale;    /* the scores are scale * x; positive and finite (1 / sqrt(head size)) */
  int causal;     /* 0: every column is kept; 1: column j of query q while j <= q + offset */
  int64_t rows;   /* queries per attention matrix: row r is query r % rows (0: m) */
  int64_t offset; /* the diagonal: 0 as torch.tril (top left), n - rows for bottom right */
} tj_softmax_mask;

/* y = softmax(scale * x) over the kept columns of each row, exactly 0 in
 * the dropped ones (which are not read), as attention computes its weights:
 * torch's scaled_dot_product_attention with is_causal (offset 0) or its
 * bottom-right causal mask (offset n - rows). A row that keeps no column, or
 * whose kept scores are all -inf, comes out all 0 (torch's safe softmax in
 * attention); +inf or NaN among the kept scores make the row NaN. Everything
 * else as tj_softmax: the plan, checks, alignment, in place and options. */
TJ_API tj_status tj_masked_softmax(tj_context *ctx, tj_dtype dtype, int64_t m, int64_t n,
                                   uint64_t y, int64_t y_stride, uint64_t x, int64_t x_stride,
                                   const tj_softmax_mask *mask, void *stream,
                                   const tj_softmax_options *opts);

/* dx = y * (dy - sum(dy * y)) over each row: the gradient of softmax, given
 * its output y and the gradient dy of the loss with respect to y (torch's
 * softmax backward), all three m x n of dtype with their own row strides.
 * Everything else as in tj_softmax: the plan (tj_row_plan_for), checks,
 * alignment (of all three) and options. dx may be y or dy (equal strides:
 * in place); otherwise it must not overlap them. A NaN or inf in a row of y
 * or dy makes that row of dx all NaN, as in torch. */
TJ_API tj_status tj_softmax_backward(tj_context *ctx, tj_dtype dtype, int64_t m, int64_t n,
                                     uint64_t dx, int64_t dx_stride, uint64_t y, int64_t y_stride,
                                     uint64_t dy, int64_t dy_stride, void *stream,
                                     const tj_softmax_options *opts);

#ifdef __cplusplus
}
#endif
#endif /* TILEJIT_H */
