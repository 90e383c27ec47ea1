/*
 * analyze.c — facts about every value, computed before any PTX is written.
 *
 *   form        how the lowering holds a value. A splat tile (every element
 *               equal, e.g. a const or a scalar broadcast) costs one register;
 *               an affine tile (arange + s) costs one scalar, s, and gives
 *               loads and stores their contiguous, vectorizable addresses;
 *               other tiles get one register per slot a thread owns.
 *   pow2        a power of two known to divide an integer (for an affine
 *               tile, its start), so that arange + c with c a multiple of
 *               VEC keeps 16-byte alignment. ALIGN's contract: every pointer
 *               parameter is ALIGN-byte aligned, and every i64 parameter (a
 *               row stride, in elements) times the widest pointee's size is
 *               a multiple of ALIGN. i32 parameters (sizes such as n) are
 *               multiples of DIV (tj_spec_options.multiple, 1 unless given).
 *   align       the guaranteed byte alignment of each pointer.
 *   uniform     equal in every program instance of a CTA (needed to let
 *               instances share a CTA around loops that hold reductions).
 *   invariant   equal in every instance: computed once, before the loop
 *               over instances.
 *   monotone    a mask that is true on a prefix of every run of consecutive
 *               elements (arange + s < n): a vector is wholly in bounds when
 *               its last element is.
 *   remat       a monotone tile mask whose only uses are the masks of loads
 *               and stores (directly or through and/or that are remat too):
 *               it gets no registers, and each access computes the
 *               predicates it needs again (memory.c), so no mask predicate
 *               lives from a load to a store.
 *   fold        an f32 tile, computed elementwise, whose only use is a
 *               reduction in its scope while one of its operand tiles lives
 *               on past that reduction (log-softmax's exp(x - max), summed
 *               while x - max is kept for the output; softmax backward's
 *               dy * y): it gets no registers, and the reduction computes
 *               each slot as it adds it in (reduce.c), so the whole tile
 *               never lives beside its operands. Left in registers, it
 *               made log-softmax's f32 rows of 1024 spill (28 bytes at the
 *               56 registers where softmax fits in 54, 32 bytes at 64).
 *   shift       an f32 tile exp(t - m), m = reduce_max t, whose t - m has
 *               no other use and whose own uses are sums, and products with
 *               or quotients by one f32 scalar (softmax's e, summed and
 *               scaled by 1 / s): where exp_shift.c applies it, it is
 *               computed as 2^(t log2 e - o) with o = m log2 e rounded, an
 *               fma and an ex2 a slot rather than a sub, a mul and an ex2,
 *               and its scaling use takes out the common factor that o's
 *               rounding leaves in every slot. Its t - m (shift 2) then
 *               gets no registers.
 *
 * Loops make pow2 and uniform fixpoints over iter values; they converge in
 * a few passes because both only ever decrease.
 */
#include "codegen/codegen.h"

#include <string.h>

typedef struct Pass {
  CgCtx *c;
  const tj_program *p;
  CgFacts *f;
  int32_t *yield_of; /* per iter value: the value yielded to it */
} Pass;

static tj_type type_of(const Pass *a, int v) { return a->p->types[v]; }

static bool one_value(const Pass *a, int v) {
  return a->f->form[v] == CG_FORM_SCALAR || a->f->form[v] == CG_FORM_SPLAT;
}

static bool affine(const Pass *a, int v) { return a->f->form[v] == CG_FORM_AFFINE; }

static bool is_int(tj_elem e) { return e == TJ_I32 || e == TJ_I64; }

/* ---- forms --------------------------------------------------------------- */

static CgForm tile_form(const Pass *a, const IrInst *in) {
  const int32_t *x = in->args;
  tj_elem out = (tj_elem)type_of(a, in->result).elem;
  switch ((tj_op)in->op) {
  case TJ_OP_CONST: return CG_FORM_SPLAT;
  case TJ_OP_ARANGE: return CG_FORM_AFFINE;
  case TJ_OP_LOAD: return CG_FORM_SLOTS;
  case TJ_OP_ADD:
    if ((affine(a, x[0]) && one_value(a, x[1])) || (affine(a, x[1]) && one_value(a, x[0])))
      return CG_FORM_AFFINE;
    break;
  case TJ_OP_SUB:
    if (affine(a, x[0]) && one_value(a, x[1])) return CG_FORM_AFFINE;
    break;
  case TJ_OP_CAST:
    if (affine(a, x[0]) && is_int(out)) return CG_FORM_AFFINE;
    break;
  default: break;
  }
  if (ir_ops[in->op].kind != KIND_ELEMENTWISE) return CG_FORM_SLOTS;
  for (int i = 0; i < in->nargs; i++)
    if (!one_value(a, x[i])) return CG_FORM_SLOTS;
  return CG_FORM_SPLAT;
}

static bool is_monotone(const Pass *a, const IrInst *in) {
  const int32_t *x = in->args;
  switch ((tj_op)in->op) {
  case TJ_OP_LT:
  case TJ_OP_LE: return affine(a, x[0]) && one_value(a, x[1]);
  case TJ_OP_GT:
  case TJ_OP_GE: return one_value(a, x[0]) && affine(a, x[1]);
  case TJ_OP_AND:
  case TJ_OP_OR:
    return (a->f->monotone[x[0]] || one_value(a, x[0])) &&
           (a->f->monotone[x[1]] || one_value(a, x[1]));
  default: return false;
  }
}

/* An affine operand stays symbolic only where its user takes it as such. */
static bool keeps_affine(const Pass *a, const IrInst *in, int arg) {
  tj_op op = (tj_op)in->op;
  if ((op == TJ_OP_LOAD || op == TJ_OP_STORE) && arg == 1) return true;
  return in->result != IR_NONE && affine(a, in->result) &&
         (op == TJ_OP_ADD || op == TJ_OP_SUB || op == TJ_OP_CAST);
}

static void forms(Pass *a) {
  for (int i = 0; i < a->p->ninsts; i++) {
    const IrInst *in = &a->p->insts[i];
    int r = in->result;
    if (r == IR_NONE) continue;
    tj_type t = type_of(a, r);
    a->f->form[r] = (uint8_t)(t.shape == TJ_POINTER  ? CG_FORM_POINTER
                              : t.shape == TJ_SCALAR ? CG_FORM_SCALAR
                                                     : tile_form(a, in));
    if (t.shape == TJ_TILE && t.elem == TJ_PRED)
      a->f->monotone[r] = a->f->form[r] == CG_FORM_SPLAT || is_monotone(a, in);
  }
}

/* Whether argument k of in is a use that a recomputed mask can serve. */
static bool mask_use(const Pass *a, const IrInst *in, int k) {
  tj_op op = (tj_op)in->op;
  if ((op == TJ_OP_LOAD && k == 2) || (op == TJ_OP_STORE && k == 3)) return true;
  return (op == TJ_OP_AND || op == TJ_OP_OR) && a->f->remat[in->result];
}

/* Backwards, so that every use of a value is seen before its definition. */
static void remat_masks(Pass *a, uint8_t *other_use) {
  for (int i = a->p->ninsts - 1; i >= 0; i--) {
    const IrInst *in = &a->p->insts[i];
    int r = in->result;
    if (r != IR_NONE && a->f->monotone[r] && a->f->form[r] == CG_FORM_SLOTS && !other_use[r])
      a->f->remat[r] = 1;
    for (int k = 0; k < in->nargs; k++)
      if (!mask_use(a, in, k)) other_use[in->args[k]] = 1;
  }
}

/* The fold fact (above). uses[v] counts v's uses, last[v] its last user. */
static void folds(Pass *a, const int32_t *uses, const int32_t *last) {
  const tj_program *p = a->p;
  for (int i = 0; i < p->ninsts; i++) {
    const IrInst *in = &p->insts[i];
    int v = in->result;
    if (v == IR_NONE || ir_ops[in->op].kind != KIND_ELEMENTWISE || type_of(a, v).elem != TJ_F32 ||
        a->f->form[v] != CG_FORM_SLOTS || uses[v] != 1)
      continue;
    const IrInst *red = &p->insts[last[v]];
    if ((red->op != TJ_OP_REDUCE_SUM && red->op != TJ_OP_REDUCE_MAX) ||
        p->scopes[red->result] != p->scopes[v])
      continue;
    if (in->op == TJ_OP_DIV && a->f->form[in->args[1]] != CG_FORM_SLOTS)
      continue; /* one reciprocal for the tile (lower.c), not a div a slot */
    bool outlives = false;
    for (int k = 0; k < in->nargs; k++)
      outlives |= a->f->form[in->args[k]] == CG_FORM_SLOTS && last[in->args[k]] > last[v];
    a->f->fold[v] = outlives;
  }
}

/* Whether use u of exp value e keeps the shift fact: a sum, or a product
 * with (a quotient by) one f32 scalar in e's scope. */
static bool shift_use(const Pass *a, const IrInst *u, int k, int e) {
  if (u->op == TJ_OP_REDUCE_SUM) return true;
  int other = u->nargs == 2 ? u->args[1 - k] : IR_NONE;
  return (u->op == TJ_OP_MUL || (u->op == TJ_OP_DIV && k == 0)) && other != e &&
         other != IR_NONE && a->f->form[other] == CG_FORM_SCALAR &&
         type_of(a, other).elem == TJ_F32 && a->p->scopes[u->result] == a->p->scopes[e];
}

/* The shift fact (above): 1 on the exp, 2 on its t - m. The exps whose own
 * shape qualifies first, then one pass over every use clears the rest. */
static void shifts(Pass *a, const int32_t *uses) {
  const tj_program *p = a->p;
  for (int i = 0; i < p->ninsts; i++) {
    const IrInst *in = &p->insts[i];
    int e = in->result, d = in->nargs ? in->args[0] : IR_NONE;
    if (in->op != TJ_OP_EXP || type_of(a, e).elem != TJ_F32 || a->f->form[e] != CG_FORM_SLOTS ||
        a->f->fold[e] || a->f->form[d] != CG_FORM_SLOTS || a->f->fold[d] || uses[d] != 1)
      continue;
    const IrInst *sub = &p->insts[p->defs[d]];
    int t = sub->args[0], m = sub->nargs == 2 ? sub->args[1] : IR_NONE;
    const IrInst *max = m != IR_NONE ? &p->insts[p->defs[m]] : NULL;
    if (sub->op == TJ_OP_SUB && a->f->form[t] == CG_FORM_SLOTS && max &&
        max->op == TJ_OP_REDUCE_MAX && max->args[0] == t && p->scopes[d] == p->scopes[e])
      a->f->shift[e] = 1;
  }
  for (int j = 0; j < p->ninsts; j++)
    for (int k = 0; k < p->insts[j].nargs; k++) {
      int e = p->insts[j].args[k];
      if (a->f->shift[e] == 1 && !shift_use(a, &p->insts[j], k, e)) a->f->shift[e] = 0;
    }
  for (int i = 0; i < p->ninsts; i++)
    if (p->insts[i].op == TJ_OP_EXP && a->f->shift[p->insts[i].result] == 1)
      a->f->shift[p->insts[i].args[0]] = 2;
}

static void count_uses(const tj_program *p, int32_t *uses, int32_t *last) {
  for (int i = 0; i < p->ninsts; i++)
    for (int k = 0; k < p->insts[i].nargs; k++) {
      uses[p->insts[i].args[k]]++;
      last[p->insts[i].args[k]] = i;
    }
}

/* Affine tiles that some use needs per slot (not a recomputed mask). */
static void materialized(Pass *a) {
  for (int i = 0; i < a->p->ninsts; i++) {
    const IrInst *in = &a->p->insts[i];
    if (in->result != IR_NONE && a->f->remat[in->result]) continue;
    for (int k = 0; k < in->nargs; k++)
      if (affine(a, in->args[k]) && !keeps_affine(a, in, k)) a->f->materialize[in->args[k]] = 1;
  }
}

/* ---- divisibility and alignment ----------------------------------------- */

static int ctz64(int64_t v) {
  if (v == 0) return CG_POW2_MAX;
  int n = 0;
  while (!(v & 1) && n < CG_POW2_MAX) {
    v >>= 1;
    n++;
  }
  return n;
}

static int log2i(int64_t v) {
  int n = 0;
  while (v > 1) {
    v >>= 1;
    n++;
  }
  return n;
}

static int min2(int a, int b) { return a < b ? a : b; }

static int pow2_param(const Pass *a) {
  int elems = a->c->spec->align / (a->f->max_ptr_size ? a->f->max_ptr_size : 1);
  return elems > 1 ? log2i(elems) : 0;
}

static int pow2_of(const Pass *a, const IrInst *in) {
  const uint8_t *p2 = a->f->pow2;
  const int32_t *x = in->args;
  tj_type t = type_of(a, in->result);
  switch ((tj_op)in->op) {
  case TJ_OP_CONST: return is_int((tj_elem)t.elem) ? ctz64((int64_t)in->fimm) : 0;
  case TJ_OP_PARAM:
    return t.elem == TJ_I64 ? pow2_param(a) : t.elem == TJ_I32 ? log2i(a->c->spec->multiple) : 0;
  case TJ_OP_ARANGE: return CG_POW2_MAX;
  case TJ_OP_ADD:
  case TJ_OP_SUB:
  case TJ_OP_MAX:
  case TJ_OP_MIN: return min2(p2[x[0]], p2[x[1]]);
  case TJ_OP_MUL: return min2(CG_POW2_MAX, p2[x[0]] + p2[x[1]]);
  case TJ_OP_NEG: return p2[x[0]];
  case TJ_OP_CAST: return is_int((tj_elem)type_of(a, x[0]).elem) ? p2[x[0]] : 0;
  case TJ_OP_SELECT: return min2(p2[x[1]], p2[x[2]]);
  case TJ_OP_FOR: return min2(p2[x[0]], p2[x[2]]);
  case TJ_OP_ITER:
    return min2(p2[x[0]], a->yield_of[in->result] >= 0 ? p2[a->yield_of[in->result]] : 0);
  default: return 0;
  }
}

static int align_of(const Pass *a, const IrInst *in) {
  if (in->op == TJ_OP_PARAM) return log2i(a->c->spec->align);
  if (in->op != TJ_OP_PTR_ADD) return 0;
  int esize = cg_elem_size((tj_elem)type_of(a, in->result).elem);
  return min2(a->f->align[in->args[0]], log2i(esize) + a->f->pow2[in->args[1]]);
}

static bool divisibility_pass(Pass *a) {
  bool changed = false;
  for (int i = 0; i < a->p->ninsts; i++) {
    const IrInst *in = &a->p->insts[i];
    if (in->result == IR_NONE) continue;
    uint8_t p = (uint8_t)pow2_of(a, in), al = (uint8_t)align_of(a, in);
    changed |= p != a->f->pow2[in->result] || al != a->f->align[in->result];
    a->f->pow2[in->result] = p;
    a->f->align[in->result] = al;
  }
  return changed;
}

/* ---- uniformity ---------------------------------------------------------- */

/* uniform: per CTA; invariant: per kernel (not even loop counters). */
static bool uniform_of(const Pass *a, const IrInst *in, const uint8_t *u, bool invariant) {
  switch ((tj_op)in->op) {
  case TJ_OP_PROGRAM_ID:
  case TJ_OP_REDUCE_MAX:
  case TJ_OP_REDUCE_SUM:
  case TJ_OP_LOAD:
  case TJ_OP_ARANGE: return false;
  case TJ_OP_FOR: return !invariant && u[in->args[0]] && u[in->args[1]] && u[in->args[2]];
  case TJ_OP_ITER:
    return !invariant && u[in->args[0]] &&
           (a->yield_of[in->result] < 0 || u[a->yield_of[in->result]]);
  default: break;
  }
  for (int k = 0; k < in->nargs; k++)
    if (!u[in->args[k]]) return false;
  return true;
}

static bool uniform_pass(Pass *a, uint8_t *u, bool invariant) {
  bool changed = false;
  for (int i = 0; i < a->p->ninsts; i++) {
    const IrInst *in = &a->p->insts[i];
    if (in->result == IR_NONE) continue;
    uint8_t v = uniform_of(a, in, u, invariant);
    if (a->f->form[in->result] == CG_FORM_AFFINE || a->f->form[in->result] == CG_FORM_SLOTS) v = 0;
    changed |= v != u[in->result];
    u[in->result] = v;
  }
  return changed;
}

/* ---- loops --------------------------------------------------------------- */

static void loops(Pass *a) {
  int open[64], depth = 0;
  a->f->packable = true;
  for (int i = 0; i < a->p->ninsts; i++) {
    const IrInst *in = &a->p->insts[i];
    if (in->op == TJ_OP_FOR && depth < 64) open[depth++] = i;
    if (in->op == TJ_OP_ENDFOR && depth > 0) depth--;
    if (in->op == TJ_OP_REDUCE_MAX || in->op == TJ_OP_REDUCE_SUM)
      for (int k = 0; k < depth; k++) a->f->reduces[open[k]] = 1;
  }
  for (int i = 0; i < a->p->ninsts; i++) {
    const IrInst *in = &a->p->insts[i];
    if (in->op == TJ_OP_FOR && a->f->reduces[i] && !a->f->uniform[in->result])
      a->f->packable = false;
  }
}

static bool alloc_facts(CgCtx *c, CgFacts *f, int n, int ninsts) {
  uint8_t **arrays[] = {&f->form,     &f->pow2,        &f->align, &f->uniform, &f->invariant,
                        &f->monotone, &f->materialize, &f->remat, &f->fold,    &f->shift};
  for (size_t i = 0; i < TJ_COUNTOF(arrays); i++)
    if (!(*arrays[i] = cg_arena_alloc(&c->arena, (size_t)n + 1))) return false;
  return (f->reduces = cg_arena_alloc(&c->arena, (size_t)ninsts + 1)) != NULL;
}

static void find_yields(Pass *a) {
  for (int v = 0; v < a->p->nvalues; v++) a->yield_of[v] = -1;
  for (int i = 0; i < a->p->ninsts; i++)
    if (a->p->insts[i].op == TJ_OP_YIELD)
      a->yield_of[a->p->insts[i].args[0]] = a->p->insts[i].args[1];
}

static void max_pointer(Pass *a) {
  for (int i = 0; i < a->p->ninsts; i++) {
    const IrInst *in = &a->p->insts[i];
    if (in->op != TJ_OP_PARAM || type_of(a, in->result).shape != TJ_POINTER) continue;
    int size = cg_elem_size((tj_elem)type_of(a, in->result).elem);
    if (size > a->f->max_ptr_size) a->f->max_ptr_size = size;
  }
}

tj_status cg_analyze(CgCtx *c) {
  Pass a = {c, c->p, &c->facts, NULL};
  int n = c->p->nvalues;
  if (!alloc_facts(c, &c->facts, n, c->p->ninsts) ||
      !(a.yield_of = cg_arena_alloc(&c->arena, sizeof *a.yield_of * ((size_t)n + 1))))
    return cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  find_yields(&a);
  max_pointer(&a);
  forms(&a);
  uint8_t *other_use = cg_arena_alloc(&c->arena, (size_t)n + 1);
  if (!other_use) return cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  remat_masks(&a, other_use);
  materialized(&a);
  int32_t *uses = cg_arena_alloc(&c->arena, sizeof *uses * ((size_t)n + 1));
  int32_t *last = cg_arena_alloc(&c->arena, sizeof *last * ((size_t)n + 1));
  if (!uses || !last) return cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  memset(uses, 0, sizeof *uses * ((size_t)n + 1));
  count_uses(c->p, uses, last);
  folds(&a, uses, last);
  shifts(&a, uses);
  for (int v = 0; v < n; v++) {
    c->facts.pow2[v] = CG_POW2_MAX;
    c->facts.align[v] = 4;
    c->facts.uniform[v] = c->facts.invariant[v] = 1;
  }
  for (int pass = 0; pass < 64 && divisibility_pass(&a); pass++) continue;
  for (int pass = 0; pass < 64 && uniform_pass(&a, c->facts.uniform, false); pass++) continue;
  for (int pass = 0; pass < 64 && uniform_pass(&a, c->facts.invariant, true); pass++) continue;
  loops(&a);
  return TJ_OK;
}
