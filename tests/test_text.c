/*
 * test_text.c — the IR text form: printer (print.c) and parser (parse.c).
 *
 * - Round trips: both embedded templates and a set of hand-written programs
 *   that together use every op and every element type, nested loops,
 *   comments and constants with and without values. For each text t,
 *   print(parse(print(parse(t)))) == print(parse(t)); canonical texts must
 *   come back byte for byte; specialized programs round-trip too.
 * - A table of malformed inputs, each with its status, its "LINE:COL: "
 *   prefix and a fragment of its message.
 * - A fuzz test with a fixed seed: mutated and truncated texts and random
 *   bytes, each in a buffer of exactly its length (so ASan catches any read
 *   past it). Every rejection must carry "LINE:COL: "; every acceptance must
 *   round-trip.
 * - The fixed corpus of hostile inputs (tests/corpus, support_corpus.h),
 *   replayed every run: each file gives the outcome its first line states,
 *   and no two accepted files that print differently share a key. It also
 *   seeds the fuzz test.
 * - The text buffer's printf (util.c, which the printer uses): what
 *   snprintf writes, by its one-pass path or through vsnprintf.
 */
#include "ir/ir.h"

#include "support.h"
#include "support_corpus.h"
#include "support_text.h"

#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- hand-written programs --------------------------------------------- */

/* Every elementwise arithmetic and float op, on f32 tiles and scalars. */
static const char prog_arith[] = "# elementwise arithmetic over f32 tiles and scalars\n"
                                 "kernel arith\n"
                                 "%x : ptr<f32> = param x\n"
                                 "%y : ptr<f32> = param y\n"
                                 "%n : i32 = param n\n"
                                 "%pid : i32 = program_id\n"
                                 "%np : i32 = num_programs\n"
                                 "%i : tile<i32,BLOCK> = arange\n"
                                 "%m : tile<pred,BLOCK> = lt %i, %n\n"
                                 "%z : f32 = const 0\n"
                                 "%v : tile<f32,BLOCK> = load %x, %i, %m, %z\n"
                                 "%h : f32 = const 0.5\n"
                                 "%a : tile<f32,BLOCK> = add %v, %h\n"
                                 "%b : tile<f32,BLOCK> = sub %a, %v\n"
                                 "%c : tile<f32,BLOCK> = mul %b, %b\n"
                                 "%d : tile<f32,BLOCK> = div %c, %h\n"
                                 "%e : tile<f32,BLOCK> = max %d, %a\n"
                                 "%f : tile<f32,BLOCK> = min %e, %h\n"
                                 "%g : tile<f32,BLOCK> = neg %f\n"
                                 "%k : tile<f32,BLOCK> = exp %g\n"
                                 "%l : tile<f32,BLOCK> = exp2 %k\n"
                                 "%o : tile<f32,BLOCK> = log %l\n"
                                 "store %y, %i, %o, %m\n";

/* Compares, logic and select, on a declared tile length and pred scalars. */
static const char prog_compare[] =
    "kernel compare\n"
    "const GROUP = 64\n"
    "%p : ptr<i32> = param out\n"
    "%n : i32 = param n\n"
    "%i : tile<i32,GROUP> = arange\n"
    "%lt : tile<pred,GROUP> = lt %i, %n\n"
    "%le : tile<pred,GROUP> = le %i, %n\n"
    "%gt : tile<pred,GROUP> = gt %i, %n\n"
    "%ge : tile<pred,GROUP> = ge %i, %n\n"
    "%eq : tile<pred,GROUP> = eq %i, %n\n"
    "%ne : tile<pred,GROUP> = ne %i, %n\n"
    "%a : tile<pred,GROUP> = and %lt, %le\n"
    "%o : tile<pred,GROUP> = or %a, %gt\n"
    "%x : tile<pred,GROUP> = and %o, %ge\n"
    "%y : tile<pred,GROUP> = or %eq, %ne\n"
    "%zero : i32 = const 0\n"
    "%s : tile<i32,GROUP> = select %x, %i, %zero\n"
    "%ps : pred = lt %zero, %n     # a pred scalar\n"
    "%t : tile<pred,GROUP> = select %ps, %x, %y   # select between preds\n"
    "%r : i32 = reduce_sum %s\n"
    "%q : i32 = reduce_max %s\n"
    "%w : tile<i32,GROUP> = add %s, %r\n"
    "%v : tile<i32,GROUP> = rem %w, %n   # a truncated remainder\n"
    "store %p, %i, %v, %t\n";

/* f16, bf16 and DTYPE storage, casts both ways, i64 pointer arithmetic. */
static const char prog_casts[] = "kernel casts\n"
                                 "const ALIGN = 16   # a built-in, bound\n"
                                 "%xh : ptr<f16> = param xh\n"
                                 "%xb : ptr<bf16> = param xb\n"
                                 "%xd : ptr<DTYPE> = param xd\n"
                                 "%yh : ptr<f16> = param yh\n"
                                 "%stride : i64 = param stride\n"
                                 "%row : i32 = program_id\n"
                                 "%row64 : i64 = cast %row\n"
                                 "%off : i64 = mul %row64, %stride\n"
                                 "%xh1 : ptr<f16> = ptr_add %xh, %off\n"
                                 "%i : tile<i32,BLOCK> = arange\n"
                                 "%i64 : tile<i64,BLOCK> = cast %i\n"
                                 "%h : tile<f16,BLOCK> = load %xh1, %i64\n"
                                 "%b : tile<bf16,BLOCK> = load %xb, %i\n"
                                 "%d : tile<DTYPE,BLOCK> = load %xd, %i\n"
                                 "%hf : tile<f32,BLOCK> = cast %h\n"
                                 "%bf : tile<f32,BLOCK> = cast %b\n"
                                 "%df : tile<f32,BLOCK> = cast %d\n"
                                 "%s : tile<f32,BLOCK> = add %hf, %bf\n"
                                 "%t : tile<f32,BLOCK> = add %s, %df\n"
                                 "%th : tile<f16,BLOCK> = cast %t\n"
                                 "%tb : tile<bf16,BLOCK> = cast %t\n"
                                 "%td : tile<DTYPE,BLOCK> = cast %t\n"
                                 "store %yh, %i, %th\n"
                                 "store %xb, %i, %tb\n"
                                 "store %xd, %i, %td\n";

/* Constants of every kind: extremes of i32 and i64, inf, nan, -0, denormals,
 * tiles, constexpr of built-in and declared constants. */
static const char prog_constants[] = "kernel constants\n"
                                     "const CHUNK\n"
                                     "const GROUP = 64\n"
                                     "const BIG = -9223372036854775808\n"
                                     "%a : i32 = const 0\n"
                                     "%b : i32 = const -2147483648\n"
                                     "%c : i32 = const 2147483647\n"
                                     "%d : i64 = const -9223372036854775808\n"
                                     "%e : i64 = const 9007199254740992\n"
                                     "%f : f32 = const 0.1\n"
                                     "%g : f32 = const -inf\n"
                                     "%h : f32 = const inf\n"
                                     "%k : f32 = const nan\n"
                                     "%l : f32 = const 1e-45\n"
                                     "%m : f32 = const -0\n"
                                     "%n : f32 = const 3.4028235e38\n"
                                     "%o : tile<f32,CHUNK> = const +0.5\n"
                                     "%p : tile<i32,GROUP> = const -7\n"
                                     "%q : tile<i64,BLOCK> = const 12\n"
                                     "%r : i32 = constexpr CHUNK\n"
                                     "%s : i32 = constexpr BLOCK\n"
                                     "%t : i32 = constexpr NUM_WARPS\n"
                                     "%u : i32 = constexpr BIG\n"
                                     "%v : f32 = const 1.5E+3\n"
                                     "%w : f32 = const .25\n";

/* Two nested loops with loop-carried scalars, in the shape of online softmax. */
static const char prog_nested[] = "kernel nested\n"
                                  "const CHUNK = 256\n"
                                  "%x : ptr<f32> = param x\n"
                                  "%n : i32 = param n\n"
                                  "%zero : i32 = const 0\n"
                                  "%one : i32 = const 1\n"
                                  "%step : i32 = constexpr CHUNK\n"
                                  "%ninf : f32 = const -inf\n"
                                  "%fzero : f32 = const 0\n"
                                  "%idx : tile<i32,CHUNK> = arange\n"
                                  "%outer : i32 = for %zero, %n, %step\n"
                                  "  %m : f32 = iter %ninf\n"
                                  "  %s : f32 = iter %fzero\n"
                                  "  %offs : tile<i32,CHUNK> = add %idx, %outer\n"
                                  "  %mask : tile<pred,CHUNK> = lt %offs, %n\n"
                                  "  %v : tile<f32,CHUNK> = load %x, %offs, %mask, %ninf\n"
                                  "  %inner : i32 = for %zero, %step, %one\n"
                                  "    %acc : f32 = iter %s\n"
                                  "    %t : f32 = reduce_sum %v\n"
                                  "    %acc2 : f32 = add %acc, %t\n"
                                  "    yield %acc, %acc2\n"
                                  "  endfor\n"
                                  "  %bm : f32 = reduce_max %v\n"
                                  "  %m2 : f32 = max %m, %bm\n"
                                  "  yield %m, %m2\n"
                                  "  yield %s, %acc\n"
                                  "endfor\n"
                                  "%res : f32 = div %s, %m\n";

/* Three levels of i64 loops, odd layout: blank lines, comments, tabs, names
 * with dots, no or extra blanks around commas, CR LF line ends. */
static const char prog_deep[] = "\n"
                                "   # a leading comment, and blank lines\n"
                                "\n"
                                "kernel   deep    # a trailing comment\r\n"
                                "const A\r\n"
                                "const B = 4\n"
                                "%lo : i64 = const 0\n"
                                "%hi : i64 = const 10\n"
                                "%st : i64 = const 1\n"
                                "%i.0 : i64 = for %lo, %hi, %st\n"
                                "\t%j.0 : i64 = for %lo,%hi,%st     # tab indentation\n"
                                "        %k.0 : i64 = for %lo ,  %hi , %st\n"
                                "          %acc : i64 = iter %i.0\n"
                                "          %acc.next : i64 = add %acc, %k.0\n"
                                "          yield %acc, %acc.next\n"
                                "        endfor\n"
                                "  endfor\n"
                                "\n"
                                "endfor\n"
                                "%tile : tile<i64,A> = const 3\n"
                                "%b.tile : tile<i64,B> = const -3";

/* Every form of load and store, ptr_add by i32, i32 reductions, scalar masks. */
static const char prog_memory[] = "kernel memory\n"
                                  "%x : ptr<i32> = param x\n"
                                  "%y : ptr<i64> = param y\n"
                                  "%f : f32 = param scale\n"
                                  "%pid : i32 = program_id\n"
                                  "%xr : ptr<i32> = ptr_add %x, %pid\n"
                                  "%i : tile<i32,NUM_WARPS> = arange\n"
                                  "%a : tile<i32,NUM_WARPS> = load %xr, %i\n"
                                  "%mp : pred = lt %pid, %pid\n"
                                  "%b : tile<i32,NUM_WARPS> = load %xr, %i, %mp\n"
                                  "%c : tile<i32,NUM_WARPS> = load %xr, %i, %mp, %pid\n"
                                  "%s : i32 = reduce_sum %a\n"
                                  "%q : i32 = reduce_max %b\n"
                                  "%w : tile<i64,NUM_WARPS> = cast %c\n"
                                  "store %y, %i, %w\n"
                                  "%z : i64 = cast %s\n"
                                  "store %y, %i, %z, %mp\n"
                                  "%g : f32 = cast %q\n"
                                  "%h : f32 = mul %g, %f\n"
                                  "%mi : i64 = min %z, %z\n"
                                  "%mx : i32 = max %s, %q\n"
                                  "%ng : i64 = neg %mi\n";

/* Canonical texts: parse then print gives them back byte for byte. */
static const char canon_softmax[] = "kernel softmax_like\n"
                                    "const BLOCK = 1024\n"
                                    "const NUM_WARPS = 4\n"
                                    "const ROWS\n"
                                    "const EPS = -3\n"
                                    "%0 : ptr<DTYPE> = param y\n"
                                    "%1 : ptr<DTYPE> = param x\n"
                                    "%2 : i64 = param y_stride\n"
                                    "%3 : i64 = param x_stride\n"
                                    "%4 : i32 = param n\n"
                                    "%5 : i32 = program_id\n"
                                    "%6 : i64 = cast %5\n"
                                    "%7 : i64 = mul %6, %3\n"
                                    "%8 : ptr<DTYPE> = ptr_add %1, %7\n"
                                    "%9 : i64 = mul %6, %2\n"
                                    "%10 : ptr<DTYPE> = ptr_add %0, %9\n"
                                    "%11 : tile<i32,BLOCK> = arange\n"
                                    "%12 : tile<pred,BLOCK> = lt %11, %4\n"
                                    "%13 : f32 = const -inf\n"
                                    "%14 : tile<DTYPE,BLOCK> = load %8, %11, %12, %13\n"
                                    "%15 : tile<f32,BLOCK> = cast %14\n"
                                    "%16 : f32 = reduce_max %15\n"
                                    "%17 : tile<f32,BLOCK> = sub %15, %16\n"
                                    "%18 : tile<f32,BLOCK> = exp %17\n"
                                    "%19 : f32 = reduce_sum %18\n"
                                    "%20 : tile<f32,BLOCK> = div %18, %19\n"
                                    "%21 : tile<DTYPE,BLOCK> = cast %20\n"
                                    "store %10, %11, %21, %12\n";

static const char canon_loops[] = "kernel loops\n"
                                  "const CHUNK = 128\n"
                                  "%0 : i32 = param n\n"
                                  "%1 : i32 = const 0\n"
                                  "%2 : i32 = constexpr CHUNK\n"
                                  "%3 : f32 = const 0\n"
                                  "%4 : i32 = for %1, %0, %2\n"
                                  "  %5 : f32 = iter %3\n"
                                  "  %6 : i32 = for %1, %2, %2\n"
                                  "    %7 : f32 = iter %5\n"
                                  "    %8 : f32 = const 1.5\n"
                                  "    %9 : f32 = add %7, %8\n"
                                  "    yield %7, %9\n"
                                  "  endfor\n"
                                  "  %10 : f32 = const 0.10000000149011612\n"
                                  "  yield %5, %10\n"
                                  "endfor\n"
                                  "%11 : f32 = neg %5\n"
                                  "%12 : i32 = num_programs\n";

/* The empty program, and one of constants only. */
static const char canon_empty[] = "kernel empty\n";
static const char canon_header[] =
    "kernel header\nconst BLOCK = 64\nconst ALIGN = 16\nconst X\nconst Y = 0\n";

static const char *const hand_programs[] = {
    prog_arith,  prog_compare,  prog_casts,  prog_constants, prog_nested,  prog_deep,
    prog_memory, canon_softmax, canon_loops, canon_empty,    canon_header,
};
static const char *const canonical[] = {canon_softmax, canon_loops, canon_empty, canon_header};

/* ---- helpers ------------------------------------------------------------- */

/* Whether msg starts with "LINE:COL: " (both positive), and those two. */
static bool has_position(const char *msg, long *line, long *col) {
  char *end;
  if (msg[0] < '1' || msg[0] > '9') return false;
  *line = strtol(msg, &end, 10);
  if (end == msg || *end != ':' || *line < 1) return false;
  const char *c = end + 1;
  *col = strtol(c, &end, 10);
  return end != c && *col >= 1 && end[0] == ':' && end[1] == ' ' && end[2] != '\0';
}

/* ---- round trips --------------------------------------------------------- */

START_TEST(round_trips_templates) {
  const char *templates[] = {tj_template_softmax, tj_template_softmax_online};
  const char *heads[] = {"kernel softmax\n", "kernel softmax_online\n"};
  for (size_t i = 0; i < TJ_COUNTOF(templates); i++) {
    char *text = text_round_trip(templates[i]);
    ck_assert_msg(strncmp(text, heads[i], strlen(heads[i])) == 0, "template %zu:\n%s", i, text);
    tj_free(text);
  }
}
END_TEST

START_TEST(round_trips_hand_written) {
  for (size_t i = 0; i < TJ_COUNTOF(hand_programs); i++) tj_free(text_round_trip(hand_programs[i]));
}
END_TEST

START_TEST(canonical_texts_come_back_byte_for_byte) {
  for (size_t i = 0; i < TJ_COUNTOF(canonical); i++) {
    char *text = text_round_trip(canonical[i]);
    ck_assert_str_eq(text, canonical[i]);
    tj_free(text);
  }
}
END_TEST

/* Specialized programs (bound constants, no DTYPE, constexpr folded) print
 * and read back too, for every dtype. */
START_TEST(round_trips_specialized) {
  const char *sources[] = {tj_template_softmax, tj_template_softmax_online,
                           canon_softmax,       prog_nested,
                           prog_compare,        prog_casts};
  for (size_t i = 0; i < TJ_COUNTOF(sources); i++) {
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      tj_program *p = text_parse_ok(sources[i]);
      tj_spec *s = text_specialize_all(p, (tj_dtype)d);
      char *text = NULL;
      ck_assert_int_eq(tj_spec_print(s, &text), TJ_OK);
      ck_assert_ptr_null(strstr(text, "DTYPE"));
      ck_assert_ptr_null(strstr(text, "constexpr"));
      char *again = text_round_trip(text);
      ck_assert_str_eq(again, text);
      tj_free(again);
      tj_free(text);
      tj_spec_destroy(s);
      tj_program_destroy(p);
    }
  }
}
END_TEST

/* The hand-written programs use every op and every element type. */
START_TEST(hand_written_programs_cover_every_op_and_type) {
  bool ops[TJ_OP_COUNT] = {false}, elems[TJ_ELEM_COUNT] = {false};
  bool shapes[3][TJ_ELEM_COUNT] = {{false}};
  for (size_t i = 0; i < TJ_COUNTOF(hand_programs); i++) {
    tj_program *p = text_parse_ok(hand_programs[i]);
    for (int k = 0; k < p->ninsts; k++)
      ops[p->insts[k].op] = true;
    for (int v = 0; v < p->nvalues; v++) {
      elems[p->types[v].elem] = true;
      shapes[p->types[v].shape][p->types[v].elem] = true;
    }
    tj_program_destroy(p);
  }
  for (int op = 0; op < TJ_OP_COUNT; op++)
    ck_assert_msg(ops[op], "op %s is not covered", tj_op_name((tj_op)op));
  for (int e = 0; e < TJ_ELEM_COUNT; e++)
    ck_assert_msg(elems[e], "elem %s is not covered", ir_elem_name((tj_elem)e));
  const tj_elem scalars[] = {TJ_I32, TJ_I64, TJ_F32, TJ_PRED};
  for (size_t i = 0; i < TJ_COUNTOF(scalars); i++)
    ck_assert(shapes[TJ_SCALAR][scalars[i]]);
  for (int e = 0; e < TJ_ELEM_COUNT; e++)
    ck_assert(shapes[TJ_TILE][e]);
  for (int e = 0; e < TJ_ELEM_COUNT; e++)
    ck_assert(e == TJ_PRED || shapes[TJ_POINTER][e]);
}
END_TEST

/* ---- the printer on builder-made programs --------------------------------- */

static tj_value build2(tj_program *p, tj_op op, tj_value a, tj_value b) {
  tj_value args[2] = {a, b}, r = TJ_NO_VALUE;
  ck_assert_msg(tj_build(p, op, args, 2, &r) == TJ_OK, "%s", tj_program_error(p));
  return r;
}

START_TEST(prints_builder_programs) {
  tj_program *p;
  tj_value x, n, zero, ninf, nan_v, tenth, big, loop, acc, sum, tile;
  int chunk;
  ck_assert_int_eq(tj_program_create("built", &p), TJ_OK);
  ck_assert_int_eq(tj_program_declare_const(p, "CHUNK", &chunk), TJ_OK);
  ck_assert_int_eq(tj_build_param(p, "x", tj_pointer_type(TJ_BF16), &x), TJ_OK);
  ck_assert_int_eq(tj_build_param(p, "n", tj_scalar_type(TJ_I32), &n), TJ_OK);
  ck_assert_int_eq(tj_build_const(p, tj_scalar_type(TJ_I32), 0, &zero), TJ_OK);
  ck_assert_int_eq(tj_build_const(p, tj_scalar_type(TJ_F32), -INFINITY, &ninf), TJ_OK);
  ck_assert_int_eq(tj_build_const(p, tj_scalar_type(TJ_F32), NAN, &nan_v), TJ_OK);
  ck_assert_int_eq(tj_build_const(p, tj_scalar_type(TJ_F32), 0.1, &tenth), TJ_OK);
  ck_assert_int_eq(tj_build_const(p, tj_scalar_type(TJ_I64), -1e15, &big), TJ_OK);
  ck_assert_int_eq(tj_build_const(p, tj_tile_type(TJ_F32, chunk), 2.5, &tile), TJ_OK);
  tj_value bounds[3] = {zero, n, n};
  ck_assert_int_eq(tj_build(p, TJ_OP_FOR, bounds, 3, &loop), TJ_OK);
  ck_assert_int_eq(tj_build(p, TJ_OP_ITER, &tenth, 1, &acc), TJ_OK);
  sum = build2(p, TJ_OP_ADD, acc, ninf);
  tj_value yield[2] = {acc, sum};
  ck_assert_int_eq(tj_build(p, TJ_OP_YIELD, yield, 2, NULL), TJ_OK);
  ck_assert_int_eq(tj_build(p, TJ_OP_ENDFOR, NULL, 0, NULL), TJ_OK);
  char *text = text_print_ok(p);
  ck_assert_str_eq(text, "kernel built\n"
                         "const CHUNK\n"
                         "%0 : ptr<bf16> = param x\n"
                         "%1 : i32 = param n\n"
                         "%2 : i32 = const 0\n"
                         "%3 : f32 = const -inf\n"
                         "%4 : f32 = const nan\n"
                         "%5 : f32 = const 0.10000000149011612\n"
                         "%6 : i64 = const -1000000000000000\n"
                         "%7 : tile<f32,CHUNK> = const 2.5\n"
                         "%8 : i32 = for %2, %1, %1\n"
                         "  %9 : f32 = iter %5\n"
                         "  %10 : f32 = add %9, %3\n"
                         "  yield %9, %10\n"
                         "endfor\n");
  tj_free(text_round_trip(text));
  tj_free(text);
  tj_program_destroy(p);
}
END_TEST

START_TEST(prints_single_instructions) {
  tj_program *p = text_parse_ok(canon_softmax);
  const char *want[][2] = {
      {"0", "%0 : ptr<DTYPE> = param y"},
      {"13", "%13 : f32 = const -inf"},
      {"14", "%14 : tile<DTYPE,BLOCK> = load %8, %11, %12, %13"},
      {"22", "store %10, %11, %21, %12"},
      {"-1", "?"},
      {"23", "?"},
  };
  for (size_t i = 0; i < TJ_COUNTOF(want); i++) {
    TjBuf b;
    buf_init(&b);
    ir_print_inst(p, atoi(want[i][0]), &b);
    ck_assert_str_eq(b.data, want[i][1]);
    buf_free(&b);
  }
  /* The verifier prints broken instructions too: unknown ops and operands. */
  p->insts[7].args[1] = 9999;
  p->insts[8].op = 200;
  TjBuf b;
  buf_init(&b);
  ir_print_inst(p, 7, &b);
  buf_puts(&b, " | ");
  ir_print_inst(p, 8, &b);
  ck_assert_str_eq(b.data, "%7 : i64 = mul %6, %? | %8 : ptr<DTYPE> = ?op200");
  buf_free(&b);
  tj_program_destroy(p);
}
END_TEST

/* ---- parser semantics ---------------------------------------------------- */

START_TEST(parses_constants_and_names) {
  tj_program *p = text_parse_ok(canon_header);
  ck_assert_str_eq(p->name, "header");
  ck_assert_int_eq(p->nconsts, TJ_CONST_BUILTIN_COUNT + 2);
  ck_assert(p->consts[TJ_CONST_BLOCK].bound);
  ck_assert_int_eq(p->consts[TJ_CONST_BLOCK].value, 64);
  ck_assert(!p->consts[TJ_CONST_NUM_WARPS].bound);
  ck_assert(p->consts[TJ_CONST_ALIGN].bound);
  ck_assert_str_eq(p->consts[TJ_CONST_BUILTIN_COUNT].name, "X");
  ck_assert(!p->consts[TJ_CONST_BUILTIN_COUNT].bound);
  ck_assert_str_eq(p->consts[TJ_CONST_BUILTIN_COUNT + 1].name, "Y");
  ck_assert(p->consts[TJ_CONST_BUILTIN_COUNT + 1].bound);
  ck_assert_int_eq(p->consts[TJ_CONST_BUILTIN_COUNT + 1].value, 0);
  tj_program_destroy(p);
  /* A built-in named without a value is accepted and changes nothing. */
  p = text_parse_ok("kernel k\nconst NUM_WARPS\n");
  ck_assert(!p->consts[TJ_CONST_NUM_WARPS].bound);
  ck_assert_int_eq(p->nconsts, TJ_CONST_BUILTIN_COUNT);
  tj_program_destroy(p);
}
END_TEST

START_TEST(parses_immediates) {
  tj_program *p = text_parse_ok(prog_constants);
  const double want[] = {0,
                         -2147483648.0,
                         2147483647.0,
                         -9223372036854775808.0,
                         9007199254740992.0,
                         (double)0.1f,
                         -INFINITY,
                         INFINITY,
                         NAN,
                         (double)1e-45f,
                         -0.0,
                         (double)3.4028235e38f,
                         0.5,
                         -7,
                         12};
  for (size_t i = 0; i < TJ_COUNTOF(want); i++) {
    double got = p->insts[i].fimm;
    ck_assert_msg(isnan(want[i]) ? isnan(got) : got == want[i], "const %zu: %.17g", i, got);
    ck_assert_int_eq(signbit(got) != 0, signbit(want[i]) != 0);
  }
  int big = ir_const_find(p, "BIG", 3);
  ck_assert_int_eq(p->consts[big].value, INT64_MIN);
  ck_assert_int_eq(p->insts[TJ_COUNTOF(want)].op, TJ_OP_CONSTEXPR);
  ck_assert_int_eq(p->insts[TJ_COUNTOF(want)].iimm, ir_const_find(p, "CHUNK", 5));
  ck_assert_int_eq(p->insts[TJ_COUNTOF(want) + 1].iimm, TJ_CONST_BLOCK);
  tj_program_destroy(p);
  p = text_parse_ok(prog_casts);
  ck_assert_int_eq(p->nparams, 5);
  ck_assert_str_eq(p->params[4], "stride");
  ck_assert_int_eq(p->insts[4].iimm, 4);
  tj_program_destroy(p);
}
END_TEST

START_TEST(errors_leave_the_program_and_message) {
  tj_program *p = (tj_program *)&p; /* any non-NULL value: it must come back NULL */
  ck_assert_int_eq(tj_program_parse(NULL, 0, &p), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(p);
  ck_assert_int_eq(tj_program_parse("kernel k\n", 9, NULL), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(ir_parse("kernel k\n", 9, NULL), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_program_parse("kernel k\n%0 : i32 = bogus\n", 26, &p), TJ_ERR_PARSE);
  ck_assert_ptr_nonnull(p);
  ck_assert_str_eq(tj_program_error(p), "2:12: unknown op 'bogus'");
  tj_program_destroy(p);
  /* Only `length` bytes count: the rest of the string is never read. */
  ck_assert_int_eq(tj_program_parse("kernel k\n%0 : i32 = program_id junk", 31, &p), TJ_OK);
  ck_assert_str_eq(tj_program_error(p), "");
  ck_assert_int_eq(p->ninsts, 1);
  tj_program_destroy(p);
}
END_TEST

/* ---- malformed inputs ---------------------------------------------------- */

typedef struct Malformed {
  const char *text;
  size_t len; /* 0: strlen(text) */
  tj_status status;
  const char *where; /* "LINE:COL: " */
  const char *fragment;
} Malformed;

#define K   "kernel k\n"
#define PID "%0 : i32 = program_id\n"

static const Malformed malformed[] = {
    {"", 0, TJ_ERR_PARSE, "1:1: ", "expected 'kernel NAME'"},
    {"# only a comment\n", 0, TJ_ERR_PARSE, "2:1: ", "expected 'kernel NAME'"},
    {PID, 0, TJ_ERR_PARSE, "1:1: ", "expected 'kernel NAME'"},
    {"kernel\n", 0, TJ_ERR_PARSE, "1:7: ", "expected a kernel name"},
    {"kernel 9k\n", 0, TJ_ERR_PARSE, "1:8: ", "expected a kernel name"},
    {"kernel k extra\n", 0, TJ_ERR_PARSE, "1:10: ", "expected end of line"},
    {K "kernel j\n", 0, TJ_ERR_PARSE, "2:1: ", "already named"},
    {K "const\n", 0, TJ_ERR_PARSE, "2:6: ", "expected a constant name"},
    {K "const N = \n", 0, TJ_ERR_PARSE, "2:11: ", "expected an integer"},
    {K "const N = 99999999999999999999\n", 0, TJ_ERR_PARSE, "2:11: ", "integer out of range"},
    {K "const N = 12abc\n", 0, TJ_ERR_PARSE, "2:11: ", "expected an integer"},
    {K "const N 5\n", 0, TJ_ERR_PARSE, "2:9: ", "expected '=' or end of line"},
    {K "const N\nconst N\n", 0, TJ_ERR_PARSE, "3:7: ", "constant N is already declared"},
    {K "const BLOCK = 1\nconst BLOCK = 2\n", 0, TJ_ERR_PARSE,
     "3:7: ", "constant BLOCK is already bound"},
    {K PID "const N\n", 0, TJ_ERR_PARSE, "3:1: ", "before the first instruction"},
    {K "%0 i32 = program_id\n", 0, TJ_ERR_PARSE, "2:4: ", "expected ':'"},
    {K "%0 : = program_id\n", 0, TJ_ERR_PARSE, "2:6: ", "expected a type"},
    {K "%0 : f64 = program_id\n", 0, TJ_ERR_PARSE, "2:6: ", "unknown type 'f64'"},
    {K "%0 : ptr<f64> = param x\n", 0, TJ_ERR_PARSE, "2:10: ", "unknown element type 'f64'"},
    {K "%0 : ptr<f32 = param x\n", 0, TJ_ERR_PARSE, "2:14: ", "expected '>'"},
    {K "%0 : tile<f32 BLOCK> = arange\n", 0, TJ_ERR_PARSE, "2:15: ", "expected ','"},
    {K "%0 : tile<i32,ROWS> = arange\n", 0, TJ_ERR_PARSE, "2:15: ", "unknown constant 'ROWS'"},
    {K "%0 : i32 program_id\n", 0, TJ_ERR_PARSE, "2:10: ", "expected '='"},
    {K "%0 : i32 = frobnicate\n", 0, TJ_ERR_PARSE, "2:12: ", "unknown op 'frobnicate'"},
    {K "%0 : i32 =\n", 0, TJ_ERR_PARSE, "2:11: ", "expected an op name"},
    {K "% : i32 = program_id\n", 0, TJ_ERR_PARSE, "2:1: ", "expected a value name"},
    {K PID "%1 : i32 = add %0, %2\n", 0, TJ_ERR_PARSE, "3:20: ", "undefined value %2"},
    {K PID "%0 : i32 = program_id\n", 0, TJ_ERR_PARSE, "3:1: ", "value %0 is already defined"},
    {K PID "%1 : i32 = add %0 %0\n", 0, TJ_ERR_PARSE, "3:19: ", "expected ',' or end of line"},
    {K PID "%1 : i32 = add %0,\n", 0, TJ_ERR_PARSE, "3:19: ", "expected an operand (%name)"},
    {K PID "%1 : i32 = add %0, %0, %0, %0, %0\n", 0, TJ_ERR_PARSE, "3:32: ", "at most 4 operands"},
    {K PID "add %0, %0\n", 0, TJ_ERR_PARSE, "3:1: ", "expected '%name : type =' before add"},
    {K PID "%1 : i32 = store %0, %0, %0\n", 0, TJ_ERR_PARSE, "3:12: ", "store has no result"},
    {K PID "%1 : i32 = program_id %0\n", 0, TJ_ERR_PARSE, "3:23: ", "expected end of line"},
    {K "%0 : f32 = const abc\n", 0, TJ_ERR_PARSE, "2:18: ", "expected a number"},
    {K "%0 : f32 = const 0x10\n", 0, TJ_ERR_PARSE, "2:18: ", "expected a number"},
    {K "%0 : f32 = const 1e\n", 0, TJ_ERR_PARSE, "2:18: ", "expected a number"},
    /* Values out of their type's range: the builder's rule, status and words. */
    {K "%0 : f32 = const 1e39\n", 0, TJ_ERR_TYPE, "2:18: ", "const: 1e39 is out of range for f32"},
    {K "%0 : f32 = const -1e400\n", 0, TJ_ERR_TYPE,
     "2:18: ", "const: -1e400 is out of range for f32"},
    {K "%0 : tile<f32,BLOCK> = const 1e300\n", 0, TJ_ERR_TYPE,
     "2:30: ", "const: 1e300 is out of range for f32"},
    {K "%0 : f32 = const 3.4028236e38\n", 0, TJ_ERR_TYPE,
     "2:18: ", "const: 3.4028236e38 is out of range for f32"},
    {K "%0 : i32 = const 99999999999999999999\n", 0, TJ_ERR_TYPE,
     "2:18: ", "const: 99999999999999999999 is not a value of i32"},
    {K "%0 : i32 = const 1e-999\n", 0, TJ_ERR_TYPE,
     "2:18: ", "const: 1e-999 is not a value of i32"},
    {K "%0 : i32 = const -0.5\n", 0, TJ_ERR_TYPE, "2:18: ", "const: -0.5 is not a value of i32"},
    {K "%0 : i32 = const 3e9\n", 0, TJ_ERR_TYPE, "2:18: ", "const: 3e9 is not a value of i32"},
    {K "%0 : i32 = const 2147483648\n", 0, TJ_ERR_TYPE,
     "2:18: ", "const: 2147483648 is not a value of i32"},
    {K "%0 : i32 = const inf\n", 0, TJ_ERR_TYPE, "2:18: ", "const: inf is not a value of i32"},
    {K "%0 : i64 = const -nan\n", 0, TJ_ERR_TYPE, "2:18: ", "const: -nan is not a value of i64"},
    {K "%0 : i64 = const 9223372036854775808\n", 0, TJ_ERR_TYPE,
     "2:18: ", "const: 9223372036854775808 is not a value of i64"},
    {K "%0 : i64 = const 9007199254740993\n", 0, TJ_ERR_TYPE,
     "2:18: ", "const: 9007199254740993 is not held exactly"},
    {K "%0 : f32 = const nan:0x7f800001\n", 0, TJ_ERR_PARSE,
     "2:22: ", "0x7f800001 is not a quiet f32 NaN"},
    {K "%0 : f32 = const nan:0x12\n", 0, TJ_ERR_PARSE,
     "2:22: ", "0x00000012 is not a quiet f32 NaN"},
    {K "%0 : f32 = const -nan:0xffc00000\n", 0, TJ_ERR_PARSE,
     "2:18: ", "a NaN's sign is in its bits"},
    {K "%0 : f32 = const nan:7fc00000\n", 0, TJ_ERR_PARSE,
     "2:22: ", "expected the bits of an f32 NaN"},
    {K "%0 : f32 = const nan:0x17fc00000\n", 0, TJ_ERR_PARSE,
     "2:22: ", "expected the bits of an f32 NaN"},
    {K "%0 : f32 = const nan:\n", 0, TJ_ERR_PARSE, "2:22: ", "expected the bits of an f32 NaN"},
    {K "%0 : i32 = constexpr NOPE\n", 0, TJ_ERR_PARSE, "2:22: ", "unknown constant 'NOPE'"},
    {K "%0 : i32 = param\n", 0, TJ_ERR_PARSE, "2:17: ", "expected a parameter name"},
    {K "%0 : ptr<f32> = param p\n%1 : i32 = param q\n%2 : ptr<f32> = param p\n", 0,
     TJ_ERR_INVALID_ARGUMENT, "4:1: ", "param: parameter p is already declared"},
    {K PID "%1 : i32 = for %0, %0, %0\n", 0, TJ_ERR_PARSE,
     "4:1: ", "expected endfor (the for at 3:1"},
    {K "%0 : i32 = program_id\0\n", 32, TJ_ERR_PARSE, "2:22: ", "a NUL byte"},
    {K "%0 : i32 = program_id # \0\n", 35, TJ_ERR_PARSE, "2:25: ", "a NUL byte"},
    {K "# \0 store\n", 19, TJ_ERR_PARSE, "2:3: ", "a NUL byte"},
    {K "\xff\xfe\n", 0, TJ_ERR_PARSE, "2:1: ", "expected an op name"},
    {"kernel aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", 0, TJ_ERR_PARSE,
     "1:8: ", "longer than 63 characters"},
    /* ir_append's rules: its status, the instruction's position in front. */
    {K "%0 : i32 = const 1.5\n", 0, TJ_ERR_TYPE, "2:18: ", "const: 1.5 is not a value of i32"},
    {K "%0 : f32 = program_id\n", 0, TJ_ERR_TYPE,
     "2:1: ", "declared type f32, but the operands give i32"},
    {K "%0 : tile<f32,BLOCK> = arange\n", 0, TJ_ERR_TYPE,
     "2:1: ", "arange: result must be a tile of i32"},
    {K PID "%1 : i32 = add %0\n", 0, TJ_ERR_INVALID_ARGUMENT,
     "3:1: ", "add takes 2 operands, got 1"},
    {K PID "%1 : i32 = select %0, %0, %0\n", 0, TJ_ERR_TYPE, "3:1: ", "must be a pred"},
    {K "endfor\n", 0, TJ_ERR_VERIFY, "2:1: ", "endfor without a for"},
    {K "%0 : f32 = const 0\n%1 : f32 = iter %0\n", 0, TJ_ERR_VERIFY,
     "3:1: ", "iter must come right after for"},
    {K PID "%1 : i32 = for %0, %0, %0\n  %2 : i32 = add %0, %0\nendfor\n%3 : i32 = add %2, %2\n", 0,
     TJ_ERR_VERIFY, "6:1: ", "defined inside a loop that has ended"},
    {K PID "%1 : i32 = for %0, %0, %0\n  %2 : i32 = iter %0\n  %3 : f32 = exp %2\n", 0, TJ_ERR_TYPE,
     "5:3: ", "exp: operand 1 (%2 : i32) must be f32"},
};

START_TEST(rejects_malformed_input) {
  const Malformed *m = &malformed[_i];
  size_t len = m->len ? m->len : strlen(m->text);
  tj_program *p = NULL;
  tj_status st = text_parse_exact(m->text, len, &p);
  ck_assert_ptr_nonnull(p);
  const char *msg = tj_program_error(p);
  ck_assert_msg(st == m->status, "case %d: status %s, want %s (%s)", _i, tj_status_string(st),
                tj_status_string(m->status), msg);
  ck_assert_msg(strncmp(msg, m->where, strlen(m->where)) == 0,
                "case %d: '%s' does not start with '%s'", _i, msg, m->where);
  ck_assert_msg(strstr(msg, m->fragment), "case %d: '%s' lacks '%s'", _i, msg, m->fragment);
  tj_program_destroy(p);
}
END_TEST

/* ---- garbage ------------------------------------------------------------- */

/* A reproducible generator (splitmix64). */
typedef struct Splitmix {
  uint64_t state;
} Splitmix;

static uint64_t mix_next(Splitmix *r) {
  uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static size_t mix_below(Splitmix *r, size_t n) {
  return n ? (size_t)(mix_next(r) % n) : 0;
}

/* A growable byte string. */
typedef struct Bytes {
  char *data;
  size_t len, cap;
} Bytes;

static void bytes_reserve(Bytes *b, size_t need) {
  if (need <= b->cap) return;
  b->cap = need * 2 + 64;
  b->data = realloc(b->data, b->cap);
  ck_assert_ptr_nonnull(b->data);
}

static void bytes_set(Bytes *b, const char *s, size_t n) {
  bytes_reserve(b, n);
  memcpy(b->data, s, n);
  b->len = n;
}

/* Replaces [at, at+del) by n bytes of s (s may point into b). */
static void bytes_splice(Bytes *b, size_t at, size_t del, const char *s, size_t n) {
  char *copy = malloc(n ? n : 1);
  ck_assert_ptr_nonnull(copy);
  memcpy(copy, s, n);
  bytes_reserve(b, b->len - del + n);
  memmove(b->data + at + n, b->data + at + del, b->len - at - del);
  memcpy(b->data + at, copy, n);
  b->len = b->len - del + n;
  free(copy);
}

/* Bytes and words the grammar cares about, for insertions. */
static const char *const dictionary[] = {
    "%",
    "%0",
    "%99",
    ":",
    "=",
    ",",
    "<",
    ">",
    "#",
    "\n",
    " ",
    "\t",
    "\r",
    "tile<",
    "ptr<",
    "f32",
    "pred",
    "DTYPE",
    "BLOCK",
    "for",
    "iter",
    "yield",
    "endfor",
    "const",
    "const X = 1\n",
    "kernel",
    "-inf",
    "nan",
    "1e999",
    "-",
    ".",
    "99999999999999999999999",
    "\xff",
    "%a.b",
    "store",
    "load",
    "param",
    "constexpr BLOCK",
    "nan:0x7fc00001",
    "-nan",
    "-0",
    "1e-999",
    "1e300",
    "1.5e3",
};

/* Swaps two blank-separated tokens. */
static void swap_tokens(Splitmix *r, Bytes *b) {
  size_t starts[512], lens[512], n = 0;
  for (size_t i = 0; i < b->len && n < 512;) {
    while (i < b->len && (b->data[i] == ' ' || b->data[i] == '\n'))
      i++;
    size_t s = i;
    while (i < b->len && b->data[i] != ' ' && b->data[i] != '\n')
      i++;
    if (i > s) starts[n] = s, lens[n++] = i - s;
  }
  if (n < 2) return;
  size_t x = mix_below(r, n), y = mix_below(r, n);
  if (x == y) return;
  if (x > y) {
    size_t t = x;
    x = y;
    y = t;
  }
  char *second = malloc(lens[y]);
  ck_assert_ptr_nonnull(second);
  memcpy(second, b->data + starts[y], lens[y]);
  bytes_splice(b, starts[y], lens[y], b->data + starts[x], lens[x]);
  bytes_splice(b, starts[x], lens[x], second, lens[y]);
  free(second);
}

static void mutate(Splitmix *r, Bytes *b) {
  size_t at = mix_below(r, b->len + 1), span = mix_below(r, 16) + 1;
  if (span > b->len - at) span = b->len - at;
  switch (mix_below(r, 7)) {
  case 0:
    b->len = at;
    break; /* truncate */
  case 1:
    if (at < b->len) b->data[at] = (char)mix_next(r);
    break; /* a byte */
  case 2:
    if (at < b->len) b->data[at] ^= (char)(1u << mix_below(r, 8));
    break; /* a bit */
  case 3:
    bytes_splice(b, at, span, "", 0);
    break; /* delete */
  case 4:
    bytes_splice(b, mix_below(r, b->len + 1), 0, b->data + at, span);
    break; /* duplicate */
  case 5:
    swap_tokens(r, b);
    break;
  default: {
    const char *w = dictionary[mix_below(r, TJ_COUNTOF(dictionary))];
    bytes_splice(b, at, 0, w, strlen(w));
  }
  }
}

static void bytes_fill(Bytes *b, char ch, size_t n) {
  bytes_reserve(b, b->len + n);
  memset(b->data + b->len, ch, n);
  b->len += n;
}

static void random_bytes(Splitmix *r, Bytes *b) {
  static const char alphabet[] =
      "kernel const %0:=,<>#\n\t tile ptr f32 i32 pred for endfor 0123456789.-";
  size_t n = mix_below(r, 300);
  bool printable = mix_below(r, 2);
  bytes_reserve(b, n);
  for (size_t i = 0; i < n; i++)
    b->data[i] = printable ? alphabet[mix_below(r, sizeof alphabet - 1)] : (char)mix_next(r);
  b->len = n;
  if (printable && mix_below(r, 2)) bytes_splice(b, 0, 0, "kernel k\n", 9);
}

static size_t count_lines(const Bytes *b) {
  size_t lines = 1;
  for (size_t i = 0; i < b->len; i++)
    lines += b->data[i] == '\n';
  return lines;
}

/* Parses b; a rejection must name a line of b and a column; an acceptance
 * must round-trip. Returns whether it was accepted. */
static bool check_input(const Bytes *b) {
  tj_program *p = NULL;
  tj_status st = text_parse_exact(b->data, b->len, &p);
  ck_assert_msg(st != TJ_ERR_OUT_OF_MEMORY, "out of memory");
  ck_assert_ptr_nonnull(p);
  if (st == TJ_OK) {
    char *text = text_print_ok(p);
    tj_free(text_round_trip(text));
    tj_free(text);
  } else {
    long line, col;
    const char *msg = tj_program_error(p);
    ck_assert_msg(has_position(msg, &line, &col), "no LINE:COL in '%s' (status %s)", msg,
                  tj_status_string(st));
    ck_assert_msg((size_t)line <= count_lines(b), "line %ld past the text in '%s'", line, msg);
  }
  tj_program_destroy(p);
  return st == TJ_OK;
}

START_TEST(fuzz_never_crashes_and_always_says_where) {
  Splitmix r = {0x7e57c0de5eedull};
  TjCorpusCase *cases;
  int ncases = corpus_load(&cases);
  ck_assert_int_gt(ncases, 0);
  size_t nseeds = TJ_COUNTOF(hand_programs) + 2 + (size_t)ncases;
  const char **seeds = malloc(nseeds * sizeof *seeds);
  ck_assert_ptr_nonnull(seeds);
  seeds[0] = tj_template_softmax;
  seeds[1] = tj_template_softmax_online;
  for (size_t i = 0; i < TJ_COUNTOF(hand_programs); i++) seeds[i + 2] = hand_programs[i];
  for (int i = 0; i < ncases; i++) seeds[TJ_COUNTOF(hand_programs) + 2 + (size_t)i] = cases[i].text;
  Bytes b = {NULL, 0, 0};
  int accepted = 0, rejected = 0;
  for (int round = 0; round < 8000; round++) {
    const char *src = seeds[(size_t)round % nseeds];
    bytes_set(&b, src, strlen(src));
    for (size_t k = 0, n = 1 + mix_below(&r, 4); k < n; k++)
      mutate(&r, &b);
    check_input(&b) ? accepted++ : rejected++;
  }
  for (int round = 0; round < 2000; round++) {
    random_bytes(&r, &b);
    check_input(&b) ? accepted++ : rejected++;
  }
  free(b.data);
  free(seeds);
  corpus_free(cases, ncases);
  ck_assert_int_ge(accepted, 100); /* the mutations are not all fatal */
  ck_assert_int_ge(rejected, 5000);
}
END_TEST

/* ---- the fixed corpus ------------------------------------------------------ */

/* Each file gives the outcome it states; accepted ones round-trip, and two
 * that print differently never share a key. */
START_TEST(corpus_cases_give_their_outcome) {
  TjCorpusCase *cases;
  int n = corpus_load(&cases);
  ck_assert_int_ge(n, 19);
  char **printed = calloc((size_t)n, sizeof *printed), **keys = calloc((size_t)n, sizeof *keys);
  ck_assert(printed && keys);
  for (int i = 0; i < n; i++) {
    const TjCorpusCase *c = &cases[i];
    tj_program *p = NULL;
    tj_status st = text_parse_exact(c->text, c->len, &p);
    const char *msg = p ? tj_program_error(p) : "(no program)";
    ck_assert_msg(strcmp(tj_status_string(st), c->status) == 0, "%s: %s (%s), want %s", c->name,
                  tj_status_string(st), msg, c->status);
    ck_assert_msg(strstr(msg, c->fragment), "%s: '%s' lacks '%s'", c->name, msg, c->fragment);
    if (st == TJ_OK) {
      printed[i] = text_round_trip(c->text);
      tj_spec *s = text_specialize_all(p, TJ_DTYPE_F32);
      keys[i] = tj_strdup(tj_spec_key(s));
      tj_spec_destroy(s);
    }
    tj_program_destroy(p);
  }
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (keys[i] && keys[j] && strcmp(printed[i], printed[j]) != 0)
        ck_assert_msg(strcmp(keys[i], keys[j]) != 0, "%s and %s share the key %s", cases[i].name,
                      cases[j].name, keys[i]);
  for (int i = 0; i < n; i++) {
    tj_free(printed[i]);
    tj_free(keys[i]);
  }
  free(printed);
  free(keys);
  corpus_free(cases, n);
}
END_TEST

/* Extremes: deep loops, a huge line, long names, NULs, huge numbers. */
START_TEST(garbage_extremes) {
  Bytes b = {NULL, 0, 0};
  char line[96];
  enum { DEPTH = 1000 };
  bytes_set(&b, "kernel deep\n%z : i32 = const 0\n", 31);
  for (int i = 0; i < DEPTH; i++) {
    int n = snprintf(line, sizeof line, "%%l%d : i32 = for %%z, %%z, %%z\n", i);
    bytes_splice(&b, b.len, 0, line, (size_t)n);
  }
  ck_assert(!check_input(&b)); /* no endfor */
  for (int i = 0; i < DEPTH; i++)
    bytes_splice(&b, b.len, 0, "endfor\n", 7);
  ck_assert(check_input(&b));
  /* A megabyte of blanks, then a stray token. */
  bytes_set(&b, "kernel k\n%a : i32 = program_id", 30);
  bytes_fill(&b, ' ', 1 << 19);
  bytes_fill(&b, '\t', 1 << 19);
  bytes_splice(&b, b.len, 0, "x", 1);
  tj_program *p = NULL;
  ck_assert_int_eq(text_parse_exact(b.data, b.len, &p), TJ_ERR_PARSE);
  ck_assert_str_eq(tj_program_error(p), "2:1048598: expected end of line");
  tj_program_destroy(p);
  /* Long value names, numbers and NUL bytes. */
  bytes_set(&b, "kernel k\n%", 10);
  bytes_fill(&b, 'v', 100000);
  bytes_splice(&b, b.len, 0, " : f32 = const 1", 16);
  bytes_fill(&b, '0', 100000);
  ck_assert(!check_input(&b));
  bytes_set(&b, "kernel k\n\0\0\0", 12);
  ck_assert(!check_input(&b));
  free(b.data);
}
END_TEST

/* tj_format through va_list, for the cases buf_printf cannot show. */
static size_t format_to(char *out, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t n = tj_format(out, size, fmt, ap);
  va_end(ap);
  return n;
}

/* The text buffer's printf (util.c): its one-pass path for %s %d %u %lld
 * and %% writes what snprintf writes, at the extremes too, and anything
 * else, or text that does not fit, goes through vsnprintf unchanged. */
START_TEST(buffer_printf_matches_snprintf) {
  static char long_text[3000];
  memset(long_text, 'x', sizeof long_text - 1);
  char want[4096], got[64];
  TjBuf b;
  buf_init(&b);
#define BOTH(...)                                                                                  \
  do {                                                                                             \
    size_t at = b.len;                                                                             \
    snprintf(want, sizeof want, __VA_ARGS__);                                                      \
    buf_printf(&b, __VA_ARGS__);                                                                   \
    ck_assert_str_eq(b.data + at, want);                                                           \
  } while (0)
  BOTH("%d|%d|%d|%d", 0, -1, INT_MIN, INT_MAX);
  BOTH("%lld|%lld|%lld", LLONG_MIN, LLONG_MAX, -7LL);
  BOTH("%u|%u", 0u, UINT_MAX);
  BOTH("%%%s%%d %s", "a", "");
  BOTH("%s", long_text);
  BOTH("%5d|%x|%.3f|%08lx|%*s|", 42, 255u, 1.5, 0xABCUL, 3, "z");
  for (int i = 0; i < 200; i++) BOTH("%%r%d, [%s+%lld];", i, "%rd7", (long long)i * -16);
#undef BOTH
  ck_assert(!b.oom);
  buf_free(&b);
  ck_assert_uint_eq(format_to(got, sizeof got, "%s", (const char *)NULL), (size_t)-1);
  ck_assert_uint_eq(format_to(got, sizeof got, "%x", 1u), (size_t)-1);
  ck_assert_uint_eq(format_to(got, 16, "%d", 1), (size_t)-1);           /* too small to try */
  ck_assert_uint_eq(format_to(got, 24, "%s", "abcdefghijklmnopqrstuvw"), 23);
  ck_assert_uint_eq(format_to(got, 24, "%s", "abcdefghijklmnopqrstuvwx"), (size_t)-1);
  ck_assert_uint_eq(format_to(got, 24, "a%lld", LLONG_MIN), 21);
  ck_assert_uint_eq(format_to(got, 24, "abc%lld", 1LL), (size_t)-1); /* 21 kept for a number */
  ck_assert_uint_eq(format_to(got, sizeof got, "a%lld", LLONG_MIN), 21);
  ck_assert_str_eq(got, "a-9223372036854775808");
}
END_TEST

static Suite *text_suite(void) {
  Suite *s = suite_create("text");
  TCase *trip = tcase_create("round_trip");
  tcase_add_test(trip, round_trips_templates);
  tcase_add_test(trip, round_trips_hand_written);
  tcase_add_test(trip, canonical_texts_come_back_byte_for_byte);
  tcase_add_test(trip, round_trips_specialized);
  tcase_add_test(trip, hand_written_programs_cover_every_op_and_type);
  tcase_add_test(trip, prints_builder_programs);
  tcase_add_test(trip, prints_single_instructions);
  tcase_add_test(trip, buffer_printf_matches_snprintf);
  suite_add_tcase(s, trip);
  TCase *parse = tcase_create("parse");
  tcase_add_test(parse, parses_constants_and_names);
  tcase_add_test(parse, parses_immediates);
  tcase_add_test(parse, errors_leave_the_program_and_message);
  tcase_add_loop_test(parse, rejects_malformed_input, 0, (int)TJ_COUNTOF(malformed));
  suite_add_tcase(s, parse);
  TCase *fuzz = tcase_create("fuzz");
  tcase_set_timeout(fuzz, 60);
  tcase_add_test(fuzz, fuzz_never_crashes_and_always_says_where);
  tcase_add_test(fuzz, garbage_extremes);
  tcase_add_test(fuzz, corpus_cases_give_their_outcome);
  suite_add_tcase(s, fuzz);
  return s;
}

int main(void) {
  return test_run_suite(text_suite());
}
