/*
 * geometry.c — the one description of how a program instance's tiles are
 * spread over the GPU, and the code that follows from it.
 *
 * An element of a tile passes through a chain of levels, innermost first:
 *
 *   slot     VEC contiguous elements a thread holds, repeated R times
 *   lane     the G threads of a lane group (G <= 32) or of a CTA
 *   warp     the warps of a CTA, when G > 32
 *   cluster  the C CTAs of a thread-block cluster (sm_90 and later)
 *   grid     S clusters (or CTAs, C = 1) of the grid, through global memory
 *
 * A tile is spread over a prefix of that chain: a lane group, one CTA, a
 * cluster, or S of them. Every thread working on an instance gets one index
 * in [0, span), span = G * C * S, its "lane" below:
 *
 *   lane = tid % G                                     (C = S = 1)
 *   lane = tid + T * (cluster rank + C * split rank)   (G = T otherwise)
 *
 * and holds VEC contiguous elements at lane * VEC + j * span * VEC for
 * repeats j < R (layout.c chooses VEC and R per tile length). Reductions
 * combine level by level (reduce.c). Instances run in a grid-stride loop:
 * P = T / G side by side in a CTA, or one per cluster or per group of S
 * clusters, each CTA striding by the grid's count of such units.
 *
 * Also here: the kernel's prologue (thread indices, each layout's first
 * element, the ranks of multi-CTA levels), the instance loop, and the index
 * and guard of every slot. The launch shape in tj_kernel_info comes from
 * the same numbers (codegen.c), and the runtime sizes the grid from it in
 * one place (runtime/launch.c).
 */
#include "codegen/codegen.h"

static int64_t pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

/*
 * Lanes of a row of `vectors` vectors inside a warp, each lane taking R of
 * them, min_reps <= R <= 2 * min_reps (or up to max_reps where G >= 16):
 * the power of two G <= 32 whose G x R slots waste least, the most lanes
 * (the fewest repeats) among equals; 32 for rows over 32 lanes' twice
 * min_reps, 1 for rows of at most min_reps.
 * A row of G x R vectors so gets G lanes again: the runtime pads a row to
 * exactly this (rt_softmax_fit_block), not to the next power of two.
 */
static int warp_lanes(int64_t vectors, int min_reps, int max_reps) {
  if (vectors <= min_reps) return 1;
  if (vectors > 64LL * min_reps) return 32;
  int best = 32;
  int64_t best_slots = INT64_MAX;
  for (int g = 32; g >= 1; g /= 2) {
    int64_t r = (vectors + g - 1) / g;
    bool fits = r <= 2 * min_reps || (r <= max_reps && g >= 16);
    if (r >= min_reps && fits && g * r < best_slots) {
      best = g;
      best_slots = g * r;
    }
  }
  return best;
}

/*
 * Threads of a CTA per instance, for a CTA of `threads` threads whose
 * longest tile has `vectors` vectors, `held` elements of such tiles loaded
 * at once (softmax holds x; its backward y and dy, twice as many):
 *   - instances holding up to CG_WARP_ROW_MAX elements stay inside one
 *     warp, on warp_lanes' lanes of `min_reps` to `max_reps` vectors, so
 *     no shared memory or barrier is ever needed;
 *   - larger ones spread over min(T, vectors) threads, whole warps (the
 *     vectors rounded up to a power of two);
 *   - when instances may not share a CTA (a loop holding a reduction has
 *     bounds that differ between instances, so shfl.sync and bar.sync would
 *     be reached unequally), G = T.
 * min_reps, the least vectors a lane takes inside a warp: CG_LANE_REPS of
 * 16 bytes, or for rows in vectors narrower than 16 bytes (off their
 * alignment: element by element, or 4 or 8 bytes at a time)
 * CG_LANE_SCALARS elements' worth, so that a lane has several loads in
 * flight and its share of the row's work (its address, two butterflies,
 * the reciprocal) spreads over more elements. Measured on an H100
 * (bench/RESULTS.md, 2026-11-27), % of copy, 32 lanes against 8 elements a
 * lane: f32 N = 33 59.3 / 100.6, N = 77 94.4 / 100.0; bf16 N = 33 31.2 /
 * 79.1, N = 77 64.4 / 88.7, N = 127 90.4 / 94.7. And on an H200 (Y2), one
 * vector a lane (lanes of the next power of two) against CG_LANE_REPS at
 * the fitted BLOCK: f16 N = 48 88.4 / 100.4, 64 97.7 / 99.8, 80 75.9 /
 * 101.9, 160 74.9 / 101.3, 200 87.3 / 98.1, 256 96.1 / 99.5, f32 80
 * 87.2 / 100.6; but four vectors a lane where two do as well lost (f16 64
 * 90.7, 128 95.8).
 * max_reps, the most over 16 lanes or more: twice min_reps, or
 * CG_LANE_REPS_PHASED for 16-bit rows at their phase (16-byte vectors),
 * which are issue-bound (the rotation, the row's ends) and gain from fewer
 * padded slots. On an H200 (bench/RESULTS.md GG7, GG8), % of copy, 32
 * lanes of 3 vectors against 16 of 5: bf16 232614 x 577 (rows at every
 * phase) 89.5 / 97.5 and 89.9 / 97.6, f16 at offset 1 90.0 / 97.2 and
 * 90.4 / 97.2. Elsewhere 5 vectors a lane lost or tied: phased f32 300
 * (16 lanes) 99.1 / 97.9, bf16 300 (16 lanes of 3 against 8 of 5) 89.1 /
 * 90.4 and 90.7 / 90.1, f16 150 (8 of 3 against 4 of 5) 80.3 / 64.7;
 * aligned bf16 600 101.5 / 100.2, f16 150 87.6 / 73.0; and 7 vectors a
 * lane gained nothing (bf16 801, 97.7 / 97.3).
 */
int cg_lane_reps_max(int min_reps, bool phased, int vec) {
  return phased && vec == 8 ? CG_LANE_REPS_PHASED : 2 * min_reps;
}

int cg_group_size(int threads, int64_t held, int64_t vectors, bool packable, int min_reps,
                  int max_reps) {
  if (packable && held <= CG_WARP_ROW_MAX) return warp_lanes(vectors, min_reps, max_reps);
  vectors = pow2_ceil(vectors);
  if (packable && vectors < threads) return (int)(vectors < 32 ? 32 : vectors);
  return threads;
}

int cg_tiles_loaded(const tj_program *p, int64_t len) {
  int loaded = 0;
  for (int i = 0; i < p->ninsts; i++) {
    const IrInst *in = &p->insts[i];
    if (in->op == TJ_OP_LOAD && p->types[in->result].shape == TJ_TILE &&
        ir_tile_len(p, p->types[in->result]) == len)
      loaded++;
  }
  return loaded > 0 ? loaded : 1;
}

/* Clusters need sm_90. The grid level reads its S partials with a CTA's T
 * threads, ceil(S / T) a thread (reduce_ctas.c); S stays within the
 * specialization's 1024. An instance spread over several CTAs has them all. */
static tj_status check_levels(CgCtx *c) {
  const CgGeometry *g = &c->geo;
  if (g->cluster > 1 && c->arch < 90)
    return cg_fail(c, TJ_ERR_UNSUPPORTED,
                   "codegen: CLUSTER = %d needs thread-block clusters (sm_90 and later), not sm_%d; "
                   "use SPLIT instead",
                   g->cluster, c->arch);
  if (g->cluster < 1 || g->cluster > CG_MAX_CLUSTER || g->split < 1 || g->split > CG_MAX_SPLIT)
    return cg_fail(c, TJ_ERR_UNSUPPORTED,
                   "codegen: CLUSTER = %d and SPLIT = %d: a cluster holds 1 to %d CTAs and SPLIT "
                   "is 1 to %d",
                   g->cluster, g->split, CG_MAX_CLUSTER, CG_MAX_SPLIT);
  if (g->cluster > 1) c->features |= CG_FEAT_CLUSTER;
  return TJ_OK;
}

tj_status cg_plan_geometry(CgCtx *c, int64_t longest, int vec, int min_reps, int max_reps,
                           int loaded) {
  CgGeometry *g = &c->geo;
  g->warps = c->spec->num_warps;
  g->threads = 32 * g->warps;
  g->cluster = c->spec->cluster;
  g->split = c->spec->split;
  tj_status st = check_levels(c);
  if (st != TJ_OK) return st;
  bool one_cta = g->cluster == 1 && g->split == 1;
  g->group = one_cta ? cg_group_size(g->threads, longest * loaded, (longest + vec - 1) / vec,
                                     c->facts.packable, min_reps, max_reps)
                     : g->threads;
  g->programs = g->threads / g->group;
  g->span = (int64_t)g->group * g->cluster * g->split;
  return TJ_OK;
}

bool cg_multi_cta(const CgCtx *c) { return c->geo.cluster > 1 || c->geo.split > 1; }

int64_t cg_slot_offset(const CgCtx *c, const CgLayout *l, int slot) {
  return (int64_t)(slot / l->vec) * c->geo.span * l->vec + slot % l->vec;
}

CgOperand cg_guard(const CgCtx *c, const CgLayout *l, int repeat) {
  if (l->dynamic) return l->rep_guard[repeat];
  return repeat == l->partial ? l->guard : c->geo.inst_valid;
}

/* ---- prologue --------------------------------------------------------------- */

/* The ranks of a CTA spread with others over an instance: in its cluster,
 * and of its cluster (or itself) in its group of S; its group, the loop's
 * unit; and lane = tid + T * (cluster rank + C * split rank). */
static void cta_ranks(CgCtx *c) {
  CgEmit *e = &c->em;
  CgGeometry *g = &c->geo;
  const char *unit = g->cluster > 1 ? "%clusterid.x" : "%ctaid.x";
  const char *units = g->cluster > 1 ? "%nclusterid.x" : "%nctaid.x";
  g->cluster_rank = g->split_rank = cg_imm_int(CG_B32, 0);
  if (g->cluster > 1) {
    g->cluster_rank = cg_reg(e, CG_B32);
    cg_line(e, "mov.u32 %s, %%cluster_ctarank;", CG_N(g->cluster_rank));
  }
  g->unit = cg_reg(e, CG_B32);
  g->units = cg_reg(e, CG_B32);
  cg_line(e, "mov.u32 %s, %s;", CG_N(g->unit), unit);
  cg_line(e, "mov.u32 %s, %s;", CG_N(g->units), units);
  CgOperand rank = g->cluster_rank;
  if (g->split > 1) {
    CgOperand group = cg_reg(e, CG_B32), groups = cg_reg(e, CG_B32);
    g->split_rank = cg_reg(e, CG_B32);
    cg_line(e, "rem.u32 %s, %s, %d;", CG_N(g->split_rank), CG_N(g->unit), g->split);
    cg_line(e, "div.u32 %s, %s, %d;", CG_N(group), CG_N(g->unit), g->split);
    cg_line(e, "div.u32 %s, %s, %d;", CG_N(groups), CG_N(g->units), g->split);
    g->unit = group;
    g->units = groups;
    if (g->cluster > 1) {
      rank = cg_reg(e, CG_B32);
      cg_line(e, "mad.lo.u32 %s, %s, %d, %s;", CG_N(rank), CG_N(g->split_rank), g->cluster,
              CG_N(g->cluster_rank));
    } else {
      rank = g->split_rank;
    }
  }
  g->lane = cg_reg(e, CG_B32);
  cg_line(e, "mad.lo.u32 %s, %s, %d, %s;", CG_N(g->lane), CG_N(rank), g->threads, CG_N(g->tid));
}

static void thread_indices(CgCtx *c) {
  CgEmit *e = &c->em;
  CgGeometry *g = &c->geo;
  g->tid = cg_reg(e, CG_B32);
  cg_line(e, "mov.u32 %s, %%tid.x;", CG_N(g->tid));
  g->lane = g->tid;
  g->group_index = cg_imm_int(CG_B32, 0);
  if (cg_multi_cta(c)) {
    cta_ranks(c);
    return;
  }
  if (g->programs == 1) return;
  g->lane = cg_reg(e, CG_B32);
  g->group_index = cg_reg(e, CG_B32);
  cg_line(e, "and.b32 %s, %s, %d;", CG_N(g->lane), CG_N(g->tid), g->group - 1);
  cg_line(e, "shr.u32 %s, %s, %d;", CG_N(g->group_index), CG_N(g->tid), cg_log2(g->group));
}

static bool has_wide_tile(const CgCtx *c, int layout) {
  for (int v = 0; v < c->p->nvalues; v++)
    if (c->p->types[v].shape == TJ_TILE && c->p->types[v].elem == TJ_I64 &&
        c->vals[v].layout == layout)
      return true;
  return false;
}

/* Each layout's first element, lane * VEC (as i32, and as i64 where an i64
 * tile needs it), and the predicate of a lane holding the partial repeat. */
static void layout_bases(CgCtx *c) {
  const CgGeometry *g = &c->geo;
  for (int i = 0; i < c->nlayouts; i++) {
    CgLayout *l = &c->layouts[i];
    l->base32 = g->lane;
    if (l->vec > 1) {
      l->base32 = cg_reg(&c->em, CG_B32);
      cg_line(&c->em, "shl.b32 %s, %s, %d;", CG_N(l->base32), CG_N(g->lane), cg_log2(l->vec));
    }
    if (has_wide_tile(c, i)) {
      l->base64 = cg_reg(&c->em, CG_B64);
      cg_line(&c->em, "cvt.u64.u32 %s, %s;", CG_N(l->base64), CG_N(l->base32));
    }
    if (l->partial < 0) continue;
    l->slot_ok = cg_reg(&c->em, CG_PRED);
    cg_line(&c->em, "setp.lt.u32 %s, %s, %d;", CG_N(l->slot_ok), CG_N(g->lane), l->partial_lanes);
  }
}

/* Staged rows split over the grid (SPLIT > 1, a streamed tile and STAGE)
 * in rounds: every group of S units starts its row at once, reads its
 * shares, meets at the group's barrier in global memory and writes, in
 * step with the groups beside it on the same SMs, so that while they wait
 * at their barriers no CTA of the SM moves data. Where the rows take
 * STAGGER_ROUNDS rounds or more (a run-time test: the instances against
 * the groups), the groups of odd index start later, by a CTA's share of
 * the row at STAGGER_BYTES_PER_NS (4 us for the 64 KiB shares of the
 * plans), and stay out of step. Measured on an H200 (bench/RESULTS.md, EE3), % of copy, a
 * fixed delay of 4 us against none: bf16 128 x 2^20 83.4 / 80.7, f16 256
 * x 524288 84.8 / 82.4, f32 64 x 2^20 84.7 / 82.3, f32 128 x 524288 86.8 /
 * 83.7; 7 us and 2 us gained less, and delaying the upper half of the
 * groups instead of the odd ones no more. The spin reads %globaltimer
 * per lane, so its back edge is an ordinary (divergent) branch. */
#define STAGGER_ROUNDS       8
#define STAGGER_BYTES_PER_NS 16
static void stagger(CgCtx *c, CgOperand unit, CgOperand units) {
  const tj_spec *s = c->spec;
  if (s->split < 2 || s->stage <= 0 || !c->streamed || c->arch < 70) return;
  int64_t share = s->block * ir_dtype_size(s->dtype) / ((int64_t)s->cluster * s->split);
  int64_t ns = share / STAGGER_BYTES_PER_NS;
  if (ns <= 0) return;
  CgEmit *e = &c->em;
  CgGeometry *g = &c->geo;
  int label = e->labels++;
  CgOperand odd = cg_reg(e, CG_B32), even = cg_reg(e, CG_PRED), few = cg_reg(e, CG_PRED);
  CgOperand rounds = cg_reg(e, CG_B64), start = cg_reg(e, CG_B64), now = cg_reg(e, CG_B64);
  CgOperand wait = cg_reg(e, CG_PRED);
  cg_line(e, "and.b32 %s, %s, 1;", CG_N(odd), CG_N(unit));
  cg_line(e, "setp.eq.u32 %s, %s, 0;", CG_N(even), CG_N(odd));
  cg_line(e, "mul.wide.u32 %s, %s, %d;", CG_N(rounds), CG_N(units), STAGGER_ROUNDS);
  cg_line(e, "setp.lt.or.u64 %s, %s, %s, %s;", CG_N(few), CG_N(g->count), CG_N(rounds),
          CG_N(even));
  cg_line(e, "@%s bra.uni $Lstaggered_%d;", CG_N(few), label);
  cg_line(e, "mov.u64 %s, %%globaltimer;", CG_N(start));
  cg_raw(e, "$Lstagger_%d:\n", label);
  cg_line(e, "nanosleep.u32 256;");
  cg_line(e, "mov.u64 %s, %%globaltimer;", CG_N(now));
  cg_line(e, "sub.u64 %s, %s, %s;", CG_N(now), CG_N(now), CG_N(start));
  cg_line(e, "setp.lt.u64 %s, %s, %lld;", CG_N(wait), CG_N(now), (long long)ns);
  cg_line(e, "@%s bra $Lstagger_%d;", CG_N(wait), label); /* lanes may read other times */
  cg_raw(e, "$Lstaggered_%d:\n", label);
}

/* The grid-stride loop's head: the CTA's first instance and its stride; a
 * CTA spread with others over an instance strides by its unit (its
 * cluster, or its group of S), so all of them run the same instances. */
static void instance_loop_head(CgCtx *c) {
  CgEmit *e = &c->em;
  CgGeometry *g = &c->geo;
  CgOperand cta = g->unit, ctas = g->units, done;
  if (!cg_multi_cta(c)) {
    cta = cg_reg(e, CG_B32);
    ctas = cg_reg(e, CG_B32);
  }
  done = cg_reg(e, CG_PRED);
  g->count = cg_reg(e, CG_B64);
  g->first = cg_reg(e, CG_B64);
  g->stride = cg_reg(e, CG_B64);
  cg_line(e, "ld.param.u64 %s, [tj_programs];", CG_N(g->count));
  if (!cg_multi_cta(c)) {
    cg_line(e, "mov.u32 %s, %%ctaid.x;", CG_N(cta));
    cg_line(e, "mov.u32 %s, %%nctaid.x;", CG_N(ctas));
  }
  if (g->programs == 1) {
    cg_line(e, "cvt.u64.u32 %s, %s;", CG_N(g->first), CG_N(cta));
    cg_line(e, "cvt.u64.u32 %s, %s;", CG_N(g->stride), CG_N(ctas));
  } else {
    cg_line(e, "mul.wide.u32 %s, %s, %d;", CG_N(g->first), CG_N(cta), g->programs);
    cg_line(e, "mul.wide.u32 %s, %s, %d;", CG_N(g->stride), CG_N(ctas), g->programs);
  }
  cg_line(e, "setp.ge.u64 %s, %s, %s;", CG_N(done), CG_N(g->first), CG_N(g->count));
  cg_line(e, "@%s bra.uni $Ldone;", CG_N(done));
  stagger(c, cta, ctas);
}

void cg_geometry_prologue(CgCtx *c) {
  CgGeometry *g = &c->geo;
  thread_indices(c);
  layout_bases(c);
  cg_reduce_prologue(c);
  g->group64 = cg_imm_int(CG_B64, 0);
  if (g->programs > 1) {
    g->group64 = cg_reg(&c->em, CG_B64);
    cg_line(&c->em, "cvt.u64.u32 %s, %s;", CG_N(g->group64), CG_N(g->group_index));
  }
  if (cg_multi_cta(c)) {
    g->later = cg_reg(&c->em, CG_PRED);
    cg_line(&c->em, "setp.ne.u32 %s, 0, 0;", CG_N(g->later));
  }
  if (c->flip_ctas) {
    g->parity = cg_reg(&c->em, CG_B32);
    cg_line(&c->em, "mov.u32 %s, 0;", CG_N(g->parity));
  }
  instance_loop_head(c);
}

/* ---- the instance loop ------------------------------------------------------ */

/* Per instance: its index, its validity, and each layout's guard. */
void cg_instance_start(CgCtx *c) {
  CgEmit *e = &c->em;
  CgGeometry *g = &c->geo;
  cg_raw(e, "$Linst:\n");
  g->inst = g->first;
  g->inst_valid = cg_true();
  if (g->programs > 1) {
    g->inst = cg_reg(e, CG_B64);
    g->inst_valid = cg_reg(e, CG_PRED);
    cg_line(e, "add.s64 %s, %s, %s;", CG_N(g->inst), CG_N(g->first), CG_N(g->group64));
    cg_line(e, "setp.lt.u64 %s, %s, %s;", CG_N(g->inst_valid), CG_N(g->inst), CG_N(g->count));
  }
  for (int i = 0; i < c->nlayouts; i++) {
    CgLayout *l = &c->layouts[i];
    if (l->partial >= 0) l->guard = cg_and_pred(c, l->slot_ok, g->inst_valid);
  }
}

void cg_instance_end(CgCtx *c) {
  CgGeometry *g = &c->geo;
  CgOperand more = cg_reg(&c->em, CG_PRED);
  cg_line(&c->em, "add.s64 %s, %s, %s;", CG_N(g->first), CG_N(g->first), CG_N(g->stride));
  cg_line(&c->em, "setp.lt.u64 %s, %s, %s;", CG_N(more), CG_N(g->first), CG_N(g->count));
  if (cg_multi_cta(c)) cg_line(&c->em, "setp.eq.u32 %s, 0, 0;", CG_N(g->later));
  if (c->flip_ctas) cg_line(&c->em, "xor.b32 %s, %s, 8;", CG_N(g->parity), CG_N(g->parity));
  cg_line(&c->em, "@%s bra.uni $Linst;", CG_N(more));
  cg_raw(&c->em, "$Ldone:\n");
  cg_line(&c->em, "ret;");
}
