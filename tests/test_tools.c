/*
 * test_tools.c — the command-line tools' arguments and their failures, run
 * as child processes from the build's tools/ folder (no GPU needed; the GPU
 * modes run with TILEJIT_LIBCUDA naming no file, as on a machine without a
 * driver):
 *   - the conventions of every tool: --help on stdout and exit 0,
 *     --version from the library, exit 2 for a usage error and 3 for no
 *     CUDA driver or GPU;
 *   - numbers are decimal integers within each option's range, and -D takes
 *     the ranges of the options it stands for: NUM_WARPS=4294967297 is a
 *     usage error (exit 2) that says the range, not NUM_WARPS=1; "-n 010"
 *     is ten, "0x10" and " 8" are refused; -DNAME=V and -D NAME=V agree;
 *   - files: "-" is stdin (--ir -) or stdout (-o -, --csv -); a NUL byte,
 *     a directory, a file over 64 MiB and an endless one (/dev/zero) are
 *     refused with a message that says so, and nothing is written;
 *   - an option of another mode is a usage error, and tj-bench --codegen
 *     writes its --csv;
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
#include <fcntl.h>
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

/* What a child gets besides its arguments. */
typedef struct Setup {
  Limit limit;
  const char *input; /* the file on its stdin; NULL: /dev/null */
} Setup;

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

/* Runs TJ_BINARY_DIR/tools/argv[0] with the rest of argv (NULL-ended), set
 * up as asked, with no CUDA driver. */
static void run_with(Run *r, const char *const *argv, Setup setup) {
  char path[4096], *args[32];
  snprintf(path, sizeof path, "%s/tools/%s", TJ_BINARY_DIR, argv[0]);
  ck_assert_msg(access(path, X_OK) == 0, "%s is not built", path);
  int n = 0;
  args[n++] = path;
  for (int i = 1; argv[i] && n < 31; i++) args[n++] = (char *)(uintptr_t)argv[i];
  args[n] = NULL;
  int out = temp_file(), err = temp_file();
  const char *input = setup.input ? setup.input : "/dev/null";
  int in = open(input, O_RDONLY);
  ck_assert_msg(in >= 0, "cannot open %s", input);
  fflush(NULL);
  double start = now();
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(125);
    if (setenv("TILEJIT_LIBCUDA", TJ_BINARY_DIR "/tests/no-such-libcuda.so", 1) != 0) _exit(124);
    if (setup.limit.total_mb > 0) limit_memory(setup.limit);
    execv(path, args);
    _exit(127);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  r->seconds = now() - start;
  r->status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  close(in);
  slurp(out, r->out);
  slurp(err, r->err);
}

static void run_limited(Run *r, const char *const *argv, Limit limit) {
  run_with(r, argv, (Setup){limit, NULL});
}

static void run_tool(Run *r, const char *const *argv) { run_limited(r, argv, (Limit){0, 0}); }

/* Runs argv and wants exit status want, with nothing on stdout unless the
 * run succeeds. */
static void expect_status(Run *r, const char *const *argv, int want) {
  run_tool(r, argv);
  ck_assert_msg(r->status == want, "%s %s: exit %d, want %d\n%.1500s%.1500s", argv[0],
                argv[1] ? argv[1] : "", r->status, want, r->out, r->err);
  if (want != 0) ck_assert_msg(r->out[0] == '\0', "%s wrote to stdout:\n%.1500s", argv[0], r->out);
}

static void assert_contains(const char *text, const char *want) {
  ck_assert_msg(strstr(text, want) != NULL, "'%s' is missing from:\n%.3000s", want, text);
}

/* Writes len bytes of text to TJ_BINARY_DIR/tests/name; its path in path. */
static const char *write_file(const char *name, const char *text, size_t len, char *path,
                              size_t size) {
  snprintf(path, size, "%s/tests/%s", TJ_BINARY_DIR, name);
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(text, 1, len, f), len);
  ck_assert_int_eq(fclose(f), 0);
  return path;
}

/* A program whose specialization is only its constants; its store is the
 * last line. */
static const char program_k[] = "kernel k\nconst X\n%y : ptr<f32> = param y\n"
                                "%i : tile<i32,BLOCK> = arange\n%c : i32 = constexpr X\n"
                                "%f : f32 = cast %c\nstore %y, %i, %f\n";

static const char *ir_file(char *path, size_t size) {
  return write_file("test_tools_k.tj", program_k, strlen(program_k), path, size);
}

/* ---- conventions ---------------------------------------------------------- */

static const char *const tools[] = {"dump-ptx", "tj-softmax", "tj-bench", "tj-run"};

START_TEST(help_goes_to_stdout) {
  static Run r;
  char usage[64];
  for (size_t i = 0; i < TJ_COUNTOF(tools); i++) {
    const char *const long_help[] = {tools[i], "--help", NULL}, *const short_help[] = {tools[i],
                                                                                       "-h", NULL};
    snprintf(usage, sizeof usage, "usage: %s ", tools[i]);
    run_tool(&r, long_help);
    ck_assert_msg(r.status == 0, "%s --help: exit %d\n%s", tools[i], r.status, r.err);
    ck_assert_str_eq(r.err, "");
    assert_contains(r.out, usage);
    assert_contains(r.out, "--version");
    assert_contains(r.out,
                    "Exit status: 0 success, 1 a failed check or an error, 2 a usage error,\n"
                    "3 no CUDA driver or GPU.");
    run_tool(&r, short_help);
    ck_assert_int_eq(r.status, 0);
    assert_contains(r.out, usage);
  }
  /* Each option with its range, and the modes it applies to. */
  const char *const bench[] = {"tj-bench", "--help", NULL};
  run_tool(&r, bench);
  assert_contains(r.out, "--reps K");
  assert_contains(r.out, "[1..10000]");
  assert_contains(r.out, "(--codegen only)");
}
END_TEST

START_TEST(version_on_every_tool) {
  static Run r;
  char want[64];
  for (size_t i = 0; i < TJ_COUNTOF(tools); i++) {
    const char *const argv[] = {tools[i], "--version", NULL};
    snprintf(want, sizeof want, "%s (tilejit) %s\n", tools[i], tj_version());
    run_tool(&r, argv);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.out, want);
    ck_assert_str_eq(r.err, "");
  }
}
END_TEST

/* A bad flag is 2, whatever the tool; the message names it. */
START_TEST(usage_errors_exit_2) {
  static Run r;
  static const char *const cases[][4] = {
      {"dump-ptx", "--bogus", NULL, "unknown or ambiguous option '--bogus'"},
      {"tj-softmax", "-x", NULL, "unknown option '-x'"},
      {"tj-bench", "--reps", NULL, "--reps needs a value (K)"},
      {"dump-ptx", "sofmax", NULL, "unexpected argument 'sofmax'"},
      {"tj-bench", "--codegen=1", NULL, "--codegen=1: this option takes no value"},
      {"dump-ptx", "softmax", NULL, "softmax needs -n N"},
      {"dump-ptx", "-n", "8", "give softmax or --ir FILE"},
      {"tj-softmax", "-m", "8", "-n N is required"}};
  for (size_t i = 0; i < TJ_COUNTOF(cases); i++) {
    const char *const argv[] = {cases[i][0], cases[i][1], cases[i][2], NULL};
    expect_status(&r, argv, 2);
    assert_contains(r.err, cases[i][3]);
    assert_contains(r.err, "--help' lists the options");
  }
}
END_TEST

/* No driver (TILEJIT_LIBCUDA names no file) is 3, not 2: the GPU modes say
 * so, and the modes that need no GPU still run. */
START_TEST(no_gpu_exits_3) {
  static Run r;
  const char *const softmax[] = {"tj-softmax", "-m", "2", "-n", "8", NULL};
  expect_status(&r, softmax, 3);
  assert_contains(r.err, "no CUDA driver: run `tj-softmax --interp -m 2 -n 8` instead");
  const char *const latency[] = {"tj-bench", "--latency", NULL};
  expect_status(&r, latency, 3);
  assert_contains(r.err, "tj-bench: no CUDA driver");
  const char *const interp[] = {"tj-softmax", "--interp", "-m", "2", "-n", "8", NULL};
  expect_status(&r, interp, 0);
  assert_contains(r.out, "PASS");
  const char *const log[] = {"tj-softmax", "--interp", "--log-softmax", "-m", "3", "-n", "1000",
                             NULL};
  expect_status(&r, log, 0);
  assert_contains(r.out, "log_softmax#");
  assert_contains(r.out, "PASS");
  const char *const backward[] = {"tj-softmax", "--interp", "--backward", "-m", "3", "-n", "5000",
                                  "--dtype", "bf16", NULL};
  expect_status(&r, backward, 0);
  assert_contains(r.out, "softmax_backward#");
  assert_contains(r.out, "PASS");
  const char *const both[] = {"tj-softmax", "--interp", "--backward", "--log-softmax", "-m", "3",
                              "-n", "5", NULL};
  expect_status(&r, both, 2);
  assert_contains(r.err, "one op at a time");
  const char *const masked_gpu[] = {"tj-softmax", "--masked", "--causal", "-m",
                                    "2",          "-n",       "8",        NULL};
  expect_status(&r, masked_gpu, 3);
  assert_contains(r.err, "no CUDA driver");
}
END_TEST

/* tj-softmax --masked on the interpreter, checked by the tool against its
 * float64 reference: no mask; torch.tril's causal mask over two matrices
 * of 4 queries moved one column left, so that rows 0 and 4 keep nothing
 * (all 0); the bottom-right mask (offset N - R); and a wide row. */
START_TEST(tj_softmax_masked_runs_on_the_interpreter) {
  static Run r;
  static const char *const cases[][16] = {
      {"--scale", "0.5", "-m", "3", "-n", "3000", NULL},
      {"--causal", "--scale", "0.125", "--rows", "4", "--offset", "-1", "-m", "8", "-n", "1000",
       "--dtype", "f16", NULL},
      {"--causal", "--rows", "5", "--offset", "995", "-m", "10", "-n", "1000", "--dtype", "bf16",
       NULL},
      {"--causal", "--scale", "0.0625", "-m", "3", "-n", "70001", NULL}};
  for (size_t i = 0; i < TJ_COUNTOF(cases); i++) {
    const char *argv[20] = {"tj-softmax", "--interp", "--masked"};
    for (int k = 0; cases[i][k]; k++) argv[3 + k] = cases[i][k];
    expect_status(&r, argv, 0);
    assert_contains(r.out, "masked_softmax");
    assert_contains(r.out, "\nPASS\n");
  }
}
END_TEST

/* The mask's options belong to --masked (and --offset, --rows to
 * --causal); --scale takes a positive number that is finite as a float. */
START_TEST(tj_softmax_masked_options_are_checked) {
  static Run r;
  static const char *const cases[][6] = {
      {"--scale", "2", NULL, NULL, NULL, "--scale applies to --masked only"},
      {"--causal", NULL, NULL, NULL, NULL, "--causal applies to --masked only"},
      {"--log-softmax", "--causal", NULL, NULL, NULL, "--causal applies to --masked only"},
      {"--masked", "--offset", "3", NULL, NULL, "--offset applies to --causal only"},
      {"--masked", "--rows", "3", NULL, NULL, "--rows applies to --causal only"},
      {"--masked", "--log-softmax", NULL, NULL, NULL, "--backward and --masked: one op at a time"},
      {"--masked", "--backward", NULL, NULL, NULL, "one op at a time"},
      {"--masked", "--causal", "--rows", "-1", NULL, "--rows takes a decimal integer from 0 to"},
      {"--masked", "--causal", "--offset", "2147483648", NULL,
       "--offset takes a decimal integer from -2147483647 to 2147483647"},
      {"--masked", "--scale", "0", NULL, NULL, "--scale takes a positive, finite number"},
      {"--masked", "--scale", "-1", NULL, NULL, "--scale takes a positive, finite number"},
      {"--masked", "--scale", "inf", NULL, NULL, "not 'inf'"},
      {"--masked", "--scale", "nan", NULL, NULL, "not 'nan'"},
      {"--masked", "--scale", "1e39", NULL, NULL, "not '1e39'"},   /* past FLT_MAX */
      {"--masked", "--scale", "1e-50", NULL, NULL, "not '1e-50'"}, /* 0 as a float */
      {"--masked", "--scale", "0x10", NULL, NULL, "not '0x10'"},
      {"--masked", "--scale", " 1", NULL, NULL, "not ' 1'"},
      {"--masked", "--scale", "0.5x", NULL, NULL, "not '0.5x'"},
      {"--masked", "--scale", "", NULL, NULL, "not ''"}};
  for (size_t i = 0; i < TJ_COUNTOF(cases); i++) {
    const char *argv[16] = {"tj-softmax", "--interp", "-m", "2", "-n", "8"};
    for (int k = 0; k < 5 && cases[i][k]; k++) argv[6 + k] = cases[i][k];
    expect_status(&r, argv, 2);
    assert_contains(r.err, cases[i][5]);
    assert_contains(r.err, "--help' lists the options");
  }
  /* The same values where they apply run. */
  const char *const good[] = {"tj-softmax", "--interp", "--masked",    "--scale", "1e-3",
                              "--causal",   "--offset", "-2147483647", "--rows",  "0",
                              "-m",         "2",        "-n",          "8",       NULL};
  expect_status(&r, good, 0);
  assert_contains(r.out, "\nPASS\n");
}
END_TEST

/* ---- tj-run ------------------------------------------------------------- */

/* A user's log-softmax, in the text form. */
static const char log_softmax[] =
    "kernel log_softmax\n%y : ptr<DTYPE> = param y\n%x : ptr<DTYPE> = param x\n"
    "%ys : i64 = param y_stride\n%xs : i64 = param x_stride\n%n : i32 = param n\n"
    "%pid : i32 = program_id\n%row : i64 = cast %pid\n%xo : i64 = mul %row, %xs\n"
    "%xr : ptr<DTYPE> = ptr_add %x, %xo\n%yo : i64 = mul %row, %ys\n"
    "%yr : ptr<DTYPE> = ptr_add %y, %yo\n%i : tile<i32,BLOCK> = arange\n"
    "%m : tile<pred,BLOCK> = lt %i, %n\n%ninf : f32 = const -inf\n"
    "%xt : tile<DTYPE,BLOCK> = load %xr, %i, %m, %ninf\n%xf : tile<f32,BLOCK> = cast %xt\n"
    "%mx : f32 = reduce_max %xf\n%d : tile<f32,BLOCK> = sub %xf, %mx\n"
    "%e : tile<f32,BLOCK> = exp %d\n%s : f32 = reduce_sum %e\n%ls : f32 = log %s\n"
    "%o : tile<f32,BLOCK> = sub %d, %ls\n%ot : tile<DTYPE,BLOCK> = cast %o\n"
    "store %yr, %i, %ot, %m\n";

/* Without a driver tj-run runs the interpreter alone and says so: the
 * buffers it made, the scalars it passed, what was written. ALIGN follows
 * the rows: 31 floats are 4-byte aligned, 40 bf16 16-byte. */
START_TEST(tj_run_runs_a_users_program) {
  static Run r;
  char path[4096];
  write_file("test_tools_lsm.tj", log_softmax, strlen(log_softmax), path, sizeof path);
  const char *const plain[] = {"tj-run", path, "-m", "3", "-n", "31", "--seed", "7", NULL};
  expect_status(&r, plain, 0);
  assert_contains(r.err, "tj-run: no CUDA driver: ran the interpreter only");
  assert_contains(r.out, "ALIGN=4|");
  assert_contains(r.out, "  y: a buffer of 3 x 31, poisoned (output)\n"
                         "  x: a buffer of 3 x 31, random (input)\n"
                         "  y_stride = 31\n  x_stride = 31\n  n = 31\n"
                         "interpreter: ran 3 instances\n  y: 93 of 93 elements written\n");
  const char *const padded[] = {"tj-run",  path,     "-m",     "3",      "-n",
                                "31",      "--stride", "40",   "--dtype", "bf16",
                                "--interp", NULL};
  expect_status(&r, padded, 0);
  ck_assert_str_eq(r.err, "");
  assert_contains(r.out, "DTYPE=bf16|BLOCK=32|NUM_WARPS=4|ALIGN=16|");
  assert_contains(r.out, "  y: 93 of 120 elements written\n");
  /* The shipped softmax template runs the same way. */
  const char *const softmax[] = {"tj-run", TJ_SOURCE_DIR "/templates/softmax.tj", "-m", "2",
                                 "-n", "100", "--interp", NULL};
  expect_status(&r, softmax, 0);
  assert_contains(r.out, "  y: 200 of 200 elements written\n");
  remove(path);
}
END_TEST

/* --div (or -D DIV=K) gives --ir what tj_function_launch takes from the
 * arguments: sizes that are multiples of the vector move whole vectors,
 * with no element-by-element block for a partial last one. */
START_TEST(ir_takes_div) {
  static Run r;
  static char plain[OUTPUT_MAX];
  char path[4096];
  write_file("test_tools_div.tj", log_softmax, strlen(log_softmax), path, sizeof path);
  const char *const none[] = {"dump-ptx", "--ir", path, "-n", "1000", NULL};
  expect_status(&r, none, 0);
  memcpy(plain, r.out, sizeof plain);
  ck_assert_ptr_null(strstr(plain, "DIV="));
  assert_contains(plain, "ld.global.f32 "); /* the partial vector, element by element */
  const char *const four[] = {"dump-ptx", "--ir", path, "-n", "1000", "--div", "4", NULL};
  expect_status(&r, four, 0);
  assert_contains(r.out, " DIV=4\n");
  assert_contains(r.out, "ld.global.v4.f32");
  ck_assert_ptr_null(strstr(r.out, "ld.global.f32 "));
  const char *const define[] = {"dump-ptx", "--ir", path, "-n", "1000", "-DDIV=4", NULL};
  expect_status(&r, define, 0);
  assert_contains(r.out, " DIV=4\n");
  const char *const one[] = {"dump-ptx", "--ir", path, "-n", "1000", "--div", "1", NULL};
  expect_status(&r, one, 0);
  ck_assert_str_eq(r.out, plain);
  const char *const three[] = {"dump-ptx", "--ir", path, "-n", "1000", "--div", "3", NULL};
  expect_status(&r, three, 2);
  assert_contains(r.err, "--div takes a power of two (1, 2, 4, 8 or 16), not 3");
  const char *const big[] = {"dump-ptx", "--ir", path, "-n", "1000", "--div", "32", NULL};
  expect_status(&r, big, 2);
  const char *const softmax[] = {"dump-ptx", "softmax", "-n", "1000", "--div", "4", NULL};
  expect_status(&r, softmax, 2);
  assert_contains(r.err, "--div does not apply to softmax");
  remove(path);
}
END_TEST

START_TEST(tj_run_refuses_what_it_cannot_run) {
  static Run r;
  char path[4096];
  write_file("test_tools_lsm.tj", log_softmax, strlen(log_softmax), path, sizeof path);
  const char *const no_param[] = {"tj-run", path, "-m", "3", "-n", "31", "--arg", "k=1", NULL};
  expect_status(&r, no_param, 2);
  assert_contains(r.err, "tj-run: --arg k: the program has no scalar parameter of that name");
  ck_assert_str_eq(r.out, "");
  const char *const not_int[] = {"tj-run", path, "-m", "3", "-n", "31", "--arg", "n=1.5", NULL};
  expect_status(&r, not_int, 2);
  assert_contains(r.err, "--arg n takes a decimal integer from -2147483648 to 2147483647");
  const char *const no_file[] = {"tj-run", "-m", "3", "-n", "31", NULL};
  expect_status(&r, no_file, 2);
  assert_contains(r.err, "tj-run: FILE.tj is required");
  const char *const two[] = {"tj-run", path, path, "-m", "3", "-n", "31", NULL};
  expect_status(&r, two, 2);
  assert_contains(r.err, "unexpected argument");
  const char *const narrow[] = {"tj-run", path, "-m", "3", "-n", "31", "--stride", "30", NULL};
  expect_status(&r, narrow, 2);
  assert_contains(r.err, "--stride is below N");
  /* Reading past the buffers stops in the interpreter, with its message,
   * after the report of what was passed. */
  const char *const past[] = {"tj-run", path, "-m", "3", "-n", "31", "--arg", "n=40", NULL};
  run_tool(&r, past);
  ck_assert_int_eq(r.status, 1);
  assert_contains(r.out, "  n = 40\n");
  assert_contains(r.err, "lies outside the buffer of parameter x");
  ck_assert_ptr_null(strstr(r.out, "interpreter: ran"));
  remove(path);
}
END_TEST

/* ---- numbers ------------------------------------------------------------ */

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

/* N is an i32 in the kernel: dump-ptx refuses more, as tj_softmax would. */
START_TEST(dump_ptx_refuses_n_over_int32) {
  static Run r;
  const char *const huge[] = {"dump-ptx", "softmax", "-n", "99999999999", NULL};
  expect_status(&r, huge, 2);
  assert_contains(r.err, "dump-ptx: -n takes a decimal integer from 0 to 2147483647, not "
                         "'99999999999'");
  const char *const most[] = {"dump-ptx", "softmax", "-n", "2147483647", "--emit", "ir", NULL};
  expect_status(&r, most, 0);
  const char *const m[] = {"dump-ptx", "softmax", "-n", "8", "-m", "2147483648", NULL};
  expect_status(&r, m, 2);
}
END_TEST

/* --ir with neither -n nor a BLOCK once gave BLOCK = next_pow2(0) = 1, a
 * kernel of one element, silently: it is a usage error now. */
START_TEST(ir_needs_n_or_block) {
  static Run r;
  char path[4096];
  ir_file(path, sizeof path);
  const char *const bare[] = {"dump-ptx", "--ir", path, "-DX=3", NULL};
  expect_status(&r, bare, 2);
  assert_contains(r.err, "--ir needs -n N or a BLOCK");
  ck_assert_str_eq(r.out, "");
  const char *const block[] = {"dump-ptx", "--ir", path, "-DX=3", "--block", "64", NULL};
  expect_status(&r, block, 0);
  assert_contains(r.out, "BLOCK=64 ");
  const char *const define[] = {"dump-ptx", "--ir", path, "-DX=3", "-DBLOCK=32", NULL};
  expect_status(&r, define, 0);
  assert_contains(r.out, "BLOCK=32 ");
  const char *const n[] = {"dump-ptx", "--ir", path, "-DX=3", "-n", "100", NULL};
  expect_status(&r, n, 0);
  assert_contains(r.out, "BLOCK=128 ");
  remove(path);
}
END_TEST

START_TEST(define_takes_both_spellings) {
  static Run r;
  static char joined[OUTPUT_MAX];
  char path[4096];
  ir_file(path, sizeof path);
  const char *const glued[] = {"dump-ptx", "--ir", path, "-n", "8", "-DX=3", NULL};
  expect_status(&r, glued, 0);
  memcpy(joined, r.out, sizeof joined);
  assert_contains(joined, "st.global");
  const char *const apart[] = {"dump-ptx", "--ir", path, "-n", "8", "-D", "X=3", NULL};
  expect_status(&r, apart, 0);
  ck_assert_str_eq(r.out, joined);
  const char *const builtin[] = {"dump-ptx", "--ir", path, "-n8", "-DX=3", "-DNUM_WARPS=2", NULL};
  expect_status(&r, builtin, 0);
  assert_contains(r.out, ".reqntid 64, 1, 1");
  const char *const no_value[] = {"dump-ptx", "--ir", path, "-n", "8", "-D", "X", NULL};
  expect_status(&r, no_value, 2);
  assert_contains(r.err, "-D takes NAME=VALUE, not 'X'");
  remove(path);
}
END_TEST

START_TEST(numbers_are_decimal) {
  static Run r;
  const char *const ten[] = {"dump-ptx", "softmax", "-n", "010", "--emit", "ir", NULL};
  run_tool(&r, ten);
  ck_assert_msg(r.status == 0, "%s", r.err);
  assert_contains(r.out, "const BLOCK = 12\n"); /* n = 10 (3 vectors), not octal 8 (BLOCK 8) */
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
  assert_contains(r.err,
                  "tj-bench: --iters takes a decimal integer from 1 to 100000000, not '0x10'");
}
END_TEST

/* ---- files --------------------------------------------------------------- */

START_TEST(ir_dash_reads_stdin) {
  static Run r;
  char path[4096];
  ir_file(path, sizeof path);
  const char *const argv[] = {"dump-ptx", "--ir", "-", "-n", "8", "-DX=1", "--emit", "ir", NULL};
  run_with(&r, argv, (Setup){{0, 0}, path});
  ck_assert_msg(r.status == 0, "exit %d\n%s", r.status, r.err);
  assert_contains(r.out, "kernel k\n");
  assert_contains(r.out, "store %0, %1, %3\n");
  remove(path);
}
END_TEST

START_TEST(output_dash_is_stdout) {
  static Run r;
  const char *const ptx[] = {"dump-ptx", "softmax", "-n", "8", "-o", "-", NULL};
  expect_status(&r, ptx, 0);
  assert_contains(r.out, ".entry tj_softmax(");
  /* The CSV alone on stdout; the report on stderr. */
  const char *const csv[] = {"tj-bench", "--codegen", "--iters", "1", "--csv", "-", NULL};
  expect_status(&r, csv, 0);
  static const char head[] = "section,m,n,dtype,backend,metric,value,unit\ncodegen,";
  ck_assert_msg(!strncmp(r.out, head, strlen(head)), "%.1500s", r.out);
  ck_assert_ptr_null(strstr(r.out, "softmax single"));
  assert_contains(r.err, "tj-bench --codegen: tj_specialize + tj_emit_ptx");
}
END_TEST

/* A NUL byte in a comment before the store: the whole program would parse
 * without the store if the text stopped there. */
START_TEST(nul_byte_is_refused) {
  static Run r;
  static const char text[] = "kernel k\nconst X\n%y : ptr<f32> = param y\n"
                             "%i : tile<i32,BLOCK> = arange\n%c : i32 = constexpr X\n"
                             "%f : f32 = cast %c # \0 a NUL\nstore %y, %i, %f\n";
  char path[4096];
  write_file("test_tools_nul.tj", text, sizeof text - 1, path, sizeof path);
  const char *const argv[] = {"dump-ptx", "--ir", path, "-n", "8", "-DX=1", NULL};
  expect_status(&r, argv, 1);
  assert_contains(r.err, "test_tools_nul.tj:6:22: a NUL byte: not a text file");
  run_with(&r, (const char *const[]){"dump-ptx", "--ir", "-", "-n", "8", "-DX=1", NULL},
           (Setup){{0, 0}, path});
  ck_assert_int_eq(r.status, 1);
  assert_contains(r.err, "<stdin>:6:22: a NUL byte");
  ck_assert_str_eq(r.out, "");
  remove(path);
}
END_TEST

START_TEST(directory_is_refused) {
  static Run r;
  const char *const argv[] = {"dump-ptx", "--ir", TJ_BINARY_DIR "/tests", "-n", "8", NULL};
  expect_status(&r, argv, 1);
  assert_contains(r.err, "/tests: is a directory, not a file");
}
END_TEST

/* /dev/zero never ends: the reading stops at 64 MiB, as a file or stdin. */
START_TEST(endless_file_is_refused) {
  static Run r;
  const char *const argv[] = {"dump-ptx", "--ir", "/dev/zero", "-n", "8", NULL};
  expect_status(&r, argv, 1);
  assert_contains(r.err, "dump-ptx: /dev/zero: over 64 MiB, the most a tool reads");
  ck_assert_msg(r.seconds < 20.0, "it took %.1f s", r.seconds);
  const char *const dash[] = {"dump-ptx", "--ir", "-", "-n", "8", NULL};
  run_with(&r, dash, (Setup){{0, 0}, "/dev/zero"});
  ck_assert_int_eq(r.status, 1);
  assert_contains(r.err, "dump-ptx: <stdin>: over 64 MiB");
}
END_TEST

/* A file of 64 MiB and a byte (sparse): refused before it is read. */
START_TEST(file_over_64_mib_is_refused) {
  static Run r;
  char path[4096];
  write_file("test_tools_big.tj", "kernel k\n", 9, path, sizeof path);
  ck_assert_int_eq(truncate(path, ((off_t)64 << 20) + 1), 0);
  const char *const argv[] = {"dump-ptx", "--ir", path, "-n", "8", NULL};
  expect_status(&r, argv, 1);
  assert_contains(r.err, "test_tools_big.tj: over 64 MiB, the most a tool reads");
  remove(path);
}
END_TEST

/* ---- modes -------------------------------------------------------------- */

START_TEST(option_of_another_mode_is_refused) {
  static Run r;
  char path[4096];
  ir_file(path, sizeof path);
  static const char *const cases[][5] = {
      {"tj-bench", "--codegen", "--reps", "3", "--reps does not apply to --codegen"},
      {"tj-bench", "--latency", "--dtype", "all", "--dtype does not apply to --latency"},
      {"tj-bench", "--bandwidth", "--iters", "3", "--iters does not apply to --bandwidth"},
      {"tj-bench", "--codegen", "--latency", NULL, "--codegen and --latency cannot be given"},
      {"tj-bench", "--n", "1000", "--set=small", "give --set or --n, not both"},
      {"tj-bench", "--codegen", "--masked", NULL, "--masked does not apply to --codegen"},
      {"tj-bench", "--latency", "--masked", NULL, "--masked does not apply to --latency"},
      {"tj-bench", "--masked", "--log-softmax", NULL, "--log-softmax and --masked: one op at a"},
      {"dump-ptx", "--template", "single", "--ir", "--template does not apply to --ir"},
      {"dump-ptx", "softmax", "--ir", "-", "softmax and --ir cannot be given together"}};
  for (size_t i = 0; i < TJ_COUNTOF(cases); i++) {
    bool ir = cases[i][3] && !strcmp(cases[i][3], "--ir");
    const char *const argv[] = {cases[i][0], cases[i][1],      cases[i][2],
                                cases[i][3], ir ? path : NULL, NULL};
    expect_status(&r, argv, 2);
    if (cases[i][4]) assert_contains(r.err, cases[i][4]);
  }
  const char *const validate_ir[] = {"dump-ptx", "softmax",    "-n8", "--emit",
                                     "ir",       "--validate", NULL};
  expect_status(&r, validate_ir, 2);
  assert_contains(r.err, "--validate applies to --emit ptx only");
  remove(path);
}
END_TEST

/* --csv was ignored by --codegen: now it gets a row per metric and shape. */
START_TEST(codegen_writes_csv) {
  static Run r;
  char path[4096], text[OUTPUT_MAX];
  snprintf(path, sizeof path, "%s/tests/test_tools_codegen.csv", TJ_BINARY_DIR);
  remove(path);
  const char *const argv[] = {"tj-bench", "--codegen", "--iters", "2", "--csv", path, NULL};
  expect_status(&r, argv, 0);
  assert_contains(r.out, "softmax single N=1000");
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "no CSV at %s", path);
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  ck_assert_msg(!strncmp(text, "section,m,n,dtype,backend,metric,value,unit\n", 44), "%.1500s",
                text);
  assert_contains(text, "\ncodegen,65536,1000,f32,ptx,codegen_us,");
  assert_contains(text, "\ncodegen,65536,65536,bf16,ptx,ptx_bytes,");
  int lines = 0;
  for (const char *p = text; (p = strchr(p, '\n')); p++) lines++;
  ck_assert_int_eq(lines, 1 + 2 * 3 * 4); /* header, N x dtype x metric */
  remove(path);
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
  TCase *conventions = tcase_create("conventions");
  tcase_set_timeout(conventions, 60);
  tcase_add_test(conventions, help_goes_to_stdout);
  tcase_add_test(conventions, version_on_every_tool);
  tcase_add_test(conventions, usage_errors_exit_2);
  tcase_add_test(conventions, no_gpu_exits_3);
  suite_add_tcase(s, conventions);
  TCase *c = tcase_create("arguments");
  tcase_set_timeout(c, 60);
  tcase_add_test(c, dump_ptx_refuses_numbers_out_of_range);
  tcase_add_test(c, dump_ptx_refuses_n_over_int32);
  tcase_add_test(c, define_takes_both_spellings);
  tcase_add_test(c, ir_needs_n_or_block);
  tcase_add_test(c, ir_takes_div);
  tcase_add_test(c, tj_run_runs_a_users_program);
  tcase_add_test(c, tj_run_refuses_what_it_cannot_run);
  tcase_add_test(c, numbers_are_decimal);
  tcase_add_test(c, tj_softmax_says_what_it_cannot_allocate);
  tcase_add_test(c, tj_softmax_masked_runs_on_the_interpreter);
  tcase_add_test(c, tj_softmax_masked_options_are_checked);
  suite_add_tcase(s, c);
  TCase *files = tcase_create("files");
  tcase_set_timeout(files, 60);
  tcase_add_test(files, ir_dash_reads_stdin);
  tcase_add_test(files, output_dash_is_stdout);
  tcase_add_test(files, nul_byte_is_refused);
  tcase_add_test(files, directory_is_refused);
  tcase_add_test(files, endless_file_is_refused);
  tcase_add_test(files, file_over_64_mib_is_refused);
  suite_add_tcase(s, files);
  TCase *modes = tcase_create("modes");
  tcase_set_timeout(modes, 60);
  tcase_add_test(modes, option_of_another_mode_is_refused);
  tcase_add_test(modes, codegen_writes_csv);
  suite_add_tcase(s, modes);
  return s;
}

int main(void) { return test_run_suite(tools_suite()); }
