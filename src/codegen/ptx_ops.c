/*
 * ptx_ops.c — the PTX text of the regular ops, one table line per op of the
 * IR's op table, and the few elementwise ops that take more than one line:
 * exp, log, select on predicates, and casts.
 *
 * Math follows the IR's semantics:
 *   add, sub, mul    IEEE round-to-nearest (.rn, so ptxas does not contract
 *                    an IR mul and add into one fma the interpreter lacks);
 *   div              div.rn.f32; 1 / x is cg_reciprocal, the same correctly
 *                    rounded value without ptxas's slow-path subroutine (a
 *                    tile divided by a scalar is turned into one reciprocal
 *                    and a multiply per element by lower.c);
 *   max, min         max.f32 / min.f32 return the other operand of a NaN,
 *                    like fmaxf;
 *   rem              rem.s32 / rem.s64 by b, or by 1 where b is 0 or -1
 *                    (whose results PTX leaves unspecified): 0 there;
 *   exp(x)           ex2.approx.ftz(x * log2 e), the multiply written as a
 *                    plain mul after any subtraction the program did first;
 *   exp2, log        ex2.approx.ftz, and lg2.approx.ftz times ln 2;
 *   compares         ordered (false on NaN), except ne, which is unordered.
 *
 * Signed i32 max and min are written on order-preserving keys, x ^ 2^31
 * compared as unsigned (cg_int_key): ptxas of CUDA 13.0 for sm_90, and the
 * driver's JIT compiler, fuse two max.s32 (or min.s32) into one three-input
 * VIMNMX3 and drop the negation of one operand when both operands of the
 * inner one are negations: max(max(-a, -b), -c) comes out as
 * max(-a, b, -c). An i32 reduce_max of arange * -1 gave 509 instead of 0.
 * The keys hide the negations from that rewrite; i64 is not affected.
 *
 * Casts follow the interpreter: to a float type they round to nearest even
 * (once), to an integer they truncate and saturate (cvt.rzi; NaN gives 0).
 * f32 -> bf16 uses cvt where the arch has it (sm_80 on) and an exact
 * integer sequence elsewhere; bf16 -> f32 places the bits (below); other
 * casts between f16/bf16 and integers go through f32 (an integer beyond
 * 2^24 cast to bf16 is then rounded twice).
 */
#include "codegen/codegen.h"

/*
 * One PTX_<OP> line per op of TJ_OP_LIST, expanded into cg_op_text below:
 * adding an op to the list without a line here stops the build. Columns:
 * how lower.c treats it, then the instruction for f32, i32, i64 and pred
 * operands (NULL: no such form). SPECIAL ops are written by hand (lower.c,
 * memory.c, reduce.c, and exp, log, select and cast below).
 */
#define REG CG_LOWER_REGULAR
#define CMP CG_LOWER_COMPARE
#define SPECIAL {CG_LOWER_SPECIAL, NULL, NULL, NULL, NULL}

#define PTX_PROGRAM_ID   SPECIAL
#define PTX_NUM_PROGRAMS SPECIAL
#define PTX_PARAM        SPECIAL
#define PTX_CONST        SPECIAL
#define PTX_CONSTEXPR    SPECIAL
#define PTX_ARANGE       SPECIAL
#define PTX_ADD          {REG, "add.rn.f32", "add.s32", "add.s64", NULL}
#define PTX_SUB          {REG, "sub.rn.f32", "sub.s32", "sub.s64", NULL}
#define PTX_MUL          {REG, "mul.rn.f32", "mul.lo.s32", "mul.lo.s64", NULL}
#define PTX_DIV          {REG, "div.rn.f32", NULL, NULL, NULL}
#define PTX_REM          SPECIAL
#define PTX_MAX          {REG, "max.f32", "max.s32", "max.s64", NULL}
#define PTX_MIN          {REG, "min.f32", "min.s32", "min.s64", NULL}
#define PTX_NEG          {REG, "neg.f32", "neg.s32", "neg.s64", NULL}
#define PTX_EXP          SPECIAL
#define PTX_EXP2         {REG, "ex2.approx.ftz.f32", NULL, NULL, NULL}
#define PTX_LOG          SPECIAL
#define PTX_LT           {CMP, "lt", "lt", "lt", NULL}
#define PTX_LE           {CMP, "le", "le", "le", NULL}
#define PTX_GT           {CMP, "gt", "gt", "gt", NULL}
#define PTX_GE           {CMP, "ge", "ge", "ge", NULL}
#define PTX_EQ           {CMP, "eq", "eq", "eq", NULL}
#define PTX_NE           {CMP, "neu", "ne", "ne", NULL}
#define PTX_AND          {REG, NULL, NULL, NULL, "and.pred"}
#define PTX_OR           {REG, NULL, NULL, NULL, "or.pred"}
#define PTX_SELECT       SPECIAL
#define PTX_CAST         SPECIAL
#define PTX_PTR_ADD      SPECIAL
#define PTX_LOAD         SPECIAL
#define PTX_STORE        SPECIAL
#define PTX_REDUCE_MAX   SPECIAL
#define PTX_REDUCE_SUM   SPECIAL
#define PTX_FOR          SPECIAL
#define PTX_ITER         SPECIAL
#define PTX_YIELD        SPECIAL
#define PTX_ENDFOR       SPECIAL

const CgOpText cg_op_text[TJ_OP_COUNT] = {
#define PTX_TEXT(op, text, lo, hi, kind, rule, doc) [TJ_OP_##op] = PTX_##op,
    TJ_OP_LIST(PTX_TEXT)
#undef PTX_TEXT
};
_Static_assert(TJ_COUNTOF(cg_op_text) == TJ_OP_COUNT, "one PTX table line per op");

#define LN_2   0.6931471805599453f

const char *cg_op_instruction(tj_op op, tj_elem elem) {
  if ((unsigned)op >= TJ_OP_COUNT) return NULL;
  const CgOpText *t = &cg_op_text[op];
  switch (elem) {
  case TJ_F32: return t->f32;
  case TJ_I32: return t->i32;
  case TJ_I64: return t->i64;
  case TJ_PRED: return t->pred;
  default: return NULL;
  }
}

static CgOperand unsupported(CgCtx *c, const char *what, tj_elem elem) {
  cg_fail(c, TJ_ERR_UNSUPPORTED, "codegen: %s on %s is not supported", what, ir_elem_name(elem));
  return cg_imm(CG_B32, 0);
}

CgOperand cg_int_key(CgCtx *c, CgOperand x) {
  if (x.imm) return cg_imm(CG_B32, (uint32_t)x.bits ^ 0x80000000u);
  CgOperand d = cg_reg(&c->em, CG_B32);
  cg_line(&c->em, "xor.b32 %s, %s, -2147483648;", CG_N(d), CG_N(x));
  return d;
}

/* max/min.s32 a, b as the same op on keys, then back (see the top). */
static CgOperand int_min_max(CgCtx *c, tj_op op, const CgOperand *a) {
  CgOperand d = cg_reg(&c->em, CG_B32), ka = cg_int_key(c, a[0]), kb = cg_int_key(c, a[1]);
  cg_line(&c->em, "%s.u32 %s, %s, %s;", op == TJ_OP_MAX ? "max" : "min", CG_N(d), CG_N(ka),
          CG_N(kb));
  return cg_int_key(c, d);
}

static CgOperand regular(CgCtx *c, tj_op op, tj_elem elem, const CgOperand *a, int n) {
  if (elem == TJ_I32 && (op == TJ_OP_MAX || op == TJ_OP_MIN)) return int_min_max(c, op, a);
  const char *text = cg_op_instruction(op, elem);
  if (!text) return unsupported(c, ir_ops[op].name, elem);
  CgOperand d = cg_reg_of(c, elem);
  if (n == 1)
    cg_line(&c->em, "%s %s, %s;", text, CG_N(d), CG_N(a[0]));
  else
    cg_line(&c->em, "%s %s, %s, %s;", text, CG_N(d), CG_N(a[0]), CG_N(a[1]));
  return d;
}

static CgOperand compare(CgCtx *c, tj_op op, tj_elem elem, const CgOperand *a) {
  return cg_compare_and(c, op, elem, a, cg_true());
}

CgOperand cg_compare_and(CgCtx *c, tj_op op, tj_elem elem, const CgOperand *a, CgOperand with) {
  const char *text = cg_op_instruction(op, elem);
  if (!text || cg_op_text[op].lowering != CG_LOWER_COMPARE)
    return unsupported(c, ir_ops[op].name, elem);
  CgOperand d = cg_reg(&c->em, CG_PRED);
  if (cg_is_true(with))
    cg_line(&c->em, "setp.%s.%s %s, %s, %s;", text, cg_elem_ptx(elem), CG_N(d), CG_N(a[0]),
            CG_N(a[1]));
  else
    cg_line(&c->em, "setp.%s.and.%s %s, %s, %s, %s;", text, cg_elem_ptx(elem), CG_N(d), CG_N(a[0]),
            CG_N(a[1]), CG_N(with));
  return d;
}

/* e^a = 2^(a log2 e); ln a = log2(a) ln 2. */
static CgOperand exp_log(CgCtx *c, tj_op op, CgOperand a) {
  CgOperand t = cg_reg(&c->em, CG_F32), d = cg_reg(&c->em, CG_F32);
  if (op == TJ_OP_EXP) {
    cg_line(&c->em, "mul.f32 %s, %s, %s;", CG_N(t), CG_N(a), CG_N(cg_imm_f32(CG_LOG2_E)));
    cg_line(&c->em, "ex2.approx.ftz.f32 %s, %s;", CG_N(d), CG_N(t));
  } else {
    cg_line(&c->em, "lg2.approx.ftz.f32 %s, %s;", CG_N(t), CG_N(a));
    cg_line(&c->em, "mul.f32 %s, %s, %s;", CG_N(d), CG_N(t), CG_N(cg_imm_f32(LN_2)));
  }
  return d;
}

/* a % b, and 0 where b is 0 or -1 (b + 1 <= 1 as unsigned): there the
 * divisor is made 1, so no rem ever divides by 0 or overflows. */
static CgOperand rem(CgCtx *c, tj_elem elem, const CgOperand *a) {
  bool wide = elem == TJ_I64;
  const char *s = wide ? "s64" : "s32", *u = wide ? "u64" : "u32", *b = wide ? "b64" : "b32";
  CgOperand d = cg_reg_of(c, elem), e = cg_reg_of(c, elem), q = cg_reg_of(c, elem);
  CgOperand p = cg_reg(&c->em, CG_PRED);
  cg_line(&c->em, "add.%s %s, %s, 1;", s, CG_N(e), CG_N(a[1]));
  cg_line(&c->em, "setp.le.%s %s, %s, 1;", u, CG_N(p), CG_N(e));
  cg_line(&c->em, "selp.%s %s, 1, %s, %s;", b, CG_N(q), CG_N(a[1]), CG_N(p));
  cg_line(&c->em, "rem.%s %s, %s, %s;", s, CG_N(d), CG_N(a[0]), CG_N(q));
  return d;
}

/* a ? b : c; on predicates (a and b) or (c and not a). */
static CgOperand select(CgCtx *c, tj_elem elem, const CgOperand *a) {
  CgOperand d = cg_reg_of(c, elem);
  if (elem != TJ_PRED) {
    const char *type = elem == TJ_F16 || elem == TJ_BF16 ? "b16" : cg_elem_ptx(elem);
    cg_line(&c->em, "selp.%s %s, %s, %s, %s;", type, CG_N(d), CG_N(a[1]), CG_N(a[2]), CG_N(a[0]));
    return d;
  }
  CgOperand t = cg_reg(&c->em, CG_PRED), u = cg_reg(&c->em, CG_PRED);
  cg_line(&c->em, "and.pred %s, %s, %s;", CG_N(t), CG_N(a[0]), CG_N(a[1]));
  cg_line(&c->em, "and.pred %s, %s, !%s;", CG_N(u), CG_N(a[2]), CG_N(a[0]));
  cg_line(&c->em, "or.pred %s, %s, %s;", CG_N(d), CG_N(t), CG_N(u));
  return d;
}

CgOperand cg_apply(CgCtx *c, tj_op op, tj_elem elem, const CgOperand *args, int nargs) {
  if (op == TJ_OP_DIV && elem == TJ_F32 && args[0].imm && (uint32_t)args[0].bits == 0x3F800000u)
    return cg_reciprocal(c, args[1]); /* 1 / x: the same value as div.rn */
  switch (cg_op_text[op].lowering) {
  case CG_LOWER_REGULAR: return regular(c, op, elem, args, nargs);
  case CG_LOWER_COMPARE: return compare(c, op, elem, args);
  default: break;
  }
  if (op == TJ_OP_EXP || op == TJ_OP_LOG) return exp_log(c, op, args[0]);
  if (op == TJ_OP_SELECT) return select(c, elem, args);
  if (op == TJ_OP_REM && (elem == TJ_I32 || elem == TJ_I64)) return rem(c, elem, args);
  return unsupported(c, ir_ops[op].name, elem);
}

/* 1 / x, correctly rounded like rcp.rn.f32, but with no subroutine: ptxas
 * calls a slow path from rcp.rn and div.rn (subnormals), and compiling that
 * costs about 5 ms of JIT time per kernel. In f64, where every f32 and its
 * reciprocal are normal: an approximation, three Newton steps (each about
 * doubles the bits; the result is within about 2^-52 of 1/x), one rounding
 * to f32. A reciprocal of an f32 is never closer than 2^-49 (relative) to
 * a midpoint between f32 values, so that rounding is the correct one. For
 * 0 and inf (where the steps give NaN) the approximation is already exact. */
CgOperand cg_reciprocal(CgCtx *c, CgOperand x) {
  CgEmit *e = &c->em;
  x = cg_in_reg(c, x);
  CgOperand wide = cg_reg(e, CG_B64), neg = cg_reg(e, CG_B64), r = cg_reg(e, CG_B64);
  CgOperand special = cg_reg(e, CG_PRED), d = cg_reg(e, CG_F32);
  cg_line(e, "cvt.f64.f32 %s, %s;", CG_N(wide), CG_N(x));
  cg_line(e, "rcp.approx.ftz.f64 %s, %s;", CG_N(r), CG_N(wide));
  cg_line(e, "neg.f64 %s, %s;", CG_N(neg), CG_N(wide));
  CgOperand first = r;
  for (int step = 0; step < 3; step++) {
    CgOperand err = cg_reg(e, CG_B64), next = cg_reg(e, CG_B64);
    cg_line(e, "fma.rn.f64 %s, %s, %s, 0d3FF0000000000000;", CG_N(err), CG_N(neg), CG_N(r));
    cg_line(e, "fma.rn.f64 %s, %s, %s, %s;", CG_N(next), CG_N(r), CG_N(err), CG_N(r));
    r = next;
  }
  cg_line(e, "setp.eq.f32 %s, %s, 0f00000000;", CG_N(special), CG_N(x));
  cg_line(e, "setp.eq.or.f32 %s, %s, 0f7F800000, %s;", CG_N(special), CG_N(x), CG_N(special));
  cg_line(e, "setp.eq.or.f32 %s, %s, 0fFF800000, %s;", CG_N(special), CG_N(x), CG_N(special));
  CgOperand pick = cg_reg(e, CG_B64);
  cg_line(e, "selp.b64 %s, %s, %s, %s;", CG_N(pick), CG_N(first), CG_N(r), CG_N(special));
  cg_line(e, "cvt.rn.f32.f64 %s, %s;", CG_N(d), CG_N(pick));
  return d;
}

CgOperand cg_combine(CgCtx *c, tj_op reduce, tj_elem elem, CgOperand a, CgOperand b) {
  CgOperand args[2] = {a, b};
  if (reduce == TJ_OP_REDUCE_MAX && elem == TJ_I32) { /* on keys */
    CgOperand d = cg_reg(&c->em, CG_B32);
    cg_line(&c->em, "max.u32 %s, %s, %s;", CG_N(d), CG_N(a), CG_N(b));
    return d;
  }
  tj_op op = reduce == TJ_OP_REDUCE_MAX ? TJ_OP_MAX : TJ_OP_ADD;
  if (op == TJ_OP_ADD && elem == TJ_F32) {
    CgOperand d = cg_reg(&c->em, CG_F32);
    cg_line(&c->em, "add.f32 %s, %s, %s;", CG_N(d), CG_N(a), CG_N(b));
    return d;
  }
  return regular(c, op, elem, args, 2);
}

CgOperand cg_identity(tj_op reduce, tj_elem elem) {
  if (elem == TJ_I32) return cg_imm_int(CG_B32, 0); /* max: the key of INT32_MIN */
  return cg_imm(CG_F32, reduce == TJ_OP_REDUCE_MAX ? 0xFF800000u : 0x80000000u);
}

/* ---- casts --------------------------------------------------------------- */

static CgOperand cvt(CgCtx *c, const char *text, CgClass to, CgOperand a) {
  CgOperand d = cg_reg(&c->em, to);
  cg_line(&c->em, "cvt%s %s, %s;", text, CG_N(d), CG_N(a));
  return d;
}

/* bf16 -> f32 is exact: the 16 bits are the top half of the f32, the
 * bottom half zero. From sm_90 the element is packed with a zero half,
 * one PRMT, where cvt.f32.bf16 of a 16-bit word's upper element took a
 * PRMT and a shift (1.5 instructions an element of a 16-bit piece, against
 * 1). Older archs keep the integer sequence: packed, log-softmax's bf16
 * BLOCK 12288 in 16 warps spilled 12 bytes at 40 registers on sm_80 (the
 * ptxas sweep). */
static CgOperand bf16_to_f32(CgCtx *c, CgOperand a) {
  if (a.imm) return cg_imm(CG_F32, (a.bits & 0xFFFFu) << 16);
  CgOperand d = cg_reg(&c->em, CG_F32);
  if (c->arch >= 90) {
    CgOperand zero = cg_reg(&c->em, CG_B16);
    cg_line(&c->em, "mov.b16 %s, 0;", CG_N(zero));
    cg_line(&c->em, "mov.b32 %s, {%s, %s};", CG_N(d), CG_N(zero), CG_N(a));
    return d;
  }
  CgOperand wide = cvt(c, ".u32.u16", CG_B32, a);
  cg_line(&c->em, "shl.b32 %s, %s, 16;", CG_N(d), CG_N(wide));
  return d;
}

/* f32 -> bf16, round to nearest even: add 0x7fff plus the lowest kept bit,
 * keep the top half; NaN becomes the canonical 0x7fff, as cvt gives. */
static CgOperand f32_to_bf16(CgCtx *c, CgOperand a) {
  if (cg_arch_has(c->arch, CG_FEAT_CVT_BF16)) {
    c->features |= CG_FEAT_CVT_BF16;
    return cvt(c, ".rn.bf16.f32", CG_B16, a);
  }
  CgEmit *e = &c->em;
  CgOperand bits = cg_reg(e, CG_B32), lsb = cg_reg(e, CG_B32), sum = cg_reg(e, CG_B32);
  CgOperand nan = cg_reg(e, CG_PRED), low = cg_reg(e, CG_B16), d = cg_reg(e, CG_B16);
  cg_line(e, "mov.b32 %s, %s;", CG_N(bits), CG_N(a));
  cg_line(e, "bfe.u32 %s, %s, 16, 1;", CG_N(lsb), CG_N(bits));
  cg_line(e, "add.s32 %s, %s, %s;", CG_N(sum), CG_N(bits), CG_N(lsb));
  cg_line(e, "add.s32 %s, %s, 32767;", CG_N(sum), CG_N(sum));
  cg_line(e, "setp.nan.f32 %s, %s, %s;", CG_N(nan), CG_N(a), CG_N(a));
  cg_line(e, "selp.b32 %s, 2147418112, %s, %s;", CG_N(sum), CG_N(sum), CG_N(nan));
  cg_line(e, "mov.b32 {%s, %s}, %s;", CG_N(low), CG_N(d), CG_N(sum));
  return d;
}

static bool is_half(tj_elem e) { return e == TJ_F16 || e == TJ_BF16; }

static CgOperand to_f32(CgCtx *c, CgOperand a, tj_elem from) {
  switch (from) {
  case TJ_I32: return cvt(c, ".rn.f32.s32", CG_F32, a);
  case TJ_I64: return cvt(c, ".rn.f32.s64", CG_F32, a);
  case TJ_F16: return cvt(c, ".f32.f16", CG_F32, a);
  case TJ_BF16: return bf16_to_f32(c, a);
  default: return a;
  }
}

static CgOperand from_f32(CgCtx *c, CgOperand a, tj_elem to) {
  switch (to) {
  case TJ_I32: return cvt(c, ".rzi.s32.f32", CG_B32, a);
  case TJ_I64: return cvt(c, ".rzi.s64.f32", CG_B64, a);
  case TJ_F16: return cvt(c, ".rn.f16.f32", CG_B16, a);
  case TJ_BF16: return f32_to_bf16(c, a);
  default: return a;
  }
}

CgOperand cg_cast(CgCtx *c, CgOperand a, tj_elem from, tj_elem to) {
  if (from == to) return a;
  if (a.imm && (from == TJ_I32 || from == TJ_I64) && (to == TJ_I32 || to == TJ_I64)) {
    int64_t v = from == TJ_I32 ? (int64_t)(int32_t)a.bits : (int64_t)a.bits;
    return cg_imm_int(cg_elem_class(to), to == TJ_I32 ? (int64_t)(int32_t)(uint32_t)v : v);
  }
  if (from == TJ_I32 && to == TJ_I64) return cvt(c, ".s64.s32", CG_B64, cg_in_reg(c, a));
  if (from == TJ_I64 && to == TJ_I32) return cvt(c, ".u32.u64", CG_B32, cg_in_reg(c, a));
  if (from == TJ_PRED || to == TJ_PRED) return unsupported(c, "cast", TJ_PRED);
  a = cg_in_reg(c, a);
  if (from == TJ_F32 || to == TJ_F32)
    return from == TJ_F32 ? from_f32(c, a, to) : to_f32(c, a, from);
  if (to == TJ_F16 && (from == TJ_I32 || from == TJ_I64)) /* one rounding, as the IR says */
    return cvt(c, from == TJ_I32 ? ".rn.f16.s32" : ".rn.f16.s64", CG_B16, a);
  if (is_half(from) || is_half(to)) return from_f32(c, to_f32(c, a, from), to);
  return unsupported(c, "cast", from);
}
