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

static const char *mov_type(CgClass cls) {
  static const char *const names[CG_CLASS_COUNT] = {"pred", "b16", "b32", "b64", "f32"};
  return names[cls];
}

static void mov(CgCtx *c, CgOperand d, CgOperand s) {
  cg_line(&c->em, "mov.%s %s, %s;", mov_type((CgClass)d.cls), CG_N(d), CG_N(s));
}

CgOperand cg_in_reg(CgCtx *c, CgOperand o) {
  if (!o.imm || o.cls == CG_PRED) return o;
  CgOperand d = cg_reg(&c->em, (CgClass)o.cls);
  mov(c, d, o);
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

static tj_elem elem_of(const CgCtx *c, int value) { return (tj_elem)c->p->types[value].elem; }

static int log2i(int64_t v) {
  int n = 0;
  while (v > 1) {
    v >>= 1;
    n++;
  }
  return n;
}

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

/* Per-slot registers of an affine tile: t*VEC + start + slot offset. */
static void materialize(CgCtx *c, int value) {
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
    if (!off) continue;
    r->slots[k] = cg_reg_of(c, (tj_elem)r->elem);
    cg_line(&c->em, "%s %s, %s, %lld;", add, CG_N(r->slots[k]), CG_N(first), (long long)off);
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
    r->op = cg_imm_int(CG_B32, 0);
  } else if (in->op == TJ_OP_CAST) {
    r->op = cg_cast(c, c->vals[x[0]].op, elem_of(c, x[0]), (tj_elem)r->elem);
  } else {
    bool swap = c->vals[x[1]].form == CG_FORM_AFFINE;
    r->op = start_sum(c, in->op == TJ_OP_SUB, (tj_elem)r->elem, c->vals[x[swap]].op,
                      c->vals[x[!swap]].op);
  }
  if (c->facts.materialize[in->result]) materialize(c, in->result);
}

/* Compares on tiles fold in their slot's guard (the instance's validity,
 * the lane's ownership of a partial repeat): the values of slots that do
 * not count are never used, and memory ops need not AND it in again. */
static bool guards_compare(const IrInst *in, int slot) {
  return slot >= 0 && cg_op_text[in->op].lowering == CG_LOWER_COMPARE;
}

static CgOperand apply_at(CgCtx *c, const IrInst *in, int slot) {
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
  if (c->facts.remat[in->result]) return; /* each access computes it (memory.c) */
  if (r->form == CG_FORM_AFFINE) {
    lower_affine(c, in);
    return;
  }
  if (r->form != CG_FORM_SLOTS) {
    r->op = apply_at(c, in, -1);
    return;
  }
  int slots = cg_layout_of(c, in->result)->slots;
  if (!(r->slots = cg_new_slots(c, slots)) || divide_by_one(c, in, r)) return;
  for (int k = 0; k < slots && cg_ok(c); k++) r->slots[k] = apply_at(c, in, k);
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
  l->uniform = c->programs == 1 || c->facts.uniform[in->result];
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

static void lower_endfor(CgCtx *c, LoopStack *s) {
  if (s->depth == 0) return;
  const Loop *l = &s->loops[--s->depth];
  assign_iters(c, s, l);
  CgOperand more = cg_reg(&c->em, CG_PRED);
  const char *type = cg_elem_ptx(l->elem);
  cg_line(&c->em, "add.%s %s, %s, %s;", type, CG_N(l->var), CG_N(l->var), CG_N(l->step));
  cg_line(&c->em, "setp.lt.%s %s, %s, %s;", type, CG_N(more), CG_N(l->var), CG_N(l->end));
  cg_line(&c->em, "@%s %s $Lloop_%d;", CG_N(more), branch(l->uniform), l->inst);
  cg_raw(&c->em, "$Lend_%d:\n", l->inst);
}

/* ---- dispatch --------------------------------------------------------------- */

static void lower_inst(CgCtx *c, LoopStack *s, int i) {
  const IrInst *in = &c->p->insts[i];
  if (in->op != TJ_OP_CONST && in->op != TJ_OP_YIELD && in->op != TJ_OP_ITER) annotate(c, i);
  switch ((tj_op)in->op) {
  case TJ_OP_PROGRAM_ID: lower_program_id(c, in, c->inst); break;
  case TJ_OP_NUM_PROGRAMS: lower_program_id(c, in, c->count); break;
  case TJ_OP_PARAM: lower_param(c, in); break;
  case TJ_OP_CONST: lower_const(c, in); break;
  case TJ_OP_ARANGE: lower_affine(c, in); break;
  case TJ_OP_ADD:
  case TJ_OP_SUB:
  case TJ_OP_MUL:
  case TJ_OP_DIV:
  case TJ_OP_MAX:
  case TJ_OP_MIN:
  case TJ_OP_NEG:
  case TJ_OP_EXP:
  case TJ_OP_EXP2:
  case TJ_OP_LOG:
  case TJ_OP_LT:
  case TJ_OP_LE:
  case TJ_OP_GT:
  case TJ_OP_GE:
  case TJ_OP_EQ:
  case TJ_OP_NE:
  case TJ_OP_AND:
  case TJ_OP_OR:
  case TJ_OP_SELECT:
  case TJ_OP_CAST: lower_elementwise(c, in); break;
  case TJ_OP_PTR_ADD: cg_lower_ptr_add(c, i); break;
  case TJ_OP_LOAD: cg_lower_load(c, i); break;
  case TJ_OP_STORE: cg_lower_store(c, i); break;
  case TJ_OP_REDUCE_MAX:
  case TJ_OP_REDUCE_SUM: cg_lower_reduce(c, i); break;
  case TJ_OP_FOR: lower_for(c, s, i); break;
  case TJ_OP_ITER: break; /* set up by its for */
  case TJ_OP_YIELD: s->yielded[in->args[0]] = c->vals[in->args[1]].op; break;
  case TJ_OP_ENDFOR: lower_endfor(c, s); break;
  case TJ_OP_CONSTEXPR:
  case TJ_OP_COUNT:
    cg_fail(c, TJ_ERR_UNSUPPORTED, "codegen: %s in a specialized program", ir_ops[in->op].name);
    break;
  }
}

/* ---- skeleton --------------------------------------------------------------- */

/* Computed once, before the loop over instances. */
static bool hoisted(const CgCtx *c, int i) {
  int v = c->p->insts[i].result;
  if (v == IR_NONE || c->p->scopes[v] != IR_NONE || !c->facts.invariant[v]) return false;
  CgForm f = (CgForm)c->facts.form[v];
  return f == CG_FORM_SCALAR || f == CG_FORM_POINTER || f == CG_FORM_SPLAT;
}

static void thread_indices(CgCtx *c) {
  CgEmit *e = &c->em;
  c->tid = cg_reg(e, CG_B32);
  cg_line(e, "mov.u32 %s, %%tid.x;", CG_N(c->tid));
  c->lane = c->tid;
  c->group_index = cg_imm_int(CG_B32, 0);
  if (c->programs == 1) return;
  c->lane = cg_reg(e, CG_B32);
  c->group_index = cg_reg(e, CG_B32);
  cg_line(e, "and.b32 %s, %s, %d;", CG_N(c->lane), CG_N(c->tid), c->group - 1);
  cg_line(e, "shr.u32 %s, %s, %d;", CG_N(c->group_index), CG_N(c->tid), log2i(c->group));
}

static bool has_wide_tile(const CgCtx *c, int layout) {
  for (int v = 0; v < c->p->nvalues; v++)
    if (c->p->types[v].shape == TJ_TILE && c->p->types[v].elem == TJ_I64 &&
        c->vals[v].layout == layout)
      return true;
  return false;
}

static void layout_bases(CgCtx *c) {
  for (int i = 0; i < c->nlayouts; i++) {
    CgLayout *l = &c->layouts[i];
    l->base32 = c->lane;
    if (l->vec > 1) {
      l->base32 = cg_reg(&c->em, CG_B32);
      cg_line(&c->em, "shl.b32 %s, %s, %d;", CG_N(l->base32), CG_N(c->lane), log2i(l->vec));
    }
    if (has_wide_tile(c, i)) {
      l->base64 = cg_reg(&c->em, CG_B64);
      cg_line(&c->em, "cvt.u64.u32 %s, %s;", CG_N(l->base64), CG_N(l->base32));
    }
    if (l->partial < 0) continue;
    l->slot_ok = cg_reg(&c->em, CG_PRED);
    cg_line(&c->em, "setp.lt.u32 %s, %s, %d;", CG_N(l->slot_ok), CG_N(c->lane), l->partial_lanes);
  }
}

/* Shared-memory addresses of cross-warp reductions: where this warp writes
 * its partial, and where its group's partials start. */
static bool has_reduction(const CgCtx *c) {
  for (int i = 0; i < c->p->ninsts; i++)
    if (c->p->insts[i].op == TJ_OP_REDUCE_MAX || c->p->insts[i].op == TJ_OP_REDUCE_SUM) return true;
  return false;
}

static void shared_addresses(CgCtx *c) {
  if (c->group <= 32 || !has_reduction(c)) return;
  c->smem_used = true;
  CgEmit *e = &c->em;
  CgOperand base = cg_reg(e, CG_B32), lane = cg_reg(e, CG_B32);
  c->smem_region = ((c->warps * 4) + 15) / 16 * 16;
  cg_line(e, "mov.u32 %s, tj_smem;", CG_N(base));
  cg_line(e, "and.b32 %s, %s, 31;", CG_N(lane), CG_N(c->tid));
  c->lane0 = cg_reg(e, CG_PRED);
  cg_line(e, "setp.eq.u32 %s, %s, 0;", CG_N(c->lane0), CG_N(lane));
  CgOperand warp = cg_reg(e, CG_B32);
  cg_line(e, "shr.u32 %s, %s, 3;", CG_N(warp), CG_N(c->tid));
  cg_line(e, "and.b32 %s, %s, -4;", CG_N(warp), CG_N(warp));
  c->smem_write = cg_reg(e, CG_B32);
  cg_line(e, "add.s32 %s, %s, %s;", CG_N(c->smem_write), CG_N(base), CG_N(warp));
  c->smem_read = base;
  if (c->programs == 1) return;
  CgOperand offset = cg_reg(e, CG_B32);
  c->smem_read = cg_reg(e, CG_B32);
  cg_line(e, "shl.b32 %s, %s, %d;", CG_N(offset), CG_N(c->group_index), log2i(c->group / 32) + 2);
  cg_line(e, "add.s32 %s, %s, %s;", CG_N(c->smem_read), CG_N(base), CG_N(offset));
}

/* The grid-stride loop's head: the CTA's first instance and its stride. */
static void instance_loop_head(CgCtx *c, CgOperand *first, CgOperand *stride) {
  CgEmit *e = &c->em;
  CgOperand cta = cg_reg(e, CG_B32), ctas = cg_reg(e, CG_B32), done = cg_reg(e, CG_PRED);
  c->count = cg_reg(e, CG_B64);
  *first = cg_reg(e, CG_B64);
  *stride = cg_reg(e, CG_B64);
  cg_line(e, "ld.param.u64 %s, [tj_programs];", CG_N(c->count));
  cg_line(e, "mov.u32 %s, %%ctaid.x;", CG_N(cta));
  cg_line(e, "mov.u32 %s, %%nctaid.x;", CG_N(ctas));
  if (c->programs == 1) {
    cg_line(e, "cvt.u64.u32 %s, %s;", CG_N(*first), CG_N(cta));
    cg_line(e, "cvt.u64.u32 %s, %s;", CG_N(*stride), CG_N(ctas));
  } else {
    cg_line(e, "mul.wide.u32 %s, %s, %d;", CG_N(*first), CG_N(cta), c->programs);
    cg_line(e, "mul.wide.u32 %s, %s, %d;", CG_N(*stride), CG_N(ctas), c->programs);
  }
  cg_line(e, "setp.ge.u64 %s, %s, %s;", CG_N(done), CG_N(*first), CG_N(c->count));
  cg_line(e, "@%s bra.uni $Ldone;", CG_N(done));
}

/* Per instance: its index, its validity, and each layout's guard. */
static void instance_start(CgCtx *c, CgOperand first, CgOperand group64) {
  CgEmit *e = &c->em;
  cg_raw(e, "$Linst:\n");
  c->inst = first;
  c->inst_valid = cg_true();
  if (c->programs > 1) {
    c->inst = cg_reg(e, CG_B64);
    c->inst_valid = cg_reg(e, CG_PRED);
    cg_line(e, "add.s64 %s, %s, %s;", CG_N(c->inst), CG_N(first), CG_N(group64));
    cg_line(e, "setp.lt.u64 %s, %s, %s;", CG_N(c->inst_valid), CG_N(c->inst), CG_N(c->count));
  }
  for (int i = 0; i < c->nlayouts; i++) {
    CgLayout *l = &c->layouts[i];
    if (l->partial >= 0) l->guard = cg_and_pred(c, l->slot_ok, c->inst_valid);
  }
}

static void instance_end(CgCtx *c, CgOperand first, CgOperand stride) {
  CgOperand more = cg_reg(&c->em, CG_PRED);
  cg_line(&c->em, "add.s64 %s, %s, %s;", CG_N(first), CG_N(first), CG_N(stride));
  cg_line(&c->em, "setp.lt.u64 %s, %s, %s;", CG_N(more), CG_N(first), CG_N(c->count));
  cg_line(&c->em, "@%s bra.uni $Linst;", CG_N(more));
  cg_raw(&c->em, "$Ldone:\n");
  cg_line(&c->em, "ret;");
}

void cg_lower_kernel(CgCtx *c) {
  LoopStack *s = cg_arena_alloc(&c->arena, sizeof *s);
  if (s) s->yielded = cg_arena_alloc(&c->arena, sizeof *s->yielded * ((size_t)c->p->nvalues + 1));
  if (!s || !s->yielded) {
    cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
    return;
  }
  CgOperand first, stride, group64 = cg_imm_int(CG_B64, 0);
  thread_indices(c);
  layout_bases(c);
  shared_addresses(c);
  if (c->programs > 1) {
    group64 = cg_reg(&c->em, CG_B64);
    cg_line(&c->em, "cvt.u64.u32 %s, %s;", CG_N(group64), CG_N(c->group_index));
  }
  instance_loop_head(c, &first, &stride);
  for (int i = 0; i < c->p->ninsts && cg_ok(c); i++)
    if (hoisted(c, i)) lower_inst(c, s, i);
  instance_start(c, first, group64);
  for (int i = 0; i < c->p->ninsts && cg_ok(c); i++)
    if (!hoisted(c, i)) lower_inst(c, s, i);
  instance_end(c, first, stride);
}
