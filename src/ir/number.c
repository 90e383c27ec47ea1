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
 *
 * Also here: the exact integer a decimal literal stands for ("1.5e3" is
 * 1500; "1e-999" is no integer), and the strict decimal integers of the
 * tools' command lines.
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

/* ---- integers ---------------------------------------------------------------- */

static bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

/* digits (at most 19 of them) times 10^zeros, negated when neg; false past int64. */
static bool to_int64(const char *digits, size_t n, long zeros, bool neg, int64_t *out) {
  uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, v = 0;
  for (long i = 0; i < (long)n + zeros; i++) {
    uint64_t d = i < (long)n ? (uint64_t)(digits[i] - '0') : 0;
    if (v > (limit - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
  return true;
}

/* The exponent after 'e', saturated far beyond any literal's digits. */
static long read_exponent(const char *s, size_t len) {
  size_t i = 0;
  bool neg = i < len && s[i] == '-';
  if (i < len && (s[i] == '-' || s[i] == '+')) i++;
  long e = 0;
  for (; i < len && is_digit(s[i]); i++)
    if (e < 1000000) e = e * 10 + (s[i] - '0');
  return neg ? -e : e;
}

IrDecimal ir_decimal_integer(const char *s, size_t len, bool neg, int64_t *out) {
  char digits[LITERAL_MAX];
  size_t n = 0, i = 0;
  long point = 0; /* where the decimal point is, counted in digits */
  for (; i < len && is_digit(s[i]); i++) {
    if (n == 0 && s[i] == '0') continue; /* leading zeros */
    if (n < sizeof digits) digits[n++] = s[i];
    point++;
  }
  if (i < len && s[i] == '.')
    for (i++; i < len && is_digit(s[i]); i++) {
      if (n == 0 && s[i] == '0') {
        point--;
        continue;
      }
      if (n < sizeof digits) digits[n++] = s[i];
    }
  if (i < len && (s[i] == 'e' || s[i] == 'E')) point += read_exponent(s + i + 1, len - i - 1);
  while (n > 0 && digits[n - 1] == '0') n--; /* trailing zeros change nothing */
  *out = 0;
  if (n == 0) return DECIMAL_INTEGER; /* zero, whatever the exponent */
  if (point < (long)n) return DECIMAL_FRACTION;
  if (point > 19) return DECIMAL_TOO_BIG; /* 10^19 > 2^63 */
  return to_int64(digits, n, point - (long)n, neg, out) ? DECIMAL_INTEGER : DECIMAL_TOO_BIG;
}

bool tj_parse_decimal(const char *text, int64_t lo, int64_t hi, int64_t *out) {
  if (!text) return false;
  bool neg = text[0] == '-';
  const char *digits = text + neg;
  size_t n = strlen(digits);
  for (size_t i = 0; i < n; i++)
    if (!is_digit(digits[i])) return false;
  while (n > 1 && digits[0] == '0') digits++, n--; /* 010 is ten */
  int64_t v;
  if (n == 0 || n > 19 || !to_int64(digits, n, 0, neg, &v) || v < lo || v > hi) return false;
  *out = v;
  return true;
}
