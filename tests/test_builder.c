/*
 * test_builder.c — the builder API, the verifier and specialization.
 *
 * For each rule of the op table's type rules and of the loop structure,
 * one test breaks it and checks both the status and the message; the
 * verifier's messages must name the instruction (index and printed form).
 * Specialization tests check defaults, every argument error, and that the
 * key is stable and changes with every bound value.
 */
#include "ir/ir.h"
#include "support.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A program with the parameters most tests need. */
typedef struct Fixture {
  tj_program *p;
  tj_value x, n, stride; /* ptr<DTYPE>, i32, i64 */
  tj_value idx;          /* tile<i32,BLOCK> arange */
  tj_value ft;           /* tile<f32,BLOCK> const 1.5 */
  tj_value fs;           /* f32 scalar const 2 */
} Fixture;

static Fixture fixture(void) {
  Fixture f;
  ck_assert_int_eq(tj_program_create("t", &f.p), TJ_OK);
  ck_assert_int_eq(tj_build_param(f.p, "x", tj_pointer_type(TJ_DTYPE), &f.x), TJ_OK);
  ck_assert_int_eq(tj_build_param(f.p, "n", tj_scalar_type(TJ_I32), &f.n), TJ_OK);
  ck_assert_int_eq(tj_build_param(f.p, "stride", tj_scalar_type(TJ_I64), &f.stride), TJ_OK);
  ck_assert_int_eq(tj_build_arange(f.p, TJ_CONST_BLOCK, &f.idx), TJ_OK);
  ck_assert_int_eq(tj_build_const(f.p, tj_tile_type(TJ_F32, TJ_CONST_BLOCK), 1.5, &f.ft), TJ_OK);
  ck_assert_int_eq(tj_build_const(f.p, tj_scalar_type(TJ_F32), 2.0, &f.fs), TJ_OK);
  return f;
}

static tj_value op2(tj_program *p, tj_op op, tj_value a, tj_value b) {
  tj_value args[2] = {a, b}, r = TJ_NO_VALUE;
  ck_assert_msg(tj_build(p, op, args, 2, &r) == TJ_OK, "%s", tj_program_error(p));
  return r;
}

/* Builds op over args, expecting status st and a message containing frag. */
static void expect_fail(tj_program *p, tj_op op, const tj_value *args, int n, tj_status st,
                        const char *frag) {
  tj_value r = 123;
  int before = p->ninsts;
  tj_status got = tj_build(p, op, args, n, &r);
  ck_assert_msg(got == st, "%s: status %s, want %s (%s)", tj_op_name(op), tj_status_string(got),
                tj_status_string(st), tj_program_error(p));
  ck_assert_msg(strstr(tj_program_error(p), frag), "message '%s' lacks '%s'", tj_program_error(p), frag);
  ck_assert_int_eq(p->ninsts, before); /* nothing appended */
}

START_TEST(builds_elementwise_with_broadcast) {
  Fixture f = fixture();
  tj_value s = op2(f.p, TJ_OP_ADD, f.ft, f.fs);
  ck_assert(ir_type_equal(f.p->types[ir_value_index(f.p, s)], tj_tile_type(TJ_F32, TJ_CONST_BLOCK)));
  tj_value c = op2(f.p, TJ_OP_LT, f.idx, f.n);
  ck_assert(ir_type_equal(f.p->types[ir_value_index(f.p, c)], tj_tile_type(TJ_PRED, TJ_CONST_BLOCK)));
  tj_value m = TJ_NO_VALUE;
  ck_assert_int_eq(tj_build(f.p, TJ_OP_REDUCE_MAX, &s, 1, &m), TJ_OK);
  ck_assert(ir_type_equal(f.p->types[ir_value_index(f.p, m)], tj_scalar_type(TJ_F32)));
  ck_assert_int_eq(tj_program_verify(f.p), TJ_OK);
  tj_program_destroy(f.p);
}
END_TEST

START_TEST(null_handles_and_pointers) {
  tj_value v;
  ck_assert_int_eq(tj_program_create("x", NULL), TJ_ERR_INVALID_ARGUMENT);
  tj_program *bad = (tj_program *)0x1;
  ck_assert_int_eq(tj_program_create("not a name", &bad), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(bad);
  ck_assert_int_eq(tj_build(NULL, TJ_OP_ADD, NULL, 0, &v), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_build_param(NULL, "x", tj_scalar_type(TJ_I32), &v), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_build_const(NULL, tj_scalar_type(TJ_I32), 1, &v), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_program_verify(NULL), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_specialize(NULL, NULL, NULL), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_interpret(NULL, NULL, 0, 1), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_program_parse(NULL, 0, NULL), TJ_ERR_INVALID_ARGUMENT);
  tj_program_destroy(NULL); /* accepts NULL */
  tj_spec_destroy(NULL);
  ck_assert_str_eq(tj_status_string(TJ_ERR_INVALID_ARGUMENT), "invalid argument");
  ck_assert_str_eq(tj_status_string((tj_status)999), "unknown status");

  Fixture f = fixture();
  ck_assert_int_eq(tj_build_param(f.p, NULL, tj_scalar_type(TJ_I32), &v), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(tj_program_error(f.p), "NULL"));
  ck_assert_int_eq(tj_build_param(f.p, "a b", tj_scalar_type(TJ_I32), &v), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(tj_program_error(f.p), "not an identifier"));
  ck_assert_int_eq(tj_build(f.p, TJ_OP_ADD, NULL, 2, &v), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(tj_program_error(f.p), "NULL operand list"));
  tj_value args[2] = {f.ft, f.fs};
  ck_assert_int_eq(tj_build(f.p, TJ_OP_ADD, args, 2, NULL), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(tj_program_error(f.p), "NULL result"));
  tj_program_destroy(f.p);
}
END_TEST

START_TEST(arity_and_unknown_ops) {
  Fixture f = fixture();
  tj_value a1[1] = {f.ft}, a3[3] = {f.ft, f.ft, f.ft};
  expect_fail(f.p, TJ_OP_ADD, a1, 1, TJ_ERR_INVALID_ARGUMENT, "add takes 2 operands, got 1");
  expect_fail(f.p, TJ_OP_EXP, a3, 3, TJ_ERR_INVALID_ARGUMENT, "exp takes 1 operand, got 3");
  expect_fail(f.p, TJ_OP_LOAD, a1, 1, TJ_ERR_INVALID_ARGUMENT, "load takes 2 to 4 operands, got 1");
  expect_fail(f.p, (tj_op)TJ_OP_COUNT, a1, 1, TJ_ERR_INVALID_ARGUMENT, "unknown op");
  expect_fail(f.p, TJ_OP_CONST, NULL, 0, TJ_ERR_INVALID_ARGUMENT, "own builder call");
  expect_fail(f.p, TJ_OP_ADD, a3, 5, TJ_ERR_INVALID_ARGUMENT, "at most 4");
  tj_program_destroy(f.p);
}
END_TEST

START_TEST(values_of_other_programs) {
  Fixture f = fixture(), g = fixture();
  tj_value mixed[2] = {f.ft, g.fs};
  expect_fail(f.p, TJ_OP_ADD, mixed, 2, TJ_ERR_INVALID_ARGUMENT, "operand 2 is not a value of this program");
  tj_value none[2] = {f.ft, TJ_NO_VALUE};
  expect_fail(f.p, TJ_OP_ADD, none, 2, TJ_ERR_INVALID_ARGUMENT, "not a value of this program");
  tj_value junk[2] = {f.ft, 0xdeadbeefu};
  expect_fail(f.p, TJ_OP_ADD, junk, 2, TJ_ERR_INVALID_ARGUMENT, "not a value of this program");
  tj_program_destroy(f.p);
  tj_program_destroy(g.p);
}
END_TEST

START_TEST(elementwise_type_rules) {
  Fixture f = fixture();
  tj_value mixed[2] = {f.ft, f.idx};
  expect_fail(f.p, TJ_OP_ADD, mixed, 2, TJ_ERR_TYPE, "must have the element type of operand 1 (f32)");
  tj_value ints[1] = {f.idx};
  expect_fail(f.p, TJ_OP_EXP, ints, 1, TJ_ERR_TYPE, "must be f32");
  tj_value divi[2] = {f.n, f.n};
  expect_fail(f.p, TJ_OP_DIV, divi, 2, TJ_ERR_TYPE, "must be f32");
  tj_value remf[2] = {f.fs, f.fs};
  expect_fail(f.p, TJ_OP_REM, remf, 2, TJ_ERR_TYPE, "must be i32 or i64");
  tj_value ptr[2] = {f.x, f.fs};
  expect_fail(f.p, TJ_OP_MUL, ptr, 2, TJ_ERR_TYPE, "is a pointer");
  int chunk;
  ck_assert_int_eq(tj_program_declare_const(f.p, "CHUNK", &chunk), TJ_OK);
  tj_value other;
  ck_assert_int_eq(tj_build_const(f.p, tj_tile_type(TJ_F32, chunk), 0, &other), TJ_OK);
  tj_value lens[2] = {f.ft, other};
  expect_fail(f.p, TJ_OP_SUB, lens, 2, TJ_ERR_TYPE, "another tile length");
  tj_value logic[2] = {f.ft, f.ft};
  expect_fail(f.p, TJ_OP_AND, logic, 2, TJ_ERR_TYPE, "must be pred");
  tj_value pred = op2(f.p, TJ_OP_LT, f.idx, f.n);
  tj_value cmp[2] = {pred, pred};
  expect_fail(f.p, TJ_OP_LT, cmp, 2, TJ_ERR_TYPE, "must be i32, i64 or f32");
  tj_value sel_bad[3] = {f.ft, f.ft, f.ft};
  expect_fail(f.p, TJ_OP_SELECT, sel_bad, 3, TJ_ERR_TYPE, "must be a pred");
  tj_value sel_mix[3] = {pred, f.ft, f.idx};
  expect_fail(f.p, TJ_OP_SELECT, sel_mix, 3, TJ_ERR_TYPE, "element type of operand 2");
  tj_value sel_ok[3] = {pred, f.ft, f.fs}, r;
  ck_assert_int_eq(tj_build(f.p, TJ_OP_SELECT, sel_ok, 3, &r), TJ_OK);
  tj_program_destroy(f.p);
}
END_TEST

START_TEST(cast_rules) {
  Fixture f = fixture();
  tj_value r;
  ck_assert_int_eq(tj_build_cast(f.p, f.x, TJ_F32, &r), TJ_ERR_TYPE);
  ck_assert_ptr_nonnull(strstr(tj_program_error(f.p), "must be a numeric scalar or tile"));
  ck_assert_int_eq(tj_build_cast(f.p, f.ft, TJ_PRED, &r), TJ_ERR_TYPE);
  ck_assert_ptr_nonnull(strstr(tj_program_error(f.p), "cannot cast to pred"));
  ck_assert_int_eq(tj_build_cast(f.p, f.ft, (tj_elem)77, &r), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_build_cast(f.p, f.ft, TJ_F16, &r), TJ_OK);
  ck_assert(ir_type_equal(f.p->types[ir_value_index(f.p, r)], tj_tile_type(TJ_F16, TJ_CONST_BLOCK)));
  ck_assert_int_eq(tj_build_cast(f.p, f.n, TJ_I64, &r), TJ_OK);
  tj_program_destroy(f.p);
}
END_TEST

START_TEST(memory_rules) {
  Fixture f = fixture();
  tj_value pred = op2(f.p, TJ_OP_LT, f.idx, f.n), row, ld;
  tj_value pa_bad[2] = {f.x, f.fs};
  expect_fail(f.p, TJ_OP_PTR_ADD, pa_bad, 2, TJ_ERR_TYPE, "must be an i32 or i64 scalar");
  tj_value pa_base[2] = {f.n, f.n};
  expect_fail(f.p, TJ_OP_PTR_ADD, pa_base, 2, TJ_ERR_TYPE, "must be a pointer");
  row = op2(f.p, TJ_OP_PTR_ADD, f.x, f.stride);
  tj_value ld_base[3] = {f.n, f.idx, pred};
  expect_fail(f.p, TJ_OP_LOAD, ld_base, 3, TJ_ERR_TYPE, "must be a pointer");
  tj_value ld_off[3] = {row, f.ft, pred};
  expect_fail(f.p, TJ_OP_LOAD, ld_off, 3, TJ_ERR_TYPE, "tile of i32 or i64 offsets");
  tj_value ld_mask[3] = {row, f.idx, f.ft};
  expect_fail(f.p, TJ_OP_LOAD, ld_mask, 3, TJ_ERR_TYPE, "must be a pred tile");
  tj_value ld_other[4] = {row, f.idx, pred, f.ft};
  expect_fail(f.p, TJ_OP_LOAD, ld_other, 4, TJ_ERR_TYPE, "(other) must be a numeric scalar");
  tj_value ld_ok[4] = {row, f.idx, pred, f.fs};
  ck_assert_int_eq(tj_build(f.p, TJ_OP_LOAD, ld_ok, 4, &ld), TJ_OK);
  ck_assert(ir_type_equal(f.p->types[ir_value_index(f.p, ld)], tj_tile_type(TJ_DTYPE, TJ_CONST_BLOCK)));
  tj_value st_val[4] = {row, f.idx, f.ft, pred};
  expect_fail(f.p, TJ_OP_STORE, st_val, 4, TJ_ERR_TYPE, "of the pointee type DTYPE");
  tj_value st_ok[4] = {row, f.idx, ld, pred};
  ck_assert_int_eq(tj_build(f.p, TJ_OP_STORE, st_ok, 4, NULL), TJ_OK);
  tj_program_destroy(f.p);
}
END_TEST

START_TEST(reduce_rules) {
  Fixture f = fixture();
  tj_value sc[1] = {f.fs};
  expect_fail(f.p, TJ_OP_REDUCE_SUM, sc, 1, TJ_ERR_TYPE, "must be a tile of f32 or i32");
  tj_value pred = op2(f.p, TJ_OP_LT, f.idx, f.n);
  expect_fail(f.p, TJ_OP_REDUCE_MAX, &pred, 1, TJ_ERR_TYPE, "must be a tile of f32 or i32");
  tj_value r;
  ck_assert_int_eq(tj_build(f.p, TJ_OP_REDUCE_SUM, &f.idx, 1, &r), TJ_OK);
  tj_program_destroy(f.p);
}
END_TEST

START_TEST(declared_types) {
  Fixture f = fixture();
  tj_value v;
  ck_assert_int_eq(tj_build_param(f.p, "t", tj_tile_type(TJ_F32, TJ_CONST_BLOCK), &v), TJ_ERR_TYPE);
  ck_assert_ptr_nonnull(strstr(tj_program_error(f.p), "a parameter is"));
  ck_assert_int_eq(f.p->nparams, 3); /* the failed parameter is not kept */
  ck_assert_int_eq(tj_build_param(f.p, "q", tj_pointer_type(TJ_PRED), &v), TJ_ERR_TYPE);
  ck_assert_int_eq(tj_build_const(f.p, tj_scalar_type(TJ_I32), 1.5, &v), TJ_ERR_TYPE);
  ck_assert_ptr_nonnull(strstr(tj_program_error(f.p), "is not a value of i32"));
  ck_assert_int_eq(tj_build_const(f.p, tj_scalar_type(TJ_I32), 3e9, &v), TJ_ERR_TYPE);
  ck_assert_int_eq(tj_build_const(f.p, tj_pointer_type(TJ_F32), 0, &v), TJ_ERR_TYPE);
  ck_assert_int_eq(tj_build_const(f.p, tj_tile_type(TJ_F32, 99), 0, &v), TJ_ERR_TYPE);
  ck_assert_ptr_nonnull(strstr(tj_program_error(f.p), "not a valid type"));
  ck_assert_int_eq(tj_build_const(f.p, tj_scalar_type(TJ_F32), -INFINITY, &v), TJ_OK);
  ck_assert_int_eq(tj_build_arange(f.p, 42, &v), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(tj_program_error(f.p), "no constant with index 42"));
  ck_assert_int_eq(tj_build_constexpr(f.p, 42, &v), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(tj_program_error(f.p), "no constant 42"));
  int idx;
  ck_assert_int_eq(tj_program_declare_const(f.p, "BLOCK", &idx), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(tj_program_error(f.p), "already declared"));
  ck_assert_int_eq(tj_program_declare_const(f.p, "9bad", &idx), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_program_const(f.p, "NUM_WARPS", &idx), TJ_OK);
  ck_assert_int_eq(idx, TJ_CONST_NUM_WARPS);
  ck_assert_int_eq(tj_program_const(f.p, "NOPE", &idx), TJ_ERR_INVALID_ARGUMENT);
  tj_program_destroy(f.p);
}
END_TEST

/* for i = 0, n, 1 with one iter; returns the iter. */
static tj_value open_loop(Fixture *f, tj_value *i) {
  tj_value zero, one, it;
  ck_assert_int_eq(tj_build_const(f->p, tj_scalar_type(TJ_I32), 0, &zero), TJ_OK);
  ck_assert_int_eq(tj_build_const(f->p, tj_scalar_type(TJ_I32), 1, &one), TJ_OK);
  tj_value bounds[3] = {zero, f->n, one};
  ck_assert_int_eq(tj_build(f->p, TJ_OP_FOR, bounds, 3, i), TJ_OK);
  ck_assert_int_eq(tj_build(f->p, TJ_OP_ITER, &f->fs, 1, &it), TJ_OK);
  return it;
}

START_TEST(loop_structure_rules) {
  Fixture f = fixture();
  tj_value i, it = open_loop(&f, &i), it2;
  tj_value mixed[3] = {f.n, f.stride, f.n};
  expect_fail(f.p, TJ_OP_FOR, mixed, 3, TJ_ERR_TYPE, "must have the type of operand 1");
  tj_value body = op2(f.p, TJ_OP_ADD, it, f.fs);
  expect_fail(f.p, TJ_OP_ITER, &f.fs, 1, TJ_ERR_VERIFY, "iter must come right after for");
  tj_value y_bad[2] = {body, body};
  expect_fail(f.p, TJ_OP_YIELD, y_bad, 2, TJ_ERR_VERIFY, "is not an iter of the innermost loop");
  tj_value y_type[2] = {it, f.n};
  expect_fail(f.p, TJ_OP_YIELD, y_type, 2, TJ_ERR_TYPE, "must have the type of operand 1");
  expect_fail(f.p, TJ_OP_ENDFOR, NULL, 0, TJ_ERR_VERIFY, "the loop has 1 iter but 0 yields");
  ck_assert_int_eq(tj_program_verify(f.p), TJ_ERR_VERIFY);
  ck_assert_ptr_nonnull(strstr(tj_program_error(f.p), "has no endfor"));
  tj_value y_ok[2] = {it, body};
  ck_assert_int_eq(tj_build(f.p, TJ_OP_YIELD, y_ok, 2, NULL), TJ_OK);
  expect_fail(f.p, TJ_OP_YIELD, y_ok, 2, TJ_ERR_VERIFY, "is yielded twice");
  expect_fail(f.p, TJ_OP_NEG, &f.fs, 1, TJ_ERR_VERIFY, "yields must come right before endfor");
  ck_assert_int_eq(tj_build(f.p, TJ_OP_ENDFOR, NULL, 0, NULL), TJ_OK);
  /* After endfor: the iter holds the last value; body values are gone. */
  ck_assert_int_eq(tj_build(f.p, TJ_OP_NEG, &it, 1, &it2), TJ_OK);
  expect_fail(f.p, TJ_OP_NEG, &body, 1, TJ_ERR_VERIFY, "defined inside a loop that has ended");
  expect_fail(f.p, TJ_OP_NEG, &i, 1, TJ_ERR_VERIFY, "defined inside a loop that has ended");
  expect_fail(f.p, TJ_OP_ENDFOR, NULL, 0, TJ_ERR_VERIFY, "endfor without a for");
  tj_value y_out[2] = {it, it2};
  expect_fail(f.p, TJ_OP_YIELD, y_out, 2, TJ_ERR_VERIFY, "yield outside a loop");
  tj_value ni;
  ck_assert_int_eq(tj_build(f.p, TJ_OP_ITER, &f.fs, 1, &ni), TJ_ERR_VERIFY);
  ck_assert_int_eq(tj_program_verify(f.p), TJ_OK);
  tj_program_destroy(f.p);
}
END_TEST

START_TEST(param_rules) {
  Fixture f = fixture();
  tj_value i, it = open_loop(&f, &i), v;
  (void)it;
  ck_assert_int_eq(tj_build_param(f.p, "late", tj_scalar_type(TJ_I32), &v), TJ_ERR_VERIFY);
  ck_assert_ptr_nonnull(strstr(tj_program_error(f.p), "param inside a loop"));
  tj_program_destroy(f.p);
}
END_TEST

/* Two parameters of one name would give the kernel two .param p_NAME, which
 * ptxas refuses: the builder, the parser (test_text) and the verifier
 * refuse them first. */
START_TEST(duplicate_parameter_names) {
  Fixture f = fixture();
  tj_value v;
  ck_assert_int_eq(tj_build_param(f.p, "n", tj_scalar_type(TJ_I64), &v), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_str_eq(tj_program_error(f.p), "param: parameter n is already declared");
  ck_assert_int_eq(v, TJ_NO_VALUE);
  ck_assert_int_eq(f.p->nparams, 3); /* nothing was kept */
  ck_assert_int_eq(f.p->ninsts, 6);
  ck_assert_int_eq(tj_build_param(f.p, "N", tj_scalar_type(TJ_I64), &v), TJ_OK); /* case counts */
  ck_assert_int_eq(tj_program_verify(f.p), TJ_OK);
  /* A program whose names were changed behind the builder's back. */
  free(f.p->params[3]);
  f.p->params[3] = tj_strdup("x");
  ck_assert_int_eq(tj_program_verify(f.p), TJ_ERR_VERIFY);
  ck_assert_str_eq(tj_program_error(f.p), "instruction 6 (%6 : i64 = param x): param: parameter x "
                                          "is already declared");
  tj_spec_options o = {.n = 16};
  tj_spec *s = NULL;
  ck_assert_int_eq(tj_specialize(f.p, &o, &s), TJ_ERR_VERIFY);
  ck_assert_ptr_null(s);
  tj_program_destroy(f.p);
}
END_TEST

/* The verifier names the instruction and the rule when a program has been
 * damaged behind the builder's back (as a bad copy or a bug would). */
START_TEST(verifier_names_instruction) {
  Fixture f = fixture();
  tj_value s = op2(f.p, TJ_OP_ADD, f.ft, f.fs);
  int v = ir_value_index(f.p, s);
  ck_assert_int_eq(tj_program_verify(f.p), TJ_OK);
  f.p->types[v].elem = TJ_I32; /* recorded type disagrees with the rule */
  ck_assert_int_eq(tj_program_verify(f.p), TJ_ERR_VERIFY);
  const char *msg = tj_program_error(f.p);
  char want[64];
  snprintf(want, sizeof want, "instruction %d (", f.p->defs[v]);
  ck_assert_msg(strstr(msg, want), "%s", msg);
  ck_assert_msg(strstr(msg, "= add %"), "%s", msg);
  ck_assert_msg(strstr(msg, "declared type tile<i32,BLOCK>, but the operands give tile<f32,BLOCK>"), "%s", msg);
  f.p->types[v].elem = TJ_F32;
  f.p->insts[f.p->defs[v]].args[1] = f.p->nvalues + 5; /* dangling operand */
  ck_assert_int_eq(tj_program_verify(f.p), TJ_ERR_VERIFY);
  ck_assert_msg(strstr(tj_program_error(f.p), "operand 2 is not a value"), "%s", tj_program_error(f.p));
  tj_program_destroy(f.p);
}
END_TEST

/* A kernel's parameters are limited (4 KB before CUDA 12.1), and checking
 * their names costs time in their count: at most IR_MAX_PARAMS. */
START_TEST(at_most_256_parameters) {
  tj_program *p;
  tj_value v;
  char name[16];
  ck_assert_int_eq(tj_program_create("many", &p), TJ_OK);
  for (int i = 0; i < IR_MAX_PARAMS; i++) {
    snprintf(name, sizeof name, "p%d", i);
    ck_assert_int_eq(tj_build_param(p, name, tj_scalar_type(TJ_I32), &v), TJ_OK);
  }
  ck_assert_int_eq(tj_build_param(p, "one_more", tj_scalar_type(TJ_I32), &v),
                   TJ_ERR_INVALID_ARGUMENT);
  ck_assert_str_eq(tj_program_error(p), "param: more than 256 parameters");
  ck_assert_int_eq(p->nparams, IR_MAX_PARAMS);
  ck_assert_int_eq(tj_program_verify(p), TJ_OK);
  tj_program_destroy(p);
}
END_TEST

static tj_spec_options options(int64_t n) {
  tj_spec_options o;
  memset(&o, 0, sizeof o);
  o.n = n;
  return o;
}

START_TEST(specialize_defaults_and_substitution) {
  Fixture f = fixture();
  tj_value ce, l;
  int chunk;
  ck_assert_int_eq(tj_program_declare_const(f.p, "CHUNK", &chunk), TJ_OK);
  ck_assert_int_eq(tj_build_constexpr(f.p, chunk, &ce), TJ_OK);
  tj_value pred = op2(f.p, TJ_OP_LT, f.idx, f.n);
  tj_value ld_args[3] = {f.x, f.idx, pred};
  ck_assert_int_eq(tj_build(f.p, TJ_OP_LOAD, ld_args, 3, &l), TJ_OK);
  tj_spec_options o = options(1000);
  o.dtype = TJ_DTYPE_BF16;
  tj_spec *s;
  ck_assert_int_eq(tj_specialize(f.p, &o, &s), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(tj_program_error(f.p), "constant CHUNK is not bound"));
  tj_binding b = {"CHUNK", 64};
  o.bindings = &b;
  o.binding_count = 1;
  ck_assert_msg(tj_specialize(f.p, &o, &s) == TJ_OK, "%s", tj_program_error(f.p));
  int64_t v;
  ck_assert_int_eq(tj_spec_const(s, "BLOCK", &v), TJ_OK);
  ck_assert_int_eq(v, 1024);
  ck_assert_int_eq(tj_spec_const(s, "NUM_WARPS", &v), TJ_OK);
  ck_assert_int_eq(v, tj_default_num_warps(1024, TJ_DTYPE_BF16));
  ck_assert_int_eq(tj_spec_const(s, "ALIGN", &v), TJ_OK);
  ck_assert_int_eq(v, 2);
  ck_assert_int_eq(tj_spec_const(s, "CHUNK", &v), TJ_OK);
  ck_assert_int_eq(v, 64);
  ck_assert_int_eq(tj_spec_const(s, "NOPE", &v), TJ_ERR_INVALID_ARGUMENT);
  /* DTYPE replaced, constexpr folded to const. */
  ck_assert_int_eq(s->prog->types[ir_value_index(f.p, l)].elem, TJ_BF16);
  const IrInst *in = &s->prog->insts[s->prog->defs[ir_value_index(f.p, ce)]];
  ck_assert_int_eq(in->op, TJ_OP_CONST);
  ck_assert(in->fimm == 64.0);
  ck_assert_ptr_nonnull(strstr(tj_spec_key(s), "DTYPE=bf16"));
  ck_assert_ptr_nonnull(strstr(tj_spec_key(s), "|BLOCK=1024|"));
  ck_assert_ptr_nonnull(strstr(tj_spec_key(s), "|CHUNK=64"));
  tj_spec_destroy(s);
  tj_program_destroy(f.p);
}
END_TEST

START_TEST(specialize_argument_errors) {
  Fixture f = fixture();
  tj_spec *s = (tj_spec *)0x1;
  struct {
    tj_spec_options o;
    const char *frag;
  } cases[10];
  for (int i = 0; i < 10; i++) cases[i].o = options(100);
  cases[0].o.dtype = (tj_dtype)9, cases[0].frag = "unknown dtype";
  cases[1].o.n = -1, cases[1].frag = "negative n";
  cases[2].o.block = 100, cases[2].o.cluster = 2,
  cases[2].frag = "neither a power of two nor a multiple of the 256";
  cases[3].o.num_warps = 3, cases[3].frag = "num_warps 3";
  cases[4].o.align = 3, cases[4].frag = "align 3";
  tj_binding unknown = {"NOPE", 1}, builtin = {"BLOCK", 64};
  cases[5].o.bindings = &unknown, cases[5].o.binding_count = 1, cases[5].frag = "unknown constant NOPE";
  cases[6].o.bindings = &builtin, cases[6].o.binding_count = 1, cases[6].frag = "through the options";
  cases[7].o.binding_count = 2, cases[7].frag = "bad binding list";
  cases[8].o.stage = -1, cases[8].frag = "stage -1 is not 0 to 128";
  cases[9].o.stage = 129, cases[9].frag = "stage 129 is not 0 to 128";
  for (int i = 0; i < 10; i++) {
    ck_assert_int_eq(tj_specialize(f.p, &cases[i].o, &s), TJ_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(tj_program_error(f.p), cases[i].frag), "case %d: %s", i, tj_program_error(f.p));
  }
  ck_assert_int_eq(tj_specialize(f.p, NULL, &s), TJ_ERR_INVALID_ARGUMENT);
  /* A BLOCK that is no power of two: any in one CTA (a lane group's exact
   * repeats), over CTAs a multiple of the instance's threads. */
  tj_spec_options lanes = options(80);
  lanes.block = 96;
  ck_assert_msg(tj_specialize(f.p, &lanes, &s) == TJ_OK, "%s", tj_program_error(f.p));
  ck_assert_ptr_nonnull(strstr(tj_spec_key(s), "|BLOCK=96|"));
  tj_spec_destroy(s);
  lanes.stage = 16; /* staged: a multiple of its 128 threads */
  ck_assert_int_eq(tj_specialize(f.p, &lanes, &s), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(s);
  tj_spec_options exact = options(5000);
  exact.block = 6144, exact.num_warps = 16, exact.cluster = 3;
  ck_assert_msg(tj_specialize(f.p, &exact, &s) == TJ_OK, "%s", tj_program_error(f.p));
  tj_spec_destroy(s);
  /* STAGE is part of the key (a staged kernel is another kernel). */
  tj_spec_options staged = options(5000);
  staged.stage = 16;
  ck_assert_int_eq(tj_specialize(f.p, &staged, &s), TJ_OK);
  ck_assert_ptr_nonnull(strstr(tj_spec_key(s), "|STAGE=16"));
  tj_spec_destroy(s);
  staged.stage = 0;
  ck_assert_int_eq(tj_specialize(f.p, &staged, &s), TJ_OK);
  ck_assert_ptr_null(strstr(tj_spec_key(s), "STAGE"));
  tj_spec_destroy(s);
  tj_program_destroy(f.p);
}
END_TEST

START_TEST(spec_key_is_stable_and_complete) {
  Fixture f = fixture();
  tj_spec_options base = options(1000);
  tj_spec *a, *b;
  ck_assert_int_eq(tj_specialize(f.p, &base, &a), TJ_OK);
  ck_assert_int_eq(tj_specialize(f.p, &base, &b), TJ_OK);
  ck_assert_str_eq(tj_spec_key(a), tj_spec_key(b));
  ck_assert(tj_spec_hash(a) == tj_spec_hash(b));
  tj_spec_destroy(b);
  tj_spec_options variants[4] = {base, base, base, base};
  variants[0].dtype = TJ_DTYPE_F16;
  variants[1].block = 2048;
  variants[2].num_warps = 8;
  variants[3].align = 16;
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(tj_specialize(f.p, &variants[i], &b), TJ_OK);
    ck_assert_str_ne(tj_spec_key(a), tj_spec_key(b));
    ck_assert(tj_spec_hash(a) != tj_spec_hash(b));
    tj_spec_destroy(b);
  }
  /* A different program text gives a different key. */
  tj_value r;
  ck_assert_int_eq(tj_build(f.p, TJ_OP_NEG, &f.fs, 1, &r), TJ_OK);
  ck_assert_int_eq(tj_specialize(f.p, &base, &b), TJ_OK);
  ck_assert_str_ne(tj_spec_key(a), tj_spec_key(b));
  tj_spec_destroy(b);
  tj_spec_destroy(a);
  ck_assert_int_eq(tj_next_pow2(1000), 1024);
  ck_assert_int_eq(tj_next_pow2(1024), 1024);
  ck_assert_int_eq(tj_next_pow2(0), 1);
  ck_assert_int_eq(tj_next_pow2(1), 1);
  tj_program_destroy(f.p);
}
END_TEST

START_TEST(op_table_is_consistent) {
  for (int i = 0; i < TJ_OP_COUNT; i++) {
    ck_assert_ptr_nonnull(tj_op_name((tj_op)i));
    ck_assert_int_eq(ir_op_lookup(ir_ops[i].name, strlen(ir_ops[i].name)), i);
    ck_assert_int_le(ir_ops[i].min_args, ir_ops[i].max_args);
    ck_assert_int_le(ir_ops[i].max_args, IR_MAX_ARGS);
    ck_assert(strlen(ir_ops[i].doc) > 0);
  }
  ck_assert_ptr_null(tj_op_name(TJ_OP_COUNT));
  ck_assert_int_eq(ir_op_lookup("nope", 4), -1);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("builder");
  TCase *t = tcase_create("core");
  tcase_add_test(t, builds_elementwise_with_broadcast);
  tcase_add_test(t, null_handles_and_pointers);
  tcase_add_test(t, arity_and_unknown_ops);
  tcase_add_test(t, values_of_other_programs);
  tcase_add_test(t, elementwise_type_rules);
  tcase_add_test(t, cast_rules);
  tcase_add_test(t, memory_rules);
  tcase_add_test(t, reduce_rules);
  tcase_add_test(t, declared_types);
  tcase_add_test(t, loop_structure_rules);
  tcase_add_test(t, param_rules);
  tcase_add_test(t, duplicate_parameter_names);
  tcase_add_test(t, at_most_256_parameters);
  tcase_add_test(t, verifier_names_instruction);
  tcase_add_test(t, specialize_defaults_and_substitution);
  tcase_add_test(t, specialize_argument_errors);
  tcase_add_test(t, spec_key_is_stable_and_complete);
  tcase_add_test(t, op_table_is_consistent);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  return test_run_suite(suite());
}
