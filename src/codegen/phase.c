/*
 * phase.c — 16-byte vectors for rows that start anywhere.
 *
 * A phased specialization (tj_spec_options.phased) does not know where its
 * rows start: the row of x at x + r*stride may sit at any element of a
 * 16-byte line. A phased layout rotates its tile over the threads by the
 * instance's phase q, the elements from the boundary below the row's start
 * up to it (0 <= q < VEC; a boundary every VEC elements or 16 bytes, what a
 * vector moves), so that they fall where the threads' vectors start:
 *
 *   the slot at position pos = lane*VEC + offset holds element pos - q,
 *   except the slots below q (lane 0's first vector, which "wraps"): they
 *   hold the tile's last q elements, pos - q + len.
 *
 * Every element is still held exactly once, so elementwise ops and
 * reductions give what the unrotated layout gives (reductions up to their
 * order of summation). Every vector but lane 0's first starts on a 16-byte
 * boundary: the row's head (the elements before its first boundary) and
 * its tail move one by one, the body in whole vectors.
 *
 * q comes from the layout's first access, its source: the low bits of the
 * address of the source's element 0, so the source's vectors are aligned.
 * Every vector access (but a streamed kernel's source, memory.c) checks
 * that its own first address is aligned (one predicate, the same for the
 * whole instance) and otherwise moves element by element, so a phased
 * kernel is right for any element-aligned pointers, and fast when the
 * accesses of an instance share a phase; the runtime asks for one only
 * when they do.
 *
 * A layout is phased when the specialization is, its VEC is over 1, its
 * first memory access has affine offsets (arange + s) and sits outside any
 * loop, and no value of the layout needs its slots before that access, nor
 * does a reduction read them (they would be computed before q is known; an
 * affine value defined before it gets its slots at the source).
 *
 * In a streamed kernel (stream.c) only the streamed layout may be phased,
 * and only when the first stream phase's loop, lowered first, lowers its
 * source (a load there that only later phases use is not lowered there).
 * The phase is computed there once, not again where later phases load the
 * source (a capped stash loads it on one branch only). The rotation is
 * over the whole tile, so only the first piece's first vector of lane 0
 * wraps (cg_phase_wraps adds the piece's start), and a piece's repeats are
 * guarded by their positions, not their rotated elements. A staged
 * kernel's stash holds the rotated slots as loaded. A kernel split over
 * the grid (SPLIT > 1) is phased only when staged: ptxas spilled 8 bytes
 * in unstaged 16-bit ones at N = 2^20, while staged ones (32 elements a
 * thread in registers) take about 80 registers, none spilled.
 */
#include "codegen/codegen.h"

/* Whether tile v can be computed before the phase is known: it needs no
 * slots (affine ones get theirs at the source), or is a mask each access
 * computes again. */
static bool slotless(const CgCtx *c, int v) {
  return c->facts.form[v] != CG_FORM_SLOTS || c->facts.remat[v];
}

/* The layout's phase source, or -1 when it cannot be phased. */
static int source_of(const CgCtx *c, int layout) {
  const tj_program *p = c->p;
  int depth = 0;
  for (int i = 0; i < p->ninsts; i++) {
    const IrInst *in = &p->insts[i];
    if (in->op == TJ_OP_FOR) depth++;
    if (in->op == TJ_OP_ENDFOR) depth--;
    bool memory = in->op == TJ_OP_LOAD || in->op == TJ_OP_STORE;
    if (memory && c->vals[in->args[1]].layout == layout)
      return depth == 0 && c->facts.form[in->args[1]] == CG_FORM_AFFINE ? i : -1;
    int r = in->result;
    if (r != IR_NONE && p->types[r].shape == TJ_TILE && c->vals[r].layout == layout &&
        !slotless(c, r))
      return -1;
    bool reduce = in->op == TJ_OP_REDUCE_MAX || in->op == TJ_OP_REDUCE_SUM;
    if (reduce && c->vals[in->args[0]].layout == layout) return -1; /* it reads the slots */
  }
  return -1;
}

void cg_plan_phase(CgCtx *c) {
  bool split_ok = c->spec->split == 1 || c->spec->stage > 0; /* see above */
  for (int i = 0; i < c->nlayouts && c->spec->phased && split_ok; i++) {
    CgLayout *l = &c->layouts[i];
    l->phase_source = source_of(c, i);
    l->phased = l->phase_source >= 0;
  }
}

void cg_unphase_streamed(CgCtx *c) {
  for (int i = 0; i < c->nlayouts; i++) {
    CgLayout *l = &c->layouts[i];
    bool streams = c->streamed && l->phased && i == c->stream.layout &&
                   cg_stream_first_lowers(c, l->phase_source);
    if (l->vec == 1 || (c->streamed && !streams)) l->phased = false;
  }
}

void cg_phase_begin(CgCtx *c, CgLayout *l, CgOperand start_address, int esize) {
  CgEmit *e = &c->em;
  CgOperand low = cg_reg(e, CG_B32), q = cg_reg(e, CG_B32), lanes = cg_reg(e, CG_B32);
  l->rotated = cg_reg(e, CG_B32);
  cg_line(e, "cvt.u32.u64 %s, %s;", CG_N(low), CG_N(start_address));
  int line = l->vec * esize < 16 ? l->vec * esize : 16; /* the bytes a vector moves */
  cg_line(e, "and.b32 %s, %s, %d;", CG_N(low), CG_N(low), line - 1);
  cg_line(e, "shr.u32 %s, %s, %d;", CG_N(q), CG_N(low), cg_log2(esize));
  cg_line(e, "shl.b32 %s, %s, %d;", CG_N(lanes), CG_N(c->geo.lane), cg_log2(l->vec));
  cg_line(e, "sub.s32 %s, %s, %s;", CG_N(l->rotated), CG_N(lanes), CG_N(q));
  l->lanes = lanes;
  l->base32 = l->rotated;
  if (l->base64.cls == CG_B64 && !l->base64.imm) {
    l->base64 = cg_reg(e, CG_B64);
    cg_line(e, "cvt.s64.s32 %s, %s;", CG_N(l->base64), CG_N(l->rotated));
  }
  for (int v = 0; v < c->p->nvalues; v++)
    if (c->p->types[v].shape == TJ_TILE && &c->layouts[c->vals[v].layout] == l &&
        c->vals[v].form == CG_FORM_AFFINE && c->facts.materialize[v] &&
        c->p->defs[v] < l->phase_source)
      cg_materialize(c, v);
}

bool cg_phase_pending(const CgCtx *c, int value) {
  const CgLayout *l = &c->layouts[c->vals[value].layout];
  return l->phased && l->rotated.cls != CG_B32;
}

/* Slot k wraps when lane*VEC + k < q, that is at + k < 0 with at = rotated;
 * in a streamed layout only in the first piece (at = rotated + the piece's
 * start). Since q < VEC, at >= -(VEC - 1), and slots from VEC - 1 up never
 * wrap. Returns false where slot k cannot wrap. */
static bool wrap_base(CgCtx *c, const CgLayout *l, int slot, CgOperand *at) {
  if (!l->phased || slot >= l->vec - 1 || l->rotated.cls != CG_B32) return false;
  CgOperand start = c->piece_start;
  *at = l->rotated;
  bool piece = c->streamed && l == &c->layouts[c->stream.layout];
  if (piece && !(start.imm && start.bits == 0)) {
    *at = cg_reg(&c->em, CG_B32);
    cg_line(&c->em, "add.s32 %s, %s, %s;", CG_N(*at), CG_N(l->rotated), CG_N(start));
  }
  return true;
}

bool cg_phase_wraps(CgCtx *c, const CgLayout *l, int slot, CgOperand *wraps) {
  CgOperand at;
  if (!wrap_base(c, l, slot, &at)) return false;
  *wraps = cg_reg(&c->em, CG_PRED);
  cg_line(&c->em, "setp.lt.s32 %s, %s, %d;", CG_N(*wraps), CG_N(at), -slot);
  return true;
}

bool cg_phase_side(CgCtx *c, const CgLayout *l, int slot, bool wrapped, CgOperand *with) {
  CgOperand at;
  if (!wrap_base(c, l, slot, &at)) return false;
  CgOperand d = cg_reg(&c->em, CG_PRED);
  const char *cmp = wrapped ? "lt" : "ge";
  if (cg_is_true(*with))
    cg_line(&c->em, "setp.%s.s32 %s, %s, %d;", cmp, CG_N(d), CG_N(at), -slot);
  else
    cg_line(&c->em, "setp.%s.and.s32 %s, %s, %d, %s;", cmp, CG_N(d), CG_N(at), -slot, CG_N(*with));
  *with = d;
  return true;
}

CgOperand cg_phase_fix(CgCtx *c, const CgLayout *l, CgOperand value, int slot) {
  CgOperand wraps;
  if (!cg_phase_wraps(c, l, slot, &wraps)) return value;
  int bits = value.cls == CG_B64 ? 64 : 32;
  CgOperand sum = cg_reg(&c->em, (CgClass)value.cls), d = cg_reg(&c->em, (CgClass)value.cls);
  cg_line(&c->em, "add.s%d %s, %s, %lld;", bits, CG_N(sum), CG_N(value), (long long)l->len);
  cg_line(&c->em, "selp.b%d %s, %s, %s, %s;", bits, CG_N(d), CG_N(sum), CG_N(value), CG_N(wraps));
  return d;
}

CgOperand cg_phase_aligned(CgCtx *c, CgOperand address, int bytes) {
  CgOperand low = cg_reg(&c->em, CG_B32), ok = cg_reg(&c->em, CG_PRED);
  cg_line(&c->em, "cvt.u32.u64 %s, %s;", CG_N(low), CG_N(address));
  cg_line(&c->em, "and.b32 %s, %s, %d;", CG_N(low), CG_N(low), bytes - 1);
  cg_line(&c->em, "setp.eq.u32 %s, %s, 0;", CG_N(ok), CG_N(low));
  return ok;
}
