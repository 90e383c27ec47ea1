/*
 * cli.h — what the tools (dump-ptx, tj-softmax, tj-bench, tj-run) share
 * on their command lines: exit statuses, one table-driven argument parser
 * on top of getopt_long, and the reading and writing of files, where "-" is
 * stdin or stdout. (data.h: the host data they share.)
 *
 * A tool describes each option in one row of a CliOption table: its names,
 * the kind of value and where in the tool's options struct it goes, its
 * range or choices, the modes it applies to and those that need it, and one
 * line of help. cli_parse fills the struct, prints --help and --version, and
 * refuses (exit status 2) what the table does not allow: unknown options,
 * values that are not decimal integers of the option's range, an option of
 * another mode, two modes at once, a missing required option. Adding an
 * option is one row and one field.
 *
 *   cli_options.c  the parser, --help, --version, values
 *   cli_files.c    whole text files in (bounded), output files out
 */
#ifndef TJ_TOOLS_CLI_H
#define TJ_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit statuses, the same for every tool. */
enum {
  CLI_EXIT_OK = 0,     /* success */
  CLI_EXIT_FAILED = 1, /* a check failed, or a library, driver or file error */
  CLI_EXIT_USAGE = 2,  /* the command line is wrong (nothing was run) */
  CLI_EXIT_NO_GPU = 3, /* no CUDA driver or GPU, in a mode that needs one */
};

/* ------------------------------------------------------- cli_options.c */

#define CLI_MAX_OPTIONS 64
#define CLI_ALL_MODES   (~0u)
#define CLI_MODE(m)     (1u << (m)) /* a mode's bit in CliOption.modes and .needed */

typedef enum CliKind {
  CLI_SELECT, /* no value: selects the mode .mode (e.g. --codegen) */
  CLI_WORD,   /* a bare word, not an option: selects the mode .mode (dump-ptx softmax) */
  CLI_FLAG,   /* no value: sets the int at .offset to 1 */
  CLI_INT,    /* a decimal integer in [lo, hi], stored as int */
  CLI_INT64,  /* a decimal integer in [lo, hi], stored as int64_t */
  CLI_CHOICE, /* one of .choices (NULL-ended), its index stored as int */
  CLI_MASK,   /* one of .choices, or the last of them for all: a bit each, stored as unsigned */
  CLI_ARCH,   /* sm_XX or XX, an arch the code generator knows, stored as int */
  CLI_TEXT,   /* non-empty text (a file: "-" for stdin or stdout), stored as const char * */
  CLI_CUSTOM, /* the tool's CliTool.custom parses it */
  CLI_BARE,   /* a bare argument that is no CLI_WORD (tj-run FILE.tj), stored as CLI_TEXT;
                 .name names it in messages and --help ("FILE.tj"); at most once */
} CliKind;

typedef struct CliOption {
  const char *name; /* long name without "--"; NULL: short only */
  int letter;       /* short name, or 0 */
  CliKind kind;
  size_t offset;              /* of its field in the tool's options struct */
  int64_t lo, hi;             /* CLI_INT, CLI_INT64: the range */
  const char *const *choices; /* CLI_CHOICE, CLI_MASK */
  int mode;                   /* the mode it selects (also for a valued option); 0: none */
  unsigned modes;             /* CLI_MODE bits of the modes it applies to; 0: all */
  unsigned needed;            /* CLI_MODE bits of the modes that need it */
  const char *value;          /* its value's name in messages and --help ("N") */
  const char *help;           /* one line */
} CliOption;

/* A CLI_CUSTOM option's value; false with why filled (a whole sentence
 * naming the option) when it is bad. */
typedef bool (*CliCustom)(void *options, const CliOption *opt, char *value, char *why,
                          size_t why_size);

typedef struct CliTool {
  const char *name;  /* in messages: "dump-ptx" */
  const char *usage; /* the synopsis, one or more lines, each starting with the name */
  const char *about; /* --help's text after the options: modes, defaults, output */
  const CliOption *options;
  size_t count;
  size_t mode_offset; /* the int of the options struct that receives the mode */
  int default_mode;   /* when no option selects one; 0: one must be selected */
  CliCustom custom;
} CliTool;

/* Parses argv into options (filled with defaults by the caller). Returns
 * -1 to go on, CLI_EXIT_OK after --help or --version, or CLI_EXIT_USAGE
 * after saying what was wrong on stderr. */
int cli_parse(const CliTool *tool, int argc, char **argv, void *options);

/* Sets option opt of options from text, as the command line would; shown is
 * what to call it in why (e.g. "BLOCK" for dump-ptx -D BLOCK=8). */
bool cli_set(const CliTool *tool, const CliOption *opt, void *options, char *text,
             const char *shown, char *why, size_t why_size);

/* The row whose long name is name, or NULL. */
const CliOption *cli_find(const CliTool *tool, const char *name);

/* "TOOL: message" and a pointer to --help on stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const CliTool *tool, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* --------------------------------------------------------- cli_files.c */

#define CLI_INPUT_MAX ((size_t)64 << 20) /* the most a tool reads from a file: 64 MiB */

/* The whole of path ("-": stdin) as NUL-terminated text of *length bytes,
 * or NULL after "TOOL: PATH: why" on stderr: a directory, a file over
 * CLI_INPUT_MAX (an endless one like /dev/zero included), a NUL byte (with
 * its line and column), a read error. Free it with free(). */
char *cli_read_text(const char *tool, const char *path, size_t *length);

/* path opened for writing ("-" or NULL: stdout), or NULL after saying why. */
FILE *cli_open_output(const char *tool, const char *path);

/* Stdout for one output alone: what the tool prints to stdout goes to
 * stderr from now on. NULL after saying why. */
FILE *cli_take_stdout(const char *tool);

/* Flushes stdout or closes a file; false after saying the write failed. */
bool cli_close_output(const char *tool, const char *path, FILE *f);

#endif
