/*
 * test_ptx_structure.c — the shape of the PTX the backend writes, checked
 * as instruction counts and sequences rather than whole listings (those are
 * the golden files' job).
 *
 * For softmax at N in {1, 8, 32, 100, 1000, 4096} and warps in {1, 2, 4, 8}:
 * the butterfly's shfl.sync.bfly count and offsets follow the lane group the
 * layout rules give (layout.c); aligned rows load and store predicated
 * 16-byte vectors, unaligned ones single elements; one warp (and any row
 * that stays inside a warp) uses no shared memory and no barrier; rows of up
 * to 128 elements share a CTA in lane groups. Then: f16/bf16 conversions per
 * arch, exp and division sequences, the grid-stride loop, the online
 * template's loops, kernel info, errors, determinism and annotation; and
 * operand names, immediates at their extremes.
 */
#include "codegen/codegen.h"
#include "support_ptx.h"

#include "support.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int64_t widths[] = {1, 8, 32, 100, 1000, 4096};
static const int warp_counts[] = {1, 2, 4, 8};

static char *make(const SoftmaxConfig *cfg, tj_kernel_info *info) {
  char why[TJ_ERROR_MAX + 64] = "";
  tj_status st;
  char *ptx = softmax_ptx(cfg, info, &st, why, sizeof why);
  ck_assert_msg(ptx != NULL, "n=%lld warps=%d: %s", (long long)cfg->n, cfg->warps, why);
  return ptx;
}

/* The layout rules of geometry.c, restated for a power-of-two BLOCK:
 * threads per row for f32 softmax; a lane inside a warp takes two 16-byte
 * vectors, or in vectors narrower than 16 bytes (vec < 4) 8 elements. */
static int expected_group(int64_t block, int warps, int vec) {
  int64_t vectors = block / vec, threads = 32 * warps;
  if (block > 1024) return (int)(vectors < threads ? vectors : threads);
  int64_t g = vectors / (vec < 4 ? 8 / vec : 2);
  return (int)(g < 1 ? 1 : g < 32 ? g : 32);
}

static int vec_of(int64_t block, int align) {
  int vec = align >= 16 ? 4 : 1;
  return block < vec ? (int)block : vec;
}

static int log2i(int v) {
  int n = 0;
  while (v > 1) v >>= 1, n++;
  return n;
}

START_TEST(butterfly_follows_the_lane_group) {
  for (size_t i = 0; i < TJ_COUNTOF(widths); i++)
    for (size_t j = 0; j < TJ_COUNTOF(warp_counts); j++) {
      int64_t n = widths[i], block = tj_next_pow2(n);
      int w = warp_counts[j], g = expected_group(block, w, vec_of(block, 16));
      tj_kernel_info info;
      char *ptx =
          make(&(SoftmaxConfig){TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, n, 0, w, 16, 90, 0, 0}, &info);
      int offsets[64], count = ptx_shfl_offsets(ptx, offsets, 64), levels = log2i(g < 32 ? g : 32);
      ck_assert_msg(count == 2 * levels, "n=%lld w=%d: %d shfl, want %d", (long long)n, w, count,
                    2 * levels);
      for (int k = 0; k < count; k++)
        ck_assert_msg(offsets[k] == (g < 32 ? g : 32) >> (1 + k % levels),
                      "n=%lld w=%d: shfl %d has offset %d", (long long)n, w, k, offsets[k]);
      ck_assert_int_eq(info.shape.threads, 32 * w);
      ck_assert_int_eq(info.shape.programs_per_cta, 32 * w / g);
      tj_free(ptx);
    }
}
END_TEST

START_TEST(aligned_rows_move_predicated_vectors) {
  for (size_t i = 1; i < TJ_COUNTOF(widths); i++)
    for (size_t j = 0; j < TJ_COUNTOF(warp_counts); j++) {
      int64_t n = widths[i], block = tj_next_pow2(n);
      int w = warp_counts[j], g = expected_group(block, w, 4);
      int reps = (int)(block / (4 * g));
      char *ptx =
          make(&(SoftmaxConfig){TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, n, 0, w, 16, 90, 0, 0}, NULL);
      ck_assert_int_eq(ptx_count(ptx, "ld.global.v4.f32"), reps);
      ck_assert_int_eq(ptx_count(ptx, "st.global.v4.f32"), reps);
      /* Every vector access is predicated; -inf is moved in first. */
      int first = ptx_find_line(ptx, "ld.global.v4.f32", 0);
      ck_assert_int_eq(ptx_count(ptx, "@%p") >= 2 * reps, 1);
      ck_assert_int_lt(ptx_find_line(ptx, "mov.f32", 0), first);
      ck_assert_int_ge(ptx_count(ptx, "0fFF800000;"), 4 * reps);
      /* The partial vector at the row's end: 3 single-element accesses each. */
      ck_assert_int_eq(ptx_count(ptx, "ld.global.f32"), 3 * reps);
      ck_assert_int_eq(ptx_count(ptx, "st.global.f32"), 3 * reps);
      /* All vector loads come before any use of their values. */
      ck_assert_int_lt(ptx_find_line(ptx, "ld.global.v4.f32", first + reps - 1),
                       ptx_find_line(ptx, "max.f32", 0));
      tj_free(ptx);
    }
}
END_TEST

START_TEST(unaligned_rows_move_single_elements) {
  for (size_t i = 0; i < TJ_COUNTOF(widths); i++)
    for (size_t j = 0; j < TJ_COUNTOF(warp_counts); j++) {
      int64_t n = widths[i], block = tj_next_pow2(n);
      int w = warp_counts[j], g = expected_group(block, w, 1);
      char *ptx =
          make(&(SoftmaxConfig){TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, n, 0, w, 4, 90, 0, 0}, NULL);
      ck_assert_int_eq(ptx_count(ptx, "ld.global.v"), 0);
      ck_assert_int_eq(ptx_count(ptx, "st.global.v"), 0);
      ck_assert_int_eq(ptx_count(ptx, "ld.global.f32"), (int)(block / g));
      ck_assert_int_eq(ptx_count(ptx, "@%p") >= (int)(block / g), 1);
      tj_free(ptx);
    }
}
END_TEST

START_TEST(shared_memory_only_across_warps) {
  for (size_t i = 0; i < TJ_COUNTOF(widths); i++)
    for (size_t j = 0; j < TJ_COUNTOF(warp_counts); j++) {
      int64_t n = widths[i], block = tj_next_pow2(n);
      int w = warp_counts[j], g = expected_group(block, w, vec_of(block, 16));
      tj_kernel_info info;
      char *ptx =
          make(&(SoftmaxConfig){TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, n, 0, w, 16, 90, 0, 0}, &info);
      bool across = g > 32;
      ck_assert_msg((ptx_count(ptx, ".shared") > 0) == across, "n=%lld w=%d", (long long)n, w);
      ck_assert_int_eq(ptx_count(ptx, "bar.sync") > 0, across);
      ck_assert_int_eq(info.shape.shared_bytes > 0, across);
      if (w == 1) ck_assert_int_eq(ptx_count(ptx, "bar.sync") + ptx_count(ptx, ".shared"), 0);
      if (across) {
        /* Two reductions, one barrier each: max and sum alternate regions. */
        ck_assert_int_eq(ptx_count(ptx, "bar.sync 0;"), 2);
        ck_assert_int_eq(ptx_count(ptx, "st.shared.f32"), 2);
      }
      tj_free(ptx);
    }
}
END_TEST

START_TEST(small_rows_share_a_cta_in_lane_groups) {
  for (size_t i = 0; i < TJ_COUNTOF(widths) && widths[i] <= 128; i++)
    for (size_t j = 0; j < TJ_COUNTOF(warp_counts); j++) {
      int64_t n = widths[i], block = tj_next_pow2(n);
      int w = warp_counts[j], vec = vec_of(block, 16), g = expected_group(block, w, vec);
      tj_kernel_info info;
      char *ptx =
          make(&(SoftmaxConfig){TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, n, 0, w, 16, 90, 0, 0}, &info);
      ck_assert_int_eq(info.shape.programs_per_cta, 32 * w / g);
      if (info.shape.programs_per_cta > 1) {
        char lane[64];
        snprintf(lane, sizeof lane, "and.b32 %%r2, %%r1, %d;", g - 1);
        ck_assert_msg(ptx_count(ptx, lane) == 1, "n=%lld w=%d: no lane index", (long long)n, w);
        ck_assert_int_eq(ptx_count(ptx, "setp.lt.u64"), 2);  /* instance valid, loop */
        ck_assert_int_eq(ptx_count(ptx, "mul.wide.u32"), 2); /* CTA base and stride */
      }
      tj_free(ptx);
    }
}
END_TEST

/* Rows inside a warp whose BLOCK the plan fits, no power of two: the
 * lanes the runtime fitted it to (rt_softmax_fit_block) are the lanes the
 * layout gives it (geometry.c), G lanes of R 16-byte vectors. */
START_TEST(fitted_rows_keep_their_lanes) {
  static const struct {
    tj_dtype dtype;
    int64_t n, block;
    int lanes;
  } rows[] = {{TJ_DTYPE_F16, 48, 48, 2},   {TJ_DTYPE_F16, 80, 96, 4},    {TJ_DTYPE_F16, 160, 192, 8},
              {TJ_DTYPE_F16, 200, 256, 16}, {TJ_DTYPE_F16, 576, 768, 32}, {TJ_DTYPE_F32, 80, 96, 8},
              {TJ_DTYPE_BF16, 577, 768, 32}};
  for (size_t i = 0; i < TJ_COUNTOF(rows); i++) {
    tj_kernel_info info;
    char *ptx = make(&(SoftmaxConfig){TJ_SOFTMAX_SINGLE, rows[i].dtype, rows[i].n, 0, 0, 16, 90, 0, 0},
                     &info);
    char header[64];
    snprintf(header, sizeof header, "BLOCK=%lld ", (long long)rows[i].block);
    ck_assert_msg(ptx_count(ptx, header) == 1, "n=%lld: no %s", (long long)rows[i].n, header);
    ck_assert_int_eq(info.shape.programs_per_cta, info.shape.threads / rows[i].lanes);
    int vec = 16 / (int)dtype_bytes(rows[i].dtype);
    int64_t reps = rows[i].block / (vec * rows[i].lanes);
    char v[32];
    snprintf(v, sizeof v, "VEC %d x %lld", vec, (long long)reps);
    ck_assert_msg(ptx_count(ptx, v) == 1, "n=%lld: no %s", (long long)rows[i].n, v);
    ck_assert_msg(reps >= 2 && reps <= 4, "n=%lld: %lld vectors a lane", (long long)rows[i].n,
                  (long long)reps);
    tj_free(ptx);
  }
}
END_TEST

START_TEST(f16_moves_halves_in_words) {
  char *ptx =
      make(&(SoftmaxConfig){TJ_SOFTMAX_SINGLE, TJ_DTYPE_F16, 1024, 0, 0, 16, 90, 0, 0}, NULL);
  ck_assert_int_eq(ptx_count(ptx, "ld.global.v4.b32"), 4);
  ck_assert_int_eq(ptx_count(ptx, "st.global.v4.b32"), 4);
  ck_assert_int_eq(ptx_count(ptx, "mov.b32 {%h"), 16);
  ck_assert_int_eq(ptx_count(ptx, "cvt.f32.f16"), 32);
  ck_assert_int_eq(ptx_count(ptx, "cvt.rn.f16.f32"), 32);
  ck_assert_int_eq(ptx_count(ptx, ", -67044352;"), 16); /* other: -inf twice, 0xFC00FC00 */
  ck_assert_int_eq(ptx_count(ptx, "ld.global.b16"), 7 * 4);
  tj_free(ptx);
}
END_TEST

START_TEST(bf16_conversions_follow_the_arch) {
  static const int archs[] = {75, 80, 90};
  for (int i = 0; i < 3; i++) {
    tj_kernel_info info;
    char *ptx = make(
        &(SoftmaxConfig){TJ_SOFTMAX_SINGLE, TJ_DTYPE_BF16, 256, 0, 0, 16, archs[i], 0, 0}, &info);
    ck_assert_int_eq(ptx_count(ptx, "cvt.rn.bf16.f32") > 0, archs[i] >= 80);
    /* bf16 -> f32: from sm_90 each element packed with a zero half (one
     * PRMT, not cvt.f32.bf16's PRMT and shift), before it a shift */
    ck_assert_int_eq(ptx_count(ptx, "cvt.f32.bf16"), 0);
    ck_assert_int_eq(ptx_count(ptx, "mov.b32 %f"), archs[i] >= 90 ? 16 : 0);
    ck_assert_int_eq(ptx_count(ptx, "shl.b32 %f"), archs[i] < 90 ? 16 : 0);
    ck_assert_int_eq(ptx_count(ptx, "setp.nan.f32") > 0, archs[i] < 80);
    ck_assert_int_eq(info.ptx_version, archs[i] == 75 ? 63 : archs[i] == 80 ? 70 : 78);
    tj_free(ptx);
  }
}
END_TEST

START_TEST(exp_is_subtract_multiply_ex2) {
  char *ptx =
      make(&(SoftmaxConfig){TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 1000, 0, 0, 16, 90, 0, 0}, NULL);
  int sub = ptx_find_line(ptx, "sub.rn.f32", 0), mul = ptx_find_line(ptx, "0f3FB8AA3B", 0);
  int ex2 = ptx_find_line(ptx, "ex2.approx.ftz.f32", 0);
  ck_assert_int_ge(sub, 0);
  ck_assert_int_lt(sub, mul);
  ck_assert_int_lt(mul, ex2);
  ck_assert_int_eq(ptx_count(ptx, "ex2.approx.ftz.f32"), 32);
  ck_assert_int_eq(ptx_count(ptx, "0f3FB8AA3B"), 32);
  /* 1 / sum once per row (cg_reciprocal: no div.rn or rcp.rn, whose slow
   * path ptxas compiles as a subroutine), then one multiply per element. */
  ck_assert_int_eq(ptx_count(ptx, "div.rn.f32"), 0);
  ck_assert_int_eq(ptx_count(ptx, "rcp.rn.f32"), 0);
  ck_assert_int_eq(ptx_count(ptx, "rcp.approx.ftz.f64"), 1);
  ck_assert_int_eq(ptx_count(ptx, "cvt.rn.f32.f64"), 1);
  ck_assert_int_eq(ptx_count(ptx, "mul.rn.f32"), 32);
  tj_free(ptx);
}
END_TEST

START_TEST(grid_stride_loop_over_instances) {
  char *ptx =
      make(&(SoftmaxConfig){TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 4096, 0, 8, 16, 90, 0, 0}, NULL);
  ck_assert_int_eq(ptx_count(ptx, ".param .u64 tj_programs"), 1);
  ck_assert_int_eq(ptx_count(ptx, "$Linst:"), 1);
  ck_assert_int_eq(ptx_count(ptx, "bra.uni $Linst;"), 1);
  ck_assert_int_eq(ptx_count(ptx, "%nctaid.x"), 1);
  ck_assert_int_eq(ptx_count(ptx, ".reqntid 256, 1, 1"), 1);
  /* Row addresses are 64-bit: the program's i64 strides, widened offsets. */
  ck_assert_int_ge(ptx_count(ptx, "mul.lo.s64"), 2);
  ck_assert_int_ge(ptx_count(ptx, "mul.wide.s32"), 2);
  tj_free(ptx);
}
END_TEST

START_TEST(online_template_loops_over_chunks) {
  tj_kernel_info info;
  char *ptx =
      make(&(SoftmaxConfig){TJ_SOFTMAX_ONLINE, TJ_DTYPE_F32, 100000, 0, 0, 16, 90, 0, 0}, &info);
  ck_assert_int_eq(ptx_count(ptx, "$Lloop_"), 4); /* two labels, two back edges */
  ck_assert_int_eq(ptx_count(ptx, "bra.uni $Lend_"), 2);
  ck_assert_int_eq(ptx_count(ptx, "ld.global.v4.f32"), 8); /* 4 per chunk, in each pass */
  ck_assert_int_eq(ptx_count(ptx, "bar.sync 0;"), 2);      /* max and sum in pass 1 */
  ck_assert_int_eq(info.shape.threads, 256);
  int loop = ptx_find_line(ptx, "$Lloop_16:", 0), end = ptx_find_line(ptx, "$Lend_16:", 0);
  ck_assert_int_lt(loop, ptx_find_line(ptx, "shfl.sync.bfly", 0));
  ck_assert_int_gt(end, ptx_find_line(ptx, "bar.sync", 0));
  tj_free(ptx);
}
END_TEST

START_TEST(kernel_info_and_versions) {
  tj_kernel_info info;
  char *ptx =
      make(&(SoftmaxConfig){TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 1000, 0, 4, 16, 75, 0, 0}, &info);
  ck_assert_str_eq(info.entry, "tj_softmax");
  ck_assert_int_eq(info.param_count, 5);
  ck_assert_int_eq(info.arch, 75);
  ck_assert_int_eq(info.ptx_version, 63);
  ck_assert_int_eq(ptx_count(ptx, ".version 6.3"), 1);
  ck_assert_int_eq(ptx_count(ptx, ".target sm_75"), 1);
  ck_assert_int_eq(ptx_count(ptx, ".address_size 64"), 1);
  ck_assert_int_eq(info.shape.all_ctas, 1); /* no loop: one CTA per programs_per_cta rows */
  tj_free(ptx);
  ptx = make(&(SoftmaxConfig){TJ_SOFTMAX_ONLINE, TJ_DTYPE_F32, 100000, 0, 0, 16, 90, 0, 0}, &info);
  ck_assert_int_eq(info.shape.all_ctas, 0); /* loops: a persistent grid */
  tj_free(ptx);
  ck_assert_int_eq(cg_ptx_version(120, 0), 87);
  ck_assert_int_eq(cg_ptx_version(100, 0), 86);
  ck_assert_ptr_null(cg_arch_find(70));
}
END_TEST

static tj_spec *softmax_spec(int64_t n, int warps) {
  tj_program *p;
  tj_spec *s;
  tj_spec_options o;
  ck_assert_int_eq(tj_softmax_program(TJ_SOFTMAX_SINGLE, n, &p), TJ_OK);
  ck_assert_int_eq(softmax_spec_options(TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 65536, n, 0, 0, &o),
                   TJ_OK);
  o.num_warps = warps;
  ck_assert_int_eq(tj_specialize(p, &o, &s), TJ_OK);
  tj_program_destroy(p);
  return s;
}

START_TEST(errors_name_what_is_wrong) {
  tj_spec *s = softmax_spec(1000, 4);
  char *ptx = (char *)1;
  tj_codegen_options o = {70, 0, 0};
  ck_assert_int_eq(tj_emit_ptx(s, &o, &ptx, NULL), TJ_ERR_UNSUPPORTED);
  ck_assert_ptr_null(ptx);
  ck_assert_ptr_nonnull(strstr(tj_spec_error(s), "sm_70"));
  o = (tj_codegen_options){90, 60, 0};
  ck_assert_int_eq(tj_emit_ptx(s, &o, &ptx, NULL), TJ_ERR_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(tj_spec_error(s), "ISA"));
  o = (tj_codegen_options){90, 88, 0};
  ck_assert_int_eq(tj_emit_ptx(s, &o, &ptx, NULL), TJ_OK);
  ck_assert_int_eq(ptx_count(ptx, ".version 8.8"), 1);
  tj_free(ptx);
  ck_assert_int_eq(tj_emit_ptx(s, NULL, NULL, NULL), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_emit_ptx(NULL, NULL, &ptx, NULL), TJ_ERR_INVALID_ARGUMENT);
  tj_spec_destroy(s);
  /* A tile wider than the registers is streamed (stream.c), unless the
   * program has loops, as the online template does. */
  s = softmax_spec(32768, 1);
  ck_assert_int_eq(tj_emit_ptx(s, NULL, &ptx, NULL), TJ_OK);
  ck_assert_int_eq(ptx_count(ptx, "$Lpiece_"), 4); /* two loops: a label and a branch each */
  tj_free(ptx);
  tj_spec_destroy(s);
  tj_program *p;
  tj_spec_options so;
  ck_assert_int_eq(tj_softmax_program(TJ_SOFTMAX_ONLINE, 32768, &p), TJ_OK);
  ck_assert_int_eq(softmax_spec_options(TJ_SOFTMAX_ONLINE, TJ_DTYPE_F32, 1, 32768, 0, 1, &so),
                   TJ_OK);
  so.block = 32768;
  ck_assert_int_eq(tj_specialize(p, &so, &s), TJ_OK);
  ck_assert_int_eq(tj_emit_ptx(s, NULL, &ptx, NULL), TJ_ERR_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(tj_spec_error(s), "per thread"));
  ck_assert_ptr_nonnull(strstr(tj_spec_error(s), "cannot be streamed"));
  tj_spec_destroy(s);
  tj_program_destroy(p);
}
END_TEST

START_TEST(deterministic_and_annotated) {
  SoftmaxConfig c = {TJ_SOFTMAX_ONLINE, TJ_DTYPE_BF16, 5000, 0, 0, 16, 80, 0, 0};
  char *a = make(&c, NULL), *b = make(&c, NULL);
  ck_assert_str_eq(a, b);
  c.annotate = 1;
  char *n = make(&c, NULL);
  ck_assert_int_gt(ptx_count(n, "\t// %"), 20);
  ck_assert_int_eq(ptx_count(n, "\t// %21 : tile<bf16,BLOCK> = load %8, %19, %20, %12"), 1);
  ck_assert_int_eq(ptx_count(a, "\t// %"), 0);
  /* Annotation adds comments only. */
  ck_assert_int_eq(ptx_count(n, "\t") - ptx_count(n, "\t// "), ptx_count(a, "\t"));
  tj_free(a);
  tj_free(b);
  tj_free(n);
}
END_TEST

START_TEST(default_warps_table) {
  static const int64_t blocks[] = {1, 64, 1024, 2048, 4096, 8192, 16384, 32768};
  static const int want[] = {4, 4, 4, 4, 8, 16, 16, 32};
  for (size_t i = 0; i < TJ_COUNTOF(blocks); i++)
    for (int d = 0; d < TJ_DTYPE_COUNT; d++)
      ck_assert_int_eq(tj_default_num_warps(blocks[i], (tj_dtype)d), want[i]);
}
END_TEST

/* A tile divided by a scalar: one reciprocal, a multiply per element. */
START_TEST(tile_by_scalar_division_is_one_reciprocal) {
  static const char text[] = "kernel d\n%0 : ptr<f32> = param x\n%1 : f32 = param s\n"
                             "%2 : tile<i32,BLOCK> = arange\n%3 : tile<f32,BLOCK> = load %0, %2\n"
                             "%4 : tile<f32,BLOCK> = div %3, %1\nstore %0, %2, %4\n";
  tj_program *p;
  ck_assert_int_eq(tj_program_parse(text, strlen(text), &p), TJ_OK);
  tj_spec_options o = {.n = 512, .dtype = TJ_DTYPE_F32, .align = 16};
  tj_spec *sp;
  ck_assert_int_eq(tj_specialize(p, &o, &sp), TJ_OK);
  char *ptx;
  ck_assert_int_eq(tj_emit_ptx(sp, NULL, &ptx, NULL), TJ_OK);
  ck_assert_int_eq(ptx_count(ptx, "rcp.approx.ftz.f64"), 1);
  ck_assert_int_eq(ptx_count(ptx, "div.rn.f32"), 0);
  ck_assert_int_eq(ptx_count(ptx, "mul.rn.f32"), 16);
  ck_assert_int_eq(ptx_count(ptx, "ld.global.v4.f32"), 4); /* unmasked: no partial accesses */
  ck_assert_int_eq(ptx_count(ptx, "ld.global.f32"), 0);
  tj_free(ptx);
  tj_spec_destroy(sp);
  tj_program_destroy(p);
  /* ... also where the quotient feeds only a reduction while x lives on
   * (which folds other ops into the reduction, analyze.c): not a div a slot. */
  static const char reduced[] = "kernel d\n%0 : ptr<f32> = param x\n%1 : f32 = param s\n"
                                "%2 : tile<i32,BLOCK> = arange\n%3 : tile<f32,BLOCK> = load %0, %2\n"
                                "%4 : tile<f32,BLOCK> = div %3, %1\n%5 : f32 = reduce_max %4\n"
                                "%6 : tile<f32,BLOCK> = sub %3, %5\nstore %0, %2, %6\n";
  ck_assert_int_eq(tj_program_parse(reduced, strlen(reduced), &p), TJ_OK);
  ck_assert_int_eq(tj_specialize(p, &o, &sp), TJ_OK);
  ck_assert_int_eq(tj_emit_ptx(sp, NULL, &ptx, NULL), TJ_OK);
  ck_assert_int_eq(ptx_count(ptx, "rcp.approx.ftz.f64"), 1);
  ck_assert_int_eq(ptx_count(ptx, "div.rn.f32"), 0);
  tj_free(ptx);
  tj_spec_destroy(sp);
  tj_program_destroy(p);
}
END_TEST

/* i32 max and min on unsigned keys (x ^ 2^31), never max.s32 / min.s32:
 * ptxas for sm_90 fuses max(max(-a, -b), -c) into a VIMNMX3 that drops one
 * negation (seen on an H200 as 509 for the max of arange * -1). */
START_TEST(i32_max_and_min_use_unsigned_keys) {
  static const char text[] =
      "kernel negmax\n%0 : ptr<f32> = param out\n%1 : ptr<i32> = param v\n%2 : ptr<DTYPE> = param "
      "h\n"
      "%3 : tile<i32,BLOCK> = arange\n%4 : i32 = const -1\n%5 : tile<i32,BLOCK> = mul %3, %4\n"
      "%6 : tile<i32,BLOCK> = load %1, %3\n%7 : tile<i32,BLOCK> = neg %6\n"
      "%8 : tile<i32,BLOCK> = max %5, %7\n%9 : tile<i32,BLOCK> = min %8, %5\n"
      "%10 : i32 = reduce_max %5\n%11 : tile<i32,BLOCK> = add %9, %10\n"
      "%12 : tile<f32,BLOCK> = cast %11\nstore %0, %3, %12\n%13 : tile<DTYPE,BLOCK> = cast "
      "%12\nstore %2, %3, %13\n";
  tj_program *p;
  ck_assert_int_eq(tj_program_parse(text, strlen(text), &p), TJ_OK);
  for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
    tj_spec_options o = {.n = 512, .dtype = (tj_dtype)d, .align = 16};
    tj_spec *sp;
    ck_assert_int_eq(tj_specialize(p, &o, &sp), TJ_OK);
    char *ptx;
    ck_assert_int_eq(tj_emit_ptx(sp, NULL, &ptx, NULL), TJ_OK);
    ck_assert_int_eq(ptx_count(ptx, "max.s32"), 0);
    ck_assert_int_eq(ptx_count(ptx, "min.s32"), 0);
    ck_assert_int_gt(ptx_count(ptx, "max.u32"), 0);
    ck_assert_int_gt(ptx_count(ptx, "min.u32"), 0);
    ck_assert_int_gt(ptx_count(ptx, "xor.b32"), 0);
    tj_free(ptx);
    tj_spec_destroy(sp);
  }
  tj_program_destroy(p);
}
END_TEST

/* Masked rows (monotone masks): one predicate per vector on the main path,
 * the elements of a partial vector in a block the other threads branch
 * over (one per vector for rows of one warp at any phase: memory.c), and
 * the mask computed again at the store (no predicate lives from the loads
 * to the stores); the kernel asks ptxas for its CTAs per SM. */
/* The PTX of softmax for n as planned, with DIV = multiple. */
static char *div_ptx(tj_softmax_template which, tj_dtype dtype, int64_t n, int multiple) {
  tj_program *p;
  tj_spec *s;
  tj_spec_options o;
  char *ptx = NULL;
  ck_assert_int_eq(tj_softmax_program(which, n, &p), TJ_OK);
  ck_assert_int_eq(softmax_spec_options(which, dtype, 64, n, 0, 0, &o), TJ_OK);
  o.align = 16;
  o.multiple = multiple;
  ck_assert_msg(tj_specialize(p, &o, &s) == TJ_OK, "%s", tj_program_error(p));
  ck_assert_msg(tj_emit_ptx(s, NULL, &ptx, NULL) == TJ_OK, "%s", tj_spec_error(s));
  tj_spec_destroy(s);
  tj_program_destroy(p);
  return ptx;
}

/* Where n is a multiple of the vector (DIV, as tj_softmax specializes),
 * the mask arange < n holds or drops whole vectors: no element moves alone
 * and no block for a partial vector, in one CTA, lane groups, a staged row
 * over the grid and the online template's loop; with DIV under the vector
 * the block stays. */
START_TEST(whole_vectors_where_n_is_a_multiple) {
  static const struct {
    tj_softmax_template which;
    tj_dtype dtype;
    int64_t n;
    int multiple;
  } cases[] = {{TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 1000, 4},
               {TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 200, 4},
               {TJ_SOFTMAX_SINGLE, TJ_DTYPE_F16, 1000, 8},
               {TJ_SOFTMAX_SINGLE, TJ_DTYPE_BF16, 1048576, 8},
               {TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 1048576, 16},
               {TJ_SOFTMAX_ONLINE, TJ_DTYPE_F32, 100000, 4}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *whole = div_ptx(cases[i].which, cases[i].dtype, cases[i].n, cases[i].multiple);
    char *parts = div_ptx(cases[i].which, cases[i].dtype, cases[i].n, 1);
    int half_vector = cases[i].dtype == TJ_DTYPE_F32 ? 2 : 4;
    char *fewer = div_ptx(cases[i].which, cases[i].dtype, cases[i].n, half_vector);
    const char *scalar = cases[i].dtype == TJ_DTYPE_F32 ? "ld.global.f32" : "ld.global.b16";
    ck_assert_msg(ptx_count(whole, "$Lpart_") == 0 && ptx_count(whole, scalar) == 0, "case %zu",
                  i);
    ck_assert_msg(strstr(whole, " DIV=") != NULL, "case %zu", i);
    ck_assert_msg(ptx_count(parts, "bra $Lpart_") >= 2 && ptx_count(fewer, "bra $Lpart_") >= 2,
                  "case %zu", i);
    /* shorter, but where whole vectors let a grid split fold the next row
     * in its last phase (stream.c, PIPE) */
    ck_assert_msg(strlen(whole) < strlen(parts) || ptx_count(whole, "$Lpiped_") > 0,
                  "case %zu", i);
    tj_free(whole);
    tj_free(parts);
    tj_free(fewer);
  }
}
END_TEST

START_TEST(partial_vectors_in_their_own_block) {
  char *ptx =
      make(&(SoftmaxConfig){TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 1024, 0, 0, 16, 90, 0, 0}, NULL);
  ck_assert_int_eq(ptx_count(ptx, "ld.global.v4.f32"), 8);
  ck_assert_int_eq(ptx_count(ptx, "st.global.v4.f32"), 8);
  ck_assert_int_eq(ptx_count(ptx, "ld.global.f32"), 24); /* 3 per vector, in the block */
  ck_assert_int_eq(ptx_count(ptx, "st.global.f32"), 24);
  ck_assert_int_eq(ptx_count(ptx, "bra $Lpart_"), 2);
  int branch = ptx_find_line(ptx, "bra $Lpart_0", 0),
      first = ptx_find_line(ptx, "ld.global.f32", 0);
  ck_assert_int_lt(ptx_find_line(ptx, "ld.global.v4.f32", 0), branch);
  ck_assert_int_lt(branch, first);
  ck_assert_int_lt(first, ptx_find_line(ptx, "$Lpart_0:", 0));
  ck_assert_int_ge(ptx_find_line(ptx, ".minnctapersm 9", 0), 0);
  tj_free(ptx);
  ptx = make(&(SoftmaxConfig){TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 32768, 0, 32, 16, 90, 0, 0}, NULL);
  ck_assert_int_eq(ptx_find_line(ptx, ".minnctapersm", 0), -1); /* 1024 threads: one CTA */
  ck_assert_int_eq(ptx_count(ptx, "bra $Lpart_"), 2);
  tj_free(ptx);
  /* Rows at any phase inside a warp (f16 577: 16 lanes of five vectors,
   * BLOCK 640): a block per vector, for the load and for the store. */
  ptx = make(&(SoftmaxConfig){TJ_SOFTMAX_SINGLE, TJ_DTYPE_F16, 577, 0, 0, 2, 90, 0, 1}, NULL);
  ck_assert_int_eq(ptx_count(ptx, "bra $Lpart_"), 10);
  /* Lane 0's first vector, which wraps, knows each slot's side: its
   * direct elements first, no slot choosing its element by a selp, then
   * its wrapped ones in a block of their own (for the load and the store),
   * and no test for a wrap of slot VEC - 1 (q < VEC: it never wraps). */
  ck_assert_int_eq(ptx_count(ptx, "bra $Lwrapped_"), 2);
  int block = ptx_find_line(ptx, "bra $Lpart_", 0),
      wrapped = ptx_find_line(ptx, "bra $Lwrapped_", block);
  ck_assert_int_gt(block, 0);
  ck_assert_int_gt(wrapped, block);
  int selp = ptx_find_line(ptx, "selp.b32", block);
  ck_assert_msg(selp > wrapped, "a selp at line %d, among the direct elements", selp);
  ck_assert_int_eq(ptx_count(ptx, ", -7;"), 0);
  tj_free(ptx);
  /* A row of a CTA at any phase (f16 12345: 4 warps, 13 vectors a
   * thread, unstaged where the caller gives the warps) gets a block per
   * vector too; an aligned one, entering only at its end, one block an
   * access. */
  ptx = make(&(SoftmaxConfig){TJ_SOFTMAX_SINGLE, TJ_DTYPE_F16, 12345, 0, 4, 2, 90, 0, 1}, NULL);
  ck_assert_int_eq(ptx_count(ptx, "bra $Lpart_"), 26);
  tj_free(ptx);
  ptx = make(&(SoftmaxConfig){TJ_SOFTMAX_SINGLE, TJ_DTYPE_F16, 12345, 0, 0, 16, 90, 0, 0}, NULL);
  ck_assert_int_eq(ptx_count(ptx, "bra $Lpart_"), 2);
  tj_free(ptx);
}
END_TEST

/* Staged 16-bit rows at any phase over the grid copy their pieces ahead
 * (cp.async, stream.c) in CTAs of at most 4 warps, as the plan gives rows
 * in rounds; in CTAs of 8 they load through registers (bench/RESULTS.md
 * FF2, II9). f32 rows at any phase never copy ahead. */
START_TEST(phased_grid_rows_copy_ahead_in_small_ctas) {
  static const struct {
    tj_dtype dtype;
    int warps;
    bool copies;
  } cases[] = {{TJ_DTYPE_BF16, 4, true},
               {TJ_DTYPE_F16, 4, true},
               {TJ_DTYPE_BF16, 8, false},
               {TJ_DTYPE_F32, 4, false}};
  tj_codegen_options co = {90, 0, 0};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tj_program *p;
    tj_spec *s;
    char *ptx = NULL;
    ck_assert_int_eq(tj_softmax_program(TJ_SOFTMAX_SINGLE, 524288, &p), TJ_OK);
    tj_spec_options o = {.n = 524288,
                         .num_warps = cases[i].warps,
                         .dtype = cases[i].dtype,
                         .align = 16,
                         .phased = 1,
                         .cluster = 2,
                         .split = 16,
                         .stage = 32};
    ck_assert_int_eq(tj_specialize(p, &o, &s), TJ_OK);
    ck_assert_msg(tj_emit_ptx(s, &co, &ptx, NULL) == TJ_OK, "%s", tj_spec_error(s));
    ck_assert_ptr_nonnull(strstr(ptx, "PHASE=1"));
    ck_assert_msg((ptx_count(ptx, "cp.async.cg.shared.global") > 0) == cases[i].copies,
                  "case %zu: %d copies", i, ptx_count(ptx, "cp.async.cg.shared.global"));
    tj_free(ptx);
    tj_spec_destroy(s);
    tj_program_destroy(p);
  }
}
END_TEST

/* STAGE (codegen/stream.c): a staged row streams in pieces whose loads go
 * to shared memory once and come back from there (on sm_90 copied there by
 * cp.async a piece ahead, on sm_75 through registers); its stash beyond 48
 * KiB is .extern, sized in the launch shape; a stash no CTA of the arch can
 * have is refused; and a tile that fits the STAGE is not staged at all. */
START_TEST(staged_rows_keep_x_in_shared_memory) {
  tj_program *p;
  tj_spec *s;
  tj_kernel_info info;
  char *ptx = NULL;
  tj_codegen_options co = {90, 0, 0};
  ck_assert_int_eq(tj_softmax_program(TJ_SOFTMAX_SINGLE, 32768, &p), TJ_OK);
  tj_spec_options o = {
      .n = 32768, .num_warps = 8, .dtype = TJ_DTYPE_BF16, .align = 16, .stage = 32};
  ck_assert_int_eq(tj_specialize(p, &o, &s), TJ_OK);
  tj_spec *half;
  tj_spec_options ho = {
      .n = 16384, .num_warps = 8, .dtype = TJ_DTYPE_BF16, .align = 16, .stage = 16};
  ck_assert_int_eq(tj_specialize(p, &ho, &half), TJ_OK); /* 32 KiB fit sm_75 */
  tj_codegen_options turing = {75, 0, 0};
  ck_assert_msg(tj_emit_ptx(half, &turing, &ptx, &info) == TJ_OK, "%s", tj_spec_error(half));
  ck_assert_int_eq(ptx_count(ptx, "ld.global.v4.b32"), 2); /* one piece of 2 vectors */
  ck_assert_int_eq(ptx_count(ptx, "st.shared.v4.b32"), 2); /* kept */
  /* and read back, in the last phase's loop and its shifted copy (exp_shift.c) */
  ck_assert_int_eq(ptx_count(ptx, "ld.shared.v4.b32"), 2 * 2);
  ck_assert_int_eq(ptx_count(ptx, "cp.async"), 0);
  tj_free(ptx);
  tj_spec_destroy(half);
  ck_assert_msg(tj_emit_ptx(s, &co, &ptx, &info) == TJ_OK, "%s", tj_spec_error(s));
  ck_assert_int_eq(ptx_count(ptx, "ld.global.v4.b32"), 0);
  /* The 4 vectors of the first piece before the loop, of the next in it. */
  ck_assert_int_eq(ptx_count(ptx, "cp.async.cg.shared.global"), 8);
  ck_assert_int_eq(ptx_count(ptx, "cp.async.commit_group;"), 2);
  ck_assert_int_eq(ptx_count(ptx, "cp.async.wait_group 1;"), 1);
  ck_assert_int_eq(ptx_count(ptx, "ld.shared.v4.b32"), 4 + 2 * 4); /* both phases; see above */
  ck_assert_int_eq(ptx_count(ptx, "st.shared.v4.b32"), 4);  /* a vector the mask cuts, */
  ck_assert_int_eq(ptx_count(ptx, "\tst.shared.v4.b32"), 0); /* only under a predicate */
  ck_assert_int_ge(ptx_find_line(ptx, ".extern .shared .align 16 .b8 tj_smem[];", 0), 0);
  ck_assert_int_eq(info.shape.shared_bytes, 0);
  ck_assert_int_ge(info.shape.dynamic_shared_bytes, 32768 * 2);
  tj_free(ptx);
  tj_spec_destroy(s);
  /* A whole row of 2^20 f32 in one 32-thread CTA: 4 MiB of stash. */
  o = (tj_spec_options){
      .n = 1 << 20, .num_warps = 1, .dtype = TJ_DTYPE_F32, .align = 16, .stage = 4};
  tj_program_destroy(p);
  ck_assert_int_eq(tj_softmax_program(TJ_SOFTMAX_SINGLE, 1 << 20, &p), TJ_OK);
  ck_assert_int_eq(tj_specialize(p, &o, &s), TJ_OK);
  ck_assert_int_eq(tj_emit_ptx(s, &co, &ptx, &info), TJ_ERR_UNSUPPORTED);
  ck_assert_ptr_nonnull(
      strstr(tj_spec_error(s), "bytes or more of shared memory a CTA, more than sm_90"));
  tj_spec_destroy(s);
  tj_program_destroy(p);
  /* A share of 2^32 bytes (2^30 f32 in 1024 threads): refused, not wrapped
   * around to a few bytes (it emitted tj_smem[512] before). */
  ck_assert_int_eq(tj_softmax_program(TJ_SOFTMAX_SINGLE, 1 << 30, &p), TJ_OK);
  o = (tj_spec_options){
      .n = 1 << 30, .num_warps = 32, .dtype = TJ_DTYPE_F32, .align = 16, .stage = 4};
  ck_assert_int_eq(tj_specialize(p, &o, &s), TJ_OK);
  ck_assert_int_eq(tj_emit_ptx(s, &co, &ptx, &info), TJ_ERR_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(tj_spec_error(s), "4294967808 bytes or more"));
  tj_spec_destroy(s);
  tj_program_destroy(p);
  /* 1000 elements over 128 threads fit a STAGE of 64: the same kernel as
   * without it, but for its comment line (the second). */
  char *plain =
      make(&(SoftmaxConfig){TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 1000, 0, 4, 16, 90, 0, 0}, NULL);
  ck_assert_int_eq(tj_softmax_program(TJ_SOFTMAX_SINGLE, 1000, &p), TJ_OK);
  o = (tj_spec_options){.n = 1000, .num_warps = 4, .dtype = TJ_DTYPE_F32, .align = 16, .stage = 64};
  ck_assert_int_eq(tj_specialize(p, &o, &s), TJ_OK);
  ck_assert_int_eq(tj_emit_ptx(s, &co, &ptx, &info), TJ_OK);
  const char *a = strchr(strchr(ptx, '\n') + 1, '\n'), *b = strchr(strchr(plain, '\n') + 1, '\n');
  ck_assert_msg(strcmp(a, b) == 0, "a STAGE the tile fits changed the kernel");
  tj_free(ptx);
  tj_free(plain);
  tj_spec_destroy(s);
  tj_program_destroy(p);
}
END_TEST

/* Every staged plan compiles: for each arch that stages (nominal
 * devices), row op (softmax backward is not staged by default), dtype and
 * a sweep of widths and row counts, the plan's kernel keeps no more shared
 * memory than the arch gives a CTA: the plan sizes its shares as the code
 * generator lays them out (BLOCK rounded up, whole pieces). Estimated from
 * n instead, a share could come out at up to 1.9 times the plan's. Pieces
 * of a power of two and of other sizes (STAGE 40) both occur. */
/* A staged row split over the grid: the groups of odd index wait a CTA's
 * share in bytes / 16 ns before their first row, where the instances are
 * 8 times the groups or more (geometry.c, stagger); an unstaged split and
 * one CTA a row do not. */
static char *split_ptx(int64_t n, int cluster, int split, int stage, int arch, int multiple) {
  tj_program *p;
  tj_spec *s;
  tj_kernel_info info;
  char *ptx = NULL;
  tj_codegen_options co = {arch, 0, 0};
  ck_assert_int_eq(tj_softmax_program(TJ_SOFTMAX_SINGLE, n, &p), TJ_OK);
  tj_spec_options o = {.n = n,
                       .num_warps = 8,
                       .dtype = TJ_DTYPE_BF16,
                       .align = 16,
                       .cluster = cluster,
                       .split = split,
                       .stage = stage,
                       .multiple = multiple};
  ck_assert_int_eq(tj_specialize(p, &o, &s), TJ_OK);
  ck_assert_msg(tj_emit_ptx(s, &co, &ptx, &info) == TJ_OK, "%s", tj_spec_error(s));
  tj_spec_destroy(s);
  tj_program_destroy(p);
  return ptx;
}

/* Splits that lack `what`: one not staged and one CTA a row (bf16, sm_90,
 * DIV as given). */
static void unstaged_and_one_cta_lack(const char *what, int multiple) {
  char *ptx = split_ptx(1 << 20, 1, 32, 0, 90, multiple); /* not staged */
  ck_assert_int_eq(ptx_count(ptx, what), 0);
  tj_free(ptx);
  ptx = split_ptx(65536, 1, 1, 32, 90, multiple); /* one CTA a row */
  ck_assert_int_eq(ptx_count(ptx, what), 0);
  tj_free(ptx);
}

START_TEST(grid_groups_of_odd_index_start_later) {
  char *ptx = split_ptx(1 << 20, 1, 32, 32, 90, 1); /* a share of 64 KiB: 4096 ns */
  ck_assert_int_eq(ptx_count(ptx, "mov.u64 %rd"), 2);
  ck_assert_int_eq(ptx_count(ptx, ", %globaltimer;"), 2);
  ck_assert_int_eq(ptx_count(ptx, "nanosleep.u32"), 1);
  ck_assert_int_eq(ptx_count(ptx, ", 4096;"), 1);
  ck_assert_int_ge(ptx_find_line(ptx, "setp.lt.or.u64", 0), 0);
  int odd = ptx_find_line(ptx, ", 1;", 0), sleep = ptx_find_line(ptx, "nanosleep.u32 256;", 0);
  ck_assert_int_ge(odd, 0);
  ck_assert_int_lt(odd, sleep);
  /* before the first row */
  ck_assert_int_lt(sleep, ptx_find_line(ptx, "$Linst:", 0));
  tj_free(ptx);
  unstaged_and_one_cta_lack("%globaltimer", 1);
}
END_TEST

/* Staged rows over the grid, taken in turn: the last phase copies the next
 * row's kept pieces into the slots it empties and folds them (stream.c,
 * PIPE), and a later row's first phase runs apart ($Lpiped_), in CTAs
 * and in clusters of two (sm_90, as 16-bit rows in rounds are planned).
 * Not where a vector may be partial (no DIV), nothing is staged or one
 * CTA holds a row. */
START_TEST(grid_rows_fold_the_next_row_in_the_last_phase) {
  for (int cluster = 1; cluster <= 2; cluster++) {
    char *ptx = split_ptx(1 << 20, cluster, 32 / cluster, 32, 90, 8); /* DIV = 8, as tj_softmax's */
    int piped = ptx_find_line(ptx, "$Lpiped_", 0), spin = ptx_find_line(ptx, "$Lgrid_spin_", 0);
    ck_assert_int_ge(piped, 0);
    ck_assert_int_gt(spin, piped);
    ck_assert_int_eq(ptx_count(ptx, "$Lpipe_"), 12); /* in both of the shift's loops: a turn, an end */
    ck_assert_int_eq(ptx_count(ptx, ".reqnctapercluster 2"), cluster == 2);
    /* past the grid's barrier, in the last phase: the next row's copies and waits */
    ck_assert_int_ge(ptx_find_line(ptx, "cp.async.cg.shared.global", spin), 0);
    ck_assert_int_ge(ptx_find_line(ptx, "cp.async.wait_group 1;", spin), 0);
    ck_assert_int_ge(ptx_find_line(ptx, "cp.async.wait_group 0;", spin), 0);
    tj_free(ptx);
  }
  char *ptx = split_ptx(1 << 20, 1, 32, 32, 90, 1); /* a partial vector's path: not */
  ck_assert_int_eq(ptx_count(ptx, "$Lpipe"), 0);
  tj_free(ptx);
  unstaged_and_one_cta_lack("$Lpipe", 8);
}
END_TEST

START_TEST(staged_plans_compile) {
  static const int archs[] = {80, 86, 89, 90, 100, 120};
  static const int64_t ns[] = {16385,  16569,  17409,  32001,   40000,  65536,
                               100003, 262144, 524289, 1000000, 2500000};
  static const int64_t ms[] = {1, 4, 100, 4096};
  int staged = 0;
  for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
    tj_device_info d;
    ck_assert_int_eq(tj_device_nominal(archs[a], &d), TJ_OK);
    for (int op = 0; op < TJ_ROW_OP_COUNT; op++)
      for (int dt = 0; dt < TJ_DTYPE_COUNT; dt++)
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
          for (size_t k = 0; k < sizeof ms / sizeof ms[0]; k++) {
            tj_softmax_plan plan;
            ck_assert_int_eq(
                tj_row_plan_for(&d, (tj_row_op)op, (tj_dtype)dt, ms[k], ns[i], NULL, &plan), TJ_OK);
            if (!plan.stage || (k + i + (size_t)op) % 3) continue; /* a third of them: CI time */
            tj_program *p;
            tj_spec *sp;
            tj_spec_options o;
            tj_kernel_info info;
            char *ptx = NULL;
            ck_assert_int_eq(tj_row_program((tj_row_op)op, plan.which, ns[i], &p), TJ_OK);
            ck_assert_int_eq(tj_softmax_spec_options(&plan, (tj_dtype)dt, ns[i], &o), TJ_OK);
            o.align = 16;
            ck_assert_msg(tj_specialize(p, &o, &sp) == TJ_OK, "%s", tj_program_error(p));
            tj_codegen_options co = {archs[a], 0, 0};
            ck_assert_msg(tj_emit_ptx(sp, &co, &ptx, &info) == TJ_OK,
                          "sm_%d op %d dtype %d m %lld n %lld (cluster %d split %d): %s", archs[a],
                          op, dt, (long long)ms[k], (long long)ns[i], plan.cluster, plan.split,
                          tj_spec_error(sp));
            ck_assert_int_le(info.shape.shared_bytes + info.shape.dynamic_shared_bytes,
                             d.max_shared_per_block_optin);
            /* A piece's place in the stash is an exact quotient (a shift
             * and a multiply), never div.u32, which ptxas expands into
             * about fifteen instructions through the XU pipe a piece;
             * only a grid split's addresses divide, once an instance. */
            if (plan.split <= 1)
              ck_assert_msg(ptx_count(ptx, "div.u32") == 0, "sm_%d n %lld: a division", archs[a],
                            (long long)ns[i]);
            /* exp(x - max) in a 16-bit piece is an fma and an ex2 a slot,
             * with the exact path beside it (exp_shift.c): in the first
             * phase's sum wherever the max and the sum are a pair (a branch
             * a piece), and in softmax's last phase, its e only scaled (the
             * loop twice). f32 pieces keep the plain exp, and a share that fits a thread's STAGE takes no pieces
             * and keeps the plain exp, as the masked softmax does (exp of a
             * scaled difference, no pair). */
            int shifted = ptx_count(ptx, "0f3FB8AA3B, %f"), exact = ptx_count(ptx, "$Lexact_");
            int loops = ptx_count(ptx, "$Lexact_loop_");
            int plain = ptx_count(ptx, ", 0f3FB8AA3B;"); /* each shifted slot's exact twin */
            bool pieces = ptx_count(ptx, "$Lpiece_") > 0 && dt != TJ_DTYPE_F32;
            bool pair = op == TJ_ROW_SOFTMAX || op == TJ_ROW_LOG_SOFTMAX;
            ck_assert_msg(pieces && pair ? shifted > 0 && exact - loops >= 2 && plain >= shifted
                                         : shifted + exact == 0,
                          "op %d sm_%d n %lld: %d shifted exps, %d exact paths", op, archs[a],
                          (long long)ns[i], shifted, exact);
            ck_assert_int_eq(loops, pieces && op == TJ_ROW_SOFTMAX ? 2 : 0);
            staged++;
            tj_free(ptx);
            tj_spec_destroy(sp);
            tj_program_destroy(p);
          }
  }
  ck_assert_int_gt(staged, 100);
}
END_TEST

/* Operand names as PTX spells them (emit.c writes them without printf):
 * registers by class, f32 immediates as their exact bits, b16 in hex,
 * integers in signed decimal to their extremes. */
START_TEST(operand_names) {
  static const struct {
    CgOperand o;
    const char *name;
  } cases[] = {
      {{CG_B32, 0, 12, 0}, "%r12"},
      {{CG_B64, 0, 1, 0}, "%rd1"},
      {{CG_PRED, 0, 4294967295u, 0}, "%p4294967295"},
      {{CG_F32, 1, 0, 0x3F800000u}, "0f3F800000"},
      {{CG_F32, 1, 0, 0xFF800000u}, "0fFF800000"},
      {{CG_F32, 1, 0, 0x0000000Au}, "0f0000000A"},
      {{CG_B16, 1, 0, 0xFC00u}, "0xFC00"},
      {{CG_B16, 1, 0, 0x12345u}, "0x2345"},
      {{CG_B32, 1, 0, 0}, "0"},
      {{CG_B32, 1, 0, 0x80000000u}, "-2147483648"},
      {{CG_B32, 1, 0, 0xFFFFFFFFu}, "-1"},
      {{CG_B64, 1, 0, 0x8000000000000000u}, "-9223372036854775808"},
      {{CG_B64, 1, 0, 0x7FFFFFFFFFFFFFFFu}, "9223372036854775807"},
      {{CG_PRED, 1, 0, 1}, "1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ck_assert_str_eq(cg_name(cases[i].o).s, cases[i].name);
    ck_assert_str_eq(CG_N(cases[i].o), cases[i].name);
  }
  ck_assert_str_eq(cg_address(cases[0].o, -16).s, "[%r12-16]");
  ck_assert_str_eq(cg_address(cases[1].o, 4096).s, "[%rd1+4096]");
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("ptx_structure");
  TCase *t = tcase_create("softmax");
  tcase_set_timeout(t, 60);
  tcase_add_test(t, butterfly_follows_the_lane_group);
  tcase_add_test(t, aligned_rows_move_predicated_vectors);
  tcase_add_test(t, unaligned_rows_move_single_elements);
  tcase_add_test(t, shared_memory_only_across_warps);
  tcase_add_test(t, small_rows_share_a_cta_in_lane_groups);
  tcase_add_test(t, fitted_rows_keep_their_lanes);
  tcase_add_test(t, operand_names);
  tcase_add_test(t, f16_moves_halves_in_words);
  tcase_add_test(t, bf16_conversions_follow_the_arch);
  tcase_add_test(t, exp_is_subtract_multiply_ex2);
  tcase_add_test(t, grid_stride_loop_over_instances);
  tcase_add_test(t, online_template_loops_over_chunks);
  tcase_add_test(t, kernel_info_and_versions);
  tcase_add_test(t, errors_name_what_is_wrong);
  tcase_add_test(t, deterministic_and_annotated);
  tcase_add_test(t, default_warps_table);
  tcase_add_test(t, tile_by_scalar_division_is_one_reciprocal);
  tcase_add_test(t, i32_max_and_min_use_unsigned_keys);
  tcase_add_test(t, partial_vectors_in_their_own_block);
  tcase_add_test(t, whole_vectors_where_n_is_a_multiple);
  tcase_add_test(t, staged_rows_keep_x_in_shared_memory);
  tcase_add_test(t, phased_grid_rows_copy_ahead_in_small_ctas);
  tcase_add_test(t, grid_groups_of_odd_index_start_later);
  tcase_add_test(t, grid_rows_fold_the_next_row_in_the_last_phase);
  tcase_add_test(t, staged_plans_compile);
  suite_add_tcase(s, t);
  return s;
}

int main(void) { return test_run_suite(suite()); }
