/*
 * test_tools.c — the command-line tools' arguments and their failures, run
 * as child processes from the build's tools/ folder (no GPU needed):
 *   - numbers are decimal integers within each option's range, and -D takes
 *     the ranges of the options it stands for: NUM_WARPS=4294967297 is a
 *     usage error (exit 2) that says the range, not NUM_WARPS=1; "-n 010"
 *     is ten, "0x10" and " 8" are refused;
 *   - tj-softmax --interp whose buffers do not fit says which one, with its
 *     size, and exits 1 at once, before interpreting anything. The child
 *     runs under an address-space limit (RLIMIT_AS), or, in an ASan build
 *     (which reserves terabytes of address space), under ASan's own cap on
 *     any one allocation.
 */
#define _POSIX_C_SOURCE 200809L

#include "ir/ir.h"

#include "support.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define TJ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TJ_ASAN 1
#endif
#endif

#define OUTPUT_MAX 16384

typedef struct Run {
  int status; /* the exit status; -1 if it did not exit */
  double seconds;
  char out[OUTPUT_MAX], err[OUTPUT_MAX];
} Run;

static double now(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void slurp(int fd, char *out) {
  ssize_t n = pread(fd, out, OUTPUT_MAX - 1, 0);
  out[n > 0 ? n : 0] = '\0';
  close(fd);
}

static int temp_file(void) {
  char name[] = "/tmp/tj_toolsXXXXXX";
  int fd = mkstemp(name);
  ck_assert_int_ge(fd, 0);
  unlink(name);
  return fd;
}

/* How much memory a child may have: in all (its address space) or, in an
 * ASan build, in any one allocation. {0, 0}: no limit. */
typedef struct Limit {
  long total_mb, one_mb;
} Limit;

static void limit_memory(Limit limit) {
#ifdef TJ_ASAN
  char options[128];
  snprintf(options, sizeof options, "allocator_may_return_null=1:max_allocation_size_mb=%ld",
           limit.one_mb);
  setenv("ASAN_OPTIONS", options, 1);
#else
  struct rlimit r = {(rlim_t)limit.total_mb << 20, (rlim_t)limit.total_mb << 20};
  if (setrlimit(RLIMIT_AS, &r) != 0) _exit(126);
#endif
}

/* Runs TJ_BINARY_DIR/tools/argv[0] with the rest of argv (NULL-ended),
 * within limit. */
static void run_limited(Run *r, const char *const *argv, Limit limit) {
  char path[4096], *args[32];
  snprintf(path, sizeof path, "%s/tools/%s", TJ_BINARY_DIR, argv[0]);
  ck_assert_msg(access(path, X_OK) == 0, "%s is not built", path);
  int n = 0;
  args[n++] = path;
  for (int i = 1; argv[i] && n < 31; i++) args[n++] = (char *)(uintptr_t)argv[i];
  args[n] = NULL;
  int out = temp_file(), err = temp_file();
  fflush(NULL);
  double start = now();
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    if (dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(125);
    if (limit.total_mb > 0) limit_memory(limit);
    execv(path, args);
    _exit(127);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  r->seconds = now() - start;
  r->status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  slurp(out, r->out);
  slurp(err, r->err);
}

static void run_tool(Run *r, const char *const *argv) { run_limited(r, argv, (Limit){0, 0}); }

static void assert_contains(const char *text, const char *want) {
  ck_assert_msg(strstr(text, want) != NULL, "'%s' is missing from:\n%s", want, text);
}

/* ---- numbers ------------------------------------------------------------ */

/* A program whose specialization is only its constants. */
static const char *ir_file(char *path, size_t size) {
  snprintf(path, size, "%s/tests/test_tools_k.tj", TJ_BINARY_DIR);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs("kernel k\nconst X\n%y : ptr<f32> = param y\n%i : tile<i32,BLOCK> = arange\n"
        "%c : i32 = constexpr X\n%f : f32 = cast %c\nstore %y, %i, %f\n",
        f);
  ck_assert_int_eq(fclose(f), 0);
  return path;
}

START_TEST(dump_ptx_refuses_numbers_out_of_range) {
  char path[4096];
  ir_file(path, sizeof path);
  static Run r;
  const char *const too_many_warps[] = {
      "dump-ptx", "--ir", path, "-n", "8", "-D", "X=1", "-D", "NUM_WARPS=4294967297", NULL};
  run_tool(&r, too_many_warps);
  ck_assert_int_eq(r.status, 2);
  assert_contains(r.err, "dump-ptx: NUM_WARPS takes a decimal integer from 1 to 32, not "
                         "'4294967297'");
  ck_assert_str_eq(r.out, "");
  const char *const bad[][2] = {{"-D", "BLOCK=0"},
                                {"-D", "ALIGN=32"},
                                {"--warps", "33"},
                                {"--block", "1073741825"},
                                {"--cluster", "17"},
                                {"-D", "SPLIT=0"},
                                {"-D", "X=9223372036854775808"},
                                {"-n", "-1"}};
  for (size_t i = 0; i < TJ_COUNTOF(bad); i++) {
    const char *const argv[] = {"dump-ptx", "--ir", path, "-n", "8", bad[i][0], bad[i][1], NULL};
    run_tool(&r, argv);
    ck_assert_msg(r.status == 2, "%s %s: exit %d\n%s", bad[i][0], bad[i][1], r.status, r.err);
    assert_contains(r.err, "takes a decimal integer from");
  }
  /* In range, NUM_WARPS is what was asked for: 32 * 2 threads. */
  const char *const two_warps[] = {"dump-ptx", "--ir", path, "-n",          "8",
                                   "-D",       "X=1",  "-D", "NUM_WARPS=2", NULL};
  run_tool(&r, two_warps);
  ck_assert_msg(r.status == 0, "%s", r.err);
  assert_contains(r.out, ".reqntid 64, 1, 1");
  remove(path);
}
END_TEST

START_TEST(numbers_are_decimal) {
  static Run r;
  const char *const ten[] = {"dump-ptx", "softmax", "-n", "010", "--emit", "ir", NULL};
  run_tool(&r, ten);
  ck_assert_msg(r.status == 0, "%s", r.err);
  assert_contains(r.out, "const BLOCK = 16\n"); /* n = 10, not octal 8 */
  const char *const not_decimal[] = {"0x10", " 8", "+8", "8 ", "1e3", ""};
  for (size_t i = 0; i < TJ_COUNTOF(not_decimal); i++) {
    const char *const argv[] = {"dump-ptx", "softmax", "-n", not_decimal[i], NULL};
    run_tool(&r, argv);
    ck_assert_msg(r.status == 2, "-n '%s': exit %d", not_decimal[i], r.status);
    const char *const softmax[] = {"tj-softmax", "--interp", "-m", "1", "-n", not_decimal[i], NULL};
    run_tool(&r, softmax);
    ck_assert_msg(r.status == 2, "tj-softmax -n '%s': exit %d", not_decimal[i], r.status);
    assert_contains(r.err, "tj-softmax: -n takes a decimal integer from 0 to 2147483647");
  }
  const char *const softmax_ten[] = {"tj-softmax", "--interp", "-m", "2", "-n",
                                     "010",        "--seed",   "7",  NULL};
  run_tool(&r, softmax_ten);
  ck_assert_msg(r.status == 0, "%s%s", r.out, r.err);
  assert_contains(r.out, "M=2 N=10 seed=7");
  const char *const bench[] = {"tj-bench", "--codegen", "--iters", "0x10", NULL};
  run_tool(&r, bench);
  ck_assert_int_eq(r.status, 2);
  assert_contains(r.err, "tj-bench: --iters takes a decimal integer from 1 to 100000000, not '0x10'");
}
END_TEST

/* ---- memory ------------------------------------------------------------- */

/* -n 2^28: x and y of 1 GiB each, a reference row of 2 GiB. With room for
 * x and y only, the reference row is the one that fails; it used to fail
 * silently after interpreting for most of a minute. */
START_TEST(tj_softmax_says_what_it_cannot_allocate) {
  static Run r;
  const char *const argv[] = {"tj-softmax", "--interp", "-m", "1", "-n", "268435456", NULL};
  run_limited(&r, argv, (Limit){3072, 1536});
  ck_assert_msg(r.status == 1, "exit %d\n%s%s", r.status, r.out, r.err);
  assert_contains(r.err, "tj-softmax: cannot allocate 2147483648 bytes for the reference row");
  ck_assert_msg(r.seconds < 10.0, "it took %.1f s to say so", r.seconds);
  run_limited(&r, argv, (Limit){512, 512});
  ck_assert_msg(r.status == 1, "exit %d\n%s%s", r.status, r.out, r.err);
  assert_contains(r.err, "tj-softmax: cannot allocate 1073741824 bytes for x");
  ck_assert_str_eq(r.out, "");
}
END_TEST

static Suite *tools_suite(void) {
  Suite *s = suite_create("tools");
  TCase *c = tcase_create("arguments");
  tcase_set_timeout(c, 60);
  tcase_add_test(c, dump_ptx_refuses_numbers_out_of_range);
  tcase_add_test(c, numbers_are_decimal);
  tcase_add_test(c, tj_softmax_says_what_it_cannot_allocate);
  suite_add_tcase(s, c);
  return s;
}

int main(void) { return test_run_suite(tools_suite()); }
