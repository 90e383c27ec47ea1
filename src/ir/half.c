/*
 * half.c — conversions between f32 and the two 16-bit storage types, f16
 * (IEEE binary16) and bf16 (the top half of an f32), with the IR's exact
 * rounding: round-to-nearest-even, overflow to inf, gradual underflow into
 * f16's subnormals, and NaN kept NaN (quieted, sign and top payload kept).
 *
 * These are the semantics of `cast` to and from f16/bf16 in the interpreter,
 * and what the code generators' cvt.rn instructions do. Widening is exact.
 * They work on bit patterns only, so they do not depend on the host's
 * rounding mode or on a compiler's half-precision support.
 */
#include "ir/ir.h"

#include <string.h>

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* f16 subnormals: |f| in [2^-25, 2^-14) becomes a multiple of 2^-24, rounded
 * to nearest even in integer arithmetic on f's significand. */
static uint16_t f16_subnormal(uint32_t a) {
  if (a < 0x33000000u) return 0; /* below 2^-25 (2^-25 itself ties to 0) */
  uint32_t exponent = a >> 23;   /* 102 .. 112 */
  uint32_t significand = (a & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126 - exponent; /* |f| / 2^-24 = significand >> shift */
  uint32_t q = significand >> shift;
  uint32_t rest = significand & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (q & 1u))) q++;
  return (uint16_t)q; /* may carry into the smallest normal, which is right */
}

uint16_t tj_f32_to_f16(float f) {
  uint32_t x = float_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);         /* >= 65520 rounds to inf */
  if (a < 0x38800000u) return (uint16_t)(sign | f16_subnormal(a)); /* below 2^-14 */
  /* Normal: round the 23-bit significand to 10 bits (ties to even), then
   * rebias the exponent from 127 to 15. A carry moves into the exponent. */
  uint32_t rounded = a + 0xfffu + ((a >> 13) & 1u);
  return (uint16_t)(sign | ((rounded - (112u << 23)) >> 13));
}

float tj_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu, significand = h & 0x3ffu;
  if (exponent == 0x1f) return bits_float(sign | 0x7f800000u | (significand << 13));
  if (exponent != 0) return bits_float(sign | ((exponent + 112u) << 23) | (significand << 13));
  /* Zero or subnormal: significand * 2^-24, exact in f32. */
  float v = (float)significand * 0x1p-24f;
  return sign ? -v : v;
}

uint16_t tj_f32_to_bf16(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u); /* quiet NaN */
  /* Ties to even on the low 16 bits; a carry past FLT_MAX gives inf. */
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

float tj_bf16_to_f32(uint16_t h) { return bits_float((uint32_t)h << 16); }
