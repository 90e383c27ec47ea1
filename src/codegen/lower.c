/*
 * lower.c — the kernel skeleton and the dispatch over IR ops.
 *
 * The kernel is laid out as
 *
 *   prologue     thread and lane-group indices, each layout's t*VEC, the
 *                shared-memory addresses of cross-warp reductions
 *   invariants   instructions whose value is the same for every program
 *                instance (parameters, their arithmetic): computed once
 *   $Linst:      the grid-stride loop over program instances. Its trip
 *                count is the same in every thread of a CTA (CTA base index
 *                against the hidden instance count), so all lanes reach
 *                each shfl.sync and bar.sync together; when several
 *                instances share a CTA, each one's validity is a predicate
 *                that guards its memory accesses instead of a branch.
 *   body         one lowering per instruction, in program order
 *
 * Counted loops are rotated (test once before, then at the bottom), with
 * loop-carried values in registers; bra.uni where the bounds are the same
 * in every thread. Values are held as described in analyze.c: scalars and
 * splats as one operand (constants stay immediates), affine tiles as their
 * start, other tiles as one register per slot (layout.c).
 */
#include "codegen/codegen.h"

static tj_elem elem_of(const CgCtx *c, int value) { return cg_elem_of(c, value); }

static void mov(CgCtx *c, CgOperand d, CgOperand s) { cg_mov(c, d, s); }

/* ---- sources -------------------------------------------------------------- */

static void lower_param(CgCtx *c, const IrInst *in) {
  tj_type t = c->p->types[in->result];
  CgVal *r = &c->vals[in->result];
  const char *name = c->p->params[in->iimm];
  if (t.shape == TJ_POINTER) {
    CgOperand raw = cg_reg(&c->em, CG_B64);
    r->op = cg_reg(&c->em, CG_B64);
    cg_line(&c->em, "ld.param.u64 %s, [p_%s];", CG_N(raw), name);
    cg_line(&c->em, "cvta.to.global.u64 %s, %s;", CG_N(r->op), CG_N(raw));
    return;
  }
  r->op = cg_reg_of(c, (tj_elem)t.elem);
  const char *type = t.elem == TJ_F32 ? "f32" : t.elem == TJ_I64 ? "u64" : "u32";
  cg_line(&c->em, "ld.param.%s %s, [p_%s];", type, CG_N(r->op), name);
}

static void lower_const(CgCtx *c, const IrInst *in) {
  tj_elem e = elem_of(c, in->result);
  CgVal *r = &c->vals[in->result];
  r->op =
      e == TJ_F32 ? cg_imm_f32((float)in->fimm) : cg_imm_int(cg_elem_class(e), (int64_t)in->fimm);
}

static void lower_program_id(CgCtx *c, const IrInst *in, CgOperand from) {
  CgVal *r = &c->vals[in->result];
  r->op = cg_reg(&c->em, CG_B32);
  cg_line(&c->em, "cvt.u32.u64 %s, %s;", CG_N(r->op), CG_N(from));
}

/* ---- tiles ----------------------------------------------------------------- */

/* Per-slot registers of an affine tile: t*VEC + start + slot offset (and
 * the tile's length where a phased slot wraps, phase.c). */
void cg_materialize(CgCtx *c, int value) {
  CgVal *r = &c->vals[value];
  CgLayout *l = cg_layout_of(c, value);
  bool wide = r->elem == TJ_I64;
  CgOperand base = wide ? l->base64 : l->base32, first = base;
  const char *add = wide ? "add.s64" : "add.s32";
  if (!(r->op.imm && r->op.bits == 0)) {
    first = cg_reg_of(c, (tj_elem)r->elem);
    cg_line(&c->em, "%s %s, %s, %s;", add, CG_N(first), CG_N(base), CG_N(r->op));
  }
  if (!(r->slots = cg_new_slots(c, l->slots))) return;
  for (int k = 0; k < l->slots; k++) {
    int64_t off = cg_slot_offset(c, l, k);
    r->slots[k] = first;
    if (off) {
      r->slots[k] = cg_reg_of(c, (tj_elem)r->elem);
      cg_line(&c->em, "%s %s, %s, %lld;", add, CG_N(r->slots[k]), CG_N(first), (long long)off);
    }
    r->slots[k] = cg_phase_fix(c, l, r->slots[k], k);
  }
}

/* An affine tile's new start, start +- s; immediates fold. */
static CgOperand start_sum(CgCtx *c, bool sub, tj_elem e, CgOperand start, CgOperand s) {
  if (s.imm && s.bits == 0) return start;
  if (start.imm && s.imm) {
    uint64_t v = sub ? start.bits - s.bits : start.bits + s.bits;
    return cg_imm_int(start.cls, e == TJ_I32 ? (int64_t)(int32_t)(uint32_t)v : (int64_t)v);
  }
  if (!sub && start.imm && start.bits == 0) return s;
  CgOperand args[2] = {start, s};
  return cg_apply(c, sub ? TJ_OP_SUB : TJ_OP_ADD, e, args, 2);
}

static void lower_affine(CgCtx *c, const IrInst *in) {
  CgVal *r = &c->vals[in->result];
  const int32_t *x = in->args;
  if (in->op == TJ_OP_ARANGE) {
    bool piece = c->streamed && r->layout == c->stream.layout;
    r->op = piece ? c->piece_start : cg_imm_int(CG_B32, 0);
  } else if (in->op == TJ_OP_CAST) {
    r->op = cg_cast(c, c->vals[x[0]].op, elem_of(c, x[0]), (tj_elem)r->elem);
  } else {
    bool swap = c->vals[x[1]].form == CG_FORM_AFFINE;
    r->op = start_sum(c, in->op == TJ_OP_SUB, (tj_elem)r->elem, c->vals[x[swap]].op,
                      c->vals[x[!swap]].op);
  }
  if (c->facts.materialize[in->result] && !cg_phase_pending(c, in->result))
    cg_materialize(c, in->result);
}

/* Compares on tiles fold in their slot's guard (the instance's validity,
 * the lane's ownership of a partial repeat): the values of slots that do
 * not count are never used, and memory ops need not AND it in again. */
static bool guards_compare(const IrInst *in, int slot) {
  return slot >= 0 && cg_op_text[in->op].lowering == CG_LOWER_COMPARE;
}

CgOperand cg_apply_at(CgCtx *c, const IrInst *in, int slot) {
  CgOperand args[IR_MAX_ARGS];
  for (int k = 0; k < in->nargs; k++)
    args[k] = slot < 0 ? c->vals[in->args[k]].op : cg_slot(c, in->args[k], slot);
  tj_elem from = elem_of(c, in->args[in->op == TJ_OP_SELECT ? 1 : 0]);
  if (in->op == TJ_OP_CAST) return cg_cast(c, args[0], from, elem_of(c, in->result));
  if (guards_compare(in, slot)) {
    const CgLayout *l = cg_layout_of(c, in->result);
    return cg_compare_and(c, (tj_op)in->op, from, args, cg_guard(c, l, slot / l->vec));
  }
  return cg_apply(c, (tj_op)in->op, from, args, in->nargs);
}

static bool guarded(const CgCtx *c, int value) {
  return c->vals[value].form == CG_FORM_SLOTS && c->vals[value].guarded;
}

static bool result_guarded(const CgCtx *c, const IrInst *in) {
  if (cg_op_text[in->op].lowering == CG_LOWER_COMPARE) return true;
  if (in->op == TJ_OP_AND) return guarded(c, in->args[0]) || guarded(c, in->args[1]);
  if (in->op == TJ_OP_OR) return guarded(c, in->args[0]) && guarded(c, in->args[1]);
  return false;
}

/* A tile divided by one value: one reciprocal, then a multiply per slot. */
static bool divide_by_one(CgCtx *c, const IrInst *in, CgVal *r) {
  if (in->op != TJ_OP_DIV || c->vals[in->args[1]].form == CG_FORM_SLOTS) return false;
  CgOperand inv = cg_reciprocal(c, c->vals[in->args[1]].op);
  for (int k = 0; k < cg_layout_of(c, in->result)->slots; k++) {
    r->slots[k] = cg_reg(&c->em, CG_F32);
    cg_line(&c->em, "mul.rn.f32 %s, %s, %s;", CG_N(r->slots[k]), CG_N(cg_slot(c, in->args[0], k)),
            CG_N(inv));
  }
  return true;
}

static void lower_elementwise(CgCtx *c, const IrInst *in) {
  CgVal *r = &c->vals[in->result];
  if (c->facts.remat[in->result]) return;        /* each access computes it (memory.c) */
  if (cg_folded(c, in->result)) return;          /* its reduction computes it (reduce.c) */
  if (cg_shift_fact(c, in->result) == 2) return; /* its exp computes it (exp_shift.c) */
  if (cg_shifted(c, in->result)) {
    cg_lower_shifted_exp(c, c->p->defs[in->result], r);
    return;
  }
  if (r->form == CG_FORM_AFFINE) {
    lower_affine(c, in);
    return;
  }
  if (r->form != CG_FORM_SLOTS) {
    r->op = cg_apply_at(c, in, -1);
    return;
  }
  int slots = cg_layout_of(c, in->result)->slots;
  if (!(r->slots = cg_new_slots(c, slots)) || cg_shifted_scale(c, in, r) || divide_by_one(c, in, r))
    return;
  for (int k = 0; k < slots && cg_ok(c); k++) r->slots[k] = cg_apply_at(c, in, k);
  r->guarded = result_guarded(c, in);
}

/* ---- counted loops --------------------------------------------------------- */

static void annotate(CgCtx *c, int i) {
  if (!c->annotate) return;
  cg_raw(&c->em, "\t// ");
  ir_print_inst(c->p, i, &c->em.body);
  cg_raw(&c->em, "\n");
}

typedef struct Loop {
  int inst; /* the FOR */
  CgOperand var, end, step;
  tj_elem elem;
  bool uniform;
} Loop;

#define CG_MAX_DEPTH 64
typedef struct LoopStack {
  Loop loops[CG_MAX_DEPTH];
  int depth;
  CgOperand *yielded; /* per value */
} LoopStack;

static const char *branch(bool uniform) { return uniform ? "bra.uni" : "bra"; }

static void lower_for(CgCtx *c, LoopStack *s, int i) {
  const IrInst *in = &c->p->insts[i];
  if (s->depth == CG_MAX_DEPTH) {
    cg_fail(c, TJ_ERR_UNSUPPORTED, "codegen: loops nested deeper than %d", CG_MAX_DEPTH);
    return;
  }
  Loop *l = &s->loops[s->depth++];
  l->inst = i;
  l->elem = elem_of(c, in->result);
  l->var = c->vals[in->result].op = cg_reg_of(c, l->elem);
  l->end = c->vals[in->args[1]].op;
  l->step = c->vals[in->args[2]].op;
  l->uniform = c->geo.programs == 1 || c->facts.uniform[in->result];
  mov(c, l->var, c->vals[in->args[0]].op);
  for (int k = i + 1; k < c->p->ninsts && c->p->insts[k].op == TJ_OP_ITER; k++) {
    CgVal *it = &c->vals[c->p->insts[k].result];
    annotate(c, k);
    it->op = cg_reg_of(c, (tj_elem)it->elem);
    mov(c, it->op, c->vals[c->p->insts[k].args[0]].op);
  }
  CgOperand skip = cg_reg(&c->em, CG_PRED);
  const char *type = cg_elem_ptx(l->elem);
  cg_line(&c->em, "setp.ge.%s %s, %s, %s;", type, CG_N(skip), CG_N(l->var), CG_N(l->end));
  if (!(l->step.imm && (int64_t)l->step.bits > 0))
    cg_line(&c->em, "setp.le.or.%s %s, %s, 0, %s;", type, CG_N(skip), CG_N(l->step), CG_N(skip));
  cg_line(&c->em, "@%s %s $Lend_%d;", CG_N(skip), branch(l->uniform), i);
  cg_raw(&c->em, "$Lloop_%d:\n", i);
}

/* Iter values take their yields at once: through temporaries when one
 * yield reads another iter of the same loop. */
static void assign_iters(CgCtx *c, LoopStack *s, const Loop *l) {
  int first = l->inst + 1, last = first;
  while (last < c->p->ninsts && c->p->insts[last].op == TJ_OP_ITER) last++;
  bool overlap = false;
  for (int a = first; a < last; a++)
    for (int b = first; b < last; b++)
      overlap |= cg_same(s->yielded[c->p->insts[a].result], c->vals[c->p->insts[b].result].op);
  for (int a = first; a < last && overlap; a++) {
    int v = c->p->insts[a].result;
    CgOperand t = cg_reg(&c->em, (CgClass)c->vals[v].op.cls);
    mov(c, t, s->yielded[v]);
    s->yielded[v] = t;
  }
  for (int a = first; a < last; a++) {
    int v = c->p->insts[a].result;
    if (!cg_same(c->vals[v].op, s->yielded[v])) mov(c, c->vals[v].op, s->yielded[v]);
  }
}

/* The loop goes on while var + step < end, computed exactly: in the body
 * var < end, so end - var is in [1, 2^width) as an unsigned number, and
 * the test end - var > step (unsigned) neither wraps nor lets var wrap into
 * another trip. An i32 loop up to 2^31 - 1 ends there (for's semantics). */
static void lower_endfor(CgCtx *c, LoopStack *s) {
  if (s->depth == 0) return;
  const Loop *l = &s->loops[--s->depth];
  assign_iters(c, s, l);
  CgOperand more = cg_reg(&c->em, CG_PRED), left = cg_reg_of(c, l->elem);
  const char *type = cg_elem_ptx(l->elem), *unsigned_type = l->elem == TJ_I64 ? "u64" : "u32";
  cg_line(&c->em, "sub.%s %s, %s, %s;", type, CG_N(left), CG_N(l->end), CG_N(l->var));
  cg_line(&c->em, "setp.gt.%s %s, %s, %s;", unsigned_type, CG_N(more), CG_N(left),
          CG_N(l->step));
  cg_line(&c->em, "add.%s %s, %s, %s;", type, CG_N(l->var), CG_N(l->var), CG_N(l->step));
  cg_line(&c->em, "@%s %s $Lloop_%d;", CG_N(more), branch(l->uniform), l->inst);
  cg_raw(&c->em, "$Lend_%d:\n", l->inst);
}

/* ---- dispatch --------------------------------------------------------------- */

/* Sources, memory and control ops each have their own lowering; every
 * elementwise op goes through lower_elementwise and the PTX table, every
 * reduction through reduce.c. */
static void lower_source(CgCtx *c, const IrInst *in) {
  switch ((tj_op)in->op) {
  case TJ_OP_PROGRAM_ID: lower_program_id(c, in, c->geo.inst); return;
  case TJ_OP_NUM_PROGRAMS: lower_program_id(c, in, c->geo.count); return;
  case TJ_OP_PARAM: lower_param(c, in); return;
  case TJ_OP_CONST: lower_const(c, in); return;
  case TJ_OP_ARANGE: lower_affine(c, in); return;
  default: break;
  }
  cg_fail(c, TJ_ERR_UNSUPPORTED, "codegen: %s in a specialized program", ir_ops[in->op].name);
}

static void lower_memory(CgCtx *c, int i) {
  switch ((tj_op)c->p->insts[i].op) {
  case TJ_OP_PTR_ADD: cg_lower_ptr_add(c, i); return;
  case TJ_OP_LOAD: cg_lower_load(c, i); return;
  default: cg_lower_store(c, i); return;
  }
}

static void lower_control(CgCtx *c, LoopStack *s, int i) {
  const IrInst *in = &c->p->insts[i];
  switch ((tj_op)in->op) {
  case TJ_OP_FOR: lower_for(c, s, i); return;
  case TJ_OP_ITER: return; /* set up by its for */
  case TJ_OP_YIELD: s->yielded[in->args[0]] = c->vals[in->args[1]].op; return;
  default: lower_endfor(c, s); return;
  }
}

static void lower_inst(CgCtx *c, LoopStack *s, int i) {
  const IrInst *in = &c->p->insts[i];
  if (in->op != TJ_OP_CONST && in->op != TJ_OP_YIELD && in->op != TJ_OP_ITER) annotate(c, i);
  switch (ir_ops[in->op].kind) {
  case KIND_SOURCE: lower_source(c, in); break;
  case KIND_ELEMENTWISE: lower_elementwise(c, in); break;
  case KIND_MEMORY: lower_memory(c, i); break;
  case KIND_REDUCE: cg_lower_reduce(c, i); break;
  case KIND_CONTROL: lower_control(c, s, i); break;
  }
}

/* ---- skeleton --------------------------------------------------------------- */

/* Computed once, before the loop over instances. */
bool cg_hoisted(const CgCtx *c, int i) {
  int v = c->p->insts[i].result;
  if (v == IR_NONE || c->p->scopes[v] != IR_NONE || !c->facts.invariant[v]) return false;
  CgForm f = (CgForm)c->facts.form[v];
  return f == CG_FORM_SCALAR || f == CG_FORM_POINTER || f == CG_FORM_SPLAT;
}

void cg_lower_inst(CgCtx *c, int i) { lower_inst(c, c->loops, i); }

void cg_lower_kernel(CgCtx *c) {
  LoopStack *s = cg_arena_alloc(&c->arena, sizeof *s);
  c->loops = s;
  if (s) s->yielded = cg_arena_alloc(&c->arena, sizeof *s->yielded * ((size_t)c->p->nvalues + 1));
  if (!s || !s->yielded) {
    cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
    return;
  }
  cg_geometry_prologue(c);
  for (int i = 0; i < c->p->ninsts && cg_ok(c); i++)
    if (cg_hoisted(c, i)) lower_inst(c, s, i);
  cg_instance_start(c);
  if (c->streamed)
    cg_lower_streamed(c);
  else
    for (int i = 0; i < c->p->ninsts && cg_ok(c); i++)
      if (!cg_hoisted(c, i)) lower_inst(c, s, i);
  cg_instance_end(c);
}
