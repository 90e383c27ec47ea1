/*
 * specialize.c — binding a program's compile-time constants. tj_specialize
 * verifies the program, binds BLOCK, NUM_WARPS, ALIGN, CLUSTER, SPLIT, DTYPE
 * and the program's own constants on a copy, turns constexpr into const, replaces
 * DTYPE by the storage type, and verifies the copy again.
 *
 * The result carries a key: one printable line holding tilejit's version, a
 * hash of the program's canonical text and every bound value, e.g.
 *   tilejit 0.1.0|softmax#1f2e3d4c5b6a7988|DTYPE=f32|BLOCK=1024|NUM_WARPS=4|
 *   ALIGN=16|CLUSTER=1|SPLIT=1
 * on one line (|PHASE=1 follows for a phased specialization, |STAGE=k for
 * a staged one, |DIV=k where i32 parameters are multiples of k) and the
 * key's 64-bit FNV-1a hash. The runtime adds arch, ISA, backend and
 * context to it to form its cache key.
 */
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t tj_next_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n && p < ((int64_t)1 << 62)) p <<= 1;
  return p;
}

int64_t ir_const_value(const tj_program *p, int index) { return p->consts[index].value; }

int64_t ir_tile_len(const tj_program *p, tj_type t) {
  return t.len >= 0 && t.len < p->nconsts ? p->consts[t.len].value : 0;
}

static bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

/* NUM_WARPS: the caller's, or the table's for BLOCK. */
static int warps_for(const tj_spec_options *o, int64_t block) {
  return o->num_warps ? o->num_warps : tj_default_num_warps(block, o->dtype);
}

static tj_status check_options(tj_program *p, const tj_spec_options *o) {
  if ((unsigned)o->dtype >= TJ_DTYPE_COUNT)
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "specialize: unknown dtype %d", (int)o->dtype);
  if (o->n < 0)
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "specialize: negative n (%lld)", (long long)o->n);
  if (o->block < 0 || o->block > IR_MAX_TILE)
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "specialize: BLOCK %lld is not in [1, 2^30]",
                   (long long)o->block);
  if (!o->block && o->n > IR_MAX_TILE)
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "specialize: n %lld needs a BLOCK over 2^30",
                   (long long)o->n);
  if (o->num_warps && (!is_pow2(o->num_warps) || o->num_warps > 32))
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT,
                   "specialize: num_warps %d is not 1, 2, 4, 8, 16 or 32", o->num_warps);
  if (o->cluster < 0 || o->cluster > 16)
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "specialize: cluster %d is not 0 to 16", o->cluster);
  if (o->split < 0 || o->split > 1024)
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "specialize: split %d is not 0 to 1024", o->split);
  /* A BLOCK that is no power of two: any for an instance inside one CTA
   * (its lanes' last repeat is partial), else a multiple of the threads of
   * an instance, so that every thread gets the same share (the softmax
   * plan's exact tiles, rt_softmax_fit_block). */
  int64_t threads = 32LL * warps_for(o, o->block) * (o->cluster > 0 ? o->cluster : 1) *
                    (o->split > 0 ? o->split : 1);
  bool one_cta = o->cluster <= 1 && o->split <= 1 && o->stage == 0;
  if (o->block && !is_pow2(o->block) && !one_cta && o->block % threads != 0)
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT,
                   "specialize: BLOCK %lld is neither a power of two nor a multiple of the %lld "
                   "threads of an instance over CTAs or staged (32 x NUM_WARPS x CLUSTER x SPLIT)",
                   (long long)o->block, (long long)threads);
  if (o->stage < 0 || o->stage > 128)
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "specialize: stage %d is not 0 to 128", o->stage);
  if (o->stash < 0 || (o->stash && !o->stage))
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT,
                   "specialize: stash %d is not 0, or bytes of a STAGE's stash (stage is 0)",
                   o->stash);
  if (o->align && (!is_pow2(o->align) || o->align > 16))
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "specialize: align %d is not 1, 2, 4, 8 or 16",
                   o->align);
  if (o->multiple && (!is_pow2(o->multiple) || o->multiple > 16))
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "specialize: multiple %d is not 1, 2, 4, 8 or 16",
                   o->multiple);
  if (o->binding_count < 0 || (o->binding_count > 0 && !o->bindings))
    return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "specialize: bad binding list");
  return TJ_OK;
}

static void bind(tj_program *s, int index, int64_t value) {
  s->consts[index].bound = true;
  s->consts[index].value = value;
}

static tj_status bind_all(tj_program *p, tj_program *s, const tj_spec_options *o, tj_spec *spec) {
  spec->block = o->block ? o->block : tj_next_pow2(o->n);
  spec->num_warps = warps_for(o, spec->block);
  spec->align = o->align ? o->align : ir_dtype_size(o->dtype);
  spec->cluster = o->cluster ? o->cluster : 1;
  spec->split = o->split ? o->split : 1;
  spec->dtype = o->dtype;
  spec->phased = o->phased != 0;
  spec->stage = o->stage;
  spec->stash = o->stash;
  spec->multiple = o->multiple ? o->multiple : 1;
  bind(s, TJ_CONST_BLOCK, spec->block);
  bind(s, TJ_CONST_NUM_WARPS, spec->num_warps);
  bind(s, TJ_CONST_ALIGN, spec->align);
  bind(s, TJ_CONST_CLUSTER, spec->cluster);
  bind(s, TJ_CONST_SPLIT, spec->split);
  for (int i = 0; i < o->binding_count; i++) {
    const char *name = o->bindings[i].name;
    int index = name ? ir_const_find(s, name, strlen(name)) : -1;
    if (index < 0)
      return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "specialize: unknown constant %s",
                     name ? name : "(NULL)");
    if (index < TJ_CONST_BUILTIN_COUNT)
      return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "specialize: %s is bound through the options",
                     name);
    bind(s, index, o->bindings[i].value);
  }
  for (int i = 0; i < s->nconsts; i++)
    if (!s->consts[i].bound)
      return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "specialize: constant %s is not bound",
                     s->consts[i].name);
  return TJ_OK;
}

/* constexpr becomes const; DTYPE becomes the storage type. */
static tj_status substitute(tj_program *p, tj_program *s) {
  tj_elem elem = ir_dtype_elem(s->dtype);
  for (int v = 0; v < s->nvalues; v++)
    if (s->types[v].elem == TJ_DTYPE) s->types[v].elem = (uint8_t)elem;
  for (int i = 0; i < s->ninsts; i++) {
    IrInst *in = &s->insts[i];
    if (in->op != TJ_OP_CONSTEXPR) continue;
    int64_t v = s->consts[in->iimm].value;
    if (v < INT32_MIN || v > INT32_MAX)
      return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "specialize: constant %s = %lld does not fit i32",
                     s->consts[in->iimm].name, (long long)v);
    in->op = TJ_OP_CONST;
    in->fimm = (double)v;
    in->iimm = 0;
  }
  return TJ_OK;
}

/* The key, or NULL when out of memory: a hash of part of the text would
 * give two programs one key. */
static char *make_key(const tj_program *p, tj_program *s, const tj_spec *spec) {
  TjBuf text, key;
  buf_init(&text);
  buf_init(&key);
  ir_print(p, &text);
  if (text.oom || !text.data) {
    buf_free(&text);
    return NULL;
  }
  uint64_t h = tj_fnv1a(text.data, text.len, TJ_FNV_SEED);
  buf_free(&text);
  buf_printf(&key, "tilejit %s|%s#%016llx|DTYPE=%s", TJ_VERSION_STRING, p->name,
             (unsigned long long)h, ir_dtype_name(s->dtype));
  for (int i = 0; i < s->nconsts; i++)
    buf_printf(&key, "|%s=%lld", s->consts[i].name, (long long)s->consts[i].value);
  if (spec->phased) buf_printf(&key, "|PHASE=1");
  if (spec->stage) buf_printf(&key, "|STAGE=%d", spec->stage);
  if (spec->stash) buf_printf(&key, "|STASH=%d", spec->stash);
  if (spec->multiple > 1) buf_printf(&key, "|DIV=%d", spec->multiple);
  return buf_take(&key); /* NULL if any of it was dropped */
}

static tj_status build(tj_program *p, const tj_spec_options *o, tj_spec *spec) {
  tj_status st = check_options(p, o);
  if (st != TJ_OK) return st;
  if ((st = ir_verify(p)) != TJ_OK) return st;
  if (!(spec->prog = ir_program_copy(p))) return ir_fail(p, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  tj_program *s = spec->prog;
  if ((st = bind_all(p, s, o, spec)) != TJ_OK) return st;
  s->dtype = o->dtype;
  s->specialized = true;
  if ((st = substitute(p, s)) != TJ_OK) return st;
  if ((st = ir_verify(s)) != TJ_OK) return ir_fail(p, st, "after specialization: %s", s->error);
  if (!(spec->key = make_key(p, s, spec)))
    return ir_fail(p, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  spec->hash = tj_fnv1a(spec->key, strlen(spec->key), TJ_FNV_SEED);
  return TJ_OK;
}

tj_status tj_specialize(tj_program *p, const tj_spec_options *options, tj_spec **out) {
  if (!p) return TJ_ERR_INVALID_ARGUMENT;
  if (!options || !out) return ir_fail(p, TJ_ERR_INVALID_ARGUMENT, "specialize: NULL argument");
  *out = NULL;
  tj_spec *spec = tj_alloc(sizeof *spec);
  if (!spec) return ir_fail(p, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  tj_status st = build(p, options, spec);
  if (st != TJ_OK) {
    tj_spec_destroy(spec);
    return st;
  }
  *out = spec;
  return TJ_OK;
}

void tj_spec_destroy(tj_spec *s) {
  if (!s) return;
  ir_program_free(s->prog);
  free(s->key);
  free(s);
}

const char *tj_spec_error(const tj_spec *s) { return s ? s->error : "no spec (NULL)"; }
const char *tj_spec_key(const tj_spec *s) { return s ? s->key : ""; }
uint64_t tj_spec_hash(const tj_spec *s) { return s ? s->hash : 0; }

tj_status tj_spec_print(tj_spec *s, char **text) {
  if (!s || !text) return TJ_ERR_INVALID_ARGUMENT;
  TjBuf b;
  buf_init(&b);
  ir_print(s->prog, &b);
  *text = buf_take(&b);
  return *text ? TJ_OK : TJ_ERR_OUT_OF_MEMORY;
}

tj_status tj_spec_const(const tj_spec *s, const char *name, int64_t *value) {
  if (!s || !name || !value) return TJ_ERR_INVALID_ARGUMENT;
  int index = ir_const_find(s->prog, name, strlen(name));
  if (index < 0) return TJ_ERR_INVALID_ARGUMENT;
  *value = s->prog->consts[index].value;
  return TJ_OK;
}
