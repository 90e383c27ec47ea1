/*
 * interp.c — the CPU interpreter: runs a specialized program over a grid of
 * program instances on host buffers. It is the reference semantics of the
 * IR, which both code generators must match:
 *   - f32 math in float (expf, exp2f, logf; max/min are fmaxf/fminf, so a NaN
 *     operand yields the other); compares are false on NaN except ne;
 *   - integers wrap; float to int truncates and saturates (NaN gives 0);
 *     casts to f16/bf16 round to nearest even, once (half.c);
 *   - reduce_sum adds in float pairwise (first half, then second, recursively);
 *   - masked-off lanes of a load take `other` and never touch memory; every
 *     other access is checked against the byte size of its tj_arg.
 * Each value owns a run of 8-byte cells in one arena allocated per call.
 * Instructions run forward from a program counter; ENDFOR jumps back to the
 * loop body while the loop continues. Errors go to the spec's message.
 */
#include "ir/ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One element of any type: ints (sign-extended), preds (0/1) and the raw bits
 * of f16/bf16 in i; f32 in f; for pointers, an offset in elements in i. */
typedef union Cell {
  int64_t i;
  float f;
} Cell;

typedef struct Slot {
  Cell *cells;
  int64_t len;  /* 1 for scalars and pointers */
  tj_elem elem; /* for pointers, the pointee */
  int buffer;   /* for pointers, the parameter whose buffer they point into */
} Slot;

typedef struct Interp {
  tj_spec *spec;
  const tj_program *p;
  const tj_arg *args;
  Slot *slots;       /* per value */
  Cell *arena;       /* every slot's cells */
  int32_t *loop_for; /* per instruction: for an ENDFOR, its FOR */
  Cell *yielded;     /* scratch: a loop's next iter values */
  int64_t grid, pid;
  int pc, next; /* the instruction running, and the one after it */
} Interp;

/* ---- errors ------------------------------------------------------------ */

/* "interpret: instruction 12 (%12 : ... = load ...), program 3, element 5: why" */
static tj_status fail_at(Interp *in, int64_t element, const char *fmt, ...) TJ_PRINTF(3, 4);
static tj_status fail_at(Interp *in, int64_t element, const char *fmt, ...) {
  TjBuf b;
  buf_init(&b);
  buf_printf(&b, "interpret: instruction %d (", in->pc);
  ir_print_inst(in->p, in->pc, &b);
  buf_printf(&b, "), program %lld", (long long)in->pid);
  if (element >= 0) buf_printf(&b, ", element %lld", (long long)element);
  buf_puts(&b, ": ");
  va_list ap;
  va_start(ap, fmt);
  buf_vprintf(&b, fmt, ap);
  va_end(ap);
  tj_set_error(in->spec->error, "%s", b.data ? b.data : "interpret: out of memory");
  buf_free(&b);
  return TJ_ERR_INTERP;
}

/* ---- conversions ------------------------------------------------------- */

static int64_t wrap32(uint64_t u) {
  uint32_t w = (uint32_t)u;
  return w >= 0x80000000u ? (int64_t)w - 0x100000000 : (int64_t)w;
}

static int64_t wrap64(uint64_t u) {
  return u <= (uint64_t)INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1;
}

/* Truncation toward zero, saturating at [lo, hi]; NaN gives 0. */
static int64_t float_to_int(float f, int64_t lo, int64_t hi) {
  if (isnan(f)) return 0;
  if (f <= (float)lo) return lo;
  if (f >= (float)hi) return hi; /* (float)hi rounds up to a power of two */
  return (int64_t)f;
}

/* An integer rounded to 24 significant bits with round-to-odd: exact in f32,
 * and a second rounding to f16 or bf16 (11 or 8 bits) is then correct. */
static float int_to_float_odd(int64_t v) {
  uint64_t mag = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  int bits = 0;
  while (bits < 64 && (mag >> bits) != 0) bits++;
  if (bits > 24) {
    int drop = bits - 24;
    uint64_t kept = (mag >> drop) << drop;
    mag = kept | (kept != mag ? (uint64_t)1 << drop : 0);
  }
  float f = (float)mag;
  return v < 0 ? -f : f;
}

static float cell_to_float(Cell c, tj_elem e) {
  if (e == TJ_F16) return tj_f16_to_f32((uint16_t)c.i);
  if (e == TJ_BF16) return tj_bf16_to_f32((uint16_t)c.i);
  return c.f;
}

static Cell from_float(float f, tj_elem to) {
  Cell r = {.i = 0};
  switch (to) {
  case TJ_F32: r.f = f; break;
  case TJ_F16: r.i = tj_f32_to_f16(f); break;
  case TJ_BF16: r.i = tj_f32_to_bf16(f); break;
  case TJ_I32: r.i = float_to_int(f, INT32_MIN, INT32_MAX); break;
  case TJ_I64: r.i = float_to_int(f, INT64_MIN, INT64_MAX); break;
  default: r.i = f != 0.0f; break;
  }
  return r;
}

static Cell from_int(int64_t v, tj_elem to) {
  Cell r = {.i = v};
  if (to == TJ_I32) r.i = wrap32((uint64_t)v);
  else if (to == TJ_F32) r.f = (float)v;
  else if (to == TJ_F16) r.i = tj_f32_to_f16(int_to_float_odd(v));
  else if (to == TJ_BF16) r.i = tj_f32_to_bf16(int_to_float_odd(v));
  else if (to == TJ_PRED) r.i = v != 0;
  return r;
}

/* One element converted between any two element types, as `cast` does. */
static Cell convert(Cell c, tj_elem from, tj_elem to) {
  if (from == to) return c;
  if (from == TJ_I32 || from == TJ_I64 || from == TJ_PRED) return from_int(c.i, to);
  return from_float(cell_to_float(c, from), to);
}

/* ---- elementwise functions, looked up by op and operand class ---------- */

enum { CLASS_I32, CLASS_I64, CLASS_F32, CLASS_PRED, CLASS_COUNT };

static int elem_class(tj_elem e) {
  switch (e) {
  case TJ_I32: return CLASS_I32;
  case TJ_I64: return CLASS_I64;
  case TJ_F32: return CLASS_F32;
  case TJ_PRED: return CLASS_PRED;
  default: return CLASS_COUNT;
  }
}

typedef Cell (*BinaryFn)(Cell a, Cell b);
typedef Cell (*UnaryFn)(Cell a);

static Cell int_cell(int64_t v) { return (Cell){.i = v}; }
static Cell float_cell(float v) {
  Cell c = {.i = 0};
  c.f = v;
  return c;
}

#define INT_BINARY(name, expr)                                                                     \
  static Cell name##_i32(Cell a, Cell b) { return int_cell(wrap32(expr)); }                        \
  static Cell name##_i64(Cell a, Cell b) { return int_cell(wrap64(expr)); }
/* clang-format off */
INT_BINARY(add, (uint64_t)a.i + (uint64_t)b.i)
INT_BINARY(sub, (uint64_t)a.i - (uint64_t)b.i)
INT_BINARY(mul, (uint64_t)a.i * (uint64_t)b.i)
/* clang-format on */
#undef INT_BINARY

/* a % b as C's, defined everywhere: 0 for b = 0 and b = -1 (where C's
 * INT_MIN % -1 overflows), as the backends give. */
static Cell rem_int(Cell a, Cell b) { return int_cell(b.i == 0 || b.i == -1 ? 0 : a.i % b.i); }
static Cell add_f32(Cell a, Cell b) { return float_cell(a.f + b.f); }
static Cell sub_f32(Cell a, Cell b) { return float_cell(a.f - b.f); }
static Cell mul_f32(Cell a, Cell b) { return float_cell(a.f * b.f); }
static Cell div_f32(Cell a, Cell b) { return float_cell(a.f / b.f); }
static Cell max_f32(Cell a, Cell b) { return float_cell(fmaxf(a.f, b.f)); }
static Cell min_f32(Cell a, Cell b) { return float_cell(fminf(a.f, b.f)); }
static Cell max_int(Cell a, Cell b) { return a.i > b.i ? a : b; }
static Cell min_int(Cell a, Cell b) { return a.i < b.i ? a : b; }

static Cell lt_int(Cell a, Cell b) { return int_cell(a.i < b.i); }
static Cell le_int(Cell a, Cell b) { return int_cell(a.i <= b.i); }
static Cell gt_int(Cell a, Cell b) { return int_cell(a.i > b.i); }
static Cell ge_int(Cell a, Cell b) { return int_cell(a.i >= b.i); }
static Cell eq_int(Cell a, Cell b) { return int_cell(a.i == b.i); }
static Cell ne_int(Cell a, Cell b) { return int_cell(a.i != b.i); }
static Cell lt_f32(Cell a, Cell b) { return int_cell(a.f < b.f); }
static Cell le_f32(Cell a, Cell b) { return int_cell(a.f <= b.f); }
static Cell gt_f32(Cell a, Cell b) { return int_cell(a.f > b.f); }
static Cell ge_f32(Cell a, Cell b) { return int_cell(a.f >= b.f); }
static Cell eq_f32(Cell a, Cell b) { return int_cell(a.f == b.f); }
static Cell ne_f32(Cell a, Cell b) { return int_cell(a.f != b.f); }
static Cell and_pred(Cell a, Cell b) { return int_cell(a.i && b.i); }
static Cell or_pred(Cell a, Cell b) { return int_cell(a.i || b.i); }

/* [op][class of the operands]; NULL where the type rules allow no such op. */
static const BinaryFn binary_fns[TJ_OP_COUNT][CLASS_COUNT] = {
    [TJ_OP_ADD] = {add_i32, add_i64, add_f32, NULL},
    [TJ_OP_SUB] = {sub_i32, sub_i64, sub_f32, NULL},
    [TJ_OP_MUL] = {mul_i32, mul_i64, mul_f32, NULL},
    [TJ_OP_DIV] = {NULL, NULL, div_f32, NULL},
    [TJ_OP_REM] = {rem_int, rem_int, NULL, NULL},
    [TJ_OP_MAX] = {max_int, max_int, max_f32, NULL},
    [TJ_OP_MIN] = {min_int, min_int, min_f32, NULL},
    [TJ_OP_LT] = {lt_int, lt_int, lt_f32, NULL},
    [TJ_OP_LE] = {le_int, le_int, le_f32, NULL},
    [TJ_OP_GT] = {gt_int, gt_int, gt_f32, NULL},
    [TJ_OP_GE] = {ge_int, ge_int, ge_f32, NULL},
    [TJ_OP_EQ] = {eq_int, eq_int, eq_f32, eq_int},
    [TJ_OP_NE] = {ne_int, ne_int, ne_f32, ne_int},
    [TJ_OP_AND] = {NULL, NULL, NULL, and_pred},
    [TJ_OP_OR] = {NULL, NULL, NULL, or_pred},
};

static Cell neg_i32(Cell a) { return int_cell(wrap32(0 - (uint64_t)a.i)); }
static Cell neg_i64(Cell a) { return int_cell(wrap64(0 - (uint64_t)a.i)); }
static Cell neg_f32(Cell a) { return float_cell(-a.f); }
/* exp and exp2 flush subnormal results to 0, as the GPU's ex2.approx.ftz does. */
static float flush_subnormal(float v) { return fpclassify(v) == FP_SUBNORMAL ? 0.0f : v; }
static Cell exp_f32(Cell a) { return float_cell(flush_subnormal(expf(a.f))); }
static Cell exp2_f32(Cell a) { return float_cell(flush_subnormal(exp2f(a.f))); }
static Cell log_f32(Cell a) { return float_cell(logf(a.f)); }

static const UnaryFn unary_fns[TJ_OP_COUNT][CLASS_COUNT] = {
    [TJ_OP_NEG] = {neg_i32, neg_i64, neg_f32, NULL},
    [TJ_OP_EXP] = {NULL, NULL, exp_f32, NULL},
    [TJ_OP_EXP2] = {NULL, NULL, exp2_f32, NULL},
    [TJ_OP_LOG] = {NULL, NULL, log_f32, NULL},
};

/* ---- values ------------------------------------------------------------ */

static Slot *slot(Interp *in, int32_t value) { return &in->slots[value]; }

/* Cell k of an operand, a scalar standing for a tile of any length. */
static Cell at(const Slot *s, int64_t k) { return s->cells[s->len == 1 ? 0 : k]; }

static tj_status bad_operands(Interp *in) {
  return fail_at(in, -1, "no such operation on these operand types");
}

static tj_status exec_binary(Interp *in, const IrInst *inst) {
  const Slot *a = slot(in, inst->args[0]), *b = slot(in, inst->args[1]);
  int cls = elem_class(a->elem);
  BinaryFn fn = cls < CLASS_COUNT ? binary_fns[inst->op][cls] : NULL;
  if (!fn) return bad_operands(in);
  Slot *r = slot(in, inst->result);
  for (int64_t k = 0; k < r->len; k++) r->cells[k] = fn(at(a, k), at(b, k));
  return TJ_OK;
}

static tj_status exec_unary(Interp *in, const IrInst *inst) {
  const Slot *a = slot(in, inst->args[0]);
  int cls = elem_class(a->elem);
  UnaryFn fn = cls < CLASS_COUNT ? unary_fns[inst->op][cls] : NULL;
  if (!fn) return bad_operands(in);
  Slot *r = slot(in, inst->result);
  for (int64_t k = 0; k < r->len; k++) r->cells[k] = fn(at(a, k));
  return TJ_OK;
}

static tj_status exec_select(Interp *in, const IrInst *inst) {
  const Slot *c = slot(in, inst->args[0]);
  const Slot *a = slot(in, inst->args[1]), *b = slot(in, inst->args[2]);
  Slot *r = slot(in, inst->result);
  for (int64_t k = 0; k < r->len; k++) r->cells[k] = at(c, k).i ? at(a, k) : at(b, k);
  return TJ_OK;
}

static tj_status exec_cast(Interp *in, const IrInst *inst) {
  const Slot *a = slot(in, inst->args[0]);
  Slot *r = slot(in, inst->result);
  for (int64_t k = 0; k < r->len; k++) r->cells[k] = convert(at(a, k), a->elem, r->elem);
  return TJ_OK;
}

static Cell reduce_max_f32(const Cell *c, int64_t n) {
  float m = -INFINITY;
  for (int64_t k = 0; k < n; k++) m = fmaxf(m, c[k].f);
  return float_cell(m);
}

/* Pairwise: the sum of the first n/2 elements plus the sum of the rest,
 * down to single elements. Its rounding error grows with log2(n), not n as
 * index order's does, which on a row with one dominant element and
 * thousands of small ones is the difference between 1e-7 and 1e-5. */
static float pairwise_sum(const Cell *c, int64_t n) {
  if (n == 1) return c[0].f;
  return pairwise_sum(c, n / 2) + pairwise_sum(c + n / 2, n - n / 2);
}

static Cell reduce_sum_f32(const Cell *c, int64_t n) { return float_cell(pairwise_sum(c, n)); }

static Cell reduce_max_i32(const Cell *c, int64_t n) {
  int64_t m = INT32_MIN;
  for (int64_t k = 0; k < n; k++) m = c[k].i > m ? c[k].i : m;
  return int_cell(m);
}

static Cell reduce_sum_i32(const Cell *c, int64_t n) {
  uint64_t s = 0;
  for (int64_t k = 0; k < n; k++) s += (uint64_t)c[k].i;
  return int_cell(wrap32(s));
}

static tj_status exec_reduce(Interp *in, const IrInst *inst) {
  const Slot *a = slot(in, inst->args[0]);
  bool is_max = inst->op == TJ_OP_REDUCE_MAX;
  Cell *r = slot(in, inst->result)->cells;
  if (a->elem == TJ_F32)
    *r = is_max ? reduce_max_f32(a->cells, a->len) : reduce_sum_f32(a->cells, a->len);
  else if (a->elem == TJ_I32)
    *r = is_max ? reduce_max_i32(a->cells, a->len) : reduce_sum_i32(a->cells, a->len);
  else return bad_operands(in);
  return TJ_OK;
}

/* ---- sources ----------------------------------------------------------- */

static tj_status exec_index(Interp *in, const IrInst *inst, int64_t v) {
  slot(in, inst->result)->cells[0] = int_cell(v);
  return TJ_OK;
}

static tj_status exec_param(Interp *in, const IrInst *inst) {
  Slot *r = slot(in, inst->result);
  const tj_arg *arg = &in->args[inst->iimm];
  if (arg->kind == TJ_ARG_PTR) {
    r->cells[0] = int_cell(0);
    r->buffer = (int)inst->iimm;
  } else {
    r->cells[0] = arg->kind == TJ_ARG_FLOAT ? float_cell((float)arg->u.f) : int_cell(arg->u.i);
  }
  return TJ_OK;
}

static tj_status exec_const(Interp *in, const IrInst *inst) {
  Slot *r = slot(in, inst->result);
  Cell c = r->elem == TJ_F32 ? float_cell((float)inst->fimm) : int_cell((int64_t)inst->fimm);
  for (int64_t k = 0; k < r->len; k++) r->cells[k] = c;
  return TJ_OK;
}

static tj_status exec_arange(Interp *in, const IrInst *inst) {
  Slot *r = slot(in, inst->result);
  for (int64_t k = 0; k < r->len; k++) r->cells[k] = int_cell(k);
  return TJ_OK;
}

/* ---- memory ------------------------------------------------------------ */

static size_t elem_bytes(tj_elem e) {
  return e == TJ_I64 ? 8 : e == TJ_F16 || e == TJ_BF16 ? 2 : 4;
}

static Cell read_elem(const unsigned char *at_byte, tj_elem e) {
  Cell c = {.i = 0};
  if (e == TJ_F32) memcpy(&c.f, at_byte, 4);
  else if (e == TJ_I64) memcpy(&c.i, at_byte, 8);
  else if (e == TJ_I32) {
    int32_t v;
    memcpy(&v, at_byte, 4);
    c.i = v;
  } else {
    uint16_t v;
    memcpy(&v, at_byte, 2);
    c.i = v;
  }
  return c;
}

static void write_elem(unsigned char *at_byte, tj_elem e, Cell c) {
  if (e == TJ_F32) memcpy(at_byte, &c.f, 4);
  else if (e == TJ_I64) memcpy(at_byte, &c.i, 8);
  else if (e == TJ_I32) {
    int32_t v = (int32_t)c.i;
    memcpy(at_byte, &v, 4);
  } else {
    uint16_t v = (uint16_t)c.i;
    memcpy(at_byte, &v, 2);
  }
}

/* The element index base + offset, if the whole element lies in the buffer. */
static bool in_bounds(int64_t base, int64_t offset, size_t elem, size_t bytes, int64_t *index) {
  if ((offset > 0 && base > INT64_MAX - offset) || (offset < 0 && base < INT64_MIN - offset))
    return false;
  *index = base + offset;
  return *index >= 0 && (uint64_t)*index < bytes / elem;
}

static tj_status out_of_bounds(Interp *in, const Slot *ptr, int64_t k, int64_t offset) {
  const tj_arg *arg = &in->args[ptr->buffer];
  size_t elem = elem_bytes(ptr->elem);
  return fail_at(in, k,
                 "index %lld + %lld lies outside the buffer of parameter %s "
                 "(%zu bytes: %zu elements of %s)",
                 (long long)ptr->cells[0].i, (long long)offset, in->p->params[ptr->buffer],
                 arg->bytes, arg->bytes / elem, ir_elem_name(ptr->elem));
}

static tj_status exec_ptr_add(Interp *in, const IrInst *inst) {
  const Slot *a = slot(in, inst->args[0]), *b = slot(in, inst->args[1]);
  Slot *r = slot(in, inst->result);
  r->buffer = a->buffer;
  r->cells[0] = int_cell(wrap64((uint64_t)a->cells[0].i + (uint64_t)b->cells[0].i));
  return TJ_OK;
}

static tj_status exec_load(Interp *in, const IrInst *inst) {
  const Slot *ptr = slot(in, inst->args[0]), *offsets = slot(in, inst->args[1]);
  const Slot *mask = inst->nargs > 2 ? slot(in, inst->args[2]) : NULL;
  const Slot *other = inst->nargs > 3 ? slot(in, inst->args[3]) : NULL;
  Cell fill = other ? convert(other->cells[0], other->elem, ptr->elem) : int_cell(0);
  const tj_arg *arg = &in->args[ptr->buffer];
  size_t elem = elem_bytes(ptr->elem);
  Slot *r = slot(in, inst->result);
  for (int64_t k = 0; k < r->len; k++) {
    int64_t index, offset = offsets->cells[k].i;
    if (mask && !at(mask, k).i) {
      r->cells[k] = fill;
    } else if (in_bounds(ptr->cells[0].i, offset, elem, arg->bytes, &index)) {
      r->cells[k] = read_elem((const unsigned char *)arg->u.ptr + (size_t)index * elem, ptr->elem);
    } else {
      return out_of_bounds(in, ptr, k, offset);
    }
  }
  return TJ_OK;
}

/* Whether lane k of a store is on: a NULL mask is all on. */
static bool lane_on(const Slot *mask, int64_t k) { return !mask || at(mask, k).i; }

/* Every lane is checked before any is written, so a failing store writes nothing. */
static tj_status exec_store(Interp *in, const IrInst *inst) {
  const Slot *ptr = slot(in, inst->args[0]), *offsets = slot(in, inst->args[1]);
  const Slot *value = slot(in, inst->args[2]);
  const Slot *mask = inst->nargs > 3 ? slot(in, inst->args[3]) : NULL;
  const tj_arg *arg = &in->args[ptr->buffer];
  size_t elem = elem_bytes(ptr->elem);
  int64_t base = ptr->cells[0].i, index = 0;
  for (int64_t k = 0; k < offsets->len; k++)
    if (lane_on(mask, k) && !in_bounds(base, offsets->cells[k].i, elem, arg->bytes, &index))
      return out_of_bounds(in, ptr, k, offsets->cells[k].i);
  unsigned char *data = arg->u.ptr;
  for (int64_t k = 0; k < offsets->len; k++)
    if (lane_on(mask, k) && in_bounds(base, offsets->cells[k].i, elem, arg->bytes, &index))
      write_elem(data + (size_t)index * elem, ptr->elem, at(value, k));
  return TJ_OK;
}

/* ---- loops ------------------------------------------------------------- */

/* The first instruction of a loop's body: after the FOR and its ITERs. */
static int loop_body(const tj_program *p, int loop) {
  int i = loop + 1;
  while (i < p->ninsts && p->insts[i].op == TJ_OP_ITER) i++;
  return i;
}

/* Entry: every iter takes its operand; the body runs if lo < hi. */
static tj_status exec_for(Interp *in, const IrInst *inst) {
  int64_t lo = slot(in, inst->args[0])->cells[0].i, hi = slot(in, inst->args[1])->cells[0].i;
  int64_t step = slot(in, inst->args[2])->cells[0].i;
  if (step <= 0) return fail_at(in, -1, "the loop step %lld is not positive", (long long)step);
  int body = loop_body(in->p, in->pc);
  for (int i = in->pc + 1; i < body; i++) {
    const IrInst *iter = &in->p->insts[i];
    slot(in, iter->result)->cells[0] = slot(in, iter->args[0])->cells[0];
  }
  slot(in, inst->result)->cells[0] = int_cell(lo);
  in->next = lo < hi ? body : (int)inst->iimm + 1;
  return TJ_OK;
}

/* The yields right before ENDFOR take effect together, as in a parallel
 * assignment, so `yield a, b; yield b, a` swaps. */
static void commit_yields(Interp *in, int endfor) {
  int first = endfor;
  while (first > 0 && in->p->insts[first - 1].op == TJ_OP_YIELD) first--;
  for (int i = first; i < endfor; i++)
    in->yielded[i - first] = slot(in, in->p->insts[i].args[1])->cells[0];
  for (int i = first; i < endfor; i++)
    slot(in, in->p->insts[i].args[0])->cells[0] = in->yielded[i - first];
}

static tj_status exec_endfor(Interp *in, const IrInst *inst) {
  (void)inst;
  int loop = in->loop_for[in->pc];
  const IrInst *f = &in->p->insts[loop];
  commit_yields(in, in->pc);
  Cell *induction = slot(in, f->result)->cells;
  int64_t hi = slot(in, f->args[1])->cells[0].i, step = slot(in, f->args[2])->cells[0].i;
  if (induction->i <= INT64_MAX - step && induction->i + step < hi) {
    induction->i += step;
    in->next = loop_body(in->p, loop);
  }
  return TJ_OK;
}

/* ---- dispatch ---------------------------------------------------------- */

static tj_status step(Interp *in, const IrInst *inst) {
  switch ((tj_op)inst->op) {
  case TJ_OP_PROGRAM_ID: return exec_index(in, inst, in->pid);
  case TJ_OP_NUM_PROGRAMS: return exec_index(in, inst, in->grid);
  case TJ_OP_PARAM: return exec_param(in, inst);
  case TJ_OP_CONST: return exec_const(in, inst);
  case TJ_OP_ARANGE: return exec_arange(in, inst);
  case TJ_OP_ADD:
  case TJ_OP_SUB:
  case TJ_OP_MUL:
  case TJ_OP_DIV:
  case TJ_OP_REM:
  case TJ_OP_MAX:
  case TJ_OP_MIN:
  case TJ_OP_LT:
  case TJ_OP_LE:
  case TJ_OP_GT:
  case TJ_OP_GE:
  case TJ_OP_EQ:
  case TJ_OP_NE:
  case TJ_OP_AND:
  case TJ_OP_OR: return exec_binary(in, inst);
  case TJ_OP_NEG:
  case TJ_OP_EXP:
  case TJ_OP_EXP2:
  case TJ_OP_LOG: return exec_unary(in, inst);
  case TJ_OP_SELECT: return exec_select(in, inst);
  case TJ_OP_CAST: return exec_cast(in, inst);
  case TJ_OP_PTR_ADD: return exec_ptr_add(in, inst);
  case TJ_OP_LOAD: return exec_load(in, inst);
  case TJ_OP_STORE: return exec_store(in, inst);
  case TJ_OP_REDUCE_MAX:
  case TJ_OP_REDUCE_SUM: return exec_reduce(in, inst);
  case TJ_OP_FOR: return exec_for(in, inst);
  case TJ_OP_ITER:
  case TJ_OP_YIELD: return TJ_OK; /* done by for and endfor */
  case TJ_OP_ENDFOR: return exec_endfor(in, inst);
  case TJ_OP_CONSTEXPR:
  case TJ_OP_COUNT: break;
  }
  return fail_at(in, -1, "not executable in a specialized program");
}

static tj_status run_instance(Interp *in) {
  for (in->pc = 0; in->pc < in->p->ninsts; in->pc = in->next) {
    in->next = in->pc + 1;
    tj_status st = step(in, &in->p->insts[in->pc]);
    if (st != TJ_OK) return st;
  }
  return TJ_OK;
}

/* ---- set-up ------------------------------------------------------------ */

static tj_status invalid(tj_spec *s, const char *fmt, ...) TJ_PRINTF(2, 3);
static tj_status invalid(tj_spec *s, const char *fmt, ...) {
  char why[TJ_ERROR_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  tj_set_error(s->error, "interpret: %s", why);
  return TJ_ERR_INVALID_ARGUMENT;
}

static const char *const arg_kind_names[] = {"a pointer", "an integer", "a float"};

static tj_status check_arg(tj_spec *s, int index, tj_type t, const tj_arg *arg) {
  const char *name = s->prog->params[index];
  tj_arg_kind want = t.shape == TJ_POINTER ? TJ_ARG_PTR
                     : t.elem == TJ_F32    ? TJ_ARG_FLOAT
                                           : TJ_ARG_INT;
  if ((unsigned)arg->kind > TJ_ARG_FLOAT)
    return invalid(s, "argument %d (%s) has an unknown kind %d", index, name, (int)arg->kind);
  if (arg->kind != want)
    return invalid(s, "argument %d (%s) is %s, but the parameter needs %s", index, name,
                   arg_kind_names[arg->kind], arg_kind_names[want]);
  if (want == TJ_ARG_PTR && !arg->u.ptr)
    return invalid(s, "argument %d (%s) is a NULL pointer", index, name);
  if (t.shape == TJ_SCALAR && t.elem == TJ_I32 && (arg->u.i < INT32_MIN || arg->u.i > INT32_MAX))
    return invalid(s, "argument %d (%s) = %lld does not fit i32", index, name, (long long)arg->u.i);
  return TJ_OK;
}

static tj_status check_args(tj_spec *s, const tj_arg *args, int count, int64_t grid) {
  const tj_program *p = s->prog;
  if (!p->specialized) return invalid(s, "the program is not specialized");
  if (grid < 0 || grid > INT32_MAX)
    return invalid(s, "grid %lld is not in [0, 2^31)", (long long)grid);
  if (count != p->nparams) return invalid(s, "%d arguments for %d parameters", count, p->nparams);
  if (count > 0 && !args) return invalid(s, "NULL argument list");
  for (int i = 0; i < p->ninsts; i++) {
    const IrInst *inst = &p->insts[i];
    if (inst->op != TJ_OP_PARAM) continue;
    tj_status st = check_arg(s, (int)inst->iimm, p->types[inst->result], &args[inst->iimm]);
    if (st != TJ_OK) return st;
  }
  return TJ_OK;
}

static int64_t value_len(const tj_program *p, int v) {
  tj_type t = p->types[v];
  return t.shape == TJ_TILE ? ir_tile_len(p, t) : 1;
}

/* Slots, their cells in one arena, and the ENDFOR -> FOR map. */
static tj_status set_up(Interp *in) {
  const tj_program *p = in->p;
  size_t cells = 0;
  for (int v = 0; v < p->nvalues; v++) cells += (size_t)value_len(p, v);
  in->slots = tj_alloc((size_t)p->nvalues * sizeof *in->slots);
  in->arena = tj_alloc(cells * sizeof *in->arena);
  in->loop_for = tj_alloc((size_t)p->ninsts * sizeof *in->loop_for);
  in->yielded = tj_alloc((size_t)p->ninsts * sizeof *in->yielded);
  if (!in->slots || !in->arena || !in->loop_for || !in->yielded) {
    tj_set_error(in->spec->error, "interpret: out of memory (%zu cells)", cells);
    return TJ_ERR_OUT_OF_MEMORY;
  }
  Cell *next = in->arena;
  for (int v = 0; v < p->nvalues; v++) {
    in->slots[v] = (Slot){next, value_len(p, v), (tj_elem)p->types[v].elem, -1};
    next += in->slots[v].len;
  }
  for (int i = 0; i < p->ninsts; i++)
    if (p->insts[i].op == TJ_OP_FOR) in->loop_for[p->insts[i].iimm] = i;
  return TJ_OK;
}

static void tear_down(Interp *in) {
  free(in->slots);
  free(in->arena);
  free(in->loop_for);
  free(in->yielded);
}

tj_status tj_interpret(tj_spec *s, const tj_arg *args, int arg_count, int64_t grid) {
  if (!s || !s->prog) return TJ_ERR_INVALID_ARGUMENT;
  tj_status st = check_args(s, args, arg_count, grid);
  if (st != TJ_OK) return st;
  Interp in;
  memset(&in, 0, sizeof in);
  in.spec = s;
  in.p = s->prog;
  in.args = args;
  in.grid = grid;
  if ((st = set_up(&in)) == TJ_OK)
    for (in.pid = 0; in.pid < grid && st == TJ_OK; in.pid++) st = run_instance(&in);
  tear_down(&in);
  return st; /* success writes nothing to s: other threads may be using it */
}
