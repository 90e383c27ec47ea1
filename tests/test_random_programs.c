/*
 * test_random_programs.c — hundreds of random programs (support_randprog.c,
 * fixed seeds) through the PTX backend: each must generate byte-identical
 * PTX twice, and every PTX must assemble with ptxas (batched, two processes
 * at a time). The arch rotates over sm_75, sm_80 and sm_90.
 *
 * TJ_RANDOM_PROGRAMS=N changes how many (default 300); TJ_RANDOM_SEED=S the
 * first seed. Exits 77 (skipped) only when no ptxas is found.
 */
#include "support_ptx.h"
#include "support_randprog.h"

#include "support.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char ptxas[1024];
static const int archs[] = {75, 80, 90};

static long env_or(const char *name, long fallback) {
  const char *v = getenv(name);
  return v && *v ? strtol(v, NULL, 0) : fallback;
}

/* The PTX of one random program for arch, or NULL (message in why). */
static char *generate(const RandProg *rp, int arch, char *why, size_t size) {
  tj_spec *s = NULL;
  char *ptx = NULL;
  tj_codegen_options o = {arch, 0, 0};
  if (tj_specialize(rp->program, &rp->options, &s) != TJ_OK)
    snprintf(why, size, "specialize: %s", tj_program_error(rp->program));
  else if (tj_emit_ptx(s, &o, &ptx, NULL) != TJ_OK)
    snprintf(why, size, "emit: %s", tj_spec_error(s));
  tj_spec_destroy(s);
  return ptx;
}

START_TEST(random_programs_assemble) {
  int count = (int)env_or("TJ_RANDOM_PROGRAMS", 300);
  uint64_t first = (uint64_t)env_or("TJ_RANDOM_SEED", 20240601);
  PtxBatch *batches[3];
  for (int a = 0; a < 3; a++) batches[a] = ptx_batch_new(ptxas, archs[a], 16);
  int *index = calloc((size_t)count, sizeof *index);
  char(*summary)[160] = calloc((size_t)count, sizeof *summary);
  for (int i = 0; i < count; i++) {
    RandProg rp;
    char why[1200] = "";
    ck_assert_msg(randprog_make(first + (uint64_t)i, &rp, why, sizeof why), "seed %llu: %s",
                  (unsigned long long)(first + (uint64_t)i), why);
    char *a = generate(&rp, archs[i % 3], why, sizeof why),
         *b = a ? generate(&rp, archs[i % 3], why, sizeof why) : NULL;
    ck_assert_msg(a && b, "%s: %s", rp.summary, why);
    ck_assert_msg(strcmp(a, b) == 0, "%s: two runs gave different PTX", rp.summary);
    index[i] = ptx_batch_add(batches[i % 3], a);
    snprintf(summary[i], sizeof summary[i], "%s", rp.summary);
    tj_free(a);
    tj_free(b);
    randprog_free(&rp);
  }
  for (int a = 0; a < 3; a++) ptx_batch_run(batches[a]);
  for (int i = 0; i < count; i++) {
    const PtxBatch *b = batches[i % 3];
    ck_assert_msg(ptx_batch_report(b, index[i])->assembled, "%s (sm_%d) does not assemble:\n%s",
                  summary[i], archs[i % 3], ptx_batch_first_error(b));
  }
  printf("%d random programs assembled\n", count);
  for (int a = 0; a < 3; a++) ptx_batch_free(batches[a]);
  free(index);
  free(summary);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("random_programs");
  TCase *t = tcase_create("ptxas");
  tcase_set_timeout(t, 900);
  tcase_add_test(t, random_programs_assemble);
  suite_add_tcase(s, t);
  return s;
}

int main(void) { return ptxas_suite_main(suite(), ptxas, sizeof ptxas); }
