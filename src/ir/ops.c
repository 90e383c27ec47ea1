/*
 * ops.c — the op table of tilejit.h expanded into data: each op's text name,
 * arity, kind and type rule, plus the names of element types and dtypes.
 *
 * This is the only place the X-macro is expanded for the IR; the printer,
 * parser, verifier and interpreter read ir_ops[] instead of switching on
 * ops, and code generators keep their own tables tied to TJ_OP_COUNT.
 */
#include "ir/ir.h"

#include <string.h>

const IrOpInfo ir_ops[TJ_OP_COUNT] = {
#define OP_INFO(op, text, lo, hi, kind, rule, doc) [TJ_OP_##op] = {text, lo, hi, KIND_##kind, RULE_##rule, doc},
    TJ_OP_LIST(OP_INFO)
#undef OP_INFO
};

const char *tj_op_name(tj_op op) {
  if ((unsigned)op >= TJ_OP_COUNT) return NULL;
  return ir_ops[op].name;
}

int ir_op_lookup(const char *name, size_t len) {
  for (int i = 0; i < TJ_OP_COUNT; i++)
    if (strlen(ir_ops[i].name) == len && memcmp(ir_ops[i].name, name, len) == 0) return i;
  return -1;
}

bool ir_op_has_result(tj_op op) {
  return op != TJ_OP_STORE && op != TJ_OP_YIELD && op != TJ_OP_ENDFOR;
}

static const char *const elem_names[TJ_ELEM_COUNT] = {
    [TJ_I32] = "i32", [TJ_I64] = "i64",   [TJ_F32] = "f32",    [TJ_F16] = "f16",
    [TJ_BF16] = "bf16", [TJ_PRED] = "pred", [TJ_DTYPE] = "DTYPE",
};
_Static_assert(TJ_COUNTOF(elem_names) == TJ_ELEM_COUNT, "one name per element type");

const char *ir_elem_name(tj_elem e) {
  if ((unsigned)e >= TJ_ELEM_COUNT) return "?";
  return elem_names[e];
}

int ir_elem_lookup(const char *name, size_t len) {
  for (int i = 0; i < TJ_ELEM_COUNT; i++)
    if (strlen(elem_names[i]) == len && memcmp(elem_names[i], name, len) == 0) return i;
  return -1;
}

bool ir_elem_is_float(tj_elem e) {
  return e == TJ_F32 || e == TJ_F16 || e == TJ_BF16 || e == TJ_DTYPE;
}

bool ir_elem_is_int(tj_elem e) { return e == TJ_I32 || e == TJ_I64; }

static const struct {
  const char *name;
  tj_elem elem;
  int size;
} dtypes[TJ_DTYPE_COUNT] = {
    [TJ_DTYPE_F32] = {"f32", TJ_F32, 4},
    [TJ_DTYPE_F16] = {"f16", TJ_F16, 2},
    [TJ_DTYPE_BF16] = {"bf16", TJ_BF16, 2},
};

tj_elem ir_dtype_elem(tj_dtype d) { return dtypes[d].elem; }
const char *ir_dtype_name(tj_dtype d) {
  return (unsigned)d < TJ_DTYPE_COUNT ? dtypes[d].name : "?";
}
int ir_dtype_size(tj_dtype d) { return dtypes[d].size; }
