/*
 * memory.c — loads, stores and pointer arithmetic.
 *
 * Addresses are 64-bit: a pointer plus an offset widened by mul.wide (i32)
 * or multiplied in 64 bits (i64). When the offsets are affine (arange + s),
 * a thread computes one address, that of its first element, and every
 * other element is an immediate displacement from it; otherwise each
 * element gets its own address.
 *
 * Affine offsets over a pointer and a start aligned to the vector move
 * whole vectors of up to 16 bytes (ld.global.v4.f32; for f16/bf16,
 * v4.b32 words each holding two halves). Masks are predicates, never
 * branches, and no access ever touches an element whose mask is false:
 *
 *   full    = the vector's mask is true everywhere (for a monotone mask
 *             such as arange + s < n, simply its last element's)
 *   @full   ld.global.v4 / st.global.v4 of the whole vector
 *   @part_i ld.global / st.global of element i, part_i = mask_i and !full
 *
 * A load first moves `other` (default 0) into every register it may leave
 * untouched, then issues all vector loads of the tile before anything else,
 * so they are in flight together. The instance's validity and a lane's
 * ownership of a partial repeat (layout.c) are part of every predicate.
 */
#include "codegen/codegen.h"

#include <stdio.h>
#include <string.h>

#define MAX_CHUNK 8

typedef struct Access {
  CgCtx *c;
  const IrInst *in;
  CgLayout *l;
  tj_elem elem; /* the pointee */
  int esize, chunk;
  CgOperand ptr;
  int offsets, mask; /* values (mask: IR_NONE when there is none) */
  bool affine, monotone;
  CgOperand addr0;  /* affine: address of the thread's first element */
  CgOperand *addrs; /* otherwise: per slot */
} Access;

static int log2i(int64_t v) {
  int n = 0;
  while (v > 1) {
    v >>= 1;
    n++;
  }
  return n;
}

static int pointee_size(const CgCtx *c, const IrInst *in) {
  return cg_elem_size((tj_elem)c->p->types[in->args[0]].elem);
}

int cg_access_chunk(CgCtx *c, int inst, int vec) {
  const IrInst *in = &c->p->insts[inst];
  int offsets = in->args[1], esize = pointee_size(c, in);
  int chunk = vec < 16 / esize ? vec : 16 / esize;
  if (c->facts.form[offsets] != CG_FORM_AFFINE || chunk < 2) return 1;
  if (c->facts.align[in->args[0]] < log2i(chunk * esize) || c->facts.pow2[offsets] < log2i(chunk))
    return 1;
  return chunk;
}

/* ---- addresses ------------------------------------------------------------- */

/* pointer + offset * esize, the offset an i32 or i64 operand. */
static CgOperand scaled_address(CgCtx *c, CgOperand ptr, CgOperand offset, int esize) {
  CgOperand bytes = cg_reg(&c->em, CG_B64), d = cg_reg(&c->em, CG_B64);
  if (offset.cls == CG_B32)
    cg_line(&c->em, "mul.wide.s32 %s, %s, %d;", CG_N(bytes), CG_N(offset), esize);
  else
    cg_line(&c->em, "shl.b64 %s, %s, %d;", CG_N(bytes), CG_N(offset), log2i(esize));
  cg_line(&c->em, "add.s64 %s, %s, %s;", CG_N(d), CG_N(ptr), CG_N(bytes));
  return d;
}

void cg_lower_ptr_add(CgCtx *c, int inst) {
  const IrInst *in = &c->p->insts[inst];
  CgOperand ptr = c->vals[in->args[0]].op, offset = c->vals[in->args[1]].op;
  int esize = cg_elem_size((tj_elem)c->p->types[in->result].elem);
  CgVal *r = &c->vals[in->result];
  if (!offset.imm) {
    r->op = scaled_address(c, ptr, offset, esize);
    return;
  }
  int64_t bytes =
      (offset.cls == CG_B32 ? (int64_t)(int32_t)offset.bits : (int64_t)offset.bits) * esize;
  r->op = ptr;
  if (!bytes) return;
  r->op = cg_reg(&c->em, CG_B64);
  cg_line(&c->em, "add.s64 %s, %s, %lld;", CG_N(r->op), CG_N(ptr), (long long)bytes);
}

/* The address of the thread's first element: ptr + (t*VEC + start) * esize. */
static CgOperand thread_address(Access *a) {
  CgCtx *c = a->c;
  const CgVal *o = &c->vals[a->offsets];
  bool wide = o->elem == TJ_I64;
  CgOperand index = wide ? a->l->base64 : a->l->base32;
  if (!(o->op.imm && o->op.bits == 0)) {
    CgOperand sum = cg_reg(&c->em, wide ? CG_B64 : CG_B32);
    cg_line(&c->em, "add.%s %s, %s, %s;", wide ? "s64" : "s32", CG_N(sum), CG_N(index),
            CG_N(o->op));
    index = sum;
  }
  return scaled_address(c, a->ptr, index, a->esize);
}

static void setup(Access *a, CgCtx *c, int inst, int mask_arg) {
  const IrInst *in = &c->p->insts[inst];
  memset(a, 0, sizeof *a);
  a->c = c;
  a->in = in;
  a->offsets = in->args[1];
  a->l = cg_layout_of(c, a->offsets);
  a->elem = (tj_elem)c->p->types[in->args[0]].elem;
  a->esize = cg_elem_size(a->elem);
  a->chunk = cg_access_chunk(c, inst, a->l->vec);
  a->ptr = c->vals[in->args[0]].op;
  a->mask = in->nargs > mask_arg ? in->args[mask_arg] : IR_NONE;
  a->monotone = a->mask != IR_NONE && c->facts.monotone[a->mask];
  a->affine = c->facts.form[a->offsets] == CG_FORM_AFFINE;
  if (a->affine) {
    a->addr0 = thread_address(a);
    return;
  }
  if (!(a->addrs = cg_new_slots(c, a->l->slots))) return;
  for (int k = 0; k < a->l->slots; k++)
    a->addrs[k] = scaled_address(c, a->ptr, cg_slot(c, a->offsets, k), a->esize);
}

static CgName address(const Access *a, int slot) {
  if (!a->affine) return cg_address(a->addrs[slot], 0);
  return cg_address(a->addr0, cg_slot_offset(a->c, a->l, slot) * a->esize);
}

/* ---- predicates ------------------------------------------------------------ */

typedef struct Preds {
  CgOperand full;
  CgOperand part[MAX_CHUNK];
  bool has_part[MAX_CHUNK];
} Preds;

static bool one_value(const CgCtx *c, int v) {
  return c->facts.form[v] == CG_FORM_SCALAR || c->facts.form[v] == CG_FORM_SPLAT;
}

static CgOperand and_not(CgCtx *c, CgOperand a, CgOperand b) {
  CgOperand d = cg_reg(&c->em, CG_PRED);
  cg_line(&c->em, "and.pred %s, %s, !%s;", CG_N(d), CG_N(a), CG_N(b));
  return d;
}

/* Predicates of the n slots from k0, all in one repeat. */
static Preds chunk_preds(Access *a, int k0, int n) {
  CgCtx *c = a->c;
  Preds p;
  memset(&p, 0, sizeof p);
  CgOperand guard = cg_guard(c, a->l, k0 / a->l->vec), m[MAX_CHUNK] = {{0}};
  if (a->mask == IR_NONE || one_value(c, a->mask)) {
    p.full = a->mask == IR_NONE ? guard : cg_and_pred(c, guard, c->vals[a->mask].op);
    return p;
  }
  if (c->vals[a->mask].guarded) guard = cg_true();
  for (int v = 0; v < n; v++) m[v] = cg_and_pred(c, guard, cg_slot(c, a->mask, k0 + v));
  p.full = m[n - 1];
  for (int v = 0; v < n - 1 && !a->monotone; v++) p.full = cg_and_pred(c, p.full, m[v]);
  for (int v = 0; v < n && n > 1; v++) {
    if (a->monotone && v == n - 1) continue;
    p.part[v] = and_not(c, m[v], p.full);
    p.has_part[v] = true;
  }
  return p;
}

/* "@%p3 " before a predicated instruction, nothing before another. */
static CgName prefix(CgOperand pred) {
  CgName n = {""};
  if (cg_is_true(pred)) return n;
  CgName p = cg_name(pred);
  n.s[0] = '@';
  size_t len = strlen(p.s);
  memcpy(n.s + 1, p.s, len);
  n.s[len + 1] = ' ';
  n.s[len + 2] = '\0';
  return n;
}

/* ---- types ---------------------------------------------------------------- */

static bool half(const Access *a) { return a->esize == 2; }

static const char *scalar_type(const Access *a) {
  return a->elem == TJ_F32 ? "f32" : a->esize == 8 ? "b64" : a->esize == 2 ? "b16" : "b32";
}

/* Registers one vector access moves: halves travel in b32 words. */
static int words(const Access *a) { return half(a) ? a->chunk / 2 : a->chunk; }

static void vector_type(const Access *a, char *out, size_t size) {
  const char *t = half(a) ? "b32" : scalar_type(a);
  if (words(a) == 1)
    snprintf(out, size, "%s", t);
  else
    snprintf(out, size, "v%d.%s", words(a), t);
}

/* "%f1, %f2, %f3, %f4" (out holds at least 4 names). */
static void operand_list(const CgOperand *ops, int n, char *out) {
  for (int i = 0; i < n; i++) {
    CgName name = cg_name(ops[i]);
    if (i) *out++ = ',', *out++ = ' ';
    size_t len = strlen(name.s);
    memcpy(out, name.s, len);
    out += len;
  }
  *out = '\0';
}

/* ---- other ----------------------------------------------------------------- */

/* The load's `other`, converted to the pointee type (0 when absent). */
static CgOperand other_value(Access *a) {
  CgCtx *c = a->c;
  CgClass cls = cg_elem_class(a->elem);
  if (a->in->nargs < 4) return cg_imm(cls, 0);
  CgOperand o = c->vals[a->in->args[3]].op;
  tj_elem from = (tj_elem)c->p->types[a->in->args[3]].elem;
  if (!o.imm || from == TJ_I64 || (from == TJ_F32 && (a->elem == TJ_I32 || a->elem == TJ_I64)))
    return cg_cast(c, o, from, a->elem);
  if (from == a->elem) return o;
  float f = (float)(int32_t)(uint32_t)o.bits;
  if (from == TJ_F32) {
    uint32_t bits = (uint32_t)o.bits;
    memcpy(&f, &bits, sizeof f);
  }
  switch (a->elem) {
  case TJ_F32: return cg_imm_f32(f);
  case TJ_F16: return cg_imm(CG_B16, tj_f32_to_f16(f));
  case TJ_BF16: return cg_imm(CG_B16, tj_f32_to_bf16(f));
  default: return cg_cast(c, o, from, a->elem);
  }
}

static CgOperand packed_pair(CgCtx *c, CgOperand h) {
  if (h.imm) return cg_imm(CG_B32, (h.bits & 0xFFFFu) | (h.bits & 0xFFFFu) << 16);
  CgOperand w = cg_reg(&c->em, CG_B32);
  cg_line(&c->em, "mov.b32 %s, {%s, %s};", CG_N(w), CG_N(h), CG_N(h));
  return w;
}

static void mov_other(CgCtx *c, CgOperand d, CgOperand other) {
  const char *t = d.cls == CG_F32   ? "f32"
                  : d.cls == CG_B64 ? "b64"
                  : d.cls == CG_B16 ? "b16"
                                    : "b32";
  cg_line(&c->em, "mov.%s %s, %s;", t, CG_N(d), CG_N(other));
}

/* ---- loads ------------------------------------------------------------------ */

static void load_vectors(Access *a, CgOperand *dst) {
  CgCtx *c = a->c;
  int n = a->chunk, chunks = a->l->slots / n, nw = words(a);
  Preds *p = cg_arena_alloc(&c->arena, sizeof *p * (size_t)chunks);
  CgOperand *w = cg_new_slots(c, chunks * nw);
  if (!p || !w) return;
  for (int q = 0; q < chunks; q++) p[q] = chunk_preds(a, q * n, n);
  CgOperand other = other_value(a), other_word = half(a) ? packed_pair(c, other) : other;
  for (int i = 0; i < chunks * nw; i++) w[i] = half(a) ? cg_reg(&c->em, CG_B32) : dst[i];
  for (int q = 0; q < chunks; q++)
    for (int i = 0; i < nw && !cg_is_true(p[q].full); i++) mov_other(c, w[q * nw + i], other_word);
  char type[16], list[160];
  vector_type(a, type, sizeof type);
  for (int q = 0; q < chunks; q++) {
    operand_list(w + q * nw, nw, list);
    cg_line(&c->em, "%sld.global.%s %s%s%s, %s;", prefix(p[q].full).s, type, nw > 1 ? "{" : "",
            list, nw > 1 ? "}" : "", address(a, q * n).s);
  }
  for (int i = 0; i < chunks * nw && half(a); i++)
    cg_line(&c->em, "mov.b32 {%s, %s}, %s;", CG_N(dst[2 * i]), CG_N(dst[2 * i + 1]), CG_N(w[i]));
  for (int q = 0; q < chunks; q++)
    for (int v = 0; v < n; v++)
      if (p[q].has_part[v])
        cg_line(&c->em, "@%s ld.global.%s %s, %s;", CG_N(p[q].part[v]), scalar_type(a),
                CG_N(dst[q * n + v]), address(a, q * n + v).s);
}

static void load_elements(Access *a, CgOperand *dst) {
  CgCtx *c = a->c;
  int slots = a->l->slots;
  Preds *p = cg_arena_alloc(&c->arena, sizeof *p * (size_t)slots);
  if (!p) return;
  for (int k = 0; k < slots; k++) p[k] = chunk_preds(a, k, 1);
  CgOperand other = other_value(a);
  for (int k = 0; k < slots; k++)
    if (!cg_is_true(p[k].full)) mov_other(c, dst[k], other);
  for (int k = 0; k < slots; k++) {
    cg_line(&c->em, "%sld.global.%s %s, %s;", prefix(p[k].full).s, scalar_type(a), CG_N(dst[k]),
            address(a, k).s);
  }
}

void cg_lower_load(CgCtx *c, int inst) {
  Access a;
  setup(&a, c, inst, 2);
  CgVal *r = &c->vals[c->p->insts[inst].result];
  if (!cg_ok(c) || !(r->slots = cg_new_slots(c, a.l->slots))) return;
  for (int k = 0; k < a.l->slots; k++) r->slots[k] = cg_reg_of(c, a.elem);
  if (a.chunk > 1)
    load_vectors(&a, r->slots);
  else
    load_elements(&a, r->slots);
}

/* ---- stores ----------------------------------------------------------------- */

static void store_values(Access *a, CgOperand *v) {
  CgCtx *c = a->c;
  int value = a->in->args[2];
  CgOperand one = one_value(c, value) ? cg_in_reg(c, c->vals[value].op) : cg_imm(CG_B32, 0);
  for (int k = 0; k < a->l->slots; k++)
    v[k] = one_value(c, value) ? one : cg_in_reg(c, cg_slot(c, value, k));
}

static void store_vectors(Access *a, const CgOperand *v) {
  CgCtx *c = a->c;
  int n = a->chunk, chunks = a->l->slots / n, nw = words(a);
  Preds *p = cg_arena_alloc(&c->arena, sizeof *p * (size_t)chunks);
  CgOperand *w = cg_new_slots(c, chunks * nw);
  if (!p || !w) return;
  for (int q = 0; q < chunks; q++) p[q] = chunk_preds(a, q * n, n);
  for (int i = 0; i < chunks * nw; i++) {
    w[i] = v[i];
    if (!half(a)) continue;
    w[i] = cg_reg(&c->em, CG_B32);
    cg_line(&c->em, "mov.b32 %s, {%s, %s};", CG_N(w[i]), CG_N(v[2 * i]), CG_N(v[2 * i + 1]));
  }
  char type[16], list[160];
  vector_type(a, type, sizeof type);
  for (int q = 0; q < chunks; q++) {
    operand_list(w + q * nw, nw, list);
    cg_line(&c->em, "%sst.global.%s %s, %s%s%s;", prefix(p[q].full).s, type, address(a, q * n).s,
            nw > 1 ? "{" : "", list, nw > 1 ? "}" : "");
  }
  for (int q = 0; q < chunks; q++)
    for (int k = 0; k < n; k++)
      if (p[q].has_part[k])
        cg_line(&c->em, "@%s st.global.%s %s, %s;", CG_N(p[q].part[k]), scalar_type(a),
                address(a, q * n + k).s, CG_N(v[q * n + k]));
}

static void store_elements(Access *a, const CgOperand *v) {
  for (int k = 0; k < a->l->slots; k++) {
    Preds p = chunk_preds(a, k, 1);
    cg_line(&a->c->em, "%sst.global.%s %s, %s;", prefix(p.full).s, scalar_type(a), address(a, k).s,
            CG_N(v[k]));
  }
}

void cg_lower_store(CgCtx *c, int inst) {
  Access a;
  setup(&a, c, inst, 3);
  CgOperand *v = cg_ok(c) ? cg_new_slots(c, a.l->slots) : NULL;
  if (!v) return;
  store_values(&a, v);
  if (a.chunk > 1)
    store_vectors(&a, v);
  else
    store_elements(&a, v);
}
