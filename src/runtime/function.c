/*
 * function.c — JIT functions (tilejit.h): a program specialized on each
 * launch's actual arguments.
 *
 * What a launch selects is what changes the code: ALIGN, from the pointers
 * and the i64 parameters that reach an address (assume.c finds them, as it
 * does for tj_launch's checks), BLOCK, from the size parameter, and whether
 * rows that start off 16 bytes at a shared phase are phased. tj_softmax
 * (softmax_launch.c) launches through these functions too, choosing the
 * variant itself from its plan (RtVariantKey: warps, cluster, split, stage
 * and stash as well). The variants compiled so far sit in a table behind a
 * mutex held only to look up and add, each holding a reference to its
 * kernel's cache entry (growing for a user's function, its kernels freed
 * with it; at most RT_ROW_VARIANTS for each of tj_softmax's, the least
 * recently used out first, so that the cache can evict the rest). A miss
 * specializes the program under a second mutex (one specialization of the
 * shared program at a time) and compiles it through the kernel cache,
 * which compiles each variant once however many threads ask, while
 * launches and compiles of other variants go on. Creation tries one
 * specialization, so bad options and constants fail there, not at every
 * launch. The arguments meet the variant's assumptions by construction, so
 * the launch packs them without tj_launch's checks (rt_launch_args).
 */
#include "runtime/runtime.h"

#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------- creation */

static int param_index(const tj_program *p, const char *name) {
  for (int i = 0; i < p->nparams; i++)
    if (!strcmp(p->params[i], name)) return i;
  return -1;
}

static tj_type param_type(const tj_program *p, int index) {
  for (int i = 0; i < p->ninsts; i++)
    if (p->insts[i].op == TJ_OP_PARAM && p->insts[i].iimm == index)
      return p->types[p->insts[i].result];
  return (tj_type){0};
}

static void destroy(tj_function *f) {
  if (!f) return;
  for (int i = 0; f->names && i < f->options.binding_count; i++) tj_free(f->names[i]);
  tj_free(f->names);
  tj_free(f->bindings);
  tj_free(f->size_name);
  if (f->prog) ir_program_free(f->prog);
  for (int i = 0; i < f->nvariants; i++) rt_entry_release(f->variants[i].entry);
  tj_free(f->variants);
  pthread_mutex_destroy(&f->lock);
  pthread_mutex_destroy(&f->compile_lock);
  tj_free(f);
}

/* Copies of the options' strings, so that the caller's may go. */
static bool copy_options(tj_function *f, const tj_function_options *o) {
  f->options = *o;
  f->options.bindings = NULL;
  f->options.size_param = NULL;
  f->options.binding_count = 0;
  if (o->size_param && !(f->size_name = tj_strdup(o->size_param))) return false;
  f->options.size_param = f->size_name;
  if (o->binding_count <= 0) return true;
  if (!(f->bindings = tj_alloc(sizeof *f->bindings * (size_t)o->binding_count)) ||
      !(f->names = tj_alloc(sizeof *f->names * (size_t)o->binding_count)))
    return false;
  for (int i = 0; i < o->binding_count; i++) {
    f->options.binding_count = i + 1;
    if (!o->bindings[i].name || !(f->names[i] = tj_strdup(o->bindings[i].name))) return false;
    f->bindings[i] = (tj_binding){f->names[i], o->bindings[i].value};
  }
  f->options.bindings = f->bindings;
  return true;
}

static tj_status bad(char *why, size_t size, tj_status st, const char *text) {
  snprintf(why, size, "%s", text);
  return st;
}

tj_spec_options rt_variant_options(const tj_function *f, const RtVariantKey *k) {
  return (tj_spec_options){.n = k->block,
                           .block = k->block,
                           .num_warps = k->num_warps,
                           .dtype = f->options.dtype,
                           .align = k->align,
                           .phased = k->phased,
                           .multiple = k->multiple,
                           .cluster = k->cluster,
                           .split = k->split,
                           .stage = k->stage,
                           .stash = k->stash,
                           .bindings = f->options.bindings,
                           .binding_count = f->options.binding_count};
}

tj_status rt_function_new(tj_context *ctx, const tj_program *p, const tj_function_options *o,
                          tj_function **out, char *why, size_t size) {
  *out = NULL;
  if (!p || !o) return bad(why, size, TJ_ERR_INVALID_ARGUMENT, "program or options NULL");
  if ((unsigned)o->dtype >= TJ_DTYPE_COUNT || (unsigned)o->backend >= TJ_BACKEND_COUNT ||
      o->num_warps < 0 || o->block < 0 || o->binding_count < 0 ||
      (o->binding_count > 0 && !o->bindings))
    return bad(why, size, TJ_ERR_INVALID_ARGUMENT,
               "options: unknown dtype or backend, negative warps, block or bindings");
  if (!o->block && !o->size_param)
    return bad(why, size, TJ_ERR_INVALID_ARGUMENT, "options: give block or size_param");
  for (int i = 0; i < o->binding_count; i++)
    if (!o->bindings[i].name)
      return bad(why, size, TJ_ERR_INVALID_ARGUMENT, "options: a binding without a name");
  if (p->nparams > RT_MAX_PARAMS)
    return bad(why, size, TJ_ERR_UNSUPPORTED, "the program has more than 64 parameters");
  tj_function *f = tj_alloc(sizeof *f);
  if (!f) return bad(why, size, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  pthread_mutex_init(&f->lock, NULL);
  pthread_mutex_init(&f->compile_lock, NULL);
  f->ctx = ctx;
  f->api = "tj_function_launch";
  f->size_param = -1;
  if (!(f->prog = ir_program_copy(p)) || !copy_options(f, o)) {
    destroy(f);
    return bad(why, size, TJ_ERR_OUT_OF_MEMORY, "out of memory");
  }
  if (!o->block) {
    f->size_param = param_index(f->prog, o->size_param);
    tj_type t = f->size_param >= 0 ? param_type(f->prog, f->size_param) : (tj_type){0};
    f->size_i32 = t.elem == TJ_I32;
    if (f->size_param < 0 || t.shape != TJ_SCALAR || (t.elem != TJ_I32 && t.elem != TJ_I64)) {
      snprintf(why, size, "options: size_param '%.40s' is no i32 or i64 parameter of %s",
               o->size_param, f->prog->name);
      destroy(f);
      return TJ_ERR_INVALID_ARGUMENT;
    }
  }
  RtVariantKey first = {.align = 16, .block = o->block ? o->block : 1, .num_warps = o->num_warps};
  tj_spec_options probe = rt_variant_options(f, &first);
  tj_spec *s = NULL;
  tj_status st = tj_specialize(f->prog, &probe, &s); /* the options' mistakes, now */
  tj_spec_destroy(s);
  if (st != TJ_OK) {
    snprintf(why, size, "%s", tj_program_error(f->prog));
    destroy(f);
    return st;
  }
  rt_assume_of(f->prog, o->dtype, 16, 1, &f->assume);
  *out = f;
  return TJ_OK;
}

tj_status tj_function_create(tj_context *ctx, const tj_program *p,
                             const tj_function_options *options, tj_function **out) {
  if (out) *out = NULL;
  if (!ctx) return rt_fail_no_handle("tj_function_create", "context");
  if (!out) return rt_fail(ctx, TJ_ERR_INVALID_ARGUMENT, "tj_function_create: out is NULL");
  char why[256];
  tj_status st = rt_function_new(ctx, p, options, out, why, sizeof why);
  return st == TJ_OK ? TJ_OK : rt_fail(ctx, st, "tj_function_create: %s", why);
}

void tj_function_destroy(tj_function *f) { destroy(f); }

int tj_function_variants(tj_function *f) {
  if (!f) return 0;
  pthread_mutex_lock(&f->lock);
  int n = f->nvariants;
  pthread_mutex_unlock(&f->lock);
  return n;
}

/* --------------------------------------------------------- selection */

static int low_bit(uint64_t v) { return (int)((v | 16u) & (~(v | 16u) + 1)); }

/* A pointer's or an integer's 64 bits (tj_launch reads a stride given as
 * either). */
static uint64_t arg_bits(const tj_arg *a) {
  return a->kind == TJ_ARG_PTR ? (uint64_t)(uintptr_t)a->u.ptr : (uint64_t)a->u.i;
}

tj_status rt_function_select(const tj_function *f, const tj_arg *args, int count, int *align,
                             int64_t *block, char *why, size_t size) {
  const tj_program *p = f->prog;
  if (count != p->nparams || (count > 0 && !args)) {
    snprintf(why, size, "%s takes %d arguments, got %d", p->name, p->nparams, count);
    return TJ_ERR_INVALID_ARGUMENT;
  }
  *align = 16;
  const RtAssume *a = &f->assume; /* at ALIGN 16: mask[i] set for what ALIGN constrains */
  for (int i = 0; i < count; i++) {
    int pointee = a->pointee[i];
    uint64_t v = arg_bits(&args[i]);
    if (pointee && args[i].kind == TJ_ARG_FLOAT) {
      snprintf(why, size, "argument %d (%s) is a pointer, not a float", i, p->params[i]);
      return TJ_ERR_INVALID_ARGUMENT;
    }
    if (pointee && v % (uint64_t)pointee) {
      snprintf(why, size, "argument %d (%s) = %#llx is not aligned to its %d-byte elements", i,
               p->params[i], (unsigned long long)v, pointee);
      return TJ_ERR_INVALID_ARGUMENT;
    }
    int bits = pointee ? low_bit(v) : low_bit(v * (uint64_t)a->widest); /* bytes for strides */
    if (a->mask[i] && args[i].kind != TJ_ARG_FLOAT && bits < *align) *align = bits;
  }
  *block = f->options.block;
  if (f->size_param < 0) return TJ_OK;
  const tj_arg *s = &args[f->size_param];
  if (s->kind != TJ_ARG_INT) {
    snprintf(why, size, "argument %d (%s) gives BLOCK: an integer", f->size_param,
             p->params[f->size_param]);
    return TJ_ERR_INVALID_ARGUMENT;
  }
  if (s->u.i < 0 || (f->size_i32 && s->u.i > INT32_MAX)) {
    snprintf(why, size, "argument %d (%s) = %lld is no size: it gives BLOCK", f->size_param,
             p->params[f->size_param], (long long)s->u.i);
    return TJ_ERR_INVALID_ARGUMENT;
  }
  if (s->u.i > IR_MAX_TILE) {
    snprintf(why, size, "argument %d (%s) = %lld needs a BLOCK over 2^30, the largest tile",
             f->size_param, p->params[f->size_param], (long long)s->u.i);
    return TJ_ERR_INVALID_ARGUMENT;
  }
  *block = tj_next_pow2(s->u.i);
  return TJ_OK;
}

/* Phased (codegen/phase.c): 16-byte vectors from each row's own boundary.
 * A phased kernel is right for any element-aligned arguments and fast when
 * an instance's accesses share a phase, so it is asked for where ALIGN is
 * under 16 but every pointer ALIGN constrains sits at the same byte of its
 * 16-byte line and every i64 that reaches an address (a stride, times the
 * widest pointee) moves them alike, on rows of BLOCK of at least
 * rt_phased_row_bytes, as tj_softmax does. */
bool rt_function_phased(const tj_function *f, const tj_arg *args, int align, int64_t block) {
  const RtAssume *a = &f->assume;
  if (align >= 16 || block * a->widest < rt_phased_row_bytes(a->widest)) return false;
  int64_t pointer = -1, stride = -1;
  for (int i = 0; i < f->prog->nparams; i++) {
    if (!a->mask[i] || args[i].kind == TJ_ARG_FLOAT) continue;
    uint64_t v = arg_bits(&args[i]);
    int64_t *first = a->pointee[i] ? &pointer : &stride;
    int64_t phase = (int64_t)((a->pointee[i] ? v : v * (uint64_t)a->widest) & 15u);
    if (*first < 0) *first = phase;
    if (*first != phase) return false;
  }
  return true;
}

int rt_function_multiple(const tj_function *f, const tj_arg *args, int count, int align,
                         bool phased) {
  return phased ? 1 : rt_assume_multiple(&f->assume, args, count, align);
}

/* ------------------------------------------------------------ launch */

static bool same(const RtVariantKey *a, const RtVariantKey *b) {
  return a->align == b->align && a->block == b->block && a->phased == b->phased &&
         a->multiple == b->multiple && a->num_warps == b->num_warps &&
         a->cluster == b->cluster && a->split == b->split && a->stage == b->stage &&
         a->stash == b->stash;
}

/* The entry of key with a new reference, or NULL (f->lock held); marks
 * it the most recently used. */
static RtEntry *find(tj_function *f, const RtVariantKey *key) {
  for (int i = 0; i < f->nvariants; i++)
    if (same(&f->variants[i].key, key)) {
      f->variants[i].used = ++f->clock;
      rt_entry_retain(f->variants[i].entry);
      return f->variants[i].entry;
    }
  return NULL;
}

/* The variant's entry, specialized (f->compile_lock held only for that:
 * one specialization of the shared program at a time) and compiled
 * through the kernel cache, which compiles a key once however many
 * threads ask; while its CTAs cannot be resident together
 * (TJ_ERR_UNSUPPORTED), shrink's next key. */
static tj_status compile(tj_function *f, RtVariantKey key, RtShrink shrink, const void *arg,
                         RtEntry **out) {
  tj_status st;
  do {
    tj_spec_options o = rt_variant_options(f, &key);
    tj_spec *s = NULL;
    pthread_mutex_lock(&f->compile_lock);
    if ((st = tj_specialize(f->prog, &o, &s)) != TJ_OK)
      st = rt_fail(f->ctx, st, "%s: %s (ALIGN %d%s, BLOCK %lld): %s", f->api, f->prog->name,
                   key.align, key.phased ? " phased" : "", (long long)key.block,
                   tj_program_error(f->prog));
    pthread_mutex_unlock(&f->compile_lock);
    if (st != TJ_OK) return st;
    st = rt_compile_entry(f->ctx, s, f->options.backend, out);
    tj_spec_destroy(s);
  } while (st == TJ_ERR_UNSUPPORTED && shrink && shrink(&key, arg));
  return st;
}

/* Keeps a variant in the table (f->lock held), with a reference of its
 * own: growing the table, or, at f->most variants, in place of the least
 * recently used (whose kernel the cache may then evict). A full memory
 * only means the next launch of it looks in the kernel cache again. */
static void keep(tj_function *f, const RtVariantKey *key, RtEntry *e) {
  RtEntry *old = find(f, key);
  if (old) {
    rt_entry_release(old);
    return;
  }
  rt_entry_retain(e);
  if (f->most && f->nvariants == f->most) {
    RtVariant *v = &f->variants[0];
    for (int i = 1; i < f->nvariants; i++)
      if (f->variants[i].used < v->used) v = &f->variants[i];
    rt_entry_release(v->entry);
    *v = (RtVariant){*key, e, ++f->clock};
    return;
  }
  if (f->nvariants == f->capacity) {
    int capacity = f->capacity ? 2 * f->capacity : 8;
    RtVariant *v = tj_realloc(f->variants, sizeof *v * (size_t)capacity);
    if (!v) {
      rt_entry_release(e);
      return;
    }
    f->variants = v;
    f->capacity = capacity;
  }
  f->variants[f->nvariants++] = (RtVariant){*key, e, ++f->clock};
}

tj_status rt_function_entry(tj_function *f, const RtVariantKey *key, RtShrink shrink,
                            const void *arg, RtEntry **out) {
  pthread_mutex_lock(&f->lock);
  *out = find(f, key);
  pthread_mutex_unlock(&f->lock);
  if (*out) {
    if (f->ctx) rt_cache_count_hit(f->ctx->cache);
    return TJ_OK;
  }
  /* compiles never hold f->lock: launches of other variants go on */
  tj_status st = compile(f, *key, shrink, arg, out);
  if (st != TJ_OK) return st;
  pthread_mutex_lock(&f->lock);
  keep(f, key, *out);
  pthread_mutex_unlock(&f->lock);
  return TJ_OK;
}

tj_status tj_function_launch(tj_function *f, const tj_arg *args, int count, int64_t grid,
                             void *stream) {
  if (!f) return rt_fail_no_handle("tj_function_launch", "function");
  char why[256];
  RtVariantKey key = {.num_warps = f->options.num_warps};
  tj_status st = rt_function_select(f, args, count, &key.align, &key.block, why, sizeof why);
  if (st != TJ_OK) return rt_fail(f->ctx, st, "tj_function_launch: %s", why);
  key.phased = rt_function_phased(f, args, key.align, key.block);
  key.multiple = rt_function_multiple(f, args, count, key.align, key.phased);
  RtEntry *e;
  if ((st = rt_function_entry(f, &key, NULL, NULL, &e)) != TJ_OK) return st;
  st = rt_launch_args(f->ctx, rt_entry_value(e), args, count, grid, stream);
  rt_entry_release(e);
  return st;
}
