/*
 * ptxas.c — running NVIDIA's assembler on generated PTX, for dump-ptx
 * --validate and the test suites. The code generator itself never needs it;
 * nothing on the path from a program to a launched kernel calls this file.
 *
 * ptxas is looked up on $PATH, then in $CUDA_HOME/bin, then in the default
 * toolkit directory. The PTX goes to a temporary file; ptxas runs with -v
 * (its resource report) and writes no output file; its stdout and stderr
 * come back as one log. cg_ptxas_parse reads the per-entry report:
 *
 *   ptxas info    : Compiling entry function 'tj_softmax' for 'sm_90'
 *   ptxas info    : Function properties for tj_softmax
 *       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
 *   ptxas info    : Used 30 registers, used 1 barriers, 32 bytes smem, ...
 */
#include "codegen/codegen.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static bool executable(const char *dir, size_t len, char *out, size_t size) {
  int n = snprintf(out, size, "%.*s/ptxas", (int)len, dir);
  return n > 0 && (size_t)n < size && access(out, X_OK) == 0;
}

bool cg_ptxas_find(char *out, size_t size) {
  const char *path = getenv("PATH");
  for (const char *s = path; s && *s;) {
    const char *end = strchr(s, ':');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    if (len && executable(s, len, out, size)) return true;
    s = end ? end + 1 : NULL;
  }
  const char *home = getenv("CUDA_HOME");
  char dir[512];
  if (home && *home) {
    snprintf(dir, sizeof dir, "%s/bin", home);
    if (executable(dir, strlen(dir), out, size)) return true;
  }
  return executable("/usr/local/cuda/bin", strlen("/usr/local/cuda/bin"), out, size);
}

static bool write_temp(const char *text, char *path, size_t size) {
  const char *dir = getenv("TMPDIR");
  snprintf(path, size, "%s/tilejit-XXXXXX.ptx", dir && *dir ? dir : "/tmp");
  int fd = mkstemps(path, 4);
  if (fd < 0) return false;
  size_t len = strlen(text), done = 0;
  while (done < len) {
    ssize_t n = write(fd, text + done, len - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += (size_t)n;
  }
  close(fd);
  if (done < len) unlink(path);
  return done == len;
}

/* Runs argv with stdout and stderr into one pipe; returns the exit status. */
static int spawn(char *const argv[], TjBuf *log) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  char chunk[4096];
  ssize_t n;
  while (rc == 0 &&
         ((n = read(fds[0], chunk, sizeof chunk - 1)) > 0 || (n < 0 && errno == EINTR))) {
    if (n < 0) continue;
    chunk[n] = '\0';
    buf_puts(log, chunk);
  }
  close(fds[0]);
  int status = 0;
  if (rc != 0) return -1;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) continue;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

tj_status cg_ptxas_run(const char *ptxas, const char *ptx, int arch, char **log) {
  TjBuf out;
  buf_init(&out);
  char file[512], target[32];
  const CgArch *a = cg_arch_find(arch);
  snprintf(target, sizeof target, "-arch=%s", a ? a->target : "sm_90");
  int rc = -1;
  if (!write_temp(ptx, file, sizeof file)) {
    buf_printf(&out, "cannot write a temporary PTX file\n");
  } else {
    char tool[1024], verbose[] = "-v", o[] = "-o", null[] = "/dev/null";
    snprintf(tool, sizeof tool, "%s", ptxas);
    char *argv[] = {tool, target, verbose, o, null, file, NULL};
    rc = spawn(argv, &out);
    if (rc < 0) buf_printf(&out, "cannot run %s\n", ptxas);
    unlink(file);
  }
  if (log)
    *log = buf_take(&out);
  else
    buf_free(&out);
  return rc == 0 ? TJ_OK : TJ_ERR_TOOL;
}

static int number_before(const char *line, const char *what) {
  const char *at = strstr(line, what);
  if (!at) return 0;
  while (at > line && (at[-1] == ' ')) at--;
  while (at > line && at[-1] >= '0' && at[-1] <= '9') at--;
  return atoi(at);
}

static void parse_line(const char *line, CgPtxasEntry *e) {
  if (strstr(line, "bytes stack frame")) {
    e->stack_frame = number_before(line, "bytes stack frame");
    e->spill_stores = number_before(line, "bytes spill stores");
    e->spill_loads = number_before(line, "bytes spill loads");
  }
  if (strstr(line, "Used ")) {
    e->registers = atoi(strstr(line, "Used ") + 5);
    e->local_bytes = number_before(line, "bytes lmem");
    e->shared_bytes = number_before(line, "bytes smem");
  }
}

int cg_ptxas_parse(const char *log, CgPtxasEntry *out, int max) {
  int count = 0;
  for (const char *s = log; s && *s;) {
    const char *end = strchr(s, '\n');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    char line[512];
    snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), s);
    const char *name = strstr(line, "Function properties for ");
    if (name && count < max) {
      memset(&out[count], 0, sizeof out[count]);
      snprintf(out[count].name, sizeof out[count].name, "%s",
               name + strlen("Function properties for "));
      count++;
    } else if (count > 0) {
      parse_line(line, &out[count - 1]);
    }
    s = end ? end + 1 : NULL;
  }
  return count;
}
