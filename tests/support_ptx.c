/*
 * support_ptx.c — the PTX helpers of support_ptx.h.
 *
 * Batching: every kernel tilejit emits is one .entry with a prologue
 * (.version, .target, .address_size). A batch keeps the kernels of one arch,
 * strips their prologues, gives each entry a unique name (tj_k<index>) and
 * writes one file per `per_file` kernels under the highest .version among
 * them, so ptxas starts once per file instead of once per kernel. Files are
 * assembled by two threads. ptxas -v reports per entry, which is how each
 * kernel gets its own registers and spills back.
 */
#include "support_ptx.h"
#include "support.h"

#include "codegen/codegen.h"
#include "runtime/runtime.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *softmax_ptx(const SoftmaxConfig *cfg, tj_kernel_info *info, tj_status *status, char *why,
                  size_t why_size) {
  SoftmaxSpread planned = {0, 0};
  return softmax_ptx_spread(cfg, planned, info, status, why, why_size);
}

char *softmax_ptx_spread(const SoftmaxConfig *cfg, SoftmaxSpread spread, tj_kernel_info *info,
                         tj_status *status, char *why, size_t why_size) {
  return softmax_ptx_div(cfg, spread, 0, info, status, why, why_size);
}

char *softmax_ptx_div(const SoftmaxConfig *cfg, SoftmaxSpread spread, int multiple,
                      tj_kernel_info *info, tj_status *status, char *why, size_t why_size) {
  tj_program *p = NULL;
  tj_spec *s = NULL;
  tj_spec_options o;
  char *ptx = NULL;
  tj_status st = tj_softmax_program(cfg->which, cfg->n, &p);
  /* The plan for 65536 rows, with the spread as the caller's options. */
  tj_device_info device;
  tj_softmax_options so = {.num_warps = cfg->warps, .which_template = cfg->which,
                           .cluster = spread.cluster, .split = spread.split};
  tj_softmax_plan plan;
  if (st == TJ_OK) st = tj_device_nominal(cfg->arch ? cfg->arch : 90, &device);
  int align = cfg->phased ? 1 : cfg->align ? cfg->align : 16;
  if (st == TJ_OK)
    st = rt_row_plan(&device, TJ_ROW_SOFTMAX, cfg->dtype, 65536, cfg->n, &so, align, &plan);
  if (st == TJ_OK) /* as tj_softmax plans rows off 16 bytes */
    rt_softmax_rows_plan(&device, &plan, TJ_ROW_SOFTMAX, cfg->dtype, cfg->n, align, cfg->phased,
                         &so);
  if (st == TJ_OK) st = tj_softmax_spec_options(&plan, cfg->dtype, cfg->n, &o);
  if (st == TJ_OK) {
    if (cfg->block) o.block = cfg->block;
    o.align = cfg->align ? cfg->align : 16;
    o.phased = cfg->phased;
    o.multiple = multiple;
    st = tj_specialize(p, &o, &s);
    if (st != TJ_OK) snprintf(why, why_size, "specialize: %s", tj_program_error(p));
  } else {
    snprintf(why, why_size, "softmax program: %s", p ? tj_program_error(p) : tj_status_string(st));
  }
  if (st == TJ_OK) {
    tj_codegen_options co = {cfg->arch ? cfg->arch : 90, 0, cfg->annotate};
    st = tj_emit_ptx(s, &co, &ptx, info);
    if (st != TJ_OK) snprintf(why, why_size, "emit: %s", tj_spec_error(s));
  }
  if (status) *status = st;
  tj_spec_destroy(s);
  tj_program_destroy(p);
  return ptx;
}

int ptx_count(const char *ptx, const char *needle) {
  int n = 0;
  for (const char *s = ptx; s && *s;) {
    const char *end = strchr(s, '\n');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    const char *hit = strstr(s, needle);
    if (hit && hit < s + len) n++;
    s = end ? end + 1 : NULL;
  }
  return n;
}

int ptx_shfl_offsets(const char *ptx, int *offsets, int max) {
  int n = 0;
  for (const char *s = strstr(ptx, "shfl.sync.bfly.b32"); s && n < max;
       s = strstr(s + 1, "shfl.sync.bfly.b32")) {
    const char *comma = strchr(s, ',');
    comma = comma ? strchr(comma + 1, ',') : NULL;
    offsets[n++] = comma ? atoi(comma + 1) : -1;
  }
  return n;
}

int ptx_find_line(const char *ptx, const char *needle, int from) {
  int line = 0;
  for (const char *s = ptx; s && *s; line++) {
    const char *end = strchr(s, '\n');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    const char *hit = strstr(s, needle);
    if (line >= from && hit && hit < s + len) return line;
    s = end ? end + 1 : NULL;
  }
  return -1;
}

/* ---- batches ------------------------------------------------------------ */

typedef struct Kernel {
  char *body;  /* the PTX after its prologue, entry renamed */
  int version; /* its .version, 10 * major + minor */
  PtxReport report;
} Kernel;

struct PtxBatch {
  char ptxas[1024];
  int arch, per_file;
  Kernel *kernels;
  int count, cap;
  char *first_error;
  pthread_mutex_t lock;
};

bool ptxas_available(char *path, size_t size) { return cg_ptxas_find(path, size); }

int ptxas_suite_main(Suite *s, char *path, size_t size) {
  if (!ptxas_available(path, size)) {
    srunner_free(srunner_create(s)); /* frees the suite */
    fprintf(stderr, "ptxas not found: skipped\n");
    return 77;
  }
  return test_run_suite(s);
}

PtxBatch *ptx_batch_new(const char *ptxas, int arch, int per_file) {
  PtxBatch *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  snprintf(b->ptxas, sizeof b->ptxas, "%s", ptxas);
  b->arch = arch;
  b->per_file = per_file > 0 ? per_file : 1;
  pthread_mutex_init(&b->lock, NULL);
  return b;
}

/* The text after ".address_size 64\n", with ".entry NAME(" renamed. */
static char *rename_body(const char *ptx, int index) {
  const char *body = strstr(ptx, ".address_size 64\n");
  const char *entry = body ? strstr(body, ".entry ") : NULL;
  const char *paren = entry ? strchr(entry, '(') : NULL;
  if (!paren) return NULL;
  body += strlen(".address_size 64\n");
  size_t head = (size_t)(entry - body) + strlen(".entry "), size = strlen(body) + 32;
  char *out = malloc(size);
  if (out) snprintf(out, size, "%.*stj_k%d%s", (int)head, body, index, paren);
  return out;
}

int ptx_batch_add(PtxBatch *b, const char *ptx) {
  if (b->count == b->cap) {
    int cap = b->cap ? 2 * b->cap : 64;
    Kernel *k = realloc(b->kernels, sizeof *k * (size_t)cap);
    if (!k) return -1;
    b->kernels = k;
    b->cap = cap;
  }
  Kernel *k = &b->kernels[b->count];
  memset(k, 0, sizeof *k);
  const char *v = strstr(ptx, ".version ");
  int major = 0, minor = 0;
  if (v && sscanf(v, ".version %d.%d", &major, &minor) == 2) k->version = 10 * major + minor;
  k->body = rename_body(ptx, b->count);
  return k->body ? b->count++ : -1;
}

static char *file_text(const PtxBatch *b, int from, int to) {
  const CgArch *a = cg_arch_find(b->arch);
  int version = a ? a->ptx : 90;
  size_t size = 256;
  for (int i = from; i < to; i++) {
    if (b->kernels[i].version > version) version = b->kernels[i].version;
    size += strlen(b->kernels[i].body) + 1;
  }
  char *text = malloc(size);
  if (!text) return NULL;
  size_t len = (size_t)snprintf(text, size, ".version %d.%d\n.target %s\n.address_size 64\n",
                                version / 10, version % 10, a ? a->target : "sm_90");
  for (int i = from; i < to; i++)
    len += (size_t)snprintf(text + len, size - len, "%s\n", b->kernels[i].body);
  return text;
}

static void record(PtxBatch *b, int from, int to, bool ok, const char *log) {
  CgPtxasEntry *e = calloc((size_t)(to - from) + 1, sizeof *e);
  int n = e && ok ? cg_ptxas_parse(log, e, to - from) : 0;
  for (int i = 0; i < n; i++) {
    int index = atoi(e[i].name + 4);
    if (strncmp(e[i].name, "tj_k", 4) != 0 || index < from || index >= to) continue;
    PtxReport *r = &b->kernels[index].report;
    r->assembled = 1;
    r->registers = e[i].registers;
    r->spill_bytes = e[i].spill_stores + e[i].spill_loads;
    r->stack_bytes = e[i].stack_frame;
    r->local_bytes = e[i].local_bytes;
  }
  free(e);
}

static char *copy_text(const char *s) {
  char *d = malloc(strlen(s) + 1);
  if (d) strcpy(d, s);
  return d;
}

/* Assembles kernels [from, to); on failure splits the range in halves. */
static void assemble(PtxBatch *b, int from, int to) {
  char *text = file_text(b, from, to), *log = NULL;
  bool ok = text && cg_ptxas_run(b->ptxas, text, b->arch, &log) == TJ_OK;
  free(text);
  if (ok || to - from == 1) {
    record(b, from, to, ok, log ? log : "");
    pthread_mutex_lock(&b->lock);
    if (!ok && !b->first_error) b->first_error = copy_text(log ? log : "(no log)");
    pthread_mutex_unlock(&b->lock);
  } else {
    assemble(b, from, from + (to - from) / 2);
    assemble(b, from + (to - from) / 2, to);
  }
  free(log);
}

typedef struct Worker {
  PtxBatch *b;
  int next; /* the next file, shared */
  pthread_mutex_t lock;
} Worker;

static void *work(void *arg) {
  Worker *w = arg;
  for (;;) {
    pthread_mutex_lock(&w->lock);
    int from = w->next;
    w->next += w->b->per_file;
    pthread_mutex_unlock(&w->lock);
    if (from >= w->b->count) return NULL;
    int to = from + w->b->per_file < w->b->count ? from + w->b->per_file : w->b->count;
    assemble(w->b, from, to);
  }
}

void ptx_batch_run(PtxBatch *b) {
  Worker w = {b, 0, PTHREAD_MUTEX_INITIALIZER};
  pthread_t t[2];
  int started = 0;
  for (int i = 0; i < 2; i++) started += pthread_create(&t[started], NULL, work, &w) == 0;
  if (!started) work(&w);
  for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
}

const PtxReport *ptx_batch_report(const PtxBatch *b, int index) {
  return &b->kernels[index].report;
}
const char *ptx_batch_first_error(const PtxBatch *b) {
  return b->first_error ? b->first_error : "";
}
int ptx_batch_count(const PtxBatch *b) { return b->count; }

void ptx_batch_free(PtxBatch *b) {
  if (!b) return;
  for (int i = 0; i < b->count; i++) free(b->kernels[i].body);
  free(b->kernels);
  free(b->first_error);
  pthread_mutex_destroy(&b->lock);
  free(b);
}
