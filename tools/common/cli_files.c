/*
 * cli_files.c — the tools' input and output files. An input is read whole
 * into memory, as text: "-" is stdin; a directory, a file over 64 MiB (an
 * endless one such as /dev/zero is cut off there, not read forever) and a
 * file holding a NUL byte are refused with one line that says which, and
 * where the NUL is, so that nothing reaches the IR parser cut short. An
 * output of "-" (or none) is stdout, which is flushed, never closed; a
 * tool whose report also goes to stdout can take stdout for a file alone
 * (tj-bench --csv -) and print its report on stderr.
 *
 * Messages are "TOOL: PATH: why" on stderr ("<stdin>" for "-"); the caller
 * turns a failure into exit status 1.
 */
#define _POSIX_C_SOURCE 200809L /* fileno, dup, fdopen */

#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define READ_CHUNK ((size_t)1 << 16)

static bool is_stdio(const char *path) { return !path || !strcmp(path, "-"); }

static const char *shown(const char *path) { return is_stdio(path) ? "<stdin>" : path; }

/* Everything f holds, up to CLI_INPUT_MAX bytes; NULL after saying why. */
static char *read_all(const char *tool, const char *path, FILE *f, size_t *length) {
  size_t cap = READ_CHUNK, n = 0, got;
  char *text = malloc(cap + 1), *grown;
  while (text && (got = fread(text + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n > CLI_INPUT_MAX) break;
    if (n < cap) continue;
    cap = cap * 2 > CLI_INPUT_MAX + 1 ? CLI_INPUT_MAX + 1 : cap * 2;
    if (!(grown = realloc(text, cap + 1))) free(text);
    text = grown;
  }
  if (!text) {
    fprintf(stderr, "%s: %s: cannot allocate %zu bytes to read it\n", tool, shown(path), cap + 1);
  } else if (n > CLI_INPUT_MAX) {
    fprintf(stderr, "%s: %s: over %zu MiB, the most a tool reads (an endless file?)\n", tool,
            shown(path), CLI_INPUT_MAX >> 20);
  } else if (ferror(f)) {
    fprintf(stderr, "%s: %s: read error: %s\n", tool, shown(path), strerror(errno));
  } else {
    text[n] = '\0';
    *length = n;
    return text;
  }
  free(text);
  return NULL;
}

/* Whether text holds no NUL byte; else says at which line and column. */
static bool is_text(const char *tool, const char *path, const char *text, size_t length) {
  const char *nul = memchr(text, '\0', length);
  if (!nul) return true;
  size_t line = 1, col = 1;
  for (const char *p = text; p < nul; p++) {
    col = *p == '\n' ? 1 : col + 1;
    line += *p == '\n';
  }
  fprintf(stderr, "%s: %s:%zu:%zu: a NUL byte: not a text file\n", tool, shown(path), line, col);
  return false;
}

char *cli_read_text(const char *tool, const char *path, size_t *length) {
  FILE *f = is_stdio(path) ? stdin : fopen(path, "rb");
  struct stat st;
  char *text = NULL;
  if (!f) {
    fprintf(stderr, "%s: %s: %s\n", tool, path, strerror(errno));
    return NULL;
  }
  if (fstat(fileno(f), &st) != 0)
    fprintf(stderr, "%s: %s: %s\n", tool, shown(path), strerror(errno));
  else if (S_ISDIR(st.st_mode))
    fprintf(stderr, "%s: %s: is a directory, not a file\n", tool, shown(path));
  else if (S_ISREG(st.st_mode) && (uintmax_t)st.st_size > CLI_INPUT_MAX)
    fprintf(stderr, "%s: %s: over %zu MiB, the most a tool reads\n", tool, shown(path),
            CLI_INPUT_MAX >> 20);
  else
    text = read_all(tool, path, f, length);
  if (f != stdin) fclose(f);
  if (text && !is_text(tool, path, text, *length)) {
    free(text);
    text = NULL;
  }
  return text;
}

FILE *cli_open_output(const char *tool, const char *path) {
  if (is_stdio(path)) return stdout;
  FILE *f = fopen(path, "wb");
  if (!f) fprintf(stderr, "%s: cannot write %s: %s\n", tool, path, strerror(errno));
  return f;
}

FILE *cli_take_stdout(const char *tool) {
  fflush(stdout);
  int fd = dup(STDOUT_FILENO);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (f && dup2(STDERR_FILENO, STDOUT_FILENO) >= 0) return f;
  fprintf(stderr, "%s: cannot take stdout for the output: %s\n", tool, strerror(errno));
  if (f) fclose(f);
  else if (fd >= 0) close(fd);
  return NULL;
}

bool cli_close_output(const char *tool, const char *path, FILE *f) {
  bool ok = !ferror(f);
  ok = (f == stdout ? fflush(f) : fclose(f)) == 0 && ok;
  if (!ok) fprintf(stderr, "%s: writing %s failed\n", tool, is_stdio(path) ? "<stdout>" : path);
  return ok;
}
