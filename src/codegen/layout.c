/*
 * layout.c — the layout of each tile length over the geometry's threads.
 *
 * geometry.c says which threads hold an instance's tiles: span of them, each
 * with its index `lane`. Here each tile length gets its vector width and
 * repeats: thread `lane` owns VEC contiguous elements at lane*VEC +
 * j*span*VEC for each repeat j < R, so a warp's accesses are coalesced
 * vectors. VEC is min(16, ALIGN) bytes of the narrowest element moved by
 * memory ops on tiles of that length (4 for f32, 8 for f16/bf16 at ALIGN
 * 16; 16 bytes for a phased layout, phase.c), provided that at least one of
 * them is provably contiguous and aligned (or phased); otherwise 1. VEC
 * divides the tile's length, so a vector is either wholly inside the tile or
 * wholly outside. A repeat that only some lanes hold is guarded by a
 * predicate (slot_ok).
 *
 * Also here: the default num_warps table (tj_default_num_warps) and the
 * occupancy request (.minnctapersm).
 */
#include "codegen/codegen.h"

/*
 * Default warps per CTA by BLOCK, the same for every dtype because the
 * registers a thread needs follow the elements it holds, all computed in f32:
 *
 *   BLOCK          warps  layout (VEC 4 f32, 8 f16/bf16)       row values per thread
 *   1 .. 1024        4    lane groups of 1..32 lanes, 4+ rows   2 VEC .. 32
 *                         (rows in vectors under 16 bytes: 8+ a lane;
 *                         softmax's BLOCK under 2 VEC: all in one lane)
 *   2048             4    one row per CTA, 128 threads           16
 *   4096             8    256 threads                            16
 *   8192            16    512 threads                            16
 *   16384           16    512 threads                            32
 *   32768           32    1024 threads                           32
 *
 * Every default specialization of the softmax templates assembles with no
 * spill and no local memory (checked by tests/test_ptxas_sweep.c).
 */
int tj_default_num_warps(int64_t block, tj_dtype dtype) {
  (void)dtype;
  if (block <= 2048) return 4;
  if (block <= 4096) return 8;
  if (block <= 16384) return 16;
  return 32;
}

static int64_t low_bit(int64_t v) { return v & -v; }

static int find_layout(const CgCtx *c, int64_t len) {
  for (int i = 0; i < c->nlayouts; i++)
    if (c->layouts[i].len == len) return i;
  return -1;
}

static tj_status collect_lengths(CgCtx *c) {
  for (int v = 0; v < c->p->nvalues; v++) {
    tj_type t = c->p->types[v];
    if (t.shape != TJ_TILE) continue;
    int64_t len = ir_tile_len(c->p, t);
    int at = find_layout(c, len);
    if (at < 0) {
      if (c->nlayouts == CG_MAX_LAYOUTS)
        return cg_fail(c, TJ_ERR_UNSUPPORTED, "codegen: more than %d distinct tile lengths",
                       CG_MAX_LAYOUTS);
      at = c->nlayouts++;
      c->layouts[at].len = len;
    }
    c->vals[v].layout = (int16_t)at;
  }
  return TJ_OK;
}

static bool is_memory(const IrInst *in) { return in->op == TJ_OP_LOAD || in->op == TJ_OP_STORE; }

static int pointee_size(const CgCtx *c, const IrInst *in) {
  return cg_elem_size((tj_elem)c->p->types[in->args[0]].elem);
}

/* The candidate VEC of a layout: min(16, ALIGN) bytes of its narrowest
 * memory element, at most the largest power of two dividing its length. */
static int candidate_vec(CgCtx *c, int layout) {
  int narrow = 0;
  for (int i = 0; i < c->p->ninsts; i++) {
    const IrInst *in = &c->p->insts[i];
    if (!is_memory(in) || c->vals[in->args[1]].layout != layout) continue;
    int size = pointee_size(c, in);
    if (!narrow || size < narrow) narrow = size;
  }
  int bytes = c->spec->align < 16 && !c->layouts[layout].phased ? c->spec->align : 16;
  int64_t vec = narrow ? bytes / narrow : 1;
  if (vec < 1) vec = 1;
  if (vec > low_bit(c->layouts[layout].len)) vec = (int)low_bit(c->layouts[layout].len);
  return (int)vec;
}

/* VEC, if at least one memory op on the layout moves whole vectors. */
static void choose_vec(CgCtx *c, int layout) {
  int vec = candidate_vec(c, layout);
  bool contiguous = false;
  for (int i = 0; i < c->p->ninsts && vec > 1 && !contiguous; i++) {
    const IrInst *in = &c->p->insts[i];
    contiguous =
        is_memory(in) && c->vals[in->args[1]].layout == layout && cg_access_chunk(c, i, vec) > 1;
  }
  c->layouts[layout].vec = contiguous ? vec : 1;
}

/* The longest tile, its VEC, and the least and most vectors a lane of a
 * row inside a warp takes (cg_group_size): CG_LANE_SCALARS elements' worth
 * where its vectors are narrower than 16 bytes (rows off their alignment,
 * unphased, or element by element), else CG_LANE_REPS; at most twice
 * that, or CG_LANE_REPS_PHASED where the tile is phased 16-bit elements. */
static void longest_tile(const CgCtx *c, int64_t *longest, int *vec, int *min_reps,
                         int *max_reps) {
  *longest = 1;
  *vec = 1;
  *min_reps = CG_LANE_SCALARS;
  *max_reps = 2 * CG_LANE_SCALARS;
  for (int i = 0; i < c->nlayouts; i++)
    if (c->layouts[i].len > *longest) {
      const CgLayout *l = &c->layouts[i];
      *longest = l->len;
      *vec = l->vec;
      bool narrow = l->vec == 1 || (c->spec->align < 16 && !l->phased);
      *min_reps = CG_LANE_REPS;
      if (narrow) *min_reps = l->vec < CG_LANE_SCALARS ? CG_LANE_SCALARS / l->vec : 1;
      *max_reps = cg_lane_reps_max(*min_reps, l->phased, l->vec);
    }
}

static tj_status shape_layout(CgCtx *c, CgLayout *l) {
  int64_t span = c->geo.span * l->vec;
  int64_t reps = (l->len + span - 1) / span;
  if (reps > (1 << 24))
    return cg_fail(c, TJ_ERR_UNSUPPORTED,
                   "codegen: a tile of %lld elements is %lld repeats per thread",
                   (long long)l->len, (long long)reps);
  l->reps = (int)reps;
  l->slots = l->reps * l->vec;
  l->partial = l->len % span ? l->reps - 1 : -1;
  l->partial_lanes = (int)((l->len - (reps - 1) * span) / l->vec);
  l->slot_ok = l->guard = cg_true();
  return TJ_OK;
}

/* What a thread holds of every tile, streamed or not, fits in registers. */
static tj_status check_slots(CgCtx *c) {
  for (int i = 0; i < c->nlayouts; i++) {
    const CgLayout *l = &c->layouts[i];
    if (l->slots > CG_MAX_SLOTS)
      return cg_fail(
          c, TJ_ERR_UNSUPPORTED,
          "codegen: a tile of %lld elements needs %d per thread with %d warps (at most %d) and "
          "cannot be streamed (stream.c: no loops, every store after the last reduction); "
          "use more warps, CLUSTER or SPLIT, or a smaller BLOCK",
          (long long)l->len, l->slots, c->geo.warps, CG_MAX_SLOTS);
  }
  return TJ_OK;
}

tj_status cg_plan_layout(CgCtx *c) {
  tj_status st = collect_lengths(c);
  if (st != TJ_OK) return st;
  cg_plan_phase(c);
  for (int i = 0; i < c->nlayouts; i++) choose_vec(c, i);
  int64_t longest;
  int vec, min_reps, max_reps;
  longest_tile(c, &longest, &vec, &min_reps, &max_reps);
  st = cg_plan_geometry(c, longest, vec, min_reps, max_reps, cg_tiles_loaded(c->p, longest));
  if (st != TJ_OK) return st;
  for (int i = 0; i < c->nlayouts && st == TJ_OK; i++) st = shape_layout(c, &c->layouts[i]);
  if (st == TJ_OK) st = cg_plan_stream(c);
  cg_unphase_streamed(c);
  if (st == TJ_OK) st = check_slots(c);
  return st;
}

CgLayout *cg_layout_of(CgCtx *c, int value) { return &c->layouts[c->vals[value].layout]; }

/* 2 registers (a 64-bit row address) for each pointer a tile is loaded
 * from or stored to beyond softmax's two (softmax backward has three: at 56
 * registers, BLOCK 512 in f32 spilled 16 bytes on sm_90). */
static int extra_bases(const CgCtx *c) {
  int bases[8], count = 0;
  for (int i = 0; i < c->p->ninsts && count < 8; i++) {
    const IrInst *in = &c->p->insts[i];
    if (!is_memory(in) || c->p->types[in->args[1]].shape != TJ_TILE) continue;
    bool seen = false;
    for (int j = 0; j < count; j++) seen |= bases[j] == in->args[0];
    if (!seen) bases[count++] = in->args[0];
  }
  return count > 2 ? 2 * (count - 2) : 0;
}

/*
 * Occupancy. Left alone, ptxas spends registers freely (a softmax row of 32
 * values per thread took 72), and fewer CTAs then fit on an SM to keep loads
 * in flight. So the kernel asks for k CTAs per SM (.minnctapersm), which caps
 * registers at 64K / (k * threads): k is the most whose cap still leaves room
 * for what the tiles need, estimated as the slots of the loaded tiles plus 18
 * registers for addresses and indices (24 with lane groups, whose instances
 * carry their own; with 16, sm_80's ptxas spilled at BLOCK 8192), and at
 * most what the SM holds (arch.c); 14 more where an instance spans CTAs or
 * is streamed (their ranks, fused pairs, piece counters and workspace
 * addresses), and those a capped stash holds its first pieces in
 * (stream.c, at most CG_HOLD_REGS); and an eighth of the values more from
 * 64 of them on (f32 at 64 a thread spilled under 96 registers); per
 * phased layout 2 more, and 2 per vector a thread holds, at most 10 (f32
 * BLOCK 4096, 4 vectors, spilled 8 bytes at 40 registers on sm_80 with 6;
 * 16-bit BLOCK 8192, 2 vectors, needs no more than 6, where 10 cost it a
 * third CTA an SM; f32 BLOCK 16384, 8 vectors, lost its second CTA an SM
 * at 18), except in 16-bit vectors (f16 and bf16 N = 12345 in 8 warps,
 * 7 vectors a thread, spilled 16 bytes on sm_90 and 196 on sm_75 at 3
 * CTAs an SM, 80 registers, with 10). Softmax on
 * sm_90: 16 values per thread get 34 to 42 registers (1536 to 1920 threads
 * per SM), N = 1024 gets 56 (9 CTAs), N = 16384 64 (2 CTAs), 64 values 96
 * to 127. Each f32 scalar parameter (a scale) 2 more: the masked softmax's
 * f16 BLOCK 8192 in 256 threads spilled 40 bytes at 48 registers without
 * them. A layout moved element by element (VEC 1: rows whose x and y sit
 * at different phases) of more than 8 slots a register more per slot, for
 * the guard of each access: softmax's f32 BLOCK 1024 so spilled 92 bytes at
 * 56 registers (2026-11-26), and a quarter or half a slot more left some
 * of its kernels and log-softmax's spilling. 0 when k < 2, except for
 * kernels with more than two tile pointers, which ask for 1: left alone,
 * ptxas of CUDA 13.0 for sm_80 gave softmax backward's streamed split
 * (f16, N = 2^20, SPLIT 108, phased) 40 registers and spilled 8 bytes;
 * asked for 1 CTA, it took 56 and did not.
 */
/* f32 scalar parameters (a scale, say): each a register that every tile
 * operation using it keeps, besides the predicates and selects around it. */
static int float_params(const CgCtx *c) {
  int count = 0;
  for (int i = 0; i < c->p->ninsts; i++) {
    const IrInst *in = &c->p->insts[i];
    count += in->op == TJ_OP_PARAM && c->p->types[in->result].shape == TJ_SCALAR &&
             c->p->types[in->result].elem == TJ_F32;
  }
  return count;
}

int cg_register_need(const CgCtx *c) {
  int loaded = 0;
  for (int i = 0; i < c->p->ninsts; i++) {
    const IrInst *in = &c->p->insts[i];
    if (in->op == TJ_OP_LOAD && c->p->types[in->result].shape == TJ_TILE)
      loaded += c->layouts[c->vals[in->result].layout].slots;
  }
  int need = (loaded > 0 ? loaded : 1) + (c->geo.programs > 1 ? 24 : 18) + extra_bases(c);
  if (cg_multi_cta(c) || c->streamed) need += 14; /* ranks, pairs, pieces, wide addresses */
  if (loaded >= 64) need += loaded / 8;
  need += 2 * float_params(c);
  for (int i = 0; i < c->nlayouts; i++) {
    if (c->layouts[i].vec == 1 && c->layouts[i].slots > 8) /* a guard each */
      need += c->layouts[i].slots;
    int tests = 2 + 2 * c->layouts[i].slots / c->layouts[i].vec;
    bool halves = c->layouts[i].vec == 8; /* 16-bit vectors: uncapped (see above) */
    if (c->layouts[i].phased) /* its rotated base; wrap and alignment tests per vector */
      need += tests < 10 || halves ? tests : 10;
  }
  return need;
}

int cg_min_ctas_per_sm(const CgCtx *c) {
  int need = cg_register_need(c) + (c->streamed ? c->stream.held_regs : 0);
  const CgArch *a = cg_arch_find(c->arch);
  int threads = c->geo.threads;
  int k = 65536 / (threads * need), most = a ? a->threads_per_sm / threads : 1;
  if (k > most) k = most;
  return k >= 2 ? k : extra_bases(c) ? 1 : 0;
}
