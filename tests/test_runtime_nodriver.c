/*
 * test_runtime_nodriver.c — the runtime on a machine without a CUDA driver
 * (CI), and the parts of it that need no driver.
 *
 *   - With TILEJIT_LIBCUDA naming a file that does not exist (set in main,
 *     before anything loads), every GPU entry point returns TJ_ERR_NO_DRIVER
 *     with a message naming the library, and PTX generation still works.
 *   - A library without cuGetProcAddress_v2 is no driver either (checked in
 *     a child process, since the driver is loaded once per process).
 *   - Cache keys: each field changes the key, equal inputs give equal keys,
 *     and equal specializations give byte-identical PTX.
 *   - Reading an .entry's parameters and .reqntid from PTX text, and the
 *     driver version -> PTX ISA table.
 */
#define _POSIX_C_SOURCE 200809L

#include "runtime/runtime.h"

#include "support.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MISSING_LIBCUDA "/nonexistent/tilejit-test/libcuda.so.1"

static void assert_no_driver(tj_status st, const char *what) {
  ck_assert_msg(st == TJ_ERR_NO_DRIVER, "%s: %s, want no CUDA driver", what, tj_status_string(st));
  const char *msg = tj_context_error(NULL);
  ck_assert_msg(strstr(msg, "no CUDA driver") && strstr(msg, MISSING_LIBCUDA), "%s: message \"%s\"",
                what, msg);
}

static tj_spec *softmax_spec(tj_softmax_template which, tj_dtype dtype, int64_t n, int align,
                             int warps, tj_program **p) {
  tj_spec_options so;
  tj_spec *s = NULL;
  ck_assert_int_eq(tj_softmax_program(which, n, p), TJ_OK);
  ck_assert_int_eq(softmax_spec_options(which, dtype, 65536, n, 0, 0, &so), TJ_OK);
  if (align) so.align = align;
  if (warps) so.num_warps = warps;
  ck_assert_msg(tj_specialize(*p, &so, &s) == TJ_OK, "%s", tj_program_error(*p));
  return s;
}

START_TEST(every_gpu_entry_point_says_no_driver) {
  tj_context *ctx = (tj_context *)1;
  assert_no_driver(tj_context_create(NULL, &ctx), "tj_context_create");
  ck_assert_ptr_null(ctx);
  tj_context_options o = {.device = 0};
  assert_no_driver(tj_context_create(&o, &ctx), "tj_context_create(device 0)");
  ck_assert_str_eq(tj_status_string(TJ_ERR_NO_DRIVER), "no CUDA driver");

  tj_device_info info;
  tj_cache_stats stats;
  tj_kernel_report report;
  tj_kernel *k = NULL;
  uint64_t ptr = 0;
  float host[4] = {0};
  tj_arg arg = {TJ_ARG_INT, {.i = 1}, 0};
  assert_no_driver(tj_context_device_info(NULL, &info), "tj_context_device_info");
  assert_no_driver(tj_context_cache_stats(NULL, &stats), "tj_context_cache_stats");
  assert_no_driver(tj_context_synchronize(NULL), "tj_context_synchronize");
  assert_no_driver(tj_device_alloc(NULL, 16, &ptr), "tj_device_alloc");
  assert_no_driver(tj_device_free(NULL, 0x1000), "tj_device_free");
  assert_no_driver(tj_copy_to_device(NULL, 0x1000, host, sizeof host), "tj_copy_to_device");
  assert_no_driver(tj_copy_to_host(NULL, host, 0x1000, sizeof host), "tj_copy_to_host");
  assert_no_driver(tj_load_ptx(NULL, ".version 7.8", "k", &k), "tj_load_ptx");
  assert_no_driver(tj_launch(NULL, k, &arg, 1, 1, NULL), "tj_launch");
  assert_no_driver(tj_kernel_describe(NULL, &report), "tj_kernel_describe");
  assert_no_driver(tj_softmax(NULL, TJ_DTYPE_F32, 4, 4, 0x1000, 4, 0x2000, 4, NULL, NULL),
                   "tj_softmax");
  assert_no_driver(tj_softmax(NULL, TJ_DTYPE_F32, 0, 4, 0, 4, 0, 4, NULL, NULL), "tj_softmax(m 0)");

  tj_program *p = NULL;
  tj_spec *s = softmax_spec(TJ_SOFTMAX_AUTO, TJ_DTYPE_F32, 100, 0, 0, &p);
  assert_no_driver(tj_compile(NULL, s, TJ_BACKEND_PTX, &k), "tj_compile");
  ck_assert_ptr_null(k);
  ck_assert_str_eq(tj_kernel_log(NULL), "");
  tj_context_destroy(NULL);
  tj_spec_destroy(s);
  tj_program_destroy(p);
}
END_TEST

START_TEST(ptx_generation_still_works) {
  tj_context *ctx = NULL;
  ck_assert_int_eq(tj_context_create(NULL, &ctx), TJ_ERR_NO_DRIVER);
  tj_program *p = NULL;
  tj_spec *s = softmax_spec(TJ_SOFTMAX_AUTO, TJ_DTYPE_F32, 1000, 0, 0, &p);
  tj_codegen_options co = {.arch = 90};
  char *ptx = NULL;
  tj_kernel_info info;
  ck_assert_msg(tj_emit_ptx(s, &co, &ptx, &info) == TJ_OK, "%s", tj_spec_error(s));
  ck_assert_ptr_nonnull(strstr(ptx, ".entry"));
  ck_assert_ptr_nonnull(strstr(ptx, ".target sm_90"));
  ck_assert_int_eq(info.param_count, 5);
  /* The runtime's reader agrees with the generated kernel's ABI. */
  uint8_t kinds[RT_MAX_PARAMS];
  int count = 0, reqntid = 0;
  char why[128];
  ck_assert_msg(rt_ptx_signature(ptx, info.entry, kinds, &count, &reqntid, why, sizeof why), "%s",
                why);
  ck_assert_int_eq(count, 6);
  ck_assert_int_eq(reqntid, info.shape.threads);
  const uint8_t want[6] = {RT_PARAM_B64, RT_PARAM_B64, RT_PARAM_B64,
                           RT_PARAM_B64, RT_PARAM_I32, RT_PARAM_B64};
  ck_assert_mem_eq(kinds, want, sizeof want);
  tj_free(ptx);
  tj_spec_destroy(s);
  tj_program_destroy(p);
}
END_TEST

/* In a fresh process (the driver loads once per process): this program run
 * with --probe-libm, which points TILEJIT_LIBCUDA at libm. */
static int probe_libm(void) {
  setenv(RT_LIBCUDA_ENV, "libm.so.6", 1);
  tj_context *ctx;
  tj_status st = tj_context_create(NULL, &ctx);
  return st == TJ_ERR_NO_DRIVER && strstr(tj_context_error(NULL), "cuGetProcAddress_v2") ? 0 : 1;
}

START_TEST(a_library_without_get_proc_address_is_no_driver) {
  pid_t child = fork();
  ck_assert_int_ge(child, 0);
  if (child == 0) {
    execl("/proc/self/exe", "test_runtime_nodriver", "--probe-libm", (char *)NULL);
    _exit(2);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(child, &status, 0), child);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "probe exit status %d", status);
}
END_TEST

/* ---------------------------------------------------------------- keys */

static char *key_of(const char *spec_key, RtKeyParts parts) {
  char *k = rt_key_build(spec_key, &parts);
  ck_assert_ptr_nonnull(k);
  return k;
}

START_TEST(each_key_field_changes_the_key) {
  const char *spec = "tilejit " TJ_VERSION_STRING "|softmax#1f2e3d4c5b6a7988|DTYPE=f32|BLOCK=1024";
  RtKeyParts base = {.arch = 90, .ptx_version = 0, .backend = TJ_BACKEND_PTX, .context_id = 1};
  RtKeyParts variants[6];
  for (int i = 0; i < 6; i++) variants[i] = base;
  variants[0].arch = 80;
  variants[1].ptx_version = 83;
  variants[2].backend = TJ_BACKEND_NVRTC;
  variants[2].nvrtc_version = 13000;
  variants[3] = variants[2];
  variants[3].nvrtc_version = 12080;
  variants[4].context_id = 2;
  char *keys[8];
  keys[0] = key_of(spec, base);
  for (int i = 0; i < 5; i++) keys[i + 1] = key_of(spec, variants[i]);
  keys[6] =
      key_of("tilejit " TJ_VERSION_STRING "|softmax#1f2e3d4c5b6a7988|DTYPE=f32|BLOCK=2048", base);
  keys[7] = key_of(spec, base);
  for (int i = 0; i < 7; i++)
    for (int j = i + 1; j < 7; j++)
      ck_assert_msg(strcmp(keys[i], keys[j]) != 0, "%s == %s", keys[i], keys[j]);
  ck_assert_str_eq(keys[0], keys[7]);
  ck_assert_ptr_nonnull(strstr(keys[0], TJ_VERSION_STRING));
  ck_assert_str_eq(keys[0], "tilejit " TJ_VERSION_STRING
                            "|softmax#1f2e3d4c5b6a7988|DTYPE=f32|BLOCK=1024|sm_90|isa=0|ptx|ctx=1");
  for (int i = 0; i < 8; i++) tj_free(keys[i]);
}
END_TEST

START_TEST(equal_inputs_give_equal_keys_and_ptx) {
  tj_program *p1, *p2, *p3;
  tj_spec *a = softmax_spec(TJ_SOFTMAX_AUTO, TJ_DTYPE_F16, 3000, 16, 0, &p1);
  tj_spec *b = softmax_spec(TJ_SOFTMAX_AUTO, TJ_DTYPE_F16, 3000, 16, 0, &p2);
  ck_assert_str_eq(tj_spec_key(a), tj_spec_key(b));
  tj_codegen_options co = {.arch = 90};
  char *pa, *pb;
  ck_assert_int_eq(tj_emit_ptx(a, &co, &pa, NULL), TJ_OK);
  ck_assert_int_eq(tj_emit_ptx(b, &co, &pb, NULL), TJ_OK);
  ck_assert_str_eq(pa, pb);
  /* Every value the runtime sets on the spec shows in its key. */
  struct {
    tj_softmax_template which;
    tj_dtype dtype;
    int align, warps;
  } changes[] = {{TJ_SOFTMAX_ONLINE, TJ_DTYPE_F16, 16, 0},
                 {TJ_SOFTMAX_AUTO, TJ_DTYPE_BF16, 16, 0},
                 {TJ_SOFTMAX_AUTO, TJ_DTYPE_F16, 2, 0},
                 {TJ_SOFTMAX_AUTO, TJ_DTYPE_F16, 16, 2}};
  for (size_t i = 0; i < sizeof changes / sizeof changes[0]; i++) {
    tj_spec *c = softmax_spec(changes[i].which, changes[i].dtype, 3000, changes[i].align,
                              changes[i].warps, &p3);
    ck_assert_msg(strcmp(tj_spec_key(a), tj_spec_key(c)) != 0, "change %zu: %s", i, tj_spec_key(c));
    tj_spec_destroy(c);
    tj_program_destroy(p3);
  }
  tj_free(pa);
  tj_free(pb);
  tj_spec_destroy(a);
  tj_spec_destroy(b);
  tj_program_destroy(p1);
  tj_program_destroy(p2);
}
END_TEST

/* ---------------------------------------------------- PTX signatures */

static const char hand_ptx[] =
    ".version 7.8\n.target sm_90\n.address_size 64\n"
    "// a comment with .entry decoy(\n"
    ".visible .entry other(.param .u64 a)\n{\n\tret;\n}\n"
    ".visible .entry scale(\n"
    "\t.param .u64 .ptr .global .align 16 out, // pointer\n"
    "\t.param .u32 n,\n\t.param .f32 factor, /* inline */ .param .f64 d,\n"
    "\t.param .s64 stride,\n\t.param .u64 count\n)\n.reqntid 128, 1, 1\n{\n\tret;\n}\n";

START_TEST(reads_entry_signatures) {
  uint8_t kinds[RT_MAX_PARAMS];
  int count = -1, reqntid = -1;
  char why[128];
  ck_assert_msg(rt_ptx_signature(hand_ptx, "scale", kinds, &count, &reqntid, why, sizeof why), "%s",
                why);
  ck_assert_int_eq(count, 6);
  ck_assert_int_eq(reqntid, 128);
  const uint8_t want[6] = {RT_PARAM_B64, RT_PARAM_I32, RT_PARAM_F32,
                           RT_PARAM_F64, RT_PARAM_B64, RT_PARAM_B64};
  ck_assert_mem_eq(kinds, want, sizeof want);
  ck_assert(rt_ptx_signature(hand_ptx, "other", kinds, &count, &reqntid, why, sizeof why));
  ck_assert_int_eq(count, 1);
  ck_assert_int_eq(reqntid, 0); /* the .reqntid after the body is scale's */
  ck_assert(!rt_ptx_signature(hand_ptx, "missing", kinds, &count, &reqntid, why, sizeof why));
  ck_assert_ptr_nonnull(strstr(why, "no .entry missing"));
  ck_assert(!rt_ptx_signature(hand_ptx, "scal", kinds, &count, &reqntid, why, sizeof why));
  const char *bad_type = ".entry k(.param .u16 h)\n{\n}\n";
  ck_assert(!rt_ptx_signature(bad_type, "k", kinds, &count, &reqntid, why, sizeof why));
  const char *two_dims = ".entry k(.param .u64 c)\n.reqntid 32, 2\n{\n}\n";
  ck_assert(!rt_ptx_signature(two_dims, "k", kinds, &count, &reqntid, why, sizeof why));
}
END_TEST

START_TEST(driver_version_to_ptx_isa) {
  ck_assert_int_eq(rt_driver_max_ptx(13000), 90);
  ck_assert_int_eq(rt_driver_max_ptx(13020), 91);
  ck_assert_int_eq(rt_driver_max_ptx(12090), 88);
  ck_assert_int_eq(rt_driver_max_ptx(12080), 87);
  ck_assert_int_eq(rt_driver_max_ptx(12060), 85);
  ck_assert_int_eq(rt_driver_max_ptx(12000), 80);
  ck_assert_int_eq(rt_driver_max_ptx(11080), 78);
  ck_assert_int_eq(rt_driver_max_ptx(10020), 0);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("runtime without a driver");
  TCase *t = tcase_create("no driver");
  tcase_add_test(t, every_gpu_entry_point_says_no_driver);
  tcase_add_test(t, ptx_generation_still_works);
  tcase_add_test(t, a_library_without_get_proc_address_is_no_driver);
  suite_add_tcase(s, t);
  TCase *k = tcase_create("keys");
  tcase_add_test(k, each_key_field_changes_the_key);
  tcase_add_test(k, equal_inputs_give_equal_keys_and_ptx);
  tcase_add_test(k, reads_entry_signatures);
  tcase_add_test(k, driver_version_to_ptx_isa);
  suite_add_tcase(s, k);
  return s;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--probe-libm") == 0) return probe_libm();
  /* Before anything loads the driver: make sure there is none. */
  setenv(RT_LIBCUDA_ENV, MISSING_LIBCUDA, 1);
  return test_run_suite(suite());
}
