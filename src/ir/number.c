/*
 * number.c — numbers as text, the same in every locale. The IR's text form,
 * the specialization key, the CUDA C lowering and the tools write and read
 * numbers here, never through a bare printf("%g") or strtod: those follow
 * the C locale of the process, and after a host program calls
 * setlocale(LC_ALL, "") in a comma-decimal locale (de_DE.UTF-8) they write
 * "0,5" and refuse "0.5".
 *
 * Each call switches the calling thread to the "C" locale with uselocale
 * (POSIX 2008) around its snprintf or strtod and switches back; uselocale
 * changes only the calling thread, so this is safe while other threads run.
 * The library never calls setlocale.
 */
#include "ir/ir.h"

#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LITERAL_MAX 128 /* the longest literal tj_parse_double reads */

/* ---- the C locale, per call ------------------------------------------------ */

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

/* glibc's "C" locale object is static: newlocale allocates nothing for it. */
static void make_c_locale(void) { c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

/* Switches the calling thread to the C locale; returns what to restore. */
static locale_t enter_c_locale(void) {
  pthread_once(&c_locale_once, make_c_locale);
  return c_locale ? uselocale(c_locale) : (locale_t)0;
}

static void leave_c_locale(locale_t previous) {
  if (previous) uselocale(previous);
}

/* ---- formatting -------------------------------------------------------------- */

void tj_format_g(char *out, size_t size, int digits, double v) {
  locale_t previous = enter_c_locale();
  snprintf(out, size, "%.*g", digits, v);
  leave_c_locale(previous);
}

void tj_format_double(char *out, size_t size, double v) {
  if (isnan(v)) {
    snprintf(out, size, signbit(v) ? "-nan" : "nan");
    return;
  }
  if (isinf(v)) {
    snprintf(out, size, v < 0 ? "-inf" : "inf");
    return;
  }
  /* The shortest %.Ng that reads back as the same double; -0 stays "-0". */
  locale_t previous = enter_c_locale();
  for (int digits = 1; digits <= 17; digits++) {
    snprintf(out, size, "%.*g", digits, v);
    if (strtod(out, NULL) == v) break;
  }
  leave_c_locale(previous);
}

/* ---- reading ----------------------------------------------------------------- */

bool tj_parse_double(const char *s, size_t len, double *out) {
  char text[LITERAL_MAX + 1], *end;
  if (len == 0 || len > LITERAL_MAX) return false;
  memcpy(text, s, len);
  text[len] = '\0';
  locale_t previous = enter_c_locale();
  *out = strtod(text, &end);
  leave_c_locale(previous);
  return end == text + len;
}
