/*
 * verify.c — the verifier. It replays every instruction of a program into a
 * scratch program through ir_append, so it checks exactly the rules the
 * builder and parser check (types, operands in scope, loop structure), and
 * then the whole-program rules: loops closed, and, once specialized, every
 * constant bound, every tile length positive and no DTYPE left.
 *
 * Each message names the instruction by index and printed form, then the
 * rule it breaks: "instruction 7 (%7 : f32 = add %5, %6): add: ...".
 */
#include "ir/ir.h"

#include <string.h>

static tj_status fail_at(tj_program *p, int inst, tj_status st, const char *rule) {
  TjBuf b;
  buf_init(&b);
  ir_print_inst(p, inst, &b);
  ir_fail(p, st, "instruction %d (%s): %s", inst, b.data ? b.data : "?", rule);
  buf_free(&b);
  return st;
}

static tj_program *scratch_of(const tj_program *p) {
  tj_program *s = ir_program_new(p->name);
  if (!s) return NULL;
  for (int i = 0; i < p->nparams; i++)
    if (ir_param_add(s, p->params[i], strlen(p->params[i])) < 0) goto oom;
  for (int i = TJ_CONST_BUILTIN_COUNT; i < p->nconsts; i++) {
    int index;
    if (ir_const_add(s, p->consts[i].name, strlen(p->consts[i].name), &index) != TJ_OK) goto oom;
  }
  return s;
oom:
  ir_program_free(s);
  return NULL;
}

static tj_status replay(tj_program *p, tj_program *s, int i) {
  const IrInst *in = &p->insts[i];
  if (in->op >= TJ_OP_COUNT) return fail_at(p, i, TJ_ERR_VERIFY, "unknown op");
  IrAppend a;
  memset(&a, 0, sizeof a);
  a.op = (tj_op)in->op;
  a.nargs = in->nargs;
  memcpy(a.args, in->args, sizeof a.args);
  a.fimm = in->fimm;
  a.iimm = in->iimm;
  a.declared = in->result != IR_NONE ? p->types[in->result] : ir_no_type();
  int32_t result;
  tj_status st = ir_append(s, &a, &result);
  if (st == TJ_ERR_OUT_OF_MEMORY) return ir_fail(p, st, "out of memory");
  if (st != TJ_OK) return fail_at(p, i, TJ_ERR_VERIFY, s->error);
  if (result != in->result) return fail_at(p, i, TJ_ERR_VERIFY, "values are not numbered in order");
  return TJ_OK;
}

static tj_status check_specialized(tj_program *p) {
  for (int i = 0; i < p->nconsts; i++)
    if (!p->consts[i].bound)
      return ir_fail(p, TJ_ERR_VERIFY, "constant %s is not bound", p->consts[i].name);
  for (int i = 0; i < p->ninsts; i++) {
    int v = p->insts[i].result;
    if (v == IR_NONE) continue;
    tj_type t = p->types[v];
    if (t.elem == TJ_DTYPE) return fail_at(p, i, TJ_ERR_VERIFY, "DTYPE is not bound");
    if (t.shape == TJ_TILE && (ir_tile_len(p, t) < 1 || ir_tile_len(p, t) > IR_MAX_TILE))
      return fail_at(p, i, TJ_ERR_VERIFY, "tile length must be between 1 and 2^30");
  }
  return TJ_OK;
}

tj_status ir_verify(tj_program *p) {
  tj_program *s = scratch_of(p);
  if (!s) return ir_fail(p, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  tj_status st = TJ_OK;
  for (int i = 0; i < p->ninsts && st == TJ_OK; i++) st = replay(p, s, i);
  if (st == TJ_OK && s->nopen)
    st = ir_fail(p, TJ_ERR_VERIFY, "the for at instruction %d has no endfor", s->open_loops[s->nopen - 1]);
  if (st == TJ_OK && s->nvalues != p->nvalues) st = ir_fail(p, TJ_ERR_VERIFY, "the value table does not match the instructions");
  ir_program_free(s);
  if (st == TJ_OK && p->specialized) st = check_specialized(p);
  return st; /* success writes nothing to p: other threads may be reading it */
}
