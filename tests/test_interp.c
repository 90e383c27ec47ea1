/*
 * test_interp.c — the interpreter's op semantics, one test per op group.
 * Each test builds a small program through the builder API, specializes it
 * (BLOCK 8 unless said) and runs it through tj_interpret on host buffers,
 * then asserts every value exactly: broadcast, the NaN rules of max, min
 * and the compares, integer wrap-around, casts (f16/bf16 rounding with
 * ties, overflow, subnormals and NaN; int <-> float saturation), pairwise
 * reduce_sum, masked loads that never touch memory (exact-size buffers, so
 * ASan would see a stray read), out-of-bounds loads and stores, bad
 * arguments, and loops: carried values, zero trips, simultaneous yields,
 * nested loops and 64-bit bounds.
 */
#include "ir/ir.h"
#include "support.h"

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LEN 8 /* BLOCK of most tests */

/* ---- building ---------------------------------------------------------- */

static tj_program *program(void) {
  tj_program *p = NULL;
  ck_assert_int_eq(tj_program_create("t", &p), TJ_OK);
  return p;
}

static tj_value param(tj_program *p, const char *name, tj_type t) {
  tj_value v;
  ck_assert_msg(tj_build_param(p, name, t, &v) == TJ_OK, "%s", tj_program_error(p));
  return v;
}

static tj_value ptr_param(tj_program *p, const char *name, tj_elem e) {
  return param(p, name, tj_pointer_type(e));
}

static tj_value op(tj_program *p, tj_op o, int n, tj_value a, tj_value b, tj_value c, tj_value d) {
  tj_value args[4] = {a, b, c, d}, r = TJ_NO_VALUE;
  ck_assert_msg(tj_build(p, o, args, n, &r) == TJ_OK, "%s: %s", tj_op_name(o), tj_program_error(p));
  return r;
}

static tj_value op0(tj_program *p, tj_op o) { return op(p, o, 0, 0, 0, 0, 0); }
static tj_value op1(tj_program *p, tj_op o, tj_value a) { return op(p, o, 1, a, 0, 0, 0); }
static tj_value op2(tj_program *p, tj_op o, tj_value a, tj_value b) {
  return op(p, o, 2, a, b, 0, 0);
}
static tj_value op3(tj_program *p, tj_op o, tj_value a, tj_value b, tj_value c) {
  return op(p, o, 3, a, b, c, 0);
}

static tj_value scalar(tj_program *p, tj_elem e, double v) {
  tj_value r;
  ck_assert_msg(tj_build_const(p, tj_scalar_type(e), v, &r) == TJ_OK, "%s", tj_program_error(p));
  return r;
}

static tj_value tile_const(tj_program *p, tj_elem e, double v) {
  tj_value r;
  ck_assert(tj_build_const(p, tj_tile_type(e, TJ_CONST_BLOCK), v, &r) == TJ_OK);
  return r;
}

static tj_value arange(tj_program *p) {
  tj_value r;
  ck_assert(tj_build_arange(p, TJ_CONST_BLOCK, &r) == TJ_OK);
  return r;
}

static tj_value cast(tj_program *p, tj_value v, tj_elem to) {
  tj_value r;
  ck_assert_msg(tj_build_cast(p, v, to, &r) == TJ_OK, "%s", tj_program_error(p));
  return r;
}

static tj_value load(tj_program *p, tj_value ptr, tj_value offsets) {
  return op2(p, TJ_OP_LOAD, ptr, offsets);
}

static void store(tj_program *p, tj_value ptr, tj_value offsets, tj_value v) {
  tj_value args[3] = {ptr, offsets, v};
  ck_assert_msg(tj_build(p, TJ_OP_STORE, args, 3, NULL) == TJ_OK, "%s", tj_program_error(p));
}

/* A pred stored as i32 0/1. */
static tj_value pred_to_i32(tj_program *p, tj_value pred) {
  return op3(p, TJ_OP_SELECT, pred, scalar(p, TJ_I32, 1), scalar(p, TJ_I32, 0));
}

static tj_spec *specialize(tj_program *p, int64_t block) {
  tj_spec_options o;
  memset(&o, 0, sizeof o);
  o.n = o.block = block;
  o.dtype = TJ_DTYPE_F32;
  tj_spec *s = NULL;
  ck_assert_msg(tj_specialize(p, &o, &s) == TJ_OK, "%s", tj_program_error(p));
  tj_program_destroy(p);
  return s;
}

static tj_arg ptr_arg(void *ptr, size_t bytes) {
  tj_arg a = {TJ_ARG_PTR, {.ptr = ptr}, bytes};
  return a;
}

static tj_arg int_arg(int64_t v) {
  tj_arg a = {TJ_ARG_INT, {.i = v}, 0};
  return a;
}

static tj_arg float_arg(double v) {
  tj_arg a = {TJ_ARG_FLOAT, {.f = v}, 0};
  return a;
}

static void run(tj_spec *s, const tj_arg *args, int count, int64_t grid) {
  tj_status st = tj_interpret(s, args, count, grid);
  ck_assert_msg(st == TJ_OK, "%s: %s", tj_status_string(st), tj_spec_error(s));
}

static bool same_float(float a, float b) {
  return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

/* out = o(a, b) elementwise over LEN floats (a, b may be NULL for unary). */
static void float_op(tj_op o, const float *a, const float *b, float *out) {
  tj_program *p = program();
  tj_value pa = ptr_param(p, "a", TJ_F32), pb = ptr_param(p, "b", TJ_F32);
  tj_value po = ptr_param(p, "out", TJ_F32), idx = arange(p);
  tj_value va = load(p, pa, idx), vb = load(p, pb, idx);
  tj_value r = b ? op2(p, o, va, vb) : op1(p, o, va);
  store(p, po, idx, r);
  tj_spec *s = specialize(p, LEN);
  float zeros[LEN] = {0};
  tj_arg args[3] = {ptr_arg((void *)(uintptr_t)a, sizeof zeros),
                    ptr_arg(b ? (void *)(uintptr_t)b : zeros, sizeof zeros),
                    ptr_arg(out, sizeof zeros)};
  run(s, args, 3, 1);
  tj_spec_destroy(s);
}

/* out = o(a, b) elementwise over LEN elements of e (i32 or i64 buffers);
 * pred results are stored as i32 0/1. */
static void int_op(tj_op o, tj_elem e, const void *a, const void *b, void *out, tj_elem out_elem) {
  tj_program *p = program();
  tj_value pa = ptr_param(p, "a", e), pb = ptr_param(p, "b", e);
  tj_value po = ptr_param(p, "out", out_elem), idx = arange(p);
  tj_value r = op2(p, o, load(p, pa, idx), load(p, pb, idx));
  store(p, po, idx, out_elem == TJ_I32 && o >= TJ_OP_LT && o <= TJ_OP_NE ? pred_to_i32(p, r) : r);
  tj_spec *s = specialize(p, LEN);
  size_t bytes = LEN * (e == TJ_I64 ? 8 : 4);
  tj_arg args[3] = {ptr_arg((void *)(uintptr_t)a, bytes), ptr_arg((void *)(uintptr_t)b, bytes),
                    ptr_arg(out, LEN * (out_elem == TJ_I64 ? 8 : 4))};
  run(s, args, 3, 1);
  tj_spec_destroy(s);
}

/* ---- elementwise f32 --------------------------------------------------- */

static const float fa[LEN] = {1.5f, -2.0f, 0.0f, -0.0f, INFINITY, -INFINITY, NAN, 3e38f};
static const float fb[LEN] = {0.25f, 3.0f, -0.0f, 5.0f, INFINITY, 2.0f, 1.0f, 3e38f};

START_TEST(float_arithmetic) {
  float out[LEN];
  const tj_op ops[] = {TJ_OP_ADD, TJ_OP_SUB, TJ_OP_MUL, TJ_OP_DIV};
  for (int i = 0; i < 4; i++) {
    float_op(ops[i], fa, fb, out);
    for (int k = 0; k < LEN; k++) {
      float want = ops[i] == TJ_OP_ADD   ? fa[k] + fb[k]
                   : ops[i] == TJ_OP_SUB ? fa[k] - fb[k]
                   : ops[i] == TJ_OP_MUL ? fa[k] * fb[k]
                                         : fa[k] / fb[k];
      ck_assert_msg(same_float(out[k], want), "%s lane %d: %a, want %a", tj_op_name(ops[i]), k,
                    out[k], want);
    }
  }
  float_op(TJ_OP_ADD, fa, fb, out);
  ck_assert(isinf(out[7]) && out[7] > 0); /* 3e38 + 3e38 overflows in float, not double */
  ck_assert(isinf(out[5]) && out[5] < 0); /* -inf + 2 */
  float_op(TJ_OP_SUB, fa, fb, out);
  ck_assert(isnan(out[4])); /* inf - inf */
}
END_TEST

START_TEST(float_max_min_take_the_non_nan) {
  const float a[LEN] = {NAN, 1.0f, NAN, -2.0f, 3.0f, -INFINITY, 7.0f, NAN};
  const float b[LEN] = {1.0f, NAN, NAN, -3.0f, 3.0f, -INFINITY, -INFINITY, -INFINITY};
  const float want_max[LEN] = {1.0f, 1.0f, NAN, -2.0f, 3.0f, -INFINITY, 7.0f, -INFINITY};
  const float want_min[LEN] = {1.0f, 1.0f, NAN, -3.0f, 3.0f, -INFINITY, -INFINITY, -INFINITY};
  float out[LEN];
  float_op(TJ_OP_MAX, a, b, out);
  for (int k = 0; k < LEN; k++)
    ck_assert_msg(same_float(out[k], want_max[k]), "max lane %d: %g", k, out[k]);
  float_op(TJ_OP_MIN, a, b, out);
  for (int k = 0; k < LEN; k++)
    ck_assert_msg(same_float(out[k], want_min[k]), "min lane %d: %g", k, out[k]);
}
END_TEST

START_TEST(float_unary) {
  const float x[LEN] = {0.0f, 1.0f, -1.5f, 10.25f, -INFINITY, INFINITY, NAN, -0.0f};
  float out[LEN];
  float_op(TJ_OP_EXP, x, NULL, out);
  for (int k = 0; k < LEN; k++) ck_assert(same_float(out[k], expf(x[k])));
  ck_assert(out[0] == 1.0f && out[4] == 0.0f && isinf(out[5]));
  float_op(TJ_OP_EXP2, x, NULL, out);
  for (int k = 0; k < LEN; k++) ck_assert(same_float(out[k], exp2f(x[k])));
  ck_assert(out[1] == 2.0f);
  float_op(TJ_OP_LOG, x, NULL, out);
  for (int k = 0; k < LEN; k++) ck_assert(same_float(out[k], logf(x[k])));
  ck_assert(isinf(out[0]) && out[0] < 0 && isnan(out[2]));
  float_op(TJ_OP_NEG, x, NULL, out);
  for (int k = 0; k < LEN; k++) ck_assert(same_float(out[k], -x[k]));
  ck_assert(signbit(out[0]) && !signbit(out[7]));
}
END_TEST

/* ---- compares and logic ------------------------------------------------- */

START_TEST(float_compares_are_false_on_nan_except_ne) {
  const float a[LEN] = {NAN, 1.0f, NAN, 0.0f, -INFINITY, 2.0f, 1.0f, INFINITY};
  const float b[LEN] = {1.0f, NAN, NAN, -0.0f, -INFINITY, 1.0f, 2.0f, INFINITY};
  const tj_op ops[] = {TJ_OP_LT, TJ_OP_LE, TJ_OP_GT, TJ_OP_GE, TJ_OP_EQ, TJ_OP_NE};
  const int32_t want[6][LEN] = {
      {0, 0, 0, 0, 0, 0, 1, 0}, /* lt */
      {0, 0, 0, 1, 1, 0, 1, 1}, /* le */
      {0, 0, 0, 0, 0, 1, 0, 0}, /* gt */
      {0, 0, 0, 1, 1, 1, 0, 1}, /* ge */
      {0, 0, 0, 1, 1, 0, 0, 1}, /* eq: 0 == -0 */
      {1, 1, 1, 0, 0, 1, 1, 0}, /* ne */
  };
  for (int i = 0; i < 6; i++) {
    int32_t out[LEN];
    int_op(ops[i], TJ_F32, a, b, out, TJ_I32);
    for (int k = 0; k < LEN; k++)
      ck_assert_msg(out[k] == want[i][k], "%s lane %d: %d", tj_op_name(ops[i]), k, out[k]);
  }
}
END_TEST

START_TEST(int_compares_and_logic) {
  const int64_t a[LEN] = {INT64_MIN, -1, 0, 5, INT64_MAX, 7, -7, 3};
  const int64_t b[LEN] = {INT64_MAX, 1, 0, 4, INT64_MAX, 7, 7, -3};
  int32_t lt[LEN], ge[LEN];
  int_op(TJ_OP_LT, TJ_I64, a, b, lt, TJ_I32);
  int_op(TJ_OP_GE, TJ_I64, a, b, ge, TJ_I32);
  for (int k = 0; k < LEN; k++) {
    ck_assert_int_eq(lt[k], a[k] < b[k]);
    ck_assert_int_eq(ge[k], a[k] >= b[k]);
  }
  /* (i < 4 and i > 1) + 10 * (i < 4 or i == 6) */
  tj_program *p = program();
  tj_value out = ptr_param(p, "out", TJ_I32), idx = arange(p);
  tj_value low = op2(p, TJ_OP_LT, idx, scalar(p, TJ_I32, 4));
  tj_value both = op2(p, TJ_OP_AND, low, op2(p, TJ_OP_GT, idx, scalar(p, TJ_I32, 1)));
  tj_value either = op2(p, TJ_OP_OR, low, op2(p, TJ_OP_EQ, idx, scalar(p, TJ_I32, 6)));
  tj_value code = op2(p, TJ_OP_ADD, pred_to_i32(p, both),
                      op2(p, TJ_OP_MUL, pred_to_i32(p, either), scalar(p, TJ_I32, 10)));
  store(p, out, idx, code);
  tj_spec *s = specialize(p, LEN);
  int32_t got[LEN];
  tj_arg args[1] = {ptr_arg(got, sizeof got)};
  run(s, args, 1, 1);
  const int32_t want[LEN] = {10, 10, 11, 11, 0, 0, 10, 0};
  for (int k = 0; k < LEN; k++) ck_assert_msg(got[k] == want[k], "lane %d: %d", k, got[k]);
  tj_spec_destroy(s);
}
END_TEST

/* ---- integers ------------------------------------------------------------ */

START_TEST(i32_arithmetic_wraps) {
  const int32_t a[LEN] = {INT32_MAX, INT32_MIN, 65536, INT32_MIN, -5, 7, INT32_MAX, 0};
  const int32_t b[LEN] = {1, 1, 65536, -1, 3, -9, INT32_MAX, INT32_MIN};
  int32_t add[LEN], sub[LEN], mul[LEN], max[LEN], min[LEN];
  int_op(TJ_OP_ADD, TJ_I32, a, b, add, TJ_I32);
  int_op(TJ_OP_SUB, TJ_I32, a, b, sub, TJ_I32);
  int_op(TJ_OP_MUL, TJ_I32, a, b, mul, TJ_I32);
  int_op(TJ_OP_MAX, TJ_I32, a, b, max, TJ_I32);
  int_op(TJ_OP_MIN, TJ_I32, a, b, min, TJ_I32);
  for (int k = 0; k < LEN; k++) {
    uint32_t ua = (uint32_t)a[k], ub = (uint32_t)b[k];
    ck_assert_uint_eq((uint32_t)add[k], ua + ub);
    ck_assert_uint_eq((uint32_t)sub[k], ua - ub);
    ck_assert_uint_eq((uint32_t)mul[k], ua * ub);
    ck_assert_int_eq(max[k], a[k] > b[k] ? a[k] : b[k]);
    ck_assert_int_eq(min[k], a[k] < b[k] ? a[k] : b[k]);
  }
  ck_assert_int_eq(add[0], INT32_MIN);
  ck_assert_int_eq(sub[1], INT32_MAX);
  ck_assert_int_eq(mul[2], 0);
  ck_assert_int_eq(mul[3], INT32_MIN);
}
END_TEST

START_TEST(i64_arithmetic_wraps) {
  const int64_t a[LEN] = {INT64_MAX, INT64_MIN, (int64_t)1 << 32, INT64_MIN, -5, 7, INT64_MAX, 0};
  const int64_t b[LEN] = {1, 1, (int64_t)1 << 32, -1, 3, -9, INT64_MAX, INT64_MIN};
  int64_t add[LEN], sub[LEN], mul[LEN];
  int_op(TJ_OP_ADD, TJ_I64, a, b, add, TJ_I64);
  int_op(TJ_OP_SUB, TJ_I64, a, b, sub, TJ_I64);
  int_op(TJ_OP_MUL, TJ_I64, a, b, mul, TJ_I64);
  for (int k = 0; k < LEN; k++) {
    uint64_t ua = (uint64_t)a[k], ub = (uint64_t)b[k];
    ck_assert_uint_eq((uint64_t)add[k], ua + ub);
    ck_assert_uint_eq((uint64_t)sub[k], ua - ub);
    ck_assert_uint_eq((uint64_t)mul[k], ua * ub);
  }
  ck_assert(add[0] == INT64_MIN && sub[1] == INT64_MAX && mul[2] == 0 && mul[3] == INT64_MIN);
}
END_TEST

/* a % b as C's (the sign of a), 0 where b is 0 or -1 (INT_MIN % -1 included). */
START_TEST(int_remainder) {
  const int32_t a[LEN] = {7, -7, 7, -7, INT32_MIN, INT32_MIN, 5, INT32_MAX};
  const int32_t b[LEN] = {3, 3, -3, -3, -1, 0, 0, 1000};
  const int32_t want[LEN] = {1, -1, 1, -1, 0, 0, 0, INT32_MAX % 1000};
  int32_t got[LEN];
  int_op(TJ_OP_REM, TJ_I32, a, b, got, TJ_I32);
  for (int k = 0; k < LEN; k++) ck_assert_msg(got[k] == want[k], "lane %d: %d", k, got[k]);
  const int64_t a64[LEN] = {INT64_MIN, INT64_MIN, 10, -10, INT64_MAX, 3, (int64_t)1 << 40, -1};
  const int64_t b64[LEN] = {-1, 0, 4, 4, (int64_t)1 << 33, -1, 7, 5};
  const int64_t want64[LEN] = {0, 0, 2, -2, INT64_MAX % ((int64_t)1 << 33), 0,
                               ((int64_t)1 << 40) % 7, -1};
  int64_t got64[LEN];
  int_op(TJ_OP_REM, TJ_I64, a64, b64, got64, TJ_I64);
  for (int k = 0; k < LEN; k++)
    ck_assert_msg(got64[k] == want64[k], "lane %d: %lld", k, (long long)got64[k]);
}
END_TEST

START_TEST(neg_wraps) {
  tj_program *p = program();
  tj_value out32 = ptr_param(p, "out32", TJ_I32), out64 = ptr_param(p, "out64", TJ_I64);
  tj_value idx = arange(p);
  tj_value v32 = op2(p, TJ_OP_ADD, idx, scalar(p, TJ_I32, INT32_MIN));
  tj_value v64 =
      op2(p, TJ_OP_ADD, cast(p, idx, TJ_I64), scalar(p, TJ_I64, -9223372036854775807.0 - 1));
  store(p, out32, idx, op1(p, TJ_OP_NEG, v32));
  store(p, out64, idx, op1(p, TJ_OP_NEG, v64));
  tj_spec *s = specialize(p, LEN);
  int32_t got32[LEN];
  int64_t got64[LEN];
  tj_arg args[2] = {ptr_arg(got32, sizeof got32), ptr_arg(got64, sizeof got64)};
  run(s, args, 2, 1);
  ck_assert_int_eq(got32[0], INT32_MIN);
  ck_assert_int_eq(got32[1], INT32_MAX);
  ck_assert(got64[0] == INT64_MIN && got64[1] == INT64_MAX && got64[7] == INT64_MAX - 6);
  tj_spec_destroy(s);
}
END_TEST

/* ---- broadcast and select ------------------------------------------------- */

START_TEST(scalars_broadcast) {
  tj_program *p = program();
  tj_value out = ptr_param(p, "out", TJ_F32), sp = param(p, "s", tj_scalar_type(TJ_F32));
  tj_value idx = arange(p), fidx = cast(p, idx, TJ_F32);
  tj_value a = op2(p, TJ_OP_SUB, fidx, sp);                      /* tile - scalar */
  tj_value b = op2(p, TJ_OP_SUB, sp, fidx);                      /* scalar - tile */
  tj_value c = op2(p, TJ_OP_MUL, sp, scalar(p, TJ_F32, 2));      /* scalar * scalar */
  tj_value big = op2(p, TJ_OP_GT, fidx, scalar(p, TJ_F32, 3.5)); /* tile pred */
  tj_value sel = op3(p, TJ_OP_SELECT, big, a, c);                /* tile ? tile : scalar */
  tj_value all = op2(p, TJ_OP_LT, sp, scalar(p, TJ_F32, 0));     /* scalar pred */
  tj_value sel2 = op3(p, TJ_OP_SELECT, all, c, b);               /* scalar ? scalar : tile */
  store(p, out, idx, sel);
  store(p, op2(p, TJ_OP_PTR_ADD, out, scalar(p, TJ_I32, LEN)), idx, sel2);
  /* a scalar stored to every lane */
  store(p, op2(p, TJ_OP_PTR_ADD, out, scalar(p, TJ_I64, 2 * LEN)), idx, c);
  tj_spec *s = specialize(p, LEN);
  float got[3 * LEN];
  tj_arg args[2] = {ptr_arg(got, sizeof got), float_arg(1.25)};
  run(s, args, 2, 1);
  for (int k = 0; k < LEN; k++) {
    ck_assert_msg(got[k] == (k > 3.5 ? (float)k - 1.25f : 2.5f), "lane %d: %g", k, got[k]);
    ck_assert_msg(got[LEN + k] == 1.25f - (float)k, "lane %d: %g", k, got[LEN + k]);
    ck_assert(got[2 * LEN + k] == 2.5f);
  }
  args[1] = float_arg(-4.0);
  run(s, args, 2, 1);
  for (int k = 0; k < LEN; k++) ck_assert(got[LEN + k] == -8.0f);
  tj_spec_destroy(s);
}
END_TEST

START_TEST(constants_and_arange) {
  tj_program *p = program();
  tj_value o64 = ptr_param(p, "o64", TJ_I64), of = ptr_param(p, "of", TJ_F32);
  tj_value idx = arange(p);
  store(p, o64, idx, op2(p, TJ_OP_ADD, tile_const(p, TJ_I64, 4294967296.0), cast(p, idx, TJ_I64)));
  store(p, of, idx, op2(p, TJ_OP_MUL, tile_const(p, TJ_F32, -INFINITY), cast(p, idx, TJ_F32)));
  tj_spec *s = specialize(p, 16);
  int64_t g64[16];
  float gf[16];
  tj_arg args[2] = {ptr_arg(g64, sizeof g64), ptr_arg(gf, sizeof gf)};
  run(s, args, 2, 1);
  for (int k = 0; k < 16; k++) ck_assert(g64[k] == ((int64_t)1 << 32) + k);
  ck_assert(isnan(gf[0])); /* -inf * 0 */
  for (int k = 1; k < 16; k++) ck_assert(isinf(gf[k]) && gf[k] < 0);
  tj_spec_destroy(s);
}
END_TEST

/* ---- casts -------------------------------------------------------------- */

/* Casts LEN floats to e (f16 or bf16) through the interpreter, and back. */
static void cast_floats(const float *in, tj_elem e, uint16_t *bits, float *back) {
  tj_program *p = program();
  tj_value pi = ptr_param(p, "in", TJ_F32), pb = ptr_param(p, "bits", e);
  tj_value pk = ptr_param(p, "back", TJ_F32), idx = arange(p);
  tj_value narrow = cast(p, load(p, pi, idx), e);
  store(p, pb, idx, narrow);
  store(p, pk, idx, cast(p, load(p, pb, idx), TJ_F32));
  tj_spec *s = specialize(p, LEN);
  tj_arg args[3] = {ptr_arg((void *)(uintptr_t)in, LEN * 4), ptr_arg(bits, LEN * 2),
                    ptr_arg(back, LEN * 4)};
  run(s, args, 3, 1);
  tj_spec_destroy(s);
}

typedef struct HalfCase {
  float in;
  uint16_t bits;
} HalfCase;

static const HalfCase f16_cases[] = {
    {1.0f, 0x3c00},
    {-2.0f, 0xc000},
    {65504.0f, 0x7bff},   /* largest finite */
    {65519.996f, 0x7bff}, /* just below the halfway point */
    {65520.0f, 0x7c00},   /* halfway to 65536: ties to even = overflow */
    {1e5f, 0x7c00},
    {-1e5f, 0xfc00},
    {INFINITY, 0x7c00},
    {-INFINITY, 0xfc00},
    {1.0f + 0x1p-11f, 0x3c00},            /* tie, to even (down) */
    {1.0f + 3 * 0x1p-11f, 0x3c02},        /* tie, to even (up) */
    {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01}, /* just above a tie */
    {0x1p-14f, 0x0400},                   /* smallest normal */
    {0x1p-24f, 0x0001},                   /* smallest subnormal */
    {0x1p-25f, 0x0000},                   /* tie between 0 and 2^-24: to even (0) */
    {3 * 0x1p-25f, 0x0002},               /* tie between 1 and 2 ulps: to even (2) */
    {0x1p-25f + 0x1p-40f, 0x0001},        /* just above the tie */
    {0x1p-14f - 0x1p-25f, 0x0400},        /* tie at the top of the subnormals: up to normal */
    {0x1p-26f, 0x0000},
    {-0x1p-24f, 0x8001},
    {-0.0f, 0x8000},
    {1e-45f, 0x0000}, /* a float subnormal */
};

static const HalfCase bf16_cases[] = {
    {1.0f, 0x3f80},
    {1.0f + 0x1p-8f, 0x3f80},     /* tie, to even (down) */
    {1.0f + 3 * 0x1p-8f, 0x3f82}, /* tie, to even (up) */
    {1.0f + 0x1p-8f + 0x1p-20f, 0x3f81},
    {FLT_MAX, 0x7f80}, /* rounds past the largest bf16: inf */
    {-FLT_MAX, 0xff80},
    {0x1.fep127f, 0x7f7f},     /* largest bf16 */
    {0x1.fefffep127f, 0x7f7f}, /* below the halfway point to inf */
    {INFINITY, 0x7f80},
    {0x1p-133f, 0x0001},   /* bf16 subnormal, exact */
    {0x1p-134f, 0x0000},   /* tie between 0 and 1: to even */
    {0x1.8p-133f, 0x0002}, /* tie between 1 and 2: to even */
    {-0.0f, 0x8000},
    {-3.0f, 0xc040},
};

static void check_half_cases(const HalfCase *cases, size_t count, tj_elem e) {
  for (size_t first = 0; first < count; first += LEN) {
    float in[LEN], back[LEN];
    uint16_t bits[LEN];
    for (int k = 0; k < LEN; k++) in[k] = cases[first + k < count ? first + k : first].in;
    cast_floats(in, e, bits, back);
    for (size_t k = 0; k < LEN && first + k < count; k++) {
      const HalfCase *c = &cases[first + k];
      ck_assert_msg(bits[k] == c->bits, "%s(%a) = 0x%04x, want 0x%04x", ir_elem_name(e),
                    (double)c->in, bits[k], c->bits);
      float want = e == TJ_F16 ? tj_f16_to_f32(c->bits) : tj_bf16_to_f32(c->bits);
      ck_assert(same_float(back[k], want));
    }
  }
}

START_TEST(cast_f32_to_f16_rounds_to_nearest_even) {
  check_half_cases(f16_cases, sizeof f16_cases / sizeof *f16_cases, TJ_F16);
}
END_TEST

START_TEST(cast_f32_to_bf16_rounds_to_nearest_even) {
  check_half_cases(bf16_cases, sizeof bf16_cases / sizeof *bf16_cases, TJ_BF16);
}
END_TEST

START_TEST(cast_nan_stays_nan) {
  float in[LEN] = {NAN, -NAN, 0, 0, 0, 0, 0, 0}, back[LEN];
  uint32_t signaling = 0x7f800001u, payload = 0x7fc12345u;
  memcpy(&in[2], &signaling, 4);
  memcpy(&in[3], &payload, 4);
  uint16_t bits[LEN];
  for (int e = 0; e < 2; e++) {
    cast_floats(in, e ? TJ_BF16 : TJ_F16, bits, back);
    for (int k = 0; k < 4; k++) {
      ck_assert_msg(isnan(back[k]), "lane %d: 0x%04x is not NaN", k, bits[k]);
      uint16_t exp_mask = e ? 0x7f80 : 0x7c00, quiet = e ? 0x0040 : 0x0200;
      ck_assert((bits[k] & exp_mask) == exp_mask && (bits[k] & quiet));
    }
    ck_assert(bits[1] & 0x8000); /* the sign is kept */
  }
}
END_TEST

/* f16 rounding from double arithmetic, independent of half.c's bit tricks. */
static uint16_t f16_by_arithmetic(float f) {
  double v = fabs((double)f);
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  if (isnan(f)) return 0x7e00;
  int e = -14; /* subnormals share the smallest normal's ulp */
  if (v >= 0x1p-14) {
    e = (int)floor(log2(v));
    e += ldexp(1.0, e + 1) <= v ? 1 : ldexp(1.0, e) > v ? -1 : 0; /* log2's rounding */
  }
  double q = nearbyint(ldexp(v, 10 - e)); /* significand in ulps, ties to even */
  double r = ldexp(q, e - 10);
  if (r >= 65536.0) return sign | 0x7c00;
  if (r < 0x1p-14) return (uint16_t)(sign | (uint16_t)ldexp(r, 24));
  int re = (int)floor(log2(r));
  return (uint16_t)(sign | (uint16_t)((re + 15) << 10) | ((uint16_t)ldexp(r, 10 - re) & 0x3ff));
}

START_TEST(half_conversions_exhaustive) {
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = tj_f16_to_f32((uint16_t)h), g = tj_bf16_to_f32((uint16_t)h);
    if ((h & 0x7c00) != 0x7c00 || !(h & 0x3ff)) ck_assert_uint_eq(tj_f32_to_f16(f), h);
    else ck_assert(isnan(f) && (tj_f32_to_f16(f) & 0x7fff) > 0x7c00);
    if ((h & 0x7f80) != 0x7f80 || !(h & 0x7f)) ck_assert_uint_eq(tj_f32_to_bf16(g), h);
    else ck_assert(isnan(g));
  }
  TjRng r;
  rng_seed(&r, 12345);
  for (int i = 0; i < 1000000; i++) {
    uint32_t bits = (uint32_t)rng_next(&r);
    if (i & 1) bits = (bits & 0x87ffffffu) | 0x30000000u; /* near f16's range */
    float f;
    memcpy(&f, &bits, 4);
    if (!isfinite(f)) continue;
    ck_assert_msg(tj_f32_to_f16(f) == f16_by_arithmetic(f), "%a: 0x%04x, want 0x%04x", (double)f,
                  tj_f32_to_f16(f), f16_by_arithmetic(f));
    /* bf16: the nearest of the two neighbours, ties to even */
    uint16_t b = tj_f32_to_bf16(f), lo = (uint16_t)(bits >> 16);
    double down = tj_bf16_to_f32(lo), up = tj_bf16_to_f32((uint16_t)(lo + 1));
    if (isinf(up)) up = copysign(0x1p128, up); /* as if the exponent went on */
    double dd = fabs((double)f - down), du = fabs(up - (double)f);
    uint16_t want = dd < du || (dd == du && !(lo & 1)) ? lo : (uint16_t)(lo + 1);
    ck_assert_msg(b == want, "%a: bf16 0x%04x, want 0x%04x", (double)f, b, want);
  }
}
END_TEST

START_TEST(cast_float_to_int_truncates_and_saturates) {
  const float in[LEN] = {3.7f, -3.7f, NAN, 3e9f, -3e9f, INFINITY, -INFINITY, 2147483520.0f};
  const int32_t want32[LEN] = {3, -3, 0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 2147483520};
  const int64_t want64[LEN] = {3, -3, 0, 3000000000, -3000000000, INT64_MAX, INT64_MIN, 2147483520};
  tj_program *p = program();
  tj_value pi = ptr_param(p, "in", TJ_F32), o32 = ptr_param(p, "o32", TJ_I32);
  tj_value o64 = ptr_param(p, "o64", TJ_I64), idx = arange(p);
  tj_value x = load(p, pi, idx);
  store(p, o32, idx, cast(p, x, TJ_I32));
  store(p, o64, idx, cast(p, x, TJ_I64));
  tj_spec *s = specialize(p, LEN);
  int32_t g32[LEN];
  int64_t g64[LEN];
  tj_arg args[3] = {ptr_arg((void *)(uintptr_t)in, sizeof in), ptr_arg(g32, sizeof g32),
                    ptr_arg(g64, sizeof g64)};
  run(s, args, 3, 1);
  for (int k = 0; k < LEN; k++) {
    ck_assert_msg(g32[k] == want32[k], "i32 lane %d: %d", k, g32[k]);
    ck_assert_msg(g64[k] == want64[k], "i64 lane %d: %lld", k, (long long)g64[k]);
  }
  tj_spec_destroy(s);
}
END_TEST

START_TEST(cast_int_to_float_and_between_ints) {
  const int64_t in[LEN] = {16777217,
                           -16777219,
                           ((int64_t)1 << 32) + 5,
                           -1,
                           ((int64_t)1 << 32) + ((int64_t)1 << 24) + 1,
                           2049,
                           2051,
                           70000};
  tj_program *p = program();
  tj_value pi = ptr_param(p, "in", TJ_I64), of = ptr_param(p, "of", TJ_F32);
  tj_value o32 = ptr_param(p, "o32", TJ_I32), o64 = ptr_param(p, "o64", TJ_I64);
  tj_value oh = ptr_param(p, "oh", TJ_F16), ob = ptr_param(p, "ob", TJ_BF16), idx = arange(p);
  tj_value x = load(p, pi, idx), x32 = cast(p, x, TJ_I32);
  store(p, of, idx, cast(p, x, TJ_F32));
  store(p, o32, idx, x32);
  store(p, o64, idx, cast(p, x32, TJ_I64));
  store(p, oh, idx, cast(p, x, TJ_F16));
  store(p, ob, idx, cast(p, x, TJ_BF16));
  tj_spec *s = specialize(p, LEN);
  float gf[LEN];
  int32_t g32[LEN];
  int64_t g64[LEN];
  uint16_t gh[LEN], gb[LEN];
  tj_arg args[6] = {ptr_arg((void *)(uintptr_t)in, sizeof in),
                    ptr_arg(gf, sizeof gf),
                    ptr_arg(g32, sizeof g32),
                    ptr_arg(g64, sizeof g64),
                    ptr_arg(gh, sizeof gh),
                    ptr_arg(gb, sizeof gb)};
  run(s, args, 6, 1);
  ck_assert(gf[0] == 16777216.0f && gf[1] == -16777220.0f); /* ties to even */
  ck_assert(g32[2] == 5 && g32[3] == -1);                   /* i64 -> i32 wraps */
  ck_assert(g64[2] == 5 && g64[3] == -1);                   /* i32 -> i64 sign-extends */
  ck_assert_uint_eq(gh[5], 0x6800);                         /* 2049 -> 2048 (tie, even) */
  ck_assert_uint_eq(gh[6], 0x6802);                         /* 2051 -> 2052 (tie, even) */
  ck_assert_uint_eq(gh[7], 0x7c00);                         /* 70000 overflows f16 */
  /* 2^32 + 2^24 + 1 is just above the tie between two bf16 values; rounding
   * through f32 first would make it an exact tie and round down to 2^32. */
  ck_assert_uint_eq(gb[4], 0x4f81);
  ck_assert_uint_eq(gb[0], 0x4b80); /* 16777217 -> 2^24 */
  tj_spec_destroy(s);
}
END_TEST

/* ---- reductions --------------------------------------------------------- */

/* reduce_max and reduce_sum over LEN floats, into out[0] and out[1]. */
static void reduce_floats(const float *in, float *out) {
  tj_program *p = program();
  tj_value pi = ptr_param(p, "in", TJ_F32), po = ptr_param(p, "out", TJ_F32), idx = arange(p);
  tj_value x = load(p, pi, idx);
  tj_value m = op1(p, TJ_OP_REDUCE_MAX, x), s = op1(p, TJ_OP_REDUCE_SUM, x);
  tj_value first = op2(p, TJ_OP_EQ, idx, scalar(p, TJ_I32, 0));
  tj_value both = op3(p, TJ_OP_SELECT, first, m, s);
  store(p, po, op2(p, TJ_OP_MIN, idx, scalar(p, TJ_I32, 1)), both); /* lanes 1.. all store s to 1 */
  tj_spec *sp = specialize(p, LEN);
  tj_arg args[2] = {ptr_arg((void *)(uintptr_t)in, LEN * 4), ptr_arg(out, 2 * 4)};
  run(sp, args, 2, 1);
  tj_spec_destroy(sp);
}

START_TEST(float_reductions) {
  float out[2];
  const float pairs[LEN] = {1e8f, 1.0f, -1e8f, 1.0f, 0.5f, 0.25f, 0.125f, 0.125f};
  reduce_floats(pairs, out);
  /* pairwise: ((1e8 + 1) + (-1e8 + 1)) + ((0.5 + 0.25) + (0.125 + 0.125)) = 0 + 1 */
  ck_assert_msg(out[1] == 1.0f, "sum %.9g", out[1]);
  ck_assert(out[0] == 1e8f);
  const float with_nan[LEN] = {NAN, 1.0f, 3.0f, NAN, -INFINITY, 2.0f, -5.0f, 0.0f};
  reduce_floats(with_nan, out);
  ck_assert(out[0] == 3.0f); /* NaN ignored by max */
  ck_assert(isnan(out[1]));  /* but not by sum */
  const float all_nan[LEN] = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
  reduce_floats(all_nan, out);
  ck_assert(isinf(out[0]) && out[0] < 0);
  const float neg_inf[LEN] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
                              -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  reduce_floats(neg_inf, out);
  ck_assert(isinf(out[0]) && out[0] < 0 && isinf(out[1]) && out[1] < 0);
}
END_TEST

START_TEST(int_reductions) {
  const int32_t in[LEN] = {INT32_MAX, 1, -7, 3, INT32_MIN, 12, 0, 5};
  tj_program *p = program();
  tj_value pi = ptr_param(p, "in", TJ_I32), po = ptr_param(p, "out", TJ_I32), idx = arange(p);
  tj_value x = load(p, pi, idx);
  tj_value m = op1(p, TJ_OP_REDUCE_MAX, x), s = op1(p, TJ_OP_REDUCE_SUM, x);
  tj_value first = op2(p, TJ_OP_EQ, idx, scalar(p, TJ_I32, 0));
  store(p, po, op2(p, TJ_OP_MIN, idx, scalar(p, TJ_I32, 1)), op3(p, TJ_OP_SELECT, first, m, s));
  tj_spec *sp = specialize(p, LEN);
  int32_t out[2];
  tj_arg args[2] = {ptr_arg((void *)(uintptr_t)in, sizeof in), ptr_arg(out, sizeof out)};
  run(sp, args, 2, 1);
  ck_assert_int_eq(out[0], INT32_MAX);
  uint32_t sum = 0;
  for (int k = 0; k < LEN; k++) sum += (uint32_t)in[k];
  ck_assert_uint_eq((uint32_t)out[1], sum); /* wraps */
  tj_spec_destroy(sp);
}
END_TEST

/* ---- memory ------------------------------------------------------------- */

/* Loads lanes < n of a buffer of exactly n floats (offsets of masked lanes
 * far outside it), other = 7.5, and stores them doubled. */
START_TEST(masked_loads_never_touch_memory) {
  tj_program *p = program();
  tj_value px = ptr_param(p, "x", TJ_F32), py = ptr_param(p, "y", TJ_F32);
  tj_value n = param(p, "n", tj_scalar_type(TJ_I32)), idx = arange(p);
  tj_value mask = op2(p, TJ_OP_LT, idx, n);
  tj_value wild =
      op3(p, TJ_OP_SELECT, mask, idx, op2(p, TJ_OP_MUL, idx, scalar(p, TJ_I32, 1000000)));
  tj_value args4[4] = {px, wild, mask, scalar(p, TJ_F32, 7.5)}, x, xi;
  ck_assert(tj_build(p, TJ_OP_LOAD, args4, 4, &x) == TJ_OK);
  args4[3] = scalar(p, TJ_I32, -3); /* other of another type, converted */
  ck_assert(tj_build(p, TJ_OP_LOAD, args4, 4, &xi) == TJ_OK);
  tj_value no_other;
  ck_assert(tj_build(p, TJ_OP_LOAD, args4, 3, &no_other) == TJ_OK);
  tj_value sum = op2(p, TJ_OP_ADD, op2(p, TJ_OP_ADD, x, x), op2(p, TJ_OP_MUL, xi, no_other));
  store(p, py, idx, sum);
  tj_spec *s = specialize(p, LEN);
  for (int count = 0; count <= 5; count += 5) {
    float *x_exact = malloc(count ? (size_t)count * 4 : 1), y[LEN];
    for (int k = 0; k < count; k++) x_exact[k] = (float)k + 0.5f;
    tj_arg args[3] = {ptr_arg(x_exact, (size_t)count * 4), ptr_arg(y, sizeof y), int_arg(count)};
    run(s, args, 3, 1);
    for (int k = 0; k < LEN; k++) {
      float v = (float)k + 0.5f, want = k < count ? 2 * v + v * v : 7.5f + 7.5f + -3.0f * 0.0f;
      ck_assert_msg(y[k] == want, "n %d lane %d: %g, want %g", count, k, y[k], want);
    }
    free(x_exact);
  }
  tj_spec_destroy(s);
}
END_TEST

/* y[k] = x[k + shift] over LEN lanes, unmasked. */
static tj_spec *shifted_copy(tj_elem e) {
  tj_program *p = program();
  tj_value px = ptr_param(p, "x", e), py = ptr_param(p, "y", e);
  tj_value shift = param(p, "shift", tj_scalar_type(TJ_I64)), idx = arange(p);
  store(p, py, idx, load(p, op2(p, TJ_OP_PTR_ADD, px, shift), idx));
  return specialize(p, LEN);
}

START_TEST(ptr_add_counts_elements) {
  tj_spec *s = shifted_copy(TJ_F16);
  uint16_t x[LEN + 3], y[LEN];
  for (int k = 0; k < LEN + 3; k++) x[k] = (uint16_t)(0x3c00 + k);
  tj_arg args[3] = {ptr_arg(x, sizeof x), ptr_arg(y, sizeof y), int_arg(3)};
  run(s, args, 3, 1);
  for (int k = 0; k < LEN; k++) ck_assert_uint_eq(y[k], 0x3c00 + k + 3);
  tj_spec_destroy(s);
  s = shifted_copy(TJ_F32);
  float xf[LEN + 2], yf[LEN];
  for (int k = 0; k < LEN + 2; k++) xf[k] = (float)k;
  tj_arg argsf[3] = {ptr_arg(xf, sizeof xf), ptr_arg(yf, sizeof yf), int_arg(2)};
  run(s, argsf, 3, 1);
  for (int k = 0; k < LEN; k++) ck_assert(yf[k] == (float)(k + 2));
  tj_spec_destroy(s);
}
END_TEST

START_TEST(out_of_bounds_load_is_an_error) {
  tj_spec *s = shifted_copy(TJ_F16);
  uint16_t x[LEN], y[LEN] = {0};
  tj_arg args[3] = {ptr_arg(x, sizeof x - 2), ptr_arg(y, sizeof y), int_arg(0)};
  memset(x, 0, sizeof x);
  ck_assert_int_eq(tj_interpret(s, args, 3, 2), TJ_ERR_INTERP);
  const char *msg = tj_spec_error(s);
  ck_assert_msg(strstr(msg, "= load %") && strstr(msg, "program 0") && strstr(msg, "element 7") &&
                    strstr(msg, "parameter x") && strstr(msg, "14 bytes: 7 elements of f16"),
                "%s", msg);
  args[0] = ptr_arg(x, sizeof x);
  args[2] = int_arg(-1); /* before the buffer */
  ck_assert_int_eq(tj_interpret(s, args, 3, 1), TJ_ERR_INTERP);
  ck_assert_msg(strstr(tj_spec_error(s), "element 0") && strstr(tj_spec_error(s), "-1 + 0"), "%s",
                tj_spec_error(s));
  args[2] = int_arg(INT64_MAX); /* offsets that would overflow */
  ck_assert_int_eq(tj_interpret(s, args, 3, 1), TJ_ERR_INTERP);
  tj_spec_destroy(s);
}
END_TEST

START_TEST(out_of_bounds_store_writes_nothing) {
  tj_spec *s = shifted_copy(TJ_F32);
  float x[LEN + 1], y[LEN];
  for (int k = 0; k < LEN + 1; k++) x[k] = (float)k;
  for (int k = 0; k < LEN; k++) y[k] = -1.0f;
  tj_arg args[3] = {ptr_arg(x, sizeof x), ptr_arg(y, sizeof y - 4), int_arg(1)};
  ck_assert_int_eq(tj_interpret(s, args, 3, 1), TJ_ERR_INTERP);
  ck_assert_msg(strstr(tj_spec_error(s), "store %") && strstr(tj_spec_error(s), "element 7") &&
                    strstr(tj_spec_error(s), "parameter y"),
                "%s", tj_spec_error(s));
  for (int k = 0; k < LEN; k++) ck_assert(y[k] == -1.0f);
  tj_spec_destroy(s);
}
END_TEST

/* ---- arguments and instances -------------------------------------------- */

START_TEST(bad_arguments_are_rejected) {
  tj_spec *s = shifted_copy(TJ_F32);
  float x[LEN], y[LEN];
  tj_arg good[3] = {ptr_arg(x, sizeof x), ptr_arg(y, sizeof y), int_arg(0)};
  tj_arg args[3];
  ck_assert_int_eq(tj_interpret(NULL, good, 3, 1), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_interpret(s, good, 2, 1), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(tj_spec_error(s), "2 arguments for 3 parameters"));
  ck_assert_int_eq(tj_interpret(s, NULL, 3, 1), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_interpret(s, good, 3, -1), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(tj_spec_error(s), "grid -1"));
  memcpy(args, good, sizeof args);
  args[0].u.ptr = NULL;
  ck_assert_int_eq(tj_interpret(s, args, 3, 1), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(tj_spec_error(s), "(x) is a NULL pointer"));
  memcpy(args, good, sizeof args);
  args[2] = float_arg(1.0);
  ck_assert_int_eq(tj_interpret(s, args, 3, 1), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(
      strstr(tj_spec_error(s), "(shift) is a float, but the parameter needs an integer"));
  memcpy(args, good, sizeof args);
  args[1] = int_arg(5);
  ck_assert_int_eq(tj_interpret(s, args, 3, 1), TJ_ERR_INVALID_ARGUMENT);
  args[1].kind = (tj_arg_kind)42;
  ck_assert_int_eq(tj_interpret(s, args, 3, 1), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_interpret(s, good, 3, 0), TJ_OK); /* an empty grid runs nothing */
  tj_spec_destroy(s);
  /* an i32 parameter takes only values that fit */
  tj_program *p = program();
  tj_value out = ptr_param(p, "out", TJ_I32), n = param(p, "n", tj_scalar_type(TJ_I32));
  store(p, out, arange(p), n);
  s = specialize(p, 1);
  int32_t got;
  tj_arg a2[2] = {ptr_arg(&got, 4), int_arg((int64_t)INT32_MAX + 1)};
  ck_assert_int_eq(tj_interpret(s, a2, 2, 1), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(tj_spec_error(s), "does not fit i32"));
  a2[1] = int_arg(INT32_MIN);
  run(s, a2, 2, 1);
  ck_assert_int_eq(got, INT32_MIN);
  tj_spec_destroy(s);
}
END_TEST

START_TEST(program_id_and_num_programs) {
  tj_program *p = program();
  tj_value out = ptr_param(p, "out", TJ_I32), idx = arange(p);
  tj_value pid = op0(p, TJ_OP_PROGRAM_ID), count = op0(p, TJ_OP_NUM_PROGRAMS);
  tj_value row = op2(p, TJ_OP_PTR_ADD, out, op2(p, TJ_OP_MUL, pid, scalar(p, TJ_I32, 2)));
  tj_value first = op2(p, TJ_OP_EQ, idx, scalar(p, TJ_I32, 0));
  store(p, row, idx, op3(p, TJ_OP_SELECT, first, pid, count));
  tj_spec *s = specialize(p, 2);
  int32_t got[10];
  tj_arg args[1] = {ptr_arg(got, sizeof got)};
  run(s, args, 1, 5);
  for (int i = 0; i < 5; i++) ck_assert(got[2 * i] == i && got[2 * i + 1] == 5);
  tj_spec_destroy(s);
}
END_TEST

/* ---- loops -------------------------------------------------------------- */

/* Opens `for lo, hi, step` with iters of the given initial values. */
static tj_value open_loop(tj_program *p, tj_value lo, tj_value hi, tj_value step, int niters,
                          const tj_value *init, tj_value *iters) {
  tj_value f = op3(p, TJ_OP_FOR, lo, hi, step);
  for (int i = 0; i < niters; i++) iters[i] = op1(p, TJ_OP_ITER, init[i]);
  return f;
}

static void close_loop(tj_program *p, int niters, const tj_value *iters, const tj_value *next) {
  for (int i = 0; i < niters; i++) {
    tj_value args[2] = {iters[i], next[i]};
    ck_assert_msg(tj_build(p, TJ_OP_YIELD, args, 2, NULL) == TJ_OK, "%s", tj_program_error(p));
  }
  ck_assert_msg(tj_build(p, TJ_OP_ENDFOR, NULL, 0, NULL) == TJ_OK, "%s", tj_program_error(p));
}

/* out[0] = sum of i, out[1] = count, out[2] = the product of (i + 0.5) in
 * f32, for i = lo, lo + step, ... < hi. */
static tj_spec *counting_loop(void) {
  tj_program *p = program();
  tj_value out = ptr_param(p, "out", TJ_F32), lo = param(p, "lo", tj_scalar_type(TJ_I32));
  tj_value hi = param(p, "hi", tj_scalar_type(TJ_I32)),
           step = param(p, "step", tj_scalar_type(TJ_I32));
  tj_value init[3] = {scalar(p, TJ_I32, 0), scalar(p, TJ_I32, 0), scalar(p, TJ_F32, 1)}, it[3];
  tj_value i = open_loop(p, lo, hi, step, 3, init, it);
  tj_value half = op2(p, TJ_OP_ADD, cast(p, i, TJ_F32), scalar(p, TJ_F32, 0.5));
  tj_value next[3] = {op2(p, TJ_OP_ADD, it[0], i), op2(p, TJ_OP_ADD, it[1], scalar(p, TJ_I32, 1)),
                      op2(p, TJ_OP_MUL, it[2], half)};
  close_loop(p, 3, it, next);
  tj_value idx = arange(p);
  tj_value v =
      op3(p, TJ_OP_SELECT, op2(p, TJ_OP_EQ, idx, scalar(p, TJ_I32, 0)), cast(p, it[0], TJ_F32),
          op3(p, TJ_OP_SELECT, op2(p, TJ_OP_EQ, idx, scalar(p, TJ_I32, 1)), cast(p, it[1], TJ_F32),
              it[2]));
  store(p, out, idx, v);
  return specialize(p, 4);
}

static void count(tj_spec *s, int64_t lo, int64_t hi, int64_t step, float *out) {
  tj_arg args[4] = {ptr_arg(out, 4 * sizeof *out), int_arg(lo), int_arg(hi), int_arg(step)};
  run(s, args, 4, 1);
}

START_TEST(loops_carry_values) {
  tj_spec *s = counting_loop();
  float out[4];
  count(s, 0, 10, 1, out);
  ck_assert(out[0] == 45.0f && out[1] == 10.0f);
  float product = 1.0f;
  for (int i = 0; i < 10; i++) product *= (float)i + 0.5f;
  ck_assert(out[2] == product);
  count(s, 3, 20, 4, out); /* 3, 7, 11, 15, 19 */
  ck_assert(out[0] == 55.0f && out[1] == 5.0f);
  count(s, 5, 5, 1, out); /* no trips: the iters keep their initial values */
  ck_assert(out[0] == 0.0f && out[1] == 0.0f && out[2] == 1.0f);
  count(s, 9, -3, 2, out);
  ck_assert(out[0] == 0.0f && out[1] == 0.0f);
  count(s, INT32_MAX - 3, INT32_MAX, 2, out); /* no wrap past the end */
  ck_assert(out[1] == 2.0f);
  tj_spec_destroy(s);
}
END_TEST

START_TEST(loop_step_must_be_positive) {
  tj_spec *s = counting_loop();
  float out[4];
  for (int64_t step = 0; step >= -1; step--) {
    tj_arg args[4] = {ptr_arg(out, sizeof out), int_arg(0), int_arg(10), int_arg(step)};
    ck_assert_int_eq(tj_interpret(s, args, 4, 1), TJ_ERR_INTERP);
    ck_assert_msg(strstr(tj_spec_error(s), "= for %") && strstr(tj_spec_error(s), "step"), "%s",
                  tj_spec_error(s));
  }
  tj_spec_destroy(s);
}
END_TEST

/* a, b = 0, 1; repeat n times: a, b = b, a + b. Sequential yields would
 * give powers of two instead. */
START_TEST(yields_take_effect_together) {
  tj_program *p = program();
  tj_value out = ptr_param(p, "out", TJ_I64), n = param(p, "n", tj_scalar_type(TJ_I64));
  tj_value init[2] = {scalar(p, TJ_I64, 0), scalar(p, TJ_I64, 1)}, it[2];
  open_loop(p, scalar(p, TJ_I64, 0), n, scalar(p, TJ_I64, 1), 2, init, it);
  tj_value next[2] = {it[1], op2(p, TJ_OP_ADD, it[0], it[1])};
  close_loop(p, 2, it, next);
  store(p, out, arange(p), it[0]);
  tj_spec *s = specialize(p, 1);
  int64_t got;
  tj_arg args[2] = {ptr_arg(&got, 8), int_arg(50)};
  run(s, args, 2, 1);
  ck_assert(got == 12586269025); /* fib(50) */
  tj_spec_destroy(s);
}
END_TEST

/* for i in 0..n: for j in 0..i+1: count += 1, sum += i*j (i32), with the
 * inner loop's iters starting from the outer's. */
START_TEST(nested_loops) {
  tj_program *p = program();
  tj_value out = ptr_param(p, "out", TJ_I32), n = param(p, "n", tj_scalar_type(TJ_I32));
  tj_value zero = scalar(p, TJ_I32, 0), one = scalar(p, TJ_I32, 1);
  tj_value init[2] = {zero, zero}, outer[2], inner[2];
  tj_value i = open_loop(p, zero, n, one, 2, init, outer);
  tj_value j = open_loop(p, zero, op2(p, TJ_OP_ADD, i, one), one, 2, outer, inner);
  tj_value next_inner[2] = {op2(p, TJ_OP_ADD, inner[0], one),
                            op2(p, TJ_OP_ADD, inner[1], op2(p, TJ_OP_MUL, i, j))};
  close_loop(p, 2, inner, next_inner);
  close_loop(p, 2, outer, inner); /* after the inner endfor, its iters hold their last values */
  tj_value idx = arange(p);
  store(p, out, idx, op3(p, TJ_OP_SELECT, op2(p, TJ_OP_EQ, idx, zero), outer[0], outer[1]));
  tj_spec *s = specialize(p, 2);
  for (int count = 0; count <= 7; count += 7) {
    int32_t got[2];
    tj_arg args[2] = {ptr_arg(got, sizeof got), int_arg(count)};
    run(s, args, 2, 3);
    int32_t want_count = 0, want_sum = 0;
    for (int a = 0; a < count; a++)
      for (int b = 0; b <= a; b++) {
        want_count++;
        want_sum += a * b;
      }
    ck_assert_int_eq(got[0], want_count);
    ck_assert_int_eq(got[1], want_sum);
  }
  tj_spec_destroy(s);
}
END_TEST

/* A loop over i64 bounds at the top of the range ends without overflow. */
START_TEST(loop_bounds_near_int64_max) {
  tj_program *p = program();
  tj_value out = ptr_param(p, "out", TJ_I64), lo = param(p, "lo", tj_scalar_type(TJ_I64));
  tj_value hi = param(p, "hi", tj_scalar_type(TJ_I64));
  tj_value init[1] = {scalar(p, TJ_I64, 0)}, it[1];
  tj_value i = open_loop(p, lo, hi, scalar(p, TJ_I64, 4), 1, init, it);
  tj_value next[1] = {op2(p, TJ_OP_ADD, it[0], op2(p, TJ_OP_SUB, i, lo))};
  close_loop(p, 1, it, next);
  store(p, out, arange(p), it[0]);
  tj_spec *s = specialize(p, 1);
  int64_t got;
  tj_arg args[3] = {ptr_arg(&got, 8), int_arg(INT64_MAX - 6), int_arg(INT64_MAX)};
  run(s, args, 3, 1); /* trips at +0 and +4; +8 would overflow */
  ck_assert(got == 4);
  tj_spec_destroy(s);
}
END_TEST

static Suite *interp_suite(void) {
  Suite *s = suite_create("interp");
  TCase *elementwise = tcase_create("elementwise");
  tcase_add_test(elementwise, float_arithmetic);
  tcase_add_test(elementwise, float_max_min_take_the_non_nan);
  tcase_add_test(elementwise, float_unary);
  tcase_add_test(elementwise, float_compares_are_false_on_nan_except_ne);
  tcase_add_test(elementwise, int_compares_and_logic);
  tcase_add_test(elementwise, int_remainder);
  tcase_add_test(elementwise, i32_arithmetic_wraps);
  tcase_add_test(elementwise, i64_arithmetic_wraps);
  tcase_add_test(elementwise, neg_wraps);
  tcase_add_test(elementwise, scalars_broadcast);
  tcase_add_test(elementwise, constants_and_arange);
  suite_add_tcase(s, elementwise);
  TCase *casts = tcase_create("casts");
  tcase_set_timeout(casts, 60);
  tcase_add_test(casts, cast_f32_to_f16_rounds_to_nearest_even);
  tcase_add_test(casts, cast_f32_to_bf16_rounds_to_nearest_even);
  tcase_add_test(casts, cast_nan_stays_nan);
  tcase_add_test(casts, half_conversions_exhaustive);
  tcase_add_test(casts, cast_float_to_int_truncates_and_saturates);
  tcase_add_test(casts, cast_int_to_float_and_between_ints);
  suite_add_tcase(s, casts);
  TCase *reduce = tcase_create("reductions");
  tcase_add_test(reduce, float_reductions);
  tcase_add_test(reduce, int_reductions);
  suite_add_tcase(s, reduce);
  TCase *memory = tcase_create("memory");
  tcase_add_test(memory, masked_loads_never_touch_memory);
  tcase_add_test(memory, ptr_add_counts_elements);
  tcase_add_test(memory, out_of_bounds_load_is_an_error);
  tcase_add_test(memory, out_of_bounds_store_writes_nothing);
  tcase_add_test(memory, bad_arguments_are_rejected);
  tcase_add_test(memory, program_id_and_num_programs);
  suite_add_tcase(s, memory);
  TCase *loops = tcase_create("loops");
  tcase_add_test(loops, loops_carry_values);
  tcase_add_test(loops, loop_step_must_be_positive);
  tcase_add_test(loops, yields_take_effect_together);
  tcase_add_test(loops, nested_loops);
  tcase_add_test(loops, loop_bounds_near_int64_max);
  suite_add_tcase(s, loops);
  return s;
}

int main(void) {
  return test_run_suite(interp_suite());
}
