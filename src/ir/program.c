/*
 * program.c — program storage: instructions, values, constants and
 * parameters, and ir_append, the one door through which every instruction
 * enters a program (from the builder API and from the parser alike).
 *
 * ir_append checks arity, operands (defined, of this program, in scope),
 * loop structure (iter right after for, yields right before endfor, each
 * iter yielded once) and, through ir_infer, the op's type rule. Nothing is
 * appended when a check fails, so a failed call leaves the program usable.
 */
#include "ir/ir.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tags make values of different programs distinguishable; an atomic counter
 * is the only shared state, and it needs no lock. */
static atomic_uint next_tag = 1;

static const char *const builtin_names[TJ_CONST_BUILTIN_COUNT] = {"BLOCK", "NUM_WARPS", "ALIGN",
                                                                  "CLUSTER", "SPLIT"};

tj_program *ir_program_new(const char *name) {
  tj_program *p = tj_alloc(sizeof *p);
  if (!p) return NULL;
  p->name = tj_strdup(name ? name : "kernel");
  p->tag = (atomic_fetch_add(&next_tag, 1) % 4095u) + 1u;
  bool ok = p->name != NULL;
  for (int i = 0; ok && i < TJ_CONST_BUILTIN_COUNT; i++) {
    int index;
    ok = ir_const_add(p, builtin_names[i], strlen(builtin_names[i]), &index) == TJ_OK;
  }
  if (!ok) {
    ir_program_free(p);
    return NULL;
  }
  return p;
}

void ir_program_free(tj_program *p) {
  if (!p) return;
  for (int i = 0; i < p->nconsts; i++) free(p->consts[i].name);
  for (int i = 0; i < p->nparams; i++) free(p->params[i]);
  free(p->consts);
  free(p->params);
  free(p->insts);
  free(p->types);
  free(p->defs);
  free(p->scopes);
  free(p->open_loops);
  free(p->name);
  free(p);
}

static void *dup_array(const void *src, int count, size_t elem, bool *ok) {
  if (count == 0) return NULL;
  void *d = tj_realloc(NULL, (size_t)count * elem);
  if (!d) {
    *ok = false;
    return NULL;
  }
  memcpy(d, src, (size_t)count * elem);
  return d;
}

/* Copies the constants and parameter names, counting them as they come so
 * that a copy left half done frees cleanly. */
static bool copy_names(tj_program *d, const tj_program *p) {
  for (int i = 0; i < p->nconsts; i++) {
    d->consts[i] = p->consts[i];
    if (!(d->consts[i].name = tj_strdup(p->consts[i].name))) return false;
    d->nconsts = i + 1;
  }
  for (int i = 0; i < p->nparams; i++) {
    if (!(d->params[i] = tj_strdup(p->params[i]))) return false;
    d->nparams = i + 1;
  }
  return true;
}

tj_program *ir_program_copy(const tj_program *p) {
  tj_program *d = tj_alloc(sizeof *d);
  if (!d) return NULL;
  *d = *p;
  /* Own nothing of p's yet, so that ir_program_free(d) is safe at any point. */
  d->name = NULL, d->insts = NULL, d->types = NULL, d->defs = NULL, d->scopes = NULL;
  d->open_loops = NULL, d->consts = NULL, d->params = NULL;
  d->nconsts = d->nparams = 0;
  bool ok = true;
  d->name = tj_strdup(p->name);
  d->insts = dup_array(p->insts, p->ninsts, sizeof *p->insts, &ok);
  d->types = dup_array(p->types, p->nvalues, sizeof *p->types, &ok);
  d->defs = dup_array(p->defs, p->nvalues, sizeof *p->defs, &ok);
  d->scopes = dup_array(p->scopes, p->nvalues, sizeof *p->scopes, &ok);
  d->open_loops = dup_array(p->open_loops, p->nopen, sizeof *p->open_loops, &ok);
  d->consts = tj_alloc((size_t)(p->nconsts ? p->nconsts : 1) * sizeof *d->consts);
  d->params = tj_alloc((size_t)(p->nparams ? p->nparams : 1) * sizeof *d->params);
  d->cap_insts = p->ninsts, d->cap_values = p->nvalues, d->cap_open = p->nopen;
  d->cap_consts = p->nconsts ? p->nconsts : 1, d->cap_params = p->nparams ? p->nparams : 1;
  ok = ok && d->name && d->consts && d->params && copy_names(d, p);
  if (!ok) {
    ir_program_free(d);
    return NULL;
  }
  return d;
}

tj_status ir_fail(tj_program *p, tj_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->error, sizeof p->error, fmt, ap);
  va_end(ap);
  return status;
}

int ir_const_find(const tj_program *p, const char *name, size_t len) {
  for (int i = 0; i < p->nconsts; i++)
    if (strlen(p->consts[i].name) == len && memcmp(p->consts[i].name, name, len) == 0) return i;
  return -1;
}

bool ir_valid_identifier(const char *name, size_t len) {
  if (len == 0 || len > 63) return false;
  for (size_t i = 0; i < len; i++) {
    char c = name[i];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

static char *dup_len(const char *s, size_t len) {
  char *d = tj_realloc(NULL, len + 1);
  if (d) {
    memcpy(d, s, len);
    d[len] = '\0';
  }
  return d;
}

tj_status ir_const_add(tj_program *p, const char *name, size_t len, int *index) {
  if (!ir_valid_identifier(name, len))
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "constant name '%.*s' is not an identifier",
                   (int)(len > 64 ? 64 : len), name);
  if (ir_const_find(p, name, len) >= 0)
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "constant %.*s is already declared", (int)len, name);
  if (p->nconsts >= INT16_MAX) return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "too many constants");
  if (!tj_grow((void **)&p->consts, &p->cap_consts, p->nconsts + 1, sizeof *p->consts))
    return ir_fail(p, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  IrConst *c = &p->consts[p->nconsts];
  memset(c, 0, sizeof *c);
  if (!(c->name = dup_len(name, len))) return ir_fail(p, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  *index = p->nconsts++;
  return TJ_OK;
}

int ir_param_add(tj_program *p, const char *name, size_t len) {
  if (!tj_grow((void **)&p->params, &p->cap_params, p->nparams + 1, sizeof *p->params)) return -1;
  if (!(p->params[p->nparams] = dup_len(name, len))) return -1;
  return p->nparams++;
}

tj_value ir_value_handle(const tj_program *p, int index) {
  return ((tj_value)p->tag << 20) | (tj_value)(index + 1);
}

int ir_value_index(const tj_program *p, tj_value v) {
  if ((v >> 20) != p->tag) return -1;
  int index = (int)(v & 0xfffffu) - 1;
  return index >= 0 && index < p->nvalues ? index : -1;
}

tj_type ir_no_type(void) {
  tj_type t = {0xff, 0, -1};
  return t;
}

/* ---- structure checks ------------------------------------------------ */

static int innermost_loop(const tj_program *p) {
  return p->nopen ? p->open_loops[p->nopen - 1] : IR_NONE;
}

/* A value is in scope while the loop it lives in is open: a FOR's iimm is
 * 0 until its ENDFOR (record), so this costs the same at any depth. */
static bool in_scope(const tj_program *p, int value) {
  int scope = p->scopes[value];
  return scope == IR_NONE || p->insts[scope].iimm == 0;
}

static tj_status check_operands(tj_program *p, const IrAppend *a) {
  const IrOpInfo *info = &ir_ops[a->op];
  if (a->nargs < info->min_args || a->nargs > info->max_args) {
    if (info->min_args == info->max_args)
      return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "%s takes %d operand%s, got %d", info->name,
                     info->min_args, info->min_args == 1 ? "" : "s", a->nargs);
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "%s takes %d to %d operands, got %d", info->name,
                   info->min_args, info->max_args, a->nargs);
  }
  for (int i = 0; i < a->nargs; i++) {
    int v = a->args[i];
    if (v < 0 || v >= p->nvalues)
      return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "%s: operand %d is not a value of this program",
                     info->name, i + 1);
    if (!in_scope(p, v))
      return ir_fail(p, TJ_ERR_VERIFY,
                     "%s: operand %d (%%%d) is defined inside a loop that has ended", info->name,
                     i + 1, v);
  }
  return TJ_OK;
}

/* Iter values of the loop opened by instruction `loop`. */
static int loop_iter_count(const tj_program *p, int loop) {
  int n = 0;
  while (loop + 1 + n < p->ninsts && p->insts[loop + 1 + n].op == TJ_OP_ITER) n++;
  return n;
}

static bool is_iter_of(const tj_program *p, int value, int loop) {
  int def = p->defs[value];
  return p->insts[def].op == TJ_OP_ITER && def > loop && def <= loop + loop_iter_count(p, loop);
}

static bool yielded_already(const tj_program *p, int value) {
  for (int i = p->ninsts - 1; i >= 0 && p->insts[i].op == TJ_OP_YIELD; i--)
    if (p->insts[i].args[0] == value) return true;
  return false;
}

static tj_status check_structure(tj_program *p, const IrAppend *a) {
  int loop = innermost_loop(p);
  const IrInst *prev = p->ninsts ? &p->insts[p->ninsts - 1] : NULL;
  bool after_yield = prev && prev->op == TJ_OP_YIELD;
  switch (a->op) {
  case TJ_OP_ITER:
    if (!prev || (prev->op != TJ_OP_FOR && prev->op != TJ_OP_ITER))
      return ir_fail(p, TJ_ERR_VERIFY, "iter must come right after for or another iter");
    return TJ_OK;
  case TJ_OP_YIELD:
    if (loop == IR_NONE) return ir_fail(p, TJ_ERR_VERIFY, "yield outside a loop");
    if (!is_iter_of(p, a->args[0], loop))
      return ir_fail(p, TJ_ERR_VERIFY, "yield: %%%d is not an iter of the innermost loop",
                     a->args[0]);
    if (yielded_already(p, a->args[0]))
      return ir_fail(p, TJ_ERR_VERIFY, "yield: iter %%%d is yielded twice", a->args[0]);
    return TJ_OK;
  case TJ_OP_ENDFOR: {
    if (loop == IR_NONE) return ir_fail(p, TJ_ERR_VERIFY, "endfor without a for");
    int yields = 0;
    for (int i = p->ninsts - 1; i >= 0 && p->insts[i].op == TJ_OP_YIELD; i--) yields++;
    if (yields != loop_iter_count(p, loop))
      return ir_fail(p, TJ_ERR_VERIFY, "endfor: the loop has %d iter%s but %d yield%s before endfor",
                     loop_iter_count(p, loop), loop_iter_count(p, loop) == 1 ? "" : "s", yields,
                     yields == 1 ? "" : "s");
    return TJ_OK;
  }
  default:
    if (after_yield)
      return ir_fail(p, TJ_ERR_VERIFY, "yields must come right before endfor, not before %s",
                     ir_ops[a->op].name);
    return TJ_OK;
  }
}

/* A constant's value must be one of its type (types.c); *stored is what the
 * program keeps (rounded to f32, or the integer). */
static tj_status check_const_value(tj_program *p, tj_type t, double v, double *stored) {
  const char *why;
  if (ir_const_immediate((tj_elem)t.elem, v, stored, &why)) return TJ_OK;
  char shown[64];
  tj_format_double(shown, sizeof shown, v);
  return ir_fail(p, TJ_ERR_TYPE, "const: %s %s", shown, why);
}

/* Parameters are declared at top level, each once, in order, each with a
 * name of its own (the kernel's parameters are named after them), at most
 * IR_MAX_PARAMS of them. */
static tj_status check_param(tj_program *p, int64_t index) {
  int seen = p->nparam_insts;
  if (index < 0 || index >= p->nparams || index != seen)
    return ir_fail(p, TJ_ERR_VERIFY, "param: parameter %lld is out of order (expected %d)",
                   (long long)index, seen);
  if (p->nopen) return ir_fail(p, TJ_ERR_VERIFY, "param inside a loop");
  if (index >= IR_MAX_PARAMS)
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "param: more than %d parameters", IR_MAX_PARAMS);
  for (int64_t i = 0; i < index; i++)
    if (strcmp(p->params[i], p->params[index]) == 0)
      return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "param: parameter %s is already declared",
                     p->params[index]);
  return TJ_OK;
}

static tj_status grow_all(tj_program *p) {
  bool ok = tj_grow((void **)&p->insts, &p->cap_insts, p->ninsts + 1, sizeof *p->insts);
  int cap = p->cap_values;
  ok = ok && tj_grow((void **)&p->types, &cap, p->nvalues + 1, sizeof *p->types);
  cap = p->cap_values;
  ok = ok && tj_grow((void **)&p->defs, &cap, p->nvalues + 1, sizeof *p->defs);
  cap = p->cap_values;
  ok = ok && tj_grow((void **)&p->scopes, &cap, p->nvalues + 1, sizeof *p->scopes);
  if (ok) p->cap_values = cap;
  ok = ok && tj_grow((void **)&p->open_loops, &p->cap_open, p->nopen + 1, sizeof *p->open_loops);
  return ok ? TJ_OK : ir_fail(p, TJ_ERR_OUT_OF_MEMORY, "out of memory");
}

/* The scope a new value lives in: an iter lives outside its loop. */
static int result_scope(const tj_program *p, tj_op op) {
  if (op == TJ_OP_ITER) return p->nopen >= 2 ? p->open_loops[p->nopen - 2] : IR_NONE;
  return innermost_loop(p);
}

static void record(tj_program *p, const IrAppend *a, tj_type type, int32_t *result) {
  int at = p->ninsts++;
  IrInst *in = &p->insts[at];
  memset(in, 0, sizeof *in);
  in->op = (uint8_t)a->op;
  in->nargs = a->nargs;
  for (int i = 0; i < IR_MAX_ARGS; i++) in->args[i] = i < a->nargs ? a->args[i] : IR_NONE;
  in->fimm = a->fimm;
  in->iimm = a->op == TJ_OP_FOR ? 0 : a->iimm; /* set at its ENDFOR */
  in->result = IR_NONE;
  p->nparam_insts += a->op == TJ_OP_PARAM;
  if (ir_op_has_result(a->op)) {
    int v = p->nvalues++;
    if (a->op == TJ_OP_FOR) p->open_loops[p->nopen++] = at;
    p->types[v] = type;
    p->defs[v] = at;
    p->scopes[v] = result_scope(p, a->op);
    in->result = v;
  }
  if (a->op == TJ_OP_ENDFOR) p->insts[p->open_loops[--p->nopen]].iimm = at;
  if (result) *result = in->result;
}

tj_status ir_append(tj_program *p, const IrAppend *a, int32_t *result) {
  if ((unsigned)a->op >= TJ_OP_COUNT) return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "unknown op %d", (int)a->op);
  if (p->nvalues + 1 >= IR_MAX_VALUES) return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "too many values");
  tj_status st = check_operands(p, a);
  if (st == TJ_OK) st = check_structure(p, a);
  if (st != TJ_OK) return st;
  tj_type type;
  char why[256];
  if (!ir_infer(p, a->op, a->args, a->nargs, a->declared, &type, why, sizeof why))
    return ir_fail(p, TJ_ERR_TYPE, "%s: %s", ir_ops[a->op].name, why);
  if (a->op == TJ_OP_PARAM && (st = check_param(p, a->iimm)) != TJ_OK) return st;
  IrAppend kept = *a;
  if (a->op == TJ_OP_CONST && (st = check_const_value(p, type, a->fimm, &kept.fimm)) != TJ_OK)
    return st;
  if (a->op == TJ_OP_CONSTEXPR && (a->iimm < 0 || a->iimm >= p->nconsts))
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "constexpr: no constant %lld", (long long)a->iimm);
  if ((st = grow_all(p)) != TJ_OK) return st;
  record(p, &kept, type, result);
  return TJ_OK;
}
