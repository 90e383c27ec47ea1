/*
 * test_nvrtc.c — the NVRTC backend in CI (no GPU): IR -> CUDA C
 * (tj_emit_cuda), NVRTC -> PTX (tj_nvrtc_ptx), then ptxas -arch=sm_XX on the
 * result (ptxas from PATH, $CUDA_HOME/bin or /usr/local/cuda/bin; a missing
 * ptxas fails the sweep). The whole suite exits 77 (skipped) when libnvrtc
 * cannot be loaded.
 *
 * What the softmax sweep covers (768 NVRTC compiles, each assembled):
 *   - default warps: both templates x BLOCK in {1, 2, 4, ..., 32768} x
 *     f32/f16/bf16 x sm_75, sm_80, sm_90. Where tj_softmax_spec_options
 *     would choose the specialization (the single tile up to 32768, the
 *     online chunk up to TJ_SOFTMAX_CHUNK), ptxas -v must show no stack frame
 *     and no spills. The online template with 32768-element chunks (32 per
 *     thread, 64 registers at 1024 threads) spills a few words with 16-bit
 *     dtypes; it only has to assemble;
 *   - the other warp counts, at sm_75, sm_80 and sm_90: both templates x
 *     every BLOCK x warps in {1, 2, 4, 8, 16, 32} x f32/f16/bf16, so every
 *     arch gets the whole cross product (few warps for a large BLOCK is
 *     correct but keeps the tile in local memory: up to 1024 slots per
 *     thread, loops not unrolled).
 *   sm_75 is the oldest target NVRTC 13 accepts (compute_75). The CUDA C
 *   does not depend on the arch at all, only NVRTC's target option does.
 *
 * Semantics: NVRTC's PTX run by the PTX simulator (support_ptxsim.c) must
 * match the interpreter: softmax (both templates, three dtypes, widths
 * around the layout boundaries, default, one and eight warps, rows with -inf
 * and NaN, fewer CTAs than rows) and the 150 random programs the PTX
 * backend's simulator suite uses. They are left out (saying so) until
 * support_ptxsim.h defines PTXSIM_READS_NVRTC to 1: the simulator must read
 * what NVRTC writes and honour the member masks of shfl.sync and
 * bar.warp.sync (lane groups narrower than a warp synchronize only their
 * own lanes).
 *
 * Also: hand-written programs that use every op and element type, padded
 * tiles, narrow lane groups, CTA-wide reductions, nested loops with
 * loop-carried values and a store followed by a load (compiled and
 * assembled); where group barriers go between memory accesses that threads
 * could reorder; byte-identical CUDA C for the same spec; kernel info; NVRTC
 * errors as TJ_ERR_NVRTC with the program log; concurrent first use from
 * several threads; TJ_ERR_NO_NVRTC when the library cannot be loaded (in a
 * fresh process, with TILEJIT_LIBNVRTC pointing nowhere); argument errors;
 * dump-ptx --backend nvrtc and --emit cuda.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkstemp, posix_spawn, readlink */
#endif
#include "codegen/cuda.h"
#include "support.h"
#include "support_ptxsim.h"
#include "support_randprog.h"

#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* LeakSanitizer and libnvrtc (ASan builds only; other builds never call
 * these hooks). libnvrtc keeps per-thread data in dynamic TLS, and LSan's
 * scan of dynamic TLS can crash its tracer (seen with glibc 2.36 and GCC
 * 12: a garbage DTLS range, "Tracer caught signal 11"). So TLS is not
 * scanned here, and the one allocation only TLS then refers to, glibc's
 * thread-specific data block that libnvrtc's pthread_setspecific makes, is
 * suppressed. Nothing of tilejit's is hidden so: this suite does not use the
 * runtime, the only part of tilejit with thread-locals. */
const char *__lsan_default_options(void);
const char *__lsan_default_options(void) { return "use_tls=0"; }
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:___pthread_setspecific\n"; }

/* ---- running ptxas ---------------------------------------------------------- */

/* Runs argv[0] (a path) with stdout and stderr into out; returns its exit
 * status, or -1 if it could not run. */
static int run_captured(char *const argv[], char *out, size_t size) {
  char log[] = "/tmp/tj_nvrtc_logXXXXXX";
  int fd = mkstemp(log);
  if (fd < 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd, 1);
  posix_spawn_file_actions_adddup2(&fa, fd, 2);
  pid_t pid;
  int status = -1;
  if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) == 0 && waitpid(pid, &status, 0) == pid)
    status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  posix_spawn_file_actions_destroy(&fa);
  ssize_t n = pread(fd, out, size - 1, 0);
  out[n > 0 ? n : 0] = '\0';
  close(fd);
  unlink(log);
  return status;
}

static bool is_executable(const char *path) { return access(path, X_OK) == 0; }

/* ptxas from PATH, then $CUDA_HOME/bin, then the default toolkit prefix. */
static bool find_ptxas(char *path, size_t size) {
  const char *env = getenv("PATH");
  char dirs[8192];
  snprintf(dirs, sizeof dirs, "%s", env ? env : "");
  for (char *save = NULL, *dir = strtok_r(dirs, ":", &save); dir;
       dir = strtok_r(NULL, ":", &save)) {
    snprintf(path, size, "%s/ptxas", dir);
    if (is_executable(path)) return true;
  }
  const char *home = getenv("CUDA_HOME");
  if (home && *home) {
    snprintf(path, size, "%s/bin/ptxas", home);
    if (is_executable(path)) return true;
  }
  snprintf(path, size, "/usr/local/cuda/bin/ptxas");
  return is_executable(path);
}

/* Assembles ptx for sm_<arch>; clean: ptxas -v must show no stack frame and
 * no spills. */
static void assemble(const char *ptx, int arch, bool clean, const char *what) {
  char ptxas[4096], file[] = "/tmp/tj_nvrtc_ptxXXXXXX", target[32], out[16384];
  ck_assert_msg(find_ptxas(ptxas, sizeof ptxas),
                "ptxas not found (PATH, CUDA_HOME, default prefix)");
  int fd = mkstemp(file);
  ck_assert_int_ge(fd, 0);
  size_t len = strlen(ptx);
  ck_assert_int_eq(write(fd, ptx, len), (ssize_t)len);
  close(fd);
  snprintf(target, sizeof target, "-arch=sm_%d", arch);
  char *argv[] = {ptxas, target, "-v", file, "-o", "/dev/null", NULL};
  int status = run_captured(argv, out, sizeof out);
  unlink(file);
  ck_assert_msg(status == 0, "%s: ptxas %s failed (%d):\n%s", what, target, status, out);
  if (clean)
    ck_assert_msg(strstr(out, " 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"),
                  "%s: %s: local memory or spills:\n%s", what, target, out);
}

/* ---- specializations ------------------------------------------------------------ */

static tj_program *parse_ok(const char *text) {
  tj_program *p = NULL;
  tj_status st = tj_program_parse(text, strlen(text), &p);
  ck_assert_msg(st == TJ_OK, "parse: %s\n%s", tj_program_error(p), text);
  return p;
}

static tj_spec *specialize_ok(tj_program *p, const tj_spec_options *o) {
  tj_spec *s = NULL;
  tj_status st = tj_specialize(p, o, &s);
  ck_assert_msg(st == TJ_OK, "specialize: %s", tj_program_error(p));
  return s;
}

/* The softmax template's spec for BLOCK = block, warps (0: default), dtype. */
static tj_spec *softmax_spec(tj_softmax_template which, int64_t block, int warps, tj_dtype dtype) {
  tj_program *p = NULL;
  tj_spec_options o;
  ck_assert_int_eq(tj_softmax_program(which, block, &p), TJ_OK);
  ck_assert_int_eq(softmax_spec_options(which, dtype, 65536, block, 0, 0, &o), TJ_OK);
  o.block = block;
  o.num_warps = warps;
  o.cluster = o.split = 1; /* NVRTC runs an instance on one CTA */
  tj_spec *s = specialize_ok(p, &o);
  tj_program_destroy(p);
  return s;
}

/* NVRTC then ptxas; returns the kernel info. */
static tj_kernel_info compile_ok(tj_spec *s, int arch, bool clean, const char *what) {
  tj_codegen_options o = {arch, 0, 0};
  tj_kernel_info info;
  char *ptx = NULL;
  tj_status st = tj_nvrtc_ptx(s, &o, &ptx, &info);
  ck_assert_msg(st == TJ_OK, "%s: %s: %s", what, tj_status_string(st), tj_spec_error(s));
  ck_assert_int_ge(info.ptx_version, 80);
  ck_assert_int_eq(info.arch, arch);
  char entry[80];
  snprintf(entry, sizeof entry, ".entry %s(", info.entry);
  ck_assert_msg(strstr(ptx, entry), "%s: no %s in the PTX", what, entry);
  assemble(ptx, arch, clean, what);
  tj_free(ptx);
  return info;
}

static const tj_dtype all_dtypes[] = {TJ_DTYPE_F32, TJ_DTYPE_F16, TJ_DTYPE_BF16};
static const int sweep_archs[] = {75, 80, 90};

/* _i: template (i / 3) and arch (i % 3); every BLOCK and dtype, default warps. */
START_TEST(softmax_default_warps) {
  tj_softmax_template which = _i / 3 ? TJ_SOFTMAX_ONLINE : TJ_SOFTMAX_SINGLE;
  int arch = sweep_archs[_i % 3];
  for (int64_t block = 1; block <= 32768; block *= 2) {
    for (size_t d = 0; d < TJ_COUNTOF(all_dtypes); d++) {
      char what[96];
      snprintf(what, sizeof what, "template %d BLOCK %lld %s sm_%d", (int)which, (long long)block,
               ir_dtype_name(all_dtypes[d]), arch);
      tj_spec *s = softmax_spec(which, block, 0, all_dtypes[d]);
      bool chosen_by_default = which == TJ_SOFTMAX_SINGLE || block <= TJ_SOFTMAX_CHUNK;
      tj_kernel_info info = compile_ok(s, arch, chosen_by_default, what);
      ck_assert_int_eq(info.shape.threads, 32 * s->num_warps);
      tj_spec_destroy(s);
    }
  }
}
END_TEST

/* _i: arch (i / 6), template (i / 3 % 2) and dtype (i % 3); every BLOCK x
 * every other warp count. */
START_TEST(softmax_every_warps) {
  tj_softmax_template which = _i / 3 % 2 ? TJ_SOFTMAX_ONLINE : TJ_SOFTMAX_SINGLE;
  tj_dtype dtype = all_dtypes[_i % 3];
  int arch = sweep_archs[_i / 6];
  for (int64_t block = 1; block <= 32768; block *= 2) {
    for (int warps = 1; warps <= 32; warps *= 2) {
      if (warps == tj_default_num_warps(block, dtype)) continue; /* swept above */
      char what[96];
      snprintf(what, sizeof what, "template %d BLOCK %lld warps %d %s sm_%d", (int)which,
               (long long)block, warps, ir_dtype_name(dtype), arch);
      tj_spec *s = softmax_spec(which, block, warps, dtype);
      compile_ok(s, arch, false, what);
      tj_spec_destroy(s);
    }
  }
}
END_TEST

/* ---- hand-written programs ------------------------------------------------------ */

/* Every op but the loop markers, every element type, casts between all
 * numeric types, a tile of 100 elements (padding) beside BLOCK. */
static const char prog_every_op[] = "kernel every_op\n"
                                    "const N = 100\n"
                                    "%yf : ptr<f32> = param yf\n"
                                    "%xh : ptr<f16> = param xh\n"
                                    "%xb : ptr<bf16> = param xb\n"
                                    "%yi : ptr<i32> = param yi\n"
                                    "%yl : ptr<i64> = param yl\n"
                                    "%stride : i64 = param stride\n"
                                    "%scale : f32 = param scale\n"
                                    "%n : i32 = param n\n"
                                    "%pid : i32 = program_id\n"
                                    "%np : i32 = num_programs\n"
                                    "%pid64 : i64 = cast %pid\n"
                                    "%row : i64 = mul %pid64, %stride\n"
                                    "%xh1 : ptr<f16> = ptr_add %xh, %row\n"
                                    "%xb1 : ptr<bf16> = ptr_add %xb, %pid\n"
                                    "%i : tile<i32,N> = arange\n"
                                    "%m : tile<pred,N> = lt %i, %n\n"
                                    "%ninf : f32 = const -inf\n"
                                    "%h : tile<f16,N> = load %xh1, %i, %m, %ninf\n"
                                    "%b : tile<bf16,N> = load %xb1, %i, %m\n"
                                    "%hf : tile<f32,N> = cast %h\n"
                                    "%bf : tile<f32,N> = cast %b\n"
                                    "%a : tile<f32,N> = add %hf, %bf\n"
                                    "%s : tile<f32,N> = sub %a, %scale\n"
                                    "%mu : tile<f32,N> = mul %s, %scale\n"
                                    "%d : tile<f32,N> = div %mu, %scale\n"
                                    "%mx : tile<f32,N> = max %d, %a\n"
                                    "%mn : tile<f32,N> = min %mx, %scale\n"
                                    "%ng : tile<f32,N> = neg %mn\n"
                                    "%e : tile<f32,N> = exp %ng\n"
                                    "%e2 : tile<f32,N> = exp2 %e\n"
                                    "%lg : tile<f32,N> = log %e2\n"
                                    "%c1 : tile<pred,N> = le %lg, %scale\n"
                                    "%c2 : tile<pred,N> = gt %lg, %scale\n"
                                    "%c3 : tile<pred,N> = ge %lg, %a\n"
                                    "%c4 : tile<pred,N> = eq %lg, %a\n"
                                    "%c5 : tile<pred,N> = ne %lg, %a\n"
                                    "%l1 : tile<pred,N> = and %c1, %c2\n"
                                    "%l2 : tile<pred,N> = or %l1, %c3\n"
                                    "%l3 : tile<pred,N> = and %l2, %c4\n"
                                    "%l4 : tile<pred,N> = or %l3, %c5\n"
                                    "%sel : tile<f32,N> = select %l4, %lg, %ninf\n"
                                    "%rmax : f32 = reduce_max %sel\n"
                                    "%rsum : f32 = reduce_sum %sel\n"
                                    "%tot : f32 = add %rmax, %rsum\n"
                                    "%out : tile<f32,N> = mul %sel, %tot\n"
                                    "store %yf, %i, %out, %m\n"
                                    "%ii : tile<i32,N> = cast %out\n"
                                    "%il : tile<i64,N> = cast %ii\n"
                                    "%il2 : tile<i64,N> = mul %il, %il\n"
                                    "%ii2 : tile<i32,N> = cast %il2\n"
                                    "%ineg : tile<i32,N> = neg %ii2\n"
                                    "%imax : i32 = reduce_max %ineg\n"
                                    "%isum : i32 = reduce_sum %ineg\n"
                                    "%ih : tile<f16,N> = cast %ii\n"
                                    "%lb : tile<bf16,N> = cast %il\n"
                                    "%hb : tile<bf16,N> = cast %ih\n"
                                    "%bh : tile<f16,N> = cast %lb\n"
                                    "%hi : tile<i32,N> = cast %bh\n"
                                    "%bl : tile<i64,N> = cast %hb\n"
                                    "%fl : tile<i64,N> = cast %out\n"
                                    "%lf : tile<f32,N> = cast %fl\n"
                                    "%fh : tile<f16,N> = cast %lf\n"
                                    "store %xh1, %i, %fh, %m\n"
                                    "store %xb1, %i, %hb\n"
                                    "%iall : tile<i32,N> = add %hi, %imax\n"
                                    "%imin : tile<i32,N> = min %iall, %isum\n"
                                    "%isub : tile<i32,N> = sub %imin, %np\n"
                                    "%irem : tile<i32,N> = rem %isub, %n\n"
                                    "store %yi, %i, %irem\n"
                                    "%lall : tile<i64,N> = sub %bl, %fl\n"
                                    "%lmax : tile<i64,N> = max %lall, %row\n"
                                    "store %yl, %il, %lmax, %m\n"
                                    "%pm : pred = lt %pid, %np\n"
                                    "store %yi, %i, %isum, %pm\n"
                                    "%wide : tile<i32,BLOCK> = arange\n"
                                    "%wm : tile<pred,BLOCK> = lt %wide, %n\n"
                                    "%ws : i32 = reduce_sum %wide\n"
                                    "%wv : tile<i32,BLOCK> = select %wm, %wide, %ws\n"
                                    "store %yi, %wide, %wv, %wm\n";

/* Nested loops with loop-carried values (a parallel yield), i64 loops, a
 * store that a later iteration's load reads, and constants of every kind. */
static const char prog_loops[] = "kernel loops\n"
                                 "const CHUNK\n"
                                 "%x : ptr<f32> = param x\n"
                                 "%n : i32 = param n\n"
                                 "%zero : i32 = const 0\n"
                                 "%step : i32 = constexpr CHUNK\n"
                                 "%ninf : f32 = const -inf\n"
                                 "%fzero : f32 = const -0\n"
                                 "%idx : tile<i32,CHUNK> = arange\n"
                                 "%outer : i32 = for %zero, %n, %step\n"
                                 "  %m : f32 = iter %ninf\n"
                                 "  %s : f32 = iter %fzero\n"
                                 "  %offs : tile<i32,CHUNK> = add %idx, %outer\n"
                                 "  %mask : tile<pred,CHUNK> = lt %offs, %n\n"
                                 "  %v : tile<f32,CHUNK> = load %x, %offs, %mask, %ninf\n"
                                 "  %bm : f32 = reduce_max %v\n"
                                 "  %m2 : f32 = max %m, %bm\n"
                                 "  %w : tile<f32,CHUNK> = sub %v, %m2\n"
                                 "  store %x, %offs, %w, %mask\n"
                                 "  %lo : i64 = const -9223372036854775808\n"
                                 "  %hi : i64 = const 3\n"
                                 "  %one : i64 = const 1\n"
                                 "  %k : i64 = for %one, %hi, %one\n"
                                 "    %acc : f32 = iter %s\n"
                                 "    %t : f32 = reduce_sum %w\n"
                                 "    %acc2 : f32 = add %acc, %t\n"
                                 "    %big : i64 = max %lo, %k\n"
                                 "    yield %acc, %acc2\n"
                                 "  endfor\n"
                                 "  yield %m, %acc\n"
                                 "  yield %s, %m\n"
                                 "endfor\n"
                                 "%res : f32 = div %s, %m\n"
                                 "%c0 : tile<f32,BLOCK> = const nan\n"
                                 "%c1 : tile<i32,BLOCK> = const -2147483648\n"
                                 "%c2 : f32 = const 1e-45\n"
                                 "%c3 : f32 = const 3.4028235e38\n"
                                 "%c4 : f32 = const inf\n"
                                 "%c5 : f32 = const 0.1\n"
                                 "%ix : tile<i32,BLOCK> = arange\n"
                                 "%a1 : tile<f32,BLOCK> = add %c0, %c2\n"
                                 "%a2 : tile<f32,BLOCK> = min %a1, %c3\n"
                                 "%a3 : tile<f32,BLOCK> = max %a2, %c4\n"
                                 "%a4 : tile<f32,BLOCK> = mul %a3, %c5\n"
                                 "%a5 : tile<f32,BLOCK> = add %a4, %res\n"
                                 "%ci : tile<i32,BLOCK> = add %ix, %c1\n"
                                 "%pos : tile<pred,BLOCK> = gt %ci, %zero\n"
                                 "store %x, %ix, %a5, %pos\n";

static tj_spec *program_spec(const char *text, int64_t block, int warps, int64_t chunk) {
  tj_program *p = parse_ok(text);
  tj_binding chunk_binding = {"CHUNK", chunk};
  tj_spec_options o = {.n = block, .block = block, .num_warps = warps, .dtype = TJ_DTYPE_F32};
  int index;
  if (tj_program_const(p, "CHUNK", &index) == TJ_OK) {
    o.bindings = &chunk_binding;
    o.binding_count = 1;
  }
  tj_spec *s = specialize_ok(p, &o);
  tj_program_destroy(p);
  return s;
}

/* Each op of the table appears in one of the two programs. */
START_TEST(programs_use_every_op) {
  bool seen[TJ_OP_COUNT] = {false};
  const char *texts[] = {prog_every_op, prog_loops};
  for (size_t t = 0; t < TJ_COUNTOF(texts); t++) {
    tj_program *p = parse_ok(texts[t]);
    for (int i = 0; i < p->ninsts; i++) seen[p->insts[i].op] = true;
    tj_program_destroy(p);
  }
  for (int op = 0; op < TJ_OP_COUNT; op++) ck_assert_msg(seen[op], "no %s", tj_op_name((tj_op)op));
}
END_TEST

/* _i: BLOCK and warps chosen so that groups are 1, 8 or 32 lanes or the
 * whole CTA, with padded and unpadded tiles. */
START_TEST(programs_compile) {
  static const struct {
    int64_t block;
    int warps;
    int64_t chunk;
  } cases[] = {{1, 1, 1},     {8, 4, 8},       {64, 1, 100},
               {128, 4, 256}, {1024, 8, 3000}, {4096, 32, 4096}};
  char what[96];
  snprintf(what, sizeof what, "every_op BLOCK %lld warps %d", (long long)cases[_i].block,
           cases[_i].warps);
  tj_spec *s = program_spec(prog_every_op, cases[_i].block, cases[_i].warps, 0);
  compile_ok(s, 90, false, what);
  tj_spec_destroy(s);
  snprintf(what, sizeof what, "loops BLOCK %lld warps %d CHUNK %lld", (long long)cases[_i].block,
           cases[_i].warps, (long long)cases[_i].chunk);
  s = program_spec(prog_loops, cases[_i].block, cases[_i].warps, cases[_i].chunk);
  compile_ok(s, 80, false, what);
  tj_spec_destroy(s);
}
END_TEST

/* ---- the CUDA C text ------------------------------------------------------------- */

static char *emit_ok(tj_spec *s, int annotate, tj_kernel_info *info) {
  tj_codegen_options o = {90, 0, annotate};
  char *cuda = NULL;
  tj_status st = tj_emit_cuda(s, &o, &cuda, info);
  ck_assert_msg(st == TJ_OK, "emit_cuda: %s", tj_spec_error(s));
  ck_assert_ptr_nonnull(cuda);
  return cuda;
}

START_TEST(same_spec_same_text) {
  for (int which = TJ_SOFTMAX_SINGLE; which <= TJ_SOFTMAX_ONLINE; which++) {
    tj_spec *s = softmax_spec((tj_softmax_template)which, 512, 0, TJ_DTYPE_BF16);
    tj_spec *again = softmax_spec((tj_softmax_template)which, 512, 0, TJ_DTYPE_BF16);
    tj_spec *other = softmax_spec((tj_softmax_template)which, 512, 8, TJ_DTYPE_BF16);
    char *a = emit_ok(s, 0, NULL), *b = emit_ok(s, 0, NULL), *c = emit_ok(again, 0, NULL);
    char *d = emit_ok(other, 0, NULL);
    ck_assert_str_eq(a, b);
    ck_assert_str_eq(a, c);
    ck_assert_str_ne(a, d);
    tj_free(a), tj_free(b), tj_free(c), tj_free(d);
    tj_spec_destroy(s), tj_spec_destroy(again), tj_spec_destroy(other);
  }
  tj_spec *s = program_spec(prog_every_op, 256, 2, 0);
  char *a = emit_ok(s, 1, NULL), *b = emit_ok(s, 1, NULL);
  ck_assert_str_eq(a, b);
  tj_free(a), tj_free(b);
  tj_spec_destroy(s);
}
END_TEST

START_TEST(text_and_info) {
  tj_kernel_info info;
  tj_spec *s = softmax_spec(TJ_SOFTMAX_SINGLE, 1024, 0, TJ_DTYPE_F32);
  char *cuda = emit_ok(s, 1, &info);
  ck_assert_str_eq(info.entry, "tj_softmax");
  ck_assert_int_eq(info.shape.threads, 128);
  ck_assert_int_eq(info.shape.programs_per_cta, 4); /* a warp per row of 1024 (cg_group_size) */
  ck_assert_int_eq(info.shape.shared_bytes, 0);
  ck_assert_int_eq(info.param_count, 5);
  ck_assert_int_eq(info.arch, 90);
  ck_assert_ptr_null(strstr(cuda, "#include"));
  char unroll[64]; /* the emitter and the prelude agree on what is unrolled */
  snprintf(unroll, sizeof unroll, "#define TJ_UNROLL_MAX %d\n", CG_CUDA_UNROLL_MAX);
  ck_assert_ptr_nonnull(strstr(tj_template_cuda_prelude, unroll));
  ck_assert_ptr_nonnull(
      strstr(cuda, "extern \"C\" __global__ void __launch_bounds__(128) tj_softmax("));
  ck_assert_ptr_nonnull(strstr(cuda, "float *arg0, /* y */"));
  ck_assert_ptr_nonnull(strstr(cuda, "unsigned long long tj_programs)"));
  ck_assert_ptr_nonnull(strstr(cuda, "// %16 : f32 = reduce_max %15"));
  ck_assert_ptr_nonnull(strstr(cuda, "tj_reduce<tj_max_op, 32, 1024>(v15,"));
  ck_assert_ptr_nonnull(strstr(cuda, "#pragma unroll\n"));
  ck_assert_ptr_null(strstr(cuda, "tj_group_sync<32>")); /* no load after the store */
  tj_free(cuda);
  tj_spec_destroy(s);

  /* 16 elements over 4 warps: lane groups of 16, 8 rows per CTA, no shared memory. */
  s = softmax_spec(TJ_SOFTMAX_SINGLE, 16, 4, TJ_DTYPE_F16);
  cuda = emit_ok(s, 0, &info);
  ck_assert_int_eq(info.shape.programs_per_cta, 8);
  ck_assert_int_eq(info.shape.shared_bytes, 0);
  ck_assert_ptr_nonnull(strstr(cuda, "tj_group_mask<16>()"));
  ck_assert_ptr_nonnull(strstr(cuda, "tj_f16 *arg1, /* x */"));
  tj_free(cuda);
  tj_spec_destroy(s);

  /* 100 elements over one warp: 4 slots, the last one padding for some lanes. */
  s = program_spec(prog_every_op, 1, 1, 0);
  cuda = emit_ok(s, 0, &info);
  ck_assert_int_eq(info.shape.programs_per_cta, 1);
  ck_assert_ptr_nonnull(strstr(cuda, "j * 32 + tj_rank < 100"));
  tj_free(cuda);
  tj_spec_destroy(s);

  /* A store that the next iteration's load may read is followed by a barrier. */
  s = program_spec(prog_loops, 256, 4, 256);
  cuda = emit_ok(s, 0, &info);
  ck_assert_ptr_nonnull(strstr(cuda, "tj_group_sync<32>(tj_mask);"));
  tj_free(cuda);
  tj_spec_destroy(s);
}
END_TEST

/* The barriers in the kernel body ("tj_group_sync<G>"; the prelude has none). */
static int count_barriers(tj_spec *s) {
  char *cuda = emit_ok(s, 0, NULL);
  int n = 0;
  for (const char *c = strstr(cuda, "tj_group_sync<"); c; c = strstr(c + 1, "tj_group_sync<")) n++;
  tj_free(cuda);
  return n;
}

/* A program over one tile of x: the accesses given, with offsets %i (the
 * slots themselves) or %j (shifted by one: other threads' slots). */
static int barriers_in(const char *accesses) {
  char text[2048];
  snprintf(text, sizeof text,
           "kernel order\n"
           "%%x : ptr<f32> = param x\n"
           "%%y : ptr<f32> = param y\n"
           "%%i : tile<i32,BLOCK> = arange\n"
           "%%one : i32 = const 1\n"
           "%%j : tile<i32,BLOCK> = add %%i, %%one\n"
           "%%f : f32 = const 2\n"
           "%s",
           accesses);
  tj_spec *s = program_spec(text, 256, 4, 0);
  int n = count_barriers(s);
  tj_spec_destroy(s);
  return n;
}

START_TEST(barriers) {
  tj_spec *s = softmax_spec(TJ_SOFTMAX_SINGLE, 1024, 0, TJ_DTYPE_F32);
  ck_assert_int_eq(count_barriers(s), 0); /* in place: every slot stays in its thread */
  tj_spec_destroy(s);
  s = softmax_spec(TJ_SOFTMAX_ONLINE, 4096, 0, TJ_DTYPE_F16);
  ck_assert_int_eq(count_barriers(s), 1); /* after the second loop's store */
  tj_spec_destroy(s);
  /* Load then store: same slots, none; other slots, one before the store,
   * unless a reduction of the loaded tile came in between. */
  ck_assert_int_eq(barriers_in("%v : tile<f32,BLOCK> = load %x, %i\nstore %x, %i, %v\n"), 0);
  ck_assert_int_eq(barriers_in("%v : tile<f32,BLOCK> = load %x, %j\nstore %x, %i, %v\n"), 1);
  ck_assert_int_eq(barriers_in("%v : tile<f32,BLOCK> = load %x, %j\n"
                               "%m : f32 = reduce_max %v\n"
                               "store %x, %i, %m\n"),
                   0);
  /* Store then load or store: same slots, none; other slots, one after. */
  ck_assert_int_eq(barriers_in("store %x, %i, %f\n%v : tile<f32,BLOCK> = load %x, %i\n"), 0);
  ck_assert_int_eq(barriers_in("store %x, %i, %f\n%v : tile<f32,BLOCK> = load %y, %j\n"), 1);
  ck_assert_int_eq(barriers_in("store %x, %i, %f\nstore %x, %j, %f\n"), 1);
  ck_assert_int_eq(barriers_in("store %x, %i, %f\nstore %y, %i, %f\n"), 0);
}
END_TEST

/* ---- NVRTC's PTX on the PTX simulator, against the interpreter -------------- */

/* NVRTC's PTX, for the simulator: NULL on failure (checked by the caller). */
static char *nvrtc_ptx(tj_spec *s, int arch, tj_kernel_info *info) {
  tj_codegen_options o = {arch, 0, 0};
  char *ptx = NULL;
  tj_status st = tj_nvrtc_ptx(s, &o, &ptx, info);
  ck_assert_msg(st == TJ_OK, "%s", tj_spec_error(s));
  return ptx;
}

/* Whether the simulator runs NVRTC's PTX. support_ptxsim.h defines this to
 * 1 once the simulator reads what NVRTC writes (named shared arrays, 16-bit
 * registers, .maxntid, mad/prmt, unordered compares, cvt.rz/rzi) and
 * honours the member masks of shfl.sync and bar.warp.sync; until then the
 * tests of this section are left out of the suite. */
#ifndef PTXSIM_READS_NVRTC
#define PTXSIM_READS_NVRTC 0
#endif

/* Softmax rows through the interpreter and through NVRTC's PTX on the
 * simulator (fewer CTAs than the grid needs); every row element close. */
static void softmax_on_simulator(tj_softmax_template which, int64_t n, int warps, tj_dtype dtype) {
  tj_program *p = NULL;
  tj_spec_options o;
  ck_assert_int_eq(tj_softmax_program(which, n, &p), TJ_OK);
  ck_assert_int_eq(softmax_spec_options(which, dtype, 65536, n, 0, 0, &o), TJ_OK);
  o.num_warps = warps;
  o.cluster = o.split = 1;
  tj_spec *s = specialize_ok(p, &o);
  tj_program_destroy(p);
  int64_t rows = 9, stride = n + 5;
  TjMatrix x, y, want;
  TjRng rng;
  rng_seed(&rng, test_seed((uint64_t)n, (uint64_t)dtype, (uint64_t)warps));
  ck_assert(matrix_alloc(&x, dtype, rows, n, stride, 4) &&
            matrix_alloc(&y, dtype, rows, n, stride, 4));
  ck_assert(matrix_alloc(&want, dtype, rows, n, stride, 4));
  matrix_fill_random(&x, &rng, 3.0, 50.0);
  matrix_set(&x, 1, n / 2, -INFINITY);
  matrix_set(&x, 2, n - 1, NAN);
  tj_arg args[5] = {{TJ_ARG_PTR, {.ptr = want.data}, want.bytes},
                    {TJ_ARG_PTR, {.ptr = x.data}, x.bytes},
                    {TJ_ARG_INT, {.i = stride}, 0},
                    {TJ_ARG_INT, {.i = stride}, 0},
                    {TJ_ARG_INT, {.i = n}, 0}};
  ck_assert_msg(tj_interpret(s, args, 5, rows) == TJ_OK, "%s", tj_spec_error(s));
  tj_kernel_info info;
  char *ptx = nvrtc_ptx(s, 80, &info), why[1024];
  args[0].u.ptr = y.data;
  int ctas = (int)((rows + info.shape.programs_per_cta - 1) / info.shape.programs_per_cta + 1) / 2;
  ck_assert_msg(ptxsim_run(ptx, args, 5, rows, ctas, why, sizeof why), "n=%lld warps=%d %s: %s",
                (long long)n, warps, dtype_label(dtype), why);
  TjTolerance t = dtype_tolerance(dtype);
  t.rtol *= 4; /* ex2.approx against expf */
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < n; c++)
      ck_assert_msg(close_enough(matrix_get(&y, r, c), matrix_get(&want, r, c), t),
                    "n=%lld warps=%d %s: row %lld col %lld: %g, want %g", (long long)n, warps,
                    dtype_label(dtype), (long long)r, (long long)c, matrix_get(&y, r, c),
                    matrix_get(&want, r, c));
  for (size_t i = matrix_index(&y, rows - 1, n); i < y.bytes / dtype_bytes(dtype); i++)
    ck_assert_msg(is_poison(y.data, dtype, i), "n=%lld: element %zu past the rows written",
                  (long long)n, i);
  tj_free(ptx);
  matrix_free(&x), matrix_free(&y), matrix_free(&want);
  tj_spec_destroy(s);
}

/* _i: a width; the single tile at default, one and eight warps, and the
 * online template for the widths past its chunk, each in three dtypes. */
static const int64_t sim_widths[] = {1, 3, 16, 31, 33, 100, 1000, 1025, 4096, 5000};

START_TEST(softmax_matches_interpreter) {
  static const int warps[] = {0, 1, 8};
  int64_t n = sim_widths[_i];
  for (int d = 0; d < TJ_DTYPE_COUNT; d++) {
    if (n <= 4096)
      for (size_t w = 0; w < TJ_COUNTOF(warps); w++)
        softmax_on_simulator(TJ_SOFTMAX_SINGLE, n, warps[w], (tj_dtype)d);
    if (n >= 100) softmax_on_simulator(TJ_SOFTMAX_ONLINE, n, 0, (tj_dtype)d);
  }
}
END_TEST

/* Output buffer i of a random program against the interpreter's: the same
 * elements written, each close (a tolerance for ex2.approx and sum order). */
static void compare_output(const RandProg *rp, int i, const void *got, const void *want) {
  tj_dtype d = i == RP_OUTD ? rp->options.dtype : TJ_DTYPE_F32;
  double scale = 0, slack = d == TJ_DTYPE_BF16 ? 16 : d == TJ_DTYPE_F16 ? 2 : 1;
  size_t n = randprog_elements(rp, i);
  for (size_t k = 0; k < n; k++)
    if (!is_poison(want, d, k) && isfinite(elem_get(want, d, k)))
      scale = fmax(scale, fabs(elem_get(want, d, k)));
  for (size_t k = 0; k < n; k++) {
    bool written = !is_poison(got, d, k), expected = !is_poison(want, d, k);
    double g = elem_get(got, d, k), w = elem_get(want, d, k);
    ck_assert_msg(written == expected, "%s: buffer %d element %zu %s", rp->summary, i, k,
                  written ? "written" : "not written");
    bool close = (isnan(g) && isnan(w)) || g == w ||
                 fabs(g - w) <= 1e-3 * slack * (1.0 + fabs(w)) + 1e-5 * slack * scale;
    ck_assert_msg(!expected || close, "%s: buffer %d element %zu: %.9g, want %.9g", rp->summary, i,
                  k, g, w);
  }
}

/* _i: one random program (the seeds the PTX backend's simulator suite uses). */
START_TEST(random_programs_match_interpreter) {
  RandProg rp;
  char why[1200];
  ck_assert_msg(randprog_make(777000 + (uint64_t)_i, &rp, why, sizeof why), "%s", why);
  tj_spec *s = specialize_ok(rp.program, &rp.options);
  ck_assert_msg(tj_interpret(s, rp.args, RANDPROG_ARGS, rp.grid) == TJ_OK, "%s: %s", rp.summary,
                tj_spec_error(s));
  void *want[3];
  for (int i = 0; i < 3; i++) {
    want[i] = malloc(rp.args[i].bytes);
    memcpy(want[i], rp.args[i].u.ptr, rp.args[i].bytes);
  }
  randprog_poison_outputs(&rp);
  tj_kernel_info info;
  char *ptx = nvrtc_ptx(s, sweep_archs[_i % 3], &info);
  int ctas = (int)((rp.grid + info.shape.programs_per_cta - 1) / info.shape.programs_per_cta + 1) / 2;
  ck_assert_msg(ptxsim_run(ptx, rp.args, RANDPROG_ARGS, rp.grid, ctas, why, sizeof why), "%s: %s",
                rp.summary, why);
  for (int i = 0; i < 3; i++) {
    compare_output(&rp, i, rp.args[i].u.ptr, want[i]);
    free(want[i]);
  }
  tj_free(ptx);
  tj_spec_destroy(s);
  randprog_free(&rp);
}
END_TEST

/* ---- dump-ptx ------------------------------------------------------------------ */

/* dump-ptx --backend nvrtc writes NVRTC's PTX, --emit cuda the CUDA C (the
 * tool is another target: when it has not been built, nothing is checked). */
START_TEST(dump_ptx_backend_nvrtc) {
  char tool[4096], file[] = "/tmp/tj_nvrtc_dumpXXXXXX", out[65536];
  snprintf(tool, sizeof tool, "%s/tools/dump-ptx", TJ_BINARY_DIR);
  if (!is_executable(tool)) {
    printf("test_nvrtc: %s is not built; dump-ptx not checked\n", tool);
    return;
  }
  int fd = mkstemp(file);
  ck_assert_int_ge(fd, 0);
  close(fd);
  char *ptx_argv[] = {tool,    "softmax", "-n",   "1000", "--backend", "nvrtc", "--arch",
                      "sm_80", "--dtype", "bf16", "-o",   file,        NULL};
  int status = run_captured(ptx_argv, out, sizeof out);
  ck_assert_msg(status == 0, "dump-ptx --backend nvrtc: %d\n%s", status, out);
  FILE *f = fopen(file, "rb");
  ck_assert_ptr_nonnull(f);
  size_t n = fread(out, 1, sizeof out - 1, f);
  out[n] = '\0';
  fclose(f);
  unlink(file);
  ck_assert_msg(strstr(out, ".target sm_80") && strstr(out, ".entry tj_softmax("), "%.400s", out);
  char *cuda_argv[] = {tool, "softmax", "-n", "1000", "--emit", "cuda", NULL};
  status = run_captured(cuda_argv, out, sizeof out);
  ck_assert_msg(status == 0 && strstr(out, "extern \"C\" __global__"), "%d: %.400s", status, out);
}
END_TEST

/* ---- errors -------------------------------------------------------------------- */

START_TEST(version) {
  int v = 0;
  ck_assert_int_eq(tj_nvrtc_version(&v), TJ_OK);
  ck_assert_int_ge(v, 11000);
  ck_assert_int_eq(v % 10, 0);
  ck_assert_int_eq(tj_nvrtc_version(NULL), TJ_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(compile_errors_carry_the_log) {
  char error[TJ_ERROR_MAX], *ptx = NULL;
  tj_status st = cg_nvrtc_compile("this is not CUDA", 90, &ptx, error);
  ck_assert_int_eq(st, TJ_ERR_NVRTC);
  ck_assert_ptr_null(ptx);
  ck_assert_msg(strstr(error, "NVRTC_ERROR_COMPILATION") && strstr(error, "error") &&
                    strstr(error, "this is not CUDA"),
                "%s", error);

  /* compute_10 is no target: the option error and NVRTC's log reach the spec. */
  tj_spec *s = softmax_spec(TJ_SOFTMAX_SINGLE, 64, 0, TJ_DTYPE_F32);
  tj_codegen_options o = {10, 0, 0};
  st = tj_nvrtc_ptx(s, &o, &ptx, NULL);
  ck_assert_int_eq(st, TJ_ERR_NVRTC);
  ck_assert_ptr_null(ptx);
  ck_assert_msg(strstr(tj_spec_error(s), "compute_10") &&
                    strstr(tj_spec_error(s), "gpu-architecture"),
                "%s", tj_spec_error(s));
  tj_spec_destroy(s);
}
END_TEST

START_TEST(argument_errors) {
  char *text = NULL;
  tj_codegen_options bad = {-1, 0, 0};
  ck_assert_int_eq(tj_emit_cuda(NULL, NULL, &text, NULL), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_nvrtc_ptx(NULL, NULL, &text, NULL), TJ_ERR_INVALID_ARGUMENT);
  tj_spec *s = softmax_spec(TJ_SOFTMAX_SINGLE, 64, 0, TJ_DTYPE_F32);
  ck_assert_int_eq(tj_emit_cuda(s, NULL, NULL, NULL), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_nvrtc_ptx(s, NULL, NULL, NULL), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(tj_emit_cuda(s, &bad, &text, NULL), TJ_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(text);
  /* NULL options mean the defaults (sm_90). */
  tj_kernel_info info;
  ck_assert_int_eq(tj_emit_cuda(s, NULL, &text, &info), TJ_OK);
  ck_assert_int_eq(info.arch, 90);
  tj_free(text);
  tj_spec_destroy(s);

  /* A row spread over CTAs is the PTX backend's alone. */
  tj_program *wide_p;
  tj_spec *wide_s;
  tj_spec_options wide_o = {.n = 70000, .dtype = TJ_DTYPE_F32, .num_warps = 32, .cluster = 2};
  ck_assert_int_eq(tj_softmax_program(TJ_SOFTMAX_SINGLE, 70000, &wide_p), TJ_OK);
  for (int split = 1; split <= 2; split++) {
    wide_o.cluster = 3 - split;
    wide_o.split = split;
    ck_assert_int_eq(tj_specialize(wide_p, &wide_o, &wide_s), TJ_OK);
    ck_assert_int_eq(tj_emit_cuda(wide_s, NULL, &text, NULL), TJ_ERR_UNSUPPORTED);
    ck_assert_ptr_null(text);
    ck_assert_msg(strstr(tj_spec_error(wide_s), "need the PTX backend"), "%s",
                  tj_spec_error(wide_s));
    tj_spec_destroy(wide_s);
  }
  tj_program_destroy(wide_p);

  /* 2^20 elements on one warp would need 32768 slots per thread. */
  s = softmax_spec(TJ_SOFTMAX_SINGLE, (int64_t)1 << 20, 1, TJ_DTYPE_F32);
  ck_assert_int_eq(tj_emit_cuda(s, NULL, &text, NULL), TJ_ERR_UNSUPPORTED);
  ck_assert_ptr_null(text);
  ck_assert_msg(strstr(tj_spec_error(s), "slots per thread"), "%s", tj_spec_error(s));
  tj_spec_destroy(s);
}
END_TEST

/* First use from several threads at once (this test's process has not
 * loaded NVRTC yet): one load, and every compile gives the same PTX. */
enum { COMPILERS = 4 };

static void *compile_one(void *arg) {
  char **ptx = arg;
  tj_program *p = NULL;
  tj_spec_options o;
  tj_spec *s = NULL;
  if (tj_softmax_program(TJ_SOFTMAX_SINGLE, 300, &p) == TJ_OK &&
      softmax_spec_options(TJ_SOFTMAX_SINGLE, TJ_DTYPE_F16, 65536, 300, 0, 0, &o) == TJ_OK &&
      tj_specialize(p, &o, &s) == TJ_OK && tj_nvrtc_ptx(s, NULL, ptx, NULL) != TJ_OK)
    *ptx = NULL;
  tj_spec_destroy(s);
  tj_program_destroy(p);
  return NULL;
}

START_TEST(concurrent_first_use) {
  pthread_t threads[COMPILERS];
  char *ptx[COMPILERS] = {NULL};
  for (int i = 0; i < COMPILERS; i++)
    ck_assert_int_eq(pthread_create(&threads[i], NULL, compile_one, &ptx[i]), 0);
  for (int i = 0; i < COMPILERS; i++) pthread_join(threads[i], NULL);
  for (int i = 0; i < COMPILERS; i++) {
    ck_assert_msg(ptx[i] != NULL, "compile %d failed", i);
    ck_assert_str_eq(ptx[i], ptx[0]);
  }
  for (int i = 0; i < COMPILERS; i++) tj_free(ptx[i]);
}
END_TEST

/* In this process NVRTC is loaded already, so the check runs in a fresh one:
 * this program again, with TILEJIT_LIBNVRTC naming no library. */
#define NO_NVRTC_ARG "--no-nvrtc-child"

static int no_nvrtc_child(void) {
  int v = 1;
  char *text = NULL;
  tj_program *p = NULL;
  tj_spec_options o;
  tj_spec *s = NULL;
  if (tj_nvrtc_version(&v) != TJ_ERR_NO_NVRTC || v != 0) return 10;
  if (tj_softmax_program(TJ_SOFTMAX_SINGLE, 128, &p) != TJ_OK ||
      softmax_spec_options(TJ_SOFTMAX_SINGLE, TJ_DTYPE_F32, 65536, 128, 0, 0, &o) != TJ_OK ||
      tj_specialize(p, &o, &s) != TJ_OK)
    return 11;
  if (tj_nvrtc_ptx(s, NULL, &text, NULL) != TJ_ERR_NO_NVRTC || text) return 12;
  if (!strstr(tj_spec_error(s), "libnvrtc") || !strstr(tj_spec_error(s), "/nonexistent/"))
    return 13;
  if (tj_emit_cuda(s, NULL, &text, NULL) != TJ_OK) return 14; /* needs no NVRTC */
  tj_free(text);
  tj_spec_destroy(s);
  tj_program_destroy(p);
  return 0;
}

START_TEST(missing_library) {
  char self[4096], out[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  ck_assert_int_gt(n, 0);
  self[n] = '\0';
  ck_assert_int_eq(setenv("TILEJIT_LIBNVRTC", "/nonexistent/libnvrtc.so.13", 1), 0);
  char *argv[] = {self, NO_NVRTC_ARG, NULL};
  int status = run_captured(argv, out, sizeof out);
  unsetenv("TILEJIT_LIBNVRTC");
  ck_assert_msg(status == 0, "child check %d failed:\n%s", status, out);
}
END_TEST

static Suite *nvrtc_suite(void) {
  Suite *s = suite_create("nvrtc");
  TCase *text = tcase_create("text");
  tcase_add_test(text, same_spec_same_text);
  tcase_add_test(text, text_and_info);
  tcase_add_test(text, programs_use_every_op);
  tcase_add_test(text, barriers);
  suite_add_tcase(s, text);
  TCase *errors = tcase_create("errors");
  tcase_set_timeout(errors, 60);
  tcase_add_test(errors, version);
  tcase_add_test(errors, compile_errors_carry_the_log);
  tcase_add_test(errors, argument_errors);
  tcase_add_test(errors, missing_library);
  tcase_add_test(errors, concurrent_first_use);
  tcase_add_test(errors, dump_ptx_backend_nvrtc);
  suite_add_tcase(s, errors);
  if (PTXSIM_READS_NVRTC) {
    TCase *sim = tcase_create("simulator");
    tcase_set_timeout(sim, 600);
    tcase_add_loop_test(sim, softmax_matches_interpreter, 0, (int)TJ_COUNTOF(sim_widths));
    tcase_add_loop_test(sim, random_programs_match_interpreter, 0, 150);
    suite_add_tcase(s, sim);
  }
  TCase *sweep = tcase_create("sweep");
  tcase_set_timeout(sweep, 1400); /* 768 compiles: about 9 minutes under ASan on 2 cores */
  tcase_add_loop_test(sweep, programs_compile, 0, 6);
  tcase_add_loop_test(sweep, softmax_default_warps, 0, 6);
  tcase_add_loop_test(sweep, softmax_every_warps, 0, 18);
  suite_add_tcase(s, sweep);
  return s;
}

/* Whether libnvrtc loads, asked in a child so that this process never loads
 * NVRTC: each test then starts without it (concurrent_first_use relies on
 * that). */
static bool nvrtc_loads(void) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    int v;
    _exit(tj_nvrtc_version(&v) == TJ_OK ? 0 : 1);
  }
  int status = 1;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], NO_NVRTC_ARG) == 0) return no_nvrtc_child();
  if (!nvrtc_loads()) {
    printf("test_nvrtc: libnvrtc cannot be loaded; skipped\n");
    return 77;
  }
  if (!PTXSIM_READS_NVRTC)
    printf("test_nvrtc: the PTX simulator does not run NVRTC's PTX yet; "
           "the simulator comparisons are left out\n");
  return test_run_suite(nvrtc_suite());
}
