/*
 * test_locale.c — numbers do not depend on the host's C locale. A host
 * program may call setlocale(LC_ALL, "") in a locale whose decimal point is
 * a comma; printf("%g") then writes "0,5" and strtod refuses "0.5". Under
 * de_DE.UTF-8 every stage must give what it gives in the "C" locale, byte
 * for byte: parse, print, the specialization key and its hash, the PTX, the
 * CUDA C, NVRTC's PTX (where libnvrtc loads) and the interpreter's results;
 * and every file of the fuzz corpus (tests/corpus) parses to the same
 * outcome, message and printed text.
 *
 * The locale must be installed (Debian: localedef -i de_DE -f UTF-8
 * de_DE.UTF-8; CI does it). Without it the suite says so and is skipped
 * (exit 77), unless CI or TJ_REQUIRE_LOCALE=1 is set: then it fails.
 */
#include "ir/ir.h"

#include "support.h"
#include "support_corpus.h"

#include <check.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMMA_LOCALE "de_DE.UTF-8"

/* y = x * 0.5 + 0.00125 where n holds, 0.5 for the masked-off x. */
static const char prog_half[] = "kernel half\n"
                                "%x : ptr<f32> = param x\n"
                                "%y : ptr<f32> = param y\n"
                                "%n : i32 = param n\n"
                                "%i : tile<i32,BLOCK> = arange\n"
                                "%m : tile<pred,BLOCK> = lt %i, %n\n"
                                "%z : f32 = const 0.5\n"
                                "%v : tile<f32,BLOCK> = load %x, %i, %m, %z\n"
                                "%h : tile<f32,BLOCK> = const 0.5\n"
                                "%w : tile<f32,BLOCK> = mul %v, %h\n"
                                "%t : f32 = const 1.25e-3\n"
                                "%u : tile<f32,BLOCK> = add %w, %t\n"
                                "store %y, %i, %u, %m\n";

/* Everything the pipeline makes of one text. */
typedef struct Outputs {
  char *text; /* print(parse(source)) */
  char *key;
  uint64_t hash;
  char *spec_text;
  char *ptx;
  char *cuda;
  char *nvrtc_ptx; /* NULL without libnvrtc */
} Outputs;

static void use_locale(const char *name) {
  ck_assert_msg(setlocale(LC_ALL, name) != NULL, "setlocale(%s) failed", name);
}

static void run_pipeline(const char *source, Outputs *o) {
  memset(o, 0, sizeof *o);
  tj_program *p = NULL;
  tj_status st = tj_program_parse(source, strlen(source), &p);
  ck_assert_msg(st == TJ_OK, "parse: %s", tj_program_error(p));
  ck_assert_int_eq(tj_program_print(p, &o->text), TJ_OK);
  tj_spec_options so = {.n = 100, .dtype = TJ_DTYPE_F32};
  tj_spec *s = NULL;
  ck_assert_msg(tj_specialize(p, &so, &s) == TJ_OK, "specialize: %s", tj_program_error(p));
  o->key = tj_strdup(tj_spec_key(s));
  o->hash = tj_spec_hash(s);
  ck_assert_int_eq(tj_spec_print(s, &o->spec_text), TJ_OK);
  ck_assert_msg(tj_emit_ptx(s, NULL, &o->ptx, NULL) == TJ_OK, "%s", tj_spec_error(s));
  ck_assert_msg(tj_emit_cuda(s, NULL, &o->cuda, NULL) == TJ_OK, "%s", tj_spec_error(s));
  int version;
  if (tj_nvrtc_version(&version) == TJ_OK)
    ck_assert_msg(tj_nvrtc_ptx(s, NULL, &o->nvrtc_ptx, NULL) == TJ_OK, "%s", tj_spec_error(s));
  tj_spec_destroy(s);
  tj_program_destroy(p);
}

static void free_outputs(Outputs *o) {
  tj_free(o->text);
  tj_free(o->key);
  tj_free(o->spec_text);
  tj_free(o->ptx);
  tj_free(o->cuda);
  tj_free(o->nvrtc_ptx);
}

/* A '.' in the text, never a ','. */
static void assert_point(const char *text, const char *want) {
  ck_assert_msg(strstr(text, want) != NULL, "'%s' is missing from:\n%s", want, text);
}

/* ---- the whole pipeline ------------------------------------------------ */

START_TEST(pipeline_is_the_same_in_a_comma_locale) {
  Outputs c, de;
  use_locale("C");
  run_pipeline(prog_half, &c);
  use_locale(COMMA_LOCALE);
  ck_assert_str_eq(localeconv()->decimal_point, ","); /* the test means something */
  run_pipeline(prog_half, &de);
  ck_assert_str_eq(de.text, c.text);
  assert_point(de.text, "%7 : tile<f32,BLOCK> = const 0.5\n");
  assert_point(de.text, "%9 : f32 = const 0.0012499999720603228\n");
  ck_assert_str_eq(de.key, c.key);
  ck_assert_uint_eq(de.hash, c.hash);
  ck_assert_str_eq(de.spec_text, c.spec_text);
  ck_assert_str_eq(de.ptx, c.ptx);
  assert_point(de.ptx, "0f3F000000"); /* 0.5 */
  ck_assert_str_eq(de.cuda, c.cuda);
  assert_point(de.cuda, "0.5f");
  ck_assert_ptr_null(strstr(de.cuda, "0,5"));
  if (c.nvrtc_ptx) {
    ck_assert_str_eq(de.nvrtc_ptx, c.nvrtc_ptx);
    assert_point(de.nvrtc_ptx, "0f3F000000");
  } else {
    fprintf(stderr, "test_locale: no libnvrtc, NVRTC's PTX not compared\n");
  }
  free_outputs(&c);
  free_outputs(&de);
}
END_TEST

/* The interpreter computes with 0.5, not 0 or 5. */
START_TEST(interpreter_multiplies_by_one_half) {
  use_locale(COMMA_LOCALE);
  tj_program *p = NULL;
  ck_assert_int_eq(tj_program_parse(prog_half, strlen(prog_half), &p), TJ_OK);
  tj_spec_options so = {.n = 8, .dtype = TJ_DTYPE_F32};
  tj_spec *s = NULL;
  ck_assert_int_eq(tj_specialize(p, &so, &s), TJ_OK);
  float x[8], y[8];
  for (int i = 0; i < 8; i++) x[i] = (float)(i * 4 - 10);
  tj_arg args[3] = {{TJ_ARG_PTR, {.ptr = x}, sizeof x},
                    {TJ_ARG_PTR, {.ptr = y}, sizeof y},
                    {TJ_ARG_INT, {.i = 8}, 0}};
  ck_assert_msg(tj_interpret(s, args, 3, 1) == TJ_OK, "%s", tj_spec_error(s));
  for (int i = 0; i < 8; i++) ck_assert_float_eq(y[i], x[i] * 0.5f + 1.25e-3f);
  tj_spec_destroy(s);
  tj_program_destroy(p);
}
END_TEST

/* Built constants print with a '.', and the text reads back; a ',' is no
 * decimal point in the text form, whatever the locale. */
START_TEST(builder_and_parser_ignore_the_locale) {
  use_locale(COMMA_LOCALE);
  tj_program *p = NULL;
  tj_value v;
  ck_assert_int_eq(tj_program_create("built", &p), TJ_OK);
  ck_assert_int_eq(tj_build_const(p, tj_scalar_type(TJ_F32), 0.5, &v), TJ_OK);
  ck_assert_int_eq(tj_build_const(p, tj_scalar_type(TJ_F32), -2.75e-20, &v), TJ_OK);
  char *text = NULL;
  ck_assert_int_eq(tj_program_print(p, &text), TJ_OK);
  ck_assert_str_eq(text, "kernel built\n"
                         "%0 : f32 = const 0.5\n"
                         "%1 : f32 = const -2.7500000742889004e-20\n");
  tj_program *q = NULL;
  ck_assert_msg(tj_program_parse(text, strlen(text), &q) == TJ_OK, "%s", tj_program_error(q));
  ck_assert(q->insts[1].fimm == p->insts[1].fimm);
  tj_program_destroy(q);
  tj_free(text);
  tj_program_destroy(p);
  const char comma[] = "kernel k\n%0 : f32 = const 0,5\n";
  ck_assert_int_eq(tj_program_parse(comma, strlen(comma), &q), TJ_ERR_PARSE);
  ck_assert_str_eq(tj_program_error(q), "2:19: expected end of line");
  tj_program_destroy(q);
}
END_TEST

START_TEST(number_helpers_ignore_the_locale) {
  use_locale(COMMA_LOCALE);
  char text[64];
  tj_format_double(text, sizeof text, 0.1);
  ck_assert_str_eq(text, "0.1");
  tj_format_g(text, sizeof text, 9, 1.5);
  ck_assert_str_eq(text, "1.5");
  double v = 0;
  ck_assert(tj_parse_double("2.5e-1", 6, &v));
  ck_assert(v == 0.25);
  ck_assert(!tj_parse_double("2,5", 3, &v));
  ck_assert_str_eq(localeconv()->decimal_point, ","); /* the host's locale is left alone */
}
END_TEST

/* The outcome of parsing one corpus case: status, message, printed text. */
static char *corpus_outcome(const TjCorpusCase *c) {
  tj_program *p = NULL;
  tj_status st = tj_program_parse(c->text, c->len, &p);
  char *text = NULL;
  if (st == TJ_OK) ck_assert_int_eq(tj_program_print(p, &text), TJ_OK);
  size_t size = 256 + strlen(tj_program_error(p)) + (text ? strlen(text) : 0);
  char *outcome = malloc(size);
  ck_assert_ptr_nonnull(outcome);
  snprintf(outcome, size, "%s | %s | %s", tj_status_string(st), tj_program_error(p),
           text ? text : "");
  tj_free(text);
  tj_program_destroy(p);
  return outcome;
}

START_TEST(corpus_is_the_same_in_a_comma_locale) {
  TjCorpusCase *cases;
  int n = corpus_load(&cases);
  ck_assert_int_gt(n, 0);
  for (int i = 0; i < n; i++) {
    use_locale("C");
    char *c = corpus_outcome(&cases[i]);
    use_locale(COMMA_LOCALE);
    char *de = corpus_outcome(&cases[i]);
    ck_assert_msg(strcmp(c, de) == 0, "%s:\nC: %s\n" COMMA_LOCALE ": %s", cases[i].name, c, de);
    free(c);
    free(de);
  }
  corpus_free(cases, n);
}
END_TEST

static Suite *locale_suite(void) {
  Suite *s = suite_create("locale");
  TCase *c = tcase_create("comma");
  tcase_set_timeout(c, 60); /* NVRTC compiles twice */
  tcase_add_test(c, pipeline_is_the_same_in_a_comma_locale);
  tcase_add_test(c, interpreter_multiplies_by_one_half);
  tcase_add_test(c, builder_and_parser_ignore_the_locale);
  tcase_add_test(c, number_helpers_ignore_the_locale);
  tcase_add_test(c, corpus_is_the_same_in_a_comma_locale);
  suite_add_tcase(s, c);
  return s;
}

/* CI=anything but "" / "0" / "false", or TJ_REQUIRE_LOCALE=1. */
static bool locale_required(void) {
  const char *ci = getenv("CI"), *req = getenv("TJ_REQUIRE_LOCALE");
  bool in_ci = ci && *ci && strcmp(ci, "0") != 0 && strcmp(ci, "false") != 0;
  return in_ci || (req && strcmp(req, "1") == 0);
}

int main(void) {
  if (!setlocale(LC_ALL, COMMA_LOCALE)) {
    bool required = locale_required();
    fprintf(stderr,
            "test_locale: the locale " COMMA_LOCALE " is not installed "
            "(localedef -i de_DE -f UTF-8 " COMMA_LOCALE "): %s\n",
            required ? "failing, since CI or TJ_REQUIRE_LOCALE=1 requires it" : "skipped");
    return required ? 1 : 77;
  }
  setlocale(LC_ALL, "C");
  return test_run_suite(locale_suite());
}
