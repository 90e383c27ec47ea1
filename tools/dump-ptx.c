/*
 * dump-ptx — prints the PTX (or the specialized IR) tilejit generates for a
 * program. Needs no GPU and no driver.
 *
 *   dump-ptx softmax -n N [-m M] [--template auto|single|online] [options]
 *   dump-ptx --ir FILE.tj [-D NAME=VALUE ...] [-n N] [options]
 *
 * options: --warps W, --block B, --arch sm_XX, --dtype f32|f16|bf16,
 *          --align BYTES (default 16: 16-byte aligned rows), --emit ir|ptx|cuda,
 *          --backend ptx|nvrtc, --annotate, -o FILE|- , --validate, --version
 *
 * --backend nvrtc prints the PTX NVRTC makes of the CUDA C lowering, and
 * --emit cuda that CUDA C (needs no NVRTC).
 * PTX goes to stdout unless -o names a file; diagnostics go to stderr. The
 * same arguments always give byte-identical output. --validate assembles
 * the PTX with ptxas -v (from $PATH, $CUDA_HOME/bin or the default toolkit)
 * and prints its register and spill report on stderr.
 *
 * Numbers are decimal integers ("-n 010" is ten) within each option's
 * range; -D BLOCK, NUM_WARPS and ALIGN take the ranges of --block, --warps
 * and --align, other constants any int64 (the library checks the rest). A
 * value out of range is a usage error that says the range.
 *
 * Exit status: 0 success (a spill is reported as a warning), 1 failure
 * (including ptxas rejecting the PTX), 2 usage error.
 */
#include "codegen/codegen.h"
#include "tilejit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BINDINGS 32

typedef enum Emit { EMIT_PTX, EMIT_IR, EMIT_CUDA } Emit;

/* Backends: each turns a spec into text. Others plug in here. */
typedef tj_status (*EmitFn)(tj_spec *, const tj_codegen_options *, char **, tj_kernel_info *);
static const struct {
  const char *name;
  EmitFn emit;
} backends[] = {{"ptx", tj_emit_ptx}, {"nvrtc", tj_nvrtc_ptx}};

typedef struct Options {
  const char *ir_file; /* NULL: softmax */
  tj_softmax_template which;
  int64_t n, m, block;
  int warps, align, arch, backend, cluster, split;
  tj_dtype dtype;
  Emit emit;
  int annotate, validate;
  const char *output;
  tj_binding bindings[MAX_BINDINGS];
  int nbindings;
  char why[160]; /* what was wrong with a bad value, if more than "bad value" */
} Options;

static void usage(void) {
  fprintf(stderr, "usage: dump-ptx softmax -n N [-m M] [--template auto|single|online] [options]\n"
                  "       dump-ptx --ir FILE.tj [-D NAME=VALUE ...] [-n N] [options]\n"
                  "options:\n"
                  "  --warps W        NUM_WARPS (1, 2, 4, ..., 32; default: tilejit's table)\n"
                  "  --block B        BLOCK (default: next_pow2(N); online softmax: its chunk)\n"
                  "  --arch sm_XX     target (default sm_90)\n"
                  "  --dtype T        f32, f16 or bf16 (default f32)\n"
                  "  --align BYTES    alignment of pointers and row strides (default 16)\n"
                  "  --cluster C      CLUSTER: CTAs of a cluster per row (sm_90; default 1)\n"
                  "  --split S        SPLIT: clusters (or CTAs) of the grid per row (default 1)\n"
                  "  --emit ir|ptx|cuda  what to print (default ptx; cuda: the NVRTC backend's C)\n"
                  "  --backend ptx|nvrtc  code generator (default ptx)\n"
                  "  --annotate       interleave the IR instruction of each group of lines\n"
                  "  -o FILE          write to FILE (- for stdout)\n"
                  "  --validate       assemble with ptxas -v and print its report on stderr\n"
                  "  --version        print the version\n");
}

/* The numbers: options, and the built-in constants of -D. */
static const struct {
  const char *name;
  int64_t lo, hi;
} ranges[] = {
    {"-n", 0, INT64_MAX / 2}, {"-m", 0, INT64_MAX / 2}, {"--block", 1, 1 << 30},
    {"--warps", 1, 32},       {"--align", 1, 16},       {"--cluster", 1, 16},
    {"--split", 1, 1024},     {"BLOCK", 1, 1 << 30},    {"NUM_WARPS", 1, 32},
    {"ALIGN", 1, 16},         {"CLUSTER", 1, 16},       {"SPLIT", 1, 1024},
};

/* A decimal integer in name's range (any int64 for a name not listed). */
static bool parse_int(Options *o, const char *name, const char *text, int64_t *out) {
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  for (size_t i = 0; i < TJ_COUNTOF(ranges); i++)
    if (!strcmp(name, ranges[i].name)) lo = ranges[i].lo, hi = ranges[i].hi;
  if (tj_parse_decimal(text, lo, hi, out)) return true;
  snprintf(o->why, sizeof o->why, "%s takes a decimal integer from %lld to %lld, not '%.32s'", name,
           (long long)lo, (long long)hi, text);
  return false;
}

static bool parse_arch(Options *o, const char *text) {
  int64_t v;
  if (strncmp(text, "sm_", 3) == 0) text += 3;
  if (!tj_parse_decimal(text, 1, 1000, &v) || !cg_arch_find((int)v)) return false;
  o->arch = (int)v;
  return true;
}

static bool parse_dtype(const char *text, tj_dtype *d) {
  for (int i = 0; i < TJ_DTYPE_COUNT; i++)
    if (strcmp(text, ir_dtype_name((tj_dtype)i)) == 0) {
      *d = (tj_dtype)i;
      return true;
    }
  return false;
}

static bool parse_template(const char *text, tj_softmax_template *t) {
  static const char *const names[] = {"auto", "single", "online"};
  for (int i = 0; i < 3; i++)
    if (strcmp(text, names[i]) == 0) {
      *t = (tj_softmax_template)i;
      return true;
    }
  return false;
}

/* -D NAME=VALUE: the built-in constants go to their options. */
static bool parse_binding(Options *o, char *text) {
  char *eq = strchr(text, '=');
  int64_t v;
  if (!eq || eq == text) return false;
  *eq = '\0'; /* text is the name now */
  if (!parse_int(o, text, eq + 1, &v)) return *eq = '=', false;
  if (strcmp(text, "BLOCK") == 0)
    o->block = v;
  else if (strcmp(text, "NUM_WARPS") == 0)
    o->warps = (int)v;
  else if (strcmp(text, "ALIGN") == 0)
    o->align = (int)v;
  else if (strcmp(text, "CLUSTER") == 0)
    o->cluster = (int)v;
  else if (strcmp(text, "SPLIT") == 0)
    o->split = (int)v;
  else if (o->nbindings < MAX_BINDINGS)
    o->bindings[o->nbindings++] = (tj_binding){text, v};
  else
    return false;
  return true;
}

static bool parse_backend(const char *text, int *backend) {
  for (size_t i = 0; i < TJ_COUNTOF(backends); i++)
    if (strcmp(text, backends[i].name) == 0) {
      *backend = (int)i;
      return true;
    }
  return false;
}

/* One option with a value; false on a bad value. */
static bool parse_valued(Options *o, const char *opt, char *val) {
  int64_t v;
  if (!strcmp(opt, "-n")) return parse_int(o, opt, val, &o->n);
  if (!strcmp(opt, "-m")) return parse_int(o, opt, val, &o->m);
  if (!strcmp(opt, "--block")) return parse_int(o, opt, val, &o->block);
  if (!strcmp(opt, "--warps")) return parse_int(o, opt, val, &v) && (o->warps = (int)v, true);
  if (!strcmp(opt, "--align")) return parse_int(o, opt, val, &v) && (o->align = (int)v, true);
  if (!strcmp(opt, "--cluster")) return parse_int(o, opt, val, &v) && (o->cluster = (int)v, true);
  if (!strcmp(opt, "--split")) return parse_int(o, opt, val, &v) && (o->split = (int)v, true);
  if (!strcmp(opt, "--arch")) return parse_arch(o, val);
  if (!strcmp(opt, "--dtype")) return parse_dtype(val, &o->dtype);
  if (!strcmp(opt, "--template")) return parse_template(val, &o->which);
  if (!strcmp(opt, "--backend")) return parse_backend(val, &o->backend);
  if (!strcmp(opt, "--ir")) return (o->ir_file = val) != NULL;
  if (!strcmp(opt, "-o")) return (o->output = val) != NULL;
  if (!strcmp(opt, "-D")) return parse_binding(o, val);
  if (!strcmp(opt, "--emit")) {
    if (!strcmp(val, "ptx"))
      o->emit = EMIT_PTX;
    else if (!strcmp(val, "ir"))
      o->emit = EMIT_IR;
    else if (!strcmp(val, "cuda"))
      o->emit = EMIT_CUDA;
    else
      return false;
    return true;
  }
  return false;
}

static bool takes_value(const char *opt) {
  static const char *const valued[] = {"-n",     "-m",      "--block",    "--warps",   "--align", "--cluster", "--split",
                                       "--arch", "--dtype", "--template", "--backend", "--ir",
                                       "-o",     "-D",      "--emit"};
  for (size_t i = 0; i < TJ_COUNTOF(valued); i++)
    if (!strcmp(opt, valued[i])) return true;
  return false;
}

/* Returns 0 to go on, 2 on a usage error, -1 after --version or --help. */
static int parse_args(int argc, char **argv, Options *o) {
  bool softmax = false, have_n = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--version")) return printf("dump-ptx (tilejit) %s\n", TJ_VERSION_STRING), -1;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(), -1;
    if (!strcmp(a, "softmax"))
      softmax = true;
    else if (!strcmp(a, "--annotate"))
      o->annotate = 1;
    else if (!strcmp(a, "--validate"))
      o->validate = 1;
    else if (takes_value(a) && i + 1 < argc && parse_valued(o, a, argv[i + 1]))
      have_n |= !strcmp(a, "-n"), i++;
    else if (takes_value(a) && i + 1 < argc)
      return fprintf(stderr, "dump-ptx: bad value for %s: '%s'%s%s\n", a, argv[i + 1],
                     o->why[0] ? ": " : "", o->why),
             usage(), 2;
    else
      return fprintf(stderr, "dump-ptx: bad argument '%s'\n", a), usage(), 2;
  }
  if (softmax == (o->ir_file != NULL))
    return fprintf(stderr, "dump-ptx: give either softmax or --ir FILE\n"), usage(), 2;
  if (softmax && !have_n) return fprintf(stderr, "dump-ptx: softmax needs -n N\n"), usage(), 2;
  return 0;
}

/* The whole file, NUL bytes included; NULL after saying why. */
static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return fprintf(stderr, "dump-ptx: cannot read %s: %s\n", path, strerror(errno)), NULL;
  size_t cap = 1 << 16, n = 0;
  char *text = malloc(cap), *grown;
  while (text && (n += fread(text + n, 1, cap - n, f)) == cap) {
    if (!(grown = realloc(text, 2 * cap))) free(text);
    text = grown, cap *= 2;
  }
  bool failed = ferror(f) != 0;
  fclose(f);
  if (!text) {
    fprintf(stderr, "dump-ptx: cannot allocate %zu bytes to read %s\n", cap, path);
  } else if (failed) {
    fprintf(stderr, "dump-ptx: cannot read %s\n", path);
    free(text);
    text = NULL;
  }
  *len = n;
  return text;
}

/* Softmax as tj_softmax would run it for M rows (-m, default 65536) on a
 * nominal device of the arch; --template, --warps, --cluster, --split and
 * --block override the plan. */
static tj_status load_softmax(const Options *o, tj_program **p, tj_spec_options *so) {
  tj_device_info device;
  tj_softmax_options options = {.num_warps = o->warps,
                                .which_template = o->which,
                                .cluster = o->cluster,
                                .split = o->split};
  tj_softmax_plan plan;
  tj_status st = tj_device_nominal(o->arch, &device);
  if (st == TJ_OK)
    st = tj_softmax_plan_for(&device, o->dtype, o->m ? o->m : 65536, o->n, &options, &plan);
  if (st == TJ_OK && o->block) plan.block = o->block;
  if (st == TJ_OK) st = tj_softmax_program(plan.which, o->n, p);
  if (st == TJ_OK && (st = tj_softmax_spec_options(&plan, o->dtype, o->n, so)) != TJ_OK)
    fprintf(stderr, "dump-ptx: BLOCK %lld does not cover n = %lld\n", (long long)plan.block,
            (long long)o->n);
  return st;
}

static tj_status load_program(const Options *o, tj_program **p, tj_spec_options *so) {
  memset(so, 0, sizeof *so);
  if (!o->ir_file) return load_softmax(o, p, so);
  size_t len = 0;
  char *text = read_file(o->ir_file, &len);
  if (!text) return TJ_ERR_INVALID_ARGUMENT;
  tj_status st = tj_program_parse(text, len, p);
  free(text);
  so->n = o->n;
  so->dtype = o->dtype;
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
  bool to_stdout = !o->output || !strcmp(o->output, "-");
  FILE *f = to_stdout ? stdout : fopen(o->output, "wb");
  if (!f) return fprintf(stderr, "dump-ptx: cannot write %s: %s\n", o->output, strerror(errno)), 1;
  bool ok = fputs(text, f) >= 0;
  ok = (to_stdout ? fflush(f) : fclose(f)) == 0 && ok;
  return ok ? 0 : (fprintf(stderr, "dump-ptx: write error\n"), 1);
}

static int generate(const Options *o, tj_spec *s) {
  char *text = NULL;
  tj_codegen_options co = {o->arch, 0, o->annotate};
  tj_kernel_info info;
  tj_status st = o->emit == EMIT_IR     ? tj_spec_print(s, &text)
                 : o->emit == EMIT_CUDA ? tj_emit_cuda(s, &co, &text, &info)
                                        : backends[o->backend].emit(s, &co, &text, &info);
  if (st != TJ_OK) {
    fprintf(stderr, "dump-ptx: %s: %s\n", tj_status_string(st), tj_spec_error(s));
    return 1;
  }
  int rc = write_output(o, text);
  if (rc == 0 && o->emit == EMIT_PTX && o->m > 0) {
    const tj_launch_shape *sh = &info.shape;
    long long groups = (o->m + sh->programs_per_cta - 1) / sh->programs_per_cta;
    fprintf(stderr, "dump-ptx: launch %s with %d threads per CTA, %lld CTAs for M = %lld%s", info.entry,
            sh->threads, groups * sh->ctas_per_program, (long long)o->m,
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
  o.align = 16;
  o.arch = CG_DEFAULT_ARCH;
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc < 0 ? 0 : rc;
  tj_program *p = NULL;
  tj_spec_options so;
  tj_status st = load_program(&o, &p, &so);
  if (st != TJ_OK) {
    fprintf(stderr, "dump-ptx: %s: %s\n", tj_status_string(st), p ? tj_program_error(p) : "");
    tj_program_destroy(p);
    return 1;
  }
  if (o.ir_file) {
    so.block = o.block;
    so.num_warps = o.warps;
    so.cluster = o.cluster;
    so.split = o.split;
  }
  so.align = o.align;
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
