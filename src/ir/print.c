/*
 * print.c — the canonical text form of a program (the parser, parse.c, reads
 * it back). The output is a pure function of the program, so printing twice
 * gives the same bytes and print(parse(print(p))) == print(p).
 *
 *   kernel softmax                  the program's name
 *   const CHUNK                     declared constants, with "= VALUE" when
 *   const BLOCK = 1024              bound; built-ins only when bound
 *   %0 : ptr<DTYPE> = param y       one instruction per line, values named
 *   %3 : f32 = const -inf           by index, immediates after the op name
 *   store %0, %1, %2                ops without a result start with the op
 *   %9 : i32 = for %4, %5, %6       loop bodies (iters, body, yields) are
 *     %10 : f32 = iter %3           indented two spaces per open loop, up
 *   endfor                          to 16 loops deep (32 spaces)
 *
 * The indentation stops growing at INDENT_MAX levels so that the text stays
 * linear in the program's size (100000 nested loops would otherwise take
 * gigabytes); the parser ignores indentation, so round trips are exact.
 *
 * Constants keep every bit: integers print as integers; f32 values as the
 * shortest decimal that reads back as the same value ("0.5", "-0"), "inf",
 * "-inf", "nan" and "-nan" (the quiet NaNs 0x7fc00000 and 0xffc00000), and
 * any other NaN by its f32 bits, "nan:0x7fc00001". Two programs print alike
 * only if they are alike, which the specialization key relies on.
 *
 * ir_print_inst is also used by the verifier's messages, so it must cope
 * with any instruction: out-of-range ops, values and immediates print as "?".
 */
#include "ir/ir.h"

#include <math.h>
#include <string.h>

#define INDENT_MAX 16 /* loop levels; deeper ones print at this indentation */

static void print_consts(const tj_program *p, TjBuf *out) {
  for (int i = 0; i < p->nconsts; i++) {
    const IrConst *c = &p->consts[i];
    if (i < TJ_CONST_BUILTIN_COUNT && !c->bound) continue;
    if (c->bound)
      buf_printf(out, "const %s = %lld\n", c->name, (long long)c->value);
    else
      buf_printf(out, "const %s\n", c->name);
  }
}

/* An f32 NaN: its sign and payload are what the code generators emit. */
static void print_nan(double v, TjBuf *out) {
  float f = (float)v;
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) == 0x7fc00000u)
    buf_puts(out, bits >> 31 ? " -nan" : " nan");
  else
    buf_printf(out, " nan:0x%08lx", (unsigned long)bits);
}

/* Integer constants print as integers, floats as the shortest text that
 * reads back as the same double; anything odd falls back to the latter. */
static void print_number(tj_type t, double v, TjBuf *out) {
  bool integral = t.elem == TJ_I32 || t.elem == TJ_I64;
  if (integral && v >= -9223372036854775808.0 && v < 9223372036854775808.0 && v == floor(v)) {
    buf_printf(out, " %lld", (long long)v);
    return;
  }
  if (t.elem == TJ_F32 && isnan(v)) {
    print_nan(v, out);
    return;
  }
  char text[64];
  tj_format_double(text, sizeof text, v);
  buf_printf(out, " %s", text);
}

static bool valid_value(const tj_program *p, int32_t v) {
  return v >= 0 && v < p->nvalues;
}

/* The immediate of param, const and constexpr, with its leading space. */
static void print_immediate(const tj_program *p, const IrInst *in, TjBuf *out) {
  switch ((tj_op)in->op) {
  case TJ_OP_PARAM:
    buf_printf(out, " %s", in->iimm >= 0 && in->iimm < p->nparams ? p->params[in->iimm] : "?");
    break;
  case TJ_OP_CONSTEXPR:
    buf_printf(out, " %s", in->iimm >= 0 && in->iimm < p->nconsts ? p->consts[in->iimm].name : "?");
    break;
  case TJ_OP_CONST: {
    tj_type t = valid_value(p, in->result) ? p->types[in->result] : tj_scalar_type(TJ_F32);
    print_number(t, in->fimm, out);
    break;
  }
  default:
    break;
  }
}

static void print_operands(const tj_program *p, const IrInst *in, TjBuf *out) {
  int n = in->nargs < 0 ? 0 : in->nargs > IR_MAX_ARGS ? IR_MAX_ARGS : in->nargs;
  for (int i = 0; i < n; i++) {
    if (valid_value(p, in->args[i]))
      buf_printf(out, "%s%%%d", i ? ", " : " ", (int)in->args[i]);
    else
      buf_printf(out, "%s%%?", i ? ", " : " ");
  }
}

void ir_print_inst(const tj_program *p, int inst, TjBuf *out) {
  if (inst < 0 || inst >= p->ninsts) {
    buf_puts(out, "?");
    return;
  }
  const IrInst *in = &p->insts[inst];
  if (in->result != IR_NONE) {
    char type[96] = "?";
    if (valid_value(p, in->result)) ir_type_format(p, p->types[in->result], type, sizeof type);
    buf_printf(out, "%%%d : %s = ", (int)in->result, type);
  }
  if (in->op >= TJ_OP_COUNT) {
    buf_printf(out, "?op%d", (int)in->op);
    return;
  }
  buf_puts(out, ir_ops[in->op].name);
  print_immediate(p, in, out);
  print_operands(p, in, out);
}

void ir_print(const tj_program *p, TjBuf *out) {
  buf_printf(out, "kernel %s\n", p->name ? p->name : "kernel");
  print_consts(p, out);
  int depth = 0;
  for (int i = 0; i < p->ninsts; i++) {
    if (p->insts[i].op == TJ_OP_ENDFOR && depth > 0) depth--;
    buf_printf(out, "%*s", 2 * (depth < INDENT_MAX ? depth : INDENT_MAX), "");
    ir_print_inst(p, i, out);
    buf_puts(out, "\n");
    if (p->insts[i].op == TJ_OP_FOR) depth++;
  }
}
