/*
 * test_ptxsim_sync.c — the PTX simulator (support_ptxsim.c) on the two
 * levels of parallelism above a CTA, with hand-written kernels:
 *   - thread-block clusters: CTAs of clusters of 2, 4 and 16 exchange their
 *     sums through mapa and st/ld.shared::cluster between split
 *     barrier.cluster phases, and every CTA stores its cluster's total;
 *   - a cooperative grid: CTAs meet at a generation-flip barrier (an
 *     atom.add on a counter in tj_workspace, then a spin on its top bit),
 *     twice, and exchange partial sums through the workspace.
 * Every output is checked, and so is what a GPU would hang or misbehave on:
 * a CTA that skips the grid barrier (a deadlock, found in few steps), a
 * cluster barrier that a spinning CTA never reaches, barrier.cluster
 * arrived at twice or waited at without an arrive, a thread exiting while
 * its cluster waits, a store into the shared memory of a CTA that has
 * exited, an mbarrier used before init, given more bytes than its phase
 * expects, completed by an st.async into another CTA, or waited for in a
 * round whose bytes never come (a deadlock), a workspace access out of bounds, cp.async read back before it
 * is waited for or left pending at exit. Also: atom and red in their
 * spellings, the integer and float instructions such kernels use, the
 * qualifiers of ld/st (and the combinations PTX refuses), the byte counts of
 * PtxsimStats, and the CTA-level errors that were there before.
 */
#include "support.h"
#include "support_ptxsim.h"

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ptx with every `key` replaced by text (malloc'd). */
static char *replace(const char *ptx, const char *key, const char *text) {
  size_t klen = strlen(key), tlen = strlen(text), count = 0;
  for (const char *p = strstr(ptx, key); p; p = strstr(p + klen, key)) count++;
  char *out = malloc(strlen(ptx) + count * tlen + 1), *o = out;
  ck_assert_ptr_nonnull(out);
  for (const char *p = ptx;;) {
    const char *hit = strstr(p, key);
    size_t n = hit ? (size_t)(hit - p) : strlen(p);
    memcpy(o, p, n);
    o += n;
    if (!hit) break;
    memcpy(o, text, tlen);
    o += tlen;
    p = hit + klen;
  }
  *o = '\0';
  return out;
}

/* ptx with every `key` replaced by a number. */
static char *with(const char *ptx, const char *key, long value) {
  char number[32];
  snprintf(number, sizeof number, "%ld", value);
  return replace(ptx, key, number);
}

static tj_arg ptr_arg(void *p, size_t bytes) {
  tj_arg a = {TJ_ARG_PTR, {.ptr = p}, bytes};
  return a;
}

/* Runs ptx and expects it to fail with a message containing every needle. */
static void expect_failure(const char *ptx, const tj_arg *args, int nargs, const PtxsimLaunch *l,
                           const char *const *needles, int count) {
  char why[1024];
  PtxsimStats st;
  ck_assert_msg(!ptxsim_launch(ptx, args, nargs, l, &st, why, sizeof why), "ran without error");
  for (int i = 0; i < count; i++)
    ck_assert_msg(strstr(why, needles[i]), "message '%s' lacks '%s'", why, needles[i]);
  ck_assert_msg(st.steps < 2000000, "%lld steps before failing: %s", (long long)st.steps, why);
}

/* Element i of the inputs: small integers, so every sum is exact. */
static float input(int i) { return (float)(i % 7 + 1); }

/* ---- clusters ----------------------------------------------------------------- */

/* Each CTA of 64 threads sums its x through shared memory (thread 0), then
 * thread 0 pushes the sum into slot `rank` of every CTA of the cluster
 * (mapa + st.shared::cluster); after barrier.cluster every thread adds the
 * slots and stores the cluster's total. Thread 0 also stores the cluster
 * registers: clusterid, nclusterid, ctarank, nctarank. */
static const char cluster_push[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry cluster_push(\n"
    "\t.param .u64 p_out,\n\t.param .u64 p_ids,\n\t.param .u64 p_x,\n\t.param .u64 tj_programs\n"
    ")\n"
    ".reqntid 64, 1, 1\n.minnctapersm 1\n.explicitcluster\n.reqnctapercluster CLUSTER, 1, 1\n"
    "{\n"
    "\t.reg .pred %p<8>;\n\t.reg .b32 %r<32>;\n\t.reg .b64 %rd<16>;\n\t.reg .f32 %f<16>;\n"
    "\t.shared .align 16 .b8 tj_smem[320];\n"
    "\tmov.u32 %r1, %tid.x;\n"
    "\tmov.u32 %r2, %ctaid.x;\n"
    "\tmov.u32 %r3, %ntid.x;\n"
    "\tmov.u32 %r10, %cluster_ctarank;\n"
    "\tmov.u32 %r11, %cluster_nctarank;\n"
    "\tmad.lo.u32 %r4, %r2, %r3, %r1;\n"
    "\tld.param.u64 %rd1, [p_x];\n"
    "\tcvta.to.global.u64 %rd1, %rd1;\n"
    "\tmul.wide.u32 %rd2, %r4, 4;\n"
    "\tadd.s64 %rd3, %rd1, %rd2;\n"
    "\tld.global.nc.L1::no_allocate.f32 %f1, [%rd3];\n"
    "\tmov.u32 %r5, tj_smem;\n"
    "\tshl.b32 %r6, %r1, 2;\n"
    "\tadd.s32 %r7, %r5, %r6;\n"
    "\tst.shared.f32 [%r7], %f1;\n"
    "\tbar.sync 0;\n"
    "\tsetp.ne.u32 %p1, %r1, 0;\n"
    "\t@%p1 bra $Lexchange;\n"
    "\tmov.f32 %f2, 0f00000000;\n"
    "\tmov.u32 %r8, 0;\n"
    "$Lsum:\n"
    "\tshl.b32 %r9, %r8, 2;\n"
    "\tadd.s32 %r9, %r5, %r9;\n"
    "\tld.shared.f32 %f3, [%r9];\n"
    "\tadd.f32 %f2, %f2, %f3;\n"
    "\tadd.s32 %r8, %r8, 1;\n"
    "\tsetp.lt.u32 %p2, %r8, %r3;\n"
    "\t@%p2 bra $Lsum;\n"
    "\tshl.b32 %r12, %r10, 2;\n"
    "\tadd.s32 %r12, %r5, %r12;\n"
    "\tmov.u32 %r13, 0;\n"
    "$Lpush:\n"
    "\tmapa.shared::cluster.u32 %r14, %r12, %r13;\n"
    "\tst.shared::cluster.f32 [%r14+256], %f2;\n"
    "\tadd.s32 %r13, %r13, 1;\n"
    "\tsetp.lt.u32 %p3, %r13, %r11;\n"
    "\t@%p3 bra $Lpush;\n"
    "\tmov.u32 %r15, %clusterid.x;\n"
    "\tmov.u32 %r16, %nclusterid.x;\n"
    "\tld.param.u64 %rd4, [p_ids];\n"
    "\tcvta.to.global.u64 %rd4, %rd4;\n"
    "\tmul.wide.u32 %rd5, %r2, 16;\n"
    "\tadd.s64 %rd6, %rd4, %rd5;\n"
    "\tst.global.v4.u32 [%rd6], {%r15, %r16, %r10, %r11};\n"
    "$Lexchange:\n"
    "\tbarrier.cluster.arrive.release.aligned;\n"
    "\tbarrier.cluster.wait.acquire.aligned;\n"
    "\tmov.f32 %f4, 0f00000000;\n"
    "\tmov.u32 %r17, 0;\n"
    "$Ltotal:\n"
    "\tshl.b32 %r18, %r17, 2;\n"
    "\tadd.s32 %r18, %r5, %r18;\n"
    "\tld.shared::cta.f32 %f5, [%r18+256];\n"
    "\tadd.f32 %f4, %f4, %f5;\n"
    "\tadd.s32 %r17, %r17, 1;\n"
    "\tsetp.lt.u32 %p4, %r17, %r11;\n"
    "\t@%p4 bra $Ltotal;\n"
    "\tld.param.u64 %rd7, [p_out];\n"
    "\tcvta.to.global.u64 %rd7, %rd7;\n"
    "\tadd.s64 %rd8, %rd7, %rd2;\n"
    "\tst.global.f32 [%rd8], %f4;\n"
    "\tret;\n"
    "}\n";

/* The same sums the other way: each CTA leaves {sum, 2 sum} in its own
 * shared memory, and after barrier.cluster thread 0 pulls every CTA's pair
 * (mapa + ld.shared::cluster.v2) and stores the totals between a second
 * arrive and wait, so that no CTA exits while another still reads it. */
static const char cluster_pull[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry cluster_pull(\n"
    "\t.param .u64 p_out,\n\t.param .u64 p_x,\n\t.param .u64 tj_programs\n"
    ")\n"
    ".reqntid 64, 1, 1\n.reqnctapercluster CLUSTER\n"
    "{\n"
    "\t.reg .pred %p<8>;\n\t.reg .b32 %r<32>;\n\t.reg .b64 %rd<16>;\n\t.reg .f32 %f<16>;\n"
    "\t.shared .align 16 .b8 tj_smem[272];\n"
    "\tmov.u32 %r1, %tid.x;\n"
    "\tmov.u32 %r2, %ctaid.x;\n"
    "\tmov.u32 %r11, %cluster_nctaid.x;\n"
    "\tmad.lo.s32 %r4, %r2, 64, %r1;\n"
    "\tld.param.u64 %rd1, [p_x];\n"
    "\tcvta.to.global.u64 %rd1, %rd1;\n"
    "\tmul.wide.u32 %rd2, %r4, 4;\n"
    "\tadd.s64 %rd3, %rd1, %rd2;\n"
    "\tld.global.L2::evict_first.f32 %f1, [%rd3];\n"
    "\tmov.u32 %r5, tj_smem;\n"
    "\tshl.b32 %r6, %r1, 2;\n"
    "\tadd.s32 %r7, %r5, %r6;\n"
    "\tst.shared.f32 [%r7], %f1;\n"
    "\tbar.sync 0;\n"
    "\tsetp.ne.u32 %p1, %r1, 0;\n"
    "\t@%p1 bra $Lexchange;\n"
    "\tmov.f32 %f2, 0f00000000;\n"
    "\tmov.u32 %r8, 0;\n"
    "$Lsum:\n"
    "\tshl.b32 %r9, %r8, 2;\n"
    "\tadd.s32 %r9, %r5, %r9;\n"
    "\tld.shared.f32 %f3, [%r9];\n"
    "\tadd.f32 %f2, %f2, %f3;\n"
    "\tadd.s32 %r8, %r8, 1;\n"
    "\tsetp.lt.u32 %p2, %r8, 64;\n"
    "\t@%p2 bra $Lsum;\n"
    "\tmul.f32 %f6, %f2, 0f40000000;\n"
    "\tst.shared::cta.v2.f32 [%r5+256], {%f2, %f6};\n"
    "$Lexchange:\n"
    "\tbarrier.cluster.arrive;\n"
    "\tbarrier.cluster.wait;\n"
    "\t@%p1 bra $Lread;\n"
    "\tmov.f32 %f7, 0f00000000;\n"
    "\tmov.f32 %f8, 0f00000000;\n"
    "\tmov.u32 %r13, 0;\n"
    "$Lpull:\n"
    "\tmapa.shared::cluster.u32 %r14, %r5, %r13;\n"
    "\tld.shared::cluster.v2.f32 {%f9, %f10}, [%r14+256];\n"
    "\tadd.f32 %f7, %f7, %f9;\n"
    "\tadd.f32 %f8, %f8, %f10;\n"
    "\tadd.s32 %r13, %r13, 1;\n"
    "\tsetp.lt.u32 %p3, %r13, %r11;\n"
    "\t@%p3 bra $Lpull;\n"
    "$Lread:\n"
    "\tbarrier.cluster.arrive.relaxed.aligned;\n"
    "\t@%p1 bra $Lwait;\n"
    "\tld.param.u64 %rd7, [p_out];\n"
    "\tcvta.to.global.u64 %rd7, %rd7;\n"
    "\tmul.wide.u32 %rd9, %r2, 8;\n"
    "\tadd.s64 %rd8, %rd7, %rd9;\n"
    "\tst.global.v2.f32 [%rd8], {%f7, %f8};\n"
    "$Lwait:\n"
    "\tbarrier.cluster.wait.aligned;\n"
    "\tret;\n"
    "}\n";

/* The sum of x over the CTAs of CTA c's cluster (64 threads per CTA). */
static float cluster_total(int c, int cluster) {
  float total = 0;
  for (int k = c / cluster * cluster; k < (c / cluster + 1) * cluster; k++)
    for (int t = 0; t < 64; t++) total += input(k * 64 + t);
  return total;
}

static const int cluster_sizes[] = {2, 4, 16};

START_TEST(cluster_push_sums) {
  int cluster = cluster_sizes[_i], ctas = 2 * cluster, n = ctas * 64;
  float *x = malloc(sizeof *x * (size_t)n), *out = malloc(sizeof *out * (size_t)n);
  uint32_t *ids = calloc((size_t)ctas * 4, sizeof *ids);
  ck_assert(x && out && ids);
  for (int i = 0; i < n; i++) x[i] = input(i), out[i] = -1;
  tj_arg args[3] = {ptr_arg(out, sizeof *out * (size_t)n), ptr_arg(ids, 16 * (size_t)ctas),
                    ptr_arg(x, sizeof *x * (size_t)n)};
  char *ptx = with(cluster_push, "CLUSTER", cluster), why[1024];
  PtxsimLaunch l = {ctas, ctas, NULL, 0, 0, 0};
  PtxsimStats st;
  ck_assert_msg(ptxsim_launch(ptx, args, 3, &l, &st, why, sizeof why), "cluster %d: %s", cluster,
                why);
  for (int i = 0; i < n; i++)
    ck_assert_msg(out[i] == cluster_total(i / 64, cluster), "cluster %d: out[%d] = %g, want %g",
                  cluster, i, (double)out[i], (double)cluster_total(i / 64, cluster));
  for (int c = 0; c < ctas; c++) {
    uint32_t want[4] = {(uint32_t)(c / cluster), 2, (uint32_t)(c % cluster), (uint32_t)cluster};
    for (int j = 0; j < 4; j++)
      ck_assert_msg(ids[c * 4 + j] == want[j], "cluster %d CTA %d register %d: %u, want %u",
                    cluster, c, j, ids[c * 4 + j], want[j]);
  }
  ck_assert_uint_eq(st.bytes_read[2], sizeof *x * (size_t)n); /* x exactly once */
  ck_assert_uint_eq(st.bytes_written[0], sizeof *out * (size_t)n);
  ck_assert_uint_eq(st.bytes_written[1], 16 * (size_t)ctas);
  free(ptx), free(x), free(out), free(ids);
}
END_TEST

START_TEST(cluster_pull_sums) {
  int cluster = cluster_sizes[_i], ctas = 2 * cluster, n = ctas * 64;
  float *x = malloc(sizeof *x * (size_t)n), *out = malloc(sizeof *out * 2 * (size_t)ctas);
  ck_assert(x && out);
  for (int i = 0; i < n; i++) x[i] = input(i);
  tj_arg args[2] = {ptr_arg(out, sizeof *out * 2 * (size_t)ctas),
                    ptr_arg(x, sizeof *x * (size_t)n)};
  char *ptx = with(cluster_pull, "CLUSTER", cluster), why[1024];
  ck_assert_msg(ptxsim_run(ptx, args, 2, ctas, ctas, why, sizeof why), "cluster %d: %s", cluster,
                why);
  for (int c = 0; c < ctas; c++) {
    ck_assert_msg(out[2 * c] == cluster_total(c, cluster), "cluster %d CTA %d: %g, want %g",
                  cluster, c, (double)out[2 * c], (double)cluster_total(c, cluster));
    ck_assert(out[2 * c + 1] == 2 * cluster_total(c, cluster));
  }
  free(ptx), free(x), free(out);
}
END_TEST

/* ---- a cooperative grid ---------------------------------------------------------- */

/* The counter at the start of tj_workspace; partial sums from byte 64,
 * pairs from byte 1024. One warp per CTA sums its 32 elements of x
 * (shfl.sync.bfly), lane 0 stores the sum as the CTA's partial and meets the
 * other CTAs at grid barrier 1: atom.add of 1 (CTA 0: 2^31 - (nctaid - 1)),
 * so the last arrival flips the counter's top bit, then a spin until it
 * differs from the bit the atom saw. Every thread adds the partials (the
 * grid's total) and stores it; lane 0 stores {total * (ctaid + 1), ctaid}
 * and meets the others at grid barrier 2 (other spellings: a fence then a
 * plain atom, a relaxed spin then a fence); every lane 0 adds up the pairs.
 * gen[4 c ...] records the value each atom returned and the value that
 * ended each spin. The CTA whose ctaid is SKIP exits before barrier 1. */
static const char grid_barrier[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry grid_barrier(\n"
    "\t.param .u64 p_out,\n\t.param .u64 p_pairs,\n\t.param .u64 p_gen,\n\t.param .u64 p_x,\n"
    "\t.param .u64 tj_workspace,\n\t.param .u64 tj_programs\n"
    ")\n"
    ".reqntid 32, 1, 1\n"
    "{\n"
    "\t.reg .pred %p<8>;\n\t.reg .b32 %r<40>;\n\t.reg .b64 %rd<24>;\n\t.reg .f32 %f<24>;\n"
    "\tmov.u32 %r1, %tid.x;\n"
    "\tmov.u32 %r2, %ctaid.x;\n"
    "\tmov.u32 %r3, %nctaid.x;\n"
    "\tmad.lo.u32 %r4, %r2, 32, %r1;\n"
    "\tld.param.u64 %rd1, [p_x];\n"
    "\tcvta.to.global.u64 %rd1, %rd1;\n"
    "\tmul.wide.u32 %rd2, %r4, 4;\n"
    "\tadd.s64 %rd3, %rd1, %rd2;\n"
    "\tld.global.f32 %f1, [%rd3];\n"
    "\tshfl.sync.bfly.b32 %f2, %f1, 16, 31, -1;\n"
    "\tadd.f32 %f1, %f1, %f2;\n"
    "\tshfl.sync.bfly.b32 %f2, %f1, 8, 31, -1;\n"
    "\tadd.f32 %f1, %f1, %f2;\n"
    "\tshfl.sync.bfly.b32 %f2, %f1, 4, 31, -1;\n"
    "\tadd.f32 %f1, %f1, %f2;\n"
    "\tshfl.sync.bfly.b32 %f2, %f1, 2, 31, -1;\n"
    "\tadd.f32 %f1, %f1, %f2;\n"
    "\tshfl.sync.bfly.b32 %f2, %f1, 1, 31, -1;\n"
    "\tadd.f32 %f1, %f1, %f2;\n"
    "\tld.param.u64 %rd4, [tj_workspace];\n"
    "\tcvta.to.global.u64 %rd9, %rd4;\n"
    "\tadd.s64 %rd10, %rd9, 64;\n"
    "\tadd.s64 %rd18, %rd9, 1024;\n"
    "\tsetp.eq.u32 %p5, %r2, SKIP;\n"
    "\t@%p5 bra $Lend;\n"
    "\tsetp.ne.u32 %p1, %r1, 0;\n"
    "\t@%p1 bra $Lwait_1;\n"
    "\tmul.wide.u32 %rd11, %r2, 4;\n"
    "\tadd.s64 %rd12, %rd10, %rd11;\n"
    "\tst.global.f32 [%rd12], %f1;\n"
    "\tsub.u32 %r5, %r3, 1;\n"
    "\tmov.u32 %r6, -2147483648;\n"
    "\tsub.u32 %r6, %r6, %r5;\n"
    "\tsetp.eq.u32 %p2, %r2, 0;\n"
    "\tselp.b32 %r7, %r6, 1, %p2;\n"
    "\tatom.add.release.gpu.global.u32 %r8, [%rd9], %r7;\n"
    "$Lspin_1:\n"
    "\tld.acquire.gpu.global.u32 %r9, [%rd9];\n"
    "\txor.b32 %r10, %r9, %r8;\n"
    "\tand.b32 %r10, %r10, -2147483648;\n"
    "\tsetp.eq.u32 %p3, %r10, 0;\n"
    "\t@%p3 bra $Lspin_1;\n"
    "\tld.param.u64 %rd13, [p_gen];\n"
    "\tcvta.to.global.u64 %rd13, %rd13;\n"
    "\tmul.wide.u32 %rd14, %r2, 16;\n"
    "\tadd.s64 %rd14, %rd13, %rd14;\n"
    "\tst.global.v2.u32 [%rd14], {%r8, %r9};\n"
    "$Lwait_1:\n"
    "\tbar.sync 0;\n"
    "\tmov.f32 %f3, 0f00000000;\n"
    "\tmov.u32 %r11, 0;\n"
    "$Lgrid_sum:\n"
    "\tmul.wide.u32 %rd15, %r11, 4;\n"
    "\tadd.s64 %rd15, %rd10, %rd15;\n"
    "\tld.global.cg.f32 %f4, [%rd15];\n"
    "\tadd.f32 %f3, %f3, %f4;\n"
    "\tadd.s32 %r11, %r11, 1;\n"
    "\tsetp.lt.u32 %p4, %r11, %r3;\n"
    "\t@%p4 bra $Lgrid_sum;\n"
    "\tld.param.u64 %rd16, [p_out];\n"
    "\tcvta.to.global.u64 %rd16, %rd16;\n"
    "\tadd.s64 %rd17, %rd16, %rd2;\n"
    "\tst.global.cs.f32 [%rd17], %f3;\n"
    "\t@%p1 bra $Lwait_2;\n"
    "\tadd.s32 %r12, %r2, 1;\n"
    "\tcvt.rn.f32.u32 %f5, %r12;\n"
    "\tmul.f32 %f6, %f3, %f5;\n"
    "\tcvt.rn.f32.u32 %f7, %r2;\n"
    "\tmul.wide.u32 %rd19, %r2, 8;\n"
    "\tadd.s64 %rd19, %rd18, %rd19;\n"
    "\tst.global.v2.f32 [%rd19], {%f6, %f7};\n"
    "\tfence.sc.gpu;\n"
    "\tatom.global.add.u32 %r8, [%rd9], %r7;\n"
    "$Lspin_2:\n"
    "\tld.relaxed.gpu.global.u32 %r9, [%rd9];\n"
    "\txor.b32 %r10, %r9, %r8;\n"
    "\tand.b32 %r10, %r10, -2147483648;\n"
    "\tsetp.eq.u32 %p3, %r10, 0;\n"
    "\t@%p3 bra $Lspin_2;\n"
    "\tfence.acq_rel.gpu;\n"
    "\tst.global.v2.u32 [%rd14+8], {%r8, %r9};\n"
    "\tmov.f32 %f8, 0f00000000;\n"
    "\tmov.f32 %f9, 0f00000000;\n"
    "\tmov.u32 %r11, 0;\n"
    "$Lpairs:\n"
    "\tmul.wide.u32 %rd20, %r11, 8;\n"
    "\tadd.s64 %rd20, %rd18, %rd20;\n"
    "\tld.global.cg.v2.f32 {%f10, %f11}, [%rd20];\n"
    "\tadd.f32 %f8, %f8, %f10;\n"
    "\tadd.f32 %f9, %f9, %f11;\n"
    "\tadd.s32 %r11, %r11, 1;\n"
    "\tsetp.lt.u32 %p4, %r11, %r3;\n"
    "\t@%p4 bra $Lpairs;\n"
    "\tld.param.u64 %rd21, [p_pairs];\n"
    "\tcvta.to.global.u64 %rd21, %rd21;\n"
    "\tadd.s64 %rd21, %rd21, %rd19;\n"
    "\tsub.s64 %rd21, %rd21, %rd18;\n"
    "\tst.global.v2.f32 [%rd21], {%f8, %f9};\n"
    "$Lwait_2:\n"
    "\tbar.sync 0;\n"
    "$Lend:\n"
    "\tret;\n"
    "}\n";

enum { GRID_CTAS = 8, GRID_N = GRID_CTAS * 32 };

typedef struct Grid {
  float x[GRID_N], out[GRID_N], pairs[2 * GRID_CTAS];
  uint32_t gen[4 * GRID_CTAS];
  uint32_t workspace[512];
  tj_arg args[4];
  PtxsimLaunch launch;
} Grid;

static void grid_init(Grid *g) {
  memset(g, 0, sizeof *g);
  for (int i = 0; i < GRID_N; i++) g->x[i] = input(i);
  g->args[0] = ptr_arg(g->out, sizeof g->out);
  g->args[1] = ptr_arg(g->pairs, sizeof g->pairs);
  g->args[2] = ptr_arg(g->gen, sizeof g->gen);
  g->args[3] = ptr_arg(g->x, sizeof g->x);
  g->launch = (PtxsimLaunch){GRID_CTAS, GRID_CTAS, g->workspace, sizeof g->workspace, 0, 0};
}

START_TEST(grid_barrier_twice) {
  static Grid g;
  grid_init(&g);
  char *ptx = with(grid_barrier, "SKIP", 999), why[1024];
  PtxsimStats st;
  ck_assert_msg(ptxsim_launch(ptx, g.args, 4, &g.launch, &st, why, sizeof why), "%s", why);
  float total = 0;
  for (int i = 0; i < GRID_N; i++) total += input(i);
  for (int i = 0; i < GRID_N; i++)
    ck_assert_msg(g.out[i] == total, "out[%d] = %g, want %g", i, (double)g.out[i], (double)total);
  for (int c = 0; c < GRID_CTAS; c++) {
    ck_assert_msg(g.pairs[2 * c] == total * GRID_CTAS * (GRID_CTAS + 1) / 2, "CTA %d: %g", c,
                  (double)g.pairs[2 * c]);
    ck_assert(g.pairs[2 * c + 1] == GRID_CTAS * (GRID_CTAS - 1) / 2);
    /* barrier 1 flips the top bit from 0 to 1, barrier 2 back to 0 */
    ck_assert_msg(g.gen[4 * c] >> 31 == 0 && g.gen[4 * c + 1] >> 31 == 1,
                  "CTA %d barrier 1: atom saw %#x, spin ended at %#x", c, g.gen[4 * c],
                  g.gen[4 * c + 1]);
    ck_assert_msg(g.gen[4 * c + 2] >> 31 == 1 && g.gen[4 * c + 3] >> 31 == 0,
                  "CTA %d barrier 2: atom saw %#x, spin ended at %#x", c, g.gen[4 * c + 2],
                  g.gen[4 * c + 3]);
  }
  ck_assert_uint_eq(g.workspace[0], 0);            /* 2 x 2^31 added in all */
  ck_assert_uint_eq(st.bytes_read[3], sizeof g.x); /* x read exactly once */
  ck_assert_uint_eq(st.bytes_written[0], sizeof g.out);
  ck_assert_uint_eq(st.bytes_written[2], sizeof g.gen);
  /* partials, pairs and two atoms per CTA; every thread reads all partials */
  ck_assert_uint_eq(st.workspace_written, GRID_CTAS * (4 + 8 + 2 * 4));
  ck_assert_uint_ge(st.workspace_read, GRID_N * GRID_CTAS * 4 + GRID_CTAS * GRID_CTAS * 8);
  ck_assert_msg(st.steps < 100000, "%lld steps: spinning is too expensive", (long long)st.steps);
  free(ptx);
}
END_TEST

/* CTA 5 exits before barrier 1: the others spin for ever (and wait at
 * bar.sync behind their spinning thread 0), which the simulator must find
 * in few steps and name. */
START_TEST(grid_barrier_skipped_is_a_deadlock) {
  static Grid g;
  grid_init(&g);
  char *ptx = with(grid_barrier, "SKIP", 5);
  const char *needles[] = {"deadlock", "ld.acquire.gpu.global.u32", "spin"};
  expect_failure(ptx, g.args, 4, &g.launch, needles, 3);
  free(ptx);
}
END_TEST

/* The same grid read with other instructions: partials through acquire
 * loads in a loop (polls of a new address each time, no spin), the spin of
 * barrier 1 through atom.or 0 (which changes nothing). */
START_TEST(grid_barrier_other_polls) {
  static Grid g;
  grid_init(&g);
  char *skip = with(grid_barrier, "SKIP", 999), why[1024];
  char *ptx = replace(skip, "ld.global.cg.f32 %f4", "ld.acquire.gpu.global.f32 %f4");
  char *ptx2 =
      replace(ptx, "ld.acquire.gpu.global.u32 %r9, [%rd9]", "atom.global.or.b32 %r9, [%rd9], 0");
  PtxsimStats st;
  ck_assert_msg(ptxsim_launch(ptx2, g.args, 4, &g.launch, &st, why, sizeof why), "%s", why);
  for (int i = 0; i < GRID_N; i++) ck_assert(g.out[i] == g.out[0] && g.out[0] > 0);
  ck_assert_uint_eq(g.workspace[0], 0);
  free(ptx2);
  free(ptx);
  free(skip);
  grid_init(&g);
  skip = with(grid_barrier, "SKIP", 3);
  ptx = replace(skip, "ld.acquire.gpu.global.u32 %r9, [%rd9]", "atom.global.or.b32 %r9, [%rd9], 0");
  const char *needles[] = {"deadlock", "7 threads spin", "atom.global.or.b32"};
  expect_failure(ptx, g.args, 4, &g.launch, needles, 3);
  free(ptx);
  free(skip);
}
END_TEST

/* Partials read back through ld.global.nc, which may see stale data on a
 * GPU: the simulator refuses to read what the launch wrote that way. */
START_TEST(grid_barrier_nc_reads_of_partials) {
  static Grid g;
  grid_init(&g);
  char *skip = with(grid_barrier, "SKIP", 999);
  char *ptx = replace(skip, "ld.global.cg.f32 %f4", "ld.global.nc.f32 %f4");
  const char *needles[] = {"ld.global.nc of memory this launch wrote"};
  expect_failure(ptx, g.args, 4, &g.launch, needles, 1);
  free(ptx);
  free(skip);
}
END_TEST

/* A cooperative kernel launched without its workspace, and the reverse. */
START_TEST(workspace_must_match_the_kernel) {
  static Grid g;
  grid_init(&g);
  char *ptx = with(grid_barrier, "SKIP", 999), why[256];
  g.launch.workspace = NULL;
  ck_assert(!ptxsim_launch(ptx, g.args, 4, &g.launch, NULL, why, sizeof why));
  ck_assert_msg(strstr(why, "tj_workspace"), "%s", why);
  free(ptx);
  float x[32] = {0}, out[64];
  tj_arg args[2] = {ptr_arg(out, sizeof out), ptr_arg(x, sizeof x)};
  ptx = with(cluster_pull, "CLUSTER", 2);
  PtxsimLaunch l = {2, 2, g.workspace, sizeof g.workspace, 0, 0};
  ck_assert(!ptxsim_launch(ptx, args, 2, &l, NULL, why, sizeof why));
  ck_assert_msg(strstr(why, "workspace"), "%s", why);
  free(ptx);
}
END_TEST

/* ld.global.cg at the workspace pointer + OFFSET (one float). */
static const char workspace_read[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry workspace_read(\n"
    "\t.param .u64 p_out,\n\t.param .u64 tj_workspace,\n\t.param .u64 tj_programs\n"
    ")\n"
    ".reqntid 32, 1, 1\n"
    "{\n"
    "\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<8>;\n\t.reg .f32 %f<4>;\n"
    "\tld.param.u64 %rd1, [tj_workspace];\n"
    "\tld.global.cg.f32 %f1, [%rd1+OFFSET];\n"
    "\tld.param.u64 %rd2, [p_out];\n"
    "\tmov.u32 %r1, %tid.x;\n"
    "\tmul.wide.u32 %rd3, %r1, 4;\n"
    "\tadd.s64 %rd4, %rd2, %rd3;\n"
    "\tst.global.f32 [%rd4], %f1;\n"
    "\tret;\n"
    "}\n";

/* The workspace is 16 floats; what follows it belongs to no buffer (host
 * addresses: the check is against the buffers, so an access just past one
 * that lands in another argument's buffer would pass). */
START_TEST(workspace_bounds) {
  struct {
    float workspace[16], guard[16];
  } memory;
  float out[32], *workspace = memory.workspace;
  for (int i = 0; i < 16; i++) workspace[i] = (float)i;
  tj_arg args[1] = {ptr_arg(out, sizeof out)};
  PtxsimLaunch l = {1, 1, workspace, sizeof memory.workspace, 0, 0};
  char *ptx = with(workspace_read, "OFFSET", 60), why[512];
  ck_assert_msg(ptxsim_launch(ptx, args, 1, &l, NULL, why, sizeof why), "%s", why);
  ck_assert(out[31] == 15.0f);
  free(ptx);
  ptx = with(workspace_read, "OFFSET", 64); /* one past the end */
  const char *outside[] = {"outside every buffer", "ptx line 15"};
  expect_failure(ptx, args, 1, &l, outside, 2);
  free(ptx);
  ptx = with(workspace_read, "OFFSET", 2);
  const char *misaligned[] = {"misaligned 4-byte access"};
  expect_failure(ptx, args, 1, &l, misaligned, 1);
  free(ptx);
}
END_TEST

/* ---- what a GPU would hang or misbehave on, in clusters of 2 ------------------ */

/* 64 threads per CTA, clusters of 2; the body runs with %r1 = tid,
 * %r2 = cluster rank, %r3 = tj_smem, %rd1 = the workspace (when PARAMS
 * declares it). */
#define CLUSTER_KERNEL(params, body)                                                               \
  ".version 8.0\n.target sm_90\n.address_size 64\n"                                                \
  ".visible .entry k(\n\t.param .u64 p_out,\n" params "\t.param .u64 tj_programs\n)\n"             \
  ".reqntid 64, 1, 1\n.explicitcluster\n.reqnctapercluster 2, 1, 1\n{\n"                           \
  "\t.reg .pred %p<8>;\n\t.reg .b32 %r<32>;\n\t.reg .b64 %rd<16>;\n\t.reg .f32 %f<16>;\n"          \
  "\t.shared .align 16 .b8 tj_smem[256];\n"                                                        \
  "\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, %cluster_ctarank;\n\tmov.u32 %r3, tj_smem;\n" body "}\n"

/* Thread 0 (%p5) inits the mbarrier at tj_smem + 128 (%r4) for one
 * arrival; after the cluster meets, %r6 and %r7 are slot 0 and the
 * mbarrier in the other CTA, %f1 a value. */
#define MBAR_SETUP                                                                                 \
  "\tsetp.eq.u32 %p5, %r1, 0;\n\tadd.s32 %r4, %r3, 128;\n"                                         \
  "\t@%p5 mbarrier.init.shared::cta.b64 [%r4], 1;\n\tfence.mbarrier_init.release.cluster;\n"       \
  "\tbarrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;\n"                           \
  "\txor.b32 %r5, %r2, 1;\n\tmapa.shared::cluster.u32 %r6, %r3, %r5;\n"                            \
  "\tmapa.shared::cluster.u32 %r7, %r4, %r5;\n\tmov.f32 %f1, 0f3F800000;\n"

static const struct {
  const char *name, *ptx, *needle;
} cluster_errors[] = {
    {"arrive twice",
     CLUSTER_KERNEL("", "\tbarrier.cluster.arrive;\n\tbarrier.cluster.arrive;\n"
                        "\tbarrier.cluster.wait;\n\tret;\n"),
     "barrier.cluster.arrive twice"},
    {"wait alone", CLUSTER_KERNEL("", "\tbarrier.cluster.wait.aligned;\n\tret;\n"),
     "without a barrier.cluster.arrive"},
    {"exit between arrive and wait",
     CLUSTER_KERNEL("", "\tbarrier.cluster.arrive.aligned;\n\tret;\n"),
     "exits between barrier.cluster.arrive"},
    {"rank 1 exits while rank 0 waits",
     CLUSTER_KERNEL("", "\tsetp.eq.u32 %p1, %r2, 1;\n\t@%p1 ret;\n\tbarrier.cluster.arrive;\n"
                        "\tbarrier.cluster.wait;\n\tret;\n"),
     "exits while its cluster's barrier"},
    {"rank 0 exits before rank 1 arrives",
     CLUSTER_KERNEL("", "\tsetp.eq.u32 %p1, %r2, 0;\n\t@%p1 ret;\n\tbarrier.cluster.arrive;\n"
                        "\tbarrier.cluster.wait;\n\tret;\n"),
     "without taking part"},
    {"lanes of a warp at two .aligned arrives",
     CLUSTER_KERNEL("", "\tsetp.eq.u32 %p1, %r1, 0;\n\t@%p1 bra $La;\n"
                        "\tbarrier.cluster.arrive.aligned;\n\tbra.uni $Lb;\n$La:\n"
                        "\tbarrier.cluster.arrive.aligned;\n$Lb:\n"
                        "\tbarrier.cluster.wait.aligned;\n\tret;\n"),
     "lanes of warp 0 of CTA 0 arrive at different instructions"},
    {"store into an exited CTA",
     CLUSTER_KERNEL("", "\tsetp.eq.u32 %p1, %r2, 1;\n\t@%p1 ret;\n\tsetp.ne.u32 %p2, %r1, 0;\n"
                        "\t@%p2 ret;\n\tmov.u32 %r4, 0;\n$Lbusy:\n\tadd.s32 %r4, %r4, 1;\n"
                        "\tsetp.lt.u32 %p3, %r4, 2000;\n\t@%p3 bra $Lbusy;\n"
                        "\tmapa.shared::cluster.u32 %r5, %r3, 1;\n\tmov.f32 %f1, 0f3F800000;\n"
                        "\tst.shared::cluster.f32 [%r5+16], %f1;\n\tret;\n"),
     "shared::cluster access to CTA 1 (rank 1 of its cluster), which has exited"},
    {"mapa to rank 2 of 2", CLUSTER_KERNEL("", "\tmapa.shared::cluster.u32 %r5, %r3, 2;\n\tret;\n"),
     "mapa to CTA rank 2 of a cluster of 2"},
    {"a cluster address in ld.shared",
     CLUSTER_KERNEL("", "\tmapa.shared::cluster.u32 %r5, %r3, 1;\n\tld.shared.f32 %f1, [%r5];\n"
                        "\tret;\n"),
     "needs .shared::cluster"},
    {"a remote access past tj_smem",
     CLUSTER_KERNEL("", "\tmapa.shared::cluster.u32 %r5, %r3, 1;\n"
                        "\tld.shared::cluster.f32 %f1, [%r5+256];\n\tret;\n"),
     "bad shared::cluster access of 4 bytes at offset 256"},
    {"a spinning CTA never reaches the cluster barrier",
     CLUSTER_KERNEL("\t.param .u64 tj_workspace,\n",
                    "\tld.param.u64 %rd1, [tj_workspace];\n\tsetp.eq.u32 %p1, %r2, 0;\n"
                    "\t@%p1 bra $Lzero;\n$Lspin:\n\tld.volatile.global.u32 %r4, [%rd1];\n"
                    "\tsetp.eq.u32 %p2, %r4, 0;\n\t@%p2 bra $Lspin;\n$Lzero:\n"
                    "\tbarrier.cluster.arrive;\n\tbarrier.cluster.wait;\n"
                    "\t@%p1 st.global.u32 [%rd1], 1;\n\tret;\n"),
     "deadlock: no thread can make progress: 64 threads wait at line 30 "
     "`barrier.cluster.wait` (first: CTA 0 thread 0); 64 threads spin at line 25 "
     "`ld.volatile.global.u32 %r4, [%rd1]` (first: CTA 1 thread 0); barrier.cluster of "
     "cluster 0: 64 of 128 threads arrived"},
    /* mbarriers (at tj_smem + 128) and st.async, the cluster level's round:
     * thread 0 of each CTA inits, both meet once, then each sends its
     * value into the other's slot, completing the other's mbarrier. */
    {"an mbarrier used before init",
     CLUSTER_KERNEL("", "\tmbarrier.try_wait.parity.shared::cta.b64 %p1, [%r3+128], 0;\n\tret;\n"),
     "used before mbarrier.init"},
    {"more bytes than the phase expects",
     CLUSTER_KERNEL("", MBAR_SETUP "\t@%p5 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r4], 4;\n"
                                   "\t@%p5 st.async.shared::cluster.mbarrier::complete_tx::bytes."
                                   "v2.f32 [%r6], {%f1, %f1}, [%r7];\n\tret;\n"),
     "bytes more than its phase expects"},
    {"st.async completing another CTA's mbarrier",
     CLUSTER_KERNEL("", MBAR_SETUP "\t@%p5 st.async.shared::cluster.mbarrier::complete_tx::bytes."
                                   "f32 [%r6], %f1, [%r4];\n\tret;\n"),
     "st.async into one CTA completes an mbarrier of another"},
    {"a round whose bytes never come",
     CLUSTER_KERNEL("", MBAR_SETUP "\t@%p5 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r4], 8;\n"
                                   "\t@%p5 st.async.shared::cluster.mbarrier::complete_tx::bytes."
                                   "f32 [%r6], %f1, [%r7];\n$Lround:\n"
                                   "\tmbarrier.try_wait.parity.shared::cta.b64 %p2, [%r4], 0;\n"
                                   "\t@!%p2 bra $Lround;\n\tret;\n"),
     "deadlock: no thread can make progress: 128 threads spin at line"},
};

START_TEST(cluster_errors_are_reported) {
  float out[64];
  uint32_t workspace[4] = {0};
  tj_arg args[1] = {ptr_arg(out, sizeof out)};
  bool ws = strstr(cluster_errors[_i].ptx, "tj_workspace") != NULL;
  PtxsimLaunch l = {2, 2, ws ? workspace : NULL, ws ? sizeof workspace : 0, 0, 0};
  char why[1024];
  ck_assert_msg(!ptxsim_launch(cluster_errors[_i].ptx, args, 1, &l, NULL, why, sizeof why),
                "%s: ran without error", cluster_errors[_i].name);
  ck_assert_msg(strstr(why, cluster_errors[_i].needle), "%s: message '%s' lacks '%s'",
                cluster_errors[_i].name, why, cluster_errors[_i].needle);
}
END_TEST

/* ---- CTA-level errors, as before ------------------------------------------------ */

#define CTA_KERNEL(body)                                                                           \
  ".version 7.8\n.target sm_80\n.address_size 64\n"                                                \
  ".visible .entry k(\n\t.param .u64 p_out,\n\t.param .u64 tj_programs\n)\n"                       \
  ".reqntid 64, 1, 1\n{\n"                                                                         \
  "\t.reg .pred %p<8>;\n\t.reg .b32 %r<32>;\n\t.reg .b64 %rd<16>;\n\t.reg .f32 %f<16>;\n"          \
  "\tmov.u32 %r1, %tid.x;\n" body "}\n"

static const struct {
  const char *ptx, *needle;
} cta_errors[] = {
    {CTA_KERNEL("\tsetp.eq.u32 %p1, %r1, 1;\n\t@%p1 ret;\n\tbar.sync 0;\n\tret;\n"),
     "bar.sync not reached by every thread (thread 1 has exited)"},
    {CTA_KERNEL("\tsetp.eq.u32 %p1, %r1, 40;\n\t@%p1 bra $La;\n\tbar.sync 0;\n\tret;\n$La:\n"
                "\tbar.sync 0;\n\tret;\n"),
     "bar.sync not reached by every thread (thread 40 waits at line 20)"},
    {CTA_KERNEL("\tsetp.eq.u32 %p1, %r1, 35;\n\t@%p1 ret;\n"
                "\tshfl.sync.bfly.b32 %r2, %r1, 1, 31, -1;\n\tret;\n"),
     "shfl.sync not reached by every lane of warp 1 (lane 3 has exited)"},
    {CTA_KERNEL("\tadd.s32 %r2, %r5, 1;\n\tret;\n"), "register %r5 read before written"},
    {CTA_KERNEL("\tmov.u32 %r2, %cluster_ctarank;\n\tret;\n"), "needs sm_90"},
    {CTA_KERNEL("\tmov.u32 %r2, 0;\n$Lspin:\n\tld.param.u64 %rd1, [p_out];\n"
                "\tld.volatile.global.u32 %r2, [%rd1];\n\tsetp.eq.u32 %p1, %r2, 7;\n"
                "\t@!%p1 bra $Lspin;\n\tret;\n"),
     "deadlock: no thread can make progress: 64 threads spin at line 18 `ld.volatile.global.u32 "
     "%r2, [%rd1]`"},
};

START_TEST(cta_errors_are_reported) {
  uint32_t out[64] = {0};
  tj_arg args[1] = {ptr_arg(out, sizeof out)};
  char why[1024];
  PtxsimStats st;
  PtxsimLaunch l = {1, 1, NULL, 0, 0, 0};
  ck_assert_msg(!ptxsim_launch(cta_errors[_i].ptx, args, 1, &l, &st, why, sizeof why),
                "case %d ran without error", _i);
  ck_assert_msg(strstr(why, cta_errors[_i].needle), "case %d: message '%s' lacks '%s'", _i, why,
                cta_errors[_i].needle);
  ck_assert_msg(st.steps < 100000, "case %d: %lld steps", _i, (long long)st.steps);
}
END_TEST

/* ---- atomics ------------------------------------------------------------------------ */

#define ONE_CTA_KERNEL(threads, params, body)                                                      \
  ".version 8.0\n.target sm_90\n.address_size 64\n"                                                \
  ".visible .entry k(\n" params "\t.param .u64 tj_programs\n)\n"                                   \
  ".reqntid " #threads ", 1, 1\n{\n"                                                               \
  "\t.reg .pred %p<8>;\n\t.reg .b32 %r<32>;\n\t.reg .b64 %rd<16>;\n\t.reg .f32 %f<16>;\n" body     \
  "}\n"

/* 32 threads update cells[] with every atom/red operation, in several
 * spellings; olds[tid] = what the first atom.add returned. */
static const char atomics[] =
    ONE_CTA_KERNEL(32, "\t.param .u64 p_cells,\n\t.param .u64 p_olds,\n",
                   "\tmov.u32 %r1, %tid.x;\n"
                   "\tld.param.u64 %rd1, [p_cells];\n"
                   "\tatom.global.add.u32 %r2, [%rd1], 1;\n"
                   "\tsub.s32 %r3, %r1, 16;\n"
                   "\tatom.global.max.s32 %r4, [%rd1+4], %r3;\n"
                   "\tatom.relaxed.gpu.global.min.u32 %r5, [%rd1+8], %r1;\n"
                   "\tatom.exch.global.b32 %r6, [%rd1+12], %r1;\n"
                   "\tadd.s32 %r7, %r1, 100;\n"
                   "\tatom.acq_rel.gpu.global.cas.b32 %r8, [%rd1+16], 0, %r7;\n"
                   "\tcvt.u64.u32 %rd2, %r1;\n"
                   "\tshl.b64 %rd3, %rd2, 32;\n"
                   "\tatom.global.add.u64 %rd4, [%rd1+24], %rd3;\n"
                   "\tred.global.add.u32 [%rd1+32], %r1;\n"
                   "\tred.release.gpu.global.max.u32 [%rd1+36], %r1;\n"
                   "\tatom.global.exch.b64 %rd5, [%rd1+40], %rd3;\n"
                   "\tatom.sys.global.min.s32 %r9, [%rd1+48], %r3;\n"
                   "\tcvt.rn.f32.u32 %f1, %r1;\n"
                   "\tatom.global.add.f32 %f2, [%rd1+52], %f1;\n"
                   "\tred.relaxed.cluster.global.add.u64 [%rd1+56], %rd2;\n"
                   "\tld.param.u64 %rd6, [p_olds];\n"
                   "\tmul.wide.u32 %rd7, %r1, 4;\n"
                   "\tadd.s64 %rd8, %rd6, %rd7;\n"
                   "\tst.global.u32 [%rd8], %r2;\n"
                   "\tret;\n");

START_TEST(atomics_in_every_spelling) {
  uint32_t cells[16] = {0}, olds[32];
  cells[1] = 0x80000000u; /* max.s32 from INT_MIN */
  cells[2] = 0xFFFFFFFFu; /* min.u32 from the largest */
  tj_arg args[2] = {ptr_arg(cells, sizeof cells), ptr_arg(olds, sizeof olds)};
  char why[512];
  PtxsimStats st;
  PtxsimLaunch l = {1, 1, NULL, 0, 0, 0};
  ck_assert_msg(ptxsim_launch(atomics, args, 2, &l, &st, why, sizeof why), "%s", why);
  uint64_t wide[3];
  memcpy(wide, &cells[6], sizeof wide[0]);
  memcpy(&wide[1], &cells[10], sizeof wide[1]);
  memcpy(&wide[2], &cells[14], sizeof wide[2]);
  float fsum;
  memcpy(&fsum, &cells[13], sizeof fsum);
  ck_assert_uint_eq(cells[0], 32);
  ck_assert_int_eq((int32_t)cells[1], 15);
  ck_assert_uint_eq(cells[2], 0);
  ck_assert_uint_eq(cells[3], 31);  /* the last exchange: threads take turns in order */
  ck_assert_uint_eq(cells[4], 100); /* only thread 0's compare-and-swap finds 0 */
  ck_assert_uint_eq(wide[0], 496ull << 32);
  ck_assert_uint_eq(cells[8], 496);
  ck_assert_uint_eq(cells[9], 31);
  ck_assert_uint_eq(wide[1], 31ull << 32);
  ck_assert_int_eq((int32_t)cells[12], -16);
  ck_assert(fsum == 496.0f);
  ck_assert_uint_eq(wide[2], 496);
  bool seen[32] = {false};
  for (int t = 0; t < 32; t++) {
    ck_assert_uint_lt(olds[t], 32);
    ck_assert_msg(!seen[olds[t]], "two threads got %u from atom.add", olds[t]);
    seen[olds[t]] = true;
  }
  /* an atom reads and writes: 9 atomics on 32-bit cells, 3 on 64-bit ones */
  uint64_t cell_bytes = 32 * (4 * 9 + 8 * 3);
  ck_assert_uint_eq(st.bytes_read[0], cell_bytes);
  ck_assert_uint_eq(st.bytes_written[0], cell_bytes);
  ck_assert_uint_eq(st.bytes_read[1], 0);
  ck_assert_uint_eq(st.bytes_written[1], sizeof olds);
}
END_TEST

/* ---- integer and float instructions -------------------------------------------------- */

/* One thread; result k goes to the 8 bytes at out + 8 k (32-bit results
 * in the low half of a zeroed slot). */
static const char integer_ops[] =
    ONE_CTA_KERNEL(1, "\t.param .u64 p_out,\n",
                   "\tld.param.u64 %rd10, [p_out];\n"
                   "\tmov.u32 %r1, 1000003;\n"
                   "\tdiv.u32 %r2, %r1, 7;\n\tst.global.u32 [%rd10], %r2;\n"
                   "\trem.u32 %r3, %r1, 7;\n\tst.global.u32 [%rd10+8], %r3;\n"
                   "\tmov.u32 %r4, -7;\n"
                   "\tdiv.s32 %r5, %r4, 2;\n\tst.global.u32 [%rd10+16], %r5;\n"
                   "\trem.s32 %r6, %r4, 2;\n\tst.global.u32 [%rd10+24], %r6;\n"
                   "\tmad.lo.s32 %r7, %r4, 3, 5;\n\tst.global.u32 [%rd10+32], %r7;\n"
                   "\tmad.lo.u32 %r8, %r1, %r1, 1;\n\tst.global.u32 [%rd10+40], %r8;\n"
                   "\tmov.u64 %rd0, 10;\n"
                   "\tmad.wide.u32 %rd1, %r4, 2, %rd0;\n\tst.global.u64 [%rd10+48], %rd1;\n"
                   "\tmul.lo.u32 %r9, %r4, %r4;\n\tst.global.u32 [%rd10+56], %r9;\n"
                   "\tmul.wide.u32 %rd2, %r4, %r4;\n\tst.global.u64 [%rd10+64], %rd2;\n"
                   "\tmul.hi.u32 %r10, %r4, %r4;\n\tst.global.u32 [%rd10+72], %r10;\n"
                   "\tmul.wide.s32 %rd3, %r4, %r4;\n\tst.global.u64 [%rd10+80], %rd3;\n"
                   "\tmin.u32 %r11, %r4, 5;\n\tst.global.u32 [%rd10+88], %r11;\n"
                   "\tmax.u32 %r12, %r4, 5;\n\tst.global.u32 [%rd10+96], %r12;\n"
                   "\tfma.rn.f32 %f1, 0f3FC00000, 0f40000000, 0f3E800000;\n"
                   "\tsetp.gt.u64 %p1, %rd2, %rd3;\n"
                   "\tselp.f32 %f2, %f1, 0f00000000, %p1;\n\tst.global.f32 [%rd10+104], %f2;\n"
                   "\tsetp.lt.u64 %p2, %rd2, %rd3;\n"
                   "\tselp.b32 %r13, 1, 2, %p2;\n\tst.global.u32 [%rd10+112], %r13;\n"
                   "\tselp.b64 %rd4, %rd2, %rd3, %p2;\n\tst.global.u64 [%rd10+120], %rd4;\n"
                   "\tmov.u64 %rd5, -9223372036854775808;\n"
                   "\tshr.u64 %rd6, %rd5, 60;\n\tst.global.u64 [%rd10+128], %rd6;\n"
                   "\tshr.s64 %rd7, %rd5, 60;\n\tst.global.u64 [%rd10+136], %rd7;\n"
                   "\tmov.f32 %f3, 0fC0300000;\n"
                   "\tcvt.rzi.s32.f32 %r14, %f3;\n\tst.global.u32 [%rd10+144], %r14;\n"
                   "\tcvt.rni.s32.f32 %r15, %f3;\n\tst.global.u32 [%rd10+152], %r15;\n"
                   "\tcvt.rmi.s32.f32 %r16, %f3;\n\tst.global.u32 [%rd10+160], %r16;\n"
                   "\tcvt.rpi.s32.f32 %r17, %f3;\n\tst.global.u32 [%rd10+168], %r17;\n"
                   "\tmov.f32 %f4, 0f4F32D05E;\n"
                   "\tcvt.rzi.s32.f32 %r18, %f4;\n\tst.global.u32 [%rd10+176], %r18;\n"
                   "\tmov.f32 %f5, 0fC0A00000;\n"
                   "\tcvt.rzi.u32.f32 %r19, %f5;\n\tst.global.u32 [%rd10+184], %r19;\n"
                   "\tsetp.hs.u32 %p3, %r4, 5;\n"
                   "\tselp.b32 %r20, 1, 0, %p3;\n\tst.global.u32 [%rd10+192], %r20;\n"
                   "\tsetp.ge.s32 %p4, %r4, 5;\n"
                   "\tselp.b32 %r21, 1, 0, %p4;\n\tst.global.u32 [%rd10+200], %r21;\n"
                   "\tabs.s32 %r22, %r4;\n\tst.global.u32 [%rd10+208], %r22;\n"
                   "\tnot.b32 %r23, %r4;\n\tst.global.u32 [%rd10+216], %r23;\n"
                   "\tmov.f32 %f6, 0f3FC00000;\n"
                   "\tmad.rn.f32 %f7, %f6, %f6, %f6;\n\tst.global.f32 [%rd10+224], %f7;\n"
                   "\tret;\n");

START_TEST(integer_and_float_instructions) {
  uint64_t out[29] = {0};
  tj_arg args[1] = {ptr_arg(out, sizeof out)};
  char why[512];
  ck_assert_msg(ptxsim_run(integer_ops, args, 1, 1, 1, why, sizeof why), "%s", why);
  uint32_t m7 = (uint32_t)-7;
  float f;
  const uint64_t want[] = {
      142857,
      4,
      (uint32_t)-3,
      (uint32_t)-1,
      (uint32_t)-16,
      (uint32_t)(1000003ull * 1000003ull + 1),
      (uint64_t)m7 * 2 + 10,
      49,
      (uint64_t)m7 * m7,
      ((uint64_t)m7 * m7) >> 32,
      49,
      5,
      m7,
      0, /* 3.25f, below */
      2,
      49,
      8,
      (uint64_t)-8,
      (uint32_t)-2,
      (uint32_t)-3,
      (uint32_t)-3,
      (uint32_t)-2,
      INT32_MAX,
      0,
      1,
      0,
      7,
      6,
      0, /* 3.75f, below */
  };
  for (int k = 0; k < 29; k++)
    if (k != 13 && k != 28)
      ck_assert_msg(out[k] == want[k], "result %d: %#llx, want %#llx", k,
                    (unsigned long long)out[k], (unsigned long long)want[k]);
  memcpy(&f, &out[13], sizeof f);
  ck_assert(f == 3.25f);
  memcpy(&f, &out[28], sizeof f);
  ck_assert(f == 3.75f);
}
END_TEST

/* ---- qualifiers ------------------------------------------------------------------------ */

/* INSTRUCTION with a buffer at %rd1, a cache policy in %rd2, every register
 * it may read written. */
static const char qualifier_kernel[] =
    ".version 8.0\n.target sm_TARGET\n.address_size 64\n"
    ".visible .entry k(\n\t.param .u64 p_buf,\n\t.param .u64 tj_programs\n)\n"
    ".reqntid 1, 1, 1\n{\n"
    "\t.reg .pred %p<4>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<8>;\n\t.reg .f32 %f<8>;\n"
    "\tld.param.u64 %rd1, [p_buf];\n\tmov.u64 %rd2, 0;\n\tmov.u32 %r1, 1;\n"
    "\tmov.f32 %f0, 0f3F800000;\n\tmov.f32 %f1, 0f3F800000;\n\tmov.f32 %f2, 0f3F800000;\n"
    "\tmov.f32 %f3, 0f3F800000;\n\tsetp.eq.u32 %p1, %r1, 1;\n"
    "\tINSTRUCTION\n"
    "\tret;\n}\n";

static const char *const accepted[] = {
    "ld.global.ca.f32 %f1, [%rd1];",
    "ld.global.cg.v2.f32 {%f1, %f2}, [%rd1];",
    "ld.global.cs.f32 %f1, [%rd1];",
    "ld.global.lu.f32 %f1, [%rd1];",
    "ld.global.cv.f32 %f1, [%rd1];",
    "ld.global.nc.f32 %f1, [%rd1];",
    "ld.global.nc.L1::no_allocate.L2::128B.v4.f32 {%f0, %f1, %f2, %f3}, [%rd1];",
    "ld.global.L1::evict_last.L2::evict_first.u32 %r1, [%rd1];",
    "ld.global.L2::cache_hint.f32 %f1, [%rd1], %rd2;",
    "ld.relaxed.gpu.global.u32 %r1, [%rd1];",
    "ld.acquire.sys.global.u32 %r1, [%rd1];",
    "ld.acquire.cta.global.b32 %r1, [%rd1];",
    "ld.relaxed.gpu.global.L2::evict_last.u32 %r1, [%rd1];",
    "ld.volatile.global.u32 %r1, [%rd1];",
    "ld.weak.global.cg.u32 %r1, [%rd1];",
    "st.global.wb.f32 [%rd1], %f1;",
    "st.global.wt.u32 [%rd1], %r1;",
    "st.global.cg.v4.f32 [%rd1], {%f0, %f1, %f2, %f3};",
    "st.global.cs.f32 [%rd1], %f1;",
    "st.release.gpu.global.u32 [%rd1], %r1;",
    "st.relaxed.cluster.global.u32 [%rd1], %r1;",
    "st.volatile.global.u32 [%rd1], %r1;",
    "st.global.L1::no_allocate.f32 [%rd1], %f1;",
    "atom.add.release.gpu.global.u32 %r2, [%rd1], 1;",
    "atom.global.add.u32 %r2, [%rd1], 1;",
    "atom.global.cas.b32 %r2, [%rd1], 0, 1;",
    "atom.acquire.gpu.global.exch.b32 %r2, [%rd1], %r1;",
    "atom.relaxed.sys.global.max.u64 %rd3, [%rd1], %rd2;",
    "atom.cta.global.inc.u32 %r2, [%rd1], 10;",
    "atom.global.dec.u32 %r2, [%rd1], 10;",
    "red.global.add.u32 [%rd1], 1;",
    "red.release.gpu.global.add.u64 [%rd1], %rd2;",
    "red.global.and.b32 [%rd1], %r1;",
    "fence.acq_rel.gpu;",
    "fence.sc.gpu;",
    "fence.acq_rel.cluster;",
    "fence.sc.sys;",
    "membar.gl;",
    "membar.cta;",
    "membar.sys;",
    "barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;",
    "bar.cta.sync 0;",
    "barrier.sync.aligned 0;",
};

static const struct {
  const char *instruction, *needle;
} refused[] = {
    {"ld.acquire.global.u32 %r1, [%rd1];", ".acquire needs a scope"},
    {"ld.acquire.gpu.global.cg.u32 %r1, [%rd1];", "no cache operator .cg here"},
    {"ld.release.gpu.global.u32 %r1, [%rd1];", "ld does not take .release"},
    {"st.acquire.gpu.global.u32 [%rd1], %r1;", "st does not take .acquire"},
    {"ld.global.gpu.u32 %r1, [%rd1];", "a scope (.gpu) needs"},
    {"st.global.nc.u32 [%rd1], %r1;", ".nc goes only with a weak ld.global"},
    {"ld.volatile.global.nc.u32 %r1, [%rd1];", ".nc goes only with a weak ld.global"},
    {"ld.global.cg.ca.u32 %r1, [%rd1];", "two cache qualifiers (.cg and .ca)"},
    {"ld.global.wb.u32 %r1, [%rd1];", "no cache operator .wb here"},
    {"ld.global.L3::huge.u32 %r1, [%rd1];", "unknown qualifier .L3::huge"},
    {"ld.global.L2::cache_hint.u32 %r1, [%rd1];", "ld takes 3 operands"},
    {"atom.global.u32 %r2, [%rd1], 1;", "atom needs an operation"},
    {"atom.global.add.v2.u32 %r2, [%rd1], 1;", "no vector or parameter atomics"},
    {"atom.global.max.f32 %f2, [%rd1], %f1;", "only .add.f32"},
    {"red.global.cas.b32 [%rd1], 1, 2;", "red has no .cas"},
    {"red.acquire.gpu.global.add.u32 [%rd1], 1;", "red does not take .acquire"},
    {"ld.global.add.u32 %r1, [%rd1];", "ld takes no operation"},
    {"ld.global.u32 %r1, %rd1;", "needs an address in brackets"},
    {"ld.global.v2.f32 %f1, [%rd1];", "the value must be 2 registers in braces"},
    {"ld.global %r1, [%rd1];", "ld needs a type as its last qualifier"},
    {"fence.gpu;", "fence needs .sc or .acq_rel and a scope"},
    {"membar.gpu;", "membar needs one of .cta, .gl, .sys"},
    {"max.s32 %r1, %r1, %r1;", "max.s32, which ptxas for sm_90 miscompiles"},
    {"barrier.cluster.arrive.acquire;", "barrier.cluster.arrive does not take .acquire"},
    {"barrier.cluster.sync;", "barrier.cluster.sync is not supported"},
    {"shfl.sync.down.b32 %r1, %r1, 1, 31, -1;", "only shfl.sync.bfly.b32"},
    {"@%p1 bar.sync 0;", "a guarded bar is not supported"},
    {"bar.sync 0, 32;", "only barrier 0 over the whole CTA"},
    {"bar.arrive 0;", "bar.arrive is not supported"},
    {"mapa.u64 %rd3, %rd1, 1;", "only mapa.shared::cluster.u32 and .u64"},
    {"ld.param.u64 %rd3, [%rd1];", "parameters are read with ld.param [name]"},
    {"ld.global.u64 %rd3, [p_buf];", "parameters are read with ld.param [name]"},
    {"ld.global.f32 %f1, [tj_smem];", "tj_smem needs a .shared access"},
    {"frobnicate.u32 %r1, %r1;", "unknown instruction frobnicate"},
};

START_TEST(qualifiers_accepted) {
  char *sm90 = with(qualifier_kernel, "TARGET", 90);
  char *ptx = replace(sm90, "INSTRUCTION", accepted[_i]), why[512];
  uint64_t buf[4] = {0};
  tj_arg args[1] = {ptr_arg(buf, sizeof buf)};
  ck_assert_msg(ptxsim_run(ptx, args, 1, 1, 1, why, sizeof why), "'%s': %s", accepted[_i], why);
  free(ptx);
  free(sm90);
}
END_TEST

START_TEST(qualifiers_refused) {
  char *sm90 = with(qualifier_kernel, "TARGET", 90);
  char *ptx = replace(sm90, "INSTRUCTION", refused[_i].instruction), why[512];
  uint64_t buf[4] = {0};
  tj_arg args[1] = {ptr_arg(buf, sizeof buf)};
  ck_assert_msg(!ptxsim_run(ptx, args, 1, 1, 1, why, sizeof why), "'%s' ran",
                refused[_i].instruction);
  ck_assert_msg(strstr(why, refused[_i].needle) && strstr(why, "ptx line 22"),
                "'%s': message '%s' lacks '%s' or the line", refused[_i].instruction, why,
                refused[_i].needle);
  free(ptx);
  free(sm90);
}
END_TEST

/* Cluster instructions, .cluster scopes and memory orders need their arch. */
START_TEST(qualifiers_need_their_target) {
  static const struct {
    const char *instruction;
    int target, needs;
  } cases[] = {{"fence.acq_rel.cluster;", 80, 90},
               {"ld.acquire.gpu.global.u32 %r1, [%rd1];", 60, 70},
               {"barrier.cluster.arrive;\n\tbarrier.cluster.wait;", 80, 90},
               {"st.shared::cluster.u32 [%r1], %r1;", 89, 90}};
  uint64_t buf[4] = {0};
  tj_arg args[1] = {ptr_arg(buf, sizeof buf)};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *old = with(qualifier_kernel, "TARGET", cases[i].target), want[64], why[512];
    char *ptx = replace(old, "INSTRUCTION", cases[i].instruction);
    snprintf(want, sizeof want, "needs sm_%d", cases[i].needs);
    ck_assert_msg(!ptxsim_run(ptx, args, 1, 1, 1, why, sizeof why), "'%s' ran at sm_%d",
                  cases[i].instruction, cases[i].target);
    ck_assert_msg(strstr(why, want), "'%s': %s", cases[i].instruction, why);
    free(ptx);
    free(old);
  }
}
END_TEST

/* ---- statistics ---------------------------------------------------------------------- */

/* 4 CTAs of 32 threads: y = x + x read a second time (.cs), one red per
 * thread into count; 13 instructions per thread. */
static const char two_passes[] =
    ONE_CTA_KERNEL(32, "\t.param .u64 p_y,\n\t.param .u64 p_x,\n\t.param .u64 p_count,\n",
                   "\tmov.u32 %r1, %tid.x;\n"
                   "\tmov.u32 %r2, %ctaid.x;\n"
                   "\tmad.lo.u32 %r3, %r2, 32, %r1;\n"
                   "\tmul.wide.u32 %rd1, %r3, 4;\n"
                   "\tld.param.u64 %rd2, [p_x];\n"
                   "\tadd.s64 %rd3, %rd2, %rd1;\n"
                   "\tld.global.f32 %f1, [%rd3];\n"
                   "\tld.global.cs.f32 %f2, [%rd3];\n"
                   "\tadd.f32 %f3, %f1, %f2;\n"
                   "\tld.param.u64 %rd4, [p_y];\n"
                   "\tadd.s64 %rd5, %rd4, %rd1;\n"
                   "\tst.global.f32 [%rd5], %f3;\n"
                   "\tld.param.u64 %rd6, [p_count];\n"
                   "\tred.global.add.u32 [%rd6], 1;\n"
                   "\tret;\n");

START_TEST(stats_count_bytes) {
  float x[128], y[128];
  uint32_t count = 0;
  for (int i = 0; i < 128; i++) x[i] = input(i);
  tj_arg args[4] = {ptr_arg(y, sizeof y),
                    ptr_arg(x, sizeof x),
                    ptr_arg(&count, sizeof count),
                    {TJ_ARG_INT, {.i = 7}, 0}};
  (void)args[3];
  char why[512];
  PtxsimStats st;
  PtxsimLaunch l = {4, 4, NULL, 0, 0, 0};
  ck_assert_msg(ptxsim_launch(two_passes, args, 3, &l, &st, why, sizeof why), "%s", why);
  for (int i = 0; i < 128; i++) ck_assert(y[i] == 2 * input(i));
  ck_assert_uint_eq(count, 128);
  ck_assert_uint_eq(st.bytes_read[1], 2 * sizeof x); /* read twice */
  ck_assert_uint_eq(st.bytes_written[1], 0);
  ck_assert_uint_eq(st.bytes_written[0], sizeof y);
  ck_assert_uint_eq(st.bytes_read[0], 0);
  ck_assert_uint_eq(st.bytes_read[2], 128 * 4);
  ck_assert_uint_eq(st.bytes_written[2], 128 * 4);
  ck_assert_uint_eq(st.workspace_read + st.workspace_written, 0);
  ck_assert_int_eq(st.steps, 128 * 15);
}
END_TEST

/* ---- cp.async ------------------------------------------------------------------------ */

/* 32 threads each copy 16 bytes of in[] into their slot of two regions of
 * shared memory, a commit group each; WAIT1 waits for the first, which they
 * read back and store to out[0..128), then WAIT2 for the second, stored to
 * out[128..256). */
static const char async_copies[] = ONE_CTA_KERNEL(
    32, "\t.param .u64 p_in,\n\t.param .u64 p_out,\n",
    "\t.shared .align 16 .b8 tj_smem[1024];\n"
    "\tmov.u32 %r1, %tid.x;\n"
    "\tld.param.u64 %rd1, [p_in];\n"
    "\tld.param.u64 %rd2, [p_out];\n"
    "\tmul.wide.u32 %rd3, %r1, 16;\n"
    "\tadd.s64 %rd4, %rd1, %rd3;\n"
    "\tadd.s64 %rd5, %rd2, %rd3;\n"
    "\tmov.u32 %r2, tj_smem;\n"
    "\tmad.lo.u32 %r3, %r1, 16, %r2;\n"
    "\tcp.async.cg.shared.global [%r3], [%rd4], 16;\n"
    "\tcp.async.commit_group;\n"
    "\tcp.async.cg.shared.global [%r3+512], [%rd4+512], 16;\n"
    "\tcp.async.commit_group;\n"
    "WAIT1"
    "\tld.shared.v4.b32 {%r4, %r5, %r6, %r7}, [%r3];\n"
    "\tst.global.v4.b32 [%rd5], {%r4, %r5, %r6, %r7};\n"
    "WAIT2"
    "\tld.shared.v4.b32 {%r4, %r5, %r6, %r7}, [%r3+512];\n"
    "\tst.global.v4.b32 [%rd5+512], {%r4, %r5, %r6, %r7};\n"
    "\tret;\n");

static char *async_kernel(const char *wait1, const char *wait2) {
  char *a = replace(async_copies, "WAIT1", wait1), *b = replace(a, "WAIT2", wait2);
  free(a);
  return b;
}

/* The copies land at the waits, in their groups' order; reading a slot
 * before its copy is waited for, or exiting with copies pending, fails. */
START_TEST(async_copies_land_at_their_waits) {
  uint32_t in[256], out[256];
  for (int i = 0; i < 256; i++) in[i] = 1000u + (uint32_t)i;
  tj_arg args[2] = {ptr_arg(in, sizeof in), ptr_arg(out, sizeof out)};
  PtxsimLaunch l = {1, 1, NULL, 0, 0, 0};
  char why[1024];
  PtxsimStats st;
  const char *waits[][2] = {{"\tcp.async.wait_group 1;\n", "\tcp.async.wait_group 0;\n"},
                            {"\tcp.async.wait_group 1;\n", "\tcp.async.wait_all;\n"},
                            {"\tcp.async.wait_all;\n", ""}};
  for (int k = 0; k < 3; k++) {
    char *ptx = async_kernel(waits[k][0], waits[k][1]);
    memset(out, 0, sizeof out);
    ck_assert_msg(ptxsim_launch(ptx, args, 2, &l, &st, why, sizeof why), "case %d: %s", k, why);
    for (int i = 0; i < 256; i++) ck_assert_uint_eq(out[i], in[i]);
    free(ptx);
  }
  struct {
    const char *wait1, *wait2, *needle;
  } bad[] = {
      {"", "\tcp.async.wait_all;\n", "overlaps the thread's cp.async of line"},
      {"\tcp.async.wait_group 2;\n", "\tcp.async.wait_all;\n", "not yet waited for"},
      {"\tcp.async.wait_group 1;\n", "", "overlaps the thread's cp.async"},
  };
  for (int k = 0; k < 3; k++) {
    char *ptx = async_kernel(bad[k].wait1, bad[k].wait2);
    const char *needles[] = {bad[k].needle};
    expect_failure(ptx, args, 2, &l, needles, 1);
    free(ptx);
  }
  /* A thread that exits with a copy pending. */
  char *a = async_kernel("\tcp.async.wait_group 1;\n", "\tret;\n");
  const char *needles[] = {"exits with 1 cp.async copies pending"};
  expect_failure(a, args, 2, &l, needles, 1);
  free(a);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("ptxsim_sync");
  TCase *c = tcase_create("clusters");
  tcase_add_loop_test(c, cluster_push_sums, 0,
                      (int)(sizeof cluster_sizes / sizeof cluster_sizes[0]));
  tcase_add_loop_test(c, cluster_pull_sums, 0,
                      (int)(sizeof cluster_sizes / sizeof cluster_sizes[0]));
  tcase_add_loop_test(c, cluster_errors_are_reported, 0,
                      (int)(sizeof cluster_errors / sizeof cluster_errors[0]));
  suite_add_tcase(s, c);
  TCase *g = tcase_create("grid");
  tcase_add_test(g, grid_barrier_twice);
  tcase_add_test(g, grid_barrier_skipped_is_a_deadlock);
  tcase_add_test(g, grid_barrier_nc_reads_of_partials);
  tcase_add_test(g, grid_barrier_other_polls);
  tcase_add_test(g, workspace_must_match_the_kernel);
  tcase_add_test(g, workspace_bounds);
  suite_add_tcase(s, g);
  TCase *i = tcase_create("instructions");
  tcase_add_loop_test(i, cta_errors_are_reported, 0,
                      (int)(sizeof cta_errors / sizeof cta_errors[0]));
  tcase_add_test(i, atomics_in_every_spelling);
  tcase_add_test(i, integer_and_float_instructions);
  tcase_add_loop_test(i, qualifiers_accepted, 0, (int)(sizeof accepted / sizeof accepted[0]));
  tcase_add_loop_test(i, qualifiers_refused, 0, (int)(sizeof refused / sizeof refused[0]));
  tcase_add_test(i, qualifiers_need_their_target);
  tcase_add_test(i, stats_count_bytes);
  tcase_add_test(i, async_copies_land_at_their_waits);
  suite_add_tcase(s, i);
  return s;
}

int main(void) { return test_run_suite(suite()); }
