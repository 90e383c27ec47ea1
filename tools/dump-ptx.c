/*
 * dump-ptx — prints the PTX (or the specialized IR, or the CUDA C) tilejit
 * generates for a program. Needs no GPU and no driver.
 *
 *   dump-ptx softmax -n N [-m M] [--template auto|single|online] [options]
 *   dump-ptx --ir FILE.tj [-D NAME=VALUE ...] -n N | --block B [options]
 *
 * The options are the table below (dump-ptx --help prints it): each takes
 * a decimal integer of its range or one of its words; -D BLOCK, NUM_WARPS,
 * ALIGN, CLUSTER, SPLIT and DIV take the ranges of --block, --warps,
 * --align, --cluster, --split and --div, other constants any int64 (the
 * library checks the rest). --backend nvrtc prints the PTX NVRTC makes of
 * the CUDA C lowering, and --emit cuda that CUDA C (needs no NVRTC). FILE.tj may be - (stdin);
 * it must be text (no NUL byte) of at most 64 MiB.
 *
 * PTX goes to stdout unless -o names a file; diagnostics go to stderr. The
 * same arguments always give byte-identical output. --validate assembles
 * the PTX with ptxas -v (from $PATH, $CUDA_HOME/bin or the default toolkit)
 * and prints its register and spill report on stderr.
 *
 * Exit status (tools/common/cli.h): 0 success (a spill is reported as a
 * warning), 1 failure (a bad input file, a library error, ptxas rejecting
 * the PTX), 2 usage error.
 */
#include "cli.h"
#include "codegen/codegen.h"
#include "runtime/runtime.h"
#include "tilejit.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BINDINGS 32

enum { MODE_SOFTMAX = 1, MODE_IR };
typedef enum Emit { EMIT_PTX, EMIT_IR, EMIT_CUDA } Emit; /* the order of emit_names */

/* Backends: each turns a spec into text. Others plug in here. */
typedef tj_status (*EmitFn)(tj_spec *, const tj_codegen_options *, char **, tj_kernel_info *);
static const EmitFn backends[] = {tj_emit_ptx, tj_nvrtc_ptx};

typedef struct Options {
  int mode;
  const char *ir_file;
  int which; /* tj_softmax_template */
  int64_t n, m, block;
  int warps, align, div, arch, backend, cluster, split, stage, stash;
  int dtype; /* tj_dtype */
  int emit;  /* Emit */
  int annotate, validate, phased;
  const char *output;
  tj_binding bindings[MAX_BINDINGS];
  int nbindings;
} Options;

static const char *const template_names[] = {"auto", "single", "online", NULL};
static const char *const dtype_names[] = {"f32", "f16", "bf16", NULL};
static const char *const emit_names[] = {"ptx", "ir", "cuda", NULL};
static const char *const backend_names[] = {"ptx", "nvrtc", NULL};

/* clang-format off */
#define AT(f) offsetof(Options, f)
static const CliOption option_table[] = {
    {.name = "softmax", .kind = CLI_WORD, .mode = MODE_SOFTMAX,
     .help = "tilejit's softmax, as tj_softmax plans it for M rows"},
    {.name = "ir", .kind = CLI_TEXT, .offset = AT(ir_file), .mode = MODE_IR, .value = "FILE",
     .help = "a program in text form (- for stdin)"},
    {.letter = 'n', .kind = CLI_INT64, .offset = AT(n), .lo = 0, .hi = INT32_MAX, .value = "N",
     .needed = CLI_MODE(MODE_SOFTMAX), .help = "the row width N (BLOCK defaults to next_pow2(N))"},
    {.letter = 'm', .kind = CLI_INT64, .offset = AT(m), .lo = 0, .hi = INT32_MAX, .value = "M",
     .help = "rows: the plan's M (default 65536) and the launch line"},
    {.letter = 'D', .kind = CLI_CUSTOM, .value = "NAME=VALUE",
     .help = "bind the constant NAME (-DNAME=VALUE too)"},
    {.name = "template", .kind = CLI_CHOICE, .offset = AT(which), .choices = template_names,
     .modes = CLI_MODE(MODE_SOFTMAX), .value = "T", .help = "auto, single or online"},
    {.name = "warps", .kind = CLI_INT, .offset = AT(warps), .lo = 1, .hi = 32, .value = "W",
     .help = "NUM_WARPS (default: tilejit's table)"},
    {.name = "block", .kind = CLI_INT64, .offset = AT(block), .lo = 1, .hi = 1 << 30,
     .value = "B", .help = "BLOCK (default next_pow2(N); online softmax: its chunk)"},
    {.name = "arch", .kind = CLI_ARCH, .offset = AT(arch), .value = "sm_XX",
     .help = "the target (default sm_90)"},
    {.name = "dtype", .kind = CLI_CHOICE, .offset = AT(dtype), .choices = dtype_names,
     .value = "T", .help = "f32, f16 or bf16 (default f32)"},
    {.name = "align", .kind = CLI_INT, .offset = AT(align), .lo = 1, .hi = 16, .value = "BYTES",
     .help = "alignment of pointers and row strides (default 16)"},
    {.name = "div", .kind = CLI_INT, .offset = AT(div), .lo = 1, .hi = 16, .value = "K",
     .modes = CLI_MODE(MODE_IR),
     .help = "DIV: every i32 parameter is a multiple of K, a power of two (default 1; "
             "softmax takes it from -n, as tj_softmax does)"},
    {.name = "phased", .kind = CLI_FLAG, .offset = AT(phased),
     .help = "rows start at any phase: 16-byte vectors from each row's boundary"},
    {.name = "cluster", .kind = CLI_INT, .offset = AT(cluster), .lo = 1, .hi = 16, .value = "C",
     .help = "CLUSTER: CTAs of a cluster per row (sm_90; default 1)"},
    {.name = "split", .kind = CLI_INT, .offset = AT(split), .lo = 1, .hi = 1024, .value = "S",
     .help = "SPLIT: clusters (or CTAs) of the grid per row (default 1)"},
    {.name = "stage", .kind = CLI_INT, .offset = AT(stage), .lo = -1, .hi = 128, .value = "K",
     .help = "STAGE: a thread holds K elements at a time, the row kept in shared memory "
             "(softmax: default the plan's, -1 none; --ir: default none)"},
    {.name = "stash", .kind = CLI_INT, .offset = AT(stash), .lo = 1, .hi = 1 << 30,
     .value = "BYTES",
     .help = "STASH: with STAGE, the most shared memory a CTA keeps the row in; the rest "
             "is read again (softmax: default the plan's; --ir: default all)"},
    {.name = "emit", .kind = CLI_CHOICE, .offset = AT(emit), .choices = emit_names,
     .value = "WHAT", .help = "ptx, ir or cuda (the NVRTC backend's C); default ptx"},
    {.name = "backend", .kind = CLI_CHOICE, .offset = AT(backend), .choices = backend_names,
     .value = "B", .help = "the code generator of --emit ptx: ptx or nvrtc (default ptx)"},
    {.name = "annotate", .kind = CLI_FLAG, .offset = AT(annotate),
     .help = "interleave the IR instruction of each group of lines"},
    {.letter = 'o', .kind = CLI_TEXT, .offset = AT(output), .value = "FILE",
     .help = "write to FILE (default and -: stdout)"},
    {.name = "validate", .kind = CLI_FLAG, .offset = AT(validate),
     .help = "assemble with ptxas -v and print its report on stderr"},
};
/* clang-format on */

static bool parse_binding(void *, const CliOption *, char *, char *, size_t);

static const CliTool tool = {
    .name = "dump-ptx",
    .usage = "dump-ptx softmax -n N [-m M] [--template auto|single|online] [options]\n"
             "       dump-ptx --ir FILE.tj [-D NAME=VALUE ...] -n N | --block B [options]",
    .about = "-D BLOCK, NUM_WARPS, ALIGN, CLUSTER, SPLIT and DIV take the ranges of --block,\n"
             "--warps, --align, --cluster, --split and --div; other constants any int64.\n"
             "Output goes to stdout unless -o names a file; diagnostics to stderr.\n",
    .options = option_table,
    .count = sizeof option_table / sizeof option_table[0],
    .mode_offset = AT(mode),
    .custom = parse_binding,
};

/* -D NAME=VALUE: the built-in constants go to their options. */
static bool parse_binding(void *opts, const CliOption *opt, char *text, char *why, size_t size) {
  static const char *const builtins[][2] = {{"BLOCK", "block"},
                                            {"NUM_WARPS", "warps"},
                                            {"ALIGN", "align"},
                                            {"CLUSTER", "cluster"},
                                            {"SPLIT", "split"},
                                            {"DIV", "div"}};
  Options *o = opts;
  char *eq = strchr(text, '=');
  int64_t v;
  (void)opt;
  if (!eq || eq == text)
    return snprintf(why, size, "-D takes NAME=VALUE, not '%.40s'", text), false;
  *eq = '\0'; /* text is the name now */
  for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
    if (!strcmp(text, builtins[i][0]))
      return cli_set(&tool, cli_find(&tool, builtins[i][1]), o, eq + 1, text, why, size);
  if (!tj_parse_decimal(eq + 1, INT64_MIN, INT64_MAX, &v))
    return snprintf(why, size, "%s takes a decimal integer from %lld to %lld, not '%.40s'", text,
                    (long long)INT64_MIN, (long long)INT64_MAX, eq + 1),
           false;
  if (o->nbindings == MAX_BINDINGS)
    return snprintf(why, size, "at most %d constants may be bound with -D", MAX_BINDINGS), false;
  o->bindings[o->nbindings++] = (tj_binding){text, v};
  return true;
}

/* What the table cannot say: options of one --emit. */
static int check_args(const Options *o) {
  if (o->mode == MODE_IR && o->n < 0 && !o->block)
    return cli_usage_error(&tool, "--ir needs -n N or a BLOCK (--block B, -D BLOCK=B): without "
                                  "them BLOCK would be next_pow2(0) = 1");
  if (o->div & (o->div - 1))
    return cli_usage_error(&tool, "--div takes a power of two (1, 2, 4, 8 or 16), not %d", o->div);
  if (o->validate && o->emit != EMIT_PTX)
    return cli_usage_error(&tool, "--validate applies to --emit ptx only");
  if (o->backend && o->emit != EMIT_PTX)
    return cli_usage_error(&tool, "--backend applies to --emit ptx only");
  if (o->annotate && o->emit == EMIT_IR)
    return cli_usage_error(&tool, "--annotate applies to --emit ptx and cuda only");
  return -1;
}

/* Softmax as tj_softmax would run it for M rows (-m, default 65536) on a
 * nominal device of the arch; --template, --warps, --cluster, --split and
 * --block override the plan. */
static tj_status load_softmax(const Options *o, tj_program **p, tj_spec_options *so) {
  tj_device_info device;
  tj_softmax_options options = {.num_warps = o->warps,
                                .which_template = (tj_softmax_template)o->which,
                                .cluster = o->cluster,
                                .split = o->split,
                                .stage = o->stage,
                                .stash = o->stash};
  tj_softmax_plan plan;
  int align = o->phased ? 1 : o->align; /* --phased: rows off 16 bytes whatever --align */
  tj_status st = tj_device_nominal(o->arch, &device);
  if (st == TJ_OK)
    st = rt_row_plan(&device, TJ_ROW_SOFTMAX, (tj_dtype)o->dtype, o->m ? o->m : 65536, o->n,
                     &options, align, &plan);
  if (st == TJ_OK) /* as tj_softmax plans rows off 16 bytes */
    rt_softmax_rows_plan(&device, &plan, TJ_ROW_SOFTMAX, (tj_dtype)o->dtype, o->n, align,
                         o->phased, &options);
  if (st == TJ_OK && o->block) plan.block = o->block;
  if (st == TJ_OK) st = tj_softmax_program(plan.which, o->n, p);
  if (st == TJ_OK && (st = tj_softmax_spec_options(&plan, (tj_dtype)o->dtype, o->n, so)) != TJ_OK)
    fprintf(stderr, "dump-ptx: %s: BLOCK %lld does not cover n = %lld\n", tj_status_string(st),
            (long long)plan.block, (long long)o->n);
  else if (st != TJ_OK)
    fprintf(stderr,
            "dump-ptx: %s: no softmax plan for n = %lld (a single tile holds at most 2^30)\n",
            tj_status_string(st), (long long)o->n);
  return st;
}

/* The program of --ir: text of at most 64 MiB with no NUL byte (a NUL
 * would cut it short for any reader that stops there). */
static tj_status load_program(const Options *o, tj_program **p, tj_spec_options *so) {
  memset(so, 0, sizeof *so);
  if (o->mode == MODE_SOFTMAX) return load_softmax(o, p, so);
  size_t len = 0;
  char *text = cli_read_text(tool.name, o->ir_file, &len);
  if (!text) return TJ_ERR_INVALID_ARGUMENT;
  tj_status st = tj_program_parse(text, len, p);
  free(text);
  so->n = o->n > 0 ? o->n : 0;
  so->dtype = (tj_dtype)o->dtype;
  return st;
}

static int validate(const char *ptx, int arch) {
  char ptxas[1024], *log = NULL;
  if (!cg_ptxas_find(ptxas, sizeof ptxas)) return fprintf(stderr, "dump-ptx: ptxas not found\n"), 1;
  tj_status st = cg_ptxas_run(ptxas, ptx, arch, &log);
  CgPtxasEntry e[4];
  int n = log ? cg_ptxas_parse(log, e, 4) : 0;
  fprintf(stderr, "%s", log ? log : "");
  bool spills = false;
  for (int i = 0; i < n; i++) {
    fprintf(
        stderr,
        "dump-ptx: %s: %d registers, %d bytes spill stores, %d bytes spill loads, %d bytes stack\n",
        e[i].name, e[i].registers, e[i].spill_stores, e[i].spill_loads, e[i].stack_frame);
    spills |= e[i].spill_stores || e[i].spill_loads || e[i].stack_frame || e[i].local_bytes;
  }
  free(log);
  if (st != TJ_OK) return fprintf(stderr, "dump-ptx: ptxas rejected the PTX\n"), 1;
  if (spills) fprintf(stderr, "dump-ptx: warning: the kernel uses local memory\n");
  return 0;
}

static int write_output(const Options *o, const char *text) {
  FILE *f = cli_open_output(tool.name, o->output);
  if (!f) return CLI_EXIT_FAILED;
  fputs(text, f);
  return cli_close_output(tool.name, o->output, f) ? CLI_EXIT_OK : CLI_EXIT_FAILED;
}

static int generate(const Options *o, tj_spec *s) {
  char *text = NULL;
  tj_codegen_options co = {o->arch, 0, o->annotate};
  tj_kernel_info info;
  tj_status st = o->emit == EMIT_IR     ? tj_spec_print(s, &text)
                 : o->emit == EMIT_CUDA ? tj_emit_cuda(s, &co, &text, &info)
                                        : backends[o->backend](s, &co, &text, &info);
  if (st != TJ_OK) {
    fprintf(stderr, "dump-ptx: %s: %s\n", tj_status_string(st), tj_spec_error(s));
    return 1;
  }
  int rc = write_output(o, text);
  if (rc == 0 && o->emit == EMIT_PTX && o->m > 0) {
    const tj_launch_shape *sh = &info.shape;
    long long groups = (o->m + sh->programs_per_cta - 1) / sh->programs_per_cta;
    fprintf(stderr, "dump-ptx: launch %s with %d threads per CTA, %lld CTAs for M = %lld%s",
            info.entry, sh->threads, groups * sh->ctas_per_program, (long long)o->m,
            sh->all_ctas ? "" : " (or as many as the device holds, striding over the rest)");
    if (sh->ctas_per_program > 1)
      fprintf(stderr, "; %d a row%s%s", sh->ctas_per_program, sh->cluster > 1 ? " in clusters" : "",
              sh->cooperative ? ", all resident (a cooperative launch)" : "");
    fputc('\n', stderr);
  }
  if (rc == 0 && o->validate && o->emit == EMIT_PTX) rc = validate(text, o->arch);
  tj_free(text);
  return rc;
}

int main(int argc, char **argv) {
  Options o;
  memset(&o, 0, sizeof o);
  o.n = -1; /* not given: --ir then needs a BLOCK */
  o.align = 16;
  o.arch = CG_DEFAULT_ARCH;
  int rc = cli_parse(&tool, argc, argv, &o);
  if (rc < 0) rc = check_args(&o);
  if (rc >= 0) return rc;
  rc = CLI_EXIT_OK;
  tj_program *p = NULL;
  tj_spec_options so;
  tj_status st = load_program(&o, &p, &so);
  if (st != TJ_OK) {
    if (p && o.mode == MODE_IR) /* else load_softmax or cli_read_text said why */
      fprintf(stderr, "dump-ptx: %s: %s\n", tj_status_string(st), tj_program_error(p));
    tj_program_destroy(p);
    return 1;
  }
  if (o.mode == MODE_IR) {
    so.block = o.block;
    so.num_warps = o.warps;
    so.cluster = o.cluster;
    so.split = o.split;
    so.stage = o.stage > 0 ? o.stage : 0;
    so.stash = so.stage ? o.stash : 0;
    so.multiple = o.div;
  }
  so.align = o.align;
  so.phased = o.phased;
  if (o.mode == MODE_SOFTMAX && !o.phased) /* as tj_softmax specializes on n */
    so.multiple = rt_size_multiple(o.n, o.align, ir_dtype_size((tj_dtype)o.dtype));
  so.bindings = o.bindings;
  so.binding_count = o.nbindings;
  tj_spec *s = NULL;
  st = tj_specialize(p, &so, &s);
  if (st != TJ_OK)
    fprintf(stderr, "dump-ptx: %s: %s\n", tj_status_string(st), tj_program_error(p));
  else
    rc = generate(&o, s);
  tj_spec_destroy(s);
  tj_program_destroy(p);
  return st != TJ_OK ? 1 : rc;
}
