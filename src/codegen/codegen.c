/*
 * codegen.c — tj_emit_ptx: the PTX backend's driver.
 *
 *   specialized program
 *     │ cg_analyze          facts per value (analyze.c)
 *     │ cg_plan_layout      the geometry (geometry.c), then VEC and repeats
 *     │                     per tile length (layout.c)
 *     │ cg_plan_reductions    shared-memory regions of reductions (reduce.c)
 *     │ cg_lower_kernel     the body, instruction by instruction (lower.c)
 *     ▼ assemble            prologue template, entry, params, .reqntid,
 *                           register declarations, shared memory, body
 *   PTX text
 *
 * The .version is the lowest ISA that has the arch and every feature the
 * body used (arch.c); the caller may ask for a higher one. All allocation
 * is in one arena freed here; only the PTX text is handed out.
 */
#include "codegen/codegen.h"

#include <stdio.h>
#include <string.h>

static tj_status check_inputs(CgCtx *c, const tj_codegen_options *o) {
  c->arch = o && o->arch ? o->arch : CG_DEFAULT_ARCH;
  c->annotate = o && o->annotate;
  const CgArch *a = cg_arch_find(c->arch);
  if (!a)
    return cg_fail(c, TJ_ERR_UNSUPPORTED, "codegen: unsupported arch sm_%d (sm_75 and later)",
                   c->arch);
  if (!c->p->specialized)
    return cg_fail(c, TJ_ERR_INVALID_ARGUMENT, "codegen: the program is not specialized");
  if (o && o->ptx_version && (o->ptx_version < a->ptx || o->ptx_version > CG_PTX_MAX))
    return cg_fail(c, TJ_ERR_UNSUPPORTED,
                   "codegen: PTX ISA %d.%d cannot target %s (needs %d.%d to %d.%d)",
                   o->ptx_version / 10, o->ptx_version % 10, a->target, a->ptx / 10, a->ptx % 10,
                   CG_PTX_MAX / 10, CG_PTX_MAX % 10);
  return TJ_OK;
}

static tj_status init_values(CgCtx *c) {
  c->vals = cg_arena_alloc(&c->arena, sizeof *c->vals * ((size_t)c->p->nvalues + 1));
  if (!c->vals) return cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  for (int v = 0; v < c->p->nvalues; v++) {
    c->vals[v].elem = c->p->types[v].elem;
    c->vals[v].layout = -1;
  }
  return TJ_OK;
}

static void entry_name(const tj_program *p, char *out, size_t size) {
  size_t n = (size_t)snprintf(out, size, "tj_");
  for (const char *s = p->name; *s && n + 1 < size; s++) {
    char ch = *s;
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_';
    out[n++] = ok ? ch : '_';
  }
  out[n] = '\0';
}

/* The prologue template with its @NAME@ placeholders filled in. */
static void prologue(const CgCtx *c, TjBuf *out) {
  const CgArch *a = cg_arch_find(c->arch);
  char version[16], comment[256], stage[48] = "", div[16] = "";
  snprintf(version, sizeof version, "%d.%d", c->ptx / 10, c->ptx % 10);
  if (c->spec->stash)
    snprintf(stage, sizeof stage, " STAGE=%d STASH=%d", c->spec->stage, c->spec->stash);
  else if (c->spec->stage)
    snprintf(stage, sizeof stage, " STAGE=%d", c->spec->stage);
  if (c->spec->multiple > 1) snprintf(div, sizeof div, " DIV=%d", c->spec->multiple);
  snprintf(comment, sizeof comment, "%s DTYPE=%s BLOCK=%lld NUM_WARPS=%d ALIGN=%d%s%s%s",
           c->p->name, ir_dtype_name(c->spec->dtype), (long long)c->spec->block,
           c->spec->num_warps, c->spec->align, c->spec->phased ? " PHASE=1" : "", stage, div);
  const char *names[] = {"@VERSION@", "@TARGET@", "@PROGRAM@"};
  const char *values[] = {version, a->target, comment};
  for (const char *s = tj_template_ptx_prologue; *s;) {
    size_t i = 0;
    while (i < TJ_COUNTOF(names) && strncmp(s, names[i], strlen(names[i])) != 0) i++;
    if (i < TJ_COUNTOF(names)) {
      buf_puts(out, values[i]);
      s += strlen(names[i]);
    } else { /* the text up to the next '@' */
      size_t run = 1 + strcspn(s + 1, "@");
      buf_putn(out, s, run);
      s += run;
    }
  }
}

static const char *param_type(tj_type t) {
  if (t.shape == TJ_POINTER || t.elem == TJ_I64) return "u64";
  return t.elem == TJ_F32 ? "f32" : "u32";
}

static void entry(const CgCtx *c, const char *name, TjBuf *out) {
  const CgGeometry *g = &c->geo;
  buf_printf(out, "// %d threads: %d program instance%s of %d thread%s each", g->threads,
             g->programs, g->programs == 1 ? "" : "s", g->group, g->group == 1 ? "" : "s");
  if (g->cluster > 1) buf_printf(out, ", over a cluster of %d CTAs", g->cluster);
  if (g->split > 1)
    buf_printf(out, ", over %d %s of the grid", g->split, g->cluster > 1 ? "clusters" : "CTAs");
  for (int i = 0; i < c->nlayouts; i++)
    buf_printf(out, "; tile %lld: VEC %d x %d", (long long)c->layouts[i].len, c->layouts[i].vec,
               c->layouts[i].reps);
  buf_printf(out, "\n.visible .entry %s(\n", name);
  for (int i = 0; i < c->p->ninsts; i++) {
    const IrInst *in = &c->p->insts[i];
    if (in->op == TJ_OP_PARAM)
      buf_printf(out, "\t.param .%s p_%s,\n", param_type(c->p->types[in->result]),
                 c->p->params[in->iimm]);
  }
  if (g->split > 1) buf_puts(out, "\t.param .u64 tj_workspace,\n");
  buf_printf(out, "\t.param .u64 tj_programs\n)\n.reqntid %d, 1, 1\n", g->threads);
  int ctas = cg_min_ctas_per_sm(c);
  if (ctas) buf_printf(out, ".minnctapersm %d\n", ctas);
  if (g->cluster > 1)
    buf_printf(out, ".explicitcluster\n.reqnctapercluster %d, 1, 1\n", g->cluster);
  buf_puts(out, "{\n");
}

static char *assemble(CgCtx *c, char *name, size_t size) {
  TjBuf out;
  buf_init(&out);
  entry_name(c->p, name, size);
  prologue(c, &out);
  /* More than a CTA gets unasked: sized at launch (tj_launch_shape), and
   * declared at module scope, as PTX requires of an .extern. */
  if (c->shared.bytes > CG_STATIC_SHARED_MAX)
    buf_puts(&out, ".extern .shared .align 16 .b8 tj_smem[];\n\n");
  entry(c, name, &out);
  cg_declarations(&c->em, &out);
  if (c->shared.bytes > 0 && c->shared.bytes <= CG_STATIC_SHARED_MAX)
    buf_printf(&out, "\t.shared .align 16 .b8 tj_smem[%d];\n", c->shared.bytes);
  buf_puts(&out, "\n");
  buf_puts(&out, c->em.body.data ? c->em.body.data : "");
  buf_puts(&out, "}\n");
  return buf_take(&out);
}

/* all_ctas: kernels without loops are launched one CTA per programs_per_cta
 * instances rather than as a persistent grid: measured on an H200 (softmax,
 * f32, 256 MiB) 5 to 13% faster at every N from 32 to 32768 (README.md).
 * Kernels with loops (the online template) keep the persistent grid, which
 * nobody has measured against. A grid level (SPLIT > 1) needs every CTA of
 * a group resident at once: a cooperative, persistent grid. */
static void fill_info(const CgCtx *c, const char *name, tj_kernel_info *info) {
  memset(info, 0, sizeof *info);
  snprintf(info->entry, sizeof info->entry, "%s", name);
  const CgGeometry *g = &c->geo;
  info->shape.threads = g->threads;
  info->shape.programs_per_cta = g->programs;
  info->shape.cluster = g->cluster;
  info->shape.ctas_per_program = g->cluster * g->split;
  bool dynamic = c->shared.bytes > CG_STATIC_SHARED_MAX;
  info->shape.shared_bytes = dynamic ? 0 : c->shared.bytes;
  info->shape.dynamic_shared_bytes = dynamic ? c->shared.bytes : 0;
  info->shape.cooperative = g->split > 1;
  info->shape.all_ctas = !cg_has_loop(c->p) && g->split == 1;
  info->shape.workspace_bytes = g->split > 1 ? c->ws.block : 0;
  info->arch = c->arch;
  info->ptx_version = c->ptx;
  info->param_count = c->p->nparams;
}

static tj_status run(CgCtx *c, const tj_codegen_options *o, char **ptx, tj_kernel_info *info) {
  tj_status st = check_inputs(c, o);
  if (st == TJ_OK) st = init_values(c);
  if (st == TJ_OK) st = cg_analyze(c);
  for (int v = 0; st == TJ_OK && v < c->p->nvalues; v++) c->vals[v].form = c->facts.form[v];
  if (st == TJ_OK) st = cg_plan_layout(c);
  if (st == TJ_OK) st = cg_plan_reductions(c);
  if (st == TJ_OK) cg_lower_kernel(c);
  if (c->status != TJ_OK) return c->status;
  if (c->em.body.oom) return cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  c->ptx = cg_ptx_version(c->arch, c->features);
  if (o && o->ptx_version && o->ptx_version < c->ptx)
    return cg_fail(c, TJ_ERR_UNSUPPORTED, "codegen: this kernel needs PTX ISA %d.%d or later",
                   c->ptx / 10, c->ptx % 10);
  if (o && o->ptx_version) c->ptx = o->ptx_version;
  char name[64];
  if (!(*ptx = assemble(c, name, sizeof name)))
    return cg_fail(c, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  if (info) fill_info(c, name, info);
  return TJ_OK;
}

tj_status tj_emit_ptx(tj_spec *s, const tj_codegen_options *options, char **ptx,
                      tj_kernel_info *info) {
  if (!s) return TJ_ERR_INVALID_ARGUMENT;
  if (!ptx) {
    tj_set_error(s->error, "emit_ptx: NULL result pointer");
    return TJ_ERR_INVALID_ARGUMENT;
  }
  *ptx = NULL;
  CgCtx c;
  memset(&c, 0, sizeof c);
  c.spec = s;
  c.p = s->prog;
  tj_status st = run(&c, options, ptx, info);
  cg_arena_free(&c.arena);
  buf_free(&c.em.body);
  return st; /* success writes nothing to s: other threads may be using it */
}
