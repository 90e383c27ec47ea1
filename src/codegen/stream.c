/*
 * stream.c — tiles too large for a thread's registers, moved in pieces.
 *
 * A thread of a CTA of T threads can keep about 32768 / T tile elements in
 * registers (half of what the register file gives it at one CTA per SM,
 * the rest for addresses, masks and temporaries; at most CG_MAX_SLOTS;
 * shared by the tiles of the widest length it loads; cg_stream_limit).
 * When the widest tile needs more, its repeats are taken P at a time: the
 * thread's slots are one piece of P repeats, and the instance's code runs
 * in loops over the K pieces instead of once over all of them.
 *
 * A reduction needs every piece before its result exists, so the program
 * is cut into phases. An instruction runs in the phase after the one whose
 * streamed reduction it depends on (directly or through scalars), else in
 * the phase of its operands:
 *
 *   phase 0:   for each piece: load x, ...; fold the piece into the thread's
 *              running reductions      then: the reductions across threads
 *   phase 1:   scalars from them; for each piece: load x again, ..., store
 *
 * A tile a later phase needs is computed again there from its operands,
 * loads included: x is read once per phase that needs it (softmax: twice,
 * with max and sum in one phase as a fused pair, reduce.c). The last phase
 * walks the pieces in reverse, so it starts with what the previous phase
 * read last, which is the most likely to be still in L2. That is valid when
 * every store is in the last phase (a load of an earlier phase then reads
 * what the kernel has not yet written; within the last phase a thread loads
 * and stores each piece's elements itself, in place included), and when the
 * program has no loops of its own; otherwise a tile too large for the
 * registers is refused as before. Reductions fold pieces in order, so their
 * sums round differently from the unstreamed order (within testing.md).
 *
 * Non-streamed values (scalars, pointers, other tile lengths) are computed
 * once, before the loop of their phase.
 *
 * STAGE (tj_spec_options.stage) streams a tile wider than STAGE elements a
 * thread in pieces of STAGE, and keeps every load that more than one phase
 * needs in shared memory: the first phase that needs it loads it from
 * memory and stores the piece's registers into the thread's own slots of
 * its stash, later phases read them back from there instead of loading
 * again (nothing crosses threads, so no barrier is needed). Each slot holds
 * exactly what the registers held, masked-off elements' `other` included,
 * so every phase sees the values the first one did, in place included.
 * A stash is laid out [piece][unit][thread] in units of up to 16 bytes (U),
 * so a warp's accesses are contiguous. STASH (tj_spec_options.stash) caps
 * its bytes: the first pieces then stay in registers (held: as many as the
 * registers the SM's CTAs leave spare take, a register an element, at most
 * CG_HOLD_REGS and CG_HOLD_PIECES; each phase runs them unrolled, before
 * its loop or, walking backwards, after it), the next ones that fit go to
 * the stash, and later phases read the rest from memory again. Those are
 * the pieces the first phase read last and the last phase walks first
 * (backwards), so they are the likeliest to be still in L2: a row wider
 * than the grid's shared memory is read once, less what L2 does not keep of
 * the rest. Holding a piece of f32 rows of 2^24 in registers (two CTAs an
 * SM, 93 registers) ran them at 80-85% of copy on an H100 against 77-81%
 * (bench/RESULTS.md, X14). A CTA then holds its share of the row on chip
 * with few registers, and several CTAs share an SM: one loads while another
 * computes (bench/experiments/softmax_staged_rows.cu). On sm_80 and later
 * the first phase copies its pieces straight into the stash with cp.async,
 * a piece ahead of the one it computes on (the prefetch, below).
 *
 * Where a CTA of a grid split takes its rows in turn, the last phase also
 * copies the next row's kept pieces into the slots it empties and folds
 * them (PIPE, below): one row's writes overlap the next row's reads and
 * arithmetic, and the next row's first phase takes only the rest.
 *
 * Where the tile ends inside the last piece (K pieces of P repeats for
 * fewer than K * P), that piece runs alone after the loop (before it,
 * walking backwards) over only the repeats that hold elements
 * (tail_lowered): bf16 rows of 50257 ran at 83% of copy so on an H200
 * against 79% (bench/RESULTS.md, DD6).
 */
#include "codegen/codegen.h"

#include <stdio.h>
#include <string.h>

static bool streamed_value(const CgCtx *c, int v) {
  return v != IR_NONE && c->p->types[v].shape == TJ_TILE && c->vals[v].layout == c->stream.layout;
}

static bool is_reduce(const IrInst *in) {
  return in->op == TJ_OP_REDUCE_MAX || in->op == TJ_OP_REDUCE_SUM;
}

/* An instruction that runs once per piece: a streamed tile, a store to
 * streamed offsets, or a reduction of a streamed tile. */
bool cg_stream_per_piece(const CgCtx *c, int i) {
  const IrInst *in = &c->p->insts[i];
  if (in->op == TJ_OP_STORE || is_reduce(in))
    return streamed_value(c, in->args[in->op == TJ_OP_STORE]);
  return streamed_value(c, in->result);
}

/* ---- plan -------------------------------------------------------------------- */

bool cg_has_loop(const tj_program *p) {
  for (int i = 0; i < p->ninsts; i++)
    if (p->insts[i].op == TJ_OP_FOR) return true;
  return false;
}

/* Phases (c->stream.phase per instruction); false when a store is not in
 * the last one. */
static bool assign_phases(CgCtx *c) {
  const tj_program *p = c->p;
  CgStream *st = &c->stream;
  int *avail = cg_arena_alloc(&c->arena, sizeof *avail * ((size_t)p->nvalues + 1));
  if (!avail) return false;
  st->phases = 1;
  for (int i = 0; i < p->ninsts; i++) {
    const IrInst *in = &p->insts[i];
    int ph = 0;
    for (int k = 0; k < in->nargs; k++)
      if (avail[in->args[k]] > ph) ph = avail[in->args[k]];
    if (cg_fused_sum(c, i)) ph = st->phase[c->partner[i]];
    st->phase[i] = ph;
    if (ph + 1 > st->phases) st->phases = ph + 1;
    if (in->result != IR_NONE)
      avail[in->result] = ph + (is_reduce(in) && streamed_value(c, in->args[0]) ? 1 : 0);
  }
  for (int i = 0; i < p->ninsts; i++)
    if (p->insts[i].op == TJ_OP_STORE && st->phase[i] != st->phases - 1) return false;
  return true;
}

/* The layout with the most slots per thread, or -1. */
static int widest_layout(const CgCtx *c) {
  int best = -1;
  for (int i = 0; i < c->nlayouts; i++)
    if (best < 0 || c->layouts[i].slots > c->layouts[best].slots) best = i;
  return best;
}

/* A thread spread with others over CTAs needs some registers more (ranks,
 * cluster and workspace addresses); ptxas for sm_90 fits that beside 32
 * elements at 64 registers, ptxas for the other archs does not (the ptxas
 * sweep checks every default), so there such a thread keeps half. */
int cg_stream_limit(const CgCtx *c) {
  int limit = 32768 / c->geo.threads, w = widest_layout(c);
  if (cg_multi_cta(c) && c->arch != 90) limit /= 2;
  /* Shared by the tiles of that length a piece loads (softmax backward's y
   * and dy: at 32 elements each, a split of 1024-thread CTAs spilled 640
   * bytes at 64 registers on sm_90). */
  if (w >= 0) limit /= cg_tiles_loaded(c->p, c->layouts[w].len);
  if (c->spec->stage && c->spec->stage < limit) limit = c->spec->stage; /* STAGE: fewer */
  return limit < CG_MAX_SLOTS ? limit : CG_MAX_SLOTS;
}

/* P repeats a piece: as many as the registers take; fewer if that number
 * divides the repeats and the largest number that fits does not. */
static int piece_repeats(const CgLayout *l, int limit) {
  int most = limit > l->vec ? limit / l->vec : 1, piece = most; /* a STAGE below VEC: one */
  while (piece > most / 2 && l->reps % piece) piece--;
  return l->reps % piece ? most : piece;
}

tj_status cg_plan_stream(CgCtx *c) {
  CgStream *st = &c->stream;
  int w = widest_layout(c), limit = cg_stream_limit(c);
  st->layout = -1;
  c->streamed = false;
  if (w < 0 || c->layouts[w].slots <= limit) return TJ_OK;
  CgLayout *l = &c->layouts[w];
  int piece = piece_repeats(l, limit);
  if (cg_has_loop(c->p) || piece < 1) return TJ_OK;
  st->layout = w;
  st->phase = cg_arena_alloc(&c->arena, sizeof *st->phase * ((size_t)c->p->ninsts + 1));
  if (!st->phase) return cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  c->streamed = true;
  cg_find_pairs(c);
  if (!assign_phases(c)) {
    st->layout = -1;
    c->streamed = false;
    cg_find_pairs(c);
    return TJ_OK;
  }
  st->pieces = (l->reps + piece - 1) / piece;
  st->tail = l->reps - (st->pieces - 1) * piece;
  st->slots = piece * l->vec;
  st->step = (int64_t)piece * c->geo.span * l->vec;
  st->cut = l->partial >= 0;
  l->dynamic = l->partial >= 0 || l->reps % piece != 0;
  l->reps = piece;
  l->slots = piece * l->vec;
  l->partial = -1;
  if (l->dynamic && !(l->rep_guard = cg_new_slots(c, piece))) return c->status;
  return TJ_OK;
}

static bool tail_lowered(const CgCtx *c);

/* A piece's repeat j holds elements (its first position: lane*VEC + piece
 * start + j*span*VEC; a phased layout's base is rotated, its positions are
 * not) only where they are inside the tile. Every repeat of a piece that is
 * `whole` does: one the thread computes on where the last piece is lowered
 * alone over its own repeats (tail_lowered) and no repeat is cut. Its
 * guards then hold for the whole instance, and reductions select no
 * identity for its slots (reduce.c): bf16 rows of 50257 at any phase
 * (pieces of 5, 5 and 3 repeats) took a select an element. */
static void piece_guards(CgCtx *c, bool whole) {
  CgLayout *l = &c->layouts[c->stream.layout];
  if (!l->dynamic) return;
  if (whole && !c->stream.cut && tail_lowered(c)) {
    for (int j = 0; j < l->reps; j++) l->rep_guard[j] = c->geo.inst_valid;
    return;
  }
  CgOperand first = cg_reg(&c->em, CG_B32);
  CgOperand base = l->phased && l->rotated.cls == CG_B32 ? l->lanes : l->base32;
  cg_line(&c->em, "add.s32 %s, %s, %s;", CG_N(first), CG_N(base), CG_N(c->piece_start));
  for (int j = 0; j < l->reps; j++) {
    CgOperand ok = cg_reg(&c->em, CG_PRED);
    int64_t below = l->len - (int64_t)j * c->geo.span * l->vec;
    cg_line(&c->em, "setp.lt.u32 %s, %s, %lld;", CG_N(ok), CG_N(first), (long long)below);
    l->rep_guard[j] = cg_and_pred(c, ok, c->geo.inst_valid);
  }
}

/* ---- staging ----------------------------------------------------------------- */

int cg_max_shared(int arch) {
  if (arch >= 90 && arch <= 103) return 227 * 1024;
  if (arch == 80 || arch == 87) return 163 * 1024;
  if (arch == 75) return 64 * 1024;
  return 99 * 1024;
}

static void mark_needed(const CgCtx *c, int ph, uint8_t *need);

/* Bytes of the thread's share of a piece of load i, and its unit (U). */
static int piece_bytes(const CgCtx *c, int i) {
  const IrInst *in = &c->p->insts[i];
  return c->stream.slots * cg_elem_size((tj_elem)c->p->types[in->result].elem);
}

static int unit_bytes(int bytes) {
  int u = 16;
  while (bytes % u) u /= 2;
  return u;
}

/* A stash for every streamed load that two phases or more need (use). */
static void plan_stash(CgCtx *c, uint8_t *need) {
  CgStream *st = &c->stream;
  const tj_program *p = c->p;
  size_t n = (size_t)p->ninsts + 1;
  uint8_t *phases = cg_arena_alloc(&c->arena, n);
  st->stash = cg_arena_alloc(&c->arena, sizeof *st->stash * n);
  st->fetched = cg_arena_alloc(&c->arena, sizeof *st->fetched * n);
  if (!phases || !st->stash || !st->fetched) {
    cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
    return;
  }
  memset(phases, 0, n);
  for (int ph = 0; ph < st->phases; ph++) {
    mark_needed(c, ph, need);
    for (int i = 0; i < p->ninsts; i++) phases[i] += need[i] && p->insts[i].op == TJ_OP_LOAD;
  }
  /* STASH: the pieces that its bytes hold, each piece of every stashed
   * load (a piece's units are whole 16-byte multiples for a CTA); when
   * they are not all, the first pieces in registers (held), then those. */
  int64_t per_piece = 0, regs = 0, stashed = st->pieces;
  int slots = c->layouts[st->layout].slots;
  for (int i = 0; i < p->ninsts; i++)
    if (phases[i] >= 2) {
      per_piece += ((int64_t)piece_bytes(c, i) * c->geo.threads + 15) / 16 * 16;
      regs += piece_bytes(c, i) > 4 * slots ? 2 * slots : slots; /* 64-bit: two an element */
    }
  if (c->spec->stash > 0 && per_piece > 0 && c->spec->stash / per_piece < st->pieces)
    stashed = c->spec->stash / per_piece;
  int64_t bytes = c->shared.bytes; /* in 64 bits: a CTA's share may be 2^30 elements */
  for (int i = 0; i < p->ninsts; i++) {
    st->stash[i] = st->fetched[i] = -1;
    if (phases[i] < 2 || stashed == 0 || bytes > cg_max_shared(c->arch)) continue;
    /* On a 128-byte line: cp.async fills the stash in 32-byte sectors, and
     * a stash 16 bytes off them cost aligned rows in clusters 6 to 9
     * points of copy on an H100 (bench/RESULTS.md, 2026-11-27). */
    int64_t at = (bytes + 127) / 128 * 128;
    st->stash[i] = (int)at;
    bytes = at + (int64_t)piece_bytes(c, i) * c->geo.threads * stashed;
  }
  if (bytes > cg_max_shared(c->arch)) {
    cg_fail(c, TJ_ERR_UNSUPPORTED,
            "codegen: STAGE %d keeps %lld bytes or more of shared memory a CTA, more than sm_%d "
            "allows (%d): a larger STAGE, more threads, or a cluster or split",
            c->spec->stage, (long long)bytes, c->arch, cg_max_shared(c->arch));
    return;
  }
  c->shared.bytes = (int)bytes;
  /* Held pieces take the registers that the CTAs this shared memory lets an
   * SM hold leave beyond the kernel's own (at most CG_HOLD_REGS, and at
   * most CG_HOLD_PIECES pieces, each unrolled in every phase): two CTAs of
   * 256 threads an SM on sm_90 leave 64, three on sm_80 none. ptxas
   * allocates registers in eights. */
  st->held = st->held_regs = 0;
  st->held_piece = -1;
  if (stashed > 0 && stashed < st->pieces && regs > 0) {
    int64_t ctas = (cg_max_shared(c->arch) + 1024) / (bytes + 1024);
    int64_t budget = ctas > 0 ? 65536 / (ctas * c->geo.threads) / 8 * 8 : 0;
    int64_t spare = (budget < 255 ? budget : 255) - cg_register_need(c);
    int64_t held = (spare < CG_HOLD_REGS ? spare : CG_HOLD_REGS) / regs;
    if (held > CG_HOLD_PIECES) held = CG_HOLD_PIECES;
    if (held > 0) st->held = (int)(held < st->pieces - stashed ? held : st->pieces - stashed);
    st->held_regs = st->held * (int)regs;
  }
  st->kept = st->held + (int)stashed;
  st->holding = cg_arena_alloc(&c->arena, sizeof *st->holding * n * (size_t)(st->held + 1));
  if (!st->holding) cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
}

CgOperand **cg_held_slots(CgCtx *c, int inst, bool *fetch) {
  CgStream *st = &c->stream;
  if (!c->streamed || !st->stash || st->stash[inst] < 0 || st->held_piece < 0) return NULL;
  *fetch = !cg_stash_holds(c, inst);
  return &st->holding[(size_t)inst * (size_t)st->held + (size_t)st->held_piece];
}

bool cg_stash_holds(CgCtx *c, int inst) {
  CgStream *st = &c->stream;
  if (!c->streamed || !st->stash || st->stash[inst] < 0) return false;
  if (st->fetched[inst] < 0) st->fetched[inst] = st->current;
  return st->fetched[inst] != st->current;
}

/* q = n / d where d > 0 divides n (n >= 0): a piece's start is a whole
 * number of steps. ptxas expands div.u32 by a constant into a reciprocal
 * through the XU pipe (about fifteen instructions a piece), so this is a
 * shift by d's factors of two, then a multiply by the inverse of its odd
 * part modulo 2^32, which is exact for a multiple. */
static void exact_quotient(CgCtx *c, CgOperand q, CgOperand n, int64_t d) {
  int shift = 0;
  while (!(d & 1)) d >>= 1, shift++;
  uint32_t inverse = (uint32_t)d; /* Newton: each step doubles the bits right */
  for (int i = 0; i < 5; i++) inverse *= 2u - (uint32_t)d * inverse;
  CgOperand at = n;
  if (shift) {
    cg_line(&c->em, "shr.u32 %s, %s, %d;", CG_N(q), CG_N(n), shift);
    at = q;
  }
  if (inverse != 1)
    cg_line(&c->em, "mul.lo.u32 %s, %s, %u;", CG_N(q), CG_N(at), inverse);
  else if (!shift)
    cg_line(&c->em, "mov.u32 %s, %s;", CG_N(q), CG_N(n));
}

/* The thread's first unit of the piece being lowered: tj_smem + stash +
 * ((piece * units) * T + tid) * U, piece = piece_start / step. */
static CgOperand stash_address(CgCtx *c, int inst, int unit, int units) {
  CgEmit *e = &c->em;
  CgOperand smem = cg_reg(e, CG_B32), mine = cg_reg(e, CG_B32), piece = cg_reg(e, CG_B32);
  CgOperand at = cg_reg(e, CG_B32);
  cg_line(e, "mov.u32 %s, tj_smem;", CG_N(smem));
  cg_line(e, "mad.lo.u32 %s, %s, %d, %s;", CG_N(mine), CG_N(c->geo.tid), unit, CG_N(smem));
  exact_quotient(c, piece, c->piece_start, c->stream.step);
  cg_line(e, "mad.lo.u32 %s, %s, %d, %s;", CG_N(at), CG_N(piece), units * unit * c->geo.threads,
          CG_N(mine));
  int64_t offset = c->stream.stash[inst] - (int64_t)c->stream.held * units * unit * c->geo.threads;
  cg_line(e, "%s.u32 %s, %s, %lld;", offset < 0 ? "sub" : "add", CG_N(at), CG_N(at),
          (long long)(offset < 0 ? -offset : offset));
  return at;
}

static const char *class_type(CgClass cls) {
  return cls == CG_F32 ? "f32" : cls == CG_B64 ? "b64" : cls == CG_B16 ? "b16" : "b32";
}

/* Moves the piece's registers to (store) or from its stash at `at`, unit
 * by unit; 16-bit elements travel in b32 words of two. With `whole`, a
 * store skips unit u where whole[u] holds (the prefetch copied it); with
 * `packed`, `from` holds the words themselves (words[i]: slots 2i, 2i + 1;
 * units of whole words, as a prefetched piece's 16-byte units are). */
static void stash_units(CgCtx *c, int inst, CgOperand at, const CgOperand *from, CgOperand *to,
                        const CgOperand *whole, bool packed) {
  bool store = from != NULL;
  const CgOperand *slots = store ? from : to;
  int bytes = piece_bytes(c, inst), unit = unit_bytes(bytes);
  int esize = bytes / c->stream.slots, per = unit / esize;
  /* The units of the slots lowered: the last piece's tail may take fewer
   * (whole units: tail_lowered). */
  int units = c->layouts[c->stream.layout].slots * esize / unit;
  bool pairs = esize == 2 && per > 1;
  int words = pairs ? per / 2 : per;
  if (packed && !pairs) {
    cg_fail(c, TJ_ERR_UNSUPPORTED, "codegen: packed stash units of %d bytes", unit);
    return;
  }
  for (int u = 0; u < units; u++) {
    if (whole && cg_is_true(whole[u])) continue;
    CgOperand w[4] = {{0}};
    char list[160] = "", vec[16] = "";
    for (int k = 0; k < words; k++) {
      w[k] = packed ? slots[u * words + k] : pairs ? cg_reg(&c->em, CG_B32) : slots[u * per + k];
      if (pairs && store && !packed)
        cg_line(&c->em, "mov.b32 %s, {%s, %s};", CG_N(w[k]), CG_N(slots[u * per + 2 * k]),
                CG_N(slots[u * per + 2 * k + 1]));
      CgName name = cg_name(w[k]);
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "", name.s);
    }
    if (words > 1) snprintf(vec, sizeof vec, "v%d.", words);
    const char *type = class_type(w[0].cls);
    const char *open = words > 1 ? "{" : "", *close = words > 1 ? "}" : "";
    char guard[40] = "";
    if (whole) snprintf(guard, sizeof guard, "@!%s ", CG_N(whole[u]));
    if (store)
      cg_line(&c->em, "%sst.shared.%s%s [%s+%d], %s%s%s;", guard, vec, type, CG_N(at),
              u * unit * c->geo.threads, open, list, close);
    else
      cg_line(&c->em, "ld.shared.%s%s %s%s%s, [%s+%d];", vec, type, open, list, close, CG_N(at),
              u * unit * c->geo.threads);
    for (int k = 0; k < words && pairs && !store; k++)
      cg_line(&c->em, "mov.b32 {%s, %s}, %s;", CG_N(to[u * per + 2 * k]),
              CG_N(to[u * per + 2 * k + 1]), CG_N(w[k]));
  }
}

static void stash_move(CgCtx *c, int inst, const CgOperand *from, CgOperand *to) {
  int bytes = piece_bytes(c, inst), unit = unit_bytes(bytes);
  stash_units(c, inst, stash_address(c, inst, unit, bytes / unit), from, to, NULL, false);
}

int cg_stash_branch(CgCtx *c, bool kept) {
  CgStream *st = &c->stream;
  if (st->kept >= st->pieces || st->folding_kept) return -1;
  int label = c->em.labels++;
  CgOperand is_kept = cg_reg(&c->em, CG_PRED);
  cg_line(&c->em, "setp.lt.s32 %s, %s, %lld;", CG_N(is_kept), CG_N(c->piece_start),
          (long long)(st->step * st->kept));
  cg_line(&c->em, "@%s%s bra.uni $L%s_%d;", kept ? "" : "!", CG_N(is_kept),
          kept ? "kept" : "unkept", label);
  return label;
}

bool cg_stream_evict_first(const CgCtx *c, int inst) {
  const CgStream *st = &c->stream;
  if (!c->streamed || !st->stash || st->kept >= st->pieces) return false;
  return c->p->insts[inst].op == TJ_OP_STORE || st->current == st->phases - 1;
}

/* A piece the stash does not keep skips the store. */
void cg_stash_write(CgCtx *c, int inst, const CgOperand *slots) {
  if (!c->streamed || !c->stream.stash || c->stream.stash[inst] < 0) return;
  int label = cg_stash_branch(c, false);
  stash_move(c, inst, slots, NULL);
  if (label >= 0) cg_raw(&c->em, "$Lunkept_%d:\n", label);
}

void cg_stash_read(CgCtx *c, int inst, CgOperand *slots) { stash_move(c, inst, NULL, slots); }

void cg_stash_write_cut(CgCtx *c, int inst, CgOperand at, const CgOperand *regs,
                        const CgOperand *whole, bool packed) {
  stash_units(c, inst, at, regs, NULL, whole, packed);
}

CgOperand cg_stash_at(CgCtx *c, int inst, int *stride) {
  int bytes = piece_bytes(c, inst), unit = unit_bytes(bytes);
  *stride = unit * c->geo.threads;
  return stash_address(c, inst, unit, bytes / unit);
}

/* ---- prefetch ---------------------------------------------------------------- */

/* The first phase of a staged load can copy the thread's pieces into their
 * stash ahead of its loop (cp.async, sm_80 and later), so that the next
 * piece is in flight while the thread computes on this one. Before the
 * loop, the first piece's copies are issued and committed as a group;
 * each turn of the loop issues the next piece's copies (none after the
 * last), commits a group, and waits until at most one group is pending,
 * so its own piece has landed, before it reads the piece back from the
 * stash. Only whole vectors are copied; one that the mask cuts is loaded
 * element by element as before, and the loop writes it to the stash. The
 * pieces a capped stash does not keep (STASH) are loaded as before, with
 * no copies. It needs a load whose operands can be computed without other
 * loads or reductions. Phased rows (rows at any phase, phase.c) take it in
 * 16-bit kernels, but for grid splits of CTAs over 4 warps: with no
 * alignment check left on their source, an H200 ran bf16 rows of 32001
 * from 91.6% of copy to 93.7 and log-softmax's bf16 rows of 50257 from
 * 87.2 to 92.2, where f32 rows of 32001 lost 2 points and grid splits of
 * 8-warp CTAs 1.5 (bench/RESULTS.md, FF2; X8 found no gain before); grid
 * splits of 4-warp CTAs (the plan's 16-bit rows in rounds) gained 2.5 to
 * 3.3% of time, bf16 256 x 524288 at offset 1 82.5 to 85.1 (II9). An
 * access at another phase than its source copies nothing and writes its
 * piece to the stash from its element path.
 * And it takes a phase with one such load only: softmax backward's 16-bit
 * rows, whose first phase loads y and dy, ran 9 points slower with both
 * copied on an H200 (X9), where softmax, log-softmax and the masked
 * softmax gained.
 *
 * One piece ahead, measured on an H100 (bench/RESULTS.md, X2): wide rows
 * over several CTAs gain 1.5 to 3 points of copy; two pieces ahead or all
 * of them gain no more there and lose 2 to 3 on rows of 10^7 split over
 * 256 CTAs a row. */
static bool prefetch_plan(CgCtx *c, const uint8_t *need, uint8_t *deps) {
  CgStream *st = &c->stream;
  const tj_program *p = c->p;
  size_t n = (size_t)p->ninsts + 1;
  if (!st->prefetched) st->prefetched = cg_arena_alloc(&c->arena, n);
  if (!st->prefetched) return false;
  memset(st->prefetched, 0, n);
  memset(deps, 0, n);
  if (!st->stash) return false;
  int loads = 0;
  for (int i = 0; i < p->ninsts; i++) {
    if (!need[i] || p->insts[i].op != TJ_OP_LOAD || st->stash[i] < 0 || st->fetched[i] >= 0 ||
        !cg_prefetchable(c, i) || piece_bytes(c, i) % 16)
      continue;
    st->prefetched[i] = deps[i] = 1;
    loads++;
  }
  bool any = loads == 1; /* see above: softmax backward's two loads lost */
  for (int i = p->ninsts - 1; i >= 0 && any; i--) {
    if (!deps[i]) continue;
    const IrInst *in = &p->insts[i];
    for (int k = 0; k < in->nargs; k++) {
      int d = p->defs[in->args[k]];
      if (!streamed_value(c, in->args[k]) || cg_hoisted(c, d)) continue;
      if (p->insts[d].op == TJ_OP_LOAD || is_reduce(&p->insts[d])) any = false;
      deps[d] = 1;
    }
  }
  if (!any) memset(st->prefetched, 0, n);
  return any;
}

/* The copies of the piece at c->piece_start: the prefetched loads and
 * what their operands need. */
static void prefetch_piece(CgCtx *c, const uint8_t *deps) {
  piece_guards(c, false); /* the next piece may be the last, copied whole */
  for (int i = 0; i < c->p->ninsts && cg_ok(c); i++) {
    if (!deps[i]) continue;
    if (!c->stream.prefetched[i]) {
      cg_lower_inst(c, i);
      continue;
    }
    int stride;
    CgOperand at = cg_stash_at(c, i, &stride);
    cg_prefetch_load(c, i, at, stride);
  }
}

/* Before the phase's loop: the first piece. */
static void prefetch_start(CgCtx *c, const uint8_t *deps) {
  c->piece_start = cg_reg(&c->em, CG_B32);
  cg_line(&c->em, "mov.u32 %s, %lld;", CG_N(c->piece_start),
          (long long)(c->stream.step * c->stream.held));
  prefetch_piece(c, deps);
  cg_line(&c->em, "cp.async.commit_group;");
}

/* At the top of each turn of the phase's loop: the next piece (when the
 * stash keeps it), a group, and the wait for this turn's piece. The last
 * piece (last: lowered alone, tail_piece) has no next one to copy. */
static void prefetch_turn(CgCtx *c, const uint8_t *deps, bool last) {
  CgStream *st = &c->stream;
  if (!last) {
    int label = c->em.labels++;
    CgOperand here = c->piece_start, next = cg_reg(&c->em, CG_B32);
    CgOperand past = cg_reg(&c->em, CG_PRED);
    cg_line(&c->em, "add.s32 %s, %s, %lld;", CG_N(next), CG_N(here), (long long)st->step);
    cg_line(&c->em, "setp.ge.s32 %s, %s, %lld;", CG_N(past), CG_N(next),
            (long long)(st->step * st->kept));
    cg_line(&c->em, "@%s bra.uni $Lahead_%d;", CG_N(past), label);
    c->piece_start = next;
    prefetch_piece(c, deps);
    c->piece_start = here;
    cg_raw(&c->em, "$Lahead_%d:\n", label);
  }
  cg_line(&c->em, "cp.async.commit_group;");
  cg_line(&c->em, "cp.async.wait_group 1;");
}

/* ---- lowering ---------------------------------------------------------------- */

/* Whether instruction i is needed in the piece loop of phase ph: it runs
 * per piece, and is a store or reduction of that phase or feeds one (marks
 * in need). A tile of the phase that only later phases use is not lowered
 * there (a load among them would read memory for nothing, or keep a
 * stash). */
static void mark_needed(const CgCtx *c, int ph, uint8_t *need) {
  const tj_program *p = c->p;
  memset(need, 0, (size_t)p->ninsts);
  for (int i = p->ninsts - 1; i >= 0; i--) {
    if (!cg_stream_per_piece(c, i) || cg_hoisted(c, i)) continue;
    const IrInst *in = &p->insts[i];
    bool root = in->op == TJ_OP_STORE || is_reduce(in);
    bool mine = root && c->stream.phase[i] == ph && !cg_fused_sum(c, i);
    if (!mine && !need[i]) continue;
    need[i] = 1;
    for (int k = 0; k < in->nargs; k++) {
      int a = in->args[k];
      if (streamed_value(c, a)) need[p->defs[a]] = 1;
    }
  }
}

bool cg_stream_first_lowers(CgCtx *c, int inst) {
  uint8_t *need = cg_arena_alloc(&c->arena, (size_t)c->p->ninsts + 1);
  if (!need) return false;
  mark_needed(c, 0, need);
  return need[inst] != 0;
}

typedef struct Running {
  int inst;
  CgRed acc;
} Running;

static CgRed identity_of(CgCtx *c, int inst) {
  const IrInst *in = &c->p->insts[inst];
  return cg_red_identity((tj_op)in->op, cg_elem_of(c, in->args[0]), c->partner[inst] >= 0);
}

static CgRed fresh(CgCtx *c, CgRed like) {
  CgRed r = like;
  r.x = cg_reg_of(c, like.elem);
  if (like.pair) r.d = cg_reg(&c->em, CG_F32);
  return r;
}

static void assign(CgCtx *c, CgRed to, CgRed from) {
  cg_mov(c, to.x, from.x);
  if (to.pair) cg_mov(c, to.d, from.d);
}

/* Phase ph's running reductions (one a streamed reduction but the sums a
 * fused max carries) into run, in fresh registers; their count. */
static int runnings(CgCtx *c, int ph, Running *run) {
  int n = 0;
  for (int i = 0; i < c->p->ninsts; i++) {
    const IrInst *in = &c->p->insts[i];
    if (c->stream.phase[i] != ph || !is_reduce(in) || !cg_stream_per_piece(c, i) ||
        cg_fused_sum(c, i))
      continue;
    run[n].inst = i;
    run[n++].acc = fresh(c, identity_of(c, i));
  }
  return n;
}

/* Each running reduction from its identity. */
static void restart(CgCtx *c, Running *run, int n) {
  for (int k = 0; k < n; k++) assign(c, run[k].acc, identity_of(c, run[k].inst));
}

/* The code of one piece (at c->piece_start), its reductions folded into
 * the running ones. */
static void piece_body(CgCtx *c, const uint8_t *need, Running *run, int nrun) {
  piece_guards(c, true);
  for (int i = 0; i < c->p->ninsts && cg_ok(c); i++) {
    if (!need[i]) continue;
    const IrInst *in = &c->p->insts[i];
    if (!is_reduce(in)) {
      cg_lower_inst(c, i);
      continue;
    }
    for (int k = 0; k < nrun; k++)
      if (run[k].inst == i) {
        CgLayout *l = cg_layout_of(c, in->args[0]);
        CgRed piece = cg_red_slots(c, i, 0, l->slots);
        assign(c, run[k].acc, cg_red_combine(c, run[k].acc, piece));
      }
  }
}

/* The held pieces [0, held), unrolled, last first when backward. */
static void held_pieces(CgCtx *c, const uint8_t *need, Running *run, int nrun, bool backward) {
  CgStream *st = &c->stream;
  for (int k = 0; k < st->held && cg_ok(c); k++) {
    int j = backward ? st->held - 1 - k : k;
    st->held_piece = j;
    c->piece_start = cg_imm_int(CG_B32, j * st->step);
    piece_body(c, need, run, nrun);
  }
  st->held_piece = -1;
}

/* Whether the last piece is lowered alone, over the repeats of its tail
 * only: where the tile ends in it short of a whole piece, that piece is
 * in the loop (not held), and every stash moves the tail in whole units.
 * A thread otherwise computes on every slot of its last piece, loaded or
 * not: bf16 rows of 50257 over a cluster of 2 (13 vectors a thread, in
 * pieces of 5) computed 15 vectors for 13. */
static bool tail_lowered(const CgCtx *c) {
  const CgStream *st = &c->stream;
  int vec = c->layouts[st->layout].vec;
  if (st->tail * vec >= st->slots || st->pieces - 1 < st->held) return false;
  for (int i = 0; st->stash && i < c->p->ninsts; i++) {
    if (st->stash[i] < 0) continue;
    int esize = cg_elem_size((tj_elem)c->p->types[c->p->insts[i].result].elem);
    if (st->tail * vec * esize % unit_bytes(piece_bytes(c, i))) return false;
  }
  return true;
}

/* The last piece (at `start`), over its tail's repeats. */
static void tail_piece(CgCtx *c, const uint8_t *need, Running *run, int nrun,
                       const uint8_t *prefetch, int64_t start) {
  CgLayout *l = &c->layouts[c->stream.layout];
  int reps = l->reps, slots = l->slots;
  c->piece_start = cg_reg(&c->em, CG_B32);
  cg_line(&c->em, "mov.u32 %s, %lld;", CG_N(c->piece_start), (long long)start);
  if (prefetch) prefetch_turn(c, prefetch, true);
  l->reps = c->stream.tail;
  l->slots = c->stream.tail * l->vec;
  piece_body(c, need, run, nrun);
  l->reps = reps;
  l->slots = slots;
}

/* Phase ph over the pieces: the held ones unrolled (first when forward,
 * last when backward), a loop over the rest, and the last piece alone
 * where tail_lowered (last when forward, first when backward). */
static void pipe_turn(CgCtx *c);
static void pipe_finish(CgCtx *c);

static void piece_loop(CgCtx *c, int ph, const uint8_t *need, Running *run, int nrun,
                       const uint8_t *prefetch, int from) {
  CgStream *st = &c->stream;
  bool last = ph == c->stream.phases - 1, backward = last && ph > 0, tail = tail_lowered(c);
  bool pipe = st->pipe && backward;
  int label = c->em.labels++;
  int64_t end = st->step * (st->pieces - tail), first = st->step * from;
  if (!backward) held_pieces(c, need, run, nrun, false);
  if (tail && backward) tail_piece(c, need, run, nrun, prefetch, end);
  if (first < end) {
    c->piece_start = cg_reg(&c->em, CG_B32);
    cg_line(&c->em, "mov.u32 %s, %lld;", CG_N(c->piece_start),
            (long long)(backward ? end - st->step : first));
    cg_raw(&c->em, "$Lpiece_%d:\n", label);
    if (prefetch) prefetch_turn(c, prefetch, false);
    piece_body(c, need, run, nrun);
    if (pipe) pipe_turn(c);
    CgOperand more = cg_reg(&c->em, CG_PRED);
    cg_line(&c->em, "add.s32 %s, %s, %lld;", CG_N(c->piece_start), CG_N(c->piece_start),
            (long long)(backward ? -st->step : st->step));
    if (backward)
      cg_line(&c->em, "setp.ge.s32 %s, %s, %lld;", CG_N(more), CG_N(c->piece_start),
              (long long)first);
    else
      cg_line(&c->em, "setp.lt.s32 %s, %s, %lld;", CG_N(more), CG_N(c->piece_start),
              (long long)end);
    cg_line(&c->em, "@%s bra.uni $Lpiece_%d;", CG_N(more), label);
  }
  if (pipe) pipe_finish(c);
  if (tail && !backward) tail_piece(c, need, run, nrun, prefetch, end);
  if (backward) held_pieces(c, need, run, nrun, true);
  c->piece_start = cg_imm_int(CG_B32, 0);
}

/* A phase whose one exp(t - m) is only scaled and which keeps no running
 * reduction, as softmax's last: its piece loop twice, the first with that
 * exp shifted (exp_shift.c), the second as before, and m picks one. */
static void shifted_loops(CgCtx *c, int ph, const uint8_t *need, int exp) {
  c->shift = cg_shift_begin(c, cg_shift_of(c, exp));
  cg_shift_hoist(c, need, exp);
  int label = cg_shift_branch(c, &c->shift, c->geo.programs == 1, "_loop");
  c->shifting = true;
  piece_loop(c, ph, need, NULL, 0, NULL, c->stream.held);
  c->shifting = false;
  cg_shift_else(c, label, "_loop");
  piece_loop(c, ph, need, NULL, 0, NULL, c->stream.held);
  cg_shift_end(c, label, "_loop");
}

/* ---- the next instance in the last phase (PIPE) ----------------------------- */

/* A CTA of a grid split (SPLIT > 1, one instance a group at a time, its
 * CTAs alone or in clusters) takes its rows in turn: the first phase copies
 * its share in and folds it, the group meets at its barrier, the last phase
 * writes the share out, and the CTA moves data only in one direction at a
 * time while all of its group do the same. Here the last phase's loop, as
 * it walks the kept pieces of the stash (backwards), copies the next
 * instance's piece into each slot it has just read (cp.async) and folds the
 * one it copied a turn before into the next instance's running reductions
 * (`carried`), so that one row's writes, the next row's reads and their
 * arithmetic overlap. The next instance's first phase then takes only its
 * held and unkept pieces, from those running values (lower_phase's `piped`
 * branch on geo.later). A hand-written kernel of the same shape ran 4 to 6
 * points of copy faster so on few rows of 16 MB on an H200, and 1.5 to 3 on
 * rows in rounds (bench/RESULTS.md, KK4); tilejit's own, 16-bit rows of
 * 2^19 and 2^20 in clusters of two, 1.2 to 3.1 (LL1). It needs a first
 * phase that copies its one load ahead (prefetch_plan) in whole vectors
 * (DIV: a partial vector's path beside it spilled f32 rows of 262143 at 64
 * registers), two phases, rows that start on their vectors (not phased),
 * every kept piece inside the last phase's loop, and first phase scalars
 * that are arithmetic only: they are computed for the next instance too,
 * whether it exists or not. A later instance folds its pieces in another
 * order than a CTA's first (the kept ones downwards, before the held ones),
 * so its sums round differently, within testing.md: two equal rows may
 * differ in their last bits by their position. The copy into a slot follows
 * the stores of the values read from it (a write after the thread's own
 * read). */
static bool pipe_scalar(const CgCtx *c, int i) {
  return c->stream.phase[i] == 0 && !cg_stream_per_piece(c, i) && !cg_hoisted(c, i) &&
         c->p->insts[i].result != IR_NONE;
}

static void pipe_plan(CgCtx *c) {
  CgStream *st = &c->stream;
  const tj_program *p = c->p;
  size_t n = (size_t)p->ninsts + 1;
  if (st->phases != 2 || c->geo.split < 2 || c->geo.programs != 1 || st->kept <= st->held ||
      c->layouts[st->layout].phased || st->kept > st->pieces - (tail_lowered(c) ? 1 : 0))
    return;
  for (int i = 0; i < p->ninsts; i++) {
    tj_op op = (tj_op)p->insts[i].op;
    if (pipe_scalar(c, i) && (op == TJ_OP_LOAD || is_reduce(&p->insts[i]))) return;
  }
  st->need0 = cg_arena_alloc(&c->arena, n);
  st->deps0 = cg_arena_alloc(&c->arena, n);
  st->pre0 = cg_arena_alloc(&c->arena, n);
  st->carried = cg_arena_alloc(&c->arena, sizeof *st->carried * n);
  st->next_vals = cg_arena_alloc(&c->arena, sizeof *st->next_vals * ((size_t)p->nvalues + 1));
  if (!st->need0 || !st->deps0 || !st->pre0 || !st->carried || !st->next_vals) {
    cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
    return;
  }
  mark_needed(c, 0, st->need0);
  bool copied = prefetch_plan(c, st->need0, st->deps0);
  if (st->prefetched) {
    memcpy(st->pre0, st->prefetched, n);
    memset(st->prefetched, 0, n);
  }
  for (int i = 0; i < p->ninsts && copied; i++) /* a partial vector's path: too many registers */
    if (st->pre0[i] && !cg_access_whole(c, i)) copied = false;
  if (!copied) return;
  st->ncarried = runnings(c, 0, st->carried);
  st->pipe = st->ncarried > 0;
}

/* The first phase's scalars: vals and next_vals trade places. */
static void pipe_swap_values(CgCtx *c) {
  const tj_program *p = c->p;
  for (int i = 0; i < p->ninsts; i++) {
    if (!pipe_scalar(c, i)) continue;
    int v = p->insts[i].result;
    CgVal t = c->vals[v];
    c->vals[v] = c->stream.next_vals[v];
    c->stream.next_vals[v] = t;
  }
}

/* The first phase's scalars as the next instance has them, into
 * next_vals (the current instance's stay in vals); whether there is one;
 * the next instance's running reductions from their identities. */
static void pipe_begin(CgCtx *c) {
  CgStream *st = &c->stream;
  CgGeometry *g = &c->geo;
  const tj_program *p = c->p;
  CgOperand next = cg_reg(&c->em, CG_B64), inst = g->inst;
  st->next_ok = cg_reg(&c->em, CG_PRED);
  cg_line(&c->em, "add.s64 %s, %s, %s;", CG_N(next), CG_N(g->inst), CG_N(g->stride));
  cg_line(&c->em, "setp.lt.u64 %s, %s, %s;", CG_N(st->next_ok), CG_N(next), CG_N(g->count));
  g->inst = next;
  for (int i = 0; i < p->ninsts; i++) /* the current instance's, kept aside */
    if (pipe_scalar(c, i)) st->next_vals[p->insts[i].result] = c->vals[p->insts[i].result];
  for (int i = 0; i < p->ninsts && cg_ok(c); i++)
    if (pipe_scalar(c, i)) cg_lower_inst(c, i);
  g->inst = inst;
  pipe_swap_values(c); /* the current instance's back in vals */
  restart(c, st->carried, st->ncarried);
}

/* Lowering as the next instance's first phase (not the last phase's
 * shifted copy, exp_shift.c), and back. */
static void pipe_swap(CgCtx *c, bool next) {
  CgStream *st = &c->stream;
  const tj_program *p = c->p;
  pipe_swap_values(c);
  if (next) st->was_shifting = c->shifting;
  c->shifting = next ? false : st->was_shifting;
  st->current = next ? 0 : st->phases - 1;
  if (next)
    memcpy(st->prefetched, st->pre0, (size_t)p->ninsts + 1);
  else
    memset(st->prefetched, 0, (size_t)p->ninsts + 1);
}

/* The next instance's piece at `at`, folded into its running reductions:
 * a kept piece, copied into the stash, so no path reads it from memory. */
static void pipe_fold(CgCtx *c, CgOperand at) {
  CgOperand here = c->piece_start;
  c->piece_start = at;
  c->stream.folding_kept = true;
  piece_body(c, c->stream.need0, c->stream.carried, c->stream.ncarried);
  c->stream.folding_kept = false;
  c->piece_start = here;
}

/* After the last phase's piece at c->piece_start: where it is kept, the
 * next instance's copy into its slots, and the fold of the piece copied
 * the turn before (the one above, walking backwards), once it has landed. */
static void pipe_turn(CgCtx *c) {
  CgStream *st = &c->stream;
  int label = c->em.labels++;
  int64_t kept = st->step * st->kept;
  CgOperand unkept = cg_reg(&c->em, CG_PRED), above = cg_reg(&c->em, CG_B32);
  CgOperand first = cg_reg(&c->em, CG_PRED);
  cg_line(&c->em, "@!%s bra.uni $Lpipe_%d;", CG_N(st->next_ok), label);
  cg_line(&c->em, "setp.ge.s32 %s, %s, %lld;", CG_N(unkept), CG_N(c->piece_start), (long long)kept);
  cg_line(&c->em, "@%s bra.uni $Lpipe_%d;", CG_N(unkept), label);
  pipe_swap(c, true);
  prefetch_piece(c, st->deps0);
  cg_line(&c->em, "cp.async.commit_group;");
  cg_line(&c->em, "add.s32 %s, %s, %lld;", CG_N(above), CG_N(c->piece_start), (long long)st->step);
  cg_line(&c->em, "setp.ge.s32 %s, %s, %lld;", CG_N(first), CG_N(above), (long long)kept);
  cg_line(&c->em, "@%s bra.uni $Lpipe_%d;", CG_N(first), label);
  cg_line(&c->em, "cp.async.wait_group 1;");
  pipe_fold(c, above);
  pipe_swap(c, false);
  cg_raw(&c->em, "$Lpipe_%d:\n", label);
}

/* After the loop: the last piece copied, the lowest kept one. */
static void pipe_finish(CgCtx *c) {
  CgStream *st = &c->stream;
  int label = c->em.labels++;
  cg_line(&c->em, "@!%s bra.uni $Lpipe_%d;", CG_N(st->next_ok), label);
  cg_line(&c->em, "cp.async.wait_group 0;");
  pipe_swap(c, true);
  pipe_fold(c, cg_imm_int(CG_B32, st->step * st->held));
  pipe_swap(c, false);
  cg_raw(&c->em, "$Lpipe_%d:\n", label);
}

/* One phase: its scalars, its loop, then its reductions across threads. */
static void lower_phase(CgCtx *c, int ph, uint8_t *need, Running *run) {
  const tj_program *p = c->p;
  for (int i = 0; i < p->ninsts && cg_ok(c); i++)
    if (c->stream.phase[i] == ph && !cg_stream_per_piece(c, i) && !cg_hoisted(c, i))
      cg_lower_inst(c, i);
  int nrun = runnings(c, ph, run);
  restart(c, run, nrun);
  mark_needed(c, ph, need);
  uint8_t *deps = cg_arena_alloc(&c->arena, (size_t)p->ninsts + 1);
  if (!deps) {
    cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
    return;
  }
  bool prefetched = prefetch_plan(c, need, deps), piped = c->stream.pipe && ph == 0;
  int label = piped ? c->em.labels++ : -1;
  if (piped) cg_line(&c->em, "@%s bra.uni $Lpiped_%d;", CG_N(c->geo.later), label);
  if (prefetched) prefetch_start(c, deps);
  if (c->stream.pipe && ph == c->stream.phases - 1) pipe_begin(c);
  int shifted = nrun == 0 && !prefetched ? cg_shift_candidate(c, need) : -1;
  if (shifted >= 0)
    shifted_loops(c, ph, need, shifted);
  else
    piece_loop(c, ph, need, run, nrun, prefetched ? deps : NULL, c->stream.held);
  if (c->stream.prefetched) memset(c->stream.prefetched, 0, (size_t)p->ninsts + 1);
  if (piped) { /* a later instance: its kept pieces were copied and folded already */
    cg_line(&c->em, "bra.uni $Lfirst_phase_%d;", label);
    cg_raw(&c->em, "$Lpiped_%d:\n", label);
    for (int k = 0; k < nrun; k++) assign(c, run[k].acc, c->stream.carried[k].acc);
    c->stream.reuse_held = true;
    piece_loop(c, ph, need, run, nrun, NULL, c->stream.kept);
    c->stream.reuse_held = false;
    cg_raw(&c->em, "$Lfirst_phase_%d:\n", label);
  }
  for (int k = 0; k < nrun && cg_ok(c); k++)
    cg_red_finish(c, run[k].inst, cg_red_levels(c, run[k].inst, run[k].acc));
}

void cg_lower_streamed(CgCtx *c) {
  size_t n = (size_t)c->p->ninsts + 1;
  uint8_t *need = cg_arena_alloc(&c->arena, n);
  Running *run = cg_arena_alloc(&c->arena, sizeof *run * n);
  if (!need || !run) {
    cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
    return;
  }
  c->stream.stash = NULL;
  c->stream.pipe = false;
  if (c->spec->stage) plan_stash(c, need);
  if (c->stream.stash && cg_ok(c)) pipe_plan(c);
  for (int ph = 0; ph < c->stream.phases && cg_ok(c); ph++) {
    c->stream.current = ph;
    lower_phase(c, ph, need, run);
  }
}

/* The order in which reductions combine across threads: phase by phase,
 * each in program order (reduce.c plans their regions in it). */
int cg_stream_order(const CgCtx *c, int *order) {
  int n = 0;
  for (int ph = 0; ph < c->stream.phases; ph++)
    for (int i = 0; i < c->p->ninsts; i++)
      if (c->stream.phase[i] == ph && is_reduce(&c->p->insts[i])) order[n++] = i;
  return n;
}
