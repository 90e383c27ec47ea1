/*
 * gpu_errors.c — the runtime's error paths on a real driver, and the
 * generic API (tj_load_ptx, tj_launch) on hand-written PTX.
 *
 *   - Invalid PTX through tj_load_ptx: TJ_ERR_DRIVER naming
 *     cuModuleLoadDataEx and CUDA_ERROR_INVALID_PTX, with the ptxas line in
 *     the message; a failed compile is not cached.
 *   - Hand-written PTX that follows the kernel ABI loads, describes itself
 *     and launches over more instances than one resident grid holds;
 *     tj_launch rejects wrong argument counts, kinds, grids and kernels of
 *     another context.
 *   - Bad tj_softmax arguments are TJ_ERR_INVALID_ARGUMENT with a message,
 *     and nothing is launched (the poisoned output stays poisoned).
 *   - Context options: an arch missing from the PTX table, an arch newer
 *     than the device, an ISA the driver lacks, a device that does not
 *     exist. Older arch targets that are in the table run correctly.
 *   - A tiny cache capacity evicts (and unloads) kernels, results correct.
 *   - The embedding scenario: a user's log-softmax specialized with align =
 *     16 and launched on rows of 31 floats is refused before launching,
 *     naming the argument and the assumption; the context keeps working
 *     (a right launch then gives log-softmax on every row).
 */
#define _POSIX_C_SOURCE 200809L

#include "support_gpu.h"
#include "support_logsoftmax.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void assert_message(tj_context *ctx, const char *part) {
  const char *msg = tj_context_error(ctx);
  ck_assert_msg(strstr(msg, part), "message \"%s\" lacks \"%s\"", msg, part);
}

/* ------------------------------------------------------- invalid PTX */

static const char broken_ptx[] = ".version 7.8\n"
                                 ".target sm_75\n"
                                 ".address_size 64\n"
                                 "\n"
                                 ".visible .entry broken(.param .u64 count)\n"
                                 ".reqntid 32\n"
                                 "{\n"
                                 "\tbogus.instruction %r1;\n"
                                 "\tret;\n"
                                 "}\n";

START_TEST(invalid_ptx_gives_driver_error_and_log) {
  tj_context *ctx = gpu_context(NULL);
  for (int attempt = 0; attempt < 2; attempt++) {
    tj_kernel *k = (tj_kernel *)1;
    tj_status st = tj_load_ptx(ctx, broken_ptx, "broken", &k);
    ck_assert_int_eq(st, TJ_ERR_DRIVER);
    ck_assert_ptr_null(k);
    assert_message(ctx, "cuModuleLoadDataEx");
    assert_message(ctx, "CUDA_ERROR_INVALID_PTX");
    assert_message(ctx, "ptxas");
    assert_message(ctx, "line 8");
    if (attempt == 0) fprintf(stderr, "invalid PTX: %s\n", tj_context_error(ctx));
  }
  tj_cache_stats s;
  tj_context_cache_stats(ctx, &s);
  ck_assert_uint_eq(s.failures, 2); /* not cached: compiled twice */
  ck_assert_int_eq(s.entries, 0);
  tj_context_destroy(ctx);
}
END_TEST

/* ------------------------------------------------ hand-written kernels */

/* out[i] = i for i < count: thread 0 of each CTA strides over instances. */
static const char iota_ptx[] = ".version 7.8\n"
                               ".target sm_75\n"
                               ".address_size 64\n"
                               ".visible .entry iota(.param .u64 out, .param .u64 count)\n"
                               ".reqntid 64\n"
                               "{\n"
                               "\t.reg .pred %p<2>;\n"
                               "\t.reg .b32 %r<4>;\n"
                               "\t.reg .b64 %rd<8>;\n"
                               "\tld.param.u64 %rd1, [out];\n"
                               "\tld.param.u64 %rd2, [count];\n"
                               "\tcvta.to.global.u64 %rd1, %rd1;\n"
                               "\tmov.u32 %r1, %ctaid.x;\n"
                               "\tmov.u32 %r2, %nctaid.x;\n"
                               "\tcvt.u64.u32 %rd3, %r1;\n"
                               "\tcvt.u64.u32 %rd4, %r2;\n"
                               "\tmov.u32 %r3, %tid.x;\n"
                               "\tsetp.ne.u32 %p1, %r3, 0;\n"
                               "\t@%p1 bra DONE;\n"
                               "LOOP:\n"
                               "\tsetp.ge.u64 %p1, %rd3, %rd2;\n"
                               "\t@%p1 bra DONE;\n"
                               "\tshl.b64 %rd5, %rd3, 2;\n"
                               "\tadd.u64 %rd6, %rd1, %rd5;\n"
                               "\tcvt.u32.u64 %r1, %rd3;\n"
                               "\tst.global.u32 [%rd6], %r1;\n"
                               "\tadd.u64 %rd3, %rd3, %rd4;\n"
                               "\tbra LOOP;\n"
                               "DONE:\n"
                               "\tret;\n"
                               "}\n";

static void check_launch_rejects(tj_context *ctx, tj_kernel *k, uint64_t out) {
  tj_arg good = {TJ_ARG_PTR, {.ptr = (void *)(uintptr_t)out}, 0};
  tj_arg wrong_kind = {TJ_ARG_FLOAT, {.f = 1.0}, 0};
  ck_assert_int_eq(tj_launch(ctx, k, &good, 0, 10, NULL), TJ_ERR_INVALID_ARGUMENT);
  assert_message(ctx, "takes 1 arguments, got 0");
  ck_assert_int_eq(tj_launch(ctx, k, &wrong_kind, 1, 10, NULL), TJ_ERR_INVALID_ARGUMENT);
  assert_message(ctx, "TJ_ARG_FLOAT");
  ck_assert_int_eq(tj_launch(ctx, k, &good, 1, -1, NULL), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_launch(ctx, k, &good, 1, (int64_t)1 << 31, NULL), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_launch(ctx, NULL, &good, 1, 10, NULL), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_launch(ctx, k, &good, 1, 0, NULL), TJ_OK); /* nothing launched */
  tj_context *other = gpu_context(NULL);
  ck_assert_int_eq(tj_launch(other, k, &good, 1, 10, NULL), TJ_ERR_INVALID_ARGUMENT);
  tj_context_destroy(other);
}

START_TEST(hand_written_ptx_loads_and_launches) {
  tj_context *ctx = gpu_context(NULL);
  tj_kernel *k = NULL;
  tj_status st = tj_load_ptx(ctx, iota_ptx, "iota", &k);
  ck_assert_msg(st == TJ_OK, "%s", tj_context_error(ctx));
  tj_kernel *again = NULL;
  ck_assert_int_eq(tj_load_ptx(ctx, iota_ptx, "iota", &again), TJ_OK);
  ck_assert_ptr_eq(k, again);
  tj_kernel_report r;
  ck_assert_int_eq(tj_kernel_describe(k, &r), TJ_OK);
  ck_assert_int_eq(r.info.shape.threads, 64);
  ck_assert_int_eq(r.info.shape.programs_per_cta, 1);
  ck_assert_int_eq(r.info.param_count, 1);
  ck_assert_int_gt(r.max_ctas, 0);
  ck_assert_int_gt(r.registers, 0);
  ck_assert_int_eq(r.local_bytes, 0);
  const int64_t count = 3 * (int64_t)r.max_ctas + 17; /* more than one resident grid */
  uint64_t out = 0;
  ck_assert_int_eq(tj_device_alloc(ctx, (size_t)count * 4, &out), TJ_OK);
  check_launch_rejects(ctx, k, out);
  tj_arg arg = {TJ_ARG_PTR, {.ptr = (void *)(uintptr_t)out}, 0};
  ck_assert_msg(tj_launch(ctx, k, &arg, 1, count, NULL) == TJ_OK, "%s", tj_context_error(ctx));
  uint32_t *host = malloc((size_t)count * 4);
  ck_assert_int_eq(tj_copy_to_host(ctx, host, out, (size_t)count * 4), TJ_OK);
  for (int64_t i = 0; i < count; i++) ck_assert_uint_eq(host[i], (uint32_t)i);
  free(host);
  tj_device_free(ctx, out);
  tj_context_destroy(ctx);
}
END_TEST

START_TEST(hand_written_ptx_abi_errors) {
  tj_context *ctx = gpu_context(NULL);
  tj_kernel *k = NULL;
  ck_assert_int_eq(tj_load_ptx(ctx, iota_ptx, "missing", &k), TJ_ERR_INVALID_ARGUMENT);
  assert_message(ctx, "no .entry missing");
  char *no_reqntid = malloc(sizeof iota_ptx);
  strcpy(no_reqntid, iota_ptx);
  memcpy(strstr(no_reqntid, ".reqntid 64"), "// reqntid ", 11);
  ck_assert_int_eq(tj_load_ptx(ctx, no_reqntid, "iota", &k), TJ_ERR_INVALID_ARGUMENT);
  assert_message(ctx, ".reqntid");
  free(no_reqntid);
  ck_assert_int_eq(tj_load_ptx(ctx, NULL, "iota", &k), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_compile(ctx, NULL, TJ_BACKEND_PTX, &k), TJ_ERR_INVALID_ARGUMENT);
  tj_context_destroy(ctx);
}
END_TEST

/* ------------------------------------------------- softmax arguments */

typedef struct BadCall {
  tj_dtype dtype;
  int64_t m, n;
  int64_t y_offset, y_stride, x_offset, x_stride; /* bytes from the buffers; -1: NULL */
  tj_softmax_options opts;
  const char *why;
} BadCall;

static const BadCall bad_calls[] = {
    {TJ_DTYPE_F32, 4, 100, -1, 100, 0, 100, {0}, "NULL y"},
    {TJ_DTYPE_F32, 4, 100, 0, 100, -1, 100, {0}, "NULL x"},
    {TJ_DTYPE_F32, -1, 100, 0, 100, 0, 100, {0}, "negative m or n"},
    {TJ_DTYPE_F32, 4, -5, 0, 100, 0, 100, {0}, "negative m or n"},
    {(tj_dtype)7, 4, 100, 0, 100, 0, 100, {0}, "unknown dtype"},
    {TJ_DTYPE_F32, 4, 100, 0, 99, 0, 100, {0}, "row stride of y is smaller than n"},
    {TJ_DTYPE_F32, 4, 100, 0, 100, 0, 120, {0}, "in place (y == x) needs equal strides"},
    {TJ_DTYPE_F32, 4, 100, 0, 100, 4, 100, {0}, "overlap"},
    {TJ_DTYPE_F32, 4, 100, 0, 100, 5001, 100, {0}, "aligned to its element size"},
    {TJ_DTYPE_F16, 4, 100, 1, 100, 5000, 100, {0}, "aligned to its element size"},
    {TJ_DTYPE_F32, 4, 100, 0, 100, 5000, 100, {.num_warps = 3}, "num_warps"},
    {TJ_DTYPE_F32, 4, 100, 0, 100, 5000, 100, {.num_warps = 64}, "num_warps"},
    {TJ_DTYPE_F32, 4, 100, 0, 100, 5000, 100, {.backend = (tj_backend)5}, "unknown backend"},
    {TJ_DTYPE_F32, 4, 100, 0, 100, 5000, 100, {.which_template = (tj_softmax_template)9},
     "unknown template"},
    {TJ_DTYPE_F32, 4, 100, 0, 100, 5000, 100, {.cluster = 17}, "cluster"},
    {TJ_DTYPE_F32, 4, 100, 0, 100, 5000, 100, {.split = -1}, "split"},
    {TJ_DTYPE_F32, (int64_t)1 << 31, 1, 0, 1, 5000, 1, {0}, "m over 2^31-1"},
    {TJ_DTYPE_F32, 1, (int64_t)1 << 31, 0, 0, 5000, 0, {0}, "n over 2^31-1"},
    {TJ_DTYPE_F32, 2, 100, 0, INT64_MAX / 2, 5000, 100, {0}, "over 2^63 bytes"},
};

START_TEST(bad_softmax_arguments_launch_nothing) {
  tj_context *ctx = gpu_context(NULL);
  const size_t bytes = 64 * 1024;
  uint64_t buf = 0;
  ck_assert_int_eq(tj_device_alloc(ctx, bytes, &buf), TJ_OK);
  TjMatrix poison;
  ck_assert(matrix_alloc(&poison, TJ_DTYPE_F32, 1, (int64_t)(bytes / 4), (int64_t)(bytes / 4), 0));
  ck_assert_int_eq(tj_copy_to_device(ctx, buf, poison.data, bytes), TJ_OK);
  for (size_t i = 0; i < sizeof bad_calls / sizeof bad_calls[0]; i++) {
    const BadCall *b = &bad_calls[i];
    uint64_t y = b->y_offset < 0 ? 0 : buf + (uint64_t)b->y_offset;
    uint64_t x = b->x_offset < 0 ? 0 : buf + (uint64_t)b->x_offset;
    tj_status st =
        tj_softmax(ctx, b->dtype, b->m, b->n, y, b->y_stride, x, b->x_stride, NULL, &b->opts);
    ck_assert_msg(st == TJ_ERR_INVALID_ARGUMENT, "call %zu: %s", i, tj_status_string(st));
    assert_message(ctx, b->why);
  }
  /* Empty matrices succeed without a launch, NULL pointers and all. */
  ck_assert_int_eq(tj_softmax(ctx, TJ_DTYPE_F32, 0, 100, 0, 100, 0, 100, NULL, NULL), TJ_OK);
  ck_assert_int_eq(tj_softmax(ctx, TJ_DTYPE_F32, 100, 0, 0, 0, 0, 0, NULL, NULL), TJ_OK);
  /* A template that cannot take n (a single tile over 2^30 elements) fails
   * before any launch, with why (real buffers all the same, in case it
   * launched: 2^25 elements, far short of the row). */
  const int64_t wide = ((int64_t)1 << 30) + 1;
  uint64_t big = 0;
  ck_assert_int_eq(tj_device_alloc(ctx, ((size_t)1 << 25) * 8, &big), TJ_OK);
  tj_softmax_options single = {.which_template = TJ_SOFTMAX_SINGLE};
  tj_status st = tj_softmax(ctx, TJ_DTYPE_F32, 1, wide, big, wide, big, wide, NULL, &single);
  ck_assert_int_eq(st, TJ_ERR_UNSUPPORTED);
  assert_message(ctx, "no plan");
  ck_assert_str_ne(tj_context_error(ctx), "");
  fprintf(stderr, "single tile for n = 2^30 + 1: %s\n", tj_context_error(ctx));
  tj_device_free(ctx, big);
  ck_assert_int_eq(tj_context_synchronize(ctx), TJ_OK);
  TjMatrix after;
  ck_assert(matrix_alloc(&after, TJ_DTYPE_F32, 1, (int64_t)(bytes / 4), (int64_t)(bytes / 4), 0));
  ck_assert_int_eq(tj_copy_to_host(ctx, after.data, buf, bytes), TJ_OK);
  ck_assert_mem_eq(after.data, poison.data, bytes);
  matrix_free(&after);
  matrix_free(&poison);
  tj_device_free(ctx, buf);
  ck_assert_int_eq(tj_softmax(NULL, TJ_DTYPE_F32, 1, 1, 0, 1, 0, 1, NULL, NULL),
                   TJ_ERR_INVALID_ARGUMENT);
  tj_context_destroy(ctx);
}
END_TEST

/* Softmax backward's three matrices: offsets in bytes into one buffer (-1:
 * NULL), and its own strides. dx may be y or dy (in place), y and dy may
 * overlap each other (both are read); dx may not overlap either otherwise. */
typedef struct BadBackward {
  int64_t dx, y, dy;
  int64_t dx_stride, y_stride, dy_stride;
  const char *why; /* NULL: the call must succeed */
} BadBackward;

static const BadBackward backward_calls[] = {
    {0, 4096, -1, 100, 100, 100, "NULL dy"},
    {-1, 4096, 8192, 100, 100, 100, "NULL dx"},
    {0, 4096, 8192, 100, 100, 99, "row stride of dy is smaller than n"},
    {0, 0, 8192, 100, 120, 100, "in place (dx == y) needs equal strides"},
    {0, 4096, 0, 100, 100, 120, "in place (dx == dy) needs equal strides"},
    {0, 4096, 400, 100, 100, 100, "dx and dy overlap without being the same matrix"},
    {0, 4096, 8194, 100, 100, 100, "aligned to its element size"},
    {0, 4096, 4096, 100, 100, 100, NULL},
    {0, 4096, 4496, 100, 100, 100, NULL},
    {0, 0, 8192, 100, 100, 100, NULL},
};

START_TEST(bad_backward_arguments_launch_nothing) {
  tj_context *ctx = gpu_context(NULL);
  const size_t bytes = 64 * 1024;
  uint64_t buf = 0;
  ck_assert_int_eq(tj_device_alloc(ctx, bytes, &buf), TJ_OK);
  TjMatrix poison;
  ck_assert(matrix_alloc(&poison, TJ_DTYPE_F32, 1, (int64_t)(bytes / 4), (int64_t)(bytes / 4), 0));
  ck_assert_int_eq(tj_copy_to_device(ctx, buf, poison.data, bytes), TJ_OK);
  for (size_t i = 0; i < sizeof backward_calls / sizeof backward_calls[0]; i++) {
    const BadBackward *b = &backward_calls[i];
    uint64_t at[3];
    const int64_t offsets[3] = {b->dx, b->y, b->dy};
    for (int j = 0; j < 3; j++) at[j] = offsets[j] < 0 ? 0 : buf + (uint64_t)offsets[j];
    tj_status st = tj_softmax_backward(ctx, TJ_DTYPE_F32, 4, 100, at[0], b->dx_stride, at[1],
                                       b->y_stride, at[2], b->dy_stride, NULL, NULL);
    if (!b->why) {
      ck_assert_msg(st == TJ_OK, "call %zu: %s: %s", i, tj_status_string(st),
                    tj_context_error(ctx));
      continue;
    }
    ck_assert_msg(st == TJ_ERR_INVALID_ARGUMENT, "call %zu: %s", i, tj_status_string(st));
    assert_message(ctx, b->why);
    assert_message(ctx, "tj_softmax_backward");
  }
  ck_assert_int_eq(tj_softmax_backward(ctx, TJ_DTYPE_F32, 0, 100, 0, 0, 0, 0, 0, 0, NULL, NULL),
                   TJ_OK);
  ck_assert_int_eq(tj_context_synchronize(ctx), TJ_OK);
  /* The calls that succeeded wrote dx's rows (400 floats at offset 0) from
   * poison (NaN); every byte past them must be untouched. */
  TjMatrix after;
  ck_assert(matrix_alloc(&after, TJ_DTYPE_F32, 1, (int64_t)(bytes / 4), (int64_t)(bytes / 4), 0));
  ck_assert_int_eq(tj_copy_to_host(ctx, after.data, buf, bytes), TJ_OK);
  const size_t touched = 400 * 4;
  ck_assert_mem_eq((char *)after.data + touched, (char *)poison.data + touched, bytes - touched);
  matrix_free(&after);
  matrix_free(&poison);
  tj_device_free(ctx, buf);
  tj_context_destroy(ctx);
}
END_TEST

/* --------------------------------------------------- context options */

static void expect_create_failure(tj_context_options o, tj_status want, const char *part) {
  tj_context *ctx = (tj_context *)1;
  tj_status st = tj_context_create(&o, &ctx);
  ck_assert_msg(st == want, "device %d arch %d isa %d: %s (%s)", o.device, o.arch, o.ptx_version,
                tj_status_string(st), tj_context_error(NULL));
  ck_assert_ptr_null(ctx);
  assert_message(NULL, part);
  fprintf(stderr, "context options refused: %s\n", tj_context_error(NULL));
}

/* ------------------------------------------------- the embedding scenario */

START_TEST(a_misspecialized_launch_is_refused_and_the_context_lives) {
  tj_context *ctx = gpu_context(NULL);
  tj_program *p;
  tj_spec *s;
  ck_assert_int_eq(tj_program_parse(logsoftmax_text, strlen(logsoftmax_text), &p), TJ_OK);
  tj_spec_options o = {.n = 31, .dtype = TJ_DTYPE_F32, .align = 16};
  ck_assert_msg(tj_specialize(p, &o, &s) == TJ_OK, "%s", tj_program_error(p));
  tj_kernel *k = NULL;
  ck_assert_msg(tj_compile(ctx, s, TJ_BACKEND_PTX, &k) == TJ_OK, "%s", tj_context_error(ctx));
  enum { ROWS = 64, N = 31 };
  uint64_t x = 0, y = 0;
  ck_assert_int_eq(tj_device_alloc(ctx, ROWS * 32 * 4, &x), TJ_OK);
  ck_assert_int_eq(tj_device_alloc(ctx, ROWS * 32 * 4, &y), TJ_OK);
  float host[ROWS * 32];
  for (int i = 0; i < ROWS * 32; i++) host[i] = (float)((i * 7) % 13) - 6.0f;
  ck_assert_int_eq(tj_copy_to_device(ctx, x, host, sizeof host), TJ_OK);
  /* Rows of 31 floats, 124 bytes apart: refused, nothing launched. */
  tj_arg args[5] = {{TJ_ARG_INT, {.i = (int64_t)y}, 0},
                    {TJ_ARG_INT, {.i = (int64_t)x}, 0},
                    {TJ_ARG_INT, {.i = N}, 0},
                    {TJ_ARG_INT, {.i = N}, 0},
                    {TJ_ARG_INT, {.i = 0}, 0}};
  ck_assert_int_eq(tj_launch(ctx, k, args, 5, ROWS, NULL), TJ_ERR_INVALID_ARGUMENT);
  assert_message(ctx, "argument 2 (stride) = 31");
  assert_message(ctx, "ALIGN = 16");
  args[1].u.i = (int64_t)x + 4; /* a misaligned pointer too */
  args[2].u.i = 32;
  ck_assert_int_eq(tj_launch(ctx, k, args, 5, ROWS, NULL), TJ_ERR_INVALID_ARGUMENT);
  assert_message(ctx, "argument 1 (x)");
  /* The context still works: rows 32 floats apart launch and are right. */
  args[1].u.i = (int64_t)x;
  ck_assert_msg(tj_launch(ctx, k, args, 5, ROWS, NULL) == TJ_OK, "%s", tj_context_error(ctx));
  ck_assert_msg(tj_context_synchronize(ctx) == TJ_OK, "%s", tj_context_error(ctx));
  float out[ROWS * 32];
  ck_assert_int_eq(tj_copy_to_host(ctx, out, y, sizeof out), TJ_OK);
  for (int r = 0; r < ROWS; r++) {
    double max = -INFINITY, sum = 0;
    for (int c = 0; c < N; c++) max = fmax(max, host[r * 32 + c]);
    for (int c = 0; c < N; c++) sum += exp(host[r * 32 + c] - max);
    for (int c = 0; c < N; c++) {
      double want = host[r * 32 + c] - max - log(sum);
      ck_assert_msg(fabs(out[r * 32 + c] - want) <= 1e-5 + 1e-5 * fabs(want),
                    "row %d col %d: %g, want %g", r, c, out[r * 32 + c], want);
    }
  }
  tj_device_free(ctx, x);
  tj_device_free(ctx, y);
  tj_spec_destroy(s);
  tj_program_destroy(p);
  tj_context_destroy(ctx);
}
END_TEST

START_TEST(context_options_are_checked) {
  tj_context *ctx = gpu_context(NULL);
  tj_device_info info;
  ck_assert_int_eq(tj_context_device_info(ctx, &info), TJ_OK);
  tj_context_destroy(ctx);
  expect_create_failure((tj_context_options){.device = 0, .arch = 72}, TJ_ERR_UNSUPPORTED,
                        "not in the code generator's PTX table");
  expect_create_failure((tj_context_options){.device = 0, .arch = info.arch + 1000},
                        TJ_ERR_UNSUPPORTED, "newer than the device");
  expect_create_failure((tj_context_options){.device = 0, .ptx_version = 99}, TJ_ERR_UNSUPPORTED,
                        "loads up to");
  expect_create_failure((tj_context_options){.device = 999}, TJ_ERR_NO_DEVICE,
                        "no CUDA device 999");
  expect_create_failure((tj_context_options){.device = -7}, TJ_ERR_INVALID_ARGUMENT, "device -7");
}
END_TEST

/* A request for an ISA below the cluster kernels' (8.1: st.async) leaves
 * the device without clusters: rows that would take a cluster run in
 * another shape, and right; the default context keeps them on sm_90. */
START_TEST(an_isa_below_clusters_plans_none) {
  tj_context *ctx = gpu_context(NULL);
  tj_device_info info;
  ck_assert_int_eq(tj_context_device_info(ctx, &info), TJ_OK);
  bool clusters = info.cluster_launch != 0;
  tj_context_destroy(ctx);
  if (info.arch < 90) return;
  ck_assert_msg(clusters, "%s (sm_%d): no clusters at the driver's ISA", info.name, info.arch);
  ctx = gpu_context(&(tj_context_options){.device = 0, .ptx_version = 80});
  ck_assert_int_eq(tj_context_device_info(ctx, &info), TJ_OK);
  ck_assert_int_eq(info.cluster_launch, 0);
  static const int64_t ns[] = {65536, 131072};
  GpuCase cases[2 * 3];
  int count = 0;
  for (tj_dtype d = TJ_DTYPE_F32; d < TJ_DTYPE_COUNT; d++)
    for (int i = 0; i < 2; i++)
      cases[count++] = (GpuCase){
          .dtype = d, .m = 3, .n = ns[i], .seed = test_seed(8, (uint64_t)d, (uint64_t)i)};
  GpuTally tally = {0};
  gpu_run_cases(ctx, cases, count, NULL, false, &tally);
  gpu_report("PTX ISA 8.0, no clusters", &tally);
  tj_context_destroy(ctx);
}
END_TEST

START_TEST(older_arch_targets_run) {
  static const int archs[] = {75, 80};
  static const int64_t ns[] = {1, 100, 1000, 5000, 40000};
  for (int a = 0; a < 2; a++) {
    tj_context *ctx = gpu_context(&(tj_context_options){.device = 0, .arch = archs[a]});
    GpuCase cases[3 * 5];
    int count = 0;
    for (tj_dtype d = TJ_DTYPE_F32; d < TJ_DTYPE_COUNT; d++)
      for (int i = 0; i < 5; i++)
        cases[count++] = (GpuCase){.dtype = d,
                                   .m = 3,
                                   .n = ns[i],
                                   .seed = test_seed(7, (uint64_t)archs[a], (uint64_t)count)};
    GpuTally tally = {0};
    gpu_run_cases(ctx, cases, count, NULL, false, &tally);
    char name[32];
    snprintf(name, sizeof name, "PTX for sm_%d", archs[a]);
    gpu_report(name, &tally);
    tj_context_destroy(ctx);
  }
}
END_TEST

START_TEST(tiny_cache_evicts_and_stays_correct) {
  tj_context *ctx = gpu_context(&(tj_context_options){.device = 0, .cache_capacity = 1});
  GpuCase cases[2 * 14];
  int count = 0;
  for (int round = 0; round < 2; round++)
    for (int k = 0; k < 14; k++) /* 14 widths, a dozen kernels */
      cases[count++] = (GpuCase){.dtype = TJ_DTYPE_F32,
                                 .m = 5,
                                 .n = ((int64_t)1 << k) + (k % 2),
                                 .seed = test_seed(9, (uint64_t)round, (uint64_t)k)};
  GpuTally tally = {0};
  gpu_run_cases(ctx, cases, count, NULL, false, &tally);
  tj_cache_stats s;
  tj_context_cache_stats(ctx, &s);
  fprintf(stderr, "tiny cache: %llu misses, %llu evictions, %lld loaded\n",
          (unsigned long long)s.misses, (unsigned long long)s.evictions, (long long)s.entries);
  ck_assert_uint_gt(s.evictions, 0);
  ck_assert_int_le(s.entries, 1 + 8); /* the capacity, plus the kernels tj_softmax's function
                                         keeps (RT_ROW_VARIANTS) */
  tj_context_destroy(ctx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("gpu errors");
  TCase *t = tcase_create("errors");
  tcase_set_timeout(t, 600);
  tcase_add_test(t, invalid_ptx_gives_driver_error_and_log);
  tcase_add_test(t, hand_written_ptx_loads_and_launches);
  tcase_add_test(t, hand_written_ptx_abi_errors);
  tcase_add_test(t, bad_softmax_arguments_launch_nothing);
  tcase_add_test(t, bad_backward_arguments_launch_nothing);
  tcase_add_test(t, a_misspecialized_launch_is_refused_and_the_context_lives);
  tcase_add_test(t, context_options_are_checked);
  tcase_add_test(t, older_arch_targets_run);
  tcase_add_test(t, an_isa_below_clusters_plans_none);
  tcase_add_test(t, tiny_cache_evicts_and_stays_correct);
  suite_add_tcase(s, t);
  return gpu_main(s);
}
