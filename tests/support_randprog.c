/*
 * support_randprog.c — the random program generator of support_randprog.h.
 *
 * A Gen keeps pools of values built so far: f32 tiles and scalars (each
 * marked exact or not: exact values are computed bit for bit alike by every
 * backend), i32 tiles and the scalar results to store. Each step picks an
 * op and operands from the pools and adds its result back. Everything goes
 * through the public builder API; a builder error is a generator bug and is
 * reported with the builder's message.
 */
#include "support_randprog.h"

#include "support.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL 48

typedef struct Gen {
  tj_program *p;
  TjRng rng;
  bool ok;
  char *why;
  size_t why_size;
  tj_value tiles[POOL], scalars[POOL], itiles[POOL], results[8];
  bool tile_exact[POOL], scalar_exact[POOL];
  int ntiles, nscalars, nitiles, nresults;
  tj_value param[RANDPROG_ARGS];
  tj_value xrow, frow, irow, orow, odrow, osrow;
  tj_value arange, offs, mask;
  bool stored_out;
} Gen;

/* Records the first builder error; returns whether st is TJ_OK. */
static bool check(Gen *g, tj_status st, const char *what) {
  if (st != TJ_OK && g->ok) {
    g->ok = false;
    snprintf(g->why, g->why_size, "%s: %s", what, tj_program_error(g->p));
  }
  return st == TJ_OK;
}

static tj_value op4(Gen *g, tj_op o, const tj_value *args, int n) {
  tj_value r = TJ_NO_VALUE;
  if (g->ok) check(g, tj_build(g->p, o, args, n, &r), tj_op_name(o));
  return r;
}

static tj_value op(Gen *g, tj_op o, tj_value a, tj_value b, tj_value c) {
  tj_value args[3] = {a, b, c};
  return op4(g, o, args, c ? 3 : b ? 2 : a ? 1 : 0);
}

static tj_value konst(Gen *g, tj_type t, double v) {
  tj_value r = TJ_NO_VALUE;
  if (g->ok) check(g, tj_build_const(g->p, t, v, &r), "const");
  return r;
}

static tj_value fconst(Gen *g, double v) { return konst(g, tj_scalar_type(TJ_F32), v); }
static tj_value iconst(Gen *g, int64_t v) { return konst(g, tj_scalar_type(TJ_I32), (double)v); }

static tj_value cast(Gen *g, tj_value v, tj_elem to) {
  tj_value r = TJ_NO_VALUE;
  if (g->ok) check(g, tj_build_cast(g->p, v, to, &r), "cast");
  return r;
}

static int pick(Gen *g, int n) { return (int)rng_range(&g->rng, 0, n - 1); }
static bool chance(Gen *g, double p) { return rng_uniform(&g->rng) < p; }

static void add_tile(Gen *g, tj_value v, bool exact) {
  if (g->ntiles == POOL) return;
  g->tile_exact[g->ntiles] = exact;
  g->tiles[g->ntiles++] = v;
}

static void add_scalar(Gen *g, tj_value v, bool exact) {
  if (g->nscalars == POOL) return;
  g->scalar_exact[g->nscalars] = exact;
  g->scalars[g->nscalars++] = v;
}

static void add_result(Gen *g, tj_value v) {
  if (g->nresults < 8) g->results[g->nresults++] = v;
}

/* ---- setup ------------------------------------------------------------------ */

static void params(Gen *g) {
  static const char *const names[RANDPROG_ARGS] = {"out",   "outd",   "outs", "x", "f",
                                                   "index", "stride", "n",    "s"};
  tj_type types[RANDPROG_ARGS] = {
      tj_pointer_type(TJ_F32),   tj_pointer_type(TJ_DTYPE), tj_pointer_type(TJ_F32),
      tj_pointer_type(TJ_DTYPE), tj_pointer_type(TJ_F32),   tj_pointer_type(TJ_I32),
      tj_scalar_type(TJ_I64),    tj_scalar_type(TJ_I32),    tj_scalar_type(TJ_F32)};
  for (int i = 0; i < RANDPROG_ARGS && g->ok; i++)
    check(g, tj_build_param(g->p, names[i], types[i], &g->param[i]), "param");
}

static void rows(Gen *g) {
  tj_value pid = op(g, TJ_OP_PROGRAM_ID, 0, 0, 0);
  tj_value off = op(g, TJ_OP_MUL, cast(g, pid, TJ_I64), g->param[RP_STRIDE], 0);
  tj_value *rows[] = {&g->orow, &g->odrow, &g->osrow, &g->xrow, &g->frow, &g->irow};
  for (int i = 0; i < 6; i++) *rows[i] = op(g, TJ_OP_PTR_ADD, g->param[i], off, 0);
  add_scalar(g, g->param[RP_S], true);
  add_scalar(g, cast(g, pid, TJ_F32), true);
}

/* Masks stay within [0, n): a bound, a window inside it, or a union of two. */
static tj_value make_mask(Gen *g, tj_value offs) {
  tj_value bound = op(g, TJ_OP_LT, offs, g->param[RP_N], 0);
  int kind = pick(g, 4);
  if (kind <= 1) return bound;
  tj_value lo = op(g, TJ_OP_GE, offs, iconst(g, rng_range(&g->rng, 0, 9)), 0);
  if (kind == 2) return op(g, TJ_OP_AND, bound, lo, 0);
  tj_value hi = op(g, TJ_OP_LT, offs, iconst(g, rng_range(&g->rng, 0, 5)), 0);
  return op(g, TJ_OP_AND, bound, op(g, TJ_OP_OR, hi, lo, 0), 0);
}

static void loads(Gen *g, int64_t shift, bool unmasked_ok) {
  tj_value a;
  check(g, tj_build_arange(g->p, TJ_CONST_BLOCK, &a), "arange");
  g->arange = a;
  g->offs = shift ? op(g, TJ_OP_ADD, a, iconst(g, shift), 0) : a;
  g->mask = make_mask(g, g->offs);
  static const double others[] = {0, -INFINITY, 1.5};
  int o = pick(g, 4);
  tj_value args[4] = {g->xrow, g->offs, g->mask, o < 3 ? fconst(g, others[o]) : 0};
  int nargs = unmasked_ok && chance(g, 0.25) ? 2 : o < 3 ? 4 : 3;
  add_tile(g, cast(g, op4(g, TJ_OP_LOAD, args, nargs), TJ_F32), true);
  tj_value offs = chance(g, 0.3) ? cast(g, g->offs, TJ_I64) : g->offs; /* i64 offsets too */
  tj_value fargs[3] = {g->frow, offs, g->mask};
  add_tile(g, op4(g, TJ_OP_LOAD, fargs, 3), true);
}

/* Gathers: a reversed row, and the row through the index buffer. */
static void gathers(Gen *g, int64_t block) {
  tj_value last = konst(g, tj_tile_type(TJ_I32, TJ_CONST_BLOCK), (double)(block - 1));
  tj_value rev = op(g, TJ_OP_SUB, last, g->arange, 0);
  tj_value args[3] = {g->frow, rev, op(g, TJ_OP_LT, rev, g->param[RP_N], 0)};
  add_tile(g, op4(g, TJ_OP_LOAD, args, 3), true);
  tj_value iargs[3] = {g->irow, g->offs, g->mask};
  tj_value index = op4(g, TJ_OP_LOAD, iargs, 3);
  tj_value gargs[3] = {g->frow, index, g->mask};
  add_tile(g, op4(g, TJ_OP_LOAD, gargs, 3), true);
  if (g->nitiles < POOL) g->itiles[g->nitiles++] = index;
  /* A scalar mask: the whole tile when the row holds BLOCK elements. */
  tj_value whole = op(g, TJ_OP_GE, g->param[RP_N], iconst(g, block), 0);
  tj_value wargs[4] = {g->frow, g->arange, whole, fconst(g, 0.5)};
  add_tile(g, op4(g, TJ_OP_LOAD, wargs, 4), true);
  tj_value scaled = op(g, TJ_OP_MUL, g->arange, iconst(g, rng_range(&g->rng, -3, 3)), 0);
  if (g->nitiles < POOL) g->itiles[g->nitiles++] = scaled;
  add_tile(g, cast(g, op(g, TJ_OP_ADD, scaled, index, 0), TJ_F32), true);
}

/* ---- random steps ------------------------------------------------------------ */

typedef struct Pick {
  tj_value v;
  bool exact, tile;
} Pick;

static Pick any_value(Gen *g, bool want_tile) {
  if (want_tile || !g->nscalars || chance(g, 0.7)) {
    int i = pick(g, g->ntiles);
    return (Pick){g->tiles[i], g->tile_exact[i], true};
  }
  int i = pick(g, g->nscalars);
  return (Pick){g->scalars[i], g->scalar_exact[i], false};
}

static Pick exact_value(Gen *g) {
  for (int tries = 0; tries < 16; tries++) {
    Pick p = any_value(g, false);
    if (p.exact) return p;
  }
  return (Pick){g->tiles[0], true, true};
}

static void keep(Gen *g, tj_value v, bool exact, bool tile) {
  if (tile)
    add_tile(g, v, exact);
  else
    add_scalar(g, v, exact);
}

/* Keeps magnitudes in check: clamp to [-1000, 1000] (exact ops). */
static tj_value clamp(Gen *g, tj_value v) {
  return op(g, TJ_OP_MAX, op(g, TJ_OP_MIN, v, fconst(g, 1000), 0), fconst(g, -1000), 0);
}

static void arithmetic(Gen *g) {
  static const tj_op ops[] = {TJ_OP_ADD, TJ_OP_SUB, TJ_OP_MUL, TJ_OP_MAX, TJ_OP_MIN};
  Pick a = any_value(g, true), b = any_value(g, false);
  tj_op o = ops[pick(g, 5)];
  bool swap = chance(g, 0.5);
  tj_value r = op(g, o, swap ? b.v : a.v, swap ? a.v : b.v, 0);
  keep(g, o == TJ_OP_MUL ? clamp(g, r) : r, a.exact && b.exact, true);
}

static void transcendental(Gen *g) {
  Pick a = any_value(g, false);
  tj_value small = op(g, TJ_OP_MIN, a.v, fconst(g, 3), 0), r;
  switch (pick(g, 4)) {
  case 0: r = op(g, TJ_OP_EXP, small, 0, 0); break;
  case 1: r = op(g, TJ_OP_EXP2, small, 0, 0); break;
  case 2:
    r = op(g, TJ_OP_LOG, op(g, TJ_OP_ADD, op(g, TJ_OP_MUL, a.v, a.v, 0), fconst(g, 1), 0), 0, 0);
    break;
  default: r = op(g, TJ_OP_NEG, a.v, 0, 0); break;
  }
  keep(g, r, false, a.tile);
}

/* Division by a value far from zero: exp of [-3, 3] (a GPU flushes e^x of
 * a very negative x to 0 where the CPU keeps a subnormal) or a constant. */
static void division(Gen *g) {
  Pick a = any_value(g, true), d = any_value(g, false);
  tj_value clamped = op(g, TJ_OP_MAX, op(g, TJ_OP_MIN, d.v, fconst(g, 3), 0), fconst(g, -3), 0);
  tj_value den = chance(g, 0.5) ? fconst(g, 0.75 + pick(g, 8)) : op(g, TJ_OP_EXP, clamped, 0, 0);
  keep(g, op(g, TJ_OP_DIV, a.v, den, 0), false, true);
}

static void selection(Gen *g) {
  static const tj_op cmps[] = {TJ_OP_LT, TJ_OP_LE, TJ_OP_GT, TJ_OP_GE, TJ_OP_EQ, TJ_OP_NE};
  Pick x = exact_value(g), y = exact_value(g), a = any_value(g, true), b = any_value(g, false);
  tj_value c = op(g, cmps[pick(g, 6)], x.v, y.v, 0);
  keep(g, op(g, TJ_OP_SELECT, c, a.v, b.v), a.exact && b.exact, true);
}

static void reduction(Gen *g) {
  if (chance(g, 0.25) && g->nitiles) {
    tj_value t = g->itiles[pick(g, g->nitiles)];
    tj_value r =
        cast(g, op(g, chance(g, 0.5) ? TJ_OP_REDUCE_SUM : TJ_OP_REDUCE_MAX, t, 0, 0), TJ_F32);
    add_scalar(g, r, true);
    add_result(g, r);
    return;
  }
  int i = pick(g, g->ntiles);
  bool max = chance(g, 0.5);
  tj_value r = op(g, max ? TJ_OP_REDUCE_MAX : TJ_OP_REDUCE_SUM, g->tiles[i], 0, 0);
  add_scalar(g, r, max && g->tile_exact[i]);
  add_result(g, r);
}

static void random_step(Gen *g) {
  switch (pick(g, 7)) {
  case 0:
  case 1: arithmetic(g); break;
  case 2: transcendental(g); break;
  case 3: division(g); break;
  case 4: selection(g); break;
  default: reduction(g); break;
  }
}

/* ---- loops -------------------------------------------------------------------- */

/* for c = 0, BLOCK, ... < n: a running sum and max over f's chunks; each
 * chunk, scaled, is stored to out (the chunks are disjoint). */
static void chunk_loop(Gen *g) {
  tj_value block, c, acc, m, zero = iconst(g, 0);
  check(g, tj_build_constexpr(g->p, TJ_CONST_BLOCK, &block), "constexpr");
  tj_value args[3] = {zero, g->param[RP_N], block}, acc0 = fconst(g, 0), m0 = fconst(g, -INFINITY);
  c = op4(g, TJ_OP_FOR, args, 3);
  acc = op(g, TJ_OP_ITER, acc0, 0, 0);
  m = op(g, TJ_OP_ITER, m0, 0, 0);
  tj_value oc = op(g, TJ_OP_ADD, g->arange, c, 0), mc = op(g, TJ_OP_LT, oc, g->param[RP_N], 0);
  tj_value largs[3] = {g->frow, oc, mc};
  tj_value t = op4(g, TJ_OP_LOAD, largs, 3);
  tj_value u = op(g, TJ_OP_MUL, t, g->param[RP_S], 0);
  tj_value sargs[4] = {g->orow, oc, op(g, TJ_OP_ADD, u, g->tiles[pick(g, g->ntiles)], 0), mc};
  op4(g, TJ_OP_STORE, sargs, 4);
  tj_value acc2 = op(g, TJ_OP_ADD, acc, op(g, TJ_OP_REDUCE_SUM, u, 0, 0), 0);
  tj_value m2 = op(g, TJ_OP_MAX, m, op(g, TJ_OP_REDUCE_MAX, t, 0, 0), 0);
  op(g, TJ_OP_YIELD, acc, acc2, 0);
  op(g, TJ_OP_YIELD, m, m2, 0);
  op(g, TJ_OP_ENDFOR, 0, 0, 0);
  g->stored_out = true;
  add_result(g, acc);
  add_result(g, m);
  add_scalar(g, m, true);
}

/* for j = 0 .. min(program_id, 3): trip counts differ between instances;
 * with a reduction inside, instances must not share a CTA. */
static void uneven_loop(Gen *g) {
  tj_value pid = op(g, TJ_OP_PROGRAM_ID, 0, 0, 0);
  tj_value args[3] = {iconst(g, 0), op(g, TJ_OP_MIN, pid, iconst(g, 3), 0), iconst(g, 1)},
           v0 = fconst(g, 0);
  op4(g, TJ_OP_FOR, args, 3);
  tj_value v = op(g, TJ_OP_ITER, v0, 0, 0);
  tj_value step =
      chance(g, 0.5) ? op(g, TJ_OP_REDUCE_MAX, g->tiles[pick(g, g->ntiles)], 0, 0) : g->param[RP_S];
  op(g, TJ_OP_YIELD, v, op(g, TJ_OP_ADD, v, step, 0), 0);
  op(g, TJ_OP_ENDFOR, 0, 0, 0);
  add_result(g, v);
}

/* ---- stores ------------------------------------------------------------------- */

static void stores(Gen *g) {
  tj_value a = g->tiles[pick(g, g->ntiles)], b = g->tiles[g->ntiles - 1];
  if (!g->stored_out) {
    tj_value args[4] = {g->orow, g->offs, a, g->mask};
    op4(g, TJ_OP_STORE, args, 4);
  }
  tj_value dargs[4] = {g->odrow, g->offs, cast(g, b, TJ_DTYPE), g->mask};
  op4(g, TJ_OP_STORE, dargs, 4);
  /* outs: result j at element j, one store. */
  tj_value v = konst(g, tj_tile_type(TJ_F32, TJ_CONST_BLOCK), 0);
  for (int j = 0; j < g->nresults; j++)
    v = op(g, TJ_OP_SELECT, op(g, TJ_OP_EQ, g->arange, iconst(g, j), 0), g->results[j], v);
  tj_value sargs[4] = {g->osrow, g->arange, v,
                       op(g, TJ_OP_LT, g->arange, iconst(g, g->nresults), 0)};
  op4(g, TJ_OP_STORE, sargs, 4);
}

/* ---- arguments ---------------------------------------------------------------- */

static size_t elem_size(const RandProg *rp, int i) {
  if (i == RP_OUTD || i == RP_X) return dtype_bytes(rp->options.dtype);
  return 4;
}

size_t randprog_elements(const RandProg *rp, int i) {
  return i < RP_STRIDE ? (size_t)(rp->rows * rp->stride) : 0;
}

static bool make_args(RandProg *rp, TjRng *rng, int64_t n, float s) {
  for (int i = 0; i < RP_STRIDE; i++) {
    size_t bytes = (randprog_elements(rp, i) * elem_size(rp, i) + 15) / 16 * 16;
    void *buf = aligned_alloc(16, bytes);
    if (!buf) return false;
    rp->args[i] = (tj_arg){TJ_ARG_PTR, {.ptr = buf}, bytes};
    for (size_t k = 0; k < randprog_elements(rp, i); k++) {
      if (i == RP_INDEX)
        ((int32_t *)buf)[k] = (int32_t)rng_range(rng, 0, n - 1);
      else if (i == RP_X)
        elem_set(buf, rp->options.dtype, k, 4 * rng_uniform(rng) - 2);
      else if (i == RP_F)
        ((float *)buf)[k] = (float)(4 * rng_uniform(rng) - 2);
    }
  }
  rp->args[RP_STRIDE] = (tj_arg){TJ_ARG_INT, {.i = rp->stride}, 0};
  rp->args[RP_N] = (tj_arg){TJ_ARG_INT, {.i = n}, 0};
  rp->args[RP_S] = (tj_arg){TJ_ARG_FLOAT, {.f = s}, 0};
  randprog_poison_outputs(rp);
  return true;
}

void randprog_poison_outputs(RandProg *rp) {
  for (int i = RP_OUT; i <= RP_OUTS; i++) {
    tj_dtype d = i == RP_OUTD ? rp->options.dtype : TJ_DTYPE_F32;
    for (size_t k = 0; k < randprog_elements(rp, i); k++) {
      uint32_t bits = poison_bits(d);
      memcpy((char *)rp->args[i].u.ptr + k * dtype_bytes(d), &bits, dtype_bytes(d));
    }
  }
}

/* ---- the whole program --------------------------------------------------------- */

static void choose_shape(RandProg *rp, TjRng *rng, int64_t *n, int64_t *shift, bool *loop) {
  static const tj_dtype dtypes[] = {TJ_DTYPE_F32, TJ_DTYPE_F16, TJ_DTYPE_BF16};
  int64_t block = (int64_t)1 << rng_range(rng, 0, 11);
  int warps = 1 << rng_range(rng, 0, 4);
  while (block / (32 * warps) > 32) warps *= 2;
  bool aligned = rng_uniform(rng) < 0.6;
  *loop = rng_uniform(rng) < 0.3;
  *shift = rng_uniform(rng) < 0.6 ? 0 : aligned ? 8 * rng_range(rng, 1, 2) : rng_range(rng, 1, 5);
  *n = rng_range(rng, 1, *loop ? 3 * block : block + *shift);
  int64_t need = (*n > block + *shift ? *n : block + *shift) + 16;
  rp->stride = aligned ? (need + 7) / 8 * 8 : need + rng_range(rng, 0, 3);
  rp->grid = rng_range(rng, 1, 40);
  rp->rows = rp->grid;
  memset(&rp->options, 0, sizeof rp->options);
  rp->options.block = block;
  rp->options.num_warps = warps;
  rp->options.dtype = dtypes[rng_range(rng, 0, 2)];
  rp->options.align = aligned ? 16 : 0;
}

bool randprog_make(uint64_t seed, RandProg *rp, char *why, size_t why_size) {
  memset(rp, 0, sizeof *rp);
  rp->seed = seed;
  Gen g;
  memset(&g, 0, sizeof g);
  g.ok = true;
  g.why = why;
  g.why_size = why_size;
  rng_seed(&g.rng, seed);
  int64_t n, shift;
  bool loop;
  choose_shape(rp, &g.rng, &n, &shift, &loop);
  rp->options.phased = rp->options.align == 0 && (seed & 1); /* no draw: the stream stays */
  char name[32];
  snprintf(name, sizeof name, "rand_%llu", (unsigned long long)(seed % 1000000));
  check(&g, tj_program_create(name, &g.p), "create");
  params(&g);
  rows(&g);
  loads(&g, shift, n >= rp->options.block + shift);
  gathers(&g, rp->options.block);
  int steps = (int)rng_range(&g.rng, 4, 14);
  for (int i = 0; i < steps && g.ok; i++) random_step(&g);
  if (loop && g.ok) chunk_loop(&g);
  if (g.ok && rng_uniform(&g.rng) < 0.2) uneven_loop(&g);
  if (g.ok) stores(&g);
  rp->program = g.p;
  snprintf(rp->summary, sizeof rp->summary,
           "seed %llu: BLOCK=%lld warps=%d %s align=%d%s n=%lld grid=%lld%s",
           (unsigned long long)seed, (long long)rp->options.block, rp->options.num_warps,
           dtype_label(rp->options.dtype), rp->options.align, rp->options.phased ? " phased" : "",
           (long long)n, (long long)rp->grid, loop ? " loop" : "");
  if (!g.ok) return false;
  if (!make_args(rp, &g.rng, n, (float)(rng_uniform(&g.rng) * 2 - 1))) {
    snprintf(why, why_size, "out of memory");
    return false;
  }
  return true;
}

void randprog_free(RandProg *rp) {
  for (int i = 0; i < RP_STRIDE; i++) free(rp->args[i].u.ptr);
  tj_program_destroy(rp->program);
  memset(rp, 0, sizeof *rp);
}

/* ---- comparing ---------------------------------------------------------------- */

static bool close_values(double got, double want, double scale) {
  if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
  if (isinf(want) || isinf(got)) return got == want || fabs(got - want) <= 1e-3 * scale;
  return fabs(got - want) <= 1e-3 * (1.0 + fabs(want)) + 1e-5 * scale;
}

void randprog_compare(const RandProg *rp, int i, const void *got, const void *want) {
  tj_dtype d = i == RP_OUTD ? rp->options.dtype : TJ_DTYPE_F32;
  size_t n = randprog_elements(rp, i);
  double scale = 0;
  for (size_t k = 0; k < n; k++)
    if (!is_poison(want, d, k) && isfinite(elem_get(want, d, k)))
      scale = fmax(scale, fabs(elem_get(want, d, k)));
  double tol = d == TJ_DTYPE_BF16 ? 16 : d == TJ_DTYPE_F16 ? 2 : 1;
  for (size_t k = 0; k < n; k++) {
    bool written = !is_poison(got, d, k), expected = !is_poison(want, d, k);
    ck_assert_msg(written == expected, "%s: buffer %d element %zu (row %lld col %lld) %s",
                  rp->summary, i, k, (long long)(k / (size_t)rp->stride),
                  (long long)(k % (size_t)rp->stride),
                  written ? "written, but should not be" : "not written");
    double g = elem_get(got, d, k), w = elem_get(want, d, k);
    ck_assert_msg(!expected || close_values(g, w, scale * tol) ||
                      (tol > 1 && fabs(g - w) <= 0.01 * tol * (1 + fabs(w))),
                  "%s: buffer %d element %zu (row %lld col %lld): %.9g, want %.9g", rp->summary, i,
                  k, (long long)(k / (size_t)rp->stride), (long long)(k % (size_t)rp->stride), g,
                  w);
  }
}
