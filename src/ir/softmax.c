/*
 * softmax.c — the softmax programs. The two templates in templates/ are IR
 * text embedded into the library at build time (cmake/embed.cmake), so
 * nothing is read from disk; this file parses the one asked for:
 *
 *   softmax.tj         the whole row in one tile (BLOCK >= n): load with
 *                      other = -inf, max, exp(x - max), sum, one reciprocal,
 *                      multiply, store. The code generator spreads it over a
 *                      lane group, a CTA, a cluster or CTAs of the grid, and
 *                      streams a tile too wide for the registers;
 *   softmax_online.tj  any n in chunks of BLOCK: a first loop keeps a running
 *                      (max, sum) pair, rescaling the sum when the max grows,
 *                      and a second loop normalizes and stores (x is read twice).
 *
 * log_softmax.tj and log_softmax_online.tj are the same two with
 * y = (x - max) - log(sum) for the output (tj_row_program, TJ_ROW_LOG_SOFTMAX);
 * softmax_backward.tj and softmax_backward_online.tj take y and dy and give
 * dx = y * (dy - sum(dy * y)) (TJ_ROW_SOFTMAX_BACKWARD), the online one
 * reading y and dy twice; masked_softmax.tj and masked_softmax_online.tj
 * scale x and keep the columns up to the row's query index plus an offset
 * (TJ_ROW_MASKED_SOFTMAX), attention's weights.
 * Which one runs, and how it is specialized, is the strategy's business
 * (runtime/softmax_plan.c), the same for every op.
 */
#include "ir/ir.h"

#include <string.h>

tj_status tj_row_program(tj_row_op op, tj_softmax_template which, int64_t n, tj_program **out) {
  static const char *const texts[TJ_ROW_OP_COUNT][2] = {
      {tj_template_softmax, tj_template_softmax_online},
      {tj_template_log_softmax, tj_template_log_softmax_online},
      {tj_template_softmax_backward, tj_template_softmax_backward_online},
      {tj_template_masked_softmax, tj_template_masked_softmax_online}};
  if (!out) return TJ_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (n < 0 || (unsigned)which > TJ_SOFTMAX_ONLINE || (unsigned)op >= TJ_ROW_OP_COUNT)
    return TJ_ERR_INVALID_ARGUMENT;
  if (which == TJ_SOFTMAX_AUTO) which = n <= IR_MAX_TILE ? TJ_SOFTMAX_SINGLE : TJ_SOFTMAX_ONLINE;
  const char *text = texts[op][which == TJ_SOFTMAX_ONLINE];
  return tj_program_parse(text, strlen(text), out);
}

tj_status tj_softmax_program(tj_softmax_template which, int64_t n, tj_program **out) {
  return tj_row_program(TJ_ROW_SOFTMAX, which, n, out);
}
