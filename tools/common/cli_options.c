/*
 * cli_options.c — the tools' argument parser: a CliOption table (cli.h)
 * becomes getopt_long's long options and short option string, and each
 * option getopt_long returns is checked and stored by its row's kind.
 * Bare words (dump-ptx softmax) come back in order through getopt's "-"
 * mode, so POSIXLY_CORRECT changes nothing.
 *
 * The conventions are those of compiler drivers: -DNAME=V and -D NAME=V,
 * --warps=4 and --warps 4, the last of a repeated option wins, "--" ends
 * the options. Numbers are decimal integers only ("010" is ten; "0x10",
 * "+8", " 8" and "1e3" are refused) within the row's range. Every error is
 * one line on stderr naming the option and what it takes, then a pointer
 * to --help, and exit status 2; --help prints the whole table on stdout.
 */
#include "cli.h"

#include "codegen/codegen.h" /* cg_arch_find, cg_arch_at: the archs --arch takes */
#include "ir/ir.h"           /* tj_parse_decimal */
#include "tilejit.h"

#include <getopt.h>
#include <stdarg.h>
#include <string.h>

#define HELP_ID    1000 /* getopt_long's value for --help, -h */
#define VERSION_ID 1001 /* for --version */
#define ROW_ID     2000 /* ROW_ID + i: row i of the table, by its long name */
#define WHY_MAX    256

/* The state of one parse: the table, the struct it fills, what was seen. */
typedef struct Parse {
  const CliTool *tool;
  void *options;
  bool seen[CLI_MAX_OPTIONS];
  const char *spelled[CLI_MAX_OPTIONS]; /* how each seen option was written */
  int mode, mode_row;                   /* the mode selected so far and its row; 0, -1: none */
} Parse;

int cli_usage_error(const CliTool *tool, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s: ", tool->name);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n%s: '%s --help' lists the options\n", tool->name, tool->name);
  return CLI_EXIT_USAGE;
}

const CliOption *cli_find(const CliTool *tool, const char *name) {
  for (size_t i = 0; i < tool->count; i++)
    if (tool->options[i].name && !strcmp(tool->options[i].name, name)) return &tool->options[i];
  return NULL;
}

/* ---- values ------------------------------------------------------------ */

static void *field(void *options, const CliOption *opt) { return (char *)options + opt->offset; }

/* "a, b or c" of a NULL-ended list (without its last entry for a mask). */
static void list_choices(const CliOption *opt, char *out, size_t size) {
  size_t n = 0, len = 0;
  while (opt->choices[n]) n++;
  out[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
    int w = snprintf(out + len, size - len, "%s%s", sep, opt->choices[i]);
    if (w < 0 || (size_t)w >= size - len) return;
    len += (size_t)w;
  }
}

static int find_choice(const CliOption *opt, const char *text) {
  for (int i = 0; opt->choices[i]; i++)
    if (!strcmp(text, opt->choices[i])) return i;
  return -1;
}

static bool parse_arch(const char *text, int *arch) {
  int64_t v;
  if (!strncmp(text, "sm_", 3)) text += 3;
  if (!tj_parse_decimal(text, 1, 1000, &v) || !cg_arch_find((int)v)) return false;
  *arch = (int)v;
  return true;
}

static void list_archs(char *out, size_t size) {
  size_t len = 0;
  out[0] = '\0';
  for (int i = 0; i < cg_arch_count() && len < size; i++) {
    int w = snprintf(out + len, size - len, "%ssm_%d", i ? ", " : "", cg_arch_at(i)->sm);
    if (w < 0) return;
    len += (size_t)w;
  }
}

bool cli_set(const CliTool *tool, const CliOption *opt, void *options, char *text,
             const char *shown, char *why, size_t why_size) {
  char list[160];
  int64_t v;
  int i;
  why[0] = '\0';
  switch (opt->kind) {
  case CLI_INT:
  case CLI_INT64:
    if (!tj_parse_decimal(text, opt->lo, opt->hi, &v)) break;
    if (opt->kind == CLI_INT)
      *(int *)field(options, opt) = (int)v;
    else
      *(int64_t *)field(options, opt) = v;
    return true;
  case CLI_CHOICE:
  case CLI_MASK:
    if ((i = find_choice(opt, text)) < 0) break;
    if (opt->kind == CLI_CHOICE)
      *(int *)field(options, opt) = i;
    else
      *(unsigned *)field(options, opt) = opt->choices[i + 1] ? 1u << i : (1u << i) - 1;
    return true;
  case CLI_ARCH:
    if (parse_arch(text, (int *)field(options, opt))) return true;
    list_archs(list, sizeof list);
    snprintf(why, why_size, "%s takes one of %s, not '%.40s'", shown, list, text);
    return false;
  case CLI_TEXT:
  case CLI_BARE:
    if (!*text) return snprintf(why, why_size, "%s needs a non-empty %s", shown, opt->value), false;
    *(const char **)field(options, opt) = text;
    return true;
  case CLI_CUSTOM:
    if (tool->custom && tool->custom(options, opt, text, why, why_size)) return true;
    break;
  case CLI_FLAG: *(int *)field(options, opt) = 1; return true;
  case CLI_SELECT:
  case CLI_WORD: return true;
  }
  if (why[0]) return false;
  if (opt->kind == CLI_INT || opt->kind == CLI_INT64) {
    snprintf(why, why_size, "%s takes a decimal integer from %lld to %lld, not '%.40s'", shown,
             (long long)opt->lo, (long long)opt->hi, text);
  } else if (opt->kind == CLI_CHOICE || opt->kind == CLI_MASK) {
    list_choices(opt, list, sizeof list);
    snprintf(why, why_size, "%s takes %s, not '%.40s'", shown, list, text);
  } else {
    snprintf(why, why_size, "bad value for %s: '%.40s'", shown, text);
  }
  return false;
}

/* ---- --help and --version ------------------------------------------------ */

/* "-n, --n LIST" or "--warps W": how the row is written. */
static void spell(const CliOption *opt, char *out, size_t size) {
  const char *value = opt->value ? opt->value : "";
  const char *space = opt->value ? " " : "";
  if (opt->kind == CLI_WORD || opt->kind == CLI_BARE)
    snprintf(out, size, "%s", opt->name);
  else if (opt->letter && opt->name)
    snprintf(out, size, "-%c, --%s%s%s", opt->letter, opt->name, space, value);
  else if (opt->letter)
    snprintf(out, size, "-%c%s%s", opt->letter, space, value);
  else
    snprintf(out, size, "--%s%s%s", opt->name, space, value);
}

/* How a mode is named in messages: the row that selects it. */
static const char *mode_name(const CliTool *tool, int mode, char *out, size_t size) {
  for (size_t i = 0; i < tool->count; i++)
    if (tool->options[i].mode == mode) {
      const CliOption *opt = &tool->options[i];
      snprintf(out, size, "%s%s", opt->kind == CLI_WORD ? "" : "--", opt->name);
      return out;
    }
  snprintf(out, size, "the default mode");
  return out;
}

/* Appends to out (of size bytes, len used) what fmt gives. */
static size_t append(char *out, size_t size, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t append(char *out, size_t size, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int w = len < size ? vsnprintf(out + len, size - len, fmt, ap) : 0;
  va_end(ap);
  return w > 0 ? len + (size_t)w : len;
}

/* The help of a row: its line, its range, and " (softmax, --ir only)" for
 * an option of some modes. */
static void describe(const CliTool *tool, const CliOption *opt, char *out, size_t size) {
  char name[64];
  size_t len = append(out, size, 0, "%s", opt->help);
  if (opt->kind == CLI_INT || opt->kind == CLI_INT64)
    len = append(out, size, len, " [%lld..%lld]", (long long)opt->lo, (long long)opt->hi);
  if (!opt->modes || opt->mode) return;
  for (int m = 1, first = 1; m < 32; m++)
    if (opt->modes & CLI_MODE(m)) {
      mode_name(tool, m, name, sizeof name);
      len = append(out, size, len, "%s%s", first ? " (" : ", ", name);
      first = 0;
    }
  append(out, size, len, " only)");
}

/* "  LEFT   text", the text wrapped at 80 columns under itself. */
static void print_row(const char *left, const char *text) {
  enum { INDENT = 27, WIDTH = 80 };
  printf("  %-24s", left);
  if (strlen(left) > 24) printf("\n%*s", INDENT - 1, "");
  while (*text) {
    size_t n = strlen(text), cut = n;
    if (n > WIDTH - INDENT) {
      for (cut = WIDTH - INDENT; cut > 0 && text[cut] != ' '; cut--) continue;
      if (cut == 0) cut = n;
    }
    printf(" %.*s\n", (int)cut, text);
    text += cut;
    while (*text == ' ') text++;
    if (*text) printf("%*s", INDENT - 1, "");
  }
}

static void print_help(const CliTool *tool) {
  char left[96], text[512];
  printf("usage: %s\n\noptions:\n", tool->usage);
  for (size_t i = 0; i < tool->count; i++) {
    spell(&tool->options[i], left, sizeof left);
    describe(tool, &tool->options[i], text, sizeof text);
    print_row(left, text);
  }
  print_row("-h, --help", "print this help and exit");
  print_row("--version", "print tilejit's version and exit");
  if (tool->about) printf("\n%s", tool->about);
  printf("\nNumbers are decimal integers (010 is ten). A FILE of - is stdin or stdout.\n"
         "Exit status: 0 success, 1 a failed check or an error, 2 a usage error,\n"
         "3 no CUDA driver or GPU.\n");
}

/* ---- the parse ------------------------------------------------------------ */

/* getopt_long's tables: one long option per named row, and the letters. */
static void build_tables(const CliTool *tool, struct option *longs, char *shorts) {
  size_t nl = 0, ns = 0;
  shorts[ns++] = '-'; /* bare words in order, as option 1 */
  shorts[ns++] = ':'; /* ':' for a missing value */
  shorts[ns++] = 'h';
  for (size_t i = 0; i < tool->count; i++) {
    const CliOption *opt = &tool->options[i];
    bool valued = opt->kind != CLI_SELECT && opt->kind != CLI_FLAG && opt->kind != CLI_WORD;
    if (opt->kind == CLI_WORD || opt->kind == CLI_BARE) continue;
    if (opt->name)
      longs[nl++] = (struct option){opt->name, valued ? required_argument : no_argument, NULL,
                                    ROW_ID + (int)i};
    if (opt->letter) {
      shorts[ns++] = (char)opt->letter;
      if (valued) shorts[ns++] = ':';
    }
  }
  longs[nl++] = (struct option){"help", no_argument, NULL, HELP_ID};
  longs[nl++] = (struct option){"version", no_argument, NULL, VERSION_ID};
  longs[nl] = (struct option){NULL, 0, NULL, 0};
  shorts[ns] = '\0';
}

static int row_of_letter(const CliTool *tool, int letter) {
  for (size_t i = 0; i < tool->count; i++)
    if (tool->options[i].letter == letter && tool->options[i].kind != CLI_WORD) return (int)i;
  return -1;
}

/* The row of a bare word: its CLI_WORD, else a CLI_BARE row not yet taken. */
static int row_of_word(const CliTool *tool, const bool *seen, const char *word) {
  for (size_t i = 0; i < tool->count; i++)
    if (tool->options[i].kind == CLI_WORD && !strcmp(tool->options[i].name, word)) return (int)i;
  for (size_t i = 0; i < tool->count; i++)
    if (tool->options[i].kind == CLI_BARE && !seen[i]) return (int)i;
  return -1;
}

/* Row i seen, written as spelled, with its value (NULL for none). */
static int take(Parse *ps, int i, const char *spelled, char *value) {
  const CliOption *opt = &ps->tool->options[i];
  char why[WHY_MAX];
  if (opt->mode && ps->mode && ps->mode != opt->mode)
    return cli_usage_error(ps->tool, "%s and %s cannot be given together",
                           ps->spelled[ps->mode_row], spelled);
  if (opt->mode) {
    ps->mode = opt->mode, ps->mode_row = i;
    *(int *)((char *)ps->options + ps->tool->mode_offset) = opt->mode;
  }
  ps->seen[i] = true;
  ps->spelled[i] = spelled;
  if (opt->kind == CLI_SELECT || opt->kind == CLI_WORD) return -1;
  if (!cli_set(ps->tool, opt, ps->options, value ? value : (char *)"", spelled, why, sizeof why))
    return cli_usage_error(ps->tool, "%s", why);
  return -1;
}

/* What getopt_long refused: an unknown option, a missing or extra value. */
static int refused(Parse *ps, int c, char **argv) {
  const char *word = argv[optind - 1];
  if (c == ':' && optopt >= ROW_ID) {
    const CliOption *opt = &ps->tool->options[optopt - ROW_ID];
    return cli_usage_error(ps->tool, "--%s needs a value (%s)", opt->name, opt->value);
  }
  if (c == ':') {
    const CliOption *opt = &ps->tool->options[row_of_letter(ps->tool, optopt)];
    return cli_usage_error(ps->tool, "-%c needs a value (%s)", optopt, opt->value);
  }
  if (optopt >= ROW_ID || optopt == HELP_ID || optopt == VERSION_ID)
    return cli_usage_error(ps->tool, "%.60s: this option takes no value", word);
  if (optopt && !(word[0] == '-' && word[1] == '-'))
    return cli_usage_error(ps->tool, "unknown option '-%c'", optopt);
  return cli_usage_error(ps->tool, "unknown or ambiguous option '%.60s'", word);
}

/* After the last option: the mode, what it needs, what applies to it. */
static int finish(Parse *ps) {
  const CliTool *tool = ps->tool;
  char name[64], left[96];
  int mode = ps->mode ? ps->mode : tool->default_mode;
  if (!mode) {
    char modes[192] = "";
    for (size_t i = 0, len = 0; i < tool->count && len < sizeof modes; i++)
      if (tool->options[i].mode) {
        spell(&tool->options[i], left, sizeof left);
        int w = snprintf(modes + len, sizeof modes - len, "%s%s", len ? " or " : "", left);
        len += w > 0 ? (size_t)w : 0;
      }
    return cli_usage_error(tool, "give %s", modes);
  }
  *(int *)((char *)ps->options + tool->mode_offset) = mode;
  for (size_t i = 0; i < tool->count; i++) {
    const CliOption *opt = &tool->options[i];
    if (ps->seen[i] && opt->modes && !(opt->modes & CLI_MODE(mode)))
      return cli_usage_error(tool, "%s does not apply to %s", ps->spelled[i],
                             mode_name(tool, mode, name, sizeof name));
    if (!ps->seen[i] && (opt->needed & CLI_MODE(mode))) {
      spell(opt, left, sizeof left);
      if (opt->needed == CLI_ALL_MODES) return cli_usage_error(tool, "%s is required", left);
      return cli_usage_error(tool, "%s needs %s", mode_name(tool, mode, name, sizeof name), left);
    }
  }
  return -1;
}

/* How row was written on the command line: softmax, --warps or -n. */
static const char *spell_used(const CliTool *tool, int row, int c, char *as_long, char *as_short) {
  if (c == 1) return tool->options[row].name;
  if (c >= ROW_ID) return snprintf(as_long, 64, "--%s", tool->options[row].name), as_long;
  return snprintf(as_short, 3, "-%c", c), as_short;
}

int cli_parse(const CliTool *tool, int argc, char **argv, void *options) {
  struct option longs[CLI_MAX_OPTIONS + 3];
  char shorts[3 * CLI_MAX_OPTIONS + 4], spelled_short[CLI_MAX_OPTIONS][3];
  char spelled_long[CLI_MAX_OPTIONS][64];
  Parse ps = {.tool = tool, .options = options, .mode_row = -1};
  if (tool->count > CLI_MAX_OPTIONS) return cli_usage_error(tool, "too many options in its table");
  build_tables(tool, longs, shorts);
  opterr = 0;
  optind = 0; /* glibc: a full reset */
  for (int c, index = -1, rc; (c = getopt_long(argc, argv, shorts, longs, &index)) != -1;) {
    int row = c >= ROW_ID ? c - ROW_ID
              : c == 1    ? row_of_word(tool, ps.seen, optarg)
                          : row_of_letter(tool, c);
    if (c == 'h' || c == HELP_ID) return print_help(tool), CLI_EXIT_OK;
    if (c == VERSION_ID) return printf("%s (tilejit) %s\n", tool->name, tj_version()), CLI_EXIT_OK;
    if (c == '?' || c == ':') return refused(&ps, c, argv);
    if (c == 1 && row < 0) return cli_usage_error(tool, "unexpected argument '%.60s'", optarg);
    if (row < 0) return cli_usage_error(tool, "unknown option '-%c'", c);
    const char *spelled = spell_used(tool, row, c, spelled_long[row], spelled_short[row]);
    bool bare = tool->options[row].kind == CLI_BARE;
    if ((rc = take(&ps, row, spelled, c == 1 && !bare ? NULL : optarg)) >= 0) return rc;
  }
  for (int i = optind; i < argc; i++) { /* after "--" */
    int row = row_of_word(tool, ps.seen, argv[i]), rc;
    if (row < 0) return cli_usage_error(tool, "unexpected argument '%.60s'", argv[i]);
    bool bare = tool->options[row].kind == CLI_BARE;
    if ((rc = take(&ps, row, tool->options[row].name, bare ? argv[i] : NULL)) >= 0) return rc;
  }
  return finish(&ps);
}
