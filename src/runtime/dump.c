/*
 * dump.c — TILEJIT_DUMP=DIR: what each kernel compile saw and made, as
 * files, like Triton's dump variables.
 *
 * For every kernel a context compiles (tj_compile, tj_softmax's misses),
 * module.c calls rt_dump_kernel with the specialized IR (tj_spec_print),
 * the PTX it gave the driver and the driver's JIT log (the info log, or the
 * error when the JIT failed). They go to DIR/NAME.tjir, DIR/NAME.ptx and
 * DIR/NAME.log, NAME being the entry and a hash of the kernel's disk key,
 * so one kernel always gets the same names and a rerun overwrites them.
 * With TILEJIT_DUMP set, kernels are compiled even when the disk cache
 * holds them, so that a run dumps all of its kernels.
 *
 * Dumping is a debugging aid: a directory that cannot be made or a file
 * that cannot be written is skipped without a word.
 */
#include "runtime/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void write_text(const char *dir, const char *name, const char *ext, const char *text) {
  if (!text) return;
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s%s", dir, name, ext) >= (int)sizeof path) return;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return;
  rt_write_all(fd, text, strlen(text));
  close(fd);
}

void rt_dump_kernel(const char *dir, const char *name, const char *ir, const char *ptx,
                    const char *log) {
  if (!dir || !*dir) return;
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) return;
  write_text(dir, name, ".tjir", ir);
  write_text(dir, name, ".ptx", ptx);
  write_text(dir, name, ".log", log);
}
