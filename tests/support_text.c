/*
 * support_text.c — the text-form helpers of support_text.h.
 */
#include "support_text.h"

#include "ir/ir.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* Parses exactly len bytes, copied into an allocation of that size so that
 * ASan reports any read past the end. */
tj_status text_parse_exact(const char *text, size_t len, tj_program **p) {
  char *copy = malloc(len ? len : 1);
  ck_assert_ptr_nonnull(copy);
  if (len) memcpy(copy, text, len);
  tj_status st = tj_program_parse(copy, len, p);
  free(copy);
  return st;
}

tj_program *text_parse_ok(const char *text) {
  tj_program *p = NULL;
  tj_status st = text_parse_exact(text, strlen(text), &p);
  ck_assert_msg(st == TJ_OK, "parse: %s: %s\n--- text:\n%s", tj_status_string(st),
                tj_program_error(p), text);
  return p;
}

char *text_print_ok(tj_program *p) {
  char *text = NULL;
  ck_assert_int_eq(tj_program_print(p, &text), TJ_OK);
  ck_assert_ptr_nonnull(text);
  return text;
}

/* print(parse(text)), checked to be a fixed point of parse-then-print. */
char *text_round_trip(const char *text) {
  tj_program *p = text_parse_ok(text);
  char *first = text_print_ok(p);
  char *again = text_print_ok(p);
  ck_assert_str_eq(first, again); /* printing is deterministic */
  tj_program_destroy(p);
  p = text_parse_ok(first);
  char *second = text_print_ok(p);
  ck_assert_msg(strcmp(first, second) == 0, "round trip differs:\n%s\n---\n%s", first, second);
  tj_program_destroy(p);
  tj_free(again);
  tj_free(second);
  return first;
}

/* Binds every unbound declared constant to 64 and specializes. */
tj_spec *text_specialize_all(tj_program *p, tj_dtype dtype) {
  tj_binding bindings[16];
  int count = 0;
  for (int i = TJ_CONST_BUILTIN_COUNT; i < p->nconsts && count < 16; i++)
    if (!p->consts[i].bound) bindings[count++] = (tj_binding){p->consts[i].name, 64};
  tj_spec_options o = {.n = 1000, .dtype = dtype, .bindings = bindings, .binding_count = count};
  tj_spec *s = NULL;
  ck_assert_msg(tj_specialize(p, &o, &s) == TJ_OK, "specialize: %s", tj_program_error(p));
  return s;
}
