/*
 * test_ptx_sim_across.c — rows across CTAs on the PTX simulator, against
 * the interpreter: the cluster level (distributed shared memory, cluster
 * barriers), the grid level (a workspace, counter barriers, every CTA of
 * the grid running at once) and streamed tiles (pieces, phases), alone and
 * combined, for softmax and for a user's own programs. This is how CI,
 * which has no GPU, checks the new reduction levels on every change.
 *
 * Softmax: clusters of 2, 3, 4 and 16 CTAs, splits of 2, 3, 5 and 8, a
 * cluster and a split together, each with and without streaming, aligned
 * and not, in every dtype, on rows of random values, of -inf, with a NaN,
 * with a +inf, with -inf mixed in, and with everything -inf but a window
 * (so that most CTAs see only -inf). Fewer CTAs run than there are rows, so
 * the instance loop runs too; the workspace is used twice in a row, as
 * launches on one stream share it. The simulator's byte counts show that x
 * is read once where the tile fits the registers and twice where it is
 * streamed, and y written once.
 *
 * A user's programs in the text form, split across CTAs: a row sum, a
 * logsumexp (a max and a sum of exp) and an i32 max, over rows wider than
 * one CTA holds; and staged 16-bit loads whose elements move alone (a mask
 * that is not monotone, no mask on rows at any phase).
 */
#include "codegen/codegen.h"
#include "runtime/runtime.h" /* rt_size_multiple */
#include "support.h"
#include "support_ptx.h"
#include "support_ptxsim.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- running a spec on the simulator -------------------------------------------- */

typedef struct Run {
  PtxsimStats stats;
  tj_kernel_info info;
  int ctas;
  int grid_spins; /* "$Lgrid_spin_" in the PTX: a label and its branch a grid round */
  bool piped;     /* the last phase folds the next instance (stream.c, PIPE) */
  bool fold_kept; /* ... and a fold branches on whether its piece is kept */
} Run;

/* Whether a PIPE turn ($Lpipe_N's branch to its label) holds a branch on
 * a kept piece: the piece it folds is always kept (stream.c, pipe_fold). */
static bool fold_branches_on_kept(const char *ptx) {
  const char *at = strstr(ptx, "bra.uni $Lpipe_");
  while (at) {
    int label = atoi(at + strlen("bra.uni $Lpipe_"));
    char end[32];
    snprintf(end, sizeof end, "$Lpipe_%d:", label);
    const char *stop = strstr(at, end), *kept = strstr(at, "$Lkept_");
    if (kept && (!stop || kept < stop)) return true;
    at = stop ? strstr(stop, "bra.uni $Lpipe_") : NULL;
  }
  return false;
}

/* The PTX of s, run for `programs` instances on `units` clusters (or groups
 * of SPLIT) of CTAs, with a workspace that stays across calls (ws). */
static bool simulate(tj_spec *s, int arch, const tj_arg *args, int nargs, int64_t programs,
                     int units, void **ws, size_t *ws_bytes, Run *run, char *why, size_t size) {
  tj_codegen_options o = {arch, 0, 0};
  char *ptx = NULL;
  memset(run, 0, sizeof *run);
  if (tj_emit_ptx(s, &o, &ptx, &run->info) != TJ_OK) {
    snprintf(why, size, "emit: %s", tj_spec_error(s));
    return false;
  }
  const tj_launch_shape *shape = &run->info.shape;
  run->ctas = units * shape->ctas_per_program;
  size_t need = TJ_WORKSPACE_COUNTERS + (size_t)units * (size_t)shape->workspace_bytes;
  if (shape->workspace_bytes && need > *ws_bytes) { /* a new one: its counters cleared */
    free(*ws);
    *ws = calloc(1, need);
    *ws_bytes = *ws ? need : 0;
  }
  PtxsimLaunch launch = {programs,
                         run->ctas,
                         shape->workspace_bytes ? *ws : NULL,
                         shape->workspace_bytes ? *ws_bytes : 0,
                         0,
                         shape->dynamic_shared_bytes};
  run->grid_spins = ptx_count(ptx, "$Lgrid_spin_");
  run->piped = ptx_count(ptx, "$Lpiped_") > 0;
  run->fold_kept = fold_branches_on_kept(ptx);
  bool ok = ptxsim_launch(ptx, args, nargs, &launch, &run->stats, why, size);
  tj_free(ptx);
  return ok;
}

/* ---- softmax ---------------------------------------------------------------------- */

typedef struct Case {
  tj_dtype dtype;
  int64_t n;
  int warps, cluster, split, align;
  bool streamed; /* expected */
  int stage;     /* STAGE: streamed, x kept in shared memory and read once */
  int stash;     /* STASH: the stash's most bytes; the pieces past it are read twice */
  int again;     /* STASH: at most this % of x read twice (0: less than all of it; -1: none,
                    the held pieces and the stash keep it all) */
  int64_t block; /* BLOCK, 0: next_pow2(n) (the plan fits staged rows: rt_softmax_fit_block) */
} Case;

/* Besides the extreme rows of testing.md: rows far from 0 (-1e7, f16
 * -1e4), where the max's subtraction carries the whole result; rows past
 * 2^24 at steps of 4 whose exps still count; and rows one-hot at 3e38
 * (f16: at 6e4). */
enum {
  KIND_RANDOM,
  KIND_ALL_NEG_INF,
  KIND_NAN,
  KIND_POS_INF,
  KIND_MIXED,
  KIND_WINDOW,
  KIND_FAR,
  KIND_BIG,
  KIND_HUGE,
  KINDS
};

static void fill(TjMatrix *x, TjRng *rng) {
  matrix_fill_random(x, rng, 3.0, 100.0);
  bool f16 = x->dtype == TJ_DTYPE_F16;
  for (int64_t r = 0; r < x->rows; r++) {
    int kind = (int)(r % KINDS);
    int64_t at = rng_range(rng, 0, x->cols - 1);
    for (int64_t c = 0; c < x->cols; c++) {
      if (kind == KIND_ALL_NEG_INF) matrix_set(x, r, c, -INFINITY);
      if (kind == KIND_MIXED && c % 3 == 0 && c != at) matrix_set(x, r, c, -INFINITY);
      if (kind == KIND_WINDOW && (c < at || c >= at + 5)) matrix_set(x, r, c, -INFINITY);
      if (kind == KIND_FAR) matrix_set(x, r, c, matrix_get(x, r, c) - (f16 ? 1e4 : 1e7));
      if (kind == KIND_BIG)
        matrix_set(x, r, c, (f16 ? 6e4 : 33554432.0) + (f16 ? 32 : 4) * rng_range(rng, 0, 7));
      if (kind == KIND_HUGE && c == at) matrix_set(x, r, c, f16 ? 6e4 : 3e38);
    }
    if (kind == KIND_NAN) matrix_set(x, r, at, NAN);
    if (kind == KIND_POS_INF) matrix_set(x, r, at, INFINITY);
  }
}

static const char *label(const Case *k, char *out, size_t size) {
  snprintf(out, size, "%s n=%lld warps=%d cluster=%d split=%d align=%d stage=%d stash=%d",
           dtype_label(k->dtype), (long long)k->n, k->warps, k->cluster, k->split, k->align,
           k->stage, k->stash);
  return out;
}

/* Runs k on the simulator against the interpreter; whether its last phase
 * folded the next row (PIPE). */
static bool run_softmax_on(const Case *k, int arch, int64_t rows, void **ws, size_t *ws_bytes) {
  tj_program *p;
  tj_spec *s;
  tj_spec_options o = {.n = k->n,
                       .num_warps = k->warps,
                       .dtype = k->dtype,
                       .align = k->align,
                       .cluster = k->cluster,
                       .split = k->split,
                       .stage = k->stage,
                       .stash = k->stash,
                       .block = k->block};
  int size = (int)dtype_bytes(k->dtype); /* DIV as tj_softmax takes it */
  o.multiple = rt_size_multiple(k->n, k->align ? k->align : size, size);
  char name[160], why[2048];
  label(k, name, sizeof name);
  ck_assert_int_eq(tj_softmax_program(TJ_SOFTMAX_SINGLE, k->n, &p), TJ_OK);
  ck_assert_msg(tj_specialize(p, &o, &s) == TJ_OK, "%s: %s", name, tj_program_error(p));
  int64_t per = k->align ? k->align / (int64_t)dtype_bytes(k->dtype) : 0;
  int64_t stride = per > 1 ? (k->n + per) / per * per : k->n + 3;
  TjMatrix x, y, want;
  TjRng rng;
  rng_seed(&rng, test_seed((uint64_t)k->n, (uint64_t)k->cluster * 64 + (uint64_t)k->split,
                           (uint64_t)k->dtype));
  ck_assert(matrix_alloc(&x, k->dtype, rows, k->n, stride, 8));
  ck_assert(matrix_alloc(&y, k->dtype, rows, k->n, stride, 8));
  ck_assert(matrix_alloc(&want, k->dtype, rows, k->n, stride, 8));
  fill(&x, &rng);
  tj_arg args[5] = {{TJ_ARG_PTR, {.ptr = want.data}, want.bytes},
                    {TJ_ARG_PTR, {.ptr = x.data}, x.bytes},
                    {TJ_ARG_INT, {.i = stride}, 0},
                    {TJ_ARG_INT, {.i = stride}, 0},
                    {TJ_ARG_INT, {.i = k->n}, 0}};
  ck_assert_msg(tj_interpret(s, args, 5, rows) == TJ_OK, "%s", tj_spec_error(s));
  args[0].u.ptr = y.data;
  args[0].bytes = y.bytes;
  Run run;
  for (int launch = 0; launch < 2; launch++) { /* the workspace, used twice */
    matrix_poison(&y);
    ck_assert_msg(simulate(s, arch, args, 5, rows, 2, ws, ws_bytes, &run, why, sizeof why),
                  "%s, launch %d: %s", name, launch, why);
  }
  TjTolerance t = dtype_tolerance(k->dtype);
  t.rtol *= 4;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < k->n; c++) {
      double got = matrix_get(&y, r, c), ref = matrix_get(&want, r, c);
      ck_assert_msg(close_enough(got, ref, t), "%s: row %lld (kind %d) col %lld: %g, want %g", name,
                    (long long)r, (int)(r % KINDS), (long long)c, got, ref);
    }
  /* Each element is written once and read once per pass, but for the one
   * partial vector a row's last thread may move a second time, element by
   * element (memory.c): at most its slots more per row and pass; none
   * where n is a multiple of the vector (DIV). */
  uint64_t elem = dtype_bytes(k->dtype), row_bytes = (uint64_t)rows * (uint64_t)k->n * elem;
  uint64_t slack = o.multiple > 1 ? 0 : (uint64_t)rows * CG_MAX_SLOTS * elem;
  uint64_t passes = k->streamed && !k->stage ? 2 : 1;
  uint64_t wrote = run.stats.bytes_written[0], read = run.stats.bytes_read[1];
  ck_assert_msg(wrote >= row_bytes && wrote <= row_bytes + slack,
                "%s: %llu bytes of y written for %llu", name, (unsigned long long)wrote,
                (unsigned long long)row_bytes);
  uint64_t most = k->again > 0 ? row_bytes + row_bytes * (uint64_t)k->again / 100 : 2 * row_bytes;
  if (k->stash && k->again >= 0) /* a part of x again, neither none of it nor more than expected */
    ck_assert_msg(read > row_bytes + slack && read < most,
                  "%s: x read %llu bytes for %llu: more than once and less than %llu expected",
                  name, (unsigned long long)read, (unsigned long long)row_bytes,
                  (unsigned long long)most);
  else
    ck_assert_msg(read >= passes * row_bytes && read <= passes * (row_bytes + slack),
                  "%s: x read %llu bytes for %llu: %s expected", name, (unsigned long long)read,
                  (unsigned long long)row_bytes, passes == 2 ? "twice (streamed)" : "once");
  ck_assert_int_eq(run.info.shape.ctas_per_program, k->cluster * k->split);
  ck_assert_msg(!run.fold_kept, "%s: a fold of the next row branches on a kept piece", name);
  /* A staged CTA keeps its share of x in shared memory: at least the bytes
   * of its threads' pieces (the whole share, padding included). */
  if (k->stage) {
    const tj_launch_shape *sh = &run.info.shape;
    int64_t share = (k->n + sh->ctas_per_program - 1) / sh->ctas_per_program * (int64_t)elem;
    int64_t smem = sh->shared_bytes + sh->dynamic_shared_bytes;
    if (k->stash) /* at most STASH beside the reductions' few hundred bytes */
      ck_assert_msg(smem < share && smem <= k->stash + 1024,
                    "%s: %lld bytes of shared memory for a stash of at most %d", name,
                    (long long)smem, k->stash);
    else
      ck_assert_msg(smem >= share, "%s: %lld bytes of shared memory for a share of %lld", name,
                    (long long)smem, (long long)share);
    ck_assert_int_eq(sh->dynamic_shared_bytes > 0, smem > CG_STATIC_SHARED_MAX);
  }
  matrix_free(&x);
  matrix_free(&y);
  matrix_free(&want);
  tj_spec_destroy(s);
  tj_program_destroy(p);
  return run.piped;
}

static bool run_softmax_rows(const Case *k, int arch, int64_t rows) {
  void *ws = NULL;
  size_t ws_bytes = 0;
  bool piped = run_softmax_on(k, arch, rows, &ws, &ws_bytes);
  free(ws);
  return piped;
}

static bool run_softmax(const Case *k, int arch) { return run_softmax_rows(k, arch, KINDS + 1); }

/* One warp a CTA keeps the simulation small: a thread holds up to 128
 * elements, so a span of S CTAs holds 32 * 128 * S before streaming. */
static const Case clusters[] = {
    {TJ_DTYPE_F32, 1000, 1, 2, 1, 16, false, 0, 0, 0, 0},
    {TJ_DTYPE_F32, 4097, 1, 2, 1, 16, false, 0, 0, 0, 0},
    {TJ_DTYPE_BF16, 3000, 1, 3, 1, 16, false, 0, 0, 0, 0},
    {TJ_DTYPE_F16, 8192, 1, 4, 1, 0, false, 0, 0, 0, 0},
    {TJ_DTYPE_F32, 9000, 1, 16, 1, 16, false, 0, 0, 0, 0},
    {TJ_DTYPE_F32, 20000, 1, 4, 1, 16, true, 0, 0, 0, 0},
    {TJ_DTYPE_F32, 1, 1, 2, 1, 16, false, 0, 0, 0, 0},
    {TJ_DTYPE_F16, 33, 2, 5, 1, 2, false, 0, 0, 0, 0},
    {TJ_DTYPE_BF16, 40000, 1, 3, 1, 16, true, 0, 0, 0, 0},
    {TJ_DTYPE_F32, 65536, 2, 8, 1, 16, false, 0, 0, 0, 0},
};

static const Case splits[] = {
    {TJ_DTYPE_F32, 1000, 1, 1, 2, 16, false, 0, 0, 0, 0},
    {TJ_DTYPE_F32, 4097, 1, 1, 3, 0, false, 0, 0, 0, 0},
    {TJ_DTYPE_BF16, 7000, 1, 1, 5, 16, false, 0, 0, 0, 0},
    {TJ_DTYPE_F16, 16384, 1, 1, 8, 16, false, 0, 0, 0, 0},
    {TJ_DTYPE_F32, 33000, 1, 1, 2, 16, true, 0, 0, 0, 0},
    {TJ_DTYPE_F16, 60000, 1, 1, 3, 2, true, 0, 0, 0, 0},
    {TJ_DTYPE_F32, 20000, 2, 2, 2, 16, false, 0, 0, 0, 0},
    {TJ_DTYPE_BF16, 70000, 1, 2, 2, 16, true, 0, 0, 0, 0},
    {TJ_DTYPE_F32, 1, 1, 1, 2, 16, false, 0, 0, 0, 0},
    {TJ_DTYPE_BF16, 33, 2, 1, 40, 16, false, 0, 0, 0, 0},
    {TJ_DTYPE_F32, 33, 1, 1, 16, 4, false, 0, 0, 0, 0}, /* a lone NaN: its thread's max is -inf */
};

/* STAGE: a tile streamed in small pieces keeps them in shared memory, each
 * thread its own, so the second phase reads x from there: x is read from
 * memory once. One CTA, a cluster, a split, unaligned rows (element by
 * element), a stash over 48 KiB (.extern shared memory), and stashes
 * that STASH caps. */
static const Case staged[] = {
    {TJ_DTYPE_F32, 1000, 1, 1, 1, 16, true, 8, 0, 0, 0},
    {TJ_DTYPE_BF16, 3000, 1, 1, 1, 16, true, 16, 0, 0, 0},
    {TJ_DTYPE_F16, 777, 2, 1, 1, 2, true, 4, 0, 0, 0},
    {TJ_DTYPE_F32, 5000, 1, 2, 1, 16, true, 16, 0, 0, 0},
    {TJ_DTYPE_BF16, 7000, 1, 1, 3, 16, true, 8, 0, 0, 0},
    {TJ_DTYPE_F32, 16384, 2, 1, 1, 16, true, 32, 0, 0, 0},
    {TJ_DTYPE_F16, 20000, 1, 3, 2, 0, true, 16, 0, 0, 0},
    {TJ_DTYPE_BF16, 3000, 1, 1, 1, 16, true, 3, 0, 0, 0}, /* below VEC (8): pieces of one vector */
    /* 16-bit rows whose last vector the mask cuts: its elements move alone
     * and into their words (memory.c), in the stash too */
    {TJ_DTYPE_BF16, 3001, 1, 1, 1, 16, true, 16, 0, 0, 0},
    {TJ_DTYPE_F16, 7005, 1, 1, 3, 16, true, 8, 0, 0, 0},
    /* one CTA's row at the BLOCK the plan fits it to, no power of two: the
     * threads' whole vectors (bf16 3000 in 32 lanes of 12; f16 20000 in 8
     * warps of 10, STAGE 40) */
    {TJ_DTYPE_BF16, 3000, 1, 1, 1, 16, true, 16, 0, 0, 3072},
    {TJ_DTYPE_F16, 20000, 8, 1, 1, 16, true, 40, 0, 0, 20480},
    /* STASH: the first pieces in registers where the CTAs an SM holds
     * leave registers spare (held), the next in shared memory, the rest
     * read again. Comments: pieces held, stashed, of those holding
     * elements (of the BLOCK's); where pieces are held, the test bounds
     * the % of x read again. */
    {TJ_DTYPE_F32, 5000, 1, 1, 2, 16, true, 16, 4096, 45, 0},   /* sm_80: 1, 2 of 5 (8) */
    {TJ_DTYPE_BF16, 20000, 1, 2, 1, 16, true, 32, 4096, 0, 0},  /* 0, 2 of 10 (16) */
    {TJ_DTYPE_F16, 9000, 2, 1, 1, 16, true, 16, 3000, 0, 0},    /* 0, 1 of 9 (16) */
    {TJ_DTYPE_F32, 60000, 1, 1, 1, 16, true, 128, 70000, 0, 0}, /* over 48 KiB: 0, 4 of 15 (16) */
    /* two CTAs an SM (sm_90): their spare registers hold a piece */
    {TJ_DTYPE_F32, 80000, 8, 1, 2, 16, true, 32, 100000, 25, 0},   /* 1, 3 of 5 (5) */
    {TJ_DTYPE_BF16, 120000, 8, 1, 2, 16, true, 32, 100000, 10, 0}, /* 1, 6 of 8 (8) */
    {TJ_DTYPE_F16, 20003, 1, 2, 1, 16, true, 32, 4096, 0, 0},      /* 0, 2 of 10 (16), cut */
    /* a thread's vectors in uneven pieces: the last one holds fewer
     * repeats of the tile (stream.c, tail_lowered) and runs over those
     * alone; 13 vectors a lane in pieces of 5, 5 and 3, in one CTA and in
     * a cluster of 2 (its last vector cut), and 7 of 4 in pieces of 4 and
     * 3 with the last piece read again (STASH keeps the first) */
    {TJ_DTYPE_BF16, 3300, 1, 1, 1, 16, true, 40, 0, 0, 3328},
    {TJ_DTYPE_F16, 6501, 1, 2, 1, 16, true, 40, 0, 0, 6656},
    {TJ_DTYPE_F32, 850, 1, 1, 1, 16, true, 16, 2048, 0, 896},
};

START_TEST(softmax_staged) {
  Case k = staged[_i];
  run_softmax(&k, k.cluster > 1 || k.stash > 65536 || _i % 2 ? 90 : 80);
}
END_TEST

/* Clusters of two over the grid, the rows in turn (10 rows over 2
 * groups): the last phase copies the next row's pieces and folds them
 * (stream.c, PIPE), with all of the share kept, with a STASH that reads
 * the rest again (the fold only ever takes a kept piece), and in CTAs of
 * two warps, whose partials meet in shared memory first. */
START_TEST(next_row_folded_in_clusters) {
  static const Case piped[] = {
      {TJ_DTYPE_BF16, 24000, 1, 2, 2, 16, true, 16, 0, 0, 0},
      {TJ_DTYPE_F32, 20000, 1, 2, 2, 16, true, 16, 8192, 0, 0},
      {TJ_DTYPE_F16, 40000, 2, 2, 2, 16, true, 16, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof piped / sizeof piped[0]; i++)
    ck_assert_msg(run_softmax(&piped[i], 90), "case %zu: the next row not folded", i);
}
END_TEST

/* Every piece but the last held in registers, the last lowered alone right
 * after them (no loop) and copied ahead into the stash: 13 vectors a
 * thread in pieces of 12 and 1, one CTA an SM of sm_80 (its 96 KiB stash)
 * leaving the registers to hold one; x read once. */
START_TEST(softmax_held_then_tail) {
  Case k = {TJ_DTYPE_F32, 26587, 16, 1, 1, 16, true, 48, 98304, -1, 26624};
  run_softmax(&k, 80);
}
END_TEST

/* A user program on rows: the interpreter writes args[0] (the reference),
 * then the simulator writes y in its place, two clusters (or CTAs) on
 * sm_90 over a workspace of its own. */
static void interpret_then_simulate(tj_spec *s, int arch, tj_arg *args, int nargs, int64_t rows,
                                    void *y, Run *run, const char *what) {
  ck_assert_msg(tj_interpret(s, args, nargs, rows) == TJ_OK, "%s", tj_spec_error(s));
  args[0].u.ptr = y;
  void *ws = NULL;
  size_t ws_bytes = 0;
  char why[2048];
  ck_assert_msg(simulate(s, arch, args, nargs, rows, 2, &ws, &ws_bytes, run, why, sizeof why),
                "%s: %s", what, why);
  free(ws);
}

/* y = softmax(x) * w, w one row of weights: w's load is placed in the
 * first phase (its operands are there) but only the second uses it, so
 * STAGE keeps x alone in shared memory and w is read once, in the second
 * phase; x is read once too. */
static const char weighted_softmax[] =
    "kernel weighted\n%0 : ptr<f32> = param y\n%1 : ptr<f32> = param x\n"
    "%2 : ptr<f32> = param w\n%3 : i32 = param n\n%4 : i32 = program_id\n"
    "%5 : i32 = mul %4, %3\n%6 : ptr<f32> = ptr_add %1, %5\n%7 : ptr<f32> = ptr_add %0, %5\n"
    "%8 : tile<i32,BLOCK> = arange\n%9 : tile<pred,BLOCK> = lt %8, %3\n%10 : f32 = const -inf\n"
    "%11 : tile<f32,BLOCK> = load %6, %8, %9, %10\n%12 : tile<f32,BLOCK> = load %2, %8, %9\n"
    "%13 : f32 = reduce_max %11\n%14 : tile<f32,BLOCK> = sub %11, %13\n"
    "%15 : tile<f32,BLOCK> = exp %14\n%16 : f32 = reduce_sum %15\n"
    "%17 : tile<f32,BLOCK> = div %15, %16\n%18 : tile<f32,BLOCK> = mul %17, %12\n"
    "store %7, %8, %18, %9\n";

START_TEST(staged_loads_only_where_two_phases_use_them) {
  enum { ROWS = 4, N = 3000 };
  tj_program *p;
  tj_spec *s;
  ck_assert_int_eq(tj_program_parse(weighted_softmax, strlen(weighted_softmax), &p), TJ_OK);
  tj_spec_options o = {.n = N, .num_warps = 1, .dtype = TJ_DTYPE_F32, .align = 16, .stage = 16};
  ck_assert_msg(tj_specialize(p, &o, &s) == TJ_OK, "%s", tj_program_error(p));
  static float x[ROWS * N], w[N], y[ROWS * N], want[ROWS * N];
  TjRng rng;
  rng_seed(&rng, 91);
  for (int i = 0; i < ROWS * N; i++) x[i] = (float)(3.0 * rng_normal(&rng));
  for (int i = 0; i < N; i++) w[i] = (float)rng_normal(&rng);
  tj_arg args[4] = {{TJ_ARG_PTR, {.ptr = want}, sizeof want},
                    {TJ_ARG_PTR, {.ptr = x}, sizeof x},
                    {TJ_ARG_PTR, {.ptr = w}, sizeof w},
                    {TJ_ARG_INT, {.i = N}, 0}};
  Run run;
  interpret_then_simulate(s, 90, args, 4, ROWS, y, &run, "");
  for (int i = 0; i < ROWS * N; i++)
    ck_assert_msg(fabsf(y[i] - want[i]) <= 1e-6f + 1e-5f * fabsf(want[i]), "%d: %g, want %g", i,
                  y[i], want[i]);
  uint64_t row = (uint64_t)ROWS * N * sizeof(float), slack = ROWS * CG_MAX_SLOTS * sizeof(float);
  ck_assert_msg(run.stats.bytes_read[1] <= row + slack, "x read %llu bytes for %llu",
                (unsigned long long)run.stats.bytes_read[1], (unsigned long long)row);
  ck_assert_msg(run.stats.bytes_read[2] <= row + slack, "w read %llu bytes for %llu",
                (unsigned long long)run.stats.bytes_read[2], (unsigned long long)row);
  /* One stash: x's share of the BLOCK, 4096 floats over 32 threads. */
  int smem = run.info.shape.shared_bytes + run.info.shape.dynamic_shared_bytes;
  ck_assert_msg(smem >= 4096 * 4 && smem < 2 * 4096 * 4, "%d bytes of shared memory", smem);
  tj_spec_destroy(s);
  tj_program_destroy(p);
}
END_TEST

/* exp(x - max x) * k, x a bf16 row and k a parameter, in staged pieces
 * (exp_shift.c): the last phase's loop is emitted twice, and the row (its
 * max under 2^24) and k (at most 2 with the bias folded in) pick the
 * shifted copy or the exact one. Rows near 0; of 16646144 and below it at
 * steps of 65536, whose max times log2 e rounds off by c = -0.92, so
 * that the bias is 1.89 (exps 1 and 0); and with one +inf (the exact copy:
 * all NaN). k = 0.25; 3e38, whose product with that bias overflows, so
 * that row must take the exact copy; and 2^120. */
START_TEST(shifted_exps_times_a_parameter) {
  static const char program[] =
      "kernel scaled\n%0 : ptr<f32> = param y\n%1 : ptr<bf16> = param x\n%2 : f32 = param k\n"
      "%3 : i32 = param n\n%4 : i32 = program_id\n%5 : i32 = mul %4, %3\n"
      "%6 : ptr<bf16> = ptr_add %1, %5\n%7 : ptr<f32> = ptr_add %0, %5\n"
      "%8 : tile<i32,BLOCK> = arange\n%9 : tile<pred,BLOCK> = lt %8, %3\n%10 : f32 = const -inf\n"
      "%11 : tile<bf16,BLOCK> = load %6, %8, %9, %10\n%12 : tile<f32,BLOCK> = cast %11\n"
      "%13 : f32 = reduce_max %12\n%14 : tile<f32,BLOCK> = sub %12, %13\n"
      "%15 : tile<f32,BLOCK> = exp %14\n%16 : tile<f32,BLOCK> = mul %2, %15\n"
      "store %7, %8, %16, %9\n";
  static const double scales[] = {0.25, 3e38, 0x1p120};
  enum { ROWS = 3, N = 3000 };
  static float y[ROWS * N], want[ROWS * N];
  tj_program *p;
  tj_spec *s;
  ck_assert_int_eq(tj_program_parse(program, strlen(program), &p), TJ_OK);
  tj_spec_options o = {.n = N, .num_warps = 1, .dtype = TJ_DTYPE_F32, .align = 16, .stage = 16};
  ck_assert_msg(tj_specialize(p, &o, &s) == TJ_OK, "%s", tj_program_error(p));
  tj_codegen_options co = {90, 0, 0};
  char *ptx = NULL;
  ck_assert_msg(tj_emit_ptx(s, &co, &ptx, NULL) == TJ_OK, "%s", tj_spec_error(s));
  ck_assert_int_eq(ptx_count(ptx, "$Lexact_loop_"), 2); /* the scaled loop, twice */
  tj_free(ptx);
  TjMatrix x;
  ck_assert(matrix_alloc(&x, TJ_DTYPE_BF16, ROWS, N, N, 8));
  TjRng rng;
  rng_seed(&rng, 92);
  for (int k = 0; k < 3; k++) {
    for (int64_t c = 0; c < N; c++) {
      matrix_set(&x, 0, c, (c % 2 ? -100.0 : 0.0) + 3.0 * rng_normal(&rng));
      matrix_set(&x, 1, c, 16646144.0 - (c % 7 ? 65536.0 * (double)(1 + c % 3) : 0.0));
      matrix_set(&x, 2, c, c == N / 2 ? INFINITY : 3.0 * rng_normal(&rng));
    }
    tj_arg args[4] = {{TJ_ARG_PTR, {.ptr = want}, sizeof want},
                      {TJ_ARG_PTR, {.ptr = x.data}, x.bytes},
                      {TJ_ARG_FLOAT, {.f = scales[k]}, 0},
                      {TJ_ARG_INT, {.i = N}, 0}};
    Run run;
    interpret_then_simulate(s, 90, args, 4, ROWS, y, &run, "");
    for (int i = 0; i < ROWS * N; i++)
      ck_assert_msg((isnan(y[i]) && isnan(want[i])) || y[i] == want[i] ||
                        fabsf(y[i] - want[i]) <= 1e-6f + 4e-6f * fabsf(want[i]),
                    "k = %g: %d: %g, want %g", scales[k], i, y[i], want[i]);
  }
  matrix_free(&x);
  tj_spec_destroy(s);
  tj_program_destroy(p);
}
END_TEST

START_TEST(softmax_over_clusters) {
  Case k = clusters[_i];
  run_softmax(&k, 90);
}
END_TEST

START_TEST(softmax_over_the_grid) {
  Case k = splits[_i];
  run_softmax(&k, k.cluster > 1 ? 90 : (_i % 2 ? 80 : 75));
}
END_TEST

/* Staged rows over the grid in 8 rounds or more: the odd groups start
 * later (geometry.c, stagger), spinning on %globaltimer; 17 rows over two
 * groups, in CTAs and in clusters of two. */
START_TEST(staggered_groups) {
  static const Case staggered[] = {
      {TJ_DTYPE_F32, 5000, 1, 1, 2, 16, true, 16, 0, 0, 0},
      {TJ_DTYPE_BF16, 20000, 1, 2, 2, 16, true, 32, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof staggered / sizeof staggered[0]; i++)
    run_softmax_rows(&staggered[i], 90, 17);
}
END_TEST

/* Kernels of different SPLIT after each other on one workspace, as on one
 * stream: each leaves the counters as it found them, and partials never
 * land on a counter (the first layout kept a group's counter after the
 * partials of the one before, where a wider split's partials fell, and the
 * GPU hung). */
START_TEST(splits_share_one_workspace) {
  static const int splits_in_turn[] = {8, 2, 3, 16, 5, 2, 8};
  size_t ws_bytes = 2 * TJ_WORKSPACE_COUNTERS; /* room for all: never made again */
  void *ws = calloc(1, ws_bytes);
  for (size_t i = 0; i < sizeof splits_in_turn / sizeof splits_in_turn[0]; i++) {
    Case k = {TJ_DTYPE_F32, 3000, 1, 1, splits_in_turn[i], 16, false, 0, 0, 0, 0};
    run_softmax_on(&k, 90, KINDS + 1, &ws, &ws_bytes);
  }
  free(ws);
}
END_TEST

/* ---- a user's own programs -------------------------------------------------------- */

/* The head of the programs below: their parameters, this instance's row
 * of x (%5) and its mask (%7). */
#define ROW_HEAD                                                                                   \
  "%0 : ptr<f32> = param out\n%1 : ptr<f32> = param x\n%2 : i32 = param n\n"                      \
  "%3 : i32 = program_id\n%4 : i32 = mul %3, %2\n%5 : ptr<f32> = ptr_add %1, %4\n"                \
  "%6 : tile<i32,BLOCK> = arange\n%7 : tile<pred,BLOCK> = lt %6, %2\n"

/* out[row] = reduce over the row of x; written by a tile of length 1. */
static const char row_sum[] = "kernel rowsum\n" ROW_HEAD
                              "%8 : tile<f32,BLOCK> = load %5, %6, %7\n"
                              "%9 : f32 = reduce_sum %8\n"
                              "%10 : tile<i32,ONE> = arange\n"
                              "%11 : tile<i32,ONE> = add %10, %3\n"
                              "%12 : tile<f32,ONE> = const 0\n"
                              "%13 : tile<f32,ONE> = add %12, %9\n"
                              "store %0, %11, %13\n";

/* out[row] = sum x + max x + sum 2x: three rounds an instance that never
 * fuse, so levels across CTAs flip their regions with the instance
 * (reduce.c, flip_ctas) and the middle round's region is 1 on even
 * instances and 0 on odd ones. Before the fix an odd instance put that
 * round past both regions: onto the cluster's mbarriers, or into the next
 * rank's (or past the last rank's) grid partials. */
static const char three_rounds[] = "kernel three\n" ROW_HEAD
                                   "%8 : f32 = const -inf\n"
                                   "%9 : tile<f32,BLOCK> = load %5, %6, %7, %8\n"
                                   "%10 : f32 = const 0\n"
                                   "%11 : tile<f32,BLOCK> = select %7, %9, %10\n"
                                   "%12 : f32 = reduce_sum %11\n"
                                   "%13 : f32 = reduce_max %9\n"
                                   "%14 : tile<f32,BLOCK> = add %11, %11\n"
                                   "%15 : f32 = reduce_sum %14\n"
                                   "%16 : f32 = add %12, %13\n"
                                   "%17 : f32 = add %16, %15\n"
                                   "%18 : tile<i32,ONE> = arange\n"
                                   "%19 : tile<i32,ONE> = add %18, %3\n"
                                   "%20 : tile<f32,ONE> = const 0\n"
                                   "%21 : tile<f32,ONE> = add %20, %17\n"
                                   "store %0, %19, %21\n";

/* %15 = log(sum(exp(x - max))) + max of the row: the body of the two
 * programs below; the first stores it as out[row]. */
#define LSE_BODY                                                                                   \
  ROW_HEAD                                                                                         \
  "%8 : f32 = const -inf\n"                                                                         \
  "%9 : tile<f32,BLOCK> = load %5, %6, %7, %8\n"                                                    \
  "%10 : f32 = reduce_max %9\n"                                                                     \
  "%11 : tile<f32,BLOCK> = sub %9, %10\n"                                                           \
  "%12 : tile<f32,BLOCK> = exp %11\n"                                                               \
  "%13 : f32 = reduce_sum %12\n"                                                                    \
  "%14 : f32 = log %13\n"                                                                           \
  "%15 : f32 = add %14, %10\n"

static const char logsumexp[] = "kernel logsumexp\n" LSE_BODY "%16 : tile<i32,ONE> = arange\n"
                                "%17 : tile<i32,ONE> = add %16, %3\n"
                                "%18 : tile<f32,ONE> = const 0\n"
                                "%19 : tile<f32,ONE> = add %18, %15\n"
                                "store %0, %17, %19\n";

/* out[row] = logsumexp of the row (a fused max and sum over the grid or a
 * stream) plus the row's plain sum: an unpaired reduction among pairs,
 * whose warps' partials sit in 8-byte slots. Before the fix its warp level
 * loaded them four words at a time and summed stale words. */
static const char logsumexp_plus_sum[] = "kernel lse_sum\n" LSE_BODY "%20 : f32 = const 0\n"
                                         "%21 : tile<f32,BLOCK> = select %7, %9, %20\n"
                                         "%22 : f32 = reduce_sum %21\n"
                                         "%23 : f32 = add %15, %22\n"
                                         "%16 : tile<i32,ONE> = arange\n"
                                         "%17 : tile<i32,ONE> = add %16, %3\n"
                                         "%18 : tile<f32,ONE> = const 0\n"
                                         "%19 : tile<f32,ONE> = add %18, %23\n"
                                         "store %0, %17, %19\n";

/* out[row] = max over the row of an i32 tile (keys through every level). */
static const char row_max_i32[] = "kernel rowmax\n"
                                  "%0 : ptr<i32> = param out\n"
                                  "%1 : ptr<i32> = param x\n"
                                  "%2 : i32 = param n\n"
                                  "%3 : i32 = program_id\n"
                                  "%4 : i32 = mul %3, %2\n"
                                  "%5 : ptr<i32> = ptr_add %1, %4\n"
                                  "%6 : tile<i32,BLOCK> = arange\n"
                                  "%7 : tile<pred,BLOCK> = lt %6, %2\n"
                                  "%8 : i32 = const -2147483648\n"
                                  "%9 : tile<i32,BLOCK> = load %5, %6, %7, %8\n"
                                  "%10 : i32 = reduce_max %9\n"
                                  "%11 : tile<i32,ONE> = arange\n"
                                  "%12 : tile<i32,ONE> = add %11, %3\n"
                                  "%13 : tile<i32,ONE> = const 0\n"
                                  "%14 : tile<i32,ONE> = add %13, %10\n"
                                  "store %0, %12, %14\n";

/* out[row] = the row's sum, summed three times by a loop: one reduction
 * reusing its region every trip, so from the second trip on a CTA must not
 * write its partials before the others have read the last trip's (the
 * barrier that guards it must run in the first instance too). */
static const char looped_sum[] = "kernel loopedsum\n"
                                 "%0 : ptr<f32> = param out\n"
                                 "%1 : ptr<f32> = param x\n"
                                 "%2 : i32 = param n\n"
                                 "%3 : i32 = program_id\n"
                                 "%4 : i32 = mul %3, %2\n"
                                 "%5 : ptr<f32> = ptr_add %1, %4\n"
                                 "%6 : tile<i32,BLOCK> = arange\n"
                                 "%7 : tile<pred,BLOCK> = lt %6, %2\n"
                                 "%8 : tile<f32,BLOCK> = load %5, %6, %7\n"
                                 "%9 : i32 = const 0\n"
                                 "%10 : i32 = const 3\n"
                                 "%11 : i32 = const 1\n"
                                 "%12 : f32 = const 0\n"
                                 "%13 : i32 = for %9, %10, %11\n"
                                 "  %14 : f32 = iter %12\n"
                                 "  %15 : tile<f32,BLOCK> = mul %8, %14\n"
                                 "  %16 : tile<f32,BLOCK> = add %8, %15\n"
                                 "  %17 : f32 = reduce_sum %16\n"
                                 "  %18 : f32 = mul %17, %12\n"
                                 "  %19 : f32 = add %18, %17\n"
                                 "  yield %14, %19\n"
                                 "endfor\n"
                                 "%20 : tile<i32,ONE> = arange\n"
                                 "%21 : tile<i32,ONE> = add %20, %3\n"
                                 "%22 : tile<f32,ONE> = const 0\n"
                                 "%23 : tile<f32,ONE> = add %22, %14\n"
                                 "store %0, %21, %23\n";

/* text specialized for rows of n; ONE, the length of the output tile, is
 * declared after the kernel line. */
static tj_spec *specialize_program(const char *text, int64_t n, int cluster, int split, int warps,
                                   tj_program **p) {
  char full[4096];
  tj_spec *s;
  const char *nl = strchr(text, '\n');
  snprintf(full, sizeof full, "%.*s\nconst ONE = 1\n%s", (int)(nl - text), text, nl + 1);
  ck_assert_msg(tj_program_parse(full, strlen(full), p) == TJ_OK, "%s", tj_program_error(*p));
  tj_spec_options o = {.n = n,
                       .num_warps = warps,
                       .dtype = TJ_DTYPE_F32,
                       .align = 16,
                       .cluster = cluster,
                       .split = split};
  ck_assert_msg(tj_specialize(*p, &o, &s) == TJ_OK, "%s", tj_program_error(*p));
  return s;
}

static void run_program(const char *text, bool ints, int64_t n, int cluster, int split, int warps,
                        int arch) {
  tj_program *p;
  tj_spec *s = specialize_program(text, n, cluster, split, warps, &p);
  enum { ROWS = 4 }; /* two instances for each of the two groups */
  int64_t total = ROWS * n;
  float *x = malloc(sizeof *x * (size_t)total);
  float out[ROWS], want[ROWS];
  TjRng rng;
  rng_seed(&rng, test_seed((uint64_t)n, (uint64_t)cluster, (uint64_t)split));
  for (int64_t i = 0; i < total; i++) {
    if (ints) {
      int32_t v = (int32_t)rng_range(&rng, -1000000, 1000000);
      memcpy(&x[i], &v, sizeof v);
    } else {
      x[i] = (float)(3.0 * rng_normal(&rng) + (i / n == 1 ? 50.0 : 0.0));
    }
  }
  tj_arg args[3] = {{TJ_ARG_PTR, {.ptr = want}, sizeof want},
                    {TJ_ARG_PTR, {.ptr = x}, sizeof *x * (size_t)total},
                    {TJ_ARG_INT, {.i = n}, 0}};
  Run run;
  char what[160];
  snprintf(what, sizeof what, "%s n=%lld cluster %d split %d", p->name, (long long)n, cluster,
           split);
  interpret_then_simulate(s, arch, args, 3, ROWS, out, &run, what);
  for (int r = 0; r < ROWS; r++) {
    if (ints) {
      int32_t a, b;
      memcpy(&a, &out[r], 4);
      memcpy(&b, &want[r], 4);
      ck_assert_msg(a == b, "%s row %d: %d, want %d", p->name, r, a, b);
    } else {
      double tol = 1e-5 * (1.0 + fabs(want[r])) + 1e-6 * (double)n;
      ck_assert_msg(fabs((double)out[r] - (double)want[r]) <= tol,
                    "%s n=%lld cluster %d split %d row %d: %.9g, want %.9g", p->name, (long long)n,
                    cluster, split, r, out[r], want[r]);
    }
  }
  free(x);
  tj_spec_destroy(s);
  tj_program_destroy(p);
}

/* out[row] = the sum over the tile of (x, 0 past n) + 1: every slot of the
 * tile counts, so a streamed piece must not count the slots of its repeats
 * past the tile (stream.c, piece_guards). In one warp of 4-element
 * vectors: BLOCK 2912 is 22.75 repeats of 128, the last cut, in pieces of
 * 10, 10 and 3 (the last lowered alone), and BLOCK 3008 23.5 in pieces of 4
 * (none alone): their guards are needed; BLOCK 2944 is 23 whole repeats in
 * pieces of 10, 10 and 3, so every piece computed is whole and needs none. */
static const char count_program[] =
    "kernel count\nconst ONE = 1\n"
    "%0 : ptr<f32> = param out\n%1 : ptr<f32> = param x\n%2 : i64 = param stride\n"
    "%3 : i32 = param n\n%4 : i32 = program_id\n%5 : i64 = cast %4\n%6 : i64 = mul %5, %2\n"
    "%7 : ptr<f32> = ptr_add %1, %6\n%8 : tile<i32,BLOCK> = arange\n"
    "%9 : tile<pred,BLOCK> = lt %8, %3\n%10 : f32 = const 0\n"
    "%11 : tile<f32,BLOCK> = load %7, %8, %9, %10\n%12 : f32 = const 1\n"
    "%13 : tile<f32,BLOCK> = add %11, %12\n%14 : f32 = reduce_sum %13\n"
    "%15 : tile<i32,ONE> = arange\n%16 : tile<i32,ONE> = add %15, %4\n"
    "%17 : tile<f32,ONE> = const 0\n%18 : tile<f32,ONE> = add %17, %14\n"
    "store %0, %16, %18\n";

START_TEST(streamed_reductions_count_only_the_tile) {
  static const struct {
    int64_t block;
    int stage;
  } shapes[] = {{2912, 40}, {3008, 16}, {2944, 40}};
  enum { ROWS = 4, N = 2900, STRIDE = 2904 };
  static float x[ROWS * STRIDE];
  TjRng rng;
  rng_seed(&rng, 93);
  for (int i = 0; i < ROWS * STRIDE; i++) x[i] = (float)rng_normal(&rng);
  for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
    tj_program *p;
    tj_spec *s;
    ck_assert_msg(tj_program_parse(count_program, strlen(count_program), &p) == TJ_OK, "%s",
                  tj_program_error(p));
    tj_spec_options o = {.n = N,
                         .block = shapes[k].block,
                         .num_warps = 1,
                         .dtype = TJ_DTYPE_F32,
                         .align = 16,
                         .stage = shapes[k].stage};
    ck_assert_msg(tj_specialize(p, &o, &s) == TJ_OK, "%s", tj_program_error(p));
    float want[ROWS], out[ROWS];
    tj_arg args[4] = {{TJ_ARG_PTR, {.ptr = want}, sizeof want},
                      {TJ_ARG_PTR, {.ptr = x}, sizeof x},
                      {TJ_ARG_INT, {.i = STRIDE}, 0},
                      {TJ_ARG_INT, {.i = N}, 0}};
    Run run;
    interpret_then_simulate(s, 90, args, 4, ROWS, out, &run, "");
    for (int r = 0; r < ROWS; r++) {
      double sum = (double)shapes[k].block;
      for (int i = 0; i < N; i++) sum += x[r * STRIDE + i];
      ck_assert_msg(fabs(want[r] - sum) <= 1e-3, "interpreter row %d: %g, want %g", r, want[r],
                    sum);
      ck_assert_msg(fabs(out[r] - sum) <= 1e-3, "BLOCK %lld row %d: %g, want %g",
                    (long long)shapes[k].block, r, out[r], sum);
    }
    tj_spec_destroy(s);
    tj_program_destroy(p);
  }
}
END_TEST

/* out[row] = log(s) + m', s a sum of exps of the row, m' the row's max
 * made 0 where it is -inf, k a parameter: the masked softmax's form of a
 * fused pair (reduce.c), s = sum exp((x - m') k), whose max and sum then
 * take one round; and its neighbours. */
#define LSE_HEAD                                                                                   \
  "kernel scaled_lse\n" ROW_HEAD "%8 : f32 = param k\n%9 : f32 = const -inf\n"                    \
  "%10 : tile<f32,BLOCK> = load %5, %6, %7, %9\n%11 : f32 = reduce_max %10\n"                     \
  "%13 : f32 = const 0\n"
#define LSE_TAIL(sum)                                                                              \
  "%19 : f32 = log " sum "\n%20 : f32 = add %19, %14\n%21 : tile<i32,ONE> = arange\n"             \
  "%22 : tile<i32,ONE> = add %21, %3\n%23 : tile<f32,ONE> = const 0\n"                            \
  "%24 : tile<f32,ONE> = add %23, %20\nstore %0, %22, %24\n"
#define SAFE_MAX "%12 : pred = eq %11, %9\n%14 : f32 = select %12, %13, %11\n"
#define SCALED_SUM                                                                                 \
  "%15 : tile<f32,BLOCK> = sub %10, %14\n%16 : tile<f32,BLOCK> = mul %15, %8\n"                   \
  "%17 : tile<f32,BLOCK> = exp %16\n%18 : f32 = reduce_sum %17\n"
static const char scaled_lse[] = LSE_HEAD SAFE_MAX SCALED_SUM LSE_TAIL("%18");
/* the same, each operand order the other way */
static const char scaled_lse_reversed[] =
    LSE_HEAD "%12 : pred = eq %9, %11\n%14 : f32 = select %12, %13, %11\n"
             "%15 : tile<f32,BLOCK> = sub %10, %14\n%16 : tile<f32,BLOCK> = mul %8, %15\n"
             "%17 : tile<f32,BLOCK> = exp %16\n%18 : f32 = reduce_sum %17\n" LSE_TAIL("%18");
/* scaled, from the max itself: NaN where it is -inf, as exp(-inf - -inf) */
static const char scaled_lse_of_max[] =
    LSE_HEAD SAFE_MAX "%15 : tile<f32,BLOCK> = sub %10, %11\n%16 : tile<f32,BLOCK> = mul %15, %8\n"
                      "%17 : tile<f32,BLOCK> = exp %16\n%18 : f32 = reduce_sum %17\n" LSE_TAIL("%18");
/* safe, not scaled */
static const char safe_lse[] = LSE_HEAD SAFE_MAX "%15 : tile<f32,BLOCK> = sub %10, %14\n"
                                                 "%17 : tile<f32,BLOCK> = exp %15\n"
                                                 "%18 : f32 = reduce_sum %17\n" LSE_TAIL("%18");
/* two sums that could pair with the max: a kernel's pairs share one form,
 * so the plain one fuses and the scaled one takes a round of its own */
static const char two_sums[] =
    LSE_HEAD SAFE_MAX SCALED_SUM "%25 : tile<f32,BLOCK> = sub %10, %11\n"
                                 "%26 : tile<f32,BLOCK> = exp %25\n%27 : f32 = reduce_sum %26\n"
                                 "%28 : f32 = add %18, %27\n" LSE_TAIL("%28");

enum { LSE_ROWS = 6 };

/* text on rows of random values, one 50 higher, one all -inf, one whose
 * first half is -inf, one with a NaN, one with a +inf, against the
 * interpreter (its results into want), in `rounds` grid rounds. */
static void lse_rows(const char *text, int64_t n, int cluster, int split, int arch, float k,
                     int rounds, float *want) {
  int64_t total = LSE_ROWS * n;
  tj_program *p;
  tj_spec *s = specialize_program(text, n, cluster, split, 1, &p);
  float *x = malloc(sizeof *x * (size_t)total), out[LSE_ROWS];
  ck_assert_ptr_nonnull(x);
  TjRng rng;
  rng_seed(&rng, test_seed((uint64_t)n, (uint64_t)split, (uint64_t)(k * 64)));
  for (int64_t i = 0; i < total; i++) {
    int64_t r = i / n, col = i % n;
    x[i] = (float)(3.0 * rng_normal(&rng) + (r == 1 ? 50.0 : 0.0));
    if (r == 2 || (r == 3 && col < n / 2)) x[i] = -INFINITY;
    if (col == n / 3 && r >= 4) x[i] = r == 4 ? NAN : INFINITY;
  }
  tj_arg args[4] = {{TJ_ARG_PTR, {.ptr = want}, sizeof *want * LSE_ROWS},
                    {TJ_ARG_PTR, {.ptr = x}, sizeof *x * (size_t)total},
                    {TJ_ARG_INT, {.i = n}, 0},
                    {TJ_ARG_FLOAT, {.f = k}, 0}};
  Run run;
  char what[96];
  snprintf(what, sizeof what, "n=%lld split %d k %g", (long long)n, split, (double)k);
  interpret_then_simulate(s, arch, args, 4, LSE_ROWS, out, &run, what);
  ck_assert_msg(run.grid_spins == 2 * rounds, "n=%lld k %g: %d grid spins, want %d rounds",
                (long long)n, k, run.grid_spins, rounds);
  for (int r = 0; r < LSE_ROWS; r++) {
    double tol = 1e-5 * (1.0 + fabs(want[r]));
    bool same = out[r] == want[r] || (isnan(out[r]) && isnan(want[r]));
    ck_assert_msg(same || fabs((double)out[r] - (double)want[r]) <= tol,
                  "n=%lld split %d k %g row %d: %.9g, want %.9g", (long long)n, split, k, r,
                  out[r], want[r]);
  }
  free(x);
  tj_spec_destroy(s);
  tj_program_destroy(p);
}

/* The scaled, safe pair over splits, streams and a cluster with a split,
 * for k positive, negative and 0. Where n is BLOCK no element is masked
 * off, so a negative k leaves rows 0 and 1 finite, and 64 over 4 CTAs of
 * 32 lanes leaves lanes past the tile, whose slots must add nothing. Then
 * the same pair written the other way round, its neighbours (scaled from
 * the max itself, safe and not scaled), and two sums. */
START_TEST(scaled_safe_pairs_fuse) {
  static const struct {
    int64_t n;
    int cluster, split, arch;
    float k;
  } cases[] = {{6000, 1, 4, 80, 0.125f},   {6000, 1, 4, 80, -0.25f}, {40000, 1, 2, 90, 0.5f},
               {30000, 2, 2, 90, 0.125f},  {64, 1, 4, 80, -0.25f},   {64, 1, 4, 80, 0.0f},
               {32768, 1, 2, 90, -0.125f}, {32768, 2, 2, 90, 0.0f},  {6000, 1, 40, 80, 0.125f},
               {6000, 1, 40, 80, -0.25f}}; /* the last two: more CTAs than threads */
  float want[LSE_ROWS];
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    float k = cases[c].k;
    lse_rows(scaled_lse, cases[c].n, cases[c].cluster, cases[c].split, cases[c].arch, k, 1, want);
    if (k != 0.0f) /* the all -inf row: m' = 0 and exp(-inf k) */
      ck_assert(isinf(want[2]) && (want[2] > 0) == (k < 0));
    else
      ck_assert(isnan(want[2]) && isnan(want[3]));
    if (cases[c].n == 64 || cases[c].n == 32768) /* nothing masked off: finite */
      ck_assert(isfinite(want[0]) && isfinite(want[1]));
    ck_assert(isnan(want[4]));
  }
  static const char *const others[] = {scaled_lse_reversed, scaled_lse_of_max, safe_lse};
  for (size_t i = 0; i < 3; i++) {
    lse_rows(others[i], 6000, 1, 4, 80, 0.125f, 1, want);
    lse_rows(others[i], 64, 1, 4, 80, -0.5f, 1, want);
    lse_rows(others[i], 32768, 2, 2, 90, 0.25f, 1, want);
    if (others[i] == scaled_lse_of_max) ck_assert(isnan(want[2]));
    if (others[i] == safe_lse) ck_assert(isinf(want[2]) && want[2] < 0);
  }
  lse_rows(two_sums, 6000, 1, 4, 80, 0.125f, 2, want);
  lse_rows(two_sums, 32768, 1, 2, 90, -0.25f, 2, want);
}
END_TEST

START_TEST(user_programs_split_across_ctas) {
  run_program(row_sum, false, 5000, 1, 4, 1, 80);
  run_program(row_sum, false, 30000, 1, 3, 1, 90); /* streamed */
  run_program(row_sum, false, 9000, 2, 1, 1, 90);
  run_program(logsumexp, false, 6000, 1, 5, 1, 75);
  run_program(logsumexp, false, 40000, 1, 2, 1, 90); /* streamed, a fused pair */
  run_program(logsumexp, false, 12000, 4, 1, 1, 90);
  run_program(logsumexp, false, 50000, 2, 2, 2, 90);
  run_program(row_max_i32, true, 7000, 1, 3, 1, 80);
  run_program(row_max_i32, true, 20000, 3, 1, 1, 90);
  run_program(looped_sum, false, 4096, 2, 1, 1, 90);
  run_program(looped_sum, false, 3000, 1, 3, 1, 80);
  run_program(logsumexp_plus_sum, false, 5000, 1, 2, 4, 90);
  run_program(logsumexp_plus_sum, false, 5000, 1, 3, 8, 80);
  /* three rounds an instance: regions flip, the middle one from region 1 */
  run_program(logsumexp_plus_sum, false, 5000, 2, 1, 1, 90);
  run_program(three_rounds, false, 5000, 4, 1, 1, 90);
  run_program(three_rounds, false, 5000, 1, 8, 1, 80);
  run_program(three_rounds, false, 9000, 2, 2, 2, 90);
  /* more CTAs (or clusters) than a CTA's threads: thread t combines
   * partials t, t + T, ... (up to 3 of 70 over 32 threads), then, in CTAs
   * of two warps, the warps' round; two rounds in regions that do not
   * flip, clusters, and a loop's merge */
  run_program(logsumexp, false, 40000, 1, 70, 1, 90);
  run_program(row_sum, false, 20000, 1, 33, 1, 75);
  run_program(row_max_i32, true, 9000, 1, 40, 1, 80);
  run_program(logsumexp_plus_sum, false, 5000, 1, 70, 2, 90);
  run_program(three_rounds, false, 9000, 2, 40, 1, 90);
  run_program(looped_sum, false, 3000, 1, 40, 1, 80);
}
END_TEST

/* The simulator's threads take turns, so it cannot show a CTA racing ahead
 * into the next trip of a loop: the PTX must keep the barrier before a
 * region's reuse inside the loop unconditional. Before the fix it skipped
 * it (`@!later bra $Lfirst_N`) through the whole first instance. */
START_TEST(a_barrier_in_a_loop_runs_from_the_first_trip) {
  static const struct {
    int cluster, split, arch;
    const char *barrier;
  } levels[] = {{2, 1, 90, "barrier.cluster.arrive"}, {1, 3, 80, "$Lgrid_wait_"}};
  for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
    tj_program *p;
    tj_spec *s = specialize_program(looped_sum, 4096, levels[i].cluster, levels[i].split, 1, &p);
    tj_codegen_options o = {levels[i].arch, 0, 0};
    char *ptx = NULL;
    ck_assert_msg(tj_emit_ptx(s, &o, &ptx, NULL) == TJ_OK, "%s", tj_spec_error(s));
    const char *head = strstr(ptx, "$Lloop_"),
               *back = head ? strstr(head, "bra.uni $Lloop_") : NULL;
    ck_assert_msg(head && back, "level %zu: no loop in the PTX", i);
    size_t len = (size_t)(back - head);
    char *body = malloc(len + 1);
    ck_assert_ptr_nonnull(body);
    memcpy(body, head, len);
    body[len] = '\0';
    ck_assert_msg(strstr(body, levels[i].barrier), "level %zu: no %s in the loop", i,
                  levels[i].barrier);
    ck_assert_msg(!strstr(body, "$Lfirst_"),
                  "level %zu: the loop's barrier is skipped in the first instance", i);
    free(body);
    tj_free(ptx);
    tj_spec_destroy(s);
    tj_program_destroy(p);
  }
}
END_TEST

/* Levels across CTAs whose instances take one round (softmax's fused max
 * and sum; a row sum) flip their regions with the instance's parity
 * (reduce.c, flip_ctas): no barrier before the round, one wait per round
 * (a cluster's on its mbarrier; barrier.cluster only for the prologue's
 * arrival), the parity toggled once per instance. With a loop of its own the program keeps the
 * planner's barriers (the test above). The simulator cannot show the race
 * a missing flip would allow, so this checks the PTX; softmax_over_clusters,
 * softmax_staged and softmax_over_the_grid run such kernels over several
 * instances a CTA. */
START_TEST(one_round_levels_flip_their_regions) {
  static const struct {
    const char *text; /* NULL: softmax */
    int64_t n;
    int cluster, split, stage, arch;
    const char *wait;
    int waits;
  } cases[] = {{NULL, 7000, 1, 5, 0, 80, "$Lgrid_wait_", 2},
               {NULL, 33000, 1, 2, 0, 90, "$Lgrid_wait_", 2},
               {row_sum, 5000, 1, 3, 0, 80, "$Lgrid_wait_", 2},
               {NULL, 65536, 2, 1, 32, 90, "mbarrier.try_wait", 1},
               {NULL, 40000, 3, 1, 0, 90, "mbarrier.try_wait", 1},
               {row_sum, 5000, 4, 1, 0, 90, "mbarrier.try_wait", 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tj_program *p;
    tj_spec *s;
    if (cases[i].text) {
      s = specialize_program(cases[i].text, cases[i].n, cases[i].cluster, cases[i].split, 1, &p);
    } else {
      tj_spec_options o = {.n = cases[i].n,
                           .num_warps = 1,
                           .dtype = TJ_DTYPE_F32,
                           .align = 16,
                           .cluster = cases[i].cluster,
                           .split = cases[i].split,
                           .stage = cases[i].stage};
      ck_assert_int_eq(tj_softmax_program(TJ_SOFTMAX_SINGLE, cases[i].n, &p), TJ_OK);
      ck_assert_int_eq(tj_specialize(p, &o, &s), TJ_OK);
    }
    tj_codegen_options o = {cases[i].arch, 0, 0};
    char *ptx = NULL;
    ck_assert_msg(tj_emit_ptx(s, &o, &ptx, NULL) == TJ_OK, "%s", tj_spec_error(s));
    ck_assert_msg(!strstr(ptx, "$Lfirst_"), "case %zu: a barrier before the round", i);
    int waits = 0, flips = 0;
    for (const char *at = ptx; (at = strstr(at, cases[i].wait)) != NULL; at++) waits++;
    for (const char *at = ptx; (at = strstr(at, "xor.b32 ")) != NULL; at++) {
      const char *end = strchr(at, '\n');
      flips += end && end - at > 4 && strncmp(end - 4, ", 8;", 4) == 0;
    }
    ck_assert_msg(waits == cases[i].waits, "case %zu: %d of %s, want %d", i, waits, cases[i].wait,
                  cases[i].waits);
    ck_assert_msg(flips == 1, "case %zu: the parity flips %d times an instance", i, flips);
    if (cases[i].cluster > 1) /* only the prologue's arrival waited for */
      ck_assert_int_eq(ptx_count(ptx, "barrier.cluster.wait"), 1);
    tj_free(ptx);
    tj_spec_destroy(s);
    tj_program_destroy(p);
  }
}
END_TEST

/* 16-bit staged loads whose elements move alone, through their vectors'
 * words (memory.c): a mask that is not monotone (arange < n and arange % 3
 * != 0, element by element on the main path), prefetched and with a
 * capped stash; and no mask at all on rows at any phase (lane 0's wrapping
 * vector element by element). Rows of a stride, so that accesses move
 * vectors; compared with the interpreter, with rows left poisoned past n. */
static const char every_third_masked[] =
    "kernel thirds\n%0 : ptr<DTYPE> = param y\n%1 : ptr<DTYPE> = param x\n"
    "%2 : i64 = param stride\n%3 : i32 = param n\n%4 : i32 = program_id\n%5 : i64 = cast %4\n"
    "%6 : i64 = mul %5, %2\n%7 : ptr<DTYPE> = ptr_add %1, %6\n%8 : ptr<DTYPE> = ptr_add %0, %6\n"
    "%9 : tile<i32,BLOCK> = arange\n%10 : tile<pred,BLOCK> = lt %9, %3\n%11 : i32 = const 3\n"
    "%12 : tile<i32,BLOCK> = rem %9, %11\n%13 : i32 = const 0\n"
    "%14 : tile<pred,BLOCK> = ne %12, %13\n%15 : tile<pred,BLOCK> = and %10, %14\n"
    "%16 : f32 = const 1.5\n%17 : tile<DTYPE,BLOCK> = load %7, %9, %15, %16\n"
    "%18 : tile<f32,BLOCK> = cast %17\n%19 : f32 = reduce_sum %18\n"
    "%20 : tile<f32,BLOCK> = sub %18, %19\n%21 : tile<DTYPE,BLOCK> = cast %20\n"
    "store %8, %9, %21, %10\n";
static const char unmasked[] =
    "kernel whole\n%0 : ptr<DTYPE> = param y\n%1 : ptr<DTYPE> = param x\n"
    "%2 : i64 = param stride\n%3 : i32 = param n\n%4 : i32 = program_id\n%5 : i64 = cast %4\n"
    "%6 : i64 = mul %5, %2\n%7 : ptr<DTYPE> = ptr_add %1, %6\n%8 : ptr<DTYPE> = ptr_add %0, %6\n"
    "%9 : tile<i32,BLOCK> = arange\n%10 : tile<DTYPE,BLOCK> = load %7, %9\n"
    "%11 : tile<f32,BLOCK> = cast %10\n%12 : f32 = reduce_sum %11\n"
    "%13 : tile<f32,BLOCK> = sub %11, %12\n%14 : tile<DTYPE,BLOCK> = cast %13\n"
    "store %8, %9, %14\n";

typedef struct Alone {
  const char *text;
  int64_t n, block, stride, at; /* at: elements from a 16-byte boundary */
  int stage, stash, arch;
} Alone;

static const Alone alone[] = {
    {every_third_masked, 3001, 4096, 3008, 0, 16, 0, 90},
    {every_third_masked, 3001, 4096, 3008, 0, 16, 0, 80},
    {every_third_masked, 20003, 32768, 20008, 0, 32, 4096, 90},
    {every_third_masked, 3001, 4096, 3005, 1, 16, 0, 90}, /* at any phase */
    {unmasked, 4096, 4096, 4099, 3, 16, 0, 90},
    {unmasked, 32768, 32768, 32771, 5, 32, 8192, 80},
};

START_TEST(sixteen_bit_elements_that_move_alone) {
  enum { ROWS = 5 };
  const Alone *k = &alone[_i % (sizeof alone / sizeof alone[0])];
  tj_dtype d = _i < (int)(sizeof alone / sizeof alone[0]) ? TJ_DTYPE_F16 : TJ_DTYPE_BF16;
  bool phased = k->at != 0 || k->stride % 8 != 0;
  tj_program *p;
  tj_spec *s;
  ck_assert_int_eq(tj_program_parse(k->text, strlen(k->text), &p), TJ_OK);
  tj_spec_options o = {.n = k->block,
                       .num_warps = 1,
                       .dtype = d,
                       .align = phased ? 2 : 16,
                       .phased = phased,
                       .stage = k->stage,
                       .stash = k->stash};
  ck_assert_msg(tj_specialize(p, &o, &s) == TJ_OK, "%s", tj_program_error(p));
  size_t size = dtype_bytes(d), count = (size_t)((ROWS - 1) * k->stride + k->block);
  size_t bytes = ((count + 16) * size + 15) / 16 * 16; /* aligned_alloc: a multiple of 16 */
  char *xb = aligned_alloc(16, bytes), *yb = aligned_alloc(16, bytes),
       *wb = aligned_alloc(16, bytes);
  ck_assert(xb && yb && wb);
  char *x = xb + k->at * size, *y = yb + k->at * size, *w = wb + k->at * size;
  TjRng rng;
  rng_seed(&rng, test_seed((uint64_t)k->n, (uint64_t)k->stride, (uint64_t)d));
  uint32_t poison = poison_bits(d);
  for (size_t i = 0; i < count; i++) {
    elem_set(x, d, i, 3 * rng_normal(&rng));
    memcpy(y + i * size, &poison, size);
    memcpy(w + i * size, &poison, size);
  }
  tj_arg args[4] = {{TJ_ARG_PTR, {.ptr = w}, count * size},
                    {TJ_ARG_PTR, {.ptr = x}, count * size},
                    {TJ_ARG_INT, {.i = k->stride}, 0},
                    {TJ_ARG_INT, {.i = k->n}, 0}};
  ck_assert_msg(tj_interpret(s, args, 4, ROWS) == TJ_OK, "%s", tj_spec_error(s));
  args[0].u.ptr = y;
  char why[2048];
  ck_assert_msg(ptxsim_run_spec(s, k->arch, args, 4, ROWS, 0, NULL, why, sizeof why), "case %d: %s",
                _i, why);
  TjTolerance t = dtype_tolerance(d);
  t.rtol *= 4;
  for (size_t i = 0; i < count; i++) {
    ck_assert_msg(is_poison(y, d, i) == is_poison(w, d, i), "case %d: element %zu written %s", _i,
                  i, is_poison(y, d, i) ? "by the interpreter only" : "outside the mask");
    if (!is_poison(w, d, i))
      ck_assert_msg(close_enough(elem_get(y, d, i), elem_get(w, d, i), t),
                    "case %d: %zu: %g, want %g", _i, i, elem_get(y, d, i), elem_get(w, d, i));
  }
  free(xb);
  free(yb);
  free(wb);
  tj_spec_destroy(s);
  tj_program_destroy(p);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("ptx_sim_across");
  TCase *t = tcase_create("across");
  tcase_set_timeout(t, 600);
  tcase_add_test(t, next_row_folded_in_clusters);
  tcase_add_loop_test(t, softmax_over_clusters, 0, (int)(sizeof clusters / sizeof clusters[0]));
  tcase_add_loop_test(t, softmax_over_the_grid, 0, (int)(sizeof splits / sizeof splits[0]));
  tcase_add_loop_test(t, softmax_staged, 0, (int)(sizeof staged / sizeof staged[0]));
  tcase_add_test(t, softmax_held_then_tail);
  tcase_add_test(t, splits_share_one_workspace);
  tcase_add_test(t, staggered_groups);
  tcase_add_test(t, user_programs_split_across_ctas);
  tcase_add_test(t, scaled_safe_pairs_fuse);
  tcase_add_test(t, a_barrier_in_a_loop_runs_from_the_first_trip);
  tcase_add_test(t, one_round_levels_flip_their_regions);
  tcase_add_test(t, staged_loads_only_where_two_phases_use_them);
  tcase_add_test(t, streamed_reductions_count_only_the_tile);
  tcase_add_test(t, shifted_exps_times_a_parameter);
  tcase_add_loop_test(t, sixteen_bit_elements_that_move_alone, 0,
                      2 * (int)(sizeof alone / sizeof alone[0]));
  suite_add_tcase(s, t);
  return s;
}

int main(void) { return test_run_suite(suite()); }
