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
 *
 * A monotone mask is never kept in predicate registers from its compare to
 * its accesses (analyze.c marks it `remat`): each access computes the
 * predicates it needs again from the mask's expression (compares of an
 * affine tile with one value, and/or of those), so nothing mask-related is
 * live across the arithmetic between a load and a store, and only the one
 * predicate per vector is on the main path. For such a mask at most one
 * vector per thread is partial; its elements move in a block of their own
 * that the other threads branch over:
 *
 *   @full_q ld.global.v4 ...            every vector q
 *   @!any   bra $Lpart_K                any = some q has its first element but not its last
 *   @mask_i ld.global ...               every element but the last of each vector
 *   $Lpart_K:
 *
 * (In a phased layout lane 0's first vector may wrap: its elements move
 * in two parts there, wrapping_vector's.) Where the mask's affine starts
 * and bounds are multiples of the vector (DIV, analyze.c: n % VEC == 0 in
 * softmax), no vector is partial and there is no such block: `whole`.
 *
 * A staged load's first phase on sm_80 and later (stream.c's prefetch)
 * copies its whole vectors into the stash with cp.async instead, under the
 * same `full` predicates, and the loop reads them back from there
 * (ld.shared); the partial vector's elements come from memory as above,
 * and the loop writes each vector that was not whole to the stash.
 */
#include "codegen/codegen.h"

#include <stdio.h>
#include <string.h>

#define MAX_CHUNK 8

/* The element a slot of a phased access that may wrap stands for (phase.c):
 * the one it holds, chosen at run time (SIDE_EITHER), or, where the code
 * already knows which, the element lane*VEC + k - q (SIDE_DIRECT) or the
 * tile's one a length further on (SIDE_WRAPPED). */
typedef enum Side { SIDE_EITHER, SIDE_DIRECT, SIDE_WRAPPED } Side;

typedef struct Access {
  CgCtx *c;
  const IrInst *in;
  const char *space; /* "global", or "global.cs" (evict first: cg_stream_evict_first) */
  CgLayout *l;
  tj_elem elem; /* the pointee */
  int esize, chunk;
  CgOperand ptr;
  int offsets, mask; /* values (mask: IR_NONE when there is none) */
  bool affine, monotone;
  bool whole;        /* only whole vectors move (whole_access) */
  CgOperand addr0;   /* affine: address of the thread's first element */
  CgOperand *addrs;  /* otherwise: per slot */
  bool remat;        /* the mask is computed again here (a monotone tile mask) */
  bool wraps;        /* affine on a phased layout: slots below VEC - 1 may wrap (phase.c) */
  CgOperand aligned; /* phased vectors: this access's vectors are aligned */
  bool has_w0;       /* phased vectors: lane 0's first vector wraps when w0 holds */
  CgOperand w0;
  Side side; /* which element a slot that may wrap holds (partial_vectors) */
  int nfirst; /* affine tiles of the mask: value, t*VEC + start */
  int first_of[4];
  CgOperand first[4];
  bool stashed;    /* a prefetched load (stream.c): whole vectors are in the stash */
  CgOperand stash; /* its thread's first unit there, units `stride` bytes apart */
  int stride;
} Access;

static int log2i(int64_t v) {
  int n = 0;
  while (v > 1) {
    v >>= 1;
    n++;
  }
  return n;
}

static bool one_value(const CgCtx *c, int v) {
  return c->facts.form[v] == CG_FORM_SCALAR || c->facts.form[v] == CG_FORM_SPLAT;
}

/* Whether monotone mask `value` is true or false on whole runs of `chunk`
 * elements from the tile's start: one value, an upper bound of an affine
 * tile (arange + s < n, or n > arange + s) whose start s and bound n are
 * multiples of chunk, or and/or of such masks. (<= and >= are not: n + 1
 * would have to be the multiple.) */
static bool whole_runs(const CgCtx *c, int value, int chunk) {
  if (one_value(c, value)) return true;
  const IrInst *in = &c->p->insts[c->p->defs[value]];
  const int32_t *x = in->args;
  int need = log2i(chunk);
  switch ((tj_op)in->op) {
  case TJ_OP_AND:
  case TJ_OP_OR: return whole_runs(c, x[0], chunk) && whole_runs(c, x[1], chunk);
  case TJ_OP_LT:
  case TJ_OP_GT: return c->facts.pow2[x[0]] >= need && c->facts.pow2[x[1]] >= need;
  default: return false;
  }
}

/* Whether an access over layout l under `mask` (IR_NONE: none) in chunks
 * of `chunk` moves whole vectors only: no mask, or a monotone one on whole
 * runs, and not phased. */
static bool whole_access(const CgCtx *c, int mask, const CgLayout *l, int chunk) {
  if (l->phased) return false;
  return mask == IR_NONE || (c->facts.monotone[mask] && whole_runs(c, mask, chunk));
}

static int pointee_size(const CgCtx *c, const IrInst *in) {
  return cg_elem_size((tj_elem)c->p->types[in->args[0]].elem);
}

int cg_access_chunk(CgCtx *c, int inst, int vec) {
  const IrInst *in = &c->p->insts[inst];
  int offsets = in->args[1], esize = pointee_size(c, in);
  int chunk = vec < 16 / esize ? vec : 16 / esize;
  if (c->facts.form[offsets] != CG_FORM_AFFINE || chunk < 2) return 1;
  if (cg_layout_of(c, offsets)->phased) return chunk; /* checked at run time (phase.c) */
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

/* The phase source's element 0 and, from its address, the phase. */
static void begin_phase(Access *a) {
  CgCtx *c = a->c;
  CgOperand s = c->vals[a->offsets].op, start = a->ptr;
  if (!s.imm) {
    start = scaled_address(c, a->ptr, s, a->esize);
  } else if (s.bits) {
    start = cg_reg(&c->em, CG_B64);
    int64_t e = s.cls == CG_B32 ? (int64_t)(int32_t)(uint32_t)s.bits : (int64_t)s.bits;
    cg_line(&c->em, "add.s64 %s, %s, %lld;", CG_N(start), CG_N(a->ptr), (long long)(e * a->esize));
  }
  cg_phase_begin(c, a->l, start, a->esize);
}

static void setup(Access *a, CgCtx *c, int inst, int mask_arg) {
  const IrInst *in = &c->p->insts[inst];
  memset(a, 0, sizeof *a);
  a->c = c;
  a->in = in;
  a->space = cg_stream_evict_first(c, inst) ? "global.cs" : "global";
  a->offsets = in->args[1];
  a->l = cg_layout_of(c, a->offsets);
  a->elem = (tj_elem)c->p->types[in->args[0]].elem;
  a->esize = cg_elem_size(a->elem);
  a->chunk = cg_access_chunk(c, inst, a->l->vec);
  a->ptr = c->vals[in->args[0]].op;
  a->mask = in->nargs > mask_arg ? in->args[mask_arg] : IR_NONE;
  a->monotone = a->mask != IR_NONE && c->facts.monotone[a->mask];
  a->remat = a->mask != IR_NONE && c->facts.remat[a->mask];
  a->whole = whole_access(c, a->mask, a->l, a->chunk);
  a->affine = c->facts.form[a->offsets] == CG_FORM_AFFINE;
  if (a->affine) {
    /* Once: a later stream phase's load of the source (on one branch of a
     * capped stash, stream.c) uses the phase its first phase computed. */
    if (a->l->phased && inst == a->l->phase_source && a->l->rotated.cls != CG_B32) begin_phase(a);
    a->addr0 = thread_address(a);
    a->wraps = a->l->phased;
    a->aligned = cg_true();
    if (!a->wraps || a->chunk == 1) return;
    /* The source's vectors are aligned by construction (its phase is
     * theirs, and pointers are aligned to their elements); another
     * access's are where its phase is the source's. A streamed source
     * takes no element path for it; elsewhere it keeps the check, which
     * ptxas needed (without it, f32 BLOCK 16384 at 16 warps spilled 20
     * bytes on sm_75). */
    if (inst != a->l->phase_source || !c->streamed)
      a->aligned = cg_phase_aligned(c, a->addr0, a->chunk * a->esize);
    a->has_w0 = cg_phase_wraps(c, a->l, 0, &a->w0);
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

static CgOperand and_not(CgCtx *c, CgOperand a, CgOperand b) {
  CgOperand d = cg_reg(&c->em, CG_PRED);
  cg_line(&c->em, "and.pred %s, %s, !%s;", CG_N(d), CG_N(a), CG_N(b));
  return d;
}

static CgOperand or_pred(CgCtx *c, CgOperand a, CgOperand b) {
  CgOperand d = cg_reg(&c->em, CG_PRED);
  cg_line(&c->em, "or.pred %s, %s, %s;", CG_N(d), CG_N(a), CG_N(b));
  return d;
}

/* The element at `slot` of affine tile `value`: t*VEC + start + offset. */
static CgOperand affine_at(Access *a, int value, int slot) {
  CgCtx *c = a->c;
  const CgVal *v = &c->vals[value];
  const CgLayout *l = cg_layout_of(c, value);
  bool wide = v->elem == TJ_I64;
  const char *add = wide ? "add.s64" : "add.s32";
  CgOperand first = wide ? l->base64 : l->base32;
  int i = 0;
  while (i < a->nfirst && a->first_of[i] != value) i++;
  if (i < a->nfirst) {
    first = a->first[i];
  } else if (!(v->op.imm && v->op.bits == 0)) {
    CgOperand sum = cg_reg_of(c, (tj_elem)v->elem);
    cg_line(&c->em, "%s %s, %s, %s;", add, CG_N(sum), CG_N(first), CG_N(v->op));
    first = sum;
    if (a->nfirst < 4) {
      a->first_of[a->nfirst] = value;
      a->first[a->nfirst++] = first;
    }
  }
  int64_t off = cg_slot_offset(c, l, slot);
  bool known = l == a->l && a->side != SIDE_EITHER;
  if (known && a->side == SIDE_WRAPPED) off += l->len;
  CgOperand d = first;
  if (off) {
    d = cg_reg_of(c, (tj_elem)v->elem);
    cg_line(&c->em, "%s %s, %s, %lld;", add, CG_N(d), CG_N(first), (long long)off);
  }
  return known ? d : cg_phase_fix(c, l, d, slot);
}

/* Monotone mask `value` at `slot`, and `with`, computed from its expression
 * (analyze.c: compares of an affine tile with one value, and/or of those and
 * of one-value predicates). */
static CgOperand mask_at(Access *a, int value, int slot, CgOperand with) {
  CgCtx *c = a->c;
  if (one_value(c, value)) return cg_and_pred(c, with, c->vals[value].op);
  const IrInst *in = &c->p->insts[c->p->defs[value]];
  tj_op op = (tj_op)in->op;
  if (op == TJ_OP_AND) return mask_at(a, in->args[1], slot, mask_at(a, in->args[0], slot, with));
  if (op == TJ_OP_OR) {
    CgOperand x = mask_at(a, in->args[0], slot, cg_true()),
              y = mask_at(a, in->args[1], slot, cg_true());
    return cg_and_pred(c, with, or_pred(c, x, y));
  }
  int at = op == TJ_OP_GT || op == TJ_OP_GE; /* the affine operand */
  CgOperand args[2];
  args[at] = affine_at(a, in->args[at], slot);
  args[!at] = cg_in_reg(c, c->vals[in->args[!at]].op);
  return cg_compare_and(c, op, (tj_elem)c->p->types[in->args[0]].elem, args, with);
}

/* The guard of the repeat holding slot k. */
static CgOperand guard_at(const Access *a, int k) { return cg_guard(a->c, a->l, k / a->l->vec); }

/* a and not b, where a may be the always-true predicate. */
static CgOperand but_not(CgCtx *c, CgOperand a, CgOperand b) {
  if (!cg_is_true(a)) return and_not(c, a, b);
  CgOperand d = cg_reg(&c->em, CG_PRED);
  cg_line(&c->em, "not.pred %s, %s;", CG_N(d), CG_N(b));
  return d;
}

/* Whether the vector of the n slots from k0 may wrap (lane 0's first). */
static bool may_wrap(const Access *a, int k0, int n) {
  return a->has_w0 && n > 1 && k0 < a->l->vec;
}

/* Predicates of the n slots from k0, all in one repeat. A recomputed mask
 * gives only `full` here; its partial vectors are partial_block's. A
 * vector that wraps is never whole: it moves every element it holds. */
static Preds chunk_preds(Access *a, int k0, int n) {
  CgCtx *c = a->c;
  Preds p;
  memset(&p, 0, sizeof p);
  CgOperand guard = guard_at(a, k0), m[MAX_CHUNK] = {{0}};
  bool wraps = may_wrap(a, k0, n);
  if (a->remat) {
    p.full = mask_at(a, a->mask, k0 + n - 1, guard);
    if (wraps) p.full = but_not(c, p.full, a->w0);
    return p;
  }
  if (a->mask == IR_NONE || one_value(c, a->mask)) {
    CgOperand all = a->mask == IR_NONE ? guard : cg_and_pred(c, guard, c->vals[a->mask].op);
    p.full = wraps ? but_not(c, all, a->w0) : all;
    if (!wraps) return p;
    CgOperand part = but_not(c, all, p.full);
    for (int v = 0; v < n; v++) p.part[v] = part, p.has_part[v] = true;
    return p;
  }
  if (c->vals[a->mask].guarded) guard = cg_true();
  for (int v = 0; v < n; v++) m[v] = cg_and_pred(c, guard, cg_slot(c, a->mask, k0 + v));
  p.full = m[n - 1];
  for (int v = 0; v < n - 1 && !a->monotone; v++) p.full = cg_and_pred(c, p.full, m[v]);
  if (wraps) p.full = but_not(c, p.full, a->w0);
  for (int v = 0; v < n && n > 1; v++) {
    if (a->monotone && (v == n - 1 || a->whole) && !wraps) continue;
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

/* 16-bit elements two to a b32 word: words[i] holds halves[2i] (low) and
 * halves[2i + 1]. */
static void unpack_words(CgCtx *c, const CgOperand *words, const CgOperand *halves, int n) {
  for (int i = 0; i < n; i++)
    cg_line(&c->em, "mov.b32 {%s, %s}, %s;", CG_N(halves[2 * i]), CG_N(halves[2 * i + 1]),
            CG_N(words[i]));
}

static void pack_words(CgCtx *c, const CgOperand *halves, const CgOperand *words, int n) {
  for (int i = 0; i < n; i++)
    cg_line(&c->em, "mov.b32 %s, {%s, %s};", CG_N(words[i]), CG_N(halves[2 * i]),
            CG_N(halves[2 * i + 1]));
}

/* The elements of a partial vector, for a recomputed mask: a block that
 * threads without one branch over. In it every element moves under its own
 * mask, those of full vectors again too (the same values, from and to the
 * same thread): fewer predicates than `mask and not full`, and in each row
 * only the thread that holds the row's partial vector (and lane 0, for
 * its wrapping first vector) gets here. Where rows start at any phase,
 * every row sends lane 0 (it wraps) and its tail's thread through the
 * block, so there it is a block per vector (chunk) q, which threads
 * without a partial vector q branch over: a row of one warp (16-bit N =
 * 577: three vectors a thread) then runs one or two of its vectors'
 * elements, not all of them, and in a row of a CTA the warps holding lane
 * 0 and the tail no longer run every vector's elements while the others
 * wait at the reduction's barrier. Measured on an H200 (bench/RESULTS.md,
 * X25 and AA7), % of copy: f16 116307 x 577 71 -> 79, 131201 x 1023 95 ->
 * 98; f16 10872 x 12345 87 -> 90, 44739 x 3000 96 -> 100.6. Not in
 * aligned rows, which enter the block only at a row's end: they lost
 * there (f16 116509 x 576 95.3 -> 93.0, 65536 x 1024 97.5 -> 96.4); nor
 * in streamed ones, whose pieces each hold part of a row. `move` writes
 * the access of element v of chunk q under a predicate. */
typedef void (*MoveElement)(Access *a, CgOperand pred, int q, int v, const CgOperand *regs);

/* Lane 0's first vector, which may wrap (phase.c), in two parts whose
 * slots' sides are known: its direct elements (slot k holds element
 * lane*VEC + k - q >= 0), each under one compare of its side and its
 * mask's; then its wrapped ones (the tile's last q elements) in a block
 * of their own, entered only where the first of them is in the mask (the
 * mask is monotone; a row shorter than the tile by VEC never enters). Its
 * last element moves only where the vector wraps (w0): elsewhere it is in
 * the mask only where the vector is whole. (Each slot choosing its
 * element at run time took ten instructions an element: bench/RESULTS.md,
 * Z7 and AA2.) */
static void wrapping_vector(Access *a, int q, MoveElement move, const CgOperand *regs) {
  CgCtx *c = a->c;
  int n = a->chunk, k0 = q * n, label = c->em.labels++;
  CgOperand guard = guard_at(a, k0), wrapping = cg_and_pred(c, guard, a->w0);
  a->side = SIDE_DIRECT;
  for (int v = 0; v < n; v++) {
    CgOperand with = v < n - 1 ? guard : wrapping;
    cg_phase_side(c, a->l, k0 + v, false, &with);
    move(a, mask_at(a, a->mask, k0 + v, with), q, v, regs);
  }
  a->side = SIDE_WRAPPED;
  CgOperand enter = mask_at(a, a->mask, k0, wrapping);
  cg_line(&c->em, "@!%s bra $Lwrapped_%d;", CG_N(enter), label);
  for (int v = 0; v < n; v++) {
    CgOperand with = guard;
    if (cg_phase_side(c, a->l, k0 + v, true, &with))
      move(a, mask_at(a, a->mask, k0 + v, with), q, v, regs);
  }
  cg_raw(&c->em, "$Lwrapped_%d:\n", label);
  a->side = SIDE_EITHER;
}

/* The block of chunks [q0, q1). */
static void partial_vectors(Access *a, const Preds *p, int q0, int q1, MoveElement move,
                            const CgOperand *regs, const CgOperand *words) {
  CgCtx *c = a->c;
  int n = a->chunk;
  CgOperand any = cg_true();
  for (int q = q0; q < q1; q++) {
    CgOperand starts = and_not(c, mask_at(a, a->mask, q * n, guard_at(a, q * n)), p[q].full);
    any = q > q0 ? or_pred(c, any, starts) : starts;
  }
  if (may_wrap(a, q0 * n, n)) any = or_pred(c, any, a->w0); /* lane 0's first vector */
  int label = c->em.labels++;
  cg_line(&c->em, "@!%s bra $Lpart_%d;", CG_N(any), label);
  if (words) unpack_words(c, words + q0 * n / 2, regs + q0 * n, (q1 - q0) * n / 2);
  for (int q = q0; q < q1; q++) {
    if (may_wrap(a, q * n, n)) {
      wrapping_vector(a, q, move, regs);
      continue;
    }
    for (int v = 0; v < n - 1; v++)
      move(a, mask_at(a, a->mask, q * n + v, guard_at(a, q * n)), q, v, regs);
  }
  if (words) pack_words(c, regs + q0 * n, words + q0 * n / 2, (q1 - q0) * n / 2);
  cg_raw(&c->em, "$Lpart_%d:\n", label);
}

static void partial_block(Access *a, const Preds *p, int chunks, MoveElement move,
                          const CgOperand *regs, const CgOperand *words) {
  CgCtx *c = a->c;
  if (!a->remat || a->chunk == 1 || a->whole) return;
  if (c->streamed || !a->l->phased) {
    partial_vectors(a, p, 0, chunks, move, regs, words);
    return;
  }
  for (int q = 0; q < chunks; q++) partial_vectors(a, p, q, q + 1, move, regs, words);
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

/* ---- phased accesses ---------------------------------------------------------- */

/* A phased access moves vectors only where its own address is aligned (the
 * same for the whole instance): otherwise it branches to a path that moves
 * element by element. Returns that path's label, or -1 for other accesses. */
static int misaligned_branch(Access *a) {
  if (!a->wraps || a->chunk == 1 || cg_is_true(a->aligned)) return -1;
  int label = a->c->em.labels++;
  cg_line(&a->c->em, "@!%s bra $Lelements_%d;", CG_N(a->aligned), label);
  return label;
}

/* The end of the vector path and the start of the element path (chunk 1). */
static void misaligned_path(Access *a, int label) {
  cg_line(&a->c->em, "bra.uni $Lvectors_%d;", label);
  cg_raw(&a->c->em, "$Lelements_%d:\n", label);
  a->chunk = 1;
  a->has_w0 = false;
  a->nfirst = 0; /* registers the vector path set, which this path skips */
}

/* ---- loads ------------------------------------------------------------------ */

/* Where slot k moves under pred: one (predicate, address) pair, or two for
 * a slot that may wrap (phase.c), its wrapped element a tile further on;
 * one, the element of the access's side, where that is known. */
typedef struct Where {
  CgOperand pred;
  CgName address;
} Where;

static CgName wrapped_address(const Access *a, int k) {
  return cg_address(a->addr0, (cg_slot_offset(a->c, a->l, k) + a->l->len) * a->esize);
}

static int where(Access *a, CgOperand pred, int k, Where *w) {
  CgOperand wraps;
  w[0].pred = pred;
  w[0].address = a->side == SIDE_WRAPPED ? wrapped_address(a, k) : address(a, k);
  if (a->side != SIDE_EITHER || !a->wraps || !cg_phase_wraps(a->c, a->l, k, &wraps)) return 1;
  w[0].pred = but_not(a->c, pred, wraps);
  w[1].pred = cg_and_pred(a->c, pred, wraps);
  w[1].address = wrapped_address(a, k);
  return 2;
}

static void load_element(Access *a, CgOperand pred, int q, int v, const CgOperand *dst) {
  int k = q * a->chunk + v;
  Where w[2];
  for (int i = 0, n = where(a, pred, k, w); i < n; i++)
    cg_line(&a->c->em, "%sld.%s.%s %s, %s;", prefix(w[i].pred).s, a->space, scalar_type(a),
            CG_N(dst[k]), w[i].address.s);
}

/* A prefetched load's vectors that were not wholly in the mask: what the
 * registers hold (`other` and the elements in it; 16-bit ones still in
 * their words) goes to their units of the stash, which the prefetch did
 * not write, for the later phases. */
static void stash_partial(Access *a, const Preds *p, int chunks, const CgOperand *regs,
                          bool packed) {
  CgCtx *c = a->c;
  CgOperand *whole = cg_new_slots(c, chunks);
  if (!whole) return;
  for (int q = 0; q < chunks; q++) whole[q] = p[q].full;
  cg_stash_write_cut(c, (int)(a->in - c->p->insts), a->stash, regs, whole, packed);
}

/* With `joined` (16-bit elements in a streamed kernel, phased: packed
 * below), the words are left in `joined` for the end of the element path
 * (load_from_memory), where they are unpacked. */
static void load_vectors(Access *a, CgOperand *dst, const CgOperand *joined) {
  CgCtx *c = a->c;
  int n = a->chunk, chunks = a->l->slots / n, nw = words(a);
  Preds *p = cg_arena_alloc(&c->arena, sizeof *p * (size_t)chunks);
  CgOperand *w = cg_new_slots(c, chunks * nw);
  if (!p || !w) return;
  for (int q = 0; q < chunks; q++) p[q] = chunk_preds(a, q * n, n);
  CgOperand other = other_value(a), other_word = half(a) ? packed_pair(c, other) : other;
  for (int i = 0; i < chunks * nw; i++)
    w[i] = joined ? joined[i] : half(a) ? cg_reg(&c->em, CG_B32) : dst[i];
  for (int q = 0; q < chunks; q++)
    for (int i = 0; i < nw && !cg_is_true(p[q].full); i++) mov_other(c, w[q * nw + i], other_word);
  char type[16], list[160];
  vector_type(a, type, sizeof type);
  for (int q = 0; q < chunks; q++) {
    operand_list(w + q * nw, nw, list);
    if (a->stashed)
      cg_line(&c->em, "%sld.shared.%s %s%s%s, [%s+%d];", prefix(p[q].full).s, type,
              nw > 1 ? "{" : "", list, nw > 1 ? "}" : "", CG_N(a->stash), q * a->stride);
    else
      cg_line(&c->em, "%sld.%s.%s %s%s%s, %s;", prefix(p[q].full).s, a->space, type,
              nw > 1 ? "{" : "", list, nw > 1 ? "}" : "", address(a, q * n).s);
  }
  /* In a streamed kernel (stream.c: its piece loops, and the loads before
   * them), 16-bit elements that move alone do so in halves of their own,
   * taken from the words and put back: the words hold each element
   * whichever way it came, and the unpack at the end sets each element's
   * register once, so that ptxas reads its half in place. (Set by the
   * vector load and again by the partial vector's block, every half took a
   * byte permute on the main path: two instructions in ten of a 16-bit
   * staged row's first phase; bench/RESULTS.md, X23. Elsewhere the halves
   * stay as they were: at the 32 registers of sm_80's small CTAs the extra
   * halves spilled.) */
  bool packed = half(a) && c->streamed, parts = false;
  for (int q = 0; q < chunks; q++)
    for (int v = 0; v < n; v++) parts |= p[q].has_part[v];
  CgOperand *halves = dst; /* packed: only where some element moves alone */
  if (packed && (parts || (a->remat && !a->whole))) {
    if (!(halves = cg_new_slots(c, chunks * n))) return;
    for (int k = 0; k < chunks * n; k++) halves[k] = cg_reg(&c->em, CG_B16);
  }
  if (half(a) && !packed) unpack_words(c, w, dst, chunks * nw);
  if (parts && packed) unpack_words(c, w, halves, chunks * nw);
  for (int q = 0; q < chunks; q++)
    for (int v = 0; v < n; v++)
      if (p[q].has_part[v]) load_element(a, p[q].part[v], q, v, halves);
  if (parts && packed) pack_words(c, halves, w, chunks * nw);
  partial_block(a, p, chunks, load_element, halves, packed ? w : NULL);
  if (a->stashed) stash_partial(a, p, chunks, packed ? w : dst, packed);
  if (packed && !joined) unpack_words(c, w, dst, chunks * nw);
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
  for (int k = 0; k < slots; k++) load_element(a, p[k].full, k, 0, dst);
}

/* r's slots: `slots` fresh registers of elem. */
static bool fresh_slots(CgCtx *c, CgVal *r, int slots, tj_elem elem) {
  if (!(r->slots = cg_new_slots(c, slots))) return false;
  for (int k = 0; k < slots; k++) r->slots[k] = cg_reg_of(c, elem);
  return true;
}

/* Load inst into r's slots (fresh registers, or r's own when reuse); with
 * stashed, its whole vectors come from the stash, where the prefetch
 * copied them (stream.c). */
static void load_from_memory(CgCtx *c, int inst, CgVal *r, bool stashed, bool reuse) {
  Access a;
  setup(&a, c, inst, 2);
  if (stashed) {
    a.stashed = true;
    a.stash = cg_stash_at(c, inst, &a.stride);
  }
  if (!cg_ok(c) || (!reuse && !fresh_slots(c, r, a.l->slots, a.elem))) return;
  int label = misaligned_branch(&a);
  /* The two paths of a phased 16-bit load in a streamed kernel meet on
   * its words, as its vectors came, and unpack them after: met on the
   * elements, ptxas kept each in a register of its own, moved it there,
   * packed the words again for the stash and selected -inf for it once
   * more (bench/RESULTS.md, EE1 and EE6). */
  int nw = a.l->slots / 2;
  CgOperand *joined = NULL;
  if (label >= 0 && half(&a) && c->streamed) {
    if (!(joined = cg_new_slots(c, nw))) return;
    for (int i = 0; i < nw; i++) joined[i] = cg_reg(&c->em, CG_B32);
  }
  if (a.chunk > 1) load_vectors(&a, r->slots, joined);
  if (a.chunk > 1 && label < 0) return;
  if (label >= 0) misaligned_path(&a, label);
  load_elements(&a, r->slots);
  if (stashed) /* nothing was copied: the element path writes every unit */
    cg_stash_write_cut(c, inst, a.stash, r->slots, NULL, false);
  if (joined) pack_words(c, r->slots, joined, nw);
  if (label >= 0) cg_raw(&c->em, "$Lvectors_%d:\n", label);
  if (joined) unpack_words(c, joined, r->slots, nw);
}

/* A staged load (stream.c) reads memory in its first phase, keeping the
 * piece in shared memory, and reads it back from there in later ones; a
 * piece the stash does not keep (STASH) comes from memory again, into the
 * same registers. A prefetched first phase reads a kept piece's whole
 * vectors from the stash too. */
void cg_lower_load(CgCtx *c, int inst) {
  const IrInst *in = &c->p->insts[inst];
  CgVal *r = &c->vals[in->result];
  bool fetch;
  CgOperand **held = cg_held_slots(c, inst, &fetch);
  if (held) { /* a piece kept in registers */
    if (fetch && c->stream.reuse_held && *held) { /* stream.c's PIPE: the same registers */
      r->slots = *held;
      load_from_memory(c, inst, r, false, true);
      return;
    }
    if (fetch) load_from_memory(c, inst, r, false, false);
    if (fetch && cg_ok(c)) *held = r->slots;
    if (!fetch) r->slots = *held;
    return;
  }
  bool holds = cg_stash_holds(c, inst);
  bool prefetched = c->streamed && c->stream.prefetched && c->stream.prefetched[inst];
  if (!holds && !prefetched) {
    load_from_memory(c, inst, r, false, false);
    if (cg_ok(c)) cg_stash_write(c, inst, r->slots);
    return;
  }
  int label = cg_stash_branch(c, true);
  if (label >= 0) {
    load_from_memory(c, inst, r, false, false);
    if (!cg_ok(c)) return;
    cg_line(&c->em, "bra.uni $Lunkept_%d;", label);
    cg_raw(&c->em, "$Lkept_%d:\n", label);
  }
  if (prefetched) {
    load_from_memory(c, inst, r, true, label >= 0);
  } else {
    if (label < 0 && !fresh_slots(c, r, cg_layout_of(c, in->args[1])->slots,
                                  (tj_elem)c->p->types[in->args[0]].elem))
      return;
    cg_stash_read(c, inst, r->slots);
  }
  if (label >= 0) cg_raw(&c->em, "$Lunkept_%d:\n", label);
}

bool cg_access_whole(CgCtx *c, int inst) {
  const IrInst *in = &c->p->insts[inst];
  const CgLayout *l = cg_layout_of(c, in->args[1]);
  return whole_access(c, in->nargs > 2 ? in->args[2] : IR_NONE, l,
                      cg_access_chunk(c, inst, l->vec));
}

bool cg_prefetchable(CgCtx *c, int inst) {
  const IrInst *in = &c->p->insts[inst];
  const CgLayout *l = cg_layout_of(c, in->args[1]);
  int esize = pointee_size(c, in);
  bool wide_ctas = c->spec->split > 1 && c->spec->num_warps > 4; /* stream.c */
  if (l->phased && (esize != 2 || wide_ctas)) return false;
  return c->arch >= 80 && cg_access_chunk(c, inst, l->vec) * esize == 16;
}

void cg_prefetch_load(CgCtx *c, int inst, CgOperand at, int stride) {
  Access a;
  setup(&a, c, inst, 2);
  if (!cg_ok(c)) return;
  int n = a.chunk;
  for (int q = 0; q < a.l->slots / n; q++) {
    Preds p = chunk_preds(&a, q * n, n);
    CgOperand copy = cg_and_pred(c, p.full, a.aligned);
    cg_line(&c->em, "%scp.async.cg.shared.global [%s+%d], %s, 16;", prefix(copy).s, CG_N(at),
            q * stride, address(&a, q * n).s);
  }
}

/* ---- stores ----------------------------------------------------------------- */

static void store_values(Access *a, CgOperand *v) {
  CgCtx *c = a->c;
  int value = a->in->args[2];
  CgOperand one = one_value(c, value) ? cg_in_reg(c, c->vals[value].op) : cg_imm(CG_B32, 0);
  for (int k = 0; k < a->l->slots; k++)
    v[k] = one_value(c, value) ? one : cg_in_reg(c, cg_slot(c, value, k));
}

static void store_element(Access *a, CgOperand pred, int q, int e, const CgOperand *v) {
  int k = q * a->chunk + e;
  Where w[2];
  for (int i = 0, n = where(a, pred, k, w); i < n; i++)
    cg_line(&a->c->em, "%sst.%s.%s %s, %s;", prefix(w[i].pred).s, a->space, scalar_type(a),
            w[i].address.s, CG_N(v[k]));
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
    cg_line(&c->em, "%sst.%s.%s %s, %s%s%s;", prefix(p[q].full).s, a->space, type,
            address(a, q * n).s, nw > 1 ? "{" : "", list, nw > 1 ? "}" : "");
  }
  for (int q = 0; q < chunks; q++)
    for (int k = 0; k < n; k++)
      if (p[q].has_part[k]) store_element(a, p[q].part[k], q, k, v);
  partial_block(a, p, chunks, store_element, v, NULL);
}

static void store_elements(Access *a, const CgOperand *v) {
  for (int k = 0; k < a->l->slots; k++) store_element(a, chunk_preds(a, k, 1).full, k, 0, v);
}

void cg_lower_store(CgCtx *c, int inst) {
  Access a;
  setup(&a, c, inst, 3);
  CgOperand *v = cg_ok(c) ? cg_new_slots(c, a.l->slots) : NULL;
  if (!v) return;
  store_values(&a, v);
  int label = misaligned_branch(&a);
  if (a.chunk > 1) store_vectors(&a, v);
  if (a.chunk > 1 && label < 0) return;
  if (label >= 0) misaligned_path(&a, label);
  store_elements(&a, v);
  if (label >= 0) cg_raw(&c->em, "$Lvectors_%d:\n", label);
}
