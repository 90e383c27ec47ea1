/*
 * exp_shift.c — exp(t - m) for one value m in one fma and an ex2 a slot.
 *
 * exp(t - m) is 2^((t - m) log2 e): a sub, a mul and an ex2 a slot
 * (ptx_ops.c). With o = m log2 e rounded to f32, fma gives t log2 e - o
 * rounded once, so a slot takes an fma and an ex2, and what it holds is
 * 2^((t - m) log2 e + c), c = m log2 e - o: exp(t - m) times 2^c, the same
 * factor in every slot. c is exact as fma(m, log2 e, -o), so one ex2(-c),
 * the bias, takes the factor out again: a sum is multiplied by it, a
 * product with one scalar (or a quotient by it) folds it into the scalar.
 * m is t's max (analyze.c's shift fact; the pair's own max in reduce.c),
 * so every exp is at most 1 and a shifted slot at most 2.
 *
 * That holds while 2^c is a modest factor and c adds no error of its own:
 * for |m| < 2^24, |c| <= 1 and the fma's result, within a few units of
 * (t - m) log2 e where the slot's value matters, rounds as the sub and the
 * mul did. Elsewhere (|m| >= 2^24, or m infinite or NaN: the extreme rows
 * of testing.md, such as one-hot rows of 3e38) the sub, the mul and the
 * ex2 run as before. So each use is a branch on m between the two:
 *
 *   - a fused pair's running sum (reduce.c), per piece and per thread, on
 *     the piece's own max;
 *   - a phase whose one exp(t - m) (analyze.c's shift fact) is only scaled,
 *     with no running reduction: the phase's piece loop is emitted twice,
 *     shifted and exact, and m picks one once (stream.c). Softmax's last
 *     phase, e * (1 / s), then costs an fma, an ex2 and a mul a slot. A
 *     branch per piece instead cost that loop MOVs into the registers of
 *     its 16-byte stores at the join, and half a point of copy on an H100;
 *     the loop twice made ptxas spill f32 pieces (64 registers: f32 262144
 *     over 16 CTAs on sm_90, clusters on sm_100), whose 32 elements take
 *     twice the registers of 16-bit ones.
 *
 * Only staged pieces (STAGE elements a thread) of t cast from 16-bit
 * elements take it. A tile wholly in registers, or in pieces that fill
 * them, keeps the plain exp, since the branch made ptxas spill some of
 * those kernels (f32 BLOCK 2048 in 4 warps on sm_80; f32 2^20 over
 * unstaged clusters of 13 on sm_90); so do f32 pieces, whose loop twice
 * spilled (above) and whose first phase alone read up to a point slower on
 * an H100 (bench/RESULTS.md, CC5). A staged bf16
 * piece of 32 elements issues 10% fewer instructions (bf16 1024 x 131072,
 * cuobjdump: 315 + 242 -> 293 + 208 in the two phases), for the H200,
 * where such rows are bound by issue; on an H100, which is not, they read
 * as before or up to a point faster (bench/RESULTS.md, CC4 and CC5).
 */
#include "codegen/codegen.h"

CgShift cg_shift_begin(CgCtx *c, CgOperand m) {
  CgEmit *e = &c->em;
  CgShift s;
  s.neg_o = cg_reg(e, CG_F32);
  s.fast = cg_reg(e, CG_PRED);
  s.bias = cg_reg(e, CG_F32);
  s.value = s.scaled = -1;
  s.scale = s.bias;
  CgOperand o = cg_reg(e, CG_F32), minus_c = cg_reg(e, CG_F32), size = cg_reg(e, CG_F32);
  cg_line(e, "mul.rn.f32 %s, %s, %s;", CG_N(s.neg_o), CG_N(m), CG_N(cg_imm_f32(-CG_LOG2_E)));
  cg_line(e, "neg.f32 %s, %s;", CG_N(o), CG_N(s.neg_o));
  cg_line(e, "fma.rn.f32 %s, %s, %s, %s;", CG_N(minus_c), CG_N(m), CG_N(cg_imm_f32(-CG_LOG2_E)),
          CG_N(o));
  cg_line(e, "ex2.approx.ftz.f32 %s, %s;", CG_N(s.bias), CG_N(minus_c));
  cg_line(e, "abs.f32 %s, %s;", CG_N(size), CG_N(m));
  cg_line(e, "setp.lt.f32 %s, %s, %s;", CG_N(s.fast), CG_N(size), CG_N(cg_imm_f32(16777216.0f)));
  return s;
}

CgOperand cg_shift_exp(CgCtx *c, const CgShift *s, CgOperand t) {
  CgOperand a = cg_reg(&c->em, CG_F32), d = cg_reg(&c->em, CG_F32);
  cg_line(&c->em, "fma.rn.f32 %s, %s, %s, %s;", CG_N(a), CG_N(t), CG_N(cg_imm_f32(CG_LOG2_E)),
          CG_N(s->neg_o));
  cg_line(&c->em, "ex2.approx.ftz.f32 %s, %s;", CG_N(d), CG_N(a));
  return d;
}

int cg_shift_branch(CgCtx *c, const CgShift *s, bool uniform, const char *kind) {
  int label = c->em.labels++;
  cg_line(&c->em, "@!%s bra%s $Lexact%s_%d;", CG_N(s->fast), uniform ? ".uni" : "", kind, label);
  return label;
}

void cg_shift_else(CgCtx *c, int label, const char *kind) {
  cg_line(&c->em, "bra.uni $Lshifted%s_%d;", kind, label);
  cg_raw(&c->em, "$Lexact%s_%d:\n", kind, label);
}

void cg_shift_end(CgCtx *c, int label, const char *kind) {
  cg_raw(&c->em, "$Lshifted%s_%d:\n", kind, label);
}

/* Whether t is a 16-bit tile cast to f32: its slots arrive two a register. */
static bool from_halves(const CgCtx *c, int t) {
  const IrInst *in = &c->p->insts[c->p->defs[t]];
  return in->op == TJ_OP_CAST && cg_elem_size(cg_elem_of(c, in->args[0])) == 2;
}

bool cg_shift_applies(const CgCtx *c, int t) {
  return t != IR_NONE && c->streamed && c->spec->stage > 0 &&
         c->vals[t].layout == c->stream.layout && from_halves(c, t);
}

/* The t - m of exp instruction inst. */
static const IrInst *sub_of(const CgCtx *c, int inst) {
  return &c->p->insts[c->p->defs[c->p->insts[inst].args[0]]];
}

/* The tile an exp(t - m) with the shift fact (or its t - m) exponentiates. */
static int operand_of(const CgCtx *c, int value) {
  int d = c->facts.shift[value] == 1 ? c->p->insts[c->p->defs[value]].args[0] : value;
  return c->p->insts[c->p->defs[d]].args[0];
}

int cg_shift_fact(const CgCtx *c, int value) {
  if (value == IR_NONE || !c->shifting || !c->facts.shift[value]) return 0;
  return cg_shift_applies(c, operand_of(c, value)) ? c->facts.shift[value] : 0;
}

bool cg_shifted(const CgCtx *c, int value) { return cg_shift_fact(c, value) == 1; }

/* Which operand of in is exp where in scales it (a product with one
 * value, or a quotient by one), else -1. */
static int scaled_side(const IrInst *in, int exp) {
  if (in->nargs != 2) return -1;
  if (in->op == TJ_OP_DIV) return in->args[0] == exp ? 0 : -1;
  if (in->op != TJ_OP_MUL) return -1;
  return in->args[0] == exp ? 0 : in->args[1] == exp ? 1 : -1;
}

/* The one instruction of the phase that scales exp's value, or -1. */
static int scaling_use(const CgCtx *c, const uint8_t *need, int exp) {
  int e = c->p->insts[exp].result, one = -1;
  for (int i = 0; i < c->p->ninsts; i++) {
    if (!need[i] || scaled_side(&c->p->insts[i], e) < 0) continue;
    if (one >= 0) return -1;
    one = i;
  }
  return one;
}

int cg_shift_candidate(const CgCtx *c, const uint8_t *need) {
  int one = -1;
  for (int i = 0; i < c->p->ninsts; i++) {
    int v = c->p->insts[i].result;
    if (!need[i] || v == IR_NONE || c->facts.shift[v] != 1 ||
        !cg_shift_applies(c, operand_of(c, v)))
      continue;
    if (one >= 0) return -1;
    one = i;
  }
  return one >= 0 && scaling_use(c, need, one) >= 0 ? one : -1;
}

CgOperand cg_shift_of(const CgCtx *c, int inst) { return c->vals[sub_of(c, inst)->args[1]].op; }

void cg_lower_shifted_exp(CgCtx *c, int inst, CgVal *r) {
  const IrInst *sub = sub_of(c, inst);
  int slots = cg_layout_of(c, c->p->insts[inst].result)->slots;
  if (!(r->slots = cg_new_slots(c, slots))) return;
  for (int k = 0; k < slots && cg_ok(c); k++)
    r->slots[k] = cg_shift_exp(c, &c->shift, cg_slot(c, sub->args[0], k));
}

/* Made before the loops: the one value of the exp's one scaling use, its
 * bias folded in (so that the shifted loop keeps one register beside -o
 * where the exact loop keeps one), and the shifted loop's condition: m's,
 * and that value at most 2 in magnitude. m is t's max, so the exps are at
 * most 1 and their shifted slots at most 2, and with that bound no product
 * overflows or leaves 0 where the exact exp flushes to 0 what is under
 * 2^-126 (softmax's 1 / s is at most 1); a larger one takes the exact loop. */
void cg_shift_hoist(CgCtx *c, const uint8_t *need, int exp) {
  CgEmit *e = &c->em;
  c->shift.value = c->p->insts[exp].result;
  c->shift.scaled = scaling_use(c, need, exp);
  const IrInst *in = &c->p->insts[c->shift.scaled];
  int side = scaled_side(in, c->shift.value);
  CgOperand by = c->vals[in->args[1 - side]].op, size = cg_reg(e, CG_F32);
  CgOperand go = cg_reg(e, CG_PRED);
  if (in->op == TJ_OP_DIV) by = cg_reciprocal(c, by); /* as lower.c divides a tile by one value */
  c->shift.scale = cg_reg(e, CG_F32);
  cg_line(e, "mul.rn.f32 %s, %s, %s;", CG_N(c->shift.scale), CG_N(c->shift.bias), CG_N(by));
  cg_line(e, "abs.f32 %s, %s;", CG_N(size), CG_N(c->shift.scale));
  cg_line(e, "setp.le.and.f32 %s, %s, %s, %s;", CG_N(go), CG_N(size), CG_N(cg_imm_f32(2.0f)),
          CG_N(c->shift.fast));
  c->shift.fast = go;
}

bool cg_shifted_scale(CgCtx *c, const IrInst *in, CgVal *r) {
  if (!c->shifting || in != &c->p->insts[c->shift.scaled]) return false;
  const CgVal *e = &c->vals[in->args[scaled_side(in, c->shift.value)]];
  for (int j = 0; j < cg_layout_of(c, in->result)->slots; j++) {
    r->slots[j] = cg_reg(&c->em, CG_F32);
    cg_line(&c->em, "mul.rn.f32 %s, %s, %s;", CG_N(r->slots[j]), CG_N(e->slots[j]),
            CG_N(c->shift.scale));
  }
  return true;
}
