/*
 * softmax_launch.c — tj_softmax, tj_log_softmax, tj_softmax_backward and
 * tj_masked_softmax: their checks, and a launch through a JIT function
 * (function.c), the one launch path tj_function_launch takes too.
 *
 * The strategy (design.md section 5) is softmax_plan.c's: the plan for the
 * shape on the context's device. This file adds what depends on the call:
 * the alignment of the actual pointers and strides (the largest power of
 * two up to 16 dividing every pointer and, for more than one row, every
 * row stride in bytes; rows of 1 KiB or more (256 bytes in 16-bit softmax
 * and log-softmax) that start anywhere, but with all the op's matrices at
 * the same phase of 16 bytes, get a phased specialization, 16-byte vectors
 * from each row's own boundary; others a scalar one, never a wrong vector
 * access).
 *
 * Each (row op, template, dtype, backend) is a JIT function of the
 * template's program, made on first use and kept by the context; a call's
 * plan and alignment are its variant (RtVariantKey), with whether n (and
 * the masked softmax's rows) is a multiple of the vector (DIV: then no
 * vector of a row moves element by element), n and the op's scalars its
 * arguments, so every n that plans the same kernel shares it.
 * A variant whose CTAs cannot be resident together (module.c refuses to
 * load such a kernel) is shrunk, stage, then cluster, then split, until
 * they can. The hit path costs a plan, one short mutex hold over the
 * function's few variants (at most RT_ROW_VARIANTS, so that the kernel
 * cache may evict the rest), and an atomic increment and decrement around
 * the launch: no allocation and no formatting.
 */
#include "runtime/runtime.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Each row op's entry point and its matrices: the output, then the inputs,
 * as the program's pointer parameters (then one stride for each, then n,
 * then the op's scalars: the masked softmax's scale, rows and offset).
 * short16: its 16-bit rows are phased from RT_PHASED_ROW_BYTES_16, as
 * measured (bench/RESULTS.md, DD2); the masked softmax's element-by-element
 * kernel loads only the kept columns and ran faster under 1 KiB (bf16 N =
 * 400 on an H200: 85% of copy, 76% phased), and the backward's was not
 * measured, so those phase from RT_PHASED_ROW_BYTES. */
#define ROW_MAX_MATRICES 3
#define ROW_MAX_SCALARS  3
static const struct {
  const char *api;
  int count;
  const char *names[ROW_MAX_MATRICES];
  int scalars;
  bool short16;
} row_ops[TJ_ROW_OP_COUNT] = {
    {"tj_softmax", 2, {"y", "x"}, 0, true},
    {"tj_log_softmax", 2, {"y", "x"}, 0, true},
    {"tj_softmax_backward", 3, {"dx", "y", "dy"}, 0, false},
    {"tj_masked_softmax", 2, {"y", "x"}, 3, false},
};

/* A matrix of the call: its pointer and row stride in elements. */
typedef struct RowMatrix {
  uint64_t ptr;
  int64_t stride;
} RowMatrix;

/* ----------------------------------------------------- argument checks */

static tj_status invalid(tj_context *ctx, tj_row_op op, const char *what) {
  return rt_fail(ctx, TJ_ERR_INVALID_ARGUMENT, "%s: %s", row_ops[op].api, what);
}

static tj_status check_options(tj_context *ctx, tj_row_op op, const tj_softmax_options *o) {
  int w = o->num_warps;
  if (w < 0 || w > 32 || (w & (w - 1)) != 0)
    return invalid(ctx, op, "num_warps must be 0 (default), 1, 2, 4, 8, 16 or 32");
  if ((unsigned)o->backend >= TJ_BACKEND_COUNT) return invalid(ctx, op, "unknown backend");
  if ((unsigned)o->which_template > TJ_SOFTMAX_ONLINE) return invalid(ctx, op, "unknown template");
  if (o->cluster < 0 || o->cluster > 16)
    return invalid(ctx, op, "cluster must be 0 (default) to 16");
  if (o->split < 0 || o->split > 1024) return invalid(ctx, op, "split must be 0 (default) to 1024");
  if (o->stage < -1 || o->stage > 128)
    return invalid(ctx, op, "stage must be 0 (default), -1 (none) or 1 to 128");
  if (o->stash < 0) return invalid(ctx, op, "stash must be 0 (default) or bytes");
  return TJ_OK;
}

/* Elements a matrix spans: (m-1)*stride + n, or -1 when its bytes overflow. */
static int64_t extent(int64_t m, int64_t n, int64_t stride, int elem) {
  int64_t limit = INT64_MAX / elem - n;
  if (m > 1 && stride > limit / (m - 1)) return -1;
  return (m - 1) * stride + n;
}

/* Shapes, strides and pointers of a non-empty call (a[0] the output; one
 * row's strides are taken as n). The output may be an input, with its
 * stride (in place), but may not overlap one otherwise; inputs may overlap. */
static tj_status check_matrices(tj_context *ctx, tj_row_op op, int elem, int64_t m, int64_t n,
                                RowMatrix *a) {
  char what[96];
  int count = row_ops[op].count;
  if (m > INT32_MAX) return invalid(ctx, op, "m over 2^31-1 rows (program ids are i32)");
  if (n > INT32_MAX) return invalid(ctx, op, "n over 2^31-1 (the kernel's n is i32)");
  uint64_t end[ROW_MAX_MATRICES];
  for (int i = 0; i < count; i++) {
    const char *name = row_ops[op].names[i];
    if (!a[i].ptr) {
      snprintf(what, sizeof what, "NULL %s", name);
      return invalid(ctx, op, what);
    }
    if (m == 1) a[i].stride = n;
    if (a[i].stride < n) {
      snprintf(what, sizeof what, "the row stride of %s is smaller than n", name);
      return invalid(ctx, op, what);
    }
    int64_t span = extent(m, n, a[i].stride, elem);
    if (span < 0) {
      snprintf(what, sizeof what, "%s spans over 2^63 bytes", name);
      return invalid(ctx, op, what);
    }
    end[i] = a[i].ptr + (uint64_t)span * (uint64_t)elem;
  }
  for (int i = 1; i < count; i++) {
    const char *out = row_ops[op].names[0], *in = row_ops[op].names[i];
    if (a[0].ptr == a[i].ptr && a[0].stride != a[i].stride) {
      snprintf(what, sizeof what, "in place (%s == %s) needs equal strides", out, in);
      return invalid(ctx, op, what);
    }
    if (a[0].ptr != a[i].ptr && a[0].ptr < end[i] && a[i].ptr < end[0]) {
      snprintf(what, sizeof what, "%s and %s overlap without being the same matrix", out, in);
      return invalid(ctx, op, what);
    }
  }
  return TJ_OK;
}

/* The largest power of two <= 16 dividing the pointers and, for more than
 * one row, the strides in bytes. */
static int alignment(int elem, int64_t m, const RowMatrix *a, int count) {
  uint64_t bits = 16u;
  for (int i = 0; i < count; i++) {
    bits |= a[i].ptr;
    if (m > 1) bits |= (uint64_t)(a[i].stride * elem);
  }
  return (int)(bits & (~bits + 1));
}

/* Whether every matrix's rows start at the same phase of 16 bytes, row by
 * row: then a phased kernel moves them all in aligned vectors
 * (codegen/phase.c). */
static bool same_phase(int elem, int64_t m, const RowMatrix *a, int count) {
  for (int i = 1; i < count; i++) {
    if ((a[i].ptr ^ a[0].ptr) & 15u) return false;
    if (m > 1 && (((uint64_t)a[i].stride - (uint64_t)a[0].stride) * (uint64_t)elem & 15u) != 0)
      return false;
  }
  return true;
}

/* ------------------------------------------------------ the functions */

void rt_softmax_reset(tj_context *ctx) {
  for (int i = 0; i < RT_ROW_FUNCTIONS; i++) {
    tj_function_destroy(atomic_load(&ctx->row_functions[i]));
    atomic_store(&ctx->row_functions[i], NULL);
  }
}

/* The context's JIT function of op's template `which` in dtype through
 * backend, made on first use. Its variants are the plans' kernels. */
static tj_status row_function(tj_context *ctx, tj_row_op op, tj_softmax_template which,
                              tj_dtype dtype, tj_backend backend, tj_function **out) {
  int index =
      ((op * 2 + (which == TJ_SOFTMAX_ONLINE)) * TJ_DTYPE_COUNT + dtype) * TJ_BACKEND_COUNT +
      backend;
  if ((*out = atomic_load(&ctx->row_functions[index]))) return TJ_OK;
  pthread_mutex_lock(&ctx->row_lock);
  tj_status st = TJ_OK;
  if (!(*out = atomic_load(&ctx->row_functions[index]))) {
    tj_program *p = NULL;
    char why[256] = "";
    tj_function_options o = {.dtype = dtype, .size_param = "n", .backend = backend};
    if ((st = tj_row_program(op, which, 0, &p)) == TJ_OK)
      st = rt_function_new(ctx, p, &o, out, why, sizeof why);
    else
      snprintf(why, sizeof why, "template: %s", p ? tj_program_error(p) : tj_status_string(st));
    tj_program_destroy(p);
    if (st == TJ_OK) {
      (*out)->api = row_ops[op].api;
      (*out)->most = RT_ROW_VARIANTS;
      atomic_store(&ctx->row_functions[index], *out);
    } else {
      st = rt_fail(ctx, st, "%s: %s", row_ops[op].api, why);
    }
  }
  pthread_mutex_unlock(&ctx->row_lock);
  return st;
}

/* A plan's variant: ALIGN and phase from the call, the rest from the plan. */
static RtVariantKey variant_of(const tj_softmax_plan *plan, int align, bool phased) {
  return (RtVariantKey){.align = align,
                        .block = plan->block,
                        .phased = phased,
                        .num_warps = plan->num_warps,
                        .cluster = plan->cluster,
                        .split = plan->split,
                        .stage = plan->stage,
                        .stash = plan->stage ? plan->stash : 0};
}

/* Drops STAGE (whose CTAs, halved, would need twice the shared memory),
 * else halves the cluster, else the split; false when there is nothing
 * left. BLOCK becomes whole vectors of the threads left again (elem: the
 * dtype's size), never narrower than it was, since it holds every n that
 * plans this key, and never past the next power of two (always valid). */
static bool shrink(RtVariantKey *k, const void *elem) {
  if (k->stage)
    k->stage = k->stash = 0;
  else if (k->cluster > 1)
    k->cluster /= 2;
  else if (k->split > 1)
    k->split /= 2;
  else
    return false;
  int64_t pow2 = tj_next_pow2(k->block);
  int64_t span = 32LL * k->num_warps * k->cluster * k->split * (16 / *(const int *)elem);
  int64_t block = span > 0 ? (k->block + span - 1) / span * span : pow2;
  k->block = block < pow2 ? block : pow2;
  return true;
}

/* ------------------------------------------------------------- the API */

/* a: the op's matrices, output first (row_ops); scalars: the op's scalar
 * arguments (row_ops[op].scalars of them). */
static tj_status row_op(tj_row_op op, tj_context *ctx, tj_dtype dtype, int64_t m, int64_t n,
                        RowMatrix *a, const tj_arg *scalars, void *stream,
                        const tj_softmax_options *opts) {
  static const tj_softmax_options defaults;
  const tj_softmax_options *o = opts ? opts : &defaults;
  int count = row_ops[op].count;
  if (!ctx) return rt_fail_no_handle(row_ops[op].api, "context");
  if ((unsigned)dtype >= TJ_DTYPE_COUNT) return invalid(ctx, op, "unknown dtype");
  if (m < 0 || n < 0) return invalid(ctx, op, "negative m or n");
  tj_status st = check_options(ctx, op, o);
  if (st != TJ_OK || m == 0 || n == 0) return st;
  int elem = ir_dtype_size(dtype);
  if ((st = check_matrices(ctx, op, elem, m, n, a)) != TJ_OK) return st;
  int align = alignment(elem, m, a, count);
  if (align < elem) return invalid(ctx, op, "a pointer is not aligned to its element size");
  int least = row_ops[op].short16 ? rt_phased_row_bytes(elem) : RT_PHASED_ROW_BYTES;
  bool any_phase = align < 16 && n * elem >= least && same_phase(elem, m, a, count);
  /* A staged kernel (STAGE) is phased like any other (codegen/phase.c);
   * where x and y are at different phases it would move rows off 16 bytes
   * element by element, so those keep the plans without staging unless the
   * caller asks for it. */
  tj_softmax_options planned = *o;
  if (align < 16 && !any_phase && !o->stage) planned.stage = -1;
  tj_softmax_plan plan;
  st = rt_row_plan(&ctx->info, op, dtype, m, n, &planned, align, &plan);
  if (st != TJ_OK)
    return rt_fail(ctx, st, "%s: no plan for %lld x %lld%s", row_ops[op].api, (long long)m,
                   (long long)n,
                   st == TJ_ERR_UNSUPPORTED ? ": a single tile holds at most 2^30 elements (the "
                                              "online template, or AUTO, takes any n)"
                                            : "");
  bool phased =
      rt_softmax_rows_plan(&ctx->info, &plan, op, dtype, n, align, any_phase, o);
  tj_function *f;
  if ((st = row_function(ctx, op, plan.which, dtype, o->backend, &f)) != TJ_OK) return st;
  /* The pointers, the strides, n, then the scalars. */
  tj_arg args[2 * ROW_MAX_MATRICES + 1 + ROW_MAX_SCALARS];
  int nargs = 2 * count + 1 + row_ops[op].scalars;
  for (int i = 0; i < count; i++) {
    args[i] = (tj_arg){TJ_ARG_PTR, {.ptr = (void *)(uintptr_t)a[i].ptr}, 0};
    args[count + i] = (tj_arg){TJ_ARG_INT, {.i = a[i].stride}, 0};
  }
  args[2 * count] = (tj_arg){TJ_ARG_INT, {.i = n}, 0};
  for (int i = 0; i < row_ops[op].scalars; i++) args[2 * count + 1 + i] = scalars[i];
  RtVariantKey key = variant_of(&plan, align, phased);
  key.multiple = rt_function_multiple(f, args, nargs, align, phased);
  RtEntry *e;
  if ((st = rt_function_entry(f, &key, shrink, &elem, &e)) != TJ_OK) return st;
  st = rt_launch_args(ctx, rt_entry_value(e), args, nargs, m, stream);
  rt_entry_release(e);
  return st;
}

tj_status tj_softmax(tj_context *ctx, tj_dtype dtype, int64_t m, int64_t n, uint64_t y,
                     int64_t y_stride, uint64_t x, int64_t x_stride, void *stream,
                     const tj_softmax_options *opts) {
  RowMatrix a[] = {{y, y_stride}, {x, x_stride}};
  return row_op(TJ_ROW_SOFTMAX, ctx, dtype, m, n, a, NULL, stream, opts);
}

tj_status tj_log_softmax(tj_context *ctx, tj_dtype dtype, int64_t m, int64_t n, uint64_t y,
                         int64_t y_stride, uint64_t x, int64_t x_stride, void *stream,
                         const tj_softmax_options *opts) {
  RowMatrix a[] = {{y, y_stride}, {x, x_stride}};
  return row_op(TJ_ROW_LOG_SOFTMAX, ctx, dtype, m, n, a, NULL, stream, opts);
}

tj_status tj_softmax_backward(tj_context *ctx, tj_dtype dtype, int64_t m, int64_t n, uint64_t dx,
                              int64_t dx_stride, uint64_t y, int64_t y_stride, uint64_t dy,
                              int64_t dy_stride, void *stream, const tj_softmax_options *opts) {
  RowMatrix a[] = {{dx, dx_stride}, {y, y_stride}, {dy, dy_stride}};
  return row_op(TJ_ROW_SOFTMAX_BACKWARD, ctx, dtype, m, n, a, NULL, stream, opts);
}

/* The kernel's scalars: scale (f32), rows (i32) and the offset, clamped to
 * [-2^31, 2^31] (past n or before -n it keeps every column or none, and the
 * kernel's q + offset + 1 cannot overflow); n when not causal. */
tj_status tj_masked_softmax(tj_context *ctx, tj_dtype dtype, int64_t m, int64_t n, uint64_t y,
                            int64_t y_stride, uint64_t x, int64_t x_stride,
                            const tj_softmax_mask *mask, void *stream,
                            const tj_softmax_options *opts) {
  const tj_row_op op = TJ_ROW_MASKED_SOFTMAX;
  if (!ctx) return rt_fail_no_handle(row_ops[op].api, "context");
  if (!mask) return invalid(ctx, op, "NULL mask");
  if (!(mask->scale > 0.0f) || isinf(mask->scale))
    return invalid(ctx, op, "mask->scale must be positive and finite");
  if (mask->causal != 0 && mask->causal != 1) return invalid(ctx, op, "mask->causal must be 0 or 1");
  if (mask->rows < 0 || mask->rows > INT32_MAX)
    return invalid(ctx, op, "mask->rows must be 0 (m) to 2^31-1");
  const int64_t limit = (int64_t)1 << 31;
  int64_t rows = mask->rows ? mask->rows : m, offset = mask->causal ? mask->offset : n;
  offset = offset < -limit ? -limit : offset > limit ? limit : offset;
  tj_arg scalars[3] = {{TJ_ARG_FLOAT, {.f = mask->scale}, 0},
                       {TJ_ARG_INT, {.i = rows > 0 ? rows : 1}, 0},
                       {TJ_ARG_INT, {.i = offset}, 0}};
  RowMatrix a[] = {{y, y_stride}, {x, x_stride}};
  return row_op(op, ctx, dtype, m, n, a, scalars, stream, opts);
}
