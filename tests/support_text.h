/*
 * support_text.h — helpers for the suites that read and print the IR's text
 * form (support_text.c): parsing an exact span, printing, round trips and
 * specializing whatever constants a text leaves open. Each asserts (Check)
 * on failure, with the text and the library's message.
 */
#ifndef TJ_TEST_SUPPORT_TEXT_H
#define TJ_TEST_SUPPORT_TEXT_H

#include "tilejit.h"

#include <stddef.h>

/* Parses exactly len bytes, copied into an allocation of that size so that
 * ASan reports any read past the end. */
tj_status text_parse_exact(const char *text, size_t len, tj_program **p);
/* Parses a NUL-terminated text that must parse. */
tj_program *text_parse_ok(const char *text);
/* The printed text of p (release with tj_free). */
char *text_print_ok(tj_program *p);
/* print(parse(text)), checked to be a fixed point of parse-then-print. */
char *text_round_trip(const char *text);
/* Binds every unbound declared constant to 64 and specializes for n = 1000. */
tj_spec *text_specialize_all(tj_program *p, tj_dtype dtype);

#endif /* TJ_TEST_SUPPORT_TEXT_H */
