/*
 * stream.c — tiles too large for a thread's registers, moved in pieces.
 *
 * A thread of a CTA of T threads can keep about 32768 / T tile elements in
 * registers (half of what the register file gives it at one CTA per SM,
 * the rest for addresses, masks and temporaries; at most CG_MAX_SLOTS;
 * shared by the tiles of the widest length it loads; cg_stream_limit).
 * When the widest tile needs more, its repeats are taken P at a time: the
 * thread's slots are one piece of P repeats, and the instance's code runs
 * in loops over the K pieces instead of once over all of them.
 *
 * A reduction needs every piece before its result exists, so the program
 * is cut into phases. An instruction runs in the phase after the one whose
 * streamed reduction it depends on (directly or through scalars), else in
 * the phase of its operands:
 *
 *   phase 0:   for each piece: load x, ...; fold the piece into the thread's
 *              running reductions      then: the reductions across threads
 *   phase 1:   scalars from them; for each piece: load x again, ..., store
 *
 * A tile a later phase needs is computed again there from its operands,
 * loads included: x is read once per phase that needs it (softmax: twice,
 * with max and sum in one phase as a fused pair, reduce.c). The last phase
 * walks the pieces in reverse, so it starts with what the previous phase
 * read last, which is the most likely to be still in L2. That is valid when
 * every store is in the last phase (a load of an earlier phase then reads
 * what the kernel has not yet written; within the last phase a thread loads
 * and stores each piece's elements itself, in place included), and when the
 * program has no loops of its own; otherwise a tile too large for the
 * registers is refused as before. Reductions fold pieces in order, so their
 * sums round differently from the unstreamed order (within testing.md).
 *
 * Non-streamed values (scalars, pointers, other tile lengths) are computed
 * once, before the loop of their phase.
 */
#include "codegen/codegen.h"

#include <string.h>

static bool streamed_value(const CgCtx *c, int v) {
  return v != IR_NONE && c->p->types[v].shape == TJ_TILE && c->vals[v].layout == c->stream.layout;
}

static bool is_reduce(const IrInst *in) {
  return in->op == TJ_OP_REDUCE_MAX || in->op == TJ_OP_REDUCE_SUM;
}

/* An instruction that runs once per piece: a streamed tile, a store to
 * streamed offsets, or a reduction of a streamed tile. */
bool cg_stream_per_piece(const CgCtx *c, int i) {
  const IrInst *in = &c->p->insts[i];
  if (in->op == TJ_OP_STORE || is_reduce(in)) return streamed_value(c, in->args[in->op == TJ_OP_STORE]);
  return streamed_value(c, in->result);
}

/* ---- plan -------------------------------------------------------------------- */

static bool has_loop(const tj_program *p) {
  for (int i = 0; i < p->ninsts; i++)
    if (p->insts[i].op == TJ_OP_FOR) return true;
  return false;
}

/* Phases (c->stream.phase per instruction); false when a store is not in
 * the last one. */
static bool assign_phases(CgCtx *c) {
  const tj_program *p = c->p;
  CgStream *st = &c->stream;
  int *avail = cg_arena_alloc(&c->arena, sizeof *avail * ((size_t)p->nvalues + 1));
  if (!avail) return false;
  st->phases = 1;
  for (int i = 0; i < p->ninsts; i++) {
    const IrInst *in = &p->insts[i];
    int ph = 0;
    for (int k = 0; k < in->nargs; k++)
      if (avail[in->args[k]] > ph) ph = avail[in->args[k]];
    if (cg_fused_sum(c, i)) ph = st->phase[c->partner[i]];
    st->phase[i] = ph;
    if (ph + 1 > st->phases) st->phases = ph + 1;
    if (in->result != IR_NONE)
      avail[in->result] = ph + (is_reduce(in) && streamed_value(c, in->args[0]) ? 1 : 0);
  }
  for (int i = 0; i < p->ninsts; i++)
    if (p->insts[i].op == TJ_OP_STORE && st->phase[i] != st->phases - 1) return false;
  return true;
}

/* The layout with the most slots per thread, or -1. */
static int widest_layout(const CgCtx *c) {
  int best = -1;
  for (int i = 0; i < c->nlayouts; i++)
    if (best < 0 || c->layouts[i].slots > c->layouts[best].slots) best = i;
  return best;
}

/* A thread spread with others over CTAs needs some registers more (ranks,
 * cluster and workspace addresses); ptxas for sm_90 fits that beside 32
 * elements at 64 registers, ptxas for the other archs does not (the ptxas
 * sweep checks every default), so there such a thread keeps half. */
int cg_stream_limit(const CgCtx *c) {
  int limit = 32768 / c->geo.threads, w = widest_layout(c);
  if (cg_multi_cta(c) && c->arch != 90) limit /= 2;
  /* Shared by the tiles of that length a piece loads (softmax backward's y
   * and dy: at 32 elements each, a split of 1024-thread CTAs spilled 640
   * bytes at 64 registers on sm_90). */
  if (w >= 0) limit /= cg_tiles_loaded(c->p, c->layouts[w].len);
  return limit < CG_MAX_SLOTS ? limit : CG_MAX_SLOTS;
}

/* P repeats a piece: as many as the registers take; fewer if that number
 * divides the repeats and the largest number that fits does not. */
static int piece_repeats(const CgLayout *l, int limit) {
  int most = limit / l->vec, piece = most;
  while (piece > most / 2 && l->reps % piece) piece--;
  return l->reps % piece ? most : piece;
}

tj_status cg_plan_stream(CgCtx *c) {
  CgStream *st = &c->stream;
  int w = widest_layout(c), limit = cg_stream_limit(c);
  st->layout = -1;
  c->streamed = false;
  if (w < 0 || c->layouts[w].slots <= limit) return TJ_OK;
  CgLayout *l = &c->layouts[w];
  int piece = piece_repeats(l, limit);
  if (has_loop(c->p) || piece < 1) return TJ_OK;
  st->layout = w;
  st->phase = cg_arena_alloc(&c->arena, sizeof *st->phase * ((size_t)c->p->ninsts + 1));
  if (!st->phase) return cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  c->streamed = true;
  cg_find_pairs(c);
  if (!assign_phases(c)) {
    st->layout = -1;
    c->streamed = false;
    cg_find_pairs(c);
    return TJ_OK;
  }
  st->pieces = (l->reps + piece - 1) / piece;
  st->step = (int64_t)piece * c->geo.span * l->vec;
  l->dynamic = l->partial >= 0 || l->reps % piece != 0;
  l->reps = piece;
  l->slots = piece * l->vec;
  l->partial = -1;
  if (l->dynamic && !(l->rep_guard = cg_new_slots(c, piece))) return c->status;
  return TJ_OK;
}

/* A piece's repeat j holds elements (its first: lane*VEC + piece start +
 * j*span*VEC) only where they are inside the tile. */
static void piece_guards(CgCtx *c) {
  CgLayout *l = &c->layouts[c->stream.layout];
  if (!l->dynamic) return;
  CgOperand first = cg_reg(&c->em, CG_B32);
  cg_line(&c->em, "add.s32 %s, %s, %s;", CG_N(first), CG_N(l->base32), CG_N(c->piece_start));
  for (int j = 0; j < l->reps; j++) {
    CgOperand ok = cg_reg(&c->em, CG_PRED);
    int64_t below = l->len - (int64_t)j * c->geo.span * l->vec;
    cg_line(&c->em, "setp.lt.u32 %s, %s, %lld;", CG_N(ok), CG_N(first), (long long)below);
    l->rep_guard[j] = cg_and_pred(c, ok, c->geo.inst_valid);
  }
}

/* ---- lowering ---------------------------------------------------------------- */

/* Whether instruction i is needed in the piece loop of phase ph: it runs
 * per piece, and is of that phase or feeds one that is (marks in need). */
static void mark_needed(const CgCtx *c, int ph, uint8_t *need) {
  const tj_program *p = c->p;
  memset(need, 0, (size_t)p->ninsts);
  for (int i = p->ninsts - 1; i >= 0; i--) {
    if (!cg_stream_per_piece(c, i) || cg_hoisted(c, i)) continue;
    const IrInst *in = &p->insts[i];
    bool mine = c->stream.phase[i] == ph && !cg_fused_sum(c, i);
    if (!mine && !need[i]) continue;
    need[i] = 1;
    for (int k = 0; k < in->nargs; k++) {
      int a = in->args[k];
      if (streamed_value(c, a)) need[p->defs[a]] = 1;
    }
  }
}

typedef struct Running {
  int inst;
  CgRed acc;
} Running;

static CgRed fresh(CgCtx *c, CgRed like) {
  CgRed r = like;
  r.x = cg_reg_of(c, like.elem);
  if (like.pair) r.d = cg_reg(&c->em, CG_F32);
  return r;
}

static void assign(CgCtx *c, CgRed to, CgRed from) {
  cg_mov(c, to.x, from.x);
  if (to.pair) cg_mov(c, to.d, from.d);
}

/* The loop of phase ph over the pieces, its running reductions folded in. */
static void piece_loop(CgCtx *c, int ph, const uint8_t *need, Running *run, int nrun) {
  CgStream *st = &c->stream;
  bool last = ph == c->stream.phases - 1, backward = last && ph > 0;
  int label = c->em.labels++;
  int64_t end = st->step * st->pieces;
  c->piece_start = cg_reg(&c->em, CG_B32);
  cg_line(&c->em, "mov.u32 %s, %lld;", CG_N(c->piece_start),
          (long long)(backward ? end - st->step : 0));
  cg_raw(&c->em, "$Lpiece_%d:\n", label);
  piece_guards(c);
  for (int i = 0; i < c->p->ninsts && cg_ok(c); i++) {
    if (!need[i]) continue;
    const IrInst *in = &c->p->insts[i];
    if (!is_reduce(in)) {
      cg_lower_inst(c, i);
      continue;
    }
    for (int k = 0; k < nrun; k++)
      if (run[k].inst == i) {
        CgLayout *l = cg_layout_of(c, in->args[0]);
        CgRed piece = cg_red_slots(c, i, 0, l->slots);
        assign(c, run[k].acc, cg_red_combine(c, run[k].acc, piece));
      }
  }
  CgOperand more = cg_reg(&c->em, CG_PRED);
  cg_line(&c->em, "add.s32 %s, %s, %lld;", CG_N(c->piece_start), CG_N(c->piece_start),
          (long long)(backward ? -st->step : st->step));
  if (backward)
    cg_line(&c->em, "setp.ge.s32 %s, %s, 0;", CG_N(more), CG_N(c->piece_start));
  else
    cg_line(&c->em, "setp.lt.s32 %s, %s, %lld;", CG_N(more), CG_N(c->piece_start),
            (long long)end);
  cg_line(&c->em, "@%s bra.uni $Lpiece_%d;", CG_N(more), label);
  c->piece_start = cg_imm_int(CG_B32, 0);
}

/* One phase: its scalars, its loop, then its reductions across threads. */
static void lower_phase(CgCtx *c, int ph, uint8_t *need, Running *run) {
  const tj_program *p = c->p;
  int nrun = 0;
  for (int i = 0; i < p->ninsts && cg_ok(c); i++)
    if (c->stream.phase[i] == ph && !cg_stream_per_piece(c, i) && !cg_hoisted(c, i))
      cg_lower_inst(c, i);
  for (int i = 0; i < p->ninsts; i++) {
    const IrInst *in = &p->insts[i];
    if (c->stream.phase[i] != ph || !is_reduce(in) || !cg_stream_per_piece(c, i)) continue;
    if (cg_fused_sum(c, i)) continue; /* the pair's max carries it */
    tj_elem elem = cg_elem_of(c, in->args[0]);
    run[nrun].inst = i;
    run[nrun].acc = fresh(c, cg_red_identity((tj_op)in->op, elem, c->partner[i] >= 0));
    assign(c, run[nrun].acc, cg_red_identity((tj_op)in->op, elem, c->partner[i] >= 0));
    nrun++;
  }
  mark_needed(c, ph, need);
  piece_loop(c, ph, need, run, nrun);
  for (int k = 0; k < nrun && cg_ok(c); k++)
    cg_red_finish(c, run[k].inst, cg_red_levels(c, run[k].inst, run[k].acc));
}

void cg_lower_streamed(CgCtx *c) {
  size_t n = (size_t)c->p->ninsts + 1;
  uint8_t *need = cg_arena_alloc(&c->arena, n);
  Running *run = cg_arena_alloc(&c->arena, sizeof *run * n);
  if (!need || !run) {
    cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
    return;
  }
  for (int ph = 0; ph < c->stream.phases && cg_ok(c); ph++) lower_phase(c, ph, need, run);
}

/* The order in which reductions combine across threads: phase by phase,
 * each in program order (reduce.c plans their regions in it). */
int cg_stream_order(const CgCtx *c, int *order) {
  int n = 0;
  for (int ph = 0; ph < c->stream.phases; ph++)
    for (int i = 0; i < c->p->ninsts; i++)
      if (c->stream.phase[i] == ph && is_reduce(&c->p->insts[i])) order[n++] = i;
  return n;
}
