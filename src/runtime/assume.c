/*
 * assume.c — what a specialization assumed of its arguments, and the check
 * of a launch's actual arguments against it (tj_launch).
 *
 * The code generator takes ALIGN at its word (analyze.c): every pointer
 * argument is ALIGN-byte aligned, and every i64 argument is a multiple of
 * ALIGN / (the widest pointee's size) elements, so that row starts keep the
 * alignment of vector accesses. A launch that breaks it would fault with a
 * misaligned address and leave the CUDA context (shared with the caller's
 * own work) unusable, so tj_launch refuses it first, naming the argument
 * and the assumption. Only i64 parameters that reach an address (an offset
 * of ptr_add, load or store, through any arithmetic) are held to it: others
 * do not change the code. Every i32 parameter is held to DIV (a size that
 * is not its multiple would make the last vector of a row move whole, past
 * the row's end). The check is a mask test per argument.
 */
#include "codegen/codegen.h" /* cg_elem_size */
#include "runtime/runtime.h"

#include <stdio.h>
#include <string.h>

static bool is_memory_offset(const IrInst *in, int k) {
  return k == 1 && (in->op == TJ_OP_PTR_ADD || in->op == TJ_OP_LOAD || in->op == TJ_OP_STORE);
}

/* Marks every value an address depends on (offsets and what they are
 * computed from), to a fixpoint over loops (iter <- yield). */
static void mark_address_inputs(const tj_program *p, uint8_t *feeds) {
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = p->ninsts - 1; i >= 0; i--) {
      const IrInst *in = &p->insts[i];
      bool result = in->result != IR_NONE && feeds[in->result];
      if (in->op == TJ_OP_YIELD && feeds[in->args[0]] && !feeds[in->args[1]])
        feeds[in->args[1]] = 1, changed = true;
      for (int k = 0; k < in->nargs; k++) {
        int a = in->args[k];
        if (a == IR_NONE || feeds[a] || !(result || is_memory_offset(in, k))) continue;
        feeds[a] = 1;
        changed = true;
      }
    }
  }
}

/* Each pointer parameter's element size (DTYPE as dtype), and the widest. */
static void pointees(const tj_program *p, tj_dtype dtype, RtAssume *out) {
  out->narrowest = 16;
  for (int i = 0; i < p->ninsts; i++) {
    const IrInst *in = &p->insts[i];
    int at = (int)in->iimm;
    if (in->op != TJ_OP_PARAM || at < 0 || at >= RT_MAX_PARAMS) continue;
    tj_type t = p->types[in->result];
    if (t.shape != TJ_POINTER) continue;
    int size = t.elem == TJ_DTYPE ? ir_dtype_size(dtype) : cg_elem_size((tj_elem)t.elem);
    out->pointee[at] = (uint8_t)size;
    if (size > out->widest) out->widest = size;
    if (size < out->narrowest) out->narrowest = size;
  }
}

void rt_assume_of(const tj_program *p, tj_dtype dtype, int align, int multiple, RtAssume *out) {
  memset(out, 0, sizeof *out);
  out->align = align;
  out->multiple = multiple > 1 ? multiple : 1;
  pointees(p, dtype, out);
  uint8_t *feeds = tj_alloc((size_t)p->nvalues + 1);
  if (!feeds) return; /* no checks rather than a failed compile */
  mark_address_inputs(p, feeds);
  for (int i = 0; i < p->ninsts; i++) {
    const IrInst *in = &p->insts[i];
    int at = (int)in->iimm;
    if (in->op != TJ_OP_PARAM || at < 0 || at >= RT_MAX_PARAMS) continue;
    tj_type t = p->types[in->result];
    uint32_t held = 1;
    if (t.shape == TJ_POINTER) held = (uint32_t)align;
    if (t.shape == TJ_SCALAR && t.elem == TJ_I64 && feeds[in->result] && out->widest)
      held = (uint32_t)(align / out->widest > 1 ? align / out->widest : 1);
    out->size[at] = t.shape == TJ_SCALAR && t.elem == TJ_I32;
    if (out->size[at]) held = (uint32_t)out->multiple;
    out->mask[at] = held - 1;
    snprintf(out->names[at], sizeof out->names[at], "%s", p->params[at]);
  }
  tj_free(feeds);
}

void rt_assume_from_spec(const tj_spec *s, RtAssume *out) {
  rt_assume_of(s->prog, s->dtype, s->align, s->multiple, out);
}

static int vector_elems(int align, int narrowest) {
  int bytes = align < 16 ? align : 16;
  return narrowest > 0 && bytes / narrowest > 1 ? bytes / narrowest : 1;
}

int rt_size_multiple(int64_t n, int align, int elem) {
  int v = vector_elems(align, elem);
  return v > 1 && n % v == 0 ? v : 1;
}

int rt_assume_multiple(const RtAssume *a, const tj_arg *args, int count, int align) {
  int least = 0; /* no i32 argument: 1 */
  for (int i = 0; i < count && i < RT_MAX_PARAMS; i++) {
    if (!a->size[i]) continue;
    int m = args[i].kind == TJ_ARG_INT ? rt_size_multiple(args[i].u.i, align, a->narrowest) : 1;
    if (!least || m < least) least = m;
  }
  return least ? least : 1;
}

tj_status rt_assume_check(const RtAssume *a, const tj_arg *args, int count, char *why,
                          size_t size) {
  for (int i = 0; i < count && i < RT_MAX_PARAMS; i++) {
    if (!a->mask[i]) continue;
    uint64_t v = args[i].kind == TJ_ARG_PTR ? (uint64_t)(uintptr_t)args[i].u.ptr
                                            : (uint64_t)args[i].u.i;
    if (!(v & a->mask[i])) continue;
    if (a->size[i])
      snprintf(why, size,
               "argument %d (%s) = %lld is not a multiple of %u, which the kernel was "
               "specialized for (DIV = %d): specialize with a smaller multiple",
               i, a->names[i], (long long)args[i].u.i, a->mask[i] + 1, a->multiple);
    else if (a->pointee[i])
      snprintf(why, size,
               "argument %d (%s) = %#llx is not %u-byte aligned, as the kernel was specialized "
               "for (ALIGN = %d): specialize with a smaller align, or phased",
               i, a->names[i], (unsigned long long)v, a->mask[i] + 1, a->align);
    else
      snprintf(why, size,
               "argument %d (%s) = %lld is not a multiple of %u elements, which the kernel was "
               "specialized for (ALIGN = %d bytes): its rows would start misaligned; specialize "
               "with a smaller align, or phased",
               i, a->names[i], (long long)v, a->mask[i] + 1, a->align);
    return TJ_ERR_INVALID_ARGUMENT;
  }
  return TJ_OK;
}
