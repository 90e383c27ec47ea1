/*
 * tj-run — runs a program in text form on fresh random data through the
 * CPU interpreter and, where there is a GPU, on the device, and compares
 * the two element by element.
 *
 *   tj-run FILE.tj -m M -n N [-D NAME=VALUE ...] [--arg NAME=VALUE ...]
 *          [--dtype T] [--warps W] [--block B] [--align BYTES] [--stride S]
 *          [--seed S] [--backend ptx|nvrtc] [--interp]
 *
 * The program is specialized as `dump-ptx --ir` does (BLOCK = next_pow2(N)
 * unless --block or -D BLOCK) and runs M program instances. Its parameters
 * get, in order:
 *   - a pointer: a buffer of M rows of S elements of its pointee type (S =
 *     --stride, default N). A buffer the program only stores to is an
 *     output: poisoned (a NaN pattern; 0x5A bytes for integers), then
 *     compared. One it loads from gets normal values times 3 (integers:
 *     uniform in [-100, 100]); if it also stores to it, it is compared too.
 *   - an i64: S (a row stride); an i32: N; an f32: 1. --arg NAME=VALUE
 *     gives any of them another value.
 * The interpreter runs first and checks every access against the buffers,
 * so a program (or an argument) that would read or write past them stops
 * there, with the interpreter's message. The device then runs the same
 * arguments on copies of the same data, and every element of every buffer
 * the program writes is compared: within the testing rules' tolerance of
 * its type (data.h), NaN for NaN, written by both or by neither.
 *
 * Exit status (tools/common/cli.h): 0 the two agree, or the interpreter ran
 * alone (--interp, or no driver or GPU: stderr says so); 1 they disagree, or
 * an error in the file, the library or the driver; 2 a usage error (an
 * --arg naming no scalar parameter included).
 */
#include "cli.h"
#include "data.h"
#include "ir/ir.h"           /* the specialized program's parameters and accesses */
#include "runtime/runtime.h" /* rt_assume_of: the widest pointee */
#include "tilejit.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_ELEMENTS ((int64_t)1 << 30) /* per buffer */
#define MAX_NAMED    32

enum { MODE_DEVICE = 1, MODE_INTERP };

typedef struct Named {
  const char *name;
  char *value;
} Named;

typedef struct Options {
  int mode;
  const char *file;
  int64_t m, n, block, stride, seed;
  int warps, align, dtype, backend;
  tj_binding bindings[MAX_NAMED];
  int nbindings;
  Named args[MAX_NAMED];
  int nargs;
} Options;

static const char *const dtype_names[] = {"f32", "f16", "bf16", NULL};
static const char *const backend_names[] = {"ptx", "nvrtc", NULL};

/* clang-format off */
#define AT(f) offsetof(Options, f)
static const CliOption option_table[] = {
    {.name = "FILE.tj", .kind = CLI_BARE, .offset = AT(file), .value = "FILE.tj",
     .needed = CLI_ALL_MODES, .help = "the program in text form (- for stdin)"},
    {.letter = 'm', .kind = CLI_INT64, .offset = AT(m), .lo = 0, .hi = INT32_MAX, .value = "M",
     .needed = CLI_ALL_MODES, .help = "program instances (rows)"},
    {.letter = 'n', .kind = CLI_INT64, .offset = AT(n), .lo = 0, .hi = INT32_MAX, .value = "N",
     .needed = CLI_ALL_MODES, .help = "the row width: BLOCK = next_pow2(N), i32 parameters"},
    {.letter = 'D', .kind = CLI_CUSTOM, .value = "NAME=VALUE",
     .help = "bind the program's constant NAME (-DNAME=VALUE too)"},
    {.name = "arg", .kind = CLI_CUSTOM, .value = "NAME=VALUE",
     .help = "the scalar parameter NAME's value (default: i64 S, i32 N, f32 1)"},
    {.name = "dtype", .kind = CLI_CHOICE, .offset = AT(dtype), .choices = dtype_names,
     .value = "T", .help = "DTYPE: f32, f16 or bf16 (default f32)"},
    {.name = "warps", .kind = CLI_INT, .offset = AT(warps), .lo = 1, .hi = 32, .value = "W",
     .help = "NUM_WARPS (default: tilejit's table)"},
    {.name = "block", .kind = CLI_INT64, .offset = AT(block), .lo = 1, .hi = 1 << 30,
     .value = "B", .help = "BLOCK (default next_pow2(N))"},
    {.name = "align", .kind = CLI_INT, .offset = AT(align), .lo = 1, .hi = 16, .value = "BYTES",
     .help = "ALIGN (default: the most the buffers' rows of S elements give, up to 16)"},
    {.name = "stride", .kind = CLI_INT64, .offset = AT(stride), .lo = 1, .hi = INT32_MAX,
     .value = "S", .help = "elements per row of every buffer (default N)"},
    {.name = "seed", .kind = CLI_INT64, .offset = AT(seed), .lo = 0, .hi = INT64_MAX,
     .value = "S", .help = "random seed (default: from the clock; printed)"},
    {.name = "backend", .kind = CLI_CHOICE, .offset = AT(backend), .choices = backend_names,
     .value = "B", .help = "the device's code generator: ptx or nvrtc (default ptx)"},
    {.name = "interp", .kind = CLI_SELECT, .mode = MODE_INTERP,
     .help = "the interpreter only (else the device too, where there is one)"},
};
/* clang-format on */

static bool parse_named(void *, const CliOption *, char *, char *, size_t);

static const CliTool tool = {
    .name = "tj-run",
    .usage = "tj-run FILE.tj -m M -n N [-D NAME=VALUE ...] [--arg NAME=VALUE ...]\n"
             "              [--dtype T] [--warps W] [--block B] [--align BYTES] [--stride S]\n"
             "              [--seed S] [--backend ptx|nvrtc] [--interp]",
    .about = "Runs M instances of the program on random data through the interpreter and,\n"
             "where there is a GPU, on the device, and compares every element written.\n"
             "Pointers get buffers of M rows of S elements: outputs (stored to only)\n"
             "poisoned, inputs random.\n",
    .options = option_table,
    .count = sizeof option_table / sizeof option_table[0],
    .mode_offset = AT(mode),
    .default_mode = MODE_DEVICE,
    .custom = parse_named,
};

/* -D NAME=VALUE (a constant, any int64) and --arg NAME=VALUE (kept as text
 * until the program says the parameter's type). */
static bool parse_named(void *opts, const CliOption *opt, char *text, char *why, size_t size) {
  Options *o = opts;
  char *eq = strchr(text, '=');
  const char *what = opt->letter == 'D' ? "-D" : "--arg";
  if (!eq || eq == text)
    return snprintf(why, size, "%s takes NAME=VALUE, not '%.40s'", what, text), false;
  *eq = '\0';
  if (o->nbindings == MAX_NAMED || o->nargs == MAX_NAMED)
    return snprintf(why, size, "at most %d of %s", MAX_NAMED, what), false;
  if (opt->letter != 'D') {
    o->args[o->nargs++] = (Named){text, eq + 1};
    return true;
  }
  int64_t v;
  if (!tj_parse_decimal(eq + 1, INT64_MIN, INT64_MAX, &v))
    return snprintf(why, size, "%s takes a decimal integer, not '%.40s'", text, eq + 1), false;
  o->bindings[o->nbindings++] = (tj_binding){text, v};
  return true;
}

/* ---- the program's parameters ------------------------------------------- */

enum { READ = 1, WRITTEN = 2 };

typedef struct Param {
  const char *name;
  tj_type type;
  int use;       /* pointers: READ | WRITTEN */
  tj_arg host;   /* the interpreter's argument (its buffer, or the value) */
  void *device_copy; /* written buffers: what the device left, on the host */
  uint64_t device;   /* pointers: the device buffer */
} Param;

/* The PARAM instruction a pointer value comes from, through ptr_add. */
static int param_of(const tj_program *p, int value) {
  for (;;) {
    const IrInst *in = &p->insts[p->defs[value]];
    if (in->op == TJ_OP_PARAM) return (int)in->iimm;
    if (in->op != TJ_OP_PTR_ADD) return -1;
    value = in->args[0];
  }
}

static void describe_params(const tj_program *p, Param *params) {
  for (int i = 0; i < p->ninsts; i++) {
    const IrInst *in = &p->insts[i];
    if (in->op == TJ_OP_PARAM) {
      params[in->iimm].name = p->params[in->iimm];
      params[in->iimm].type = p->types[in->result];
    }
    int at = in->op == TJ_OP_LOAD || in->op == TJ_OP_STORE ? param_of(p, in->args[0]) : -1;
    if (at >= 0) params[at].use |= in->op == TJ_OP_LOAD ? READ : WRITTEN;
  }
}

/* The value of scalar parameter q: --arg, or the default. 2 on a bad one. */
static int scalar_value(const Options *o, Param *q) {
  const char *text = NULL;
  for (int i = 0; i < o->nargs; i++)
    if (!strcmp(o->args[i].name, q->name)) text = o->args[i].value;
  tj_elem e = (tj_elem)q->type.elem;
  if (e == TJ_F32) {
    char *end = NULL;
    q->host = (tj_arg){TJ_ARG_FLOAT, {.f = text ? strtod(text, &end) : 1.0}, 0};
    if (text && (end == text || *end))
      return cli_usage_error(&tool, "--arg %s takes a number, not '%.40s'", q->name, text);
    return -1;
  }
  int64_t v = e == TJ_I64 ? o->stride : o->n;
  int64_t lo = e == TJ_I64 ? INT64_MIN : INT32_MIN, hi = e == TJ_I64 ? INT64_MAX : INT32_MAX;
  if (text && !tj_parse_decimal(text, lo, hi, &v))
    return cli_usage_error(&tool, "--arg %s takes a decimal integer from %lld to %lld, not '%.40s'",
                           q->name, (long long)lo, (long long)hi, text);
  q->host = (tj_arg){TJ_ARG_INT, {.i = v}, 0};
  return -1;
}

/* Every --arg names a scalar parameter. */
static int check_named(const Options *o, const Param *params, int count) {
  for (int i = 0; i < o->nargs; i++) {
    bool found = false;
    for (int k = 0; k < count; k++)
      found |= !strcmp(params[k].name, o->args[i].name) && params[k].type.shape == TJ_SCALAR;
    if (!found)
      return cli_usage_error(&tool, "--arg %s: the program has no scalar parameter of that name",
                             o->args[i].name);
  }
  return -1;
}

/* ---- buffers ------------------------------------------------------------- */

static bool is_poison(const void *buf, tj_elem e, int64_t i) {
  switch (data_elem_size(e)) {
  case 2: return ((const uint16_t *)buf)[i] == (e == TJ_F16 ? 0x7E5Au : 0x7FA5u);
  case 4: return ((const uint32_t *)buf)[i] == (e == TJ_F32 ? 0x7FA5A5A5u : 0x5A5A5A5Au);
  default: return ((const uint64_t *)buf)[i] == 0x5A5A5A5A5A5A5A5Aull;
  }
}

static void poison(void *buf, tj_elem e, int64_t count) {
  for (int64_t i = 0; i < count; i++) switch (data_elem_size(e)) {
    case 2: ((uint16_t *)buf)[i] = e == TJ_F16 ? 0x7E5Au : 0x7FA5u; break;
    case 4: ((uint32_t *)buf)[i] = e == TJ_F32 ? 0x7FA5A5A5u : 0x5A5A5A5Au; break;
    default: ((uint64_t *)buf)[i] = 0x5A5A5A5A5A5A5A5Aull; break;
    }
}

static void randomize(void *buf, tj_elem e, int64_t count, uint64_t *state) {
  bool integer = e == TJ_I32 || e == TJ_I64;
  for (int64_t i = 0; i < count; i++)
    data_set(buf, e, i, integer ? floor(data_uniform(state) * 201.0) - 100.0
                                : 3.0 * data_normal(state));
}

/* The host buffers of every pointer, filled; a copy of each written one
 * for the device's results. */
static int make_buffers(const Options *o, Param *params, int count) {
  uint64_t state = (uint64_t)o->seed;
  int64_t elements = o->m * o->stride;
  for (int k = 0; k < count; k++) {
    Param *q = &params[k];
    if (q->type.shape != TJ_POINTER) continue;
    tj_elem e = (tj_elem)q->type.elem;
    size_t bytes = (size_t)(elements > 0 ? elements : 1) * (size_t)data_elem_size(e);
    void *buf = aligned_alloc(16, (bytes + 15) / 16 * 16);
    q->device_copy = q->use & WRITTEN ? malloc(bytes) : NULL;
    if (!buf || (q->use & WRITTEN && !q->device_copy)) {
      free(buf);
      return fprintf(stderr, "tj-run: cannot allocate %zu bytes for %s\n", bytes, q->name), 1;
    }
    if (q->use & READ)
      randomize(buf, e, elements, &state);
    else
      poison(buf, e, elements);
    q->host = (tj_arg){TJ_ARG_PTR, {.ptr = buf}, bytes};
  }
  return 0;
}

static void free_buffers(Param *params, int count) {
  for (int k = 0; k < count; k++)
    if (params[k].type.shape == TJ_POINTER) {
      free(params[k].host.u.ptr);
      free(params[k].device_copy);
    }
}

/* ---- the device ---------------------------------------------------------- */

static int device_error(tj_context *ctx, const char *what) {
  fprintf(stderr, "tj-run: %s: %s\n", what, tj_context_error(ctx));
  return 1;
}

/* The device's run on copies of the inputs (made before the interpreter
 * ran); its written buffers land in device_copy. -1: no driver or GPU. */
static int run_device(const Options *o, tj_spec *s, Param *params, int count, void **inputs) {
  tj_context *ctx = NULL;
  tj_status st = tj_context_create(NULL, &ctx);
  if (st == TJ_ERR_NO_DRIVER || st == TJ_ERR_NO_DEVICE) {
    fprintf(stderr, "tj-run: %s: ran the interpreter only\n",
            st == TJ_ERR_NO_DRIVER ? "no CUDA driver" : "no CUDA GPU");
    return -1;
  }
  if (st != TJ_OK) return fprintf(stderr, "tj-run: %s\n", tj_context_error(NULL)), 1;
  tj_arg args[IR_MAX_PARAMS];
  tj_kernel *k = NULL;
  int rc = 0;
  for (int i = 0; i < count && rc == 0; i++) {
    Param *q = &params[i];
    args[i] = q->host;
    if (q->type.shape != TJ_POINTER) continue;
    if (tj_device_alloc(ctx, q->host.bytes, &q->device) != TJ_OK ||
        tj_copy_to_device(ctx, q->device, inputs[i], q->host.bytes) != TJ_OK)
      rc = device_error(ctx, q->name);
    args[i] = (tj_arg){TJ_ARG_PTR, {.ptr = (void *)(uintptr_t)q->device}, q->host.bytes};
  }
  if (rc == 0 && tj_compile(ctx, s, (tj_backend)o->backend, &k) != TJ_OK)
    rc = device_error(ctx, "compile");
  if (rc == 0 && (tj_launch(ctx, k, args, count, o->m, NULL) != TJ_OK ||
                  tj_context_synchronize(ctx) != TJ_OK))
    rc = device_error(ctx, "launch");
  for (int i = 0; i < count && rc == 0; i++) {
    const Param *q = &params[i];
    if (q->device_copy && tj_copy_to_host(ctx, q->device_copy, q->device, q->host.bytes) != TJ_OK)
      rc = device_error(ctx, q->name);
  }
  if (rc == 0) {
    tj_device_info d;
    tj_context_device_info(ctx, &d);
    printf("device: %s, sm_%d, the %s backend\n", d.name, d.arch, backend_names[o->backend]);
  }
  for (int i = 0; i < count; i++)
    if (params[i].device) tj_device_free(ctx, params[i].device);
  tj_context_destroy(ctx);
  return rc;
}

/* ---- comparing ------------------------------------------------------------ */

/* Buffer q as the interpreter and the device left it; 1 if they differ. */
static int compare(const Options *o, const Param *q) {
  tj_elem e = (tj_elem)q->type.elem;
  DataTolerance t = data_tolerance(e);
  int64_t count = o->m * o->stride, written = 0, bad = 0, first = -1;
  double worst = 0;
  for (int64_t i = 0; i < count; i++) {
    bool pi = !(q->use & READ) && is_poison(q->host.u.ptr, e, i);
    bool pd = !(q->use & READ) && is_poison(q->device_copy, e, i);
    double want = data_get(q->host.u.ptr, e, i), got = data_get(q->device_copy, e, i);
    bool ok = pi == pd && (pi || data_close(got, want, t));
    written += !pi;
    if (!pi && !pd && isfinite(want) && isfinite(got) && t.atol + t.rtol > 0)
      worst = fmax(worst, fabs(got - want) / (t.atol + t.rtol * fabs(want)));
    if (!ok && bad++ == 0) first = i;
  }
  printf("  %s: %lld elements written, largest error / tolerance %.3g", q->name,
         (long long)written, worst);
  if (bad) {
    double want = data_get(q->host.u.ptr, e, first), got = data_get(q->device_copy, e, first);
    printf(", %lld differ; the first at row %lld column %lld: device %.9g%s, interpreter %.9g%s",
           (long long)bad, (long long)(first / o->stride), (long long)(first % o->stride), got,
           !(q->use & READ) && is_poison(q->device_copy, e, first) ? " (unwritten)" : "", want,
           !(q->use & READ) && is_poison(q->host.u.ptr, e, first) ? " (unwritten)" : "");
  }
  printf("\n");
  return bad ? 1 : 0;
}

/* What the interpreter alone wrote to buffer q. */
static void written(const Options *o, const Param *q) {
  int64_t count = o->m * o->stride, n = 0;
  for (int64_t i = 0; i < count; i++) n += !is_poison(q->host.u.ptr, (tj_elem)q->type.elem, i);
  if (q->use & READ)
    printf("  %s: read and written in place\n", q->name);
  else
    printf("  %s: %lld of %lld elements written\n", q->name, (long long)n, (long long)count);
}

/* ---- main ------------------------------------------------------------------ */

/* ALIGN the buffers give: 16 bytes, halved while a row of S elements of
 * the widest pointee is no multiple of it. */
static int buffer_align(const Options *o, const tj_program *p) {
  RtAssume a; /* its widest pointee, as tj_launch's checks count it */
  rt_assume_of(p, (tj_dtype)o->dtype, 16, 1, &a);
  int widest = a.widest > 1 ? a.widest : 1, align = 16;
  while (align > widest && (o->stride * widest) % align) align /= 2;
  return align;
}

static tj_spec *specialize(Options *o, tj_program **p) {
  size_t len = 0;
  char *text = cli_read_text(tool.name, o->file, &len);
  if (!text) return NULL;
  tj_status st = tj_program_parse(text, len, p);
  free(text);
  if (st == TJ_OK && !o->align) o->align = buffer_align(o, *p);
  tj_spec_options so = {.n = o->n, .block = o->block, .num_warps = o->warps,
                        .dtype = (tj_dtype)o->dtype, .align = o->align,
                        .bindings = o->bindings, .binding_count = o->nbindings};
  tj_spec *s = NULL;
  if (st == TJ_OK) st = tj_specialize(*p, &so, &s);
  if (st != TJ_OK)
    fprintf(stderr, "tj-run: %s: %s: %s\n", o->file, tj_status_string(st),
            *p ? tj_program_error(*p) : "cannot read the program");
  return s;
}

static int run(const Options *o, tj_spec *s) {
  const tj_program *p = s->prog;
  int count = p->nparams, rc = -1;
  Param *params = calloc((size_t)(count ? count : 1), sizeof *params);
  void **inputs = calloc((size_t)(count ? count : 1), sizeof *inputs);
  if (!params || !inputs) return fprintf(stderr, "tj-run: out of memory\n"), 1;
  describe_params(p, params);
  rc = check_named(o, params, count);
  for (int k = 0; k < count && rc < 0; k++)
    if (params[k].type.shape == TJ_SCALAR) rc = scalar_value(o, &params[k]);
  if (rc < 0) rc = make_buffers(o, params, count);
  if (rc == 0)
    printf("tj-run: %s: %s, M = %lld, N = %lld, S = %lld, %s, seed %lld\n", o->file,
         tj_spec_key(s), (long long)o->m, (long long)o->n, (long long)o->stride,
         dtype_names[o->dtype], (long long)o->seed);
  for (int k = 0; k < count && rc == 0; k++) {
    const Param *q = &params[k];
    if (q->type.shape == TJ_POINTER)
      printf("  %s: a buffer of %lld x %lld, %s\n", q->name, (long long)o->m,
             (long long)o->stride,
             q->use == WRITTEN ? "poisoned (output)"
             : q->use & WRITTEN ? "random (input and output)"
                                : "random (input)");
    else if (q->host.kind == TJ_ARG_FLOAT)
      printf("  %s = %g\n", q->name, q->host.u.f);
    else
      printf("  %s = %lld\n", q->name, (long long)q->host.u.i);
  }
  tj_arg args[IR_MAX_PARAMS];
  for (int k = 0; k < count && rc == 0; k++) {
    args[k] = params[k].host;
    if (params[k].type.shape != TJ_POINTER || !params[k].device_copy) {
      inputs[k] = params[k].host.u.ptr;
      continue;
    }
    /* the device starts from what the interpreter started from */
    if (!(inputs[k] = malloc(params[k].host.bytes))) rc = 1;
    else memcpy(inputs[k], params[k].host.u.ptr, params[k].host.bytes);
  }
  if (rc == 0 && tj_interpret(s, args, count, o->m) != TJ_OK) {
    fprintf(stderr, "tj-run: interpreter: %s\n", tj_spec_error(s));
    rc = 1;
  }
  if (rc == 0) printf("interpreter: ran %lld instances\n", (long long)o->m);
  int device = rc == 0 && o->mode == MODE_DEVICE ? run_device(o, s, params, count, inputs) : -1;
  if (rc == 0 && device > 0) rc = device;
  for (int k = 0; k < count && rc == 0 && device == 0; k++)
    if (params[k].device_copy) rc |= compare(o, &params[k]);
  for (int k = 0; k < count && rc == 0 && device < 0; k++)
    if (params[k].device_copy) written(o, &params[k]);
  if (rc <= 1 && device == 0) printf("%s\n", rc == 0 ? "PASS" : "FAIL");
  for (int k = 0; k < count; k++)
    if (params[k].device_copy) free(inputs[k]);
  free_buffers(params, count);
  free(params);
  free(inputs);
  return rc;
}

int main(int argc, char **argv) {
  Options o;
  memset(&o, 0, sizeof o);
  o.seed = (int64_t)time(NULL);
  int rc = cli_parse(&tool, argc, argv, &o);
  if (rc >= 0) return rc;
  if (!o.stride) o.stride = o.n > 0 ? o.n : 1;
  if (o.stride < o.n) return cli_usage_error(&tool, "--stride is below N");
  if (o.m * o.stride > MAX_ELEMENTS)
    return cli_usage_error(&tool, "M * S is over 2^30 elements a buffer");
  tj_program *p = NULL;
  tj_spec *s = specialize(&o, &p);
  rc = s ? run(&o, s) : 1;
  tj_spec_destroy(s);
  tj_program_destroy(p);
  return rc;
}
