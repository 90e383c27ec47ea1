/*
 * cuda_ops.c — the table that turns IR ops into CUDA C, for the NVRTC
 * backend. Each op gets one pattern, expanded by cuda_emit.c with its
 * operands ($0..$3), so a regular op is one line here and one overloaded
 * helper in templates/cuda_prelude.cu (tj_add has f32, i32 and i64 forms).
 *
 * The table is built from the op X-macro of tilejit.h through one
 * PATTERN_<OP> macro per op: adding an op to the list without a pattern here
 * stops the build. Ops with irregular code (params, constants, memory and the
 * loop markers) have NULL and are written by hand in cuda_emit.c.
 *
 * Also here: the CUDA C name of each element type.
 */
#include "codegen/cuda.h"

#define PATTERN_PROGRAM_ID   "(int)tj_inst"
#define PATTERN_NUM_PROGRAMS "(int)tj_programs"
#define PATTERN_PARAM        NULL
#define PATTERN_CONST        NULL
#define PATTERN_CONSTEXPR    NULL
#define PATTERN_ARANGE       "j * $G + tj_rank"
#define PATTERN_ADD          "tj_add($0, $1)"
#define PATTERN_SUB          "tj_sub($0, $1)"
#define PATTERN_MUL          "tj_mul($0, $1)"
#define PATTERN_DIV          "tj_div($0, $1)"
#define PATTERN_REM          "tj_rem($0, $1)"
#define PATTERN_MAX          "tj_max($0, $1)"
#define PATTERN_MIN          "tj_min($0, $1)"
#define PATTERN_NEG          "tj_neg($0)"
#define PATTERN_EXP          "tj_exp($0)"
#define PATTERN_EXP2         "tj_exp2($0)"
#define PATTERN_LOG          "tj_log($0)"
#define PATTERN_LT           "tj_lt($0, $1)"
#define PATTERN_LE           "tj_le($0, $1)"
#define PATTERN_GT           "tj_gt($0, $1)"
#define PATTERN_GE           "tj_ge($0, $1)"
#define PATTERN_EQ           "tj_eq($0, $1)"
#define PATTERN_NE           "tj_ne($0, $1)"
#define PATTERN_AND          "tj_and($0, $1)"
#define PATTERN_OR           "tj_or($0, $1)"
#define PATTERN_SELECT       "tj_select($0, $1, $2)"
#define PATTERN_CAST         "tj_to_$r($0)"
#define PATTERN_PTR_ADD      "$0 + $1"
#define PATTERN_LOAD         NULL
#define PATTERN_STORE        NULL
#define PATTERN_REDUCE_MAX   "tj_reduce<tj_max_op, $G, $L>($A, tj_rank, tj_mask, tj_scratch)"
#define PATTERN_REDUCE_SUM   "tj_reduce<tj_sum_op, $G, $L>($A, tj_rank, tj_mask, tj_scratch)"
#define PATTERN_FOR          NULL
#define PATTERN_ITER         NULL
#define PATTERN_YIELD        NULL
#define PATTERN_ENDFOR       NULL

static const char *const patterns[] = {
#define CUDA_PATTERN(op, text, lo, hi, kind, rule, doc) [TJ_OP_##op] = PATTERN_##op,
    TJ_OP_LIST(CUDA_PATTERN)
#undef CUDA_PATTERN
};
_Static_assert(TJ_COUNTOF(patterns) == TJ_OP_COUNT, "one CUDA C pattern per op");

const char *cg_cuda_pattern(tj_op op) { return (unsigned)op < TJ_OP_COUNT ? patterns[op] : NULL; }

static const char *const types[TJ_ELEM_COUNT] = {
    [TJ_I32] = "int",      [TJ_I64] = "long long", [TJ_F32] = "float",   [TJ_F16] = "tj_f16",
    [TJ_BF16] = "tj_bf16", [TJ_PRED] = "bool",     [TJ_DTYPE] = "DTYPE",
};
_Static_assert(TJ_COUNTOF(types) == TJ_ELEM_COUNT, "one CUDA C type per element type");

const char *cg_cuda_type(tj_elem elem) {
  return (unsigned)elem < TJ_ELEM_COUNT ? types[elem] : "void";
}
