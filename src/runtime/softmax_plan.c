/*
 * softmax_plan.c — the softmax strategy: which template, BLOCK, warps,
 * cluster and split, for a shape on a device. Everything that chooses how
 * softmax runs is here; tj_softmax (softmax_launch.c) adds only what
 * depends on the call's pointers (their alignment) and checks that the
 * plan's CTAs can be resident together, shrinking it when they cannot.
 *
 * The numbers behind the rules (design.md section 5, bench/RESULTS.md):
 *   - a CTA of up to 1024 threads holds a row of up to 32768 elements in
 *     registers at 32 a thread (the num_warps table, tj_default_num_warps,
 *     measured on an H200 in f32; per arch and dtype the measured lines of
 *     softmax_tuning.inc, tools/tj-tune.py's, take precedence): one CTA,
 *     or a lane group, per row;
 *   - softmax_tuning.inc's TUNED_ROWS lines, where tj-tune measured a
 *     shape for staged rows that beats the rules below (rt_softmax_tuned_rows);
 *   - rows of 64 KiB and more (sm_80 and later) are staged (plan_staged):
 *     where the shared memory of one CTA, a cluster of up to 8 or the grid
 *     holds them, x is read once and three 256-thread CTAs share an SM
 *     (on sm_90, rows that start on 16-byte boundaries take one CTA of
 *     512 threads instead where plan_one_cta says); wider rows keep what
 *     the grid's shared memory holds and read the rest again, from L2 as
 *     far as it keeps it (plan_partial); an even
 *     number of rows that take every CTA in turn run two at a time where
 *     the stash still keeps most of a CTA's share (plan_pairs); the rules
 *     below are for the rest, and for STAGE -1;
 *   - on sm_90, wider rows with enough of them to fill the device take a
 *     cluster of at most 8 CTAs of 128 or 256 threads at 64 elements a
 *     thread: the row stays on chip, x is read once, and two to four CTAs
 *     share an SM;
 *   - wider rows, few rows, or no clusters: CTAs of 512 threads at 32
 *     elements a thread, SPLIT of them per row, fill the device, reducing
 *     through global memory (16-bit staged rows in rounds of the grid on
 *     sm_90 in clusters of two: cluster_pairs), the row still on chip while
 *     the resident CTAs hold it. A row over a quarter of L2 gets every
 *     resident CTA, the rows in turn, so that its second read (when it
 *     does not fit the registers: codegen/stream.c) finds it in L2.
 * The resident CTAs are estimated at 64 registers a thread (32 elements)
 * or 104 (64 elements);
 * the runtime measures the real number when it loads the kernel. Other
 * archs than sm_90 hold 16 elements a thread (values_per_thread).
 */
#include "runtime/runtime.h"
#include "codegen/codegen.h" /* cg_max_shared */

#include <stdio.h>
#include <string.h>

#define ROW_PER_CTA         32768 /* elements a 1024-thread CTA holds at 32 a thread */
#define WIDE_THREADS        512   /* a CTA of a split, or of a cluster the caller asks for */
#define PORTABLE_CLUSTER    8   /* the most CTAs of a cluster without the non-portable sizes */
#define CLUSTER_VALUES      64  /* elements a thread of a cluster's CTA holds (sm_90) */
#define CLUSTER_MIN_THREADS 128 /* ... to 256: two to four CTAs an SM */
#define CLUSTER_MAX_THREADS 256
#define CLUSTER_REGISTERS   104 /* what ptxas gives such a thread, rounded up */

/* Elements a thread of a 1024-thread CTA holds in a row spread over CTAs:
 * 32 on sm_90, spill-free there at the 64 registers such a CTA allows (the
 * ptxas sweep checks it); ptxas for other archs needs a few more registers
 * at 32, so they hold 16. */
static int values_per_thread(int arch) { return arch == 90 ? 32 : 16; }

/* Nominal devices: sm -> the numbers of a common part of that arch. */
static const struct {
  int arch, sms, threads_per_sm, l2_mb;
  const char *name;
} nominal[] = {
    {75, 40, 1024, 4, "nominal sm_75 (T4)"},       {80, 108, 2048, 40, "nominal sm_80 (A100)"},
    {86, 84, 1536, 6, "nominal sm_86"},            {87, 16, 1536, 4, "nominal sm_87"},
    {89, 128, 1536, 72, "nominal sm_89"},          {90, 132, 2048, 50, "nominal sm_90 (H100 SXM)"},
    {100, 148, 2048, 126, "nominal sm_100 (B200)"}, {103, 148, 2048, 126, "nominal sm_103"},
    {110, 20, 1536, 24, "nominal sm_110"},          {120, 84, 1536, 64, "nominal sm_120"},
    {121, 48, 1536, 24, "nominal sm_121"},
};

tj_status tj_device_nominal(int arch, tj_device_info *out) {
  if (!out) return TJ_ERR_INVALID_ARGUMENT;
  for (size_t i = 0; i < TJ_COUNTOF(nominal); i++) {
    if (nominal[i].arch != arch) continue;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", nominal[i].name);
    out->arch = out->target_arch = arch;
    out->sm_count = nominal[i].sms;
    out->max_threads_per_block = 1024;
    out->max_threads_per_sm = nominal[i].threads_per_sm;
    out->max_blocks_per_sm = 32;
    out->max_shared_per_block = 48 * 1024;
    out->max_shared_per_block_optin = cg_max_shared(arch);
    out->max_shared_per_sm = cg_max_shared(arch) + 1024;
    out->registers_per_sm = 65536;
    out->l2_bytes = nominal[i].l2_mb << 20;
    out->max_grid_x = INT32_MAX;
    out->cooperative_launch = 1;
    out->cluster_launch = arch >= 90;
    return TJ_OK;
  }
  return TJ_ERR_UNSUPPORTED;
}

static tj_status check(const tj_device_info *d, tj_dtype dtype, int64_t m, int64_t n,
                       const tj_softmax_options *o, const tj_softmax_plan *plan) {
  int w = o->num_warps;
  if (!plan || (unsigned)dtype >= TJ_DTYPE_COUNT || m < 0 || n < 0) return TJ_ERR_INVALID_ARGUMENT;
  if (w < 0 || w > 32 || (w & (w - 1)) != 0 || (unsigned)o->which_template > TJ_SOFTMAX_ONLINE)
    return TJ_ERR_INVALID_ARGUMENT;
  if (o->cluster < 0 || o->cluster > 16 || o->split < 0 || o->split > 1024)
    return TJ_ERR_INVALID_ARGUMENT;
  if (o->stage < -1 || o->stage > 128 || o->stash < 0) return TJ_ERR_INVALID_ARGUMENT;
  if (d->sm_count < 1) return TJ_ERR_INVALID_ARGUMENT;
  return TJ_OK;
}

/* CTAs of T threads at R registers a thread the device holds at once. */
static int64_t resident(const tj_device_info *d, int threads, int registers) {
  int64_t by_threads = d->max_threads_per_sm / threads;
  int64_t by_registers = (d->registers_per_sm ? d->registers_per_sm : 65536) / (registers * threads);
  int64_t per_sm = by_threads < by_registers ? by_threads : by_registers;
  return (per_sm > 0 ? per_sm : 1) * d->sm_count;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* CTAs of T threads that hold a row of n on chip. */
static int64_t ctas_for(const tj_device_info *d, int64_t n, int threads) {
  return ceil_div(n, (int64_t)threads * values_per_thread(d->arch));
}

/* A row wider than one CTA: on sm_90, a cluster of CTAs holding 64
 * elements a thread (about 100 to 127 registers, spill-free per the ptxas
 * sweep) when 8 of them hold the row and enough rows fill the device. The
 * CTAs are small, 128 threads while 8 of them hold the row, else 256, so
 * that two to four share an SM and one loads while others reduce or wait
 * at their cluster's barrier. Measured on an H200 (bench/RESULTS.md,
 * 2026-11-24, against 512-thread CTAs at 32 a thread), in % of copy:
 * N = 65536 bf16 67.0 against 64.0, f32 85.0 against 84.3; N = 131072 in
 * clusters of 8 256-thread CTAs, bf16 63.2 against 60.5 and f32 80.3
 * against 79.3 (16 128-thread CTAs: 55 and 78.5); N = 262144 bf16 56.5
 * against 55.2, f32 72.0 against 71.4. (16-bit rows of 32768 ran no
 * faster in clusters than in one 1024-thread CTA: 70.7 against 70.8.)
 * Otherwise a grid split of 512-thread CTAs at 32 a thread (at N = 524288
 * a split of 32 ran at 74% of copy in f32 and 54% in bf16, against 58% and
 * 45% for clusters of 16 1024-thread CTAs). Clusters stop at the portable
 * 8: rows of 16 such CTAs ran faster over the grid (H100, 2026-11-26, % of
 * copy, a cluster of 16 against a split of 16 at STAGE -1: f32 64 x 262144
 * 76.5 / 86.5, bf16 256 x 262144 63.9 / 68.2; softmax backward f32 512 x
 * 131072 93.1 / 94.5, 256 x 262144 92.8 / 92.2), and compute-sanitizer's
 * synccheck reports divergent threads at a CTA barrier in clusters of 16,
 * none in clusters of 8 (bench/RESULTS.md). warps: the caller's, or 0. */
static void plan_wide(const tj_device_info *d, int elem, int64_t m, int64_t n, int warps,
                      tj_softmax_plan *plan) {
  int threads = warps ? 32 * warps : WIDE_THREADS;
  if (d->arch >= 90 && d->cluster_launch) {
    /* sm_90 by default: the small CTAs at 64 a thread; else (the caller's
     * warps, other archs) the split's CTAs at their values a thread. */
    int t = threads, regs = 64;
    int64_t per_row = ctas_for(d, n, t);
    if (!warps && d->arch == 90) {
      for (t = CLUSTER_MIN_THREADS;
           t < CLUSTER_MAX_THREADS && ceil_div(n, (int64_t)t * CLUSTER_VALUES) > PORTABLE_CLUSTER;)
        t *= 2;
      per_row = ceil_div(n, (int64_t)t * CLUSTER_VALUES);
      regs = CLUSTER_REGISTERS;
    }
    if (per_row <= PORTABLE_CLUSTER && m * per_row >= resident(d, t, regs)) {
      plan->num_warps = t / 32;
      plan->cluster = (int)per_row;
      return;
    }
  }
  int64_t per_row = ctas_for(d, n, threads);
  /* A row the resident CTAs cannot hold streams in pieces (codegen/stream.c):
   * in 1024-thread CTAs, which ptxas fits in 64 registers where 512-thread
   * ones spilled, and which ran within 3% of them at 10^7 and 2^24. */
  if (!warps && per_row > resident(d, threads, 64)) {
    threads = 1024;
    per_row = ctas_for(d, n, threads);
  }
  /* at most a CTA's threads, as every plan measured (codegen takes up to 1024) */
  int64_t fill = resident(d, threads, 64), most = fill < threads ? fill : threads;
  int64_t split = fill / (m > 0 ? m : 1);
  if (split < per_row) split = per_row;
  if (n * (int64_t)elem * 4 > d->l2_bytes) split = most;
  plan->num_warps = threads / 32;
  plan->split = (int)(split < most ? split : most);
}

/* A row of at least STAGE_MIN_BYTES held elements (its tiles' bytes) on
 * sm_80 and later is staged (codegen/stream.c): CTAs of STAGE_THREADS
 * threads each keep their share of it in shared memory, STAGE_VALUES
 * elements a thread in registers at a time. x is read from memory once, a
 * CTA needs few registers, and up to three share an SM, so that one loads
 * while the others compute. Shares of at most STAGE_CTA_BYTES: in one CTA
 * or a cluster of up to 8 (sm_90) while enough rows fill the device; else,
 * for rows wider than one CTA's registers hold, over the grid (SPLIT), with
 * as many CTAs a row as fill the device when rows are few, each share at
 * most STAGE_CTA_MAX (few rows of at most 32768 stay one CTA a row). A row
 * wider still keeps what it can (plan_partial), else the plans above (it
 * streams, reading x twice).
 * Measured on an H100 (bench/RESULTS.md, 2026-11-25), % of copy, old plan
 * against staged: one CTA bf16 32768 93.5 / 96.6; clusters f32 65536
 * 91.1 / 95.9, 262144 80.8 / 90.7, bf16 65536 77.9 / 94.0, 524288 59.6 /
 * 85.1; over the grid f32 524288 76.6 / 88.5, 2^20 72.3 / 85.4, bf16 2^20
 * 54.0 / 76.4 (clusters of 16 with a split: 78.2, 74.8, 75.8); one row of
 * 10^6 f32 62.8 / 73.3, of 10^7 bf16 58.7 / 76.4. Shares of 32 KiB (f32
 * 65536 in clusters of 8) gave 89.9 and of 128 KiB (2) 83.0, against 95.9
 * at 64 KiB; one CTA of 128 KiB (f32 32768) 91.2 against 97.1 for two. The
 * hand-written experiment bench/experiments/softmax_staged_rows.cu showed
 * the same shape first. Rows wider than the grid's shared memory keep
 * what it holds and read the rest again (plan_partial). */
#define STAGE_MIN_BYTES (64 * 1024)
#define STAGE_MIN_ELEMS 16385 /* ... or elements (16-bit rows over 32 KiB) */
#define STAGE_CTA_BYTES (64 * 1024)
#define STAGE_CTA_MAX   (96 * 1024)
#define STAGE_THREADS   256
#define STAGE_VALUES    32
#define STAGE_WIDER     40 /* ... or these, where they divide a share better (fitted_stage) */

/* CTAs of STAGE_THREADS threads, each with `bytes` of shared memory, that
 * the device holds at once (at 64 registers a thread). */
static int64_t staged_resident(const tj_device_info *d, int64_t bytes) {
  int64_t per_sm = d->max_shared_per_sm / (bytes + 1024), by_regs = resident(d, STAGE_THREADS, 64);
  int64_t ctas = per_sm * d->sm_count;
  return ctas < by_regs ? ctas : by_regs;
}

/* The shared memory of a staged CTA when `ctas` of them hold a row of n
 * (`tiles` loads of it), as the code generator lays it out: BLOCK as
 * rt_softmax_fit_block makes it, each thread's share whole vectors and
 * then whole pieces of STAGE_VALUES (an upper bound of stream.c's). */
static int64_t fitted_block(const tj_softmax_plan *plan, int elem, int64_t n, int tiles,
                            rt_vectors how);

static int64_t thread_share(int64_t n, int elem, int64_t ctas, int threads) {
  tj_softmax_plan staged = {.which = TJ_SOFTMAX_SINGLE,
                            .num_warps = threads / 32,
                            .cluster = 1,
                            .split = (int)ctas,
                            .stage = STAGE_VALUES};
  int64_t vec = 16 / elem;
  return ceil_div(fitted_block(&staged, elem, n, 1, RT_VECTORS_ALIGNED), ctas * threads * vec) *
         vec;
}

static int64_t stash_bytes(int64_t n, int tiles, int elem, int64_t ctas) {
  int64_t per_thread = thread_share(n, elem, ctas, STAGE_THREADS);
  return tiles * ceil_div(per_thread, STAGE_VALUES) * STAGE_VALUES * STAGE_THREADS * elem;
}

/* STAGE for a row over `ctas` staged CTAs of `threads`: STAGE_VALUES, or
 * STAGE_WIDER where its pieces cover a thread's share with fewer slots and
 * leave no shorter last piece. Measured on an H100 (bench/RESULTS.md,
 * 2026-11-26), % of copy: bf16 4096 x 50257 in clusters of 2 (104 elements
 * a thread) 83.8 at 32 (128 slots), 89.2 at 40 (120), when a thread
 * computed on every slot of its last piece. Since its last piece computes
 * only its own vectors, an H200 (2026-11-29, GG4) runs the shares that
 * 40 does not divide faster at 32: 104 elements (pieces of 5, 5 and 3
 * vectors, against 4, 4, 4 and 1) bf16 2670 x 50257 at any phase 87.9 /
 * 90.3, 1342 x 100000 at offset 1 84.9 / 87.3, aligned 50264 94.8 / 94.7;
 * while shares that it divides keep it: 80 (3355 x 40000 at offset 1
 * 95.3 / 90.7 at 32, in pieces of 2) and 120 (512 x 151937, 87.5 / 84.0). */
static int stage_for_share(int64_t per_thread) {
  int64_t narrow = ceil_div(per_thread, STAGE_VALUES) * STAGE_VALUES;
  int64_t wide = ceil_div(per_thread, STAGE_WIDER) * STAGE_WIDER;
  bool whole = per_thread <= STAGE_WIDER || per_thread % STAGE_WIDER == 0;
  return wide < narrow && whole ? STAGE_WIDER : STAGE_VALUES;
}

static int fitted_stage(int64_t n, int elem, int64_t ctas, int threads) {
  return stage_for_share(thread_share(n, elem, ctas, threads));
}

/* A row wider than the grid's shared memory holds: every CTA the device
 * holds at STAGE_THREADS (at most STAGE_THREADS of them: on an H200, 264,
 * 396 or 528, two to four on every SM, ran no faster than 256,
 * bench/RESULTS.md MM5 and MM9), the
 * rows in turn, each keeping the first pieces of its share that its part of
 * the SM's shared memory holds (STASH). The rest is read again, the pieces
 * read last first, from L2 as far as it keeps them (codegen/stream.c).
 * Measured on an H100 (bench/RESULTS.md, 2026-11-26), % of copy, reading
 * x twice against this: f32 1 x 10^7 67.2 / 89.4, 1 x 2^24 64.7 / 79.3,
 * bf16 1 x 2^24 65.2 / 81.1; 256 CTAs at STAGE 16 or 264 of 512 threads
 * ran no faster. */
static void plan_partial(const tj_device_info *d, tj_softmax_plan *plan) {
  int64_t split = resident(d, STAGE_THREADS, 64);
  if (split > STAGE_THREADS) split = STAGE_THREADS;
  int64_t per_sm = ceil_div(split, d->sm_count);
  int64_t stash = (d->max_shared_per_sm / per_sm - 2048) / 1024 * 1024;
  if (stash > d->max_shared_per_block_optin - 1024) stash = d->max_shared_per_block_optin - 1024;
  if (stash < STAGE_CTA_BYTES / 2) return;
  plan->cluster = 1;
  plan->split = (int)split;
  plan->stash = (int)stash;
}

/* An even number of rows that each take the grid's CTAs, in turn, run two
 * at a time over half of plan_partial's CTAs each, with its stash, where
 * that keeps at least PAIR_KEPT percent of a CTA's share of a row: the
 * ramp of one row's reads, the drain of its writes and its reductions
 * across the grid then overlap the other row's work, for the rest of the
 * share read again (mostly from L2, the pieces read last first). Measured
 * on an H100 (bench/RESULTS.md, X12 and X13), % of copy, one row at a time
 * against two: bf16 4 x 10^7 76.9 / 83.7 (72% kept), 2 x 10^7 77.5 /
 * 84.5, 8 x 10^7 74.6 / 81.6, 4 x 8*10^6 71.0 / 81.7 (90%), f32 4 x 5*10^6
 * 78.7 / 86.1 (72%); but bf16 4 x 2^24 79.3 / 77.3 (43% kept), f32 4 x
 * 10^7 82.9 / 78.2 (36%), and three rows of bf16 10^7 77.3 / 72.8 (the
 * last row alone on half the CTAs). */
#define PAIR_KEPT 70
static void plan_pairs(const tj_device_info *d, int64_t m, int64_t n, int elem,
                       tj_softmax_plan *plan) {
  tj_softmax_plan half = *plan;
  int64_t share = plan->stash ? plan->stash : stash_bytes(n, 1, elem, plan->split);
  if (m < 2 || m % 2 || staged_resident(d, share) / plan->split >= 2) return;
  plan_partial(d, &half);
  if (!half.stash || half.split < 4) return;
  half.split /= 2;
  if ((int64_t)half.stash * 100 < stash_bytes(n, 1, elem, half.split) * PAIR_KEPT) return;
  *plan = half;
}

/* When the rows take rounds of the grid (fill / split rows at a time) and
 * the last round would be less than half full, a larger split that needs
 * no round more, so that the rows share the rounds evenly. Measured on an
 * H100 (bench/RESULTS.md, 2026-11-26), % of copy: 64 x 2^20 in bf16 and
 * f16, a split of 32 (rounds of 12 rows, the last of 4) 80.6 and 80.7, of
 * 36 (rounds of 11) 82.8 and 82.7; with the last round two thirds full no
 * gain: f32 128 x 524288 93.5 at 32, 91.4 at 33. */
static int64_t balance_rounds(int64_t fill, int64_t rows, int64_t split) {
  int64_t groups = fill / split, left = groups ? rows % groups : 0;
  if (rows <= groups || left == 0 || 2 * left >= groups) return split;
  int64_t need = ceil_div(rows, ceil_div(rows, groups)), wider = fill / need;
  return wider < STAGE_THREADS ? wider : STAGE_THREADS;
}

/* On sm_90, 16-bit rows over the grid, at least two a round and two
 * rounds or more, go in clusters of two CTAs with half the split: a row's
 * partials meet in distributed shared memory first, and half as many CTAs
 * meet at its barrier in global memory. Measured on an H200
 * (bench/RESULTS.md, DD7 and DD8), % of copy, a split of k against
 * clusters of two over k / 2: f16 256 x 524288 80.5 / 82.5 (k = 16), 128 x
 * 2^20 77.0 / 80.2 (32); bf16 80.7-82.0 / 82.1-82.8 and 76.1-78.1 /
 * 80.0-80.5 (three rounds). Not f32, within its spread (262144, 524288,
 * 2^20), nor the stashed rows (f32 and bf16 10^7, bf16 2^24: within 1),
 * nor one row a round (f32 1 x 10^6: 68 / 61). With the next row folded
 * in the last phase (stream.c, PIPE; LL1, LL2) the clusters of two stay
 * ahead: bf16 128 x 524288 82.9-83.7 against 67.8-68.6 in CTAs alone, and
 * clusters of four ran 1.5 to 3 points slower. */
static void cluster_pairs(const tj_device_info *d, int elem, int64_t rows, int64_t fill,
                          tj_softmax_plan *plan) {
  int64_t per_round = fill / plan->split;
  if (d->arch != 90 || !d->cluster_launch || elem != 2 || plan->stash || plan->cluster != 1 ||
      plan->split % 2 || per_round < 2 || rows < 2 * per_round)
    return;
  plan->cluster = 2;
  plan->split /= 2;
}

/* On sm_90, 16-bit rows over the grid in two rounds or more go in CTAs of
 * half STAGE_THREADS, twice as many a row: each thread keeps the same
 * share, and an SM holds twice the CTAs, of more rows, so that while some
 * wait at their row's barrier more of the others move data. Measured on an
 * H200 (bench/RESULTS.md II4-II6), time per call against the CTAs of 256,
 * two or three rounds: bf16 128 x 524288 -6.2%, 64 x 2^20 -3.3%, 256 x
 * 524288 -1.1 to -2.1%, 128 x 2^20 -0.5 to -2.1%; f16 256 x 524288 -1.0
 * to -1.5%, 128 x 2^20 -0.4 to -1.0%; the masked softmax's bf16 128 x
 * 2^20 -1.0%; rows at any phase (bf16 256 x 524288 at offset 1) within
 * their spread. Not f32 (64 x 2^20 +0.6%, 256 x 262144 and 128 x 524288
 * within their spread), nor log-softmax (bf16 128 x 2^20 +0.9%), nor one
 * round (bf16 1 x 10^7 over 512 CTAs: +41%); the stashed rows
 * (plan_partial) keep every CTA the device holds. */
static bool halve_ctas(const tj_device_info *d, tj_row_op op, int elem, int64_t rows,
                       int64_t fill, tj_softmax_plan *plan) {
  int64_t per_row = (int64_t)plan->cluster * plan->split;
  if (d->arch != 90 || elem != 2 || op == TJ_ROW_LOG_SOFTMAX || plan->stash || plan->split < 2 ||
      2 * plan->split > STAGE_THREADS / 2 || rows < 2 * (fill / per_row)) /* as measured */
    return false;
  plan->split *= 2;
  return true;
}

/* Measured CTAs for staged softmax rows of one BLOCK that fill the device
 * (softmax_tuning.inc's TUNED_ROWS lines, written by tools/tj-tune.py
 * --what rows where a shape beat the rules below by more than its margin):
 * that many CTAs a row of BLOCK, in a cluster or over the grid. */
static const RtTunedRows tuned_rows[] = {
#define TUNED(arch, dtype, block, warps)
#define TUNED_ROWS(arch, dtype, block, ctas, cluster) {arch, dtype, block, ctas, cluster},
#include "runtime/softmax_tuning.inc"
#undef TUNED_ROWS
#undef TUNED
    {0, TJ_DTYPE_F32, 0, 0, false}};

/* A measured shape applies scaled to n (the CTAs that keep shares of the
 * bytes measured at BLOCK), at least 2, their shares within one CTA's
 * shared memory, a cluster within the portable 8 (and sm_90's clusters),
 * the grid's CTAs all resident (a cooperative launch), and rows that fill
 * the device. */
bool rt_softmax_tuned_rows(const RtTunedRows *lines, size_t count, const tj_device_info *d,
                           tj_dtype dtype, int64_t m, int64_t n, tj_softmax_plan *plan) {
  int elem = ir_dtype_size(dtype);
  for (size_t i = 0; i < count; i++) {
    const RtTunedRows *t = &lines[i];
    if (t->arch != d->arch || t->dtype != dtype || t->block != tj_next_pow2(n)) continue;
    int64_t ctas = ceil_div(t->ctas * n, t->block), share = stash_bytes(n, 1, elem, ctas);
    bool cluster = t->cluster && ctas <= PORTABLE_CLUSTER && d->cluster_launch;
    if (ctas < 2 || t->cluster != cluster || share + 1024 > d->max_shared_per_block_optin)
      return false;
    if (!cluster && (!d->cooperative_launch || staged_resident(d, share) < ctas)) return false;
    if (m * ctas < (int64_t)d->sm_count) return false;
    plan->cluster = cluster ? (int)ctas : 1;
    plan->split = cluster ? 1 : (int)ctas;
    plan->num_warps = STAGE_THREADS / 32;
    plan->stage = fitted_stage(n, elem, ctas, STAGE_THREADS);
    return true;
  }
  return false;
}

/* On sm_90, a row of one tile that one CTA of STAGE_ONE_THREADS stages: up
 * to STAGE_ONE_BYTES in f32, where the rules above take a cluster of two
 * CTAs over 64 KiB; in 16 bits up to STAGE_CTA_BYTES where each thread's
 * share is whole pieces. Twice the threads have twice the first piece's
 * bytes in flight. Measured on an H200 (bench/RESULTS.md, Z3), % of copy,
 * two rounds each, 256 threads (f32 over 64 KiB in a cluster of two)
 * against one CTA of 512: f32 16384 96.7, 95.6 / 96.5, 97.5; 20480 92.4,
 * 92.4 / 97.6, 97.2 (M = 1024 at STAGE 32: 87.7, 87.6 / 93.2, 93.1);
 * 24576 93.9, 94.4 / 95.7, 96.2; 32768 94.1, 93.5 / 95.9, 94.6; f16 20480
 * 96.3, 97.3 / 97.7, 98.3; 32768 93.0, 92.9 / 94.9, 95.8; but f16 24576,
 * 48 elements a thread in pieces of 32, 94.5, 94.4 / 90.6, 90.4 (bf16
 * 93.6, 95.3 / 87.5, 87.9). Clusters of 512-thread CTAs ran slower than
 * the plan's (f32 65536 in 2 or 4: 82.4, 84.9 against 91.1). Rows that
 * fill the device, as for a cluster below, and that start on 16-byte
 * boundaries: rows at any phase ran slower so (Z4: f16 32001 89.2, 88.9 /
 * 81.3, 81.2; f32 32001 89.0, 89.2 / 82.0, 81.4; f16 16385 85.3, 85.3 /
 * 54.5, 53.5). */
#define STAGE_ONE_THREADS 512
#define STAGE_ONE_BYTES   (128 * 1024)
static bool plan_one_cta(const tj_device_info *d, int elem, int64_t m, int64_t n, int tiles,
                         tj_softmax_plan *plan) {
  if (d->arch != 90 || tiles != 1 || m < d->sm_count) return false;
  int64_t share = thread_share(n, elem, 1, STAGE_ONE_THREADS);
  int stage = stage_for_share(share);
  int64_t bytes = ceil_div(share, stage) * stage * STAGE_ONE_THREADS * elem;
  bool whole = share % stage == 0;
  if (bytes > (elem == 4 ? STAGE_ONE_BYTES : STAGE_CTA_BYTES) || (elem != 4 && !whole) ||
      bytes + 1024 > d->max_shared_per_block_optin)
    return false;
  plan->cluster = plan->split = 1;
  plan->num_warps = STAGE_ONE_THREADS / 32;
  plan->stage = stage;
  return true;
}

static void plan_staged(const tj_device_info *d, tj_row_op op, tj_dtype dtype, int64_t m,
                        int64_t n, bool wide, bool aligned, tj_softmax_plan *plan) {
  int elem = ir_dtype_size(dtype), tiles = rt_row_tiles(op), threads = STAGE_THREADS;
  int64_t bytes = n * tiles * elem, ctas = ceil_div(bytes, STAGE_CTA_BYTES);
  if (plan->which != TJ_SOFTMAX_SINGLE || d->arch < 80) return;
  if (bytes < STAGE_MIN_BYTES && n * tiles < STAGE_MIN_ELEMS) return;
  if (d->max_shared_per_block_optin < STAGE_CTA_BYTES + 1024) return;
  if (tiles == 1 && wide &&
      rt_softmax_tuned_rows(tuned_rows, TJ_COUNTOF(tuned_rows) - 1, d, dtype, m, n, plan))
    return;
  if (aligned && plan_one_cta(d, elem, m, n, tiles, plan)) return;
  /* Clusters of at most 8 (portable): a row of 16 such CTAs ran faster
   * over the grid (H100, 2026-11-26, % of copy, a cluster of 16 against a
   * split of 16: f32 256 x 262144 90.8 / 94.7, bf16 256 x 524288 86.9 /
   * 88.9, f16 87.1 / 89.5; but bf16 128 x 524288 85.5 / 83.3), while 16-bit
   * rows of 2 to 8 such CTAs ran 4 to 9 points slower split than in a
   * cluster, and f32 131072 the same (95.1 / 94.8). And compute-sanitizer's
   * synccheck reported divergent threads at a CTA barrier in every cluster
   * of 16 it ran, none in clusters of 8 (bench/RESULTS.md). */
  int most = d->arch >= 90 && d->cluster_launch ? PORTABLE_CLUSTER : 1;
  while (ctas <= most && stash_bytes(n, tiles, elem, ctas) > STAGE_CTA_BYTES) ctas++;
  if (ctas <= most && m * ctas >= (int64_t)d->sm_count) {
    plan->cluster = (int)ctas; /* one CTA, or a cluster */
    plan->split = 1;
  } else if (wide) {
    int64_t fill = staged_resident(d, STAGE_CTA_BYTES), rows = m > 0 ? m : 1;
    int64_t split = fill / rows > ctas ? fill / rows : ctas;
    if (split > STAGE_THREADS) split = STAGE_THREADS;
    split = balance_rounds(fill, rows, split);
    int64_t share = stash_bytes(n, tiles, elem, split);
    if (!d->cooperative_launch) return;
    if (share > STAGE_CTA_MAX || staged_resident(d, share) < split) {
      plan_partial(d, plan);
      if (!plan->stash) return;
    } else {
      plan->cluster = 1;
      plan->split = (int)split;
    }
    if (tiles == 1) plan_pairs(d, rows, n, elem, plan);
    if (tiles == 1) cluster_pairs(d, elem, rows, fill, plan);
    if (tiles == 1 && halve_ctas(d, op, elem, rows, fill, plan)) threads /= 2;
  } else {
    return; /* few rows one CTA holds: one CTA a row, as above */
  }
  plan->num_warps = threads / 32;
  int64_t held_by = plan->cluster * plan->split;
  plan->stage = plan->stash ? STAGE_VALUES : fitted_stage(n, elem, held_by, threads);
}

/* Measured warps for one-CTA rows (softmax_tuning.inc, written by
 * tools/tj-tune.py), else the table's. */
typedef struct Tuned {
  int arch;
  tj_dtype dtype;
  int64_t block;
  int warps;
} Tuned;

static const Tuned tuned[] = {
#define TUNED(arch, dtype, block, warps) {arch, dtype, block, warps},
#define TUNED_ROWS(arch, dtype, block, ctas, cluster)
#include "runtime/softmax_tuning.inc"
#undef TUNED_ROWS
#undef TUNED
    {0, TJ_DTYPE_F32, 0, 0}};

static int warps_for(const tj_device_info *device, tj_dtype dtype, int64_t block) {
  for (size_t i = 0; i + 1 < sizeof tuned / sizeof tuned[0]; i++)
    if (tuned[i].arch == device->arch && tuned[i].dtype == dtype && tuned[i].block == block)
      return tuned[i].warps;
  return tj_default_num_warps(block, dtype);
}

/* Row tiles an op keeps in registers across its reduction: softmax and
 * log-softmax keep x, backward y and dy. The plan sizes CTAs and clusters
 * for n times this many elements, so that a thread holds as many values as
 * a softmax thread does. */
int rt_row_tiles(tj_row_op op) { return op == TJ_ROW_SOFTMAX_BACKWARD ? 2 : 1; }

/* Warps of the CTAs over which a row of several tiles (held elements in
 * all) spreads, 0 for plan_wide's own. Measured on an H200 for softmax
 * backward (bench/RESULTS.md, 2026-11-25), in % of copy, plan_wide's CTAs
 * against 256-thread ones at 16 elements a tile: bf16 32768 63.5 against
 * 75.1, 65536 60.6 / 65.2, 262144 34.6 / 56.4, 2^20 30.6 / 41.9; f32 (a
 * cluster of 8 256-thread CTAs at 32 a tile) 65536 93.6 / 87.1, but split
 * over the grid 262144 55.7 / 77.4 and 2^20 46.3 / 59.5. So 256-thread CTAs
 * for 16-bit rows and for rows no cluster holds, while the resident CTAs
 * hold the row (else plan_wide streams it). */
static int several_tiles_warps(const tj_device_info *d, int elem, int64_t held, int tiles) {
  const int threads = 256;
  if (tiles == 1 || ctas_for(d, held, threads) > resident(d, threads, 64)) return 0;
  bool in_cluster = d->arch == 90 && d->cluster_launch &&
                    ceil_div(held, (int64_t)CLUSTER_MAX_THREADS * CLUSTER_VALUES) <= PORTABLE_CLUSTER;
  return elem == 2 || !in_cluster ? threads / 32 : 0;
}

/* The smallest BLOCK of at least n that the threads of an instance hold in
 * whole repeats of 16-byte vectors (the lanes codegen gives a row inside a
 * warp, cg_group_size; a CTA's threads, or a cluster's or a split's), or
 * next_pow2(n) when that is less: every thread computes on its padding,
 * loaded or not. Not for f32 rows of up to ROW_PER_CTA over a CTA's
 * unstaged threads, where the padding cost nothing measurable and the
 * fitted repeats could spill (measured on an H200, bench/RESULTS.md Y3, %
 * of copy, next_pow2 against fitted: f32 12352 100.0, 99.8 / 99.1, 99.6,
 * 3000 99.3, 99.4 / 99.2, 99.3, against f16 12288 78.3, 78.8 / 98.1,
 * 98.8; and log-softmax's f32 12288 in 6 repeats spilled 20 bytes on
 * sm_80). But f32 rows at one phase, whose kernel needs more registers,
 * are fitted where that saves a quarter of the tile or more, from BLOCK
 * 4096 to 16384: an H200 (bench/RESULTS.md HH4, HH5), % of copy,
 * next_pow2 against fitted, at offset 1: 4500 (8192 / 6144, 512 threads:
 * 51 / 40 registers) 72.0 / 94.4, 6001 85.2 / 98.8, 9000 (16384 / 10240)
 * 93.1 / 97.9, 2100 (4096 / 3072) 95.4 / 97.0; while 7 repeats in 8 ran a
 * little slower (12345, 13500, 14001: 98.2, 97.7, 98.1 / 97.6, 97.3,
 * 97.4). Fitted 1536 in 4 warps spilled 4 bytes on sm_80, and 18432 in
 * 16 warps 52 to 68 on sm_75, sm_80 and sm_86. */
#define PHASED_FIT_MIN 4096
#define PHASED_FIT_MAX 16384
static int64_t fitted_block(const tj_softmax_plan *plan, int elem, int64_t n, int tiles,
                            rt_vectors how) {
  int64_t block = tj_next_pow2(n), vec = 16 / elem, vectors = ceil_div(n, vec);
  int64_t threads = 32LL * plan->num_warps * plan->cluster * plan->split, group = threads;
  bool one_cta = plan->cluster * plan->split == 1 && !plan->stage;
  if (one_cta && block <= ROW_PER_CTA && how == RT_VECTORS_NARROW) return block;
  int most = cg_lane_reps_max(CG_LANE_REPS, how == RT_VECTORS_PHASED, (int)vec);
  if (one_cta) /* lanes as layout.c gives them */
    group = cg_group_size((int)threads, block * tiles, vectors, true, CG_LANE_REPS, most);
  int64_t fit = ceil_div(vectors, group) * group * vec;
  bool keep = one_cta && group == threads && elem == 4 && block <= ROW_PER_CTA;
  bool phased_fit = how == RT_VECTORS_PHASED && block >= PHASED_FIT_MIN &&
                    block <= PHASED_FIT_MAX && fit * 4 <= block * 3;
  if (keep && !phased_fit) return block;
  return fit < block ? fit : block;
}

void rt_softmax_fit_block(tj_softmax_plan *plan, tj_dtype dtype, int64_t n, int tiles,
                          rt_vectors how) {
  if (plan->which != TJ_SOFTMAX_SINGLE) return;
  plan->block = fitted_block(plan, ir_dtype_size(dtype), n, tiles, how);
}

/* Whether the caller chose the CTAs (warps, cluster, split) or the NVRTC
 * backend, whose kernels the plan then leaves unstaged. */
static bool caller_chose(const tj_softmax_options *o) {
  return o->num_warps || o->cluster || o->split || o->backend == TJ_BACKEND_NVRTC;
}

/* Rows at one phase are phased where the code generator phases: one
 * tile, no grid split unless staged. A phased kernel needs a few registers
 * more than the 64 a thread of a 1024-thread CTA has (ptxas spilled 12
 * bytes for f32 N = 32768 on sm_75 and sm_80): it runs 512-thread CTAs,
 * twice the values a thread. Other rows off 16 bytes move in narrower
 * vectors, in lanes of 8 elements up, and keep next_pow2 in one CTA
 * (fitted as for 16-byte vectors, f16 and f32 N = 77 lost 21 and 11
 * points on an H200, bench/RESULTS.md Y4).
 * The phase's registers can also cost an SM a CTA: 16-bit rows at one
 * phase that one unstaged CTA holds in more than PHASED_REPS vectors a
 * thread take twice the warps where those hold at most PHASED_WIDER_REPS
 * (softmax only), else are staged (sm_80 and later; never where the
 * caller chose warps, CTAs, a stage or NVRTC). Measured on an H200 (bench/RESULTS.md HH3-HH7),
 * % of copy, bf16 at offset 1, 4 warps unstaged against STAGE 32: 12345
 * (13 vectors, 167 registers) 91.0 / 94.3, 14001 (14, 182) 75.8 / 94.7,
 * 16383 (16, 206) 76.7 / 92.2, 10500 (11, 141) 87.0 / 90.8; but 9999 (10)
 * 98.6 / 95.8, 8191 (8) 93.0 / 90.2; and 4 warps staged against 8
 * unstaged (6 vectors, 79 registers): 10300 85.5 / 91.0, 11700 93.4 /
 * 96.0 (8 warps of 7 vectors, 95 registers: 12345 79-80, FF4), where
 * log-softmax and masked softmax keep the staged CTA (f16 11000 at offset
 * 3 95.7 / 94.0, masked 10500 110.6 / 90.7 of the bytes the mask leaves).
 * Aligned rows gain nothing so (12352 99.7 / 98.3, 16384 96.6 / 94.6). */
#define PHASED_REPS       10
#define PHASED_WIDER_REPS 6
static void phased_cta(const tj_device_info *device, tj_softmax_plan *plan, tj_row_op op, int elem,
                       int64_t n) {
  int64_t vec = 16 / elem, vectors = ceil_div(n, vec); /* as fitted_block: the phase wraps */
  int64_t reps = ceil_div(vectors, 32LL * plan->num_warps);
  if (elem != 2 || rt_row_tiles(op) != 1 || device->arch < 80 || reps <= PHASED_REPS) return;
  bool wider = ceil_div(vectors, 64LL * plan->num_warps) <= PHASED_WIDER_REPS;
  if (op == TJ_ROW_SOFTMAX && plan->num_warps <= 8 && wider)
    plan->num_warps *= 2;
  else
    plan->stage = stage_for_share(reps * vec);
}

bool rt_softmax_rows_plan(const tj_device_info *device, tj_softmax_plan *plan, tj_row_op op,
                          tj_dtype dtype, int64_t n, int align, bool one_phase,
                          const tj_softmax_options *chosen) {
  static const tj_softmax_options none;
  const tj_softmax_options *o = chosen ? chosen : &none;
  if (align >= 16) return false;
  int tiles = rt_row_tiles(op);
  int64_t held = tj_next_pow2(n) * tiles;
  bool phased = one_phase && plan->which == TJ_SOFTMAX_SINGLE && (plan->split == 1 || plan->stage);
  bool one_cta = plan->which == TJ_SOFTMAX_SINGLE && plan->cluster * plan->split == 1 &&
                 !plan->stage && held <= ROW_PER_CTA;
  if (!phased && one_cta && !o->num_warps) /* the table's, not fewer_warps' */
    plan->num_warps = warps_for(device, dtype, held);
  if (phased && plan->num_warps == 32 && !o->num_warps) plan->num_warps = 16;
  if (phased && one_cta && !caller_chose(o) && !o->stage)
    phased_cta(device, plan, op, ir_dtype_size(dtype), n);
  rt_softmax_fit_block(plan, dtype, n, tiles, phased ? RT_VECTORS_PHASED : RT_VECTORS_NARROW);
  return phased;
}

/* Half the warps for a row one CTA holds, where they pad it less and a
 * thread then holds at most HALF_REPS vectors of each tile. Measured on an
 * H200 (bench/RESULTS.md, Y2 and Y3), % of copy: f16 10866 x 12352 in 16
 * warps (BLOCK 16384) 80.3, 80.0, in 8 (BLOCK 14336) 100.5, 100.0; but
 * f32 12345 in 8 warps, 13 vectors a thread, 98.8, 98.7 / 64.6, 64.7. */
#define HALF_REPS 8
static void fewer_warps(tj_softmax_plan *plan, int elem, int64_t n, int tiles) {
  tj_softmax_plan half = *plan;
  half.num_warps /= 2;
  if (!half.num_warps || tj_next_pow2(n) * tiles <= CG_WARP_ROW_MAX) return;
  int64_t reps = ceil_div(ceil_div(n, 16 / elem), 32LL * half.num_warps);
  if (reps <= HALF_REPS &&
      fitted_block(&half, elem, n, tiles, RT_VECTORS_ALIGNED) <
          fitted_block(plan, elem, n, tiles, RT_VECTORS_ALIGNED))
    plan->num_warps = half.num_warps;
}

tj_status rt_row_plan(const tj_device_info *device, tj_row_op op, tj_dtype dtype, int64_t m,
                      int64_t n, const tj_softmax_options *options, int align,
                      tj_softmax_plan *plan) {
  static const tj_softmax_options none;
  const tj_softmax_options *o = options ? options : &none;
  tj_device_info nominal_device;
  if (!device) {
    tj_device_nominal(90, &nominal_device);
    device = &nominal_device;
  }
  if ((unsigned)op >= TJ_ROW_OP_COUNT) return TJ_ERR_INVALID_ARGUMENT;
  tj_status st = check(device, dtype, m, n, o, plan);
  if (st != TJ_OK) return st;
  memset(plan, 0, sizeof *plan);
  plan->which = o->which_template;
  if (plan->which == TJ_SOFTMAX_AUTO)
    plan->which = n <= IR_MAX_TILE ? TJ_SOFTMAX_SINGLE : TJ_SOFTMAX_ONLINE;
  plan->block = tj_next_pow2(n);
  if (plan->which == TJ_SOFTMAX_ONLINE && plan->block > TJ_SOFTMAX_CHUNK)
    plan->block = TJ_SOFTMAX_CHUNK;
  if (plan->block > IR_MAX_TILE) return TJ_ERR_UNSUPPORTED;
  plan->cluster = plan->split = 1;
  int tiles = rt_row_tiles(op);
  bool wide = plan->which == TJ_SOFTMAX_SINGLE && plan->block * tiles > ROW_PER_CTA;
  plan->num_warps = o->num_warps ? o->num_warps
                    : wide       ? WIDE_THREADS / 32
                                 : warps_for(device, dtype, plan->block * tiles);
  int elem = ir_dtype_size(dtype), warps = o->num_warps;
  if (wide && !warps) warps = several_tiles_warps(device, elem, n * tiles, tiles);
  if (wide && !o->cluster && !o->split) plan_wide(device, elem, m, n * tiles, warps, plan);
  /* Staged unless the caller chose the CTAs, or the NVRTC backend (whose
   * CUDA C keeps every element of a thread in registers) compiles. Of the
   * ops of two row tiles (softmax backward, y and dy staged), only 16-bit
   * rows: measured on an H100 (bench/RESULTS.md, 2026-11-26), % of copy,
   * its own plans against staged: bf16 32768 85.2-86.0 / 97.8-98.0, 65536
   * 87.7-88.5 / 93.5-93.6, 262144 80.3-80.9 / 91.4-92.3, 2^20 61.7 /
   * 83.3-85.9 (f16 the same); f32 16384 100.2 / 99.1-99.3, 262144
   * 93.5-94.2 / 90.8-91.4, 2^20 76.3-76.4 / 78.9-80.8. */
  bool chosen = caller_chose(o);
  if (!o->stage && !chosen && (tiles == 1 || elem == 2))
    plan_staged(device, op, dtype, m, n, wide, align >= 16, plan);
  if (o->cluster) plan->cluster = o->cluster;
  if (o->split) plan->split = o->split;
  if (o->stage > 0) plan->stage = o->stage;
  if (o->stash) plan->stash = o->stash;
  if (!plan->stage) plan->stash = 0;
  bool one_cta = plan->which == TJ_SOFTMAX_SINGLE && plan->cluster * plan->split == 1;
  if (!chosen && !plan->stage && one_cta) fewer_warps(plan, elem, n, tiles);
  rt_softmax_fit_block(plan, dtype, n, tiles, RT_VECTORS_ALIGNED);
  return TJ_OK;
}

tj_status tj_row_plan_for(const tj_device_info *device, tj_row_op op, tj_dtype dtype, int64_t m,
                          int64_t n, const tj_softmax_options *options, tj_softmax_plan *plan) {
  return rt_row_plan(device, op, dtype, m, n, options, 16, plan);
}

tj_status tj_softmax_plan_for(const tj_device_info *device, tj_dtype dtype, int64_t m, int64_t n,
                              const tj_softmax_options *options, tj_softmax_plan *plan) {
  return tj_row_plan_for(device, TJ_ROW_SOFTMAX, dtype, m, n, options, plan);
}

tj_status tj_softmax_spec_options(const tj_softmax_plan *plan, tj_dtype dtype, int64_t n,
                                  tj_spec_options *out) {
  if (!plan || !out || n < 0 || (unsigned)dtype >= TJ_DTYPE_COUNT) return TJ_ERR_INVALID_ARGUMENT;
  if (plan->which == TJ_SOFTMAX_SINGLE && plan->block < n) return TJ_ERR_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  out->n = n;
  out->dtype = dtype;
  out->block = plan->block;
  out->num_warps = plan->num_warps;
  out->cluster = plan->cluster;
  out->split = plan->split;
  out->stage = plan->stage;
  out->stash = plan->stage ? plan->stash : 0;
  return TJ_OK;
}
