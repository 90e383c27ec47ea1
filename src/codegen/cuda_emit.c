/*
 * cuda_emit.c — lowers a specialized program to one CUDA C kernel for NVRTC
 * (tj_emit_cuda). It needs the IR (src/ir) and the prelude; it provides the
 * same kernel ABI as the PTX backend: the program's parameters, then the
 * number of program instances, with CTAs striding over instances.
 *
 * The mapping is deliberately simple. A program instance runs on a group of
 * G threads of a CTA of T = 32*NUM_WARPS, chosen by the geometry's rule
 * that the PTX backend uses too (cg_group_size, codegen/geometry.c): rows
 * of up to 1024 elements (counting every tile of that length loaded) take
 * a lane group of up to one warp, longer ones whole warps (up to the CTA),
 * with T/G instances per CTA. Clusters and grid-wide splits
 * are the PTX backend's alone (TJ_ERR_UNSUPPORTED here). A tile of L
 * elements is a local array of E = ceil(L/G) slots per thread, slot j of rank
 * r holding element j*G + r; every access uses a constant j inside an
 * unrolled loop, so tiles stay in registers. Slots past L are padding: loads,
 * stores and reductions skip them. Scalars are computed by every thread of
 * the group, identically. Each IR instruction becomes one line (or one slot
 * loop) of C, so the text follows the IR and is deterministic.
 */
#include "codegen/codegen.h"
#include "codegen/cuda.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct Emit {
  const tj_program *p;
  TjBuf *out;
  int threads;  /* T: threads per CTA */
  int group;    /* G: threads per program instance */
  int programs; /* T / G: instances per CTA */
  int depth;    /* indentation */
  bool annotate;
  bool scratch; /* a reduction over more than a warp needs shared memory */
} Emit;

/* The one emitter helper: an indented, printf-checked line. */
static void emitf(Emit *e, const char *fmt, ...) TJ_PRINTF(2, 3);
static void emitf(Emit *e, const char *fmt, ...) {
  va_list ap;
  buf_printf(e->out, "%*s", 2 * e->depth, "");
  va_start(ap, fmt);
  buf_vprintf(e->out, fmt, ap);
  va_end(ap);
  buf_puts(e->out, "\n");
}

/* ---- values ---------------------------------------------------------------- */

static tj_type type_of(const Emit *e, int v) { return e->p->types[v]; }
static bool is_tile(const Emit *e, int v) { return type_of(e, v).shape == TJ_TILE; }
static int64_t len_of(const Emit *e, int v) { return ir_tile_len(e->p, type_of(e, v)); }
static int64_t slots_of(const Emit *e, int64_t len) { return (len + e->group - 1) / e->group; }

/* A value as an operand: its slot j when tiles are walked, else its name. */
static void ref(const Emit *e, int v, bool per_slot, char *out, size_t size) {
  snprintf(out, size, per_slot && is_tile(e, v) ? "v%d[j]" : "v%d", v);
}

/* The C type of a scalar or pointer value, ready to be followed by a name
 * ("float ", "tj_f16 *"). */
static void c_type(const Emit *e, int v, char *out, size_t size) {
  tj_type t = type_of(e, v);
  snprintf(out, size, t.shape == TJ_POINTER ? "%s *" : "%s ", cg_cuda_type((tj_elem)t.elem));
}

/* The condition under which slot j of a tile of len elements is real ("" if
 * always), joined with an optional extra condition. */
static void slot_condition(const Emit *e, int64_t len, const char *extra, char *out, size_t size) {
  bool padded = len % e->group != 0;
  if (padded && extra)
    snprintf(out, size, "j * %d + tj_rank < %lld && %s", e->group, (long long)len, extra);
  else if (padded)
    snprintf(out, size, "j * %d + tj_rank < %lld", e->group, (long long)len);
  else
    snprintf(out, size, "%s", extra ? extra : "");
}

/* Declares tile v and opens the loop over its slots; the caller writes the
 * loop body as one line. */
static void open_slots(Emit *e, int v, bool declare) {
  int64_t slots = slots_of(e, len_of(e, v));
  if (declare)
    emitf(e, "%s v%d[%lld];", cg_cuda_type((tj_elem)type_of(e, v).elem), v, (long long)slots);
  emitf(e, slots <= CG_CUDA_UNROLL_MAX ? "#pragma unroll" : "#pragma unroll 1");
}

static void slot_loop_header(const Emit *e, int v, char *out, size_t size) {
  snprintf(out, size, "for (int j = 0; j < %lld; j++)", (long long)slots_of(e, len_of(e, v)));
}

/* Text from the program (names, the key, IR lines) made safe inside a C
 * comment: no line breaks, no line splice, no end of comment. */
static void comment_text(const char *in, char *out, size_t size) {
  size_t n = 0;
  for (; in && *in && n + 1 < size; in++)
    out[n++] = *in >= 0x20 && *in < 0x7f && *in != '\\' && *in != '*' && *in != '/' ? *in : '?';
  out[n] = '\0';
}

/* ---- literals ---------------------------------------------------------------- */

static void float_literal(float f, char *out, size_t size) {
  if (!isfinite(f)) {
    unsigned bits;
    memcpy(&bits, &f, sizeof bits);
    snprintf(out, size, "__uint_as_float(0x%08xu)", bits);
    return;
  }
  char digits[48];
  tj_format_g(digits, sizeof digits, 9, (double)f); /* a '.' in every locale */
  bool plain = strpbrk(digits, ".e") == NULL;
  snprintf(out, size, "%s%sf", digits, plain ? ".0" : "");
}

static void literal(tj_elem elem, double v, char *out, size_t size) {
  if (elem == TJ_F32) {
    float_literal((float)v, out, size);
  } else if (elem == TJ_I32) {
    int32_t i = (int32_t)v;
    snprintf(out, size, i == INT32_MIN ? "(-2147483647 - 1)" : "%d", (int)i);
  } else {
    int64_t i = (int64_t)v;
    snprintf(out, size, i == INT64_MIN ? "(-9223372036854775807LL - 1)" : "%lldLL", (long long)i);
  }
}

/* ---- regular ops, from the pattern table ----------------------------------- */

static void expand_dollar(const Emit *e, const IrInst *in, char c, bool per_slot, TjBuf *b) {
  char text[64];
  if (c >= '0' && c <= '3' && c - '0' < in->nargs)
    ref(e, in->args[c - '0'], per_slot, text, sizeof text);
  else if (c == 'A')
    snprintf(text, sizeof text, "v%d", in->args[0]);
  else if (c == 'L')
    snprintf(text, sizeof text, "%lld", (long long)len_of(e, in->args[0]));
  else if (c == 'G')
    snprintf(text, sizeof text, "%d", e->group);
  else if (c == 'r')
    snprintf(text, sizeof text, "%s", ir_elem_name((tj_elem)type_of(e, in->result).elem));
  else
    snprintf(text, sizeof text, "$%c", c);
  buf_puts(b, text);
}

/* Expands an op's pattern for instruction in; per_slot when a tile is built. */
static void expand(const Emit *e, const IrInst *in, const char *pattern, bool per_slot, TjBuf *b) {
  for (const char *s = pattern; *s; s++) {
    if (*s == '$' && s[1]) {
      expand_dollar(e, in, *++s, per_slot, b);
    } else {
      char c[2] = {*s, 0};
      buf_puts(b, c);
    }
  }
}

static void emit_pattern(Emit *e, const IrInst *in, const char *pattern) {
  bool tile = is_tile(e, in->result);
  TjBuf expr;
  buf_init(&expr);
  expand(e, in, pattern, tile, &expr);
  if (expr.oom) e->out->oom = true;
  const char *text = expr.data ? expr.data : "";
  if (tile) {
    char header[64];
    open_slots(e, in->result, true);
    slot_loop_header(e, in->result, header, sizeof header);
    emitf(e, "%s v%d[j] = %s;", header, in->result, text);
  } else {
    char type[32];
    c_type(e, in->result, type, sizeof type);
    emitf(e, "%sv%d = %s;", type, in->result, text);
  }
  buf_free(&expr);
}

/* ---- sources ------------------------------------------------------------------ */

static void emit_param(Emit *e, const IrInst *in) {
  char type[32];
  c_type(e, in->result, type, sizeof type);
  emitf(e, "%sv%d = arg%lld;", type, in->result, (long long)in->iimm);
}

static void emit_const(Emit *e, const IrInst *in) {
  tj_elem elem = (tj_elem)type_of(e, in->result).elem;
  double value = in->op == TJ_OP_CONSTEXPR ? (double)ir_const_value(e->p, (int)in->iimm) : in->fimm;
  char text[64], header[64];
  literal(elem, value, text, sizeof text);
  if (!is_tile(e, in->result)) {
    emitf(e, "%s v%d = %s;", cg_cuda_type(elem), in->result, text);
    return;
  }
  open_slots(e, in->result, true);
  slot_loop_header(e, in->result, header, sizeof header);
  emitf(e, "%s v%d[j] = %s;", header, in->result, text);
}

/* ---- memory ----------------------------------------------------------------- */

/* load(ptr, offsets, [mask], [other]): a masked-off or padding slot takes
 * other (converted to the pointee type) and never touches memory. */
static void emit_load(Emit *e, const IrInst *in) {
  char header[64], ptr[32], offset[32], mask[32], other[32], cond[160];
  int v = in->result;
  const char *elem = ir_elem_name((tj_elem)type_of(e, v).elem);
  ref(e, in->args[0], true, ptr, sizeof ptr);
  ref(e, in->args[1], true, offset, sizeof offset);
  if (in->nargs > 2) ref(e, in->args[2], true, mask, sizeof mask);
  if (in->nargs > 3)
    ref(e, in->args[3], true, other, sizeof other);
  else
    snprintf(other, sizeof other, "0");
  slot_condition(e, len_of(e, v), in->nargs > 2 ? mask : NULL, cond, sizeof cond);
  open_slots(e, v, true);
  slot_loop_header(e, v, header, sizeof header);
  if (cond[0])
    emitf(e, "%s v%d[j] = (%s) ? %s[%s] : tj_to_%s(%s);", header, v, cond, ptr, offset, elem,
          other);
  else
    emitf(e, "%s v%d[j] = %s[%s];", header, v, ptr, offset);
}

/* store(ptr, offsets, value, [mask]), between group barriers where another
 * thread's access to the same address could otherwise overtake it
 * (cuda_order.c). */
static void emit_store(Emit *e, int i) {
  const IrInst *in = &e->p->insts[i];
  char header[64], ptr[32], offset[32], value[32], mask[32], cond[160];
  ref(e, in->args[0], true, ptr, sizeof ptr);
  ref(e, in->args[1], true, offset, sizeof offset);
  ref(e, in->args[2], true, value, sizeof value);
  if (in->nargs > 3) ref(e, in->args[3], true, mask, sizeof mask);
  slot_condition(e, len_of(e, in->args[1]), in->nargs > 3 ? mask : NULL, cond, sizeof cond);
  if (cg_cuda_sync_before_store(e->p, i)) emitf(e, "tj_group_sync<%d>(tj_mask);", e->group);
  open_slots(e, in->args[1], false);
  slot_loop_header(e, in->args[1], header, sizeof header);
  if (cond[0])
    emitf(e, "%s if (%s) %s[%s] = %s;", header, cond, ptr, offset, value);
  else
    emitf(e, "%s %s[%s] = %s;", header, ptr, offset, value);
  if (cg_cuda_sync_after_store(e->p, i)) emitf(e, "tj_group_sync<%d>(tj_mask);", e->group);
}

/* ---- loops ---------------------------------------------------------------------- */

/* for a, b, c with its iters: the counter runs in 64 bits so that an i32
 * loop ends even where a + c would wrap; c <= 0 runs no iteration. Iters are
 * declared outside the loop, where they keep their last value. */
static void emit_for(Emit *e, int i) {
  const IrInst *in = &e->p->insts[i];
  char type[32], a[32], b[32], c[32], init[32];
  int v = in->result;
  c_type(e, v, type, sizeof type);
  ref(e, in->args[0], false, a, sizeof a);
  ref(e, in->args[1], false, b, sizeof b);
  ref(e, in->args[2], false, c, sizeof c);
  emitf(e, "%sv%d = %s;", type, v, a);
  for (int k = i + 1; k < e->p->ninsts && e->p->insts[k].op == TJ_OP_ITER; k++) {
    const IrInst *it = &e->p->insts[k];
    char iter_type[32];
    c_type(e, it->result, iter_type, sizeof iter_type);
    ref(e, it->args[0], false, init, sizeof init);
    emitf(e, "%sv%d = %s;", iter_type, it->result, init);
  }
  emitf(e, "for (long long t%d = %s; %s > 0 && t%d < %s; t%d += %s) {", v, a, c, v, b, v, c);
  e->depth++;
  emitf(e, "v%d = (%s)t%d;", v, cg_cuda_type((tj_elem)type_of(e, v).elem), v);
}

/* endfor: the yields right before it, through temporaries so that each
 * yielded value is the one of the iteration that ends. */
static void emit_endfor(Emit *e, int i) {
  int first = i;
  while (first > 0 && e->p->insts[first - 1].op == TJ_OP_YIELD) first--;
  for (int k = first; k < i; k++) {
    const IrInst *y = &e->p->insts[k];
    char type[32], value[32];
    c_type(e, y->args[0], type, sizeof type);
    ref(e, y->args[1], false, value, sizeof value);
    emitf(e, "%sn%d = %s;", type, y->args[0], value);
  }
  for (int k = first; k < i; k++)
    emitf(e, "v%d = n%d;", e->p->insts[k].args[0], e->p->insts[k].args[0]);
  e->depth--;
  emitf(e, "}");
}

/* ---- the kernel --------------------------------------------------------------- */

static void annotate(Emit *e, int i) {
  TjBuf text;
  char safe[256];
  buf_init(&text);
  ir_print_inst(e->p, i, &text);
  comment_text(text.data, safe, sizeof safe);
  emitf(e, "// %s", safe);
  buf_free(&text);
}

static void emit_inst(Emit *e, int i) {
  const IrInst *in = &e->p->insts[i];
  if (e->annotate) annotate(e, i);
  switch ((tj_op)in->op) {
  case TJ_OP_PARAM: emit_param(e, in); return;
  case TJ_OP_CONST:
  case TJ_OP_CONSTEXPR: emit_const(e, in); return;
  case TJ_OP_LOAD: emit_load(e, in); return;
  case TJ_OP_STORE: emit_store(e, i); return;
  case TJ_OP_FOR: emit_for(e, i); return;
  case TJ_OP_ITER: return;  /* declared by its for */
  case TJ_OP_YIELD: return; /* assigned at its endfor */
  case TJ_OP_ENDFOR: emit_endfor(e, i); return;
  default: emit_pattern(e, in, cg_cuda_pattern((tj_op)in->op)); return;
  }
}

/* "tj_" and the program's name, reduced to identifier characters. */
static void entry_name(const tj_program *p, char *out, size_t size) {
  snprintf(out, size, "tj_%s", p->name ? p->name : "kernel");
  for (char *c = out + 3; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')))
      *c = '_';
}

static void emit_signature(Emit *e, const char *entry) {
  const tj_program *p = e->p;
  emitf(e, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", e->threads, entry);
  e->depth += 2;
  for (int i = 0; i < p->ninsts; i++) {
    const IrInst *in = &p->insts[i];
    if (in->op != TJ_OP_PARAM) continue;
    char type[32], name[40];
    c_type(e, in->result, type, sizeof type);
    comment_text(p->params[in->iimm], name, sizeof name);
    emitf(e, "%sarg%lld, /* %s */", type, (long long)in->iimm, name);
  }
  emitf(e, "unsigned long long tj_programs) {");
  e->depth -= 2;
}

static void emit_kernel(Emit *e, const char *entry) {
  emit_signature(e, entry);
  e->depth = 1;
  emitf(e, "const int tj_rank = (int)(threadIdx.x %% %du);", e->group);
  emitf(e, "const unsigned tj_mask = tj_group_mask<%d>();", e->group);
  if (e->scratch)
    emitf(e, "__shared__ unsigned tj_scratch[%d];", e->threads / 32);
  else
    emitf(e, "unsigned *const tj_scratch = nullptr;");
  emitf(e, "(void)tj_rank, (void)tj_mask, (void)tj_scratch;");
  emitf(e,
        "for (unsigned long long tj_inst = (unsigned long long)blockIdx.x * %d + threadIdx.x / %d;",
        e->programs, e->group);
  emitf(e, "     tj_inst < tj_programs; tj_inst += (unsigned long long)gridDim.x * %d) {",
        e->programs);
  e->depth = 2;
  for (int i = 0; i < e->p->ninsts; i++) emit_inst(e, i);
  e->depth = 1;
  emitf(e, "}");
  e->depth = 0;
  emitf(e, "}");
}

/* ---- layout and entry point ---------------------------------------------------- */

static tj_status choose_layout(Emit *e, tj_spec *s) {
  int64_t widest = 1;
  bool reduces = false;
  for (int v = 0; v < e->p->nvalues; v++)
    if (is_tile(e, v) && len_of(e, v) > widest) widest = len_of(e, v);
  for (int i = 0; i < e->p->ninsts; i++)
    reduces |= e->p->insts[i].op == TJ_OP_REDUCE_MAX || e->p->insts[i].op == TJ_OP_REDUCE_SUM;
  e->threads = 32 * s->num_warps;
  e->group = cg_group_size(e->threads, widest * cg_tiles_loaded(e->p, widest), widest, true, 1,
                           cg_lane_reps_max(1, false, 1));
  e->programs = e->threads / e->group;
  e->scratch = reduces && e->group > 32;
  if (slots_of(e, widest) > CG_CUDA_MAX_SLOTS) {
    tj_set_error(s->error,
                 "cuda: a tile of %lld elements needs %lld slots per thread over %d threads "
                 "(at most %d); use more warps or a chunked program",
                 (long long)widest, (long long)slots_of(e, widest), e->group, CG_CUDA_MAX_SLOTS);
    return TJ_ERR_UNSUPPORTED;
  }
  return TJ_OK;
}

static void emit_header(Emit *e, const tj_spec *s) {
  char name[128], key[TJ_ERROR_MAX];
  comment_text(e->p->name, name, sizeof name);
  comment_text(s->key, key, sizeof key);
  emitf(e, "// Generated by tilejit %s (NVRTC backend) from program %s.", TJ_VERSION_STRING, name);
  emitf(e, "// Key: %s", key);
  emitf(e, "// Layout: %d threads per CTA; a program instance runs on %d of them (%d per CTA at a",
        e->threads, e->group, e->programs);
  emitf(e, "// time, CTAs striding over the rest). A tile of L elements is ceil(L/%d) slots per",
        e->group);
  emitf(e, "// thread: slot j of rank r holds element j*%d + r.", e->group);
  buf_puts(e->out, tj_template_cuda_prelude);
}

static void fill_info(const Emit *e, int arch, const char *entry, tj_kernel_info *info) {
  memset(info, 0, sizeof *info);
  snprintf(info->entry, sizeof info->entry, "%s", entry);
  info->shape.threads = e->threads;
  info->shape.programs_per_cta = e->programs;
  info->shape.cluster = 1;
  info->shape.ctas_per_program = 1;
  info->shape.shared_bytes = e->scratch ? 4 * (e->threads / 32) : 0;
  info->arch = arch;
  info->ptx_version = 0; /* NVRTC chooses it; tj_nvrtc_ptx reads it back */
  info->param_count = e->p->nparams;
}

tj_status cg_cuda_emit(tj_spec *s, const tj_codegen_options *options, TjBuf *out,
                       tj_kernel_info *info) {
  Emit e;
  memset(&e, 0, sizeof e);
  e.p = s->prog;
  e.out = out;
  e.annotate = options && options->annotate;
  int arch = options && options->arch ? options->arch : 90;
  if (!e.p || !e.p->specialized) {
    tj_set_error(s->error, "cuda: the spec holds no specialized program");
    return TJ_ERR_INVALID_ARGUMENT;
  }
  if (s->cluster > 1 || s->split > 1) {
    tj_set_error(s->error,
                 "cuda: the NVRTC backend runs a program instance on one CTA; CLUSTER = %d and "
                 "SPLIT = %d need the PTX backend",
                 s->cluster, s->split);
    return TJ_ERR_UNSUPPORTED;
  }
  tj_status st = choose_layout(&e, s);
  if (st != TJ_OK) return st;
  char entry[sizeof info->entry - 8];
  entry_name(e.p, entry, sizeof entry);
  emit_header(&e, s);
  emit_kernel(&e, entry);
  fill_info(&e, arch, entry, info);
  return TJ_OK;
}

tj_status tj_emit_cuda(tj_spec *s, const tj_codegen_options *options, char **cuda,
                       tj_kernel_info *info) {
  if (!s) return TJ_ERR_INVALID_ARGUMENT;
  if (!cuda || (options && options->arch < 0)) {
    tj_set_error(s->error, "emit_cuda: NULL output or negative arch");
    return TJ_ERR_INVALID_ARGUMENT;
  }
  *cuda = NULL;
  tj_kernel_info scratch_info;
  TjBuf out;
  buf_init(&out);
  tj_status st = cg_cuda_emit(s, options, &out, info ? info : &scratch_info);
  if (st != TJ_OK) {
    buf_free(&out);
    return st;
  }
  if (!(*cuda = buf_take(&out))) {
    tj_set_error(s->error, "out of memory");
    return TJ_ERR_OUT_OF_MEMORY;
  }
  return TJ_OK;
}
