/*
 * builder.c — the public builder API of tilejit.h: programs, constants and
 * one call per way of making an instruction. Each call translates handles
 * into value indices (rejecting NULLs and values of other programs), then
 * hands the instruction to ir_append, which owns every rule.
 *
 * Also here: the public text entry points, which wrap print.c and parse.c.
 */
#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

tj_status tj_program_create(const char *name, tj_program **out) {
  if (!out) return TJ_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (name && !ir_valid_identifier(name, strlen(name))) return TJ_ERR_INVALID_ARGUMENT;
  *out = ir_program_new(name ? name : "kernel");
  return *out ? TJ_OK : TJ_ERR_OUT_OF_MEMORY;
}

void tj_program_destroy(tj_program *p) { ir_program_free(p); }

const char *tj_program_error(const tj_program *p) { return p ? p->error : "no program (NULL)"; }

tj_status tj_program_declare_const(tj_program *p, const char *name, int *index) {
  if (!p) return TJ_ERR_INVALID_ARGUMENT;
  if (!name || !index) return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "declare_const: NULL argument");
  return ir_const_add(p, name, strlen(name), index);
}

tj_status tj_program_const(const tj_program *p, const char *name, int *index) {
  if (!p || !name || !index) return TJ_ERR_INVALID_ARGUMENT;
  *index = ir_const_find(p, name, strlen(name));
  return *index >= 0 ? TJ_OK : TJ_ERR_INVALID_ARGUMENT;
}

static IrAppend make(tj_op op) {
  IrAppend a;
  memset(&a, 0, sizeof a);
  a.op = op;
  a.declared = ir_no_type();
  for (int i = 0; i < IR_MAX_ARGS; i++) a.args[i] = IR_NONE;
  return a;
}

static tj_status emit(tj_program *p, const IrAppend *a, tj_value *out) {
  int32_t result = IR_NONE;
  tj_status st = ir_append(p, a, &result);
  if (out) *out = st == TJ_OK && result != IR_NONE ? ir_value_handle(p, result) : TJ_NO_VALUE;
  return st;
}

/* Translates operand handles; a NULL list, a zero or a foreign value fails. */
static tj_status take_operands(tj_program *p, IrAppend *a, const tj_value *operands, int count) {
  const char *name = ir_ops[a->op].name;
  if (count < 0 || count > IR_MAX_ARGS)
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "%s: %d operands (at most %d)", name, count, IR_MAX_ARGS);
  if (count > 0 && !operands) return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "%s: NULL operand list", name);
  for (int i = 0; i < count; i++) {
    a->args[i] = ir_value_index(p, operands[i]);
    if (a->args[i] < 0)
      return ir_fail(p, TJ_ERR_INVALID_ARGUMENT,
                     "%s: operand %d is not a value of this program (no value, or another program's)", name, i + 1);
  }
  a->nargs = count;
  return TJ_OK;
}

tj_status tj_build_param(tj_program *p, const char *name, tj_type type, tj_value *out) {
  if (!p) return TJ_ERR_INVALID_ARGUMENT;
  if (!name || !out) return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "param: NULL argument");
  if (!ir_valid_identifier(name, strlen(name)))
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "param: name '%.64s' is not an identifier", name);
  IrAppend a = make(TJ_OP_PARAM);
  a.declared = type;
  a.iimm = ir_param_add(p, name, strlen(name));
  if (a.iimm < 0) return ir_fail(p, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  tj_status st = emit(p, &a, out);
  if (st != TJ_OK) free(p->params[--p->nparams]);
  return st;
}

tj_status tj_build_const(tj_program *p, tj_type type, double value, tj_value *out) {
  if (!p) return TJ_ERR_INVALID_ARGUMENT;
  if (!out) return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "const: NULL result pointer");
  IrAppend a = make(TJ_OP_CONST);
  a.declared = type;
  a.fimm = value; /* ir_append checks it against the type and rounds it to f32 */
  return emit(p, &a, out);
}

tj_status tj_build_constexpr(tj_program *p, int const_index, tj_value *out) {
  if (!p) return TJ_ERR_INVALID_ARGUMENT;
  if (!out) return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "constexpr: NULL result pointer");
  IrAppend a = make(TJ_OP_CONSTEXPR);
  a.iimm = const_index;
  return emit(p, &a, out);
}

tj_status tj_build_arange(tj_program *p, int len_const, tj_value *out) {
  if (!p) return TJ_ERR_INVALID_ARGUMENT;
  if (!out) return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "arange: NULL result pointer");
  if (len_const < 0 || len_const >= p->nconsts)
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "arange: no constant with index %d", len_const);
  IrAppend a = make(TJ_OP_ARANGE);
  a.declared = tj_tile_type(TJ_I32, len_const);
  return emit(p, &a, out);
}

tj_status tj_build_cast(tj_program *p, tj_value v, tj_elem to, tj_value *out) {
  if (!p) return TJ_ERR_INVALID_ARGUMENT;
  if (!out) return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "cast: NULL result pointer");
  IrAppend a = make(TJ_OP_CAST);
  tj_status st = take_operands(p, &a, &v, 1);
  if (st != TJ_OK) return st;
  if ((unsigned)to >= TJ_ELEM_COUNT) return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "cast: unknown element type %d", (int)to);
  a.declared = p->types[a.args[0]];
  a.declared.elem = (uint8_t)to;
  return emit(p, &a, out);
}

tj_status tj_build(tj_program *p, tj_op op, const tj_value *operands, int count, tj_value *out) {
  if (!p) return TJ_ERR_INVALID_ARGUMENT;
  if ((unsigned)op >= TJ_OP_COUNT) return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "unknown op %d", (int)op);
  if (ir_ops[op].rule == RULE_DECLARED || op == TJ_OP_CAST || op == TJ_OP_CONSTEXPR)
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "%s has its own builder call (tj_build_%s)",
                   ir_ops[op].name, ir_ops[op].name);
  if (ir_op_has_result(op) && !out)
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "%s: NULL result pointer", ir_ops[op].name);
  IrAppend a = make(op);
  tj_status st = take_operands(p, &a, operands, count);
  return st == TJ_OK ? emit(p, &a, out) : st;
}

tj_status tj_program_verify(tj_program *p) {
  if (!p) return TJ_ERR_INVALID_ARGUMENT;
  return ir_verify(p);
}

tj_status tj_program_print(tj_program *p, char **text) {
  if (!p) return TJ_ERR_INVALID_ARGUMENT;
  if (!text) return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "print: NULL result pointer");
  TjBuf b;
  buf_init(&b);
  ir_print(p, &b);
  *text = buf_take(&b);
  return *text ? TJ_OK : ir_fail(p, TJ_ERR_OUT_OF_MEMORY, "out of memory");
}

tj_status tj_program_parse(const char *text, size_t length, tj_program **out) {
  if (!out) return TJ_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (!text) return TJ_ERR_INVALID_ARGUMENT;
  tj_status st = ir_parse(text, length, out);
  if (st == TJ_OK) st = ir_verify(*out);
  return st;
}
