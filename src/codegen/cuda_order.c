/*
 * cuda_order.c — where the NVRTC backend needs a group barrier so that the
 * memory accesses of one program instance happen in the interpreter's order.
 *
 * The interpreter runs a program's instructions one at a time, each over the
 * whole tile. In the CUDA C a tile is spread over the threads of a group, so
 * an address one thread stores may be one another thread loads or stores: a
 * pair of accesses, at least one a store, that two threads make on one
 * address must be separated by a barrier (tj_group_sync, which orders memory
 * too). A pair needs none when
 *   - both use the same offsets value in the same iteration of the same loop
 *     body: each slot is then the same address in the same thread, and
 *     program order in that thread suffices (in-place softmax, y == x);
 *   - it is a load, then a store, and the load feeds a reduction that runs
 *     between them: every thread must have its loaded value before any
 *     thread gets the reduction's.
 * Everything else is assumed to alias. A barrier goes after a store when any
 * access may follow it (a store inside a loop always: its next iteration),
 * which covers every pair that starts with a store; one goes before a store
 * when a load may precede it unordered. For the softmax templates this gives
 * no barrier in the single tile and one per chunk in the online template's
 * second loop.
 */
#include "codegen/cuda.h"

#include <string.h>

/* The FOR whose body holds instruction i most closely, or -1. */
static int innermost_loop(const tj_program *p, int i) {
  for (int f = i - 1; f >= 0; f--)
    if (p->insts[f].op == TJ_OP_FOR && p->insts[f].iimm > i) return f;
  return -1;
}

/* The FOR whose body holds instruction i least closely, or -1. */
static int outermost_loop(const tj_program *p, int i) {
  for (int f = 0; f < i; f++)
    if (p->insts[f].op == TJ_OP_FOR && p->insts[f].iimm > i) return f;
  return -1;
}

static bool is_load(const tj_program *p, int i) { return p->insts[i].op == TJ_OP_LOAD; }
static bool is_access(const tj_program *p, int i) {
  return p->insts[i].op == TJ_OP_LOAD || p->insts[i].op == TJ_OP_STORE;
}

/* Same address in the same thread within one iteration: the same offsets
 * value, in the same loop body. */
static bool same_slot(const tj_program *p, int a, int b) {
  return p->insts[a].args[1] == p->insts[b].args[1] && innermost_loop(p, a) == innermost_loop(p, b);
}

/* Whether value v is computed from the result of instruction def, through
 * operands (loop-carried flows are not followed, which only costs a
 * barrier). A walk with an explicit stack: chains may be long. */
static bool depends(const tj_program *p, int v, int def, bool *seen, int32_t *stack) {
  int top = 0;
  stack[top++] = v;
  seen[v] = true;
  while (top > 0) {
    const IrInst *in = &p->insts[p->defs[stack[--top]]];
    if (in == &p->insts[def]) return true;
    for (int k = 0; k < in->nargs; k++)
      if (in->args[k] >= 0 && !seen[in->args[k]]) {
        seen[in->args[k]] = true;
        stack[top++] = in->args[k];
      }
  }
  return false;
}

/* Whether a reduction in the load's loop body, between it and the store,
 * reduces a tile computed from the loaded one. Out of memory: no (a
 * barrier too many). */
static bool reduced_before(const tj_program *p, int load, int store) {
  int loop = innermost_loop(p, load);
  int end = loop >= 0 && p->insts[loop].iimm < store ? (int)p->insts[loop].iimm : store;
  bool *seen = tj_alloc((size_t)p->nvalues * sizeof *seen);
  int32_t *stack = tj_alloc((size_t)p->nvalues * sizeof *stack);
  bool found = false;
  for (int r = load + 1; r < end && seen && stack && !found; r++) {
    const IrInst *in = &p->insts[r];
    if ((in->op != TJ_OP_REDUCE_MAX && in->op != TJ_OP_REDUCE_SUM) || innermost_loop(p, r) != loop)
      continue;
    memset(seen, 0, (size_t)p->nvalues * sizeof *seen);
    found = depends(p, in->args[0], load, seen, stack);
  }
  tj_free(seen);
  tj_free(stack);
  return found;
}

/* Loads before the store that are neither the same slots nor reduced in
 * between, or loads after it in a loop around it (they precede its next
 * iteration). Stores before it are ordered by the barrier after them. */
bool cg_cuda_sync_before_store(const tj_program *p, int store) {
  int outer = outermost_loop(p, store);
  int end = outer >= 0 ? (int)p->insts[outer].iimm : store;
  for (int k = 0; k < end; k++) {
    if (!is_load(p, k)) continue;
    if (k > store) return true;
    if (!same_slot(p, k, store) && !reduced_before(p, k, store)) return true;
  }
  return false;
}

bool cg_cuda_sync_after_store(const tj_program *p, int store) {
  if (outermost_loop(p, store) >= 0) return true;
  for (int k = store + 1; k < p->ninsts; k++)
    if (is_access(p, k) && !same_slot(p, store, k)) return true;
  return false;
}
