/*
 * gpu_disk_cache.c — the kernel cache on disk across processes, on a GPU.
 *
 * The test runs this same executable as a child process (argument
 * --child), each time with a fresh environment over one cache directory.
 * The child runs a few softmax shapes (kernels of different BLOCK, dtype
 * and alignment) checked against the float64 reference, compiles one spec
 * with tj_compile, and writes its context's tj_cache_stats to a file. The
 * parent wants:
 *   1. an empty directory: every kernel compiled and written, no disk hit;
 *   2. the same again, a new process: every kernel a disk hit, no codegen,
 *      no JIT, nothing written, results correct, the JIT log still there;
 *   3. every file corrupted: all rejected, compiled and written again;
 *   4. TILEJIT_CACHE_DISABLE=1: the disk untouched (all disk counters 0);
 *   5. TILEJIT_DUMP=DIR on a warm cache: every kernel compiled anyway, and
 *      DIR holds its .tjir, .ptx and .log.
 * It exits 77 without a GPU (gpu_main).
 */
#define _GNU_SOURCE /* mkdtemp, nftw's FTW_PHYS */

#include "support_gpu.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define STATS_ENV  "TJ_DISK_TEST_STATS"
#define CASE_COUNT ((int)(sizeof child_cases / sizeof child_cases[0]))

/* ------------------------------------------------------------ the child */

static const GpuCase child_cases[] = {
    {.dtype = TJ_DTYPE_F32, .m = 300, .n = 1000, .seed = 1},
    {.dtype = TJ_DTYPE_F16, .m = 100, .n = 3000, .seed = 2},
    {.dtype = TJ_DTYPE_BF16, .m = 1000, .n = 100, .seed = 3},
    {.dtype = TJ_DTYPE_F32, .m = 64, .n = 20000, .seed = 4},
    {.dtype = TJ_DTYPE_F32, .m = 50, .n = 999, .offset = 1, .seed = 5}, /* scalar kernel */
};

START_TEST(child_runs_and_reports) {
  tj_context *ctx = gpu_context(NULL);
  GpuTally tally = {0};
  gpu_run_cases(ctx, child_cases, CASE_COUNT, NULL, false, &tally);
  tj_program *p = NULL;
  tj_spec *s = NULL;
  tj_spec_options so;
  tj_softmax_plan plan;
  ck_assert_int_eq(tj_softmax_program(TJ_SOFTMAX_SINGLE, 500, &p), TJ_OK);
  ck_assert_int_eq(tj_softmax_plan_for(NULL, TJ_DTYPE_F32, 64, 500, NULL, &plan), TJ_OK);
  ck_assert_int_eq(tj_softmax_spec_options(&plan, TJ_DTYPE_F32, 500, &so), TJ_OK);
  ck_assert_int_eq(tj_specialize(p, &so, &s), TJ_OK);
  tj_kernel *k = NULL;
  ck_assert_msg(tj_compile(ctx, s, TJ_BACKEND_PTX, &k) == TJ_OK, "%s", tj_context_error(ctx));
  tj_cache_stats st;
  ck_assert_int_eq(tj_context_cache_stats(ctx, &st), TJ_OK);
  FILE *f = fopen(getenv(STATS_ENV), "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "%llu %llu %llu %llu %llu %llu %.3f %.3f %zu\n", (unsigned long long)st.misses,
          (unsigned long long)st.disk_hits, (unsigned long long)st.disk_misses,
          (unsigned long long)st.disk_writes, (unsigned long long)st.disk_rejects,
          (unsigned long long)st.disk_errors, st.codegen_us, st.jit_ms, strlen(tj_kernel_log(k)));
  ck_assert_int_eq(fclose(f), 0);
  tj_spec_destroy(s);
  tj_program_destroy(p);
  tj_context_destroy(ctx);
}
END_TEST

/* ----------------------------------------------------------- the parent */

typedef struct ChildStats {
  unsigned long long misses, disk_hits, disk_misses, disk_writes, disk_rejects, disk_errors;
  double codegen_us, jit_ms;
  size_t log_len;
} ChildStats;

typedef struct Run {
  char base[256], cache[320], stats[320], dump[320];
} Run;

/* Runs the child with TILEJIT_CACHE_DIR=cache and the extra variable
 * name=value (NULL: none); reads its stats. */
static ChildStats run_child(const Run *r, const char *name, const char *value) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  ck_assert_int_gt(n, 0);
  self[n] = '\0';
  remove(r->stats);
  fflush(NULL);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    setenv("TILEJIT_CACHE_DIR", r->cache, 1);
    setenv(STATS_ENV, r->stats, 1);
    unsetenv("TILEJIT_CACHE_DISABLE");
    unsetenv("TILEJIT_DUMP");
    if (name) setenv(name, value, 1);
    execl(self, self, "--child", (char *)NULL);
    _exit(127);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed: status %d", status);
  ChildStats s;
  FILE *f = fopen(r->stats, "r");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fscanf(f, "%llu %llu %llu %llu %llu %llu %lf %lf %zu", &s.misses, &s.disk_hits,
                          &s.disk_misses, &s.disk_writes, &s.disk_rejects, &s.disk_errors,
                          &s.codegen_us, &s.jit_ms, &s.log_len),
                   9);
  fclose(f);
  fprintf(stderr,
          "  %-26s misses %llu, disk: hits %llu misses %llu writes %llu rejects %llu errors %llu; "
          "codegen %.0f us, JIT %.2f ms\n",
          name ? name : "(default)", s.misses, s.disk_hits, s.disk_misses, s.disk_writes,
          s.disk_rejects, s.disk_errors, s.codegen_us, s.jit_ms);
  return s;
}

static int count_suffix(const char *dir, const char *suffix) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int count = 0;
  size_t k = strlen(suffix);
  for (struct dirent *e; (e = readdir(d));) {
    size_t n = strlen(e->d_name);
    count += n > k && strcmp(e->d_name + n - k, suffix) == 0;
  }
  closedir(d);
  return count;
}

/* Flips a byte in the middle of every cache file. */
static void corrupt_all(const char *dir) {
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  for (struct dirent *e; (e = readdir(d));) {
    size_t n = strlen(e->d_name);
    if (n < 4 || strcmp(e->d_name + n - 4, ".tjc") != 0) continue;
    int fd = openat(dirfd(d), e->d_name, O_RDWR);
    ck_assert_int_ge(fd, 0);
    off_t mid = lseek(fd, 0, SEEK_END) / 2;
    unsigned char c;
    ck_assert_int_eq(pread(fd, &c, 1, mid), 1);
    c ^= 0xff;
    ck_assert_int_eq(pwrite(fd, &c, 1, mid), 1);
    close(fd);
  }
  closedir(d);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

START_TEST(a_second_process_loads_kernels_from_disk) {
  Run r;
  const char *tmp = getenv("TMPDIR");
  snprintf(r.base, sizeof r.base, "%s/tj-gpu-disk-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(r.base));
  snprintf(r.cache, sizeof r.cache, "%s/cache", r.base);
  snprintf(r.stats, sizeof r.stats, "%s/stats", r.base);
  snprintf(r.dump, sizeof r.dump, "%s/dump", r.base);

  ChildStats cold = run_child(&r, NULL, NULL);
  unsigned long long kernels = cold.misses;
  ck_assert_uint_ge(kernels, CASE_COUNT);
  ck_assert_uint_eq(cold.disk_hits, 0);
  ck_assert_uint_eq(cold.disk_misses, kernels);
  ck_assert_uint_eq(cold.disk_writes, kernels);
  ck_assert_uint_eq(cold.disk_errors, 0);
  ck_assert_int_eq(count_suffix(r.cache, ".tjc"), (int)kernels);

  ChildStats warm = run_child(&r, NULL, NULL);
  ck_assert_uint_eq(warm.misses, kernels);
  ck_assert_uint_eq(warm.disk_hits, kernels);
  ck_assert_uint_eq(warm.disk_writes, 0);
  ck_assert_uint_eq(warm.disk_rejects, 0);
  ck_assert(warm.codegen_us == 0.0 && warm.jit_ms == 0.0);
  ck_assert_uint_eq(warm.log_len, cold.log_len); /* the JIT log came back from disk */

  corrupt_all(r.cache);
  ChildStats bad = run_child(&r, "TILEJIT_CORRUPTED", "1");
  ck_assert_uint_eq(bad.disk_hits, 0);
  ck_assert_uint_eq(bad.disk_rejects, kernels);
  ck_assert_uint_eq(bad.disk_writes, kernels);
  ChildStats again = run_child(&r, NULL, NULL);
  ck_assert_uint_eq(again.disk_hits, kernels);

  ChildStats off = run_child(&r, "TILEJIT_CACHE_DISABLE", "1");
  ck_assert_uint_eq(off.disk_hits + off.disk_misses + off.disk_writes + off.disk_rejects, 0);
  ck_assert_uint_eq(off.misses, kernels);

  ChildStats dumped = run_child(&r, "TILEJIT_DUMP", r.dump);
  ck_assert_uint_eq(dumped.disk_hits, 0);
  ck_assert_int_eq(count_suffix(r.dump, ".tjir"), (int)kernels);
  ck_assert_int_eq(count_suffix(r.dump, ".ptx"), (int)kernels);
  ck_assert_int_eq(count_suffix(r.dump, ".log"), (int)kernels);

  nftw(r.base, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
END_TEST

int main(int argc, char **argv) {
  bool child = argc == 2 && strcmp(argv[1], "--child") == 0;
  Suite *s = suite_create("gpu_disk_cache");
  TCase *tc = tcase_create("disk");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, child ? child_runs_and_reports : a_second_process_loads_kernels_from_disk);
  suite_add_tcase(s, tc);
  return child ? test_run_suite(s) : gpu_main(s);
}
