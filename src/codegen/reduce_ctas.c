/*
 * reduce_ctas.c — the reduction levels across CTAs (reduce.c has the ones
 * inside a CTA). When they run, every thread of a CTA already holds its
 * CTA's result.
 *
 * Cluster (CLUSTER = C > 1, sm_90): distributed shared memory, pushed.
 * Each region has an mbarrier in every CTA, expecting one arrival a phase.
 * Thread 0 of each CTA arrives at its own, expecting C values' bytes;
 * thread t < C of each CTA stores the CTA's value into slot [own rank] of
 * CTA t's region with st.async, whose completion counts those bytes off
 * CTA t's mbarrier; every thread waits for its mbarrier's phase (a parity
 * kept per region in `phases`), and then each group of L lanes (L the power
 * of two at or above C) reads the C slots of its own region, one a lane,
 * and a butterfly over L combines them (reduce.c, cg_red_gather: one
 * register, however large the cluster). Every CTA reads the same C values
 * into the same lanes, so all agree bit for bit.
 * The mbarrier, not barrier.cluster, carries the round: barrier.cluster's
 * arrive releases at cluster scope, which ptxas of CUDA 13.0 makes a
 * MEMBAR.ALL.GPU that waits for all of the thread's memory traffic, and
 * that MEMBAR cost clusters of staged 16-bit rows 3 to 4 points of copy
 * on an H100 (bench/RESULTS.md, 2026-11-27, BB1). st.async's completion
 * releases at cluster scope and the wait acquires at cluster scope, so
 * what a CTA did before it sent (its warps' reads of the slots, through
 * their bar.sync) happens before what the receiver does after its wait;
 * the gather reads only after the wait.
 * A region is written again only two rounds later: regions alternate
 * round by round (reduce.c's plan, flip_ctas, or the extra barrier before
 * a reuse), and a CTA sends its next value only after it has read its
 * slots (its warps meet at the CTA level's bar.sync in between, or are
 * one warp), so the values of round k + 2 reach a CTA after it has read
 * those of round k, and its mbarrier for that region is by then in the
 * phase that expects them.
 * Nothing is written into a CTA's shared memory before the wait for the
 * prologue's arrival (cg_cluster_prologue, after the mbarriers' init),
 * which every CTA of the cluster passes only after all have started; a CTA
 * exits only after it has received every value sent to it, so no access
 * reaches a CTA that has not started or has exited.
 *
 * Grid (SPLIT = S > 1): global memory, in the workspace the runtime passes
 * (tj_workspace): a counter per group of S clusters (or CTAs) in the first
 * TJ_WORKSPACE_COUNTERS bytes, then a block of partials per group. Thread 0 of
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
 * group of L lanes (L the power of two at or above S) reads all of them, a
 * butterfly over L combines them, and every lane has the result; with
 * more, thread t reads partial t (and, past the CTA's T threads, t + T,
 * t + 2T ... combined in that order), a butterfly combines each warp's, and
 * where more than one warp read, a round through the warps follows. Every
 * CTA combines them in the same order, so all agree bit for bit. The CTAs
 * of a group must all be resident at once: their kernels are launched
 * cooperatively (tj_launch_shape.cooperative).
 *
 * Both levels use two regions, alternating as reduce.c plans; where both
 * may still be read, an extra barrier of the level's own kind comes first:
 * always where a loop's merge needs it in the first instance, else only
 * from the CTA's second instance on (extra_barrier). Levels whose regions
 * flip with the instance's parity (reduce.c, flip_ctas) need none.
 */
#include "codegen/codegen.h"

#include <stdio.h>
#include <string.h>

/* ---- cluster ------------------------------------------------------------------ */

static void cluster_barrier(CgCtx *c) {
  cg_line(&c->em, "barrier.cluster.arrive.aligned;");
  cg_line(&c->em, "barrier.cluster.wait.aligned;");
}

/* Thread 0 initializes the CTA's two mbarriers and fences the init for the
 * cluster; then the prologue arrives at the cluster's barrier (relaxed)
 * and the first round waits, just before its first store into another
 * CTA: by then every CTA of the cluster has started, with its mbarriers
 * ready, and the loads in between overlap the barrier's latency.
 * `started` says whether that wait is still to come (uniform over the
 * cluster, so a branch on it keeps the aligned wait aligned; the
 * simulator refuses a predicated barrier). */
void cg_cluster_prologue(CgCtx *c) {
  CgEmit *e = &c->em;
  CgShared *sh = &c->shared;
  sh->cluster_at = sh->bytes;
  sh->cluster_region = (c->geo.cluster * cg_red_slot_bytes(c) + 15) / 16 * 16;
  sh->cluster_bars = sh->cluster_at + 2 * sh->cluster_region;
  sh->bytes = sh->cluster_bars + 16;
  CgOperand first = cg_reg(e, CG_PRED), bars = cg_reg(e, CG_B32);
  cg_line(e, "setp.eq.u32 %s, %s, 0;", CG_N(first), CG_N(c->geo.tid));
  cg_line(e, "mov.u32 %s, tj_smem;", CG_N(bars));
  cg_line(e, "add.s32 %s, %s, %d;", CG_N(bars), CG_N(bars), sh->cluster_bars);
  for (int r = 0; r < 2; r++)
    cg_line(e, "@%s mbarrier.init.shared::cta.b64 %s, 1;", CG_N(first), cg_address(bars, 8 * r).s);
  cg_line(e, "@%s fence.mbarrier_init.release.cluster;", CG_N(first));
  sh->phases = cg_reg(e, CG_B32);
  cg_line(e, "mov.u32 %s, 0;", CG_N(sh->phases));
  sh->started = cg_reg(e, CG_PRED);
  /* relaxed: the fence releases the init, the first round's wait acquires */
  cg_line(e, "barrier.cluster.arrive.relaxed.aligned;");
  cg_line(e, "setp.eq.u32 %s, 0, 0;", CG_N(sh->started));
}

static void wait_started(CgCtx *c) {
  CgOperand started = c->shared.started;
  int label = c->em.labels++;
  cg_line(&c->em, "@!%s bra.uni $Lstarted_%d;", CG_N(started), label);
  cg_line(&c->em, "barrier.cluster.wait.aligned;");
  cg_line(&c->em, "setp.ne.u32 %s, 0, 0;", CG_N(started));
  cg_raw(&c->em, "$Lstarted_%d:\n", label);
}

/* Lanes that combine C (or S) partials: the power of two at or above it, at
 * most a warp. */
static int gather_lanes(int parts) {
  int lanes = 1;
  while (lanes < parts && lanes < 32) lanes *= 2;
  return lanes;
}

/* Addresses are made where they are used, from tid and the special
 * registers, rather than kept live across the body: a thread holding a
 * whole row's share has no registers to spare. remote: slot [own rank] of
 * region 0 of CTA tid; pusher: tid < C; read: slot [tid % L] of this CTA's
 * region 0; reader: tid % L < C. */
typedef struct ClusterAddresses {
  CgOperand remote, pusher, read, reader;
  CgOperand bar, remote_bar, region; /* this round's mbarrier, here and in CTA tid; its region */
} ClusterAddresses;

static ClusterAddresses cluster_addresses(CgCtx *c, int region) {
  CgEmit *e = &c->em;
  const CgGeometry *g = &c->geo;
  ClusterAddresses a;
  int slot = cg_red_slot_bytes(c), lanes = gather_lanes(g->cluster);
  CgOperand rank = cg_reg(e, CG_B32), offset = cg_reg(e, CG_B32), mine = cg_reg(e, CG_B32);
  CgOperand target = cg_reg(e, CG_B32), smem = cg_reg(e, CG_B32), base = cg_reg(e, CG_B32);
  CgOperand index = cg_reg(e, CG_B32), at = cg_reg(e, CG_B32);
  a.remote = cg_reg(e, CG_B32);
  a.pusher = cg_reg(e, CG_PRED);
  a.read = cg_reg(e, CG_B32);
  a.reader = cg_reg(e, CG_PRED);
  cg_line(e, "mov.u32 %s, tj_smem;", CG_N(smem));
  cg_line(e, "add.s32 %s, %s, %d;", CG_N(base), CG_N(smem), c->shared.cluster_at);
  a.region = cg_imm_int(CG_B32, region);
  if (c->flip_ctas) { /* this instance's region: the site's flipped by the parity (0 or 8) */
    CgOperand flipped = cg_reg(e, CG_B32);
    a.region = cg_reg(e, CG_B32);
    cg_line(e, "shr.u32 %s, %s, 3;", CG_N(a.region), CG_N(g->parity));
    if (region) cg_line(e, "xor.b32 %s, %s, 1;", CG_N(a.region), CG_N(a.region));
    cg_line(e, "mad.lo.u32 %s, %s, %d, %s;", CG_N(flipped), CG_N(a.region),
            c->shared.cluster_region, CG_N(base));
    base = flipped;
  }
  a.bar = cg_reg(e, CG_B32);
  a.remote_bar = cg_reg(e, CG_B32);
  cg_line(e, "mad.lo.u32 %s, %s, 8, %s;", CG_N(a.bar), CG_N(a.region), CG_N(smem));
  cg_line(e, "add.s32 %s, %s, %d;", CG_N(a.bar), CG_N(a.bar), c->shared.cluster_bars);
  cg_line(e, "mov.u32 %s, %%cluster_ctarank;", CG_N(rank));
  cg_line(e, "shl.b32 %s, %s, %d;", CG_N(offset), CG_N(rank), cg_log2(slot));
  cg_line(e, "add.s32 %s, %s, %s;", CG_N(mine), CG_N(base), CG_N(offset));
  cg_line(e, "setp.lt.u32 %s, %s, %d;", CG_N(a.pusher), CG_N(g->tid), g->cluster);
  cg_line(e, "selp.b32 %s, %s, 0, %s;", CG_N(target), CG_N(g->tid), CG_N(a.pusher));
  cg_line(e, "mapa.shared::cluster.u32 %s, %s, %s;", CG_N(a.remote), CG_N(mine), CG_N(target));
  cg_line(e, "mapa.shared::cluster.u32 %s, %s, %s;", CG_N(a.remote_bar), CG_N(a.bar),
          CG_N(target));
  cg_line(e, "and.b32 %s, %s, %d;", CG_N(index), CG_N(g->tid), lanes - 1);
  cg_line(e, "setp.lt.u32 %s, %s, %d;", CG_N(a.reader), CG_N(index), g->cluster);
  cg_line(e, "shl.b32 %s, %s, %d;", CG_N(at), CG_N(index), cg_log2(slot));
  cg_line(e, "add.s32 %s, %s, %s;", CG_N(a.read), CG_N(base), CG_N(at));
  return a;
}

struct GridAddresses;
static void extra_barrier(CgCtx *c, int inst, const struct GridAddresses *a);

/* Every thread waits for the phase of the round's mbarrier whose parity
 * bit `region` of `phases` holds, then flips that bit. The acquire is at
 * cluster scope (a CCTL.IVALL of L1 after the wait, as barrier.cluster's
 * wait had), to pair with the senders' release. */
static void wait_for_round(CgCtx *c, const ClusterAddresses *a) {
  CgEmit *e = &c->em;
  CgOperand parity = cg_reg(e, CG_B32), bit = cg_reg(e, CG_B32), done = cg_reg(e, CG_PRED);
  int label = e->labels++;
  cg_line(e, "shr.u32 %s, %s, %s;", CG_N(parity), CG_N(c->shared.phases), CG_N(a->region));
  cg_line(e, "and.b32 %s, %s, 1;", CG_N(parity), CG_N(parity));
  cg_raw(e, "$Lround_%d:\n", label);
  cg_line(e, "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %s, [%s], %s;", CG_N(done),
          CG_N(a->bar), CG_N(parity));
  cg_line(e, "@!%s bra $Lround_%d;", CG_N(done), label);
  cg_line(e, "shl.b32 %s, 1, %s;", CG_N(bit), CG_N(a->region));
  cg_line(e, "xor.b32 %s, %s, %s;", CG_N(c->shared.phases), CG_N(c->shared.phases), CG_N(bit));
}

CgRed cg_across_cluster(CgCtx *c, int inst, CgRed r) {
  CgEmit *e = &c->em;
  int region = c->sites[inst].region;
  int at = c->flip_ctas ? 0 : region * c->shared.cluster_region; /* flipped: in the addresses */
  wait_started(c);
  if (c->sites[inst].extra_barrier && !c->flip_ctas) extra_barrier(c, inst, NULL);
  ClusterAddresses a = cluster_addresses(c, region);
  CgOperand first = cg_reg(e, CG_PRED);
  cg_line(e, "setp.eq.u32 %s, %s, 0;", CG_N(first), CG_N(c->geo.tid));
  cg_line(e, "@%s mbarrier.arrive.expect_tx.shared::cta.b64 _, [%s], %d;", CG_N(first),
          CG_N(a.bar), c->geo.cluster * cg_red_value_bytes(r));
  cg_red_store(c, "shared::cluster", a.pusher, a.remote, at, r, &a.remote_bar);
  wait_for_round(c, &a);
  return cg_red_gather(c, "shared", a.reader, a.read, at, r, gather_lanes(c->geo.cluster));
}

/* ---- grid ------------------------------------------------------------------- */

static CgOperand wide_offset(CgCtx *c, CgOperand base, CgOperand index, int scale) {
  CgOperand bytes = cg_reg(&c->em, CG_B64), d = cg_reg(&c->em, CG_B64);
  cg_line(&c->em, "mul.wide.u32 %s, %s, %d;", CG_N(bytes), CG_N(index), scale);
  cg_line(&c->em, "add.s64 %s, %s, %s;", CG_N(d), CG_N(base), CG_N(bytes));
  return d;
}

void cg_grid_prologue(CgCtx *c) {
  c->ws.block = (c->geo.split * 16 + 127) / 128 * 128;
}

/* The workspace's addresses for this CTA, made where they are used (see
 * cluster_addresses): its group's counter, its own partial, the partial
 * this thread reads; and what it adds to the counter. */
typedef struct GridAddresses {
  CgOperand counter, partial, read, inc;
  CgOperand first, publisher, reader; /* thread 0; thread 0 of cluster rank 0; reads one */
} GridAddresses;

static GridAddresses grid_addresses(CgCtx *c, int region) {
  CgEmit *e = &c->em;
  const CgGeometry *g = &c->geo;
  GridAddresses a;
  int participants = g->cluster * g->split;
  CgOperand raw = cg_reg(e, CG_B64), ws = cg_reg(e, CG_B64), unit = cg_reg(e, CG_B32);
  CgOperand group = cg_reg(e, CG_B32), rank = cg_reg(e, CG_B32), master = cg_reg(e, CG_PRED);
  CgOperand crank = cg_imm_int(CG_B32, 0), partials, index = g->tid;
  cg_line(e, "ld.param.u64 %s, [tj_workspace];", CG_N(raw));
  cg_line(e, "cvta.to.global.u64 %s, %s;", CG_N(ws), CG_N(raw));
  cg_line(e, "mov.u32 %s, %s;", CG_N(unit), g->cluster > 1 ? "%clusterid.x" : "%ctaid.x");
  cg_line(e, "div.u32 %s, %s, %d;", CG_N(group), CG_N(unit), g->split);
  cg_line(e, "rem.u32 %s, %s, %d;", CG_N(rank), CG_N(unit), g->split);
  if (g->cluster > 1) {
    crank = cg_reg(e, CG_B32);
    cg_line(e, "mov.u32 %s, %%cluster_ctarank;", CG_N(crank));
  }
  a.counter = wide_offset(c, ws, group, CG_COUNTER_STRIDE);
  CgOperand area = cg_reg(e, CG_B64);
  cg_line(e, "add.s64 %s, %s, %d;", CG_N(area), CG_N(ws), TJ_WORKSPACE_COUNTERS);
  partials = wide_offset(c, area, group, c->ws.block);
  a.partial = wide_offset(c, partials, rank, 16);
  a.first = cg_reg(e, CG_PRED);
  a.publisher = cg_reg(e, CG_PRED);
  a.inc = cg_reg(e, CG_B32);
  a.reader = cg_reg(e, CG_PRED);
  cg_line(e, "setp.eq.u32 %s, %s, 0;", CG_N(a.first), CG_N(g->tid));
  cg_line(e, "setp.eq.and.u32 %s, %s, 0, %s;", CG_N(a.publisher), CG_N(crank), CG_N(a.first));
  cg_line(e, "setp.eq.u32 %s, %s, 0;", CG_N(master), CG_N(rank));
  cg_line(e, "setp.eq.and.u32 %s, %s, 0, %s;", CG_N(master), CG_N(crank), CG_N(master));
  cg_line(e, "selp.b32 %s, %u, 1, %s;", CG_N(a.inc), 0x80000000u - (unsigned)(participants - 1),
          CG_N(master));
  if (g->split <= 32) { /* every group of `lanes` lanes reads them all */
    index = cg_reg(e, CG_B32);
    cg_line(e, "and.b32 %s, %s, %d;", CG_N(index), CG_N(g->tid), gather_lanes(c->geo.split) - 1);
  }
  cg_line(e, "setp.lt.u32 %s, %s, %d;", CG_N(a.reader), CG_N(index), g->split);
  a.read = wide_offset(c, partials, index, 16);
  if (c->flip_ctas) { /* this instance's region: the site's flipped by the parity (0 or 8) */
    CgOperand flip = cg_reg(e, CG_B64), partial = cg_reg(e, CG_B64), read = cg_reg(e, CG_B64);
    CgOperand bytes = g->parity;
    if (region) {
      bytes = cg_reg(e, CG_B32);
      cg_line(e, "xor.b32 %s, %s, 8;", CG_N(bytes), CG_N(g->parity));
    }
    cg_line(e, "cvt.u64.u32 %s, %s;", CG_N(flip), CG_N(bytes));
    cg_line(e, "add.s64 %s, %s, %s;", CG_N(partial), CG_N(a.partial), CG_N(flip));
    cg_line(e, "add.s64 %s, %s, %s;", CG_N(read), CG_N(a.read), CG_N(flip));
    a.partial = partial;
    a.read = read;
  }
  return a;
}

/* The group's barrier: thread 0 of each CTA arrives and spins, bar.sync
 * holds the others. */
static void grid_barrier(CgCtx *c, const GridAddresses *a) {
  CgEmit *e = &c->em;
  int label = e->labels++;
  CgOperand old = cg_reg(e, CG_B32), now = cg_reg(e, CG_B32), diff = cg_reg(e, CG_B32);
  CgOperand spin = cg_reg(e, CG_PRED);
  cg_line(e, "@!%s bra $Lgrid_wait_%d;", CG_N(a->first), label);
  cg_line(e, "atom.add.release.gpu.global.u32 %s, [%s], %s;", CG_N(old), CG_N(a->counter),
          CG_N(a->inc));
  cg_raw(e, "$Lgrid_spin_%d:\n", label);
  cg_line(e, "ld.acquire.gpu.global.u32 %s, [%s];", CG_N(now), CG_N(a->counter));
  cg_line(e, "xor.b32 %s, %s, %s;", CG_N(diff), CG_N(now), CG_N(old));
  cg_line(e, "setp.gt.s32 %s, %s, -1;", CG_N(spin), CG_N(diff));
  cg_line(e, "@%s bra $Lgrid_spin_%d;", CG_N(spin), label);
  cg_raw(e, "$Lgrid_wait_%d:\n", label);
  cg_line(e, "bar.sync 0;");
}

/* The barrier before a round whose region an earlier round of this CTA
 * may still be reading (reduce.c's plan): where the instance's first trip
 * needs it too (after a loop's merge), always; else only from the CTA's
 * second instance on, since in its first nothing was read yet. `later` is
 * uniform over every CTA of the instance, so the branch keeps the barrier
 * whole. */
static void extra_barrier(CgCtx *c, int inst, const struct GridAddresses *a) {
  bool always = c->sites[inst].first_too;
  int label = c->em.labels++;
  if (!always) cg_line(&c->em, "@!%s bra.uni $Lfirst_%d;", CG_N(c->geo.later), label);
  if (a) grid_barrier(c, a);
  else cluster_barrier(c);
  if (!always) cg_raw(&c->em, "$Lfirst_%d:\n", label);
}

CgRed cg_across_grid(CgCtx *c, int inst, CgRed r) {
  int region = c->sites[inst].region, at = c->flip_ctas ? 0 : 8 * region;
  GridAddresses a = grid_addresses(c, region);
  if (c->sites[inst].extra_barrier && !c->flip_ctas) extra_barrier(c, inst, &a);
  cg_red_store(c, "global", a.publisher, a.partial, at, r, NULL);
  grid_barrier(c, &a);
  const CgGeometry *g = &c->geo;
  CgRed y = g->split <= g->threads
                ? cg_red_gather(c, "global.cg", a.reader, a.read, at, r, gather_lanes(g->split))
                : cg_red_gather_strided(c, "global.cg", g->tid, g->split, g->threads, a.read, at,
                                        16, r);
  if (g->split > 32 && g->threads > 32) y = cg_red_warps_round(c, inst, y); /* warps read */
  return y;
}
