/*
 * test_ptxas_sweep.c — every softmax specialization in the sweep assembles
 * with ptxas, and every default one uses no local memory.
 *
 * Sweep: both templates x BLOCK in {1, 2, 4, ..., 32768} x warps in {1, 2,
 * 4, 8, 16, 32} x dtype in {f32, f16, bf16} x arch in {sm_75, sm_80, sm_90}.
 * A combination is valid unless a thread would hold more than CG_MAX_SLOTS
 * tile elements, which tj_emit_ptx refuses with TJ_ERR_UNSUPPORTED (the
 * test checks it refuses exactly those). Kernels are assembled in batches
 * (support_ptx.c), two ptxas processes at a time. The defaults (the warps
 * of tj_default_num_warps, and for the online template a BLOCK up to its
 * chunk; or the warps tj_softmax's plan takes, softmax_tuning.inc's
 * measured lines on sm_90) must report 0 bytes of spill and stack; the
 * registers of the defaults are printed as a table.
 *
 * Rows across CTAs: the plan of tj_softmax (softmax_plan.c) on nominal
 * sm_80, sm_90 and sm_100 devices for wide rows (N = 32768 ... 2^20, M from
 * 1 to 65536) and huge ones (N up to 5*10^7, M = 1 and 4), every dtype,
 * aligned and not (phased, as tj_softmax runs rows at one phase): each must
 * assemble with no spill and no local memory. Phased, too: every default
 * single-tile specialization; and every default of softmax, log-softmax,
 * softmax backward and the masked softmax element by element (x and y at
 * different phases), the last three in 16-byte vectors as well.
 * So must every cluster size 2 ... 16 and the splits 2 ... 1024 forced on
 * N = 65536 and 2^20, streamed where a thread's share is too large (1024:
 * more CTAs than the plan's 512 threads, two partials a thread).
 *
 * Exits 77 (skipped) only when no ptxas is found.
 */
#include "codegen/codegen.h"
#include "support_ptx.h"

#include "runtime/runtime.h"
#include "support.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char ptxas[1024];

static const int archs[] = {75, 80, 90};
static const int warp_counts[] = {1, 2, 4, 8, 16, 32};
#define MAX_LOG_BLOCK 15

typedef struct Case {
  tj_softmax_template which;
  tj_dtype dtype;
  int64_t block;
  int warps, arch, index; /* index in the arch's batch, -1 if refused */
} Case;

/* The tile elements one thread holds (layout.c's rules for softmax). */
static int64_t slots_per_thread(int64_t block, int warps, tj_dtype d) {
  int vec = d == TJ_DTYPE_F32 ? 4 : 8;
  if (vec > block) vec = (int)block;
  int64_t vectors = block / vec, threads = 32 * warps, group;
  if (block <= 1024)
    group = vectors < 32 ? vectors : 32;
  else
    group = vectors < threads ? vectors : threads;
  return (block + group * vec - 1) / (group * vec) * vec;
}

static void add_case(PtxBatch *b, Case *c) {
  SoftmaxConfig cfg = {
      c->which, c->dtype, c->which == TJ_SOFTMAX_ONLINE ? 4 * c->block + 3 : c->block,
      c->block, c->warps, 16,
      c->arch,  0, 0};
  char why[TJ_ERROR_MAX + 64] = "";
  tj_status st;
  char *ptx = softmax_ptx(&cfg, NULL, &st, why, sizeof why);
  /* A single tile too wide for the registers is streamed (stream.c); the
   * online template, with loops, cannot be. */
  bool valid = c->which == TJ_SOFTMAX_SINGLE ||
               slots_per_thread(c->block, c->warps, c->dtype) <= CG_MAX_SLOTS;
  ck_assert_msg((ptx != NULL) == valid, "%s block=%lld warps=%d: %s", ir_dtype_name(c->dtype),
                (long long)c->block, c->warps, ptx ? "accepted, but over the limit" : why);
  if (!ptx) ck_assert_int_eq(st, TJ_ERR_UNSUPPORTED);
  c->index = ptx ? ptx_batch_add(b, ptx) : -1;
  tj_free(ptx);
}

/* The warps tj_softmax's plan gives rows of BLOCK on a nominal device of
 * arch: the table's, or a measured line of softmax_tuning.inc. */
static int plan_warps(int arch, tj_dtype dtype, int64_t block) {
  tj_device_info device;
  tj_softmax_plan plan;
  ck_assert_int_eq(tj_device_nominal(arch, &device), TJ_OK);
  ck_assert_int_eq(tj_softmax_plan_for(&device, dtype, 65536, block, NULL, &plan), TJ_OK);
  return plan.num_warps;
}

/* A specialization tj_softmax_spec_options gives for some n: the online
 * template's BLOCK is its chunk, at most TJ_SOFTMAX_CHUNK; the warps of the
 * table or of the plan (tuned lines). */
static bool is_default(const Case *c) {
  if (c->which == TJ_SOFTMAX_ONLINE && c->block > TJ_SOFTMAX_CHUNK) return false;
  if (c->which == TJ_SOFTMAX_SINGLE && c->block <= 32768 &&
      c->warps == plan_warps(c->arch, c->dtype, c->block))
    return true;
  return c->warps == tj_default_num_warps(c->block, c->dtype);
}

static const char *template_name(tj_softmax_template t) {
  return t == TJ_SOFTMAX_ONLINE ? "online" : "single";
}

static void print_defaults(const Case *cases, int n, const PtxBatch *const *batches) {
  printf("default specializations: registers (sm_75 / sm_80 / sm_90)\n");
  for (int i = 0; i < n; i++) {
    const Case *c = &cases[i];
    if (c->arch != 75 || !is_default(c) || c->index < 0) continue;
    printf("  %-6s %-4s BLOCK=%-6lld warps=%-2d", template_name(c->which), ir_dtype_name(c->dtype),
           (long long)c->block, c->warps);
    for (int j = i, a = 0; j < n && a < 3; j++)
      if (cases[j].arch == archs[a] && cases[j].which == c->which && cases[j].dtype == c->dtype &&
          cases[j].block == c->block && cases[j].warps == c->warps)
        printf(" %3d", ptx_batch_report(batches[a], cases[j].index)->registers), a++;
    printf("\n");
  }
}

START_TEST(every_specialization_assembles) {
  int total = 2 * (MAX_LOG_BLOCK + 1) * 6 * 3 * 3, n = 0;
  Case *cases = calloc((size_t)total, sizeof *cases);
  PtxBatch *batches[3];
  for (int a = 0; a < 3; a++) batches[a] = ptx_batch_new(ptxas, archs[a], 24);
  for (int t = 0; t < 2; t++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++)
      for (int lb = 0; lb <= MAX_LOG_BLOCK; lb++)
        for (int w = 0; w < 6; w++)
          for (int a = 0; a < 3; a++) {
            Case *c = &cases[n++];
            *c = (Case){t ? TJ_SOFTMAX_ONLINE : TJ_SOFTMAX_SINGLE,
                        (tj_dtype)d,
                        (int64_t)1 << lb,
                        warp_counts[w],
                        archs[a],
                        -1};
            add_case(batches[a], c);
          }
  for (int a = 0; a < 3; a++) ptx_batch_run(batches[a]);
  int assembled = 0, defaults = 0;
  for (int i = 0; i < n; i++) {
    const Case *c = &cases[i];
    if (c->index < 0) continue;
    const PtxBatch *b = batches[c->arch == 75 ? 0 : c->arch == 80 ? 1 : 2];
    const PtxReport *r = ptx_batch_report(b, c->index);
    ck_assert_msg(r->assembled, "%s %s BLOCK=%lld warps=%d sm_%d does not assemble:\n%s",
                  template_name(c->which), ir_dtype_name(c->dtype), (long long)c->block, c->warps,
                  c->arch, ptx_batch_first_error(b));
    assembled++;
    if (!is_default(c)) continue;
    defaults++;
    ck_assert_msg(!r->spill_bytes && !r->stack_bytes && !r->local_bytes,
                  "default %s %s BLOCK=%lld warps=%d sm_%d: %d bytes spilled, %d stack, %d local "
                  "(%d registers)",
                  template_name(c->which), ir_dtype_name(c->dtype), (long long)c->block, c->warps,
                  c->arch, r->spill_bytes, r->stack_bytes, r->local_bytes, r->registers);
  }
  print_defaults(cases, n, (const PtxBatch *const *)batches);
  printf("%d kernels assembled (%d defaults without spills); %d combinations refused\n", assembled,
         defaults, n - assembled);
  for (int a = 0; a < 3; a++) ptx_batch_free(batches[a]);
  free(cases);
}
END_TEST

/* The PTX of a default single-tile specialization of some kind at BLOCK
 * block for dtype d and arch (its warps in *warps); NULL fails the test. */
typedef char *(*DefaultPtx)(tj_dtype d, int64_t block, int arch, int *warps);

/* Widths whose BLOCK the plan fits to whole repeats of the threads, no
 * power of two (rt_softmax_fit_block): lanes of 2 to 4 vectors inside a
 * warp (phased 16-bit 577: 16 lanes of 5), CTAs of fewer warps (f16
 * 12352), staged rows (24576; phased 16-bit 12345 and 14001), phased f32
 * rows of a quarter less than next_pow2 (4500, 6001). */
static const int64_t fitted_widths[] = {48,   80,   160,   200,   577,   3000,  4500,
                                        6001, 6144, 12288, 12345, 12352, 14001, 24576};

/* Every default single-tile N that is a power of two up to 32768, and the
 * fitted widths, every dtype and arch, made by make (its `block` argument
 * is N), assembles; a spill fails when spills_fail, else it is printed. */
static void sweep_defaults(const char *what, DefaultPtx make, bool spills_fail) {
  enum { WIDTHS = MAX_LOG_BLOCK + 1 + TJ_COUNTOF(fitted_widths) };
  enum { TOTAL = WIDTHS * TJ_DTYPE_COUNT * 3 };
  Case cases[TOTAL];
  int n = 0, worst = 0, spilled = 0;
  PtxBatch *batches[3];
  for (int a = 0; a < 3; a++) batches[a] = ptx_batch_new(ptxas, archs[a], 24);
  for (int d = 0; d < TJ_DTYPE_COUNT; d++)
    for (int w = 0; w < WIDTHS; w++)
      for (int a = 0; a < 3; a++) {
        Case *c = &cases[n++];
        int64_t width = w <= MAX_LOG_BLOCK ? (int64_t)1 << w : fitted_widths[w - MAX_LOG_BLOCK - 1];
        *c = (Case){TJ_SOFTMAX_SINGLE, (tj_dtype)d, width, 0, archs[a], -1};
        char *ptx = make(c->dtype, c->block, c->arch, &c->warps);
        c->index = ptx_batch_add(batches[a], ptx);
        tj_free(ptx);
      }
  for (int a = 0; a < 3; a++) ptx_batch_run(batches[a]);
  for (int i = 0; i < n; i++) {
    const Case *c = &cases[i];
    const PtxBatch *b = batches[c->arch == 75 ? 0 : c->arch == 80 ? 1 : 2];
    const PtxReport *r = ptx_batch_report(b, c->index);
    ck_assert_msg(r->assembled, "%s %s BLOCK=%lld sm_%d does not assemble:\n%s", what,
                  ir_dtype_name(c->dtype), (long long)c->block, c->arch, ptx_batch_first_error(b));
    if (r->registers > worst) worst = r->registers;
    if (!r->spill_bytes && !r->stack_bytes && !r->local_bytes) continue;
    ck_assert_msg(!spills_fail,
                  "%s %s BLOCK=%lld warps=%d sm_%d: %d bytes spilled, %d stack, %d local (%d "
                  "registers)",
                  what, ir_dtype_name(c->dtype), (long long)c->block, c->warps, c->arch,
                  r->spill_bytes, r->stack_bytes, r->local_bytes, r->registers);
    spilled++;
    printf("  %s %s BLOCK=%lld warps=%d sm_%d: %d bytes spilled (%d registers)\n", what,
           ir_dtype_name(c->dtype), (long long)c->block, c->warps, c->arch, r->spill_bytes,
           r->registers);
  }
  printf("%s: %d default kernels assembled, %d with spills (at most %d registers)\n", what, n,
         spilled, worst);
  for (int a = 0; a < 3; a++) ptx_batch_free(batches[a]);
}

/* Phased, as tj_softmax plans rows at one phase (CTAs of at most 512
 * threads, 16-bit rows of many vectors a thread staged), BLOCK as it fits
 * them. */
static char *phased_ptx(tj_dtype d, int64_t block, int arch, int *warps) {
  SoftmaxConfig cfg = {TJ_SOFTMAX_SINGLE, d, block, 0, 0, (int)dtype_bytes(d), arch, 0, 1};
  char why[TJ_ERROR_MAX + 64] = "";
  tj_kernel_info info;
  char *ptx = softmax_ptx(&cfg, &info, NULL, why, sizeof why);
  ck_assert_msg(ptx != NULL, "phased %s BLOCK=%lld: %s", ir_dtype_name(d), (long long)block, why);
  *warps = info.shape.threads / 32;
  return ptx;
}

/* The alignment of the row ops' sweeps: 16 (16-byte vectors, as
 * tj_softmax runs aligned rows), then 0 (element by element, as it runs x
 * and y at different phases). */
static int row_align;

/* A row op as its entry point plans it, at row_align. */
static char *row_op_ptx(tj_row_op op, tj_dtype d, int64_t block, int arch, int *warps) {
  tj_program *p;
  tj_spec *s;
  tj_spec_options o;
  tj_device_info device;
  tj_softmax_plan plan;
  ck_assert_int_eq(tj_row_program(op, TJ_SOFTMAX_SINGLE, block, &p), TJ_OK);
  ck_assert_int_eq(tj_device_nominal(arch, &device), TJ_OK);
  /* as tj_softmax plans rows at row_align: unstaged element by element */
  int align = row_align ? row_align : (int)dtype_bytes(d);
  tj_softmax_options options = {.stage = align < 16 ? -1 : 0};
  ck_assert_int_eq(tj_row_plan_for(&device, op, d, 65536, block, &options, &plan), TJ_OK);
  rt_softmax_rows_plan(&device, &plan, op, d, block, align, false, &options);
  ck_assert_int_eq(tj_softmax_spec_options(&plan, d, block, &o), TJ_OK);
  o.align = row_align;
  ck_assert_msg(tj_specialize(p, &o, &s) == TJ_OK, "%s", tj_program_error(p));
  *warps = o.num_warps;
  tj_codegen_options co = {arch, 0, 0};
  char *ptx = NULL;
  ck_assert_msg(tj_emit_ptx(s, &co, &ptx, NULL) == TJ_OK, "%s", tj_spec_error(s));
  tj_spec_destroy(s);
  tj_program_destroy(p);
  return ptx;
}

static char *log_softmax_ptx(tj_dtype d, int64_t block, int arch, int *warps) {
  return row_op_ptx(TJ_ROW_LOG_SOFTMAX, d, block, arch, warps);
}

static char *backward_ptx(tj_dtype d, int64_t block, int arch, int *warps) {
  return row_op_ptx(TJ_ROW_SOFTMAX_BACKWARD, d, block, arch, warps);
}

static char *masked_ptx(tj_dtype d, int64_t block, int arch, int *warps) {
  return row_op_ptx(TJ_ROW_MASKED_SOFTMAX, d, block, arch, warps);
}

static char *softmax_row_ptx(tj_dtype d, int64_t block, int arch, int *warps) {
  return row_op_ptx(TJ_ROW_SOFTMAX, d, block, arch, warps);
}

/* Softmax element by element (x and y at different phases): every default
 * without spills (before 2026-11-26 ten spilled, f32 BLOCK 1024 92 bytes). */
START_TEST(scalar_defaults_assemble_without_spills) {
  row_align = 0;
  sweep_defaults("softmax, element by element", softmax_row_ptx, true);
}
END_TEST

/* Phased (codegen/phase.c): every default single-tile specialization, for
 * rows at any phase, assembles without spills. */
START_TEST(phased_defaults_assemble_without_spills) {
  sweep_defaults("phased", phased_ptx, true);
}
END_TEST

/* Log-softmax: every default assembles without spills, in 16-byte vectors
 * and element by element. Until its exp tile was folded into the sum
 * (analyze.c), 19 of 144 spilled 8 to 48 bytes: it keeps x - max while it
 * sums exp of it, where softmax keeps what it sums. */
START_TEST(log_softmax_defaults_assemble_without_spills) {
  row_align = 16;
  sweep_defaults("log-softmax", log_softmax_ptx, true);
  row_align = 0;
  sweep_defaults("log-softmax, element by element", log_softmax_ptx, true);
}
END_TEST

/* Softmax backward (y and dy held at once, three row addresses): every
 * default assembles without spills, in 16-byte vectors and element by
 * element. */
START_TEST(backward_defaults_assemble_without_spills) {
  row_align = 16;
  sweep_defaults("softmax backward", backward_ptx, true);
  row_align = 0;
  sweep_defaults("softmax backward, element by element", backward_ptx, true);
}
END_TEST

/* Masked softmax (softmax with a scale, a mask from the row's index and
 * safe rows): every default single-tile kernel assembles without spills.
 * Over CTAs (rows_across_ctas_assemble_without_spills) a few of its
 * kernels spill and are printed, not failed (2026-11-25: 12 bytes at f32
 * N = 32768 phased in 512-thread CTAs, 40 bytes for a streamed row of 10^7
 * in 1024-thread CTAs): it keeps a second mask, which softmax's kernels
 * of the same shapes fit without (its max and sum fuse since 2026-11-29,
 * as softmax's do). */
START_TEST(masked_defaults_assemble_without_spills) {
  row_align = 16;
  sweep_defaults("masked softmax", masked_ptx, true);
  row_align = 0;
  sweep_defaults("masked softmax, element by element", masked_ptx, true);
}
END_TEST

/* ---- rows across CTAs ------------------------------------------------------- */

typedef struct Spread {
  tj_dtype dtype;
  int64_t m, n;
  int align, arch, cluster, split, index;
  tj_row_op op; /* 0: softmax */
} Spread;

static void add_spread(PtxBatch *b, Spread *c) {
  tj_program *p = NULL;
  tj_spec *s = NULL;
  tj_spec_options o;
  tj_device_info device;
  tj_softmax_options options = {.cluster = c->cluster, .split = c->split};
  tj_softmax_plan plan;
  ck_assert_int_eq(tj_device_nominal(c->arch, &device), TJ_OK);
  ck_assert_int_eq(tj_row_plan_for(&device, c->op, c->dtype, c->m, c->n, &options, &plan), TJ_OK);
  c->cluster = plan.cluster;
  c->split = plan.split;
  ck_assert_int_eq(tj_row_program(c->op, plan.which, c->n, &p), TJ_OK);
  ck_assert_int_eq(tj_softmax_spec_options(&plan, c->dtype, c->n, &o), TJ_OK);
  o.align = c->align;
  /* as tj_softmax asks for rows at one phase (a split only staged), */
  o.phased = c->align < 16 && (plan.split == 1 || plan.stage);
  if (o.phased && o.num_warps == 32) o.num_warps = 16; /* in CTAs of 512 threads */
  if (!o.phased) /* DIV from n, as tj_softmax specializes */
    o.multiple = rt_size_multiple(c->n, c->align, ir_dtype_size(c->dtype));
  ck_assert_int_eq(tj_specialize(p, &o, &s), TJ_OK);
  tj_codegen_options co = {c->arch, 0, 0};
  char *ptx = NULL;
  ck_assert_msg(tj_emit_ptx(s, &co, &ptx, NULL) == TJ_OK, "%s N=%lld cluster %d split %d: %s",
                ir_dtype_name(c->dtype), (long long)c->n, c->cluster, c->split, tj_spec_error(s));
  c->index = ptx_batch_add(b, ptx);
  tj_free(ptx);
  tj_spec_destroy(s);
  tj_program_destroy(p);
}

START_TEST(rows_across_ctas_assemble_without_spills) {
  static const int spread_archs[] = {80, 90, 100};
  static const int64_t wide[] = {32768, 32769, 65536, 131072, 262144, 524288, 1048576};
  static const int64_t ms[] = {1, 4, 131, 65536};
  static const int64_t huge[] = {1000000, 10000000, 16777216, 50000000};
  enum { MAX = 1024 };
  Spread *cases = calloc(MAX, sizeof *cases);
  int n = 0;
  PtxBatch *batches[3];
  for (int a = 0; a < 3; a++) batches[a] = ptx_batch_new(ptxas, spread_archs[a], 16);
  for (int a = 0; a < 3; a++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
        for (size_t j = 0; j < sizeof ms / sizeof ms[0]; j++)
          cases[n++] = (Spread){(tj_dtype)d, ms[j], wide[i], (i + j) % 2 ? 16 : 2 << (d == 0), spread_archs[a], 0, 0, -1, TJ_ROW_SOFTMAX};
      for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++)
        for (int64_t m = 1; m <= 4; m += 3) cases[n++] = (Spread){(tj_dtype)d, m, huge[i], 16, spread_archs[a], 0, 0, -1, TJ_ROW_SOFTMAX};
    }
  for (int cl = 2; cl <= 16; cl++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
      cases[n++] = (Spread){(tj_dtype)d, 4096, 65536, 16, 90, cl, 1, -1, TJ_ROW_SOFTMAX};
      cases[n++] = (Spread){(tj_dtype)d, 4096, 1 << 20, 16, 90, cl, 1, -1, TJ_ROW_SOFTMAX};
    }
  for (int sp = 2; sp <= 1024; sp *= 2)
    for (int a = 0; a < 3; a++) {
      cases[n++] = (Spread){TJ_DTYPE_F32, 1, 65536, 16, spread_archs[a], 1, sp, -1, TJ_ROW_SOFTMAX};
      cases[n++] = (Spread){TJ_DTYPE_BF16, 1, 1 << 20, 16, spread_archs[a], 1, sp, -1, TJ_ROW_SOFTMAX};
    }
  /* Softmax backward and masked softmax, planned: wide and huge rows. */
  for (int op = TJ_ROW_SOFTMAX_BACKWARD; op <= TJ_ROW_MASKED_SOFTMAX; op++)
    for (int a = 0; a < 3; a++)
      for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
        for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
          cases[n++] = (Spread){(tj_dtype)d, i % 2 ? 4 : 4096, wide[i], i % 3 ? 16 : 2 << (d == 0),
                                spread_archs[a], 0, 0, -1, (tj_row_op)op};
        cases[n++] = (Spread){(tj_dtype)d, 1, huge[1], 16, spread_archs[a], 0, 0, -1,
                              (tj_row_op)op};
      }
  ck_assert_int_le(n, MAX);
  for (int i = 0; i < n; i++) add_spread(batches[cases[i].arch == 80 ? 0 : cases[i].arch == 90 ? 1 : 2], &cases[i]);
  for (int a = 0; a < 3; a++) ptx_batch_run(batches[a]);
  int worst = 0, bad = 0, masked_spills = 0;
  for (int i = 0; i < n; i++) {
    const Spread *c = &cases[i];
    const PtxBatch *b = batches[c->arch == 80 ? 0 : c->arch == 90 ? 1 : 2];
    const PtxReport *r = ptx_batch_report(b, c->index);
    ck_assert_msg(r->assembled, "%s%s M=%lld N=%lld cluster %d split %d sm_%d does not assemble:\n%s",
                  c->op == TJ_ROW_SOFTMAX_BACKWARD ? "backward " : c->op ? "masked " : "", ir_dtype_name(c->dtype), (long long)c->m, (long long)c->n, c->cluster, c->split,
                  c->arch, ptx_batch_first_error(b));
    if (r->spill_bytes || r->stack_bytes || r->local_bytes) {
      /* Masked softmax's spills are printed, not failed: see the suite's note. */
      bad += c->op != TJ_ROW_MASKED_SOFTMAX;
      masked_spills += c->op == TJ_ROW_MASKED_SOFTMAX;
      printf("%s %s%s M=%lld N=%lld align %d cluster %d split %d sm_%d: %d bytes spilled, %d "
             "stack, %d local (%d registers)\n",
             c->op == TJ_ROW_MASKED_SOFTMAX ? "spill" : "SPILL",
             c->op == TJ_ROW_SOFTMAX_BACKWARD ? "backward " : c->op ? "masked " : "", ir_dtype_name(c->dtype), (long long)c->m, (long long)c->n, c->align, c->cluster,
             c->split, c->arch, r->spill_bytes, r->stack_bytes, r->local_bytes, r->registers);
    }
    if (r->registers > worst) worst = r->registers;
  }
  ck_assert_msg(bad == 0, "%d of %d kernels spill (listed above)", bad, n);
  printf("rows across CTAs: %d kernels assembled, %d masked-softmax ones with spills, the rest "
         "without (at most %d registers)\n", n, masked_spills, worst);
  for (int a = 0; a < 3; a++) ptx_batch_free(batches[a]);
  free(cases);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("ptxas_sweep");
  TCase *t = tcase_create("sweep");
  tcase_set_timeout(t, 900);
  tcase_add_test(t, every_specialization_assembles);
  tcase_add_test(t, rows_across_ctas_assemble_without_spills);
  tcase_add_test(t, phased_defaults_assemble_without_spills);
  tcase_add_test(t, log_softmax_defaults_assemble_without_spills);
  tcase_add_test(t, scalar_defaults_assemble_without_spills);
  tcase_add_test(t, backward_defaults_assemble_without_spills);
  tcase_add_test(t, masked_defaults_assemble_without_spills);
  suite_add_tcase(s, t);
  return s;
}

int main(void) { return ptxas_suite_main(suite(), ptxas, sizeof ptxas); }
