/*
 * softmax.c — the softmax programs. The two templates in templates/ are IR
 * text embedded into the library at build time (cmake/embed.cmake), so
 * nothing is read from disk; this file parses the one a row width calls for
 * and gives the default specialization options for it:
 *
 *   softmax.tj         the whole row in one tile (BLOCK >= n): load with
 *                      other = -inf, max, exp(x - max), sum, one reciprocal,
 *                      multiply, store;
 *   softmax_online.tj  any n in chunks of BLOCK: a first loop keeps a running
 *                      (max, sum) pair, rescaling the sum when the max grows,
 *                      and a second loop normalizes and stores (x is read twice).
 *
 * TJ_SOFTMAX_AUTO takes the single tile while n <= TJ_SOFTMAX_MAX_TILE.
 */
#include "ir/ir.h"

#include <string.h>

tj_softmax_template tj_softmax_pick(int64_t n) {
  return n <= TJ_SOFTMAX_MAX_TILE ? TJ_SOFTMAX_SINGLE : TJ_SOFTMAX_ONLINE;
}

/* AUTO resolved for n; -1 for an unknown template. */
static int resolve(tj_softmax_template which, int64_t n) {
  switch (which) {
  case TJ_SOFTMAX_AUTO: return (int)tj_softmax_pick(n);
  case TJ_SOFTMAX_SINGLE:
  case TJ_SOFTMAX_ONLINE: return (int)which;
  }
  return -1;
}

tj_status tj_softmax_program(tj_softmax_template which, int64_t n, tj_program **out) {
  if (!out) return TJ_ERR_INVALID_ARGUMENT;
  *out = NULL;
  int resolved = resolve(which, n);
  if (n < 0 || resolved < 0) return TJ_ERR_INVALID_ARGUMENT;
  const char *text =
      resolved == TJ_SOFTMAX_SINGLE ? tj_template_softmax : tj_template_softmax_online;
  return tj_program_parse(text, strlen(text), out);
}

tj_status tj_softmax_spec_options(tj_softmax_template which, tj_dtype dtype, int64_t n,
                                  tj_spec_options *out) {
  if (!out) return TJ_ERR_INVALID_ARGUMENT;
  int resolved = resolve(which, n);
  if (n < 0 || resolved < 0 || (unsigned)dtype >= TJ_DTYPE_COUNT) return TJ_ERR_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  out->n = n;
  out->dtype = dtype;
  out->block = tj_next_pow2(n);
  if (resolved == TJ_SOFTMAX_ONLINE && out->block > TJ_SOFTMAX_CHUNK) out->block = TJ_SOFTMAX_CHUNK;
  return TJ_OK;
}
