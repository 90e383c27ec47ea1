/*
 * reduce.c — reductions of a tile to a scalar, level by level along the
 * geometry's chain (geometry.c), each level only where the tile spreads
 * over it. Every level has one combiner function, in the table `levels`:
 *
 *   1. within a thread: a pairwise tree over its slots (independent adds
 *      and maxes, not one long chain); a slot outside the tile (a partial
 *      repeat) contributes the identity: -inf for max, -0.0 for sum. An i32
 *      max runs on unsigned keys, x ^ 2^31, turned back at the end (ptxas
 *      miscompiles some max.s32 trees, see ptx_ops.c). max.f32
 *      ignores NaN as fmaxf does; a last max against -inf makes a thread
 *      whose elements are all NaN give -inf, as the interpreter's reduction
 *      (fmaxf starting from -inf) does, so NaN never reaches the butterfly;
 *   2. across the lanes of a group: shfl.sync.bfly.b32 with offsets G/2 ...
 *      1 (16, 8, 4, 2, 1 for whole warps), after which every lane holds the
 *      result (both partners add the same two values, so bit for bit);
 *   3. across the warps of a group (groups wider than a warp only): lane 0
 *      of each warp stores its partial in shared memory, bar.sync, and every
 *      thread reads its group's partials and combines them in the same order;
 *   4. across the CTAs of a cluster, through distributed shared memory, and
 *   5. across the CTAs (or clusters) of a group of the grid, through global
 *      memory (both in reduce_ctas.c).
 *
 * Level 1 is cg_red_slots; the others are in `levels`. A folded tile
 * (analyze.c: used only here while its operands live on) is computed slot
 * by slot inside level 1 and added into four running partials as it is
 * made, so that it never lives whole beside them. Levels 3 to 5 each
 * use two regions of their storage. A region may be written again only
 * after a barrier that follows every read of it; cg_plan_reductions walks
 * the program (loops to a fixpoint, the loop over instances included) and
 * picks for each reduction a region nobody may still be reading, adding a
 * barrier only when both might be. Softmax's max and sum alternate and need
 * none. Every thread of every CTA of an instance combines the same values in
 * the same order, so all of them hold the same result, bit for bit.
 *
 * Fused pairs. Where a round across CTAs is costly (a grid level) or a
 * tile is streamed (stream.c), the pattern
 *     m = reduce_max t;  s = reduce_sum (exp (t - m))
 * is computed in one round, as softmax's online normalizer (Milakov and
 * Gimelshein, 2018): every thread holds a pair (m, d), m the max of its
 * elements and d = sum exp(x - m), and two pairs merge into
 *     M = max(ma, mb),  D = da e^(ma - M) + db e^(mb - M)
 * with one exp (one of the two factors is 1: cg_red_combine), where a side
 * whose m is -inf (all its elements -inf or NaN, or none) adds d * 0
 * rather than d * e^(-inf - M): 0, or NaN for a NaN. A thread's own
 * d uses 0 for an all -inf max, so -inf elements add exactly 0. At the end
 * s = D, except that s is NaN where M is -inf (a row of all -inf), as the
 * unfused sum of exp(-inf - -inf) is; +inf and NaN elements make D NaN as
 * they make s.
 * Pairs are for grid splits and streamed tiles only: on an H200, inside
 * one CTA the extra exps cost more than the second bar.sync saves (rows of
 * 32768 lost 8%), and over clusters one round was no faster than two
 * (within 1.5% from 32768 to 262144, 2 to 8% slower above).
 * The sum is rounded differently from the interpreter's pairwise order, as
 * every GPU reduction is (see interp.c); the values agree within testing.md.
 *
 * Two more forms of the sum fuse, as the masked softmax writes it
 * (templates/masked_softmax.tj): s = reduce_sum (exp ((t - m') * k)), k an
 * f32 parameter, its exponent scaled after the subtraction, and m' = m or
 * the safe max select(m == -inf, 0, m). The pairs then hold d = sum
 * exp((x - m) k) and merge with e^((min - max) k); a side whose m is -inf
 * keeps its d as it is (factor 1: its d is exp(-inf k) summed, the same
 * whatever it is shifted by: 0 for k > 0, inf for k < 0, NaN for k = 0 or
 * a NaN element, as unfused), and with the safe max s = D where M is -inf
 * rather than NaN. A thread's slots past the tile (slot_value gives them
 * max's identity, -inf) add nothing to its d: their exp(-inf k) is not 0
 * for k <= 0, so its term is selected to 0 there. A kernel's pairs share
 * one form, so such a pair fuses only alone; its exps are never shifted
 * (exp_shift.c). The masked softmax's scale is positive (its runtime
 * refuses others); a program's own parameter may be anything.
 */
#include "codegen/codegen.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static bool is_reduce(const IrInst *in) {
  return in->op == TJ_OP_REDUCE_MAX || in->op == TJ_OP_REDUCE_SUM;
}

/* ---- plan ------------------------------------------------------------------- */

/* dirty: bit r set when some thread may still read region r. Planning
 * (!first) picks each site's region; a second walk (first) replays the
 * instance loop's first trip over those regions and marks the sites whose
 * barrier that trip needs too (inside or after an IR loop), so that across
 * CTAs the other sites skip theirs until the CTA's second instance. */
static void site(CgCtx *c, int inst, unsigned *dirty, bool first) {
  CgSite *s = &c->sites[inst];
  if (first) {
    if (*dirty & (1u << s->region)) s->first_too = 1;
    *dirty = 1u << s->region;
    return;
  }
  int region = !(*dirty & 1u) ? 0 : !(*dirty & 2u) ? 1 : -1;
  s->extra_barrier = region < 0;
  if (region < 0) region = 0;
  s->region = (int8_t)region;
  *dirty = 1u << region;
}

static unsigned walk(CgCtx *c, int from, int to, unsigned dirty, bool first);

/* A loop's head sees its entry and the end of any iteration. */
static unsigned loop(CgCtx *c, int from, int to, unsigned entry, bool first) {
  unsigned head = entry;
  for (int pass = 0; pass < 8; pass++) {
    unsigned merged = head | walk(c, from, to, head, first);
    if (merged == head) break;
    head = merged;
  }
  return head;
}

static unsigned walk(CgCtx *c, int from, int to, unsigned dirty, bool first) {
  if (c->streamed) { /* no loops; reductions combine phase by phase */
    for (int k = 0; k < c->nstream_order; k++)
      if (!cg_fused_sum(c, c->stream_order[k])) site(c, c->stream_order[k], &dirty, first);
    return dirty;
  }
  for (int i = from; i < to; i++) {
    const IrInst *in = &c->p->insts[i];
    if (in->op == TJ_OP_FOR) {
      int end = (int)in->iimm;
      dirty = loop(c, i + 1, end, dirty, first);
      i = end;
    } else if (is_reduce(in) && !cg_fused_sum(c, i)) {
      site(c, i, &dirty, first); /* a fused sum travels with its max, at the max's site */
    }
  }
  return dirty;
}

static int def_op(const CgCtx *c, int value) { return c->p->insts[c->p->defs[value]].op; }

/* Whether v is the f32 scalar constant `value`. */
static bool const_f32(const CgCtx *c, int v, double value) {
  const tj_program *p = c->p;
  return p->types[v].shape == TJ_SCALAR && p->types[v].elem == TJ_F32 &&
         def_op(c, v) == TJ_OP_CONST && p->insts[p->defs[v]].fimm == value;
}

/* The f32 scalar parameter among a's two operands; the other into *rest. */
static int scale_of(const CgCtx *c, const IrInst *mul, int *rest) {
  for (int k = 0; k < 2; k++) {
    int v = mul->args[k];
    if (c->p->types[v].shape == TJ_SCALAR && c->p->types[v].elem == TJ_F32 &&
        def_op(c, v) == TJ_OP_PARAM) {
      *rest = mul->args[1 - k];
      return v;
    }
  }
  return IR_NONE;
}

/* m where v is select(m == -inf, 0, m) (either order of eq), else IR_NONE. */
static int safe_max_of(const CgCtx *c, int v) {
  const IrInst *sel = &c->p->insts[c->p->defs[v]];
  if (sel->op != TJ_OP_SELECT || !const_f32(c, sel->args[1], 0.0)) return IR_NONE;
  int m = sel->args[2], q = sel->args[0];
  if (def_op(c, q) != TJ_OP_EQ) return IR_NONE;
  const IrInst *eq = &c->p->insts[c->p->defs[q]];
  bool one = eq->args[0] == m && const_f32(c, eq->args[1], -INFINITY);
  bool other = eq->args[1] == m && const_f32(c, eq->args[0], -INFINITY);
  return one || other ? m : IR_NONE;
}

/* The reduce_max that reduce_sum `inst` fuses with, or -1; its form (the
 * scale parameter or IR_NONE, and whether the max is the safe one). */
static int fusable_max(const CgCtx *c, int inst, int *scale, bool *safe) {
  const tj_program *p = c->p;
  int e = p->insts[inst].args[0];
  *scale = IR_NONE;
  *safe = false;
  if (p->types[e].elem != TJ_F32 || def_op(c, e) != TJ_OP_EXP) return -1;
  const IrInst *exp = &p->insts[p->defs[e]];
  int u = exp->args[0];
  if (def_op(c, u) == TJ_OP_MUL && (*scale = scale_of(c, &p->insts[p->defs[u]], &u)) == IR_NONE)
    return -1;
  if (def_op(c, u) != TJ_OP_SUB) return -1;
  const IrInst *sub = &p->insts[p->defs[u]];
  int t = sub->args[0], m = sub->args[1];
  if (p->types[m].shape != TJ_SCALAR) return -1;
  if (def_op(c, m) == TJ_OP_SELECT && (m = safe_max_of(c, m)) == IR_NONE) return -1;
  *safe = m != sub->args[1];
  if (def_op(c, m) != TJ_OP_REDUCE_MAX) return -1;
  int max = p->defs[m];
  if (p->insts[max].args[0] != t || p->scopes[m] != p->scopes[p->insts[inst].result]) return -1;
  if (*scale != IR_NONE && p->defs[*scale] > max) return -1; /* lowered before the max */
  return max;
}

bool cg_fused_sum(const CgCtx *c, int inst) {
  return c->partner[inst] >= 0 && c->partner[inst] < inst;
}

/* Pairs a reduce_sum with its reduce_max where a round is costly. */
tj_status cg_find_pairs(CgCtx *c) {
  if (!c->partner)
    c->partner = cg_arena_alloc(&c->arena, sizeof *c->partner * ((size_t)c->p->ninsts + 1));
  if (!c->partner) return cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  c->pairs = false;
  c->pair_scale = IR_NONE;
  c->pair_safe = false;
  for (int i = 0; i < c->p->ninsts; i++) c->partner[i] = -1;
  if (c->geo.split == 1 && !c->streamed) return TJ_OK; /* CTAs and clusters meet cheaply: two rounds */
  int found = 0, scale;
  bool safe;
  for (int i = 0; i < c->p->ninsts; i++)
    found += c->p->insts[i].op == TJ_OP_REDUCE_SUM && fusable_max(c, i, &scale, &safe) >= 0;
  for (int i = 0; i < c->p->ninsts; i++) {
    if (c->p->insts[i].op != TJ_OP_REDUCE_SUM) continue;
    int max = fusable_max(c, i, &scale, &safe);
    if (max < 0 || c->partner[max] >= 0) continue;
    if ((scale != IR_NONE || safe) && found > 1) continue; /* one form a kernel */
    c->pair_scale = scale;
    c->pair_safe = safe;
    c->partner[max] = i;
    c->partner[i] = max;
    c->pairs = true;
  }
  return TJ_OK;
}

/* Levels across CTAs (CLUSTER or SPLIT > 1) in a program without loops of
 * its own, whose instances each take an odd number of rounds R: the
 * rounds' regions alternate inside an instance, so the first round of the
 * next would reuse the region of the last, which another CTA may still be
 * reading, and would need a barrier of the level's own first (the
 * planner's extra barrier, from the second instance on). Instead those
 * levels' regions flip with the instance's parity (geometry.c keeps it):
 * every round then uses the other region than the round before it, and the
 * region it reuses was last read two rounds ago, before the barrier of
 * the round in between, which this CTA has passed. The CTAs of a group
 * run the same instances, so they agree on the parity. A grid barrier per
 * instance fewer: measured on an H100 (bench/RESULTS.md, 2026-11-25); a
 * cluster barrier per instance fewer for a staged row's one round. */
static bool flip_ctas(const CgCtx *c) {
  if (!cg_multi_cta(c) || cg_has_loop(c->p)) return false;
  int rounds = 0;
  for (int i = 0; i < c->p->ninsts; i++)
    rounds += is_reduce(&c->p->insts[i]) && !cg_fused_sum(c, i);
  return rounds % 2 == 1;
}

tj_status cg_plan_reductions(CgCtx *c) {
  size_t n = (size_t)c->p->ninsts + 1;
  c->sites = cg_arena_alloc(&c->arena, sizeof *c->sites * n);
  if (!c->sites) return cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  if (!c->partner && cg_find_pairs(c) != TJ_OK) return c->status;
  if (c->streamed) {
    if (!(c->stream_order = cg_arena_alloc(&c->arena, sizeof *c->stream_order * n)))
      return cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
    c->nstream_order = cg_stream_order(c, c->stream_order);
  }
  if (cg_level_used(c, CG_LEVEL_WARP) || cg_multi_cta(c)) {
    memset(c->sites, 0, sizeof *c->sites * n);
    loop(c, 0, c->p->ninsts, 0, false);
    walk(c, 0, c->p->ninsts, 0, true);
  }
  c->flip_ctas = flip_ctas(c);
  return TJ_OK;
}

/* ---- values and their combination --------------------------------------------- */

static CgOperand f32_imm(uint32_t bits) { return cg_imm(CG_F32, bits); }
#define NEG_INF 0xFF800000u
#define NAN_F32 0x7FFFFFFFu

CgRed cg_red_identity(tj_op op, tj_elem elem, bool pair) {
  CgRed r = {op, elem, pair, cg_identity(op, elem), f32_imm(0)};
  return r;
}

/* e^(a - b), or e^((a - b) k) with the pairs' scale k, as the program's
 * sub, mul and exp do (ptx_ops.c). */
static CgOperand exp_diff(CgCtx *c, CgOperand a, CgOperand b) {
  CgOperand args[2] = {a, b};
  CgOperand diff = cg_apply(c, TJ_OP_SUB, TJ_F32, args, 2);
  if (c->pair_scale != IR_NONE) {
    CgOperand by[2] = {diff, c->vals[c->pair_scale].op};
    diff = cg_apply(c, TJ_OP_MUL, TJ_F32, by, 2);
  }
  return cg_apply(c, TJ_OP_EXP, TJ_F32, &diff, 1);
}

/* The pairs' merge with one exp: the side of the larger m (a's on a tie)
 * keeps its d; the other's is scaled by e = e^(min - max), and by 0 where
 * that min is -inf (its d is then 0, or NaN when the side's only
 * finite-looking element was a NaN, which max ignores, and the NaN must
 * survive; by 1 in the scaled and safe forms, whose d there may be
 * inf). The same sum as scaling both sides (e^0 is 1), so the same bits
 * for finite m, and NaN where a side's m is +inf, whose d is NaN. Scaling
 * both took an exp more a merge (bench/RESULTS.md, FF5). */
static bool plain_pairs(const CgCtx *c) { return c->pair_scale == IR_NONE && !c->pair_safe; }

CgRed cg_red_combine(CgCtx *c, CgRed a, CgRed b) {
  CgRed r = a;
  r.x = cg_combine(c, a.op, a.elem, a.x, b.x);
  if (!a.pair) return r;
  CgEmit *e = &c->em;
  CgOperand low = cg_reg(e, CG_F32), empty = cg_reg(e, CG_PRED), first = cg_reg(e, CG_PRED);
  CgOperand scale = cg_reg(e, CG_F32), keep = cg_reg(e, CG_F32), other = cg_reg(e, CG_F32);
  CgOperand scaled = cg_reg(e, CG_F32);
  cg_line(e, "min.f32 %s, %s, %s;", CG_N(low), CG_N(a.x), CG_N(b.x));
  CgOperand ex = exp_diff(c, low, r.x);
  cg_line(e, "setp.eq.f32 %s, %s, 0fFF800000;", CG_N(empty), CG_N(low));
  cg_line(e, "selp.f32 %s, %s, %s, %s;", CG_N(scale), plain_pairs(c) ? "0f00000000" : "0f3F800000",
          CG_N(ex), CG_N(empty));
  cg_line(e, "setp.ge.f32 %s, %s, %s;", CG_N(first), CG_N(a.x), CG_N(b.x));
  cg_line(e, "selp.f32 %s, %s, %s, %s;", CG_N(keep), CG_N(a.d), CG_N(b.d), CG_N(first));
  cg_line(e, "selp.f32 %s, %s, %s, %s;", CG_N(other), CG_N(b.d), CG_N(a.d), CG_N(first));
  cg_line(e, "mul.rn.f32 %s, %s, %s;", CG_N(scaled), CG_N(other), CG_N(scale));
  r.d = cg_reg(e, CG_F32);
  cg_line(e, "add.f32 %s, %s, %s;", CG_N(r.d), CG_N(keep), CG_N(scaled));
  return r;
}

/* Combines n values pairwise, level by level, into v[0]. */
CgRed cg_red_tree(CgCtx *c, CgRed *v, int n) {
  while (n > 1) {
    int half = n / 2;
    for (int i = 0; i < half; i++) v[i] = cg_red_combine(c, v[2 * i], v[2 * i + 1]);
    if (n % 2) v[half] = v[n - 1];
    n = half + n % 2;
  }
  return v[0];
}

CgOperand cg_reduce_tree(CgCtx *c, tj_op op, tj_elem elem, CgOperand *v, int n) {
  while (n > 1) {
    int half = n / 2;
    for (int i = 0; i < half; i++) v[i] = cg_combine(c, op, elem, v[2 * i], v[2 * i + 1]);
    if (n % 2) v[half] = v[n - 1];
    n = half + n % 2;
  }
  return v[0];
}

/* ---- level 1: a thread's own slots ---------------------------------------------- */

bool cg_folded(const CgCtx *c, int value) { return c->facts.fold[value] && !c->streamed; }

/* Whether a slot holds an element of the tile: true, or its guard. */
static CgOperand slot_guard(CgCtx *c, int tile, int slot) {
  CgLayout *l = cg_layout_of(c, tile);
  if (!l->dynamic && slot / l->vec != l->partial) return cg_true();
  return l->dynamic ? l->rep_guard[slot / l->vec] : l->slot_ok;
}

/* The thread's value of `tile` at `slot` (computed here where the tile is
 * folded), the identity where the slot is outside the tile; i32 maxes as
 * keys. */
static CgOperand slot_value(CgCtx *c, tj_op op, int tile, int slot) {
  tj_elem elem = cg_elem_of(c, tile);
  CgOperand v = cg_folded(c, tile) ? cg_apply_at(c, &c->p->insts[c->p->defs[tile]], slot)
                                   : cg_slot(c, tile, slot);
  if (op == TJ_OP_REDUCE_MAX && elem == TJ_I32) v = cg_int_key(c, v);
  CgOperand ok = slot_guard(c, tile, slot);
  if (cg_is_true(ok)) return v;
  CgOperand d = cg_reg_of(c, elem);
  cg_line(&c->em, "selp.%s %s, %s, %s, %s;", elem == TJ_F32 ? "f32" : "b32", CG_N(d), CG_N(v),
          CG_N(cg_identity(op, elem)), CG_N(ok));
  return d;
}

static CgOperand *slot_values(CgCtx *c, tj_op op, int tile, int first, int count) {
  CgOperand *v = cg_new_slots(c, count);
  for (int k = 0; v && k < count; k++) v[k] = slot_value(c, op, tile, first + k);
  return v;
}

/* Values combined as they are made, into four running partials taken in
 * turn and then combined with each other: only the four live at once,
 * besides what the program keeps. */
typedef struct Running {
  tj_op op;
  tj_elem elem;
  int count;
  CgOperand part[4];
} Running;

static void running_add(CgCtx *c, Running *r, CgOperand v) {
  int k = r->count++;
  r->part[k % 4] = k < 4 ? v : cg_combine(c, r->op, r->elem, r->part[k % 4], v);
}

static CgOperand running_total(CgCtx *c, Running *r) {
  return cg_reduce_tree(c, r->op, r->elem, r->part, r->count < 4 ? r->count : 4);
}

/* sum exp(v[k] - top), running: the values stay live for the program's
 * later use of them. With `tile`, the scaled and safe forms' slots past
 * the tile add 0 (slot_guard from `first` on). */
static CgOperand exact_sum(CgCtx *c, const CgOperand *v, int count, CgOperand top, int tile,
                           int first) {
  Running x = {TJ_OP_REDUCE_SUM, TJ_F32, 0, {{0}}};
  for (int k = 0; k < count; k++) {
    CgOperand term = exp_diff(c, v[k], top);
    CgOperand ok = tile == IR_NONE ? cg_true() : slot_guard(c, tile, first + k);
    if (!cg_is_true(ok)) {
      CgOperand t = cg_reg(&c->em, CG_F32);
      cg_line(&c->em, "selp.f32 %s, %s, 0f00000000, %s;", CG_N(t), CG_N(term), CG_N(ok));
      term = t;
    }
    running_add(c, &x, term);
  }
  return running_total(c, &x);
}

/* The same, shifted (exp_shift.c) where top allows, its bias taken out of
 * the sum, so the pair holds the true sum. */

static CgOperand sum_exps(CgCtx *c, const CgOperand *v, int count, CgOperand top, bool shift) {
  if (!shift) return exact_sum(c, v, count, top, IR_NONE, 0);
  CgShift s = cg_shift_begin(c, top);
  CgOperand d = cg_reg(&c->em, CG_F32);
  int label = cg_shift_branch(c, &s, false, ""); /* top: the thread's own */
  Running r = {TJ_OP_REDUCE_SUM, TJ_F32, 0, {{0}}};
  for (int k = 0; k < count; k++) running_add(c, &r, cg_shift_exp(c, &s, v[k]));
  cg_line(&c->em, "mul.rn.f32 %s, %s, %s;", CG_N(d), CG_N(running_total(c, &r)), CG_N(s.bias));
  cg_shift_else(c, label, "");
  cg_mov(c, d, exact_sum(c, v, count, top, IR_NONE, 0));
  cg_shift_end(c, label, "");
  return d;
}

CgRed cg_red_slots(CgCtx *c, int inst, int first, int count) {
  const IrInst *in = &c->p->insts[inst];
  tj_op op = (tj_op)in->op;
  tj_elem elem = cg_elem_of(c, in->args[0]);
  CgRed r = cg_red_identity(op, elem, c->partner[inst] >= 0);
  if (cg_folded(c, in->args[0]) && !r.pair && count > 0) { /* a pair's tile has a second use */
    Running run = {op, elem, 0, {{0}}};
    for (int k = 0; k < count; k++) running_add(c, &run, slot_value(c, op, in->args[0], first + k));
    r.x = running_total(c, &run);
    if (op == TJ_OP_REDUCE_MAX && elem == TJ_F32)
      r.x = cg_combine(c, TJ_OP_REDUCE_MAX, elem, r.x, cg_identity(TJ_OP_REDUCE_MAX, elem));
    return r;
  }
  CgOperand *v = slot_values(c, op, in->args[0], first, count);
  if (!v) return r;
  CgOperand *kept = r.pair ? cg_new_slots(c, count) : v;
  if (!kept) return r;
  if (r.pair) memcpy(kept, v, sizeof *v * (size_t)count);
  r.x = cg_reduce_tree(c, op, elem, v, count);
  if (op == TJ_OP_REDUCE_MAX && elem == TJ_F32)
    r.x = cg_combine(c, TJ_OP_REDUCE_MAX, elem, r.x, cg_identity(TJ_OP_REDUCE_MAX, elem));
  if (!r.pair) return r;
  CgOperand safe = cg_reg(&c->em, CG_F32), empty = cg_reg(&c->em, CG_PRED);
  cg_line(&c->em, "setp.eq.f32 %s, %s, 0fFF800000;", CG_N(empty), CG_N(r.x));
  cg_line(&c->em, "selp.f32 %s, 0f00000000, %s, %s;", CG_N(safe), CG_N(r.x), CG_N(empty));
  if (plain_pairs(c))
    r.d = sum_exps(c, kept, count, safe, cg_shift_applies(c, in->args[0]));
  else
    r.d = exact_sum(c, kept, count, safe, in->args[0], first);
  return r;
}

/* ---- storage of partials ---------------------------------------------------------- */

static const char *type_of(tj_elem elem) { return elem == TJ_F32 ? "f32" : "b32"; }

int cg_red_slot_bytes(const CgCtx *c) { return c->pairs ? 8 : 4; }

int cg_red_value_bytes(CgRed r) { return r.pair ? 8 : 4; }

/* With `bar`, the store is st.async into another CTA's shared memory (space
 * "shared::cluster"), which completes that many bytes of the transaction
 * of the mbarrier at `bar` (a shared::cluster address in the same CTA). */
void cg_red_store(CgCtx *c, const char *space, CgOperand pred, CgOperand address, int at,
                  CgRed r, const CgOperand *bar) {
  char op[80], tail[48] = "";
  snprintf(op, sizeof op, "st.%s%s", bar ? "async." : "", space);
  if (bar) {
    snprintf(op + strlen(op), sizeof op - strlen(op), ".mbarrier::complete_tx::bytes");
    snprintf(tail, sizeof tail, ", [%s]", CG_N(*bar));
  }
  r.x = cg_in_reg(c, r.x);
  if (!r.pair) {
    cg_line(&c->em, "@%s %s.%s %s, %s%s;", CG_N(pred), op, type_of(r.elem),
            cg_address(address, at).s, CG_N(r.x), tail);
    return;
  }
  r.d = cg_in_reg(c, r.d);
  cg_line(&c->em, "@%s %s.v2.f32 %s, {%s, %s}%s;", CG_N(pred), op, cg_address(address, at).s,
          CG_N(r.x), CG_N(r.d), tail);
}

/* n values from slots `stride` bytes apart at address + at: where the slots
 * are packed (4 bytes a scalar, 8 a pair), scalars four at a time and pairs
 * two at a time; else one by one (a scalar among a kernel's pairs sits in
 * an 8-byte slot: loaded four words at a time, it read two partials and two
 * stale words). */
void cg_red_load(CgCtx *c, const char *space, CgOperand address, int at, int stride, CgRed like,
                 CgRed *v, int n) {
  bool packed = stride == (like.pair ? 8 : 4);
  int per = !packed ? 1 : like.pair ? 2 : 4;
  for (int k = 0; k < n;) {
    int m = n - k >= per ? per : packed && n - k >= 2 && !like.pair ? 2 : 1;
    char list[160] = "";
    for (int i = 0; i < m; i++) {
      v[k + i] = like;
      v[k + i].x = cg_reg_of(c, like.elem);
      if (like.pair) v[k + i].d = cg_reg(&c->em, CG_F32);
      size_t len = strlen(list);
      if (like.pair)
        snprintf(list + len, sizeof list - len, "%s%s, %s", i ? ", " : "", CG_N(v[k + i].x),
                 CG_N(v[k + i].d));
      else
        snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", CG_N(v[k + i].x));
    }
    int words = like.pair ? 2 * m : m;
    if (words == 1)
      cg_line(&c->em, "ld.%s.%s %s, %s;", space, type_of(like.elem), list,
              cg_address(address, at + stride * k).s);
    else
      cg_line(&c->em, "ld.%s.v%d.%s {%s}, %s;", space, words, type_of(like.elem), list,
              cg_address(address, at + stride * k).s);
    k += m;
  }
}

/* ---- the levels --------------------------------------------------------------- */

/* A butterfly over `lanes` lanes (a power of two up to 32). */
CgRed cg_red_butterfly(CgCtx *c, CgRed r, int lanes) {
  for (int offset = lanes / 2; offset >= 1; offset /= 2) {
    CgRed t = r;
    r.x = cg_in_reg(c, r.x);
    t.x = cg_reg_of(c, r.elem);
    cg_line(&c->em, "shfl.sync.bfly.b32 %s, %s, %d, 31, -1;", CG_N(t.x), CG_N(r.x), offset);
    if (r.pair) {
      r.d = cg_in_reg(c, r.d);
      t.d = cg_reg(&c->em, CG_F32);
      cg_line(&c->em, "shfl.sync.bfly.b32 %s, %s, %d, 31, -1;", CG_N(t.d), CG_N(r.d), offset);
    }
    r = cg_red_combine(c, r, t);
  }
  return r;
}

/* Where `reader` holds, the partial at address + at, else the identity. */
static CgRed load_partial(CgCtx *c, const char *space, CgOperand reader, CgOperand address,
                          int at, CgRed like) {
  CgRed y = cg_red_identity(like.op, like.elem, like.pair);
  y.x = cg_reg_of(c, like.elem);
  cg_mov(c, y.x, cg_identity(like.op, like.elem));
  if (like.pair) {
    y.d = cg_reg(&c->em, CG_F32);
    cg_mov(c, y.d, cg_imm(CG_F32, 0));
    cg_line(&c->em, "@%s ld.%s.v2.f32 {%s, %s}, %s;", CG_N(reader), space, CG_N(y.x), CG_N(y.d),
            cg_address(address, at).s);
  } else {
    cg_line(&c->em, "@%s ld.%s.%s %s, %s;", CG_N(reader), space, type_of(like.elem), CG_N(y.x),
            cg_address(address, at).s);
  }
  return y;
}

/* One partial per lane, combined by a butterfly over `lanes` (a power of
 * two up to 32): where `reader` holds, the lane loads the partial at
 * address + at (the caller makes address from tid % lanes), elsewhere it
 * takes the identity. Every group of `lanes` lanes reads the same partials
 * into the same positions, so all lanes end with the same value, bit for
 * bit, in one register however many partials there are. */
CgRed cg_red_gather(CgCtx *c, const char *space, CgOperand reader, CgOperand address, int at,
                    CgRed like, int lanes) {
  return cg_red_butterfly(c, load_partial(c, space, reader, address, at, like), lanes);
}

/* More partials than threads: thread t combines partials t, t + threads,
 * t + 2 threads ... (those below `parts`) in that order, partial t at
 * address + at and consecutive partials `stride` bytes apart (so a
 * thread's are threads * stride apart), then a butterfly over its warp;
 * the caller's round through the warps follows where the CTA has more. */
CgRed cg_red_gather_strided(CgCtx *c, const char *space, CgOperand tid, int parts, int threads,
                            CgOperand address, int at, int stride, CgRed like) {
  CgRed y = like;
  for (int k = 0; k * threads < parts; k++) {
    CgOperand reader = cg_reg(&c->em, CG_PRED);
    cg_line(&c->em, "setp.lt.u32 %s, %s, %d;", CG_N(reader), CG_N(tid), parts - k * threads);
    CgRed v = load_partial(c, space, reader, address, at + k * threads * stride, like);
    y = k ? cg_red_combine(c, y, v) : v;
  }
  return cg_red_butterfly(c, y, 32);
}

/* Lanes: a butterfly over the lanes of a group, or of each warp. */
static CgRed across_lanes(CgCtx *c, int inst, CgRed r) {
  (void)inst;
  return cg_red_butterfly(c, r, c->geo.group < 32 ? c->geo.group : 32);
}

/* Lane 0 of each warp stores its partial, bar.sync, every thread reads its
 * group's partials and combines them in order. */
CgRed cg_red_warps_round(CgCtx *c, int inst, CgRed r) {
  const CgShared *sh = &c->shared;
  int warps = c->geo.group / 32, at = c->sites[inst].region * sh->warp_region;
  CgRed v[32];
  cg_red_store(c, "shared", sh->lane0, sh->write, at, r, NULL);
  cg_line(&c->em, "bar.sync 0;");
  cg_red_load(c, "shared", sh->read, at, cg_red_slot_bytes(c), r, v, warps);
  return cg_red_tree(c, v, warps);
}

/* Warps: the round above, after a barrier when both regions may be read. */
static CgRed across_warps(CgCtx *c, int inst, CgRed r) {
  if (c->sites[inst].extra_barrier) cg_line(&c->em, "bar.sync 0;");
  return cg_red_warps_round(c, inst, r);
}

typedef CgRed (*CombineLevel)(CgCtx *c, int inst, CgRed r);

static const struct {
  CgLevel level;
  CombineLevel combine;
} levels[] = {
    {CG_LEVEL_LANE, across_lanes},
    {CG_LEVEL_WARP, across_warps},
    {CG_LEVEL_CLUSTER, cg_across_cluster},
    {CG_LEVEL_GRID, cg_across_grid},
};
_Static_assert(TJ_COUNTOF(levels) == CG_LEVEL_COUNT, "one combiner per level");

bool cg_level_used(const CgCtx *c, CgLevel level) {
  switch (level) {
  case CG_LEVEL_LANE: return true;
  case CG_LEVEL_WARP: return c->geo.group > 32;
  case CG_LEVEL_CLUSTER: return c->geo.cluster > 1;
  case CG_LEVEL_GRID: return c->geo.split > 1;
  case CG_LEVEL_COUNT: break;
  }
  return false;
}

/* ---- prologue ----------------------------------------------------------------- */

/* Shared-memory addresses of cross-warp reductions: where this warp writes
 * its partial, and where its group's partials start. */
static bool has_reduction(const CgCtx *c) {
  for (int i = 0; i < c->p->ninsts; i++)
    if (is_reduce(&c->p->insts[i])) return true;
  return false;
}

static void warp_addresses(CgCtx *c) {
  const CgGeometry *g = &c->geo;
  CgShared *sh = &c->shared;
  CgEmit *e = &c->em;
  int slot = cg_red_slot_bytes(c);
  CgOperand base = cg_reg(e, CG_B32), lane = cg_reg(e, CG_B32);
  sh->warp_region = ((g->warps * slot) + 15) / 16 * 16;
  sh->bytes = 2 * sh->warp_region;
  cg_line(e, "mov.u32 %s, tj_smem;", CG_N(base));
  cg_line(e, "and.b32 %s, %s, 31;", CG_N(lane), CG_N(g->tid));
  sh->lane0 = cg_reg(e, CG_PRED);
  cg_line(e, "setp.eq.u32 %s, %s, 0;", CG_N(sh->lane0), CG_N(lane));
  CgOperand warp = cg_reg(e, CG_B32);
  cg_line(e, "shr.u32 %s, %s, %d;", CG_N(warp), CG_N(g->tid), 5 - cg_log2(slot));
  cg_line(e, "and.b32 %s, %s, %d;", CG_N(warp), CG_N(warp), -slot);
  sh->write = cg_reg(e, CG_B32);
  cg_line(e, "add.s32 %s, %s, %s;", CG_N(sh->write), CG_N(base), CG_N(warp));
  sh->read = base;
  if (g->programs == 1) return;
  CgOperand offset = cg_reg(e, CG_B32);
  sh->read = cg_reg(e, CG_B32);
  cg_line(e, "shl.b32 %s, %s, %d;", CG_N(offset), CG_N(g->group_index),
          cg_log2(g->group / 32) + cg_log2(slot));
  cg_line(e, "add.s32 %s, %s, %s;", CG_N(sh->read), CG_N(base), CG_N(offset));
}

void cg_reduce_prologue(CgCtx *c) {
  if (!has_reduction(c)) return;
  if (cg_level_used(c, CG_LEVEL_WARP)) warp_addresses(c);
  if (cg_level_used(c, CG_LEVEL_CLUSTER)) cg_cluster_prologue(c);
  if (cg_level_used(c, CG_LEVEL_GRID)) cg_grid_prologue(c);
}

/* ---- lowering ------------------------------------------------------------------ */

CgRed cg_red_levels(CgCtx *c, int inst, CgRed r) {
  for (size_t i = 0; i < TJ_COUNTOF(levels); i++)
    if (cg_level_used(c, levels[i].level)) r = levels[i].combine(c, inst, r);
  return r;
}

void cg_red_finish(CgCtx *c, int inst, CgRed r) {
  const IrInst *in = &c->p->insts[inst];
  if (in->op == TJ_OP_REDUCE_MAX && r.elem == TJ_I32) r.x = cg_int_key(c, r.x);
  c->vals[in->result].op = r.x;
  if (!r.pair) return;
  if (c->pair_safe) { /* the sum of exp(-inf k) where M is -inf, as the pairs hold it */
    c->vals[c->p->insts[c->partner[inst]].result].op = r.d;
    return;
  }
  CgOperand empty = cg_reg(&c->em, CG_PRED), s = cg_reg(&c->em, CG_F32);
  cg_line(&c->em, "setp.eq.f32 %s, %s, 0fFF800000;", CG_N(empty), CG_N(r.x));
  cg_line(&c->em, "selp.f32 %s, %s, %s, %s;", CG_N(s), CG_N(f32_imm(NAN_F32)), CG_N(r.d),
          CG_N(empty));
  c->vals[c->p->insts[c->partner[inst]].result].op = s;
}

void cg_lower_reduce(CgCtx *c, int inst) {
  if (cg_fused_sum(c, inst)) return; /* its max computed it */
  CgLayout *l = cg_layout_of(c, c->p->insts[inst].args[0]);
  CgRed r = cg_red_slots(c, inst, 0, l->slots);
  cg_red_finish(c, inst, cg_red_levels(c, inst, r));
}
