/*
 * softmax_launch.c — tj_softmax, tj_log_softmax, tj_softmax_backward and
 * tj_masked_softmax: their checks and their one launch path (the row op is
 * part of every key; its scalars are arguments).
 *
 * The strategy (design.md section 5) is softmax_plan.c's: the plan for the
 * shape on the context's device. This file adds what depends on the call:
 * the alignment of the actual pointers and strides (the largest power of
 * two up to 16 dividing every pointer and, for more than one row, every row
 * stride in bytes; rows of 1 KiB or more that start anywhere, but with all
 * the op's matrices at the same phase of 16 bytes, get a phased specialization, 16-byte
 * vectors from each row's own boundary; others a scalar one, never a wrong
 * vector access), and a plan whose CTAs cannot be resident together
 * (module.c refuses to load such a kernel) is shrunk, cluster first, then
 * split, until they can.
 *
 * The hit path must cost next to nothing beyond cuLaunchKernel, so it never
 * builds the cache key: a small direct-mapped table per context maps what
 * selects a kernel (dtype, n, alignment, the plan, the backend) to a cache
 * entry it holds a reference to. A hit there is one short mutex hold, one atomic increment
 * and decrement around the launch, no allocation and no formatting. A miss
 * specializes the template, goes through the kernel cache (which compiles
 * once however many threads miss together) and fills the slot.
 */
#include "runtime/runtime.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Each row op's entry point and its matrices: the output, then the inputs,
 * as the program's pointer parameters (then one stride for each, then n,
 * then the op's scalars, of the kinds given). */
#define ROW_MAX_MATRICES 3
#define ROW_MAX_SCALARS  3
static const struct {
  const char *api;
  int count;
  const char *names[ROW_MAX_MATRICES];
  int scalars;
  uint8_t scalar_kinds[ROW_MAX_SCALARS];
} row_ops[TJ_ROW_OP_COUNT] = {
    {"tj_softmax", 2, {"y", "x"}, 0, {0}},
    {"tj_log_softmax", 2, {"y", "x"}, 0, {0}},
    {"tj_softmax_backward", 3, {"dx", "y", "dy"}, 0, {0}},
    {"tj_masked_softmax", 2, {"y", "x"}, 3, {RT_PARAM_F32, RT_PARAM_I32, RT_PARAM_B64}},
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

/* ------------------------------------------------------- the fast path */

static bool same_key(const RtFastKey *a, const RtFastKey *b) {
  return a->n == b->n && a->op == b->op && a->dtype == b->dtype && a->align == b->align &&
         a->phased == b->phased && a->backend == b->backend && a->plan.which == b->plan.which &&
         a->plan.block == b->plan.block && a->plan.num_warps == b->plan.num_warps &&
         a->plan.cluster == b->plan.cluster && a->plan.split == b->plan.split &&
         a->plan.stage == b->plan.stage && a->plan.stash == b->plan.stash;
}

static RtFastSlot *slot_of(tj_context *ctx, const RtFastKey *k) {
  uint64_t h = (uint64_t)k->n * 0x9e3779b97f4a7c15ull;
  h ^= (uint64_t)(k->dtype | k->op << 2 | k->align << 4 | k->phased << 9 | k->plan.num_warps << 10 |
                  k->backend << 16 | k->plan.which << 18 | k->plan.cluster << 20) ^
       (uint64_t)k->plan.split << 25;
  h ^= h >> 29;
  return &ctx->fast[h & (RT_FAST_SLOTS - 1)];
}

/* The entry for key with a new reference, or NULL. */
static RtEntry *fast_find(tj_context *ctx, const RtFastKey *key) {
  RtFastSlot *slot = slot_of(ctx, key);
  RtEntry *e = NULL;
  pthread_mutex_lock(&ctx->fast_lock);
  if (slot->entry && same_key(&slot->key, key)) {
    e = slot->entry;
    rt_entry_retain(e);
  }
  pthread_mutex_unlock(&ctx->fast_lock);
  return e;
}

static void fast_store(tj_context *ctx, const RtFastKey *key, RtEntry *e) {
  RtFastSlot *slot = slot_of(ctx, key);
  rt_entry_retain(e);
  pthread_mutex_lock(&ctx->fast_lock);
  RtEntry *old = slot->entry;
  slot->key = *key;
  slot->entry = e;
  pthread_mutex_unlock(&ctx->fast_lock);
  if (old) rt_entry_release(old);
}

void rt_softmax_reset(tj_context *ctx) {
  pthread_mutex_lock(&ctx->fast_lock);
  for (int i = 0; i < RT_FAST_SLOTS; i++) {
    if (ctx->fast[i].entry) rt_entry_release(ctx->fast[i].entry);
    ctx->fast[i].entry = NULL;
  }
  pthread_mutex_unlock(&ctx->fast_lock);
}

/* ------------------------------------------------------- the slow path */

/* The kernel has the row op's parameters: its pointers and strides (b64),
 * then n (i32), then its scalars. */
static tj_status check_kernel(tj_context *ctx, tj_row_op op, const tj_kernel *k) {
  int count = row_ops[op].count, scalars = row_ops[op].scalars;
  int params = k->param_count - k->hidden_count;
  bool ok = params == 2 * count + 1 + scalars && k->param_kind[2 * count] == RT_PARAM_I32;
  for (int i = 0; ok && i < 2 * count; i++) ok = k->param_kind[i] == RT_PARAM_B64;
  for (int i = 0; ok && i < scalars; i++)
    ok = k->param_kind[2 * count + 1 + i] == row_ops[op].scalar_kinds[i];
  if (ok) return TJ_OK;
  return rt_fail(ctx, TJ_ERR_UNSUPPORTED, "%s: %s does not have the row op's parameters",
                 row_ops[op].api, k->report.info.entry);
}

static tj_status compile_plan(tj_context *ctx, const RtFastKey *key, const tj_softmax_plan *plan,
                              RtEntry **out) {
  tj_program *p = NULL;
  tj_spec *s = NULL;
  tj_spec_options o;
  const char *name = row_ops[key->op].api;
  tj_status st = tj_row_program((tj_row_op)key->op, plan->which, key->n, &p);
  if (st != TJ_OK)
    return rt_fail(ctx, st, "%s: template: %s", name,
                   p ? tj_program_error(p) : tj_status_string(st));
  if ((st = tj_softmax_spec_options(plan, (tj_dtype)key->dtype, key->n, &o)) != TJ_OK)
    st = rt_fail(ctx, st, "%s: no specialization for n = %lld", name, (long long)key->n);
  o.align = key->align;
  o.phased = key->phased;
  if (st == TJ_OK && (st = tj_specialize(p, &o, &s)) != TJ_OK)
    st = rt_fail(ctx, st, "%s: %s", name, tj_program_error(p));
  if (st == TJ_OK) st = rt_compile_entry(ctx, s, (tj_backend)key->backend, out);
  if (st == TJ_OK && (st = check_kernel(ctx, (tj_row_op)key->op, rt_entry_value(*out))) != TJ_OK)
    rt_entry_release(*out);
  tj_spec_destroy(s);
  tj_program_destroy(p);
  return st;
}

/* Drops STAGE (whose CTAs, halved, would need twice the shared memory),
 * else halves the cluster, else the split, and fits BLOCK to what is left;
 * false when there is nothing left. */
static bool shrink(tj_softmax_plan *plan, tj_dtype dtype, int64_t n) {
  if (plan->stage)
    plan->stage = plan->stash = 0;
  else if (plan->cluster > 1)
    plan->cluster /= 2;
  else if (plan->split > 1)
    plan->split /= 2;
  else
    return false;
  rt_softmax_fit_block(plan, dtype, n);
  return true;
}

/* Compiles key's plan, shrunk until its CTAs can be resident together (or,
 * through NVRTC, until it is one CTA a row). */
static tj_status compile_softmax(tj_context *ctx, const RtFastKey *key, RtEntry **out) {
  tj_softmax_plan plan = key->plan;
  tj_status st;
  while ((st = compile_plan(ctx, key, &plan, out)) == TJ_ERR_UNSUPPORTED &&
         shrink(&plan, (tj_dtype)key->dtype, key->n))
    continue;
  return st;
}

/* ------------------------------------------------------------- the API */

/* a: the op's matrices, output first (row_ops); scalars: the op's scalar
 * arguments, each in the low bytes of its slot. */
static tj_status row_op(tj_row_op op, tj_context *ctx, tj_dtype dtype, int64_t m, int64_t n,
                        RowMatrix *a, const uint64_t *scalars, void *stream,
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
  RtFastKey key;
  memset(&key, 0, sizeof key);
  key.n = n;
  key.op = op;
  key.dtype = dtype;
  key.align = alignment(elem, m, a, count);
  key.backend = o->backend;
  if (key.align < elem) return invalid(ctx, op, "a pointer is not aligned to its element size");
  bool any_phase =
      key.align < 16 && n * elem >= RT_PHASED_ROW_BYTES && same_phase(elem, m, a, count);
  /* A staged kernel (STAGE) is phased like any other (codegen/phase.c);
   * where x and y are at different phases it would move rows off 16 bytes
   * element by element, so those keep the plans without staging unless the
   * caller asks for it. */
  tj_softmax_options planned = *o;
  if (key.align < 16 && !any_phase && !o->stage) planned.stage = -1;
  st = tj_row_plan_for(&ctx->info, op, dtype, m, n, &planned, &key.plan);
  if (st != TJ_OK)
    return rt_fail(ctx, st, "%s: no plan for %lld x %lld%s", row_ops[op].api, (long long)m,
                   (long long)n,
                   st == TJ_ERR_UNSUPPORTED ? ": a single tile holds at most 2^30 elements (the "
                                              "online template, or AUTO, takes any n)"
                                            : "");
  /* Phased where the code generator phases: one tile, no grid split unless
   * staged. A phased kernel needs a few registers more than the 64 a thread
   * of a 1024-thread CTA has (ptxas spilled 12 bytes for f32 N = 32768 on
   * sm_75 and sm_80): it runs 512-thread CTAs, twice the values a thread. */
  key.phased = any_phase && key.plan.which == TJ_SOFTMAX_SINGLE &&
               (key.plan.split == 1 || key.plan.stage);
  if (key.phased && key.plan.num_warps == 32 && !o->num_warps) key.plan.num_warps = 16;
  RtEntry *e = fast_find(ctx, &key);
  if (e) {
    rt_cache_count_hit(ctx->cache);
  } else {
    if ((st = compile_softmax(ctx, &key, &e)) != TJ_OK) return st;
    fast_store(ctx, &key, e);
  }
  /* The pointers, the strides, n (i32, in the low bytes of its slot), then
   * the scalars. */
  uint64_t slots[2 * ROW_MAX_MATRICES + 1 + ROW_MAX_SCALARS] = {0};
  void *params[2 * ROW_MAX_MATRICES + 1 + ROW_MAX_SCALARS + 2];
  uint32_t n32 = (uint32_t)n;
  for (int i = 0; i < count; i++) {
    slots[i] = a[i].ptr;
    slots[count + i] = (uint64_t)a[i].stride;
  }
  memcpy(&slots[2 * count], &n32, sizeof n32);
  for (int i = 0; i < row_ops[op].scalars; i++) slots[2 * count + 1 + i] = scalars[i];
  for (int i = 0; i <= 2 * count + row_ops[op].scalars; i++) params[i] = &slots[i];
  uint64_t hidden[2] = {0, 0};
  st = rt_launch(ctx, rt_entry_value(e), params, hidden, m, stream);
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
  uint32_t scale, rows32 = (uint32_t)(rows > 0 ? rows : 1);
  memcpy(&scale, &mask->scale, sizeof scale);
  uint64_t scalars[3] = {scale, rows32, (uint64_t)offset};
  RowMatrix a[] = {{y, y_stride}, {x, x_stride}};
  return row_op(op, ctx, dtype, m, n, a, scalars, stream, opts);
}
