/*
 * values.c — the helpers every lowering file uses: the first error of a
 * compile, registers for IR element types, moving immediates into
 * registers, reading a value at one of a thread's slots, and predicate
 * arithmetic that folds "always".
 *
 * A value is held as described in analyze.c: scalars and splats as one
 * operand (constants stay immediates), affine tiles as their start, other
 * tiles as one register per slot (layout.c). Nothing here writes PTX beyond
 * one instruction per call, and nothing knows about the geometry.
 */
#include "codegen/codegen.h"

#include <stdio.h>

tj_status cg_fail(CgCtx *c, tj_status st, const char *fmt, ...) {
  if (c->status != TJ_OK) return c->status;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->spec->error, TJ_ERROR_MAX, fmt, ap);
  va_end(ap);
  c->status = st;
  return st;
}

bool cg_ok(const CgCtx *c) { return c->status == TJ_OK && !c->em.body.oom; }

CgOperand cg_reg_of(CgCtx *c, tj_elem e) { return cg_reg(&c->em, cg_elem_class(e)); }

tj_elem cg_elem_of(const CgCtx *c, int value) { return (tj_elem)c->p->types[value].elem; }

int cg_log2(int64_t v) {
  int n = 0;
  while (v > 1) {
    v >>= 1;
    n++;
  }
  return n;
}

static const char *mov_type(CgClass cls) {
  static const char *const names[CG_CLASS_COUNT] = {"pred", "b16", "b32", "b64", "f32"};
  return names[cls];
}

void cg_mov(CgCtx *c, CgOperand d, CgOperand s) {
  cg_line(&c->em, "mov.%s %s, %s;", mov_type((CgClass)d.cls), CG_N(d), CG_N(s));
}

CgOperand cg_in_reg(CgCtx *c, CgOperand o) {
  if (!o.imm || o.cls == CG_PRED) return o;
  CgOperand d = cg_reg(&c->em, (CgClass)o.cls);
  cg_mov(c, d, o);
  return d;
}

CgOperand *cg_new_slots(CgCtx *c, int count) {
  CgOperand *s = cg_arena_alloc(&c->arena, sizeof *s * (size_t)(count > 0 ? count : 1));
  if (!s) cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  return s;
}

CgOperand cg_slot(CgCtx *c, int value, int slot) {
  const CgVal *v = &c->vals[value];
  if ((v->form == CG_FORM_SLOTS || v->form == CG_FORM_AFFINE) && v->slots) return v->slots[slot];
  if (v->form == CG_FORM_SLOTS || v->form == CG_FORM_AFFINE)
    cg_fail(c, TJ_ERR_UNSUPPORTED, "codegen: internal error: %%%d has no registers", value);
  return v->op;
}

CgOperand cg_and_pred(CgCtx *c, CgOperand a, CgOperand b) {
  if (cg_is_true(a)) return b;
  if (cg_is_true(b) || cg_same(a, b)) return a;
  CgOperand d = cg_reg(&c->em, CG_PRED);
  cg_line(&c->em, "and.pred %s, %s, %s;", CG_N(d), CG_N(a), CG_N(b));
  return d;
}
