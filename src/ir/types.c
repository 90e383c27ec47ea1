/*
 * types.c — the type rules of the IR, in one place. ir_infer checks an
 * instruction's operands against its op's rule (the rule column of the op
 * table) and computes the result type; ir_append (builder and parser) and
 * the verifier all go through it, so a rule is written once.
 *
 * Elementwise rules broadcast: a scalar operand stands for a tile of the
 * other operands' length; tiles must share their length constant.
 *
 * Also here: the rule for the values of constants (ir_const_immediate).
 */
#include "ir/ir.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define F32_OVERFLOW 0x1.ffffffp127 /* the least double that rounds to an infinite float */

bool ir_type_equal(tj_type a, tj_type b) {
  return a.shape == b.shape && a.elem == b.elem && (a.shape != TJ_TILE || a.len == b.len);
}

void ir_type_format(const tj_program *p, tj_type t, char *out, size_t size) {
  const char *elem = ir_elem_name((tj_elem)t.elem);
  if (t.shape == TJ_SCALAR) {
    snprintf(out, size, "%s", elem);
  } else if (t.shape == TJ_POINTER) {
    snprintf(out, size, "ptr<%s>", elem);
  } else if (t.shape == TJ_TILE) {
    const char *len = t.len >= 0 && t.len < p->nconsts ? p->consts[t.len].name : "?";
    snprintf(out, size, "tile<%s,%s>", elem, len);
  } else {
    snprintf(out, size, "?");
  }
}

typedef struct Check {
  const tj_program *p;
  const int32_t *args;
  int nargs;
  char *why;
  size_t size;
} Check;

static bool fail(Check *c, const char *fmt, ...) TJ_PRINTF(2, 3);
static bool fail(Check *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->why, c->size, fmt, ap);
  va_end(ap);
  return false;
}

static tj_type arg_type(const Check *c, int i) { return c->p->types[c->args[i]]; }

static bool is_numeric(tj_elem e) { return e == TJ_I32 || e == TJ_I64 || e == TJ_F32; }

/* Operand i described for messages: "operand 2 (%6 : tile<i32,BLOCK>)". */
static const char *describe(const Check *c, int i, char *buf, size_t size) {
  char t[64];
  ir_type_format(c->p, arg_type(c, i), t, sizeof t);
  snprintf(buf, size, "operand %d (%%%d : %s)", i + 1, c->args[i], t);
  return buf;
}

/* The broadcast shape of operands [from, to): a tile if any is one. */
static bool broadcast(Check *c, int from, int to, tj_type *shape) {
  shape->shape = TJ_SCALAR;
  shape->len = -1;
  for (int i = from; i < to; i++) {
    tj_type t = arg_type(c, i);
    char d[96];
    if (t.shape == TJ_POINTER) return fail(c, "%s is a pointer, not a scalar or tile", describe(c, i, d, sizeof d));
    if (t.shape != TJ_TILE) continue;
    if (shape->shape == TJ_TILE && shape->len != t.len)
      return fail(c, "%s has another tile length than the operands before it", describe(c, i, d, sizeof d));
    shape->shape = TJ_TILE;
    shape->len = t.len;
  }
  return true;
}

/* Operands [from, to) share one element type that satisfies ok. */
static bool same_elem(Check *c, int from, int to, bool (*ok)(tj_elem), const char *what, tj_elem *elem) {
  char d[96];
  *elem = (tj_elem)arg_type(c, from).elem;
  for (int i = from; i < to; i++) {
    tj_elem e = (tj_elem)arg_type(c, i).elem;
    if (!ok(e)) return fail(c, "%s must be %s", describe(c, i, d, sizeof d), what);
    if (e != *elem) return fail(c, "%s must have the element type of operand %d (%s)", describe(c, i, d, sizeof d), from + 1, ir_elem_name(*elem));
  }
  return true;
}

static bool numeric_ok(tj_elem e) { return is_numeric(e); }
static bool float_ok(tj_elem e) { return e == TJ_F32; }
static bool pred_ok(tj_elem e) { return e == TJ_PRED; }
static bool value_ok(tj_elem e) { return is_numeric(e) || e == TJ_PRED; }
static bool int_ok(tj_elem e) { return ir_elem_is_int(e); }
static bool reducible_ok(tj_elem e) { return e == TJ_F32 || e == TJ_I32; }

static bool elementwise(Check *c, bool (*ok)(tj_elem), const char *what, tj_elem out_elem, tj_type *r) {
  tj_elem e;
  if (!broadcast(c, 0, c->nargs, r) || !same_elem(c, 0, c->nargs, ok, what, &e)) return false;
  r->elem = (uint8_t)(out_elem == TJ_ELEM_COUNT ? e : out_elem);
  return true;
}

static bool valid_type(const tj_program *p, tj_type t) {
  if (t.elem >= TJ_ELEM_COUNT) return false;
  if (t.shape == TJ_TILE) return t.len >= 0 && t.len < p->nconsts;
  return t.shape == TJ_SCALAR || (t.shape == TJ_POINTER && t.elem != TJ_PRED);
}

static bool declared(Check *c, tj_op op, tj_type d, tj_type *r) {
  char t[64];
  if (d.shape == 0xff) return fail(c, "needs a declared result type");
  if (!valid_type(c->p, d)) return fail(c, "the declared type is not a valid type");
  ir_type_format(c->p, d, t, sizeof t);
  *r = d;
  if (op == TJ_OP_ARANGE && !(d.shape == TJ_TILE && d.elem == TJ_I32))
    return fail(c, "result must be a tile of i32, not %s", t);
  if (op == TJ_OP_CONST && (d.shape == TJ_POINTER || !(is_numeric((tj_elem)d.elem))))
    return fail(c, "result must be an i32, i64 or f32 scalar or tile, not %s", t);
  if (op == TJ_OP_PARAM && (d.shape == TJ_TILE || d.elem == TJ_PRED ||
                            (d.shape == TJ_SCALAR && !is_numeric((tj_elem)d.elem))))
    return fail(c, "a parameter is an i32, i64 or f32 scalar or a pointer, not %s", t);
  return true;
}

static bool cast_rule(Check *c, tj_type d, tj_type *r) {
  tj_type a = arg_type(c, 0);
  char desc[96];
  if (a.shape == TJ_POINTER || a.elem == TJ_PRED)
    return fail(c, "%s must be a numeric scalar or tile", describe(c, 0, desc, sizeof desc));
  if (d.shape == 0xff) return fail(c, "needs a target type");
  if (d.elem >= TJ_ELEM_COUNT || d.elem == TJ_PRED) return fail(c, "cannot cast to pred or an unknown type");
  if (d.shape != a.shape || (a.shape == TJ_TILE && d.len != a.len))
    return fail(c, "a cast keeps the shape of %s", describe(c, 0, desc, sizeof desc));
  *r = d;
  return true;
}

static bool is_int_scalar(tj_type t) { return t.shape == TJ_SCALAR && ir_elem_is_int((tj_elem)t.elem); }
static bool is_int_tile(tj_type t) { return t.shape == TJ_TILE && ir_elem_is_int((tj_elem)t.elem); }

static bool mask_ok(Check *c, int i, int16_t len) {
  tj_type m = arg_type(c, i);
  char d[96];
  if (m.elem != TJ_PRED || m.shape == TJ_POINTER || (m.shape == TJ_TILE && m.len != len))
    return fail(c, "%s must be a pred tile of the offsets' length, or a pred scalar", describe(c, i, d, sizeof d));
  return true;
}

static bool memory_base(Check *c, tj_type *ptr, tj_type *offsets) {
  char d[96];
  *ptr = arg_type(c, 0);
  *offsets = arg_type(c, 1);
  if (ptr->shape != TJ_POINTER) return fail(c, "%s must be a pointer", describe(c, 0, d, sizeof d));
  if (!is_int_tile(*offsets)) return fail(c, "%s must be a tile of i32 or i64 offsets", describe(c, 1, d, sizeof d));
  return true;
}

static bool load_rule(Check *c, tj_type *r) {
  tj_type ptr, offsets;
  char d[96];
  if (!memory_base(c, &ptr, &offsets)) return false;
  if (c->nargs > 2 && !mask_ok(c, 2, offsets.len)) return false;
  if (c->nargs > 3) {
    tj_type o = arg_type(c, 3);
    if (o.shape != TJ_SCALAR || !is_numeric((tj_elem)o.elem))
      return fail(c, "%s (other) must be a numeric scalar", describe(c, 3, d, sizeof d));
  }
  *r = tj_tile_type((tj_elem)ptr.elem, offsets.len);
  return true;
}

static bool store_rule(Check *c, tj_type *r) {
  tj_type ptr, offsets;
  char d[96];
  if (!memory_base(c, &ptr, &offsets)) return false;
  tj_type v = arg_type(c, 2);
  if (v.elem != ptr.elem || v.shape == TJ_POINTER || (v.shape == TJ_TILE && v.len != offsets.len))
    return fail(c, "%s must be a tile (or scalar) of the pointee type %s and the offsets' length",
                describe(c, 2, d, sizeof d), ir_elem_name((tj_elem)ptr.elem));
  if (c->nargs > 3 && !mask_ok(c, 3, offsets.len)) return false;
  *r = ir_no_type();
  return true;
}

static bool scalar_rule(Check *c, tj_type *r) {
  char d[96];
  for (int i = 0; i < c->nargs; i++) {
    tj_type t = arg_type(c, i);
    if (t.shape != TJ_SCALAR || t.elem == TJ_PRED)
      return fail(c, "%s must be a numeric scalar", describe(c, i, d, sizeof d));
    if (i > 0 && !ir_type_equal(t, arg_type(c, 0)))
      return fail(c, "%s must have the type of operand 1", describe(c, i, d, sizeof d));
  }
  *r = arg_type(c, 0);
  return true;
}

static bool infer(Check *c, tj_op op, tj_type d, tj_type *r) {
  char desc[96];
  switch (ir_ops[op].rule) {
  case RULE_I32_SCALAR: *r = tj_scalar_type(TJ_I32); return true;
  case RULE_DECLARED: return declared(c, op, d, r);
  case RULE_ARITH: return elementwise(c, numeric_ok, "i32, i64 or f32", TJ_ELEM_COUNT, r);
  case RULE_FLOAT1:
  case RULE_FLOAT2: return elementwise(c, float_ok, "f32", TJ_ELEM_COUNT, r);
  case RULE_INT2: return elementwise(c, int_ok, "i32 or i64", TJ_ELEM_COUNT, r);
  case RULE_COMPARE: return elementwise(c, numeric_ok, "i32, i64 or f32", TJ_PRED, r);
  case RULE_LOGIC: return elementwise(c, pred_ok, "pred", TJ_ELEM_COUNT, r);
  case RULE_SELECT: {
    tj_elem e;
    if (arg_type(c, 0).elem != TJ_PRED || arg_type(c, 0).shape == TJ_POINTER)
      return fail(c, "%s must be a pred", describe(c, 0, desc, sizeof desc));
    if (!broadcast(c, 0, 3, r) || !same_elem(c, 1, 3, value_ok, "numeric or pred", &e)) return false;
    r->elem = (uint8_t)e;
    return true;
  }
  case RULE_CAST: return cast_rule(c, d, r);
  case RULE_PTR_ADD:
    if (arg_type(c, 0).shape != TJ_POINTER) return fail(c, "%s must be a pointer", describe(c, 0, desc, sizeof desc));
    if (!is_int_scalar(arg_type(c, 1))) return fail(c, "%s must be an i32 or i64 scalar", describe(c, 1, desc, sizeof desc));
    *r = arg_type(c, 0);
    return true;
  case RULE_LOAD: return load_rule(c, r);
  case RULE_STORE: return store_rule(c, r);
  case RULE_REDUCE: {
    tj_type t = arg_type(c, 0);
    if (t.shape != TJ_TILE || !reducible_ok((tj_elem)t.elem))
      return fail(c, "%s must be a tile of f32 or i32", describe(c, 0, desc, sizeof desc));
    *r = tj_scalar_type((tj_elem)t.elem);
    return true;
  }
  case RULE_FOR: {
    tj_elem e;
    if (!scalar_rule(c, r) || !same_elem(c, 0, 3, int_ok, "an i32 or i64 scalar", &e)) return false;
    return true;
  }
  case RULE_ITER: return scalar_rule(c, r);
  case RULE_YIELD:
    if (!scalar_rule(c, r)) return false;
    *r = ir_no_type();
    return true;
  case RULE_ENDFOR: *r = ir_no_type(); return true;
  }
  return fail(c, "unknown rule");
}

bool ir_infer(const tj_program *p, tj_op op, const int32_t *args, int nargs, tj_type declared_type,
              tj_type *result, char *why, size_t why_size) {
  Check c = {p, args, nargs, why, why_size};
  if (!infer(&c, op, declared_type, result)) return false;
  bool given = declared_type.shape != 0xff;
  if (given && ir_ops[op].rule != RULE_DECLARED && ir_ops[op].rule != RULE_CAST &&
      ir_op_has_result(op) && !ir_type_equal(declared_type, *result)) {
    char want[64], got[64];
    ir_type_format(p, declared_type, want, sizeof want);
    ir_type_format(p, *result, got, sizeof got);
    return fail(&c, "declared type %s, but the operands give %s", want, got);
  }
  return true;
}

bool ir_const_immediate(tj_elem e, double v, double *stored, const char **why) {
  *stored = v;
  if (e == TJ_F32) {
    if (isfinite(v) && fabs(v) >= F32_OVERFLOW) return *why = "is out of range for f32", false;
    *stored = (double)(float)v; /* NaN keeps its sign and the payload bits an f32 has */
    return true;
  }
  if (!ir_elem_is_int(e)) return true; /* not a const type: the type rule says so */
  double lo = e == TJ_I32 ? -2147483648.0 : -9223372036854775808.0;
  double hi = e == TJ_I32 ? 2147483648.0 : 9223372036854775808.0; /* excluded */
  if (!(v >= lo && v < hi) || v != floor(v)) {
    *why = e == TJ_I32 ? "is not a value of i32" : "is not a value of i64";
    return false;
  }
  *stored = v + 0.0; /* -0 is 0 */
  return true;
}
