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
 * Level 1 is within_thread; the others are in `levels`. Levels 3 to 5 each
 * use two regions of their storage. A region may be written again only
 * after a barrier that follows every read of it; cg_plan_barriers walks the
 * program (loops to a fixpoint, the loop over instances included) and picks
 * for each reduction a region nobody may still be reading, adding a barrier
 * only when both might be. Softmax's max and sum alternate and need none.
 * Every thread of every CTA of an instance combines the same values in the
 * same order, so all of them hold the same result, bit for bit.
 */
#include "codegen/codegen.h"

#include <stdio.h>
#include <string.h>

static bool is_reduce(const IrInst *in) {
  return in->op == TJ_OP_REDUCE_MAX || in->op == TJ_OP_REDUCE_SUM;
}

/* ---- plan ------------------------------------------------------------------- */

/* dirty: bit r set when some thread may still read region r. */
static void site(CgCtx *c, int inst, unsigned *dirty) {
  int region = !(*dirty & 1u) ? 0 : !(*dirty & 2u) ? 1 : -1;
  c->sites[inst].extra_barrier = region < 0;
  if (region < 0) region = 0;
  c->sites[inst].region = (int8_t)region;
  *dirty = 1u << region;
}

static unsigned walk(CgCtx *c, int from, int to, unsigned dirty);

/* A loop's head sees its entry and the end of any iteration. */
static unsigned loop(CgCtx *c, int from, int to, unsigned entry) {
  unsigned head = entry;
  for (int pass = 0; pass < 8; pass++) {
    unsigned merged = head | walk(c, from, to, head);
    if (merged == head) break;
    head = merged;
  }
  return head;
}

static unsigned walk(CgCtx *c, int from, int to, unsigned dirty) {
  for (int i = from; i < to; i++) {
    const IrInst *in = &c->p->insts[i];
    if (in->op == TJ_OP_FOR) {
      int end = (int)in->iimm;
      dirty = loop(c, i + 1, end, dirty);
      i = end;
    } else if (is_reduce(in)) {
      site(c, i, &dirty);
    }
  }
  return dirty;
}

tj_status cg_plan_barriers(CgCtx *c) {
  c->sites = cg_arena_alloc(&c->arena, sizeof *c->sites * ((size_t)c->p->ninsts + 1));
  if (!c->sites) return cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  if (cg_level_used(c, CG_LEVEL_WARP) || cg_multi_cta(c)) loop(c, 0, c->p->ninsts, 0);
  return TJ_OK;
}

/* ---- lowering ---------------------------------------------------------------- */

/* Combines n values pairwise, level by level, into v[0]. */
CgOperand cg_reduce_tree(CgCtx *c, tj_op op, tj_elem elem, CgOperand *v, int n) {
  while (n > 1) {
    int half = n / 2;
    for (int i = 0; i < half; i++) v[i] = cg_combine(c, op, elem, v[2 * i], v[2 * i + 1]);
    if (n % 2) v[half] = v[n - 1];
    n = half + n % 2;
  }
  return v[0];
}

static CgOperand within_thread(CgCtx *c, const IrInst *in, tj_elem elem) {
  CgLayout *l = cg_layout_of(c, in->args[0]);
  CgOperand *v = cg_new_slots(c, l->slots);
  if (!v) return cg_imm(CG_B32, 0);
  bool keys = in->op == TJ_OP_REDUCE_MAX && elem == TJ_I32;
  for (int k = 0; k < l->slots; k++) {
    v[k] = cg_slot(c, in->args[0], k);
    if (keys) v[k] = cg_int_key(c, v[k]);
    if (k / l->vec != l->partial) continue;
    CgOperand d = cg_reg_of(c, elem);
    cg_line(&c->em, "selp.%s %s, %s, %s, %s;", elem == TJ_F32 ? "f32" : "b32", CG_N(d), CG_N(v[k]),
            CG_N(cg_identity((tj_op)in->op, elem)), CG_N(l->slot_ok));
    v[k] = d;
  }
  CgOperand x = cg_reduce_tree(c, (tj_op)in->op, elem, v, l->slots);
  if (in->op == TJ_OP_REDUCE_MAX && elem == TJ_F32)
    x = cg_combine(c, TJ_OP_REDUCE_MAX, elem, x, cg_identity(TJ_OP_REDUCE_MAX, elem));
  return x;
}

/* ---- the levels --------------------------------------------------------------- */

/* A butterfly over `lanes` lanes (a power of two up to 32). */
CgOperand cg_butterfly(CgCtx *c, tj_op op, tj_elem elem, CgOperand x, int lanes) {
  for (int offset = lanes / 2; offset >= 1; offset /= 2) {
    x = cg_in_reg(c, x);
    CgOperand t = cg_reg_of(c, elem);
    cg_line(&c->em, "shfl.sync.bfly.b32 %s, %s, %d, 31, -1;", CG_N(t), CG_N(x), offset);
    x = cg_combine(c, op, elem, x, t);
  }
  return x;
}

/* Lanes: a butterfly over the lanes of a group, or of each warp. */
static CgOperand across_lanes(CgCtx *c, int inst, tj_elem elem, CgOperand x) {
  int lanes = c->geo.group < 32 ? c->geo.group : 32;
  return cg_butterfly(c, (tj_op)c->p->insts[inst].op, elem, x, lanes);
}

/* Lane 0 of each warp stores its partial, bar.sync, every thread reads its
 * group's partials (4 at a time) and combines them in order. */
CgOperand cg_warps_round(CgCtx *c, int inst, tj_elem elem, CgOperand x) {
  const CgSite *s = &c->sites[inst];
  const CgShared *sh = &c->shared;
  int warps = c->geo.group / 32, at = s->region * sh->warp_region;
  const char *type = elem == TJ_F32 ? "f32" : "b32";
  CgOperand v[32];
  x = cg_in_reg(c, x);
  cg_line(&c->em, "@%s st.shared.%s %s, %s;", CG_N(sh->lane0), type, cg_address(sh->write, at).s,
          CG_N(x));
  cg_line(&c->em, "bar.sync 0;");
  for (int w = 0; w < warps;) {
    int n = warps - w >= 4 ? 4 : warps - w >= 2 ? 2 : 1;
    char list[128] = "";
    for (int i = 0; i < n; i++) {
      v[w + i] = cg_reg_of(c, elem);
      size_t len = strlen(list);
      snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", CG_N(v[w + i]));
    }
    if (n == 1)
      cg_line(&c->em, "ld.shared.%s %s, %s;", type, list, cg_address(sh->read, at + 4 * w).s);
    else
      cg_line(&c->em, "ld.shared.v%d.%s {%s}, %s;", n, type, list,
              cg_address(sh->read, at + 4 * w).s);
    w += n;
  }
  return cg_reduce_tree(c, (tj_op)c->p->insts[inst].op, elem, v, warps);
}

/* Warps: the round above, after a barrier when both regions may be read. */
static CgOperand across_warps(CgCtx *c, int inst, tj_elem elem, CgOperand x) {
  if (c->sites[inst].extra_barrier) cg_line(&c->em, "bar.sync 0;");
  return cg_warps_round(c, inst, elem, x);
}

typedef CgOperand (*CombineLevel)(CgCtx *c, int inst, tj_elem elem, CgOperand x);

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
  CgOperand base = cg_reg(e, CG_B32), lane = cg_reg(e, CG_B32);
  sh->warp_region = ((g->warps * 4) + 15) / 16 * 16;
  sh->bytes = 2 * sh->warp_region;
  cg_line(e, "mov.u32 %s, tj_smem;", CG_N(base));
  cg_line(e, "and.b32 %s, %s, 31;", CG_N(lane), CG_N(g->tid));
  sh->lane0 = cg_reg(e, CG_PRED);
  cg_line(e, "setp.eq.u32 %s, %s, 0;", CG_N(sh->lane0), CG_N(lane));
  CgOperand warp = cg_reg(e, CG_B32);
  cg_line(e, "shr.u32 %s, %s, 3;", CG_N(warp), CG_N(g->tid));
  cg_line(e, "and.b32 %s, %s, -4;", CG_N(warp), CG_N(warp));
  sh->write = cg_reg(e, CG_B32);
  cg_line(e, "add.s32 %s, %s, %s;", CG_N(sh->write), CG_N(base), CG_N(warp));
  sh->read = base;
  if (g->programs == 1) return;
  CgOperand offset = cg_reg(e, CG_B32);
  sh->read = cg_reg(e, CG_B32);
  cg_line(e, "shl.b32 %s, %s, %d;", CG_N(offset), CG_N(g->group_index),
          cg_log2(g->group / 32) + 2);
  cg_line(e, "add.s32 %s, %s, %s;", CG_N(sh->read), CG_N(base), CG_N(offset));
}

void cg_reduce_prologue(CgCtx *c) {
  if (!has_reduction(c)) return;
  if (cg_level_used(c, CG_LEVEL_WARP)) warp_addresses(c);
  if (cg_level_used(c, CG_LEVEL_CLUSTER)) cg_cluster_prologue(c);
  if (cg_level_used(c, CG_LEVEL_GRID)) cg_grid_prologue(c);
}

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

void cg_lower_reduce(CgCtx *c, int inst) {
  const IrInst *in = &c->p->insts[inst];
  tj_elem elem = cg_elem_of(c, in->args[0]);
  CgOperand x = within_thread(c, in, elem);
  for (size_t i = 0; i < TJ_COUNTOF(levels); i++)
    if (cg_level_used(c, levels[i].level)) x = levels[i].combine(c, inst, elem, x);
  if (in->op == TJ_OP_REDUCE_MAX && elem == TJ_I32) x = cg_int_key(c, x);
  c->vals[in->result].op = x;
}
