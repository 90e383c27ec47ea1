/*
 * reduce_ctas.c — the reduction levels across CTAs (reduce.c has the ones
 * inside a CTA). When they run, every thread of a CTA already holds its
 * CTA's result.
 *
 * Cluster (CLUSTER = C > 1, sm_90): distributed shared memory, pushed.
 * Thread t < C of each CTA stores the CTA's value into slot [own rank] of
 * CTA t's region (mapa + st.shared::cluster), the whole cluster meets at
 * barrier.cluster (arrive has release, wait acquire semantics), and then
 * every thread reads the C slots of its own region and combines them in
 * rank order. Every CTA reads the same C values, so all agree bit for bit.
 * Nothing is written into a CTA's shared memory before the barrier of the
 * prologue, which every CTA of the cluster passes only after all have
 * started, and nothing after the last barrier a CTA waits at, so no access
 * reaches a CTA that has not started or has exited.
 *
 * Grid (SPLIT = S > 1): global memory, in the workspace the runtime passes
 * (tj_workspace), one block per group of S clusters (or CTAs). Thread 0 of
 * cluster rank 0 stores the value as its rank's partial; thread 0 of every
 * CTA then arrives at the group's barrier and waits, and bar.sync releases
 * the CTA. The barrier is a 32-bit counter that every episode advances by
 * exactly 2^31 (mod 2^32): the master CTA (both ranks 0) adds 2^31 -
 * (C*S - 1), every other CTA 1, so its top bit flips once all have arrived
 * and its low bits are back where they were (zero, as the runtime clears the
 * workspace once), whatever the order of arrival; a waiter spins until the
 * top bit differs from the value it saw when it arrived. atom.add.release
 * publishes the partial stored before it; ld.acquire in the spin and the
 * bar.sync after it make every partial visible to the CTA, whose threads
 * then read them with ld.global.cg (from L2, never a stale L1 line). Then
 * the S partials are combined like one value per thread: with S <= 32 each
 * warp reads all of them and a butterfly combines them; with more, thread t
 * reads partial t and a second round through the warps follows. The CTAs
 * of a group must all be resident at once: their kernels are launched
 * cooperatively (tj_launch_shape.cooperative).
 *
 * Both levels use two regions, alternating as reduce.c plans; where both
 * may still be read, an extra barrier of the level's own kind comes first.
 */
#include "codegen/codegen.h"

#include <stdio.h>
#include <string.h>

static const char *type_of(tj_elem elem) { return elem == TJ_F32 ? "f32" : "b32"; }

/* ---- cluster ------------------------------------------------------------------ */

static void cluster_barrier(CgCtx *c) {
  cg_line(&c->em, "barrier.cluster.arrive.aligned;");
  cg_line(&c->em, "barrier.cluster.wait.aligned;");
}

void cg_cluster_prologue(CgCtx *c) {
  CgEmit *e = &c->em;
  const CgGeometry *g = &c->geo;
  CgShared *sh = &c->shared;
  sh->cluster_at = sh->bytes;
  sh->cluster_region = (g->cluster * 4 + 15) / 16 * 16;
  sh->bytes += 2 * sh->cluster_region;
  cluster_barrier(c); /* every CTA of the cluster has started */
  CgOperand base = cg_reg(e, CG_B32), target = cg_reg(e, CG_B32), offset = cg_reg(e, CG_B32);
  CgOperand mine = cg_reg(e, CG_B32);
  sh->cluster_local = cg_reg(e, CG_B32);
  sh->cluster_remote = cg_reg(e, CG_B32);
  sh->pusher = cg_reg(e, CG_PRED);
  cg_line(e, "mov.u32 %s, tj_smem;", CG_N(base));
  cg_line(e, "add.s32 %s, %s, %d;", CG_N(sh->cluster_local), CG_N(base), sh->cluster_at);
  cg_line(e, "setp.lt.u32 %s, %s, %d;", CG_N(sh->pusher), CG_N(g->tid), g->cluster);
  cg_line(e, "selp.b32 %s, %s, 0, %s;", CG_N(target), CG_N(g->tid), CG_N(sh->pusher));
  cg_line(e, "shl.b32 %s, %s, 2;", CG_N(offset), CG_N(g->cluster_rank));
  cg_line(e, "add.s32 %s, %s, %s;", CG_N(mine), CG_N(sh->cluster_local), CG_N(offset));
  cg_line(e, "mapa.shared::cluster.u32 %s, %s, %s;", CG_N(sh->cluster_remote), CG_N(mine),
          CG_N(target));
}

/* Reads n values of `type` from consecutive 4-byte slots at address + at,
 * four at a time. */
static void read_slots(CgCtx *c, const char *space, CgOperand address, int at, tj_elem elem,
                       CgOperand *v, int n) {
  for (int k = 0; k < n;) {
    int m = n - k >= 4 ? 4 : n - k >= 2 ? 2 : 1;
    char list[128] = "";
    for (int i = 0; i < m; i++) {
      v[k + i] = cg_reg_of(c, elem);
      size_t len = strlen(list);
      snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", CG_N(v[k + i]));
    }
    if (m == 1)
      cg_line(&c->em, "ld.%s.%s %s, %s;", space, type_of(elem), list,
              cg_address(address, at + 4 * k).s);
    else
      cg_line(&c->em, "ld.%s.v%d.%s {%s}, %s;", space, m, type_of(elem), list,
              cg_address(address, at + 4 * k).s);
    k += m;
  }
}

CgOperand cg_across_cluster(CgCtx *c, int inst, tj_elem elem, CgOperand x) {
  const CgShared *sh = &c->shared;
  int at = c->sites[inst].region * sh->cluster_region;
  CgOperand v[CG_MAX_CLUSTER];
  if (c->sites[inst].extra_barrier) cluster_barrier(c);
  x = cg_in_reg(c, x);
  cg_line(&c->em, "@%s st.shared::cluster.%s %s, %s;", CG_N(sh->pusher), type_of(elem),
          cg_address(sh->cluster_remote, at).s, CG_N(x));
  cluster_barrier(c);
  read_slots(c, "shared", sh->cluster_local, at, elem, v, c->geo.cluster);
  return cg_reduce_tree(c, (tj_op)c->p->insts[inst].op, elem, v, c->geo.cluster);
}

/* ---- grid ------------------------------------------------------------------- */

static CgOperand wide_offset(CgCtx *c, CgOperand base, CgOperand index, int scale) {
  CgOperand bytes = cg_reg(&c->em, CG_B64), d = cg_reg(&c->em, CG_B64);
  cg_line(&c->em, "mul.wide.u32 %s, %s, %d;", CG_N(bytes), CG_N(index), scale);
  cg_line(&c->em, "add.s64 %s, %s, %s;", CG_N(d), CG_N(base), CG_N(bytes));
  return d;
}

void cg_grid_prologue(CgCtx *c) {
  CgEmit *e = &c->em;
  const CgGeometry *g = &c->geo;
  CgWorkspace *w = &c->ws;
  int participants = g->cluster * g->split, lanes = g->split <= 32 ? 32 : g->threads;
  w->block = CG_WORKSPACE_HEADER + (g->split * 16 + 127) / 128 * 128;
  CgOperand raw = cg_reg(e, CG_B64), ws = cg_reg(e, CG_B64), master = cg_reg(e, CG_PRED);
  CgOperand index = g->tid;
  cg_line(e, "ld.param.u64 %s, [tj_workspace];", CG_N(raw));
  cg_line(e, "cvta.to.global.u64 %s, %s;", CG_N(ws), CG_N(raw));
  w->counter = wide_offset(c, ws, g->unit, w->block);
  CgOperand partials = cg_reg(e, CG_B64);
  cg_line(e, "add.s64 %s, %s, %d;", CG_N(partials), CG_N(w->counter), CG_WORKSPACE_HEADER);
  w->partial = wide_offset(c, partials, g->split_rank, 16);
  w->first = cg_reg(e, CG_PRED);
  w->publisher = cg_reg(e, CG_PRED);
  w->inc = cg_reg(e, CG_B32);
  w->reader = cg_reg(e, CG_PRED);
  cg_line(e, "setp.eq.u32 %s, %s, 0;", CG_N(w->first), CG_N(g->tid));
  cg_line(e, "setp.eq.and.u32 %s, %s, 0, %s;", CG_N(w->publisher), CG_N(g->cluster_rank),
          CG_N(w->first));
  cg_line(e, "setp.eq.u32 %s, %s, 0;", CG_N(master), CG_N(g->split_rank));
  cg_line(e, "setp.eq.and.u32 %s, %s, 0, %s;", CG_N(master), CG_N(g->cluster_rank), CG_N(master));
  cg_line(e, "selp.b32 %s, %u, 1, %s;", CG_N(w->inc), 0x80000000u - (unsigned)(participants - 1),
          CG_N(master));
  if (lanes == 32) {
    index = cg_reg(e, CG_B32);
    cg_line(e, "and.b32 %s, %s, 31;", CG_N(index), CG_N(g->tid));
  }
  cg_line(e, "setp.lt.u32 %s, %s, %d;", CG_N(w->reader), CG_N(index), g->split);
  w->read = wide_offset(c, partials, index, 16);
}

/* The group's barrier: thread 0 of each CTA arrives and spins, bar.sync
 * holds the others. */
static void grid_barrier(CgCtx *c) {
  CgEmit *e = &c->em;
  const CgWorkspace *w = &c->ws;
  int label = e->labels++;
  CgOperand old = cg_reg(e, CG_B32), now = cg_reg(e, CG_B32), diff = cg_reg(e, CG_B32);
  CgOperand spin = cg_reg(e, CG_PRED);
  cg_line(e, "@!%s bra $Lgrid_wait_%d;", CG_N(w->first), label);
  cg_line(e, "atom.add.release.gpu.global.u32 %s, [%s], %s;", CG_N(old), CG_N(w->counter),
          CG_N(w->inc));
  cg_raw(e, "$Lgrid_spin_%d:\n", label);
  cg_line(e, "ld.acquire.gpu.global.u32 %s, [%s];", CG_N(now), CG_N(w->counter));
  cg_line(e, "xor.b32 %s, %s, %s;", CG_N(diff), CG_N(now), CG_N(old));
  cg_line(e, "setp.gt.s32 %s, %s, -1;", CG_N(spin), CG_N(diff));
  cg_line(e, "@%s bra $Lgrid_spin_%d;", CG_N(spin), label);
  cg_raw(e, "$Lgrid_wait_%d:\n", label);
  cg_line(e, "bar.sync 0;");
}

CgOperand cg_across_grid(CgCtx *c, int inst, tj_elem elem, CgOperand x) {
  const CgWorkspace *w = &c->ws;
  tj_op op = (tj_op)c->p->insts[inst].op;
  int at = 8 * c->sites[inst].region;
  if (c->sites[inst].extra_barrier) grid_barrier(c);
  x = cg_in_reg(c, x);
  cg_line(&c->em, "@%s st.global.%s %s, %s;", CG_N(w->publisher), type_of(elem),
          cg_address(w->partial, at).s, CG_N(x));
  grid_barrier(c);
  CgOperand y = cg_reg_of(c, elem);
  cg_mov(c, y, cg_identity(op, elem));
  cg_line(&c->em, "@%s ld.global.cg.%s %s, %s;", CG_N(w->reader), type_of(elem), CG_N(y),
          cg_address(w->read, at).s);
  int lanes = 1;
  while (lanes < c->geo.split && lanes < 32) lanes *= 2;
  y = cg_butterfly(c, op, elem, y, lanes);
  if (c->geo.split > 32) y = cg_warps_round(c, inst, elem, y);
  return y;
}
