/*
 * test_ptx_golden.c — softmax PTX compared byte for byte with the listings
 * in tests/golden/. A difference fails with the first differing line.
 *
 * After an intended change to the code generator, regenerate the files with
 *
 *   TJ_BLESS=1 ./build/tests/test_ptx_golden
 *
 * and review the diff before committing it (tests/README.md).
 */
#include "support_ptx.h"

#include "support.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Golden {
  const char *file;
  SoftmaxConfig cfg;
  SoftmaxSpread spread; /* {0, 0}: as planned */
  int multiple;         /* DIV; 0: none */
} Golden;

/* Three with the plan's 512-thread CTAs: a row over a cluster of 8 CTAs
 * (distributed shared memory), over 128 CTAs of the grid (global memory, a
 * fused max and sum), and streamed in pieces over 128 CTAs (phases, a
 * reverse second pass). Then rows at any phase (codegen/phase.c), and two
 * staged rows as planned (STAGE, codegen/stream.c: pieces kept in .extern
 * shared memory), over a cluster of 2 and over 64 CTAs of the grid; and a
 * row wider than the grid's shared memory, its stash capped (STASH: the
 * rest read again, with evict-first hints). Last, the staged split with
 * DIV, as tj_softmax specializes it: its last phase folds the next row's
 * pieces (codegen/stream.c, PIPE). */
static const Golden goldens[] = {
    {"softmax_f32_n1000_w4_sm90.ptx", {TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 1000, 0, 4, 16, 90, 0, 0}, {0, 0}, 0},
    {"softmax_f32_n32_sm90.ptx", {TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 32, 0, 0, 16, 90, 0, 0}, {0, 0}, 0},
    {"softmax_f32_n4096_w8_sm90.ptx", {TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 4096, 0, 8, 16, 90, 0, 0}, {0, 0}, 0},
    {"softmax_f16_n1024_sm90.ptx", {TJ_SOFTMAX_SINGLE, TJ_DTYPE_F16, 1024, 0, 0, 16, 90, 0, 0}, {0, 0}, 0},
    {"softmax_online_f32_n100000_sm90.ptx",
     {TJ_SOFTMAX_ONLINE, TJ_DTYPE_F32, 100000, 0, 0, 16, 90, 0, 0}, {0, 0}, 0},
    {"softmax_bf16_n256_sm75.ptx", {TJ_SOFTMAX_SINGLE, TJ_DTYPE_BF16, 256, 0, 0, 16, 75, 0, 0}, {0, 0}, 0},
    {"softmax_f32_n131072_cluster8_sm90.ptx",
     {TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 131072, 0, 0, 16, 90, 0, 0}, {8, 1}, 0},
    {"softmax_bf16_n1000000_split128_sm80.ptx",
     {TJ_SOFTMAX_SINGLE, TJ_DTYPE_BF16, 1000000, 0, 0, 16, 80, 0, 0}, {1, 128}, 0},
    {"softmax_f32_n10000000_split128_streamed_sm90.ptx",
     {TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 10000000, 0, 0, 16, 90, 0, 0}, {1, 128}, 0},
    {"softmax_bf16_n1023_phased_sm90.ptx",
     {TJ_SOFTMAX_SINGLE, TJ_DTYPE_BF16, 1023, 0, 0, 2, 90, 0, 1}, {0, 0}, 0},
    {"softmax_bf16_n65536_staged_cluster2_sm90.ptx",
     {TJ_SOFTMAX_SINGLE, TJ_DTYPE_BF16, 65536, 0, 0, 16, 90, 0, 0}, {0, 0}, 0},
    {"softmax_f32_n1048576_staged_split64_sm90.ptx",
     {TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 1048576, 0, 0, 16, 90, 0, 0}, {0, 0}, 0},
    {"softmax_f32_n16777216_stash_split256_sm90.ptx",
     {TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 16777216, 0, 0, 16, 90, 0, 0}, {0, 0}, 0},
    {"softmax_f32_n1048576_staged_split64_div4_sm90.ptx",
     {TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 1048576, 0, 0, 16, 90, 0, 0}, {0, 0}, 4},
};

static char *read_all(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = size >= 0 ? malloc((size_t)size + 1) : NULL;
  if (text) text[fread(text, 1, (size_t)size, f)] = '\0';
  fclose(f);
  return text;
}

/* "line 12: got '...', want '...'" for the first differing line. */
static void first_difference(const char *got, const char *want, char *out, size_t size) {
  int line = 1;
  while (*got && *got == *want) {
    if (*got == '\n') line++;
    got++, want++;
  }
  while (line > 1 && got[-1] != '\n') got--, want--;
  snprintf(out, size, "line %d: got '%.*s', want '%.*s'", line, (int)strcspn(got, "\n"), got,
           (int)strcspn(want, "\n"), want);
}

START_TEST(matches_golden) {
  const Golden *g = &goldens[_i];
  char path[1024], why[1200] = "";
  snprintf(path, sizeof path, "%s/tests/golden/%s", TJ_SOURCE_DIR, g->file);
  char *ptx = softmax_ptx_div(&g->cfg, g->spread, g->multiple, NULL, NULL, why, sizeof why);
  ck_assert_msg(ptx != NULL, "%s: %s", g->file, why);
  const char *bless = getenv("TJ_BLESS");
  if (bless && *bless && strcmp(bless, "0") != 0) {
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f && fputs(ptx, f) >= 0 && fclose(f) == 0, "cannot write %s", path);
    fprintf(stderr, "blessed %s\n", path);
  } else {
    char *want = read_all(path);
    ck_assert_msg(want != NULL, "%s is missing: run TJ_BLESS=1 %s", path, "test_ptx_golden");
    char diff[1024] = "";
    if (strcmp(ptx, want) != 0) first_difference(ptx, want, diff, sizeof diff);
    ck_assert_msg(strcmp(ptx, want) == 0, "%s differs: %s (TJ_BLESS=1 regenerates it)", g->file,
                  diff);
    free(want);
  }
  tj_free(ptx);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("ptx_golden");
  TCase *t = tcase_create("golden");
  tcase_add_loop_test(t, matches_golden, 0, (int)(sizeof goldens / sizeof goldens[0]));
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  return test_run_suite(suite());
}
