/*
 * support_ptxsim.c — the PTX simulator of support_ptxsim.h.
 *
 * Parsing turns each instruction line into an Ins: an opcode, its dotted
 * modifiers and types, a guard predicate and decoded operands (registers by
 * class and number, immediates as bits, addresses as base + offset, vectors
 * of registers). Labels become instruction indices.
 *
 * Execution: per CTA, every thread runs on its own until it reaches
 * shfl.sync, bar.sync or ret. When no thread can move, the scheduler
 * completes the synchronization every waiter agrees on (a warp's 32 lanes at
 * one shfl; all live threads at one bar) or reports the divergence a GPU
 * would hang or misbehave on. Global addresses are host addresses: the
 * kernel's pointer parameters are the tj_arg buffers, and every access is
 * checked against them.
 */
#include "support_ptxsim.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { C_PRED, C_H, C_R, C_RD, C_F, C_COUNT };
enum { K_NONE, K_REG, K_IMM, K_SPECIAL, K_SMEM, K_VEC, K_ADDR };
enum { SP_TID, SP_CTAID, SP_NCTAID };
enum { BASE_REG, BASE_PARAM, BASE_SMEM };

typedef enum Op {
  OP_MOV,
  OP_ADD,
  OP_SUB,
  OP_MUL,
  OP_DIV,
  OP_RCP,
  OP_MAX,
  OP_MIN,
  OP_NEG,
  OP_AND,
  OP_OR,
  OP_XOR,
  OP_SHL,
  OP_SHR,
  OP_BFE,
  OP_CVT,
  OP_CVTA,
  OP_SELP,
  OP_FMA,
  OP_SETP,
  OP_EX2,
  OP_LG2,
  OP_LD,
  OP_ST,
  OP_SHFL,
  OP_BAR,
  OP_BRA,
  OP_RET,
} Op;

typedef struct Opnd {
  uint8_t kind, cls, neg, n;
  uint32_t idx;
  uint64_t imm;
  int64_t off;
  uint8_t base; /* addresses: BASE_* */
  uint32_t vidx[4];
} Opnd;

typedef struct Ins {
  int line;
  Op op;
  char mods[6][12]; /* the dotted parts after the opcode */
  int nmods;
  int guard; /* predicate register, or -1 */
  int guard_neg;
  Opnd o[5];
  int nops;
  int target; /* branches */
  char label[48];
} Ins;

typedef struct Param {
  char name[64];
  char type[8];
} Param;

typedef struct Kernel {
  Ins *ins;
  int count, cap;
  Param params[32];
  int nparams;
  int threads, smem;
  uint32_t regs[C_COUNT];
  char labels[256][48];
  int label_at[256];
  int nlabels;
} Kernel;

typedef struct Thread {
  uint64_t *r[C_COUNT];
  uint8_t *set[C_COUNT];
  int pc, done, tid;
} Thread;

typedef struct Sim {
  Kernel *k;
  const tj_arg *args;
  int nargs;
  int64_t programs;
  int cta, ctas;
  uint8_t *smem;
  Thread *t;
  char *why;
  size_t why_size;
  bool failed;
  int64_t steps;
} Sim;

static bool fail(Sim *s, int line, const char *fmt, ...) {
  if (s->failed) return false;
  va_list ap;
  va_start(ap, fmt);
  int n = snprintf(s->why, s->why_size, "ptx line %d: ", line);
  if (n > 0 && (size_t)n < s->why_size) vsnprintf(s->why + n, s->why_size - (size_t)n, fmt, ap);
  va_end(ap);
  s->failed = true;
  return false;
}

/* ---- parsing -------------------------------------------------------------- */

static int class_of(const char *name, uint32_t *idx) {
  static const char *const prefixes[] = {"%rd", "%p", "%h", "%r", "%f"};
  static const int classes[] = {C_RD, C_PRED, C_H, C_R, C_F};
  for (int i = 0; i < 5; i++) {
    size_t len = strlen(prefixes[i]);
    if (strncmp(name, prefixes[i], len) == 0 && isdigit((unsigned char)name[len])) {
      *idx = (uint32_t)strtoul(name + len, NULL, 10);
      return classes[i];
    }
  }
  return -1;
}

static void trim(char *s) {
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
  size_t i = 0;
  while (isspace((unsigned char)s[i])) i++;
  memmove(s, s + i, strlen(s + i) + 1);
}

static bool parse_operand(Kernel *k, char *text, Opnd *o) {
  trim(text);
  memset(o, 0, sizeof *o);
  uint32_t idx;
  if (text[0] == '!') {
    o->neg = 1;
    text++;
  }
  if (text[0] == '{') {
    o->kind = K_VEC;
    for (char *tok = strtok(text + 1, ",}"); tok && o->n < 4; tok = strtok(NULL, ",}")) {
      trim(tok);
      int cls = class_of(tok, &idx);
      if (cls < 0) return false;
      o->cls = (uint8_t)cls;
      o->vidx[o->n++] = idx;
    }
    return o->n > 0;
  }
  if (text[0] == '[') {
    o->kind = K_ADDR;
    char *plus = strchr(text, '+'), *close = strchr(text, ']');
    if (!close) return false;
    *close = '\0';
    if (plus) {
      o->off = strtoll(plus + 1, NULL, 10);
      *plus = '\0';
    }
    char *base = text + 1;
    int cls = class_of(base, &idx);
    if (cls >= 0) {
      o->base = BASE_REG;
      o->cls = (uint8_t)cls;
      o->idx = idx;
      return true;
    }
    if (strcmp(base, "tj_smem") == 0) {
      o->base = BASE_SMEM;
      return true;
    }
    for (int i = 0; i < k->nparams; i++)
      if (strcmp(base, k->params[i].name) == 0) {
        o->base = BASE_PARAM;
        o->idx = (uint32_t)i;
        return true;
      }
    return false;
  }
  int cls = class_of(text, &idx);
  if (cls >= 0) {
    o->kind = K_REG;
    o->cls = (uint8_t)cls;
    o->idx = idx;
    return true;
  }
  static const char *const specials[] = {"%tid.x", "%ctaid.x", "%nctaid.x"};
  for (int i = 0; i < 3; i++)
    if (strcmp(text, specials[i]) == 0) {
      o->kind = K_SPECIAL;
      o->idx = (uint32_t)i;
      return true;
    }
  if (strcmp(text, "tj_smem") == 0) {
    o->kind = K_SMEM;
    return true;
  }
  o->kind = K_IMM;
  if (text[0] == '0' && (text[1] == 'f' || text[1] == 'd')) /* f32 and f64 bits */
    o->imm = strtoull(text + 2, NULL, 16);
  else if (text[0] == '0' && text[1] == 'x')
    o->imm = strtoull(text + 2, NULL, 16);
  else
    o->imm = (uint64_t)strtoll(text, NULL, 10);
  return isdigit((unsigned char)text[0]) || text[0] == '-';
}

/* Splits operands at commas outside braces. */
static int split_operands(char *text, char **out, int max) {
  int n = 0, depth = 0;
  char *start = text;
  for (char *p = text;; p++) {
    if (*p == '{') depth++;
    if (*p == '}') depth--;
    if ((*p == ',' && depth == 0) || *p == '\0') {
      bool end = *p == '\0';
      *p = '\0';
      if (n < max) out[n++] = start;
      if (end) break;
      start = p + 1;
    }
  }
  return n;
}

static const struct {
  const char *name;
  Op op;
} opcodes[] = {
    {"mov", OP_MOV}, {"add", OP_ADD},   {"sub", OP_SUB},   {"mul", OP_MUL}, {"div", OP_DIV},
    {"rcp", OP_RCP}, {"max", OP_MAX},   {"min", OP_MIN},   {"neg", OP_NEG}, {"and", OP_AND},
    {"or", OP_OR},   {"xor", OP_XOR},   {"shl", OP_SHL},   {"shr", OP_SHR}, {"bfe", OP_BFE},
    {"cvt", OP_CVT}, {"cvta", OP_CVTA}, {"selp", OP_SELP}, {"fma", OP_FMA}, {"setp", OP_SETP},
    {"ex2", OP_EX2}, {"lg2", OP_LG2},   {"ld", OP_LD},     {"st", OP_ST},   {"shfl", OP_SHFL},
    {"bar", OP_BAR}, {"bra", OP_BRA},   {"ret", OP_RET},
};

static bool parse_instruction(Kernel *k, char *text, int line) {
  if (k->count == k->cap) {
    k->cap = k->cap ? 2 * k->cap : 256;
    Ins *p = realloc(k->ins, sizeof *p * (size_t)k->cap);
    if (!p) return false;
    k->ins = p;
  }
  Ins *in = &k->ins[k->count];
  memset(in, 0, sizeof *in);
  in->line = line;
  in->guard = -1;
  if (text[0] == '@') {
    char *space = strchr(text, ' ');
    if (!space) return false;
    *space = '\0';
    in->guard_neg = text[1] == '!';
    uint32_t idx;
    if (class_of(text + 1 + in->guard_neg, &idx) != C_PRED) return false;
    in->guard = (int)idx;
    text = space + 1;
  }
  char *space = strchr(text, ' ');
  char *args = space ? space + 1 : text + strlen(text);
  if (space) *space = '\0';
  char *dot = strchr(text, '.');
  if (dot) *dot = '\0';
  size_t i = 0;
  while (i < sizeof opcodes / sizeof opcodes[0] && strcmp(opcodes[i].name, text) != 0) i++;
  if (i == sizeof opcodes / sizeof opcodes[0]) return false;
  in->op = opcodes[i].op;
  for (char *m = dot ? strtok(dot + 1, ".") : NULL; m && in->nmods < 6; m = strtok(NULL, "."))
    snprintf(in->mods[in->nmods++], sizeof in->mods[0], "%s", m);
  if (in->op == OP_BRA) {
    snprintf(in->label, sizeof in->label, "%s", args);
    trim(in->label);
    k->count++;
    return true;
  }
  char *ops[5];
  in->nops = *args ? split_operands(args, ops, 5) : 0;
  for (int j = 0; j < in->nops; j++)
    if (!parse_operand(k, ops[j], &in->o[j])) return false;
  k->count++;
  return true;
}

static bool parse_declaration(Kernel *k, const char *s) {
  char type[8], prefix[8];
  unsigned n;
  if (sscanf(s, ".reg .%7s %7[^<]<%u>;", type, prefix, &n) == 3) {
    uint32_t idx;
    char probe[16];
    snprintf(probe, sizeof probe, "%s0", prefix);
    int cls = class_of(probe, &idx);
    if (cls < 0) return false;
    k->regs[cls] = n;
    return true;
  }
  if (sscanf(s, ".shared .align 16 .b8 tj_smem[%d];", &k->smem) == 1) return true;
  if (sscanf(s, ".reqntid %d", &k->threads) == 1) return true;
  char name[64];
  if (sscanf(s, ".param .%7s %63[^,)]", type, name) == 2) {
    if (k->nparams == 32) return false;
    snprintf(k->params[k->nparams].type, sizeof k->params[0].type, "%s", type);
    snprintf(k->params[k->nparams].name, sizeof k->params[0].name, "%s", name);
    k->nparams++;
  }
  return true;
}

static const char *last_type(const Ins *in);

static bool parse_kernel(Kernel *k, const char *ptx, char *why, size_t size) {
  char *copy = malloc(strlen(ptx) + 1);
  if (!copy) return false;
  strcpy(copy, ptx);
  int line = 0;
  bool ok = true;
  for (char *s = copy, *next; s && ok; s = next) {
    next = strchr(s, '\n');
    if (next) *next++ = '\0';
    line++;
    char *c = strstr(s, "//");
    if (c) *c = '\0';
    trim(s);
    size_t len = strlen(s);
    if (!len || s[0] == '{' || s[0] == '}' || s[0] == ')') continue;
    if (s[len - 1] == ':' && k->nlabels < 256) {
      s[len - 1] = '\0';
      snprintf(k->labels[k->nlabels], sizeof k->labels[0], "%s", s);
      k->label_at[k->nlabels++] = k->count;
    } else if (s[0] == '.') {
      ok = parse_declaration(k, s);
    } else if (s[len - 1] == ';') {
      s[len - 1] = '\0';
      ok = parse_instruction(k, s, line);
    }
    if (!ok) snprintf(why, size, "ptx line %d: cannot parse '%s'", line, s);
  }
  free(copy);
  for (int i = 0; ok && i < k->count; i++) {
    const Ins *in = &k->ins[i];
    if ((in->op == OP_MAX || in->op == OP_MIN) && !strcmp(last_type(in), "s32"))
      ok = false, snprintf(why, size,
                           "ptx line %d: %s.s32, which ptxas for sm_90 miscompiles in trees of "
                           "negations (write i32 max/min on unsigned keys)",
                           in->line, in->op == OP_MAX ? "max" : "min");
  }
  for (int i = 0; ok && i < k->count; i++) {
    if (k->ins[i].op != OP_BRA) continue;
    k->ins[i].target = -1;
    for (int j = 0; j < k->nlabels; j++)
      if (strcmp(k->labels[j], k->ins[i].label) == 0) k->ins[i].target = k->label_at[j];
    if (k->ins[i].target < 0) ok = false, snprintf(why, size, "no label %s", k->ins[i].label);
  }
  return ok;
}

/* ---- values --------------------------------------------------------------- */

static float f32_of(uint64_t bits) {
  uint32_t u = (uint32_t)bits;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint64_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static double f64_of(uint64_t bits) {
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

static uint64_t bits_of64(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

static float ftz(float f) { return fpclassify(f) == FP_SUBNORMAL ? copysignf(0.0f, f) : f; }

static const char *last_type(const Ins *in) { return in->nmods ? in->mods[in->nmods - 1] : ""; }

static bool has_mod(const Ins *in, const char *m) {
  for (int i = 0; i < in->nmods; i++)
    if (!strcmp(in->mods[i], m)) return true;
  return false;
}

static uint64_t reg_get(Sim *s, Thread *t, int cls, uint32_t idx, int line) {
  if (idx >= s->k->regs[cls]) return fail(s, line, "register out of range"), 0;
  if (!t->set[cls][idx])
    return fail(s, line, "register read before written (class %d, %u)", cls, idx), 0;
  return t->r[cls][idx];
}

static void reg_set(Sim *s, Thread *t, int cls, uint32_t idx, uint64_t v, int line) {
  if (idx >= s->k->regs[cls]) {
    fail(s, line, "register out of range");
    return;
  }
  t->r[cls][idx] = v;
  t->set[cls][idx] = 1;
}

static uint64_t get(Sim *s, Thread *t, const Ins *in, int i) {
  const Opnd *o = &in->o[i];
  switch (o->kind) {
  case K_REG: {
    uint64_t v = reg_get(s, t, o->cls, o->idx, in->line);
    return o->neg ? !v : v;
  }
  case K_IMM: return o->imm;
  case K_SPECIAL:
    return o->idx == SP_TID     ? (uint64_t)t->tid
           : o->idx == SP_CTAID ? (uint64_t)s->cta
                                : (uint64_t)s->ctas;
  case K_SMEM: return 0;
  default: return fail(s, in->line, "bad operand %d", i), 0;
  }
}

static void put(Sim *s, Thread *t, const Ins *in, int i, uint64_t v) {
  const Opnd *o = &in->o[i];
  if (o->kind != K_REG) {
    fail(s, in->line, "destination is not a register");
    return;
  }
  uint64_t mask = o->cls == C_PRED ? 1
                  : o->cls == C_H  ? 0xFFFF
                  : o->cls == C_RD ? ~0ull
                                   : 0xFFFFFFFFull;
  reg_set(s, t, o->cls, o->idx, v & mask, in->line);
}

static int64_t sx(uint64_t v, const char *type) {
  if (!strcmp(type, "s32")) return (int32_t)(uint32_t)v;
  if (!strcmp(type, "u32") || !strcmp(type, "b32")) return (int64_t)(uint32_t)v;
  if (!strcmp(type, "u16") || !strcmp(type, "b16")) return (int64_t)(uint16_t)v;
  return (int64_t)v;
}

static bool is64(const char *type) { return type[1] == '6'; }

/* ---- arithmetic ----------------------------------------------------------- */

static uint64_t arith(Sim *s, const Ins *in, uint64_t a, uint64_t b) {
  const char *type = last_type(in);
  if (!strcmp(type, "f32")) {
    float x = f32_of(a), y = f32_of(b);
    switch (in->op) {
    case OP_ADD: return bits_of(x + y);
    case OP_SUB: return bits_of(x - y);
    case OP_MUL: return bits_of(x * y);
    case OP_DIV: return bits_of(x / y);
    case OP_MAX: return bits_of(fmaxf(x, y));
    case OP_MIN: return bits_of(fminf(x, y));
    default: break;
    }
  } else if (!strcmp(type, "pred")) {
    return in->op == OP_AND ? (a && b) : (a || b);
  } else {
    int64_t x = sx(a, type), y = sx(b, type);
    bool wide = has_mod(in, "wide");
    switch (in->op) {
    case OP_ADD: return (uint64_t)x + (uint64_t)y;
    case OP_SUB: return (uint64_t)x - (uint64_t)y;
    case OP_MUL: return wide ? (uint64_t)(x * y) : (uint64_t)x * (uint64_t)y;
    case OP_MAX: return (uint64_t)(x > y ? x : y);
    case OP_MIN: return (uint64_t)(x < y ? x : y);
    case OP_AND: return a & b;
    case OP_OR: return a | b;
    case OP_XOR: return a ^ b;
    case OP_SHL: return a << (b & 63);
    case OP_SHR:
      return !strcmp(type, "s32") ? (uint64_t)(x >> (b & 31)) : (uint64_t)(sx(a, type) >> (b & 63));
    default: break;
    }
  }
  return fail(s, in->line, "unsupported arithmetic"), 0;
}

static bool compare(const char *cmp, const char *type, uint64_t a, uint64_t b) {
  if (!strcmp(type, "f32")) {
    float x = f32_of(a), y = f32_of(b);
    bool nan = isnan(x) || isnan(y);
    if (!strcmp(cmp, "nan")) return nan;
    if (!strcmp(cmp, "neu")) return nan || x != y;
    if (nan) return false;
    return !strcmp(cmp, "lt")   ? x < y
           : !strcmp(cmp, "le") ? x <= y
           : !strcmp(cmp, "gt") ? x > y
           : !strcmp(cmp, "ge") ? x >= y
           : !strcmp(cmp, "eq") ? x == y
                                : x != y;
  }
  if (type[0] == 'u') {
    uint64_t x = (uint64_t)sx(a, type), y = (uint64_t)sx(b, type);
    return !strcmp(cmp, "lt")   ? x < y
           : !strcmp(cmp, "le") ? x <= y
           : !strcmp(cmp, "gt") ? x > y
           : !strcmp(cmp, "ge") ? x >= y
           : !strcmp(cmp, "eq") ? x == y
                                : x != y;
  }
  int64_t x = sx(a, type), y = sx(b, type);
  return !strcmp(cmp, "lt")   ? x < y
         : !strcmp(cmp, "le") ? x <= y
         : !strcmp(cmp, "gt") ? x > y
         : !strcmp(cmp, "ge") ? x >= y
         : !strcmp(cmp, "eq") ? x == y
                              : x != y;
}

static void setp(Sim *s, Thread *t, const Ins *in) {
  bool r = compare(in->mods[0], last_type(in), get(s, t, in, 1), get(s, t, in, 2));
  if (in->nmods == 3) {
    bool c = get(s, t, in, 3) != 0;
    r = !strcmp(in->mods[1], "and") ? r && c : r || c;
  }
  put(s, t, in, 0, r);
}

static int32_t round_to_i32(float f) {
  if (isnan(f)) return 0;
  float r = nearbyintf(f);
  return r >= 2147483647.0f ? INT32_MAX : r <= -2147483648.0f ? INT32_MIN : (int32_t)r;
}

static uint16_t f32_to_bf16_rne(float f) {
  uint32_t u = (uint32_t)bits_of(f);
  if (isnan(f)) return 0x7FFF;
  return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

static uint64_t convert(Sim *s, const Ins *in, uint64_t a) {
  const char *to = in->mods[in->nmods - 2], *from = in->mods[in->nmods - 1];
  float f = 0;
  bool from_float = true;
  if (!strcmp(to, "f64") && !strcmp(from, "f32")) return bits_of64((double)f32_of(a));
  if (!strcmp(to, "f32") && !strcmp(from, "f64")) return bits_of((float)f64_of(a));
  if (!strcmp(from, "f32"))
    f = f32_of(a);
  else if (!strcmp(from, "f16"))
    f = tj_f16_to_f32((uint16_t)a);
  else if (!strcmp(from, "bf16"))
    f = tj_bf16_to_f32((uint16_t)a);
  else
    from_float = false;
  int64_t i = from_float ? 0 : sx(a, from);
  if (!strcmp(to, "f32")) return bits_of(from_float ? f : (float)i);
  if (!strcmp(to, "f16")) return tj_f32_to_f16(from_float ? f : (float)i);
  if (!strcmp(to, "bf16")) return f32_to_bf16_rne(from_float ? f : (float)i);
  if (from_float && !strcmp(to, "s32")) return (uint32_t)round_to_i32(f);
  if (from_float && !strcmp(to, "s64"))
    return isnan(f) ? 0 : (uint64_t)(int64_t)nearbyint((double)f);
  if (from_float) return fail(s, in->line, "unsupported cvt"), 0;
  return (uint64_t)i; /* integer widening and narrowing; put() truncates */
}

static uint64_t unary(Sim *s, const Ins *in, uint64_t a) {
  const char *type = last_type(in);
  float x = f32_of(a);
  switch (in->op) {
  case OP_NEG:
    if (!strcmp(type, "f64")) return bits_of64(-f64_of(a));
    return strcmp(type, "f32") ? (uint64_t)(-(int64_t)sx(a, type)) : bits_of(-x);
  case OP_RCP: /* rcp.approx.ftz.f64: exact here, which the Newton steps after it keep */
    return !strcmp(type, "f64") ? bits_of64(1.0 / f64_of(a)) : bits_of(1.0f / x);
  case OP_EX2: return bits_of(ftz(exp2f(ftz(x))));
  case OP_LG2: return bits_of(ftz(log2f(ftz(x))));
  case OP_CVT: return convert(s, in, a);
  case OP_CVTA: return a;
  default: return fail(s, in->line, "unsupported unary op"), 0;
  }
}

/* ---- memory --------------------------------------------------------------- */

static int access_size(const Ins *in) {
  const char *type = last_type(in);
  return !strcmp(type, "b16") ? 2 : is64(type) ? 8 : 4;
}

static int vector_count(const Ins *in) {
  for (int i = 0; i < in->nmods; i++)
    if (in->mods[i][0] == 'v' && isdigit((unsigned char)in->mods[i][1]))
      return atoi(in->mods[i] + 1);
  return 1;
}

static void *global_at(Sim *s, const Ins *in, uint64_t addr, size_t bytes) {
  if (addr % bytes)
    return fail(s, in->line, "misaligned %zu-byte access at %#llx", bytes,
                (unsigned long long)addr),
           NULL;
  for (int i = 0; i < s->nargs; i++) {
    if (s->args[i].kind != TJ_ARG_PTR) continue;
    uint64_t lo = (uint64_t)(uintptr_t)s->args[i].u.ptr;
    if (addr >= lo && addr + bytes <= lo + s->args[i].bytes) return (void *)(uintptr_t)addr;
  }
  return fail(s, in->line, "global access of %zu bytes at %#llx is outside every buffer", bytes,
              (unsigned long long)addr),
         NULL;
}

static uint64_t param_value(Sim *s, const Ins *in, int index) {
  if (index == s->k->nparams - 1) return (uint64_t)s->programs;
  if (index >= s->nargs) return fail(s, in->line, "missing argument %d", index), 0;
  const tj_arg *a = &s->args[index];
  if (a->kind == TJ_ARG_PTR) return (uint64_t)(uintptr_t)a->u.ptr;
  if (a->kind == TJ_ARG_FLOAT) return bits_of((float)a->u.f);
  return (uint64_t)a->u.i;
}

static void *address(Sim *s, Thread *t, const Ins *in, const Opnd *o, size_t bytes, bool shared) {
  uint64_t base = o->base == BASE_REG ? reg_get(s, t, o->cls, o->idx, in->line) : 0;
  uint64_t addr = base + (uint64_t)o->off;
  if (!shared) return global_at(s, in, addr, bytes);
  if (addr % bytes || addr + bytes > (uint64_t)s->k->smem)
    return fail(s, in->line, "bad shared access at %llu", (unsigned long long)addr), NULL;
  return s->smem + addr;
}

static void load(Sim *s, Thread *t, const Ins *in) {
  const Opnd *dst = &in->o[0], *src = &in->o[1];
  if (has_mod(in, "param")) {
    put(s, t, in, 0, param_value(s, in, (int)src->idx));
    return;
  }
  int n = vector_count(in), size = access_size(in);
  uint8_t *p = address(s, t, in, src, (size_t)(n * size), has_mod(in, "shared"));
  for (int i = 0; i < n && p; i++) {
    uint64_t v = 0;
    memcpy(&v, p + i * size, (size_t)size);
    reg_set(s, t, dst->cls, dst->kind == K_VEC ? dst->vidx[i] : dst->idx, v, in->line);
  }
}

static void store(Sim *s, Thread *t, const Ins *in) {
  const Opnd *dst = &in->o[0], *src = &in->o[1];
  int n = vector_count(in), size = access_size(in);
  uint8_t *p = address(s, t, in, dst, (size_t)(n * size), has_mod(in, "shared"));
  for (int i = 0; i < n && p; i++) {
    uint64_t v =
        src->kind == K_VEC ? reg_get(s, t, src->cls, src->vidx[i], in->line) : get(s, t, in, 1);
    memcpy(p + i * size, &v, (size_t)size);
  }
}

static void move(Sim *s, Thread *t, const Ins *in) {
  const Opnd *d = &in->o[0], *a = &in->o[1];
  if (d->kind == K_VEC) { /* {lo, hi} = b32 */
    uint64_t v = get(s, t, in, 1);
    reg_set(s, t, d->cls, d->vidx[0], v & 0xFFFF, in->line);
    reg_set(s, t, d->cls, d->vidx[1], (v >> 16) & 0xFFFF, in->line);
  } else if (a->kind == K_VEC) {
    uint64_t lo = reg_get(s, t, a->cls, a->vidx[0], in->line),
             hi = reg_get(s, t, a->cls, a->vidx[1], in->line);
    put(s, t, in, 0, lo | hi << 16);
  } else {
    put(s, t, in, 0, get(s, t, in, 1));
  }
}

/* ---- execution ------------------------------------------------------------ */

/* Runs one instruction that needs no other thread. */
static void step(Sim *s, Thread *t, const Ins *in) {
  switch (in->op) {
  case OP_MOV: move(s, t, in); break;
  case OP_ADD:
  case OP_SUB:
  case OP_MUL:
  case OP_DIV:
  case OP_MAX:
  case OP_MIN:
  case OP_AND:
  case OP_OR:
  case OP_XOR:
  case OP_SHL:
  case OP_SHR: put(s, t, in, 0, arith(s, in, get(s, t, in, 1), get(s, t, in, 2))); break;
  case OP_NEG:
  case OP_RCP:
  case OP_EX2:
  case OP_LG2:
  case OP_CVT:
  case OP_CVTA: put(s, t, in, 0, unary(s, in, get(s, t, in, 1))); break;
  case OP_BFE: {
    uint64_t a = get(s, t, in, 1), pos = get(s, t, in, 2), len = get(s, t, in, 3);
    put(s, t, in, 0, (a >> pos) & ((1ull << len) - 1));
    break;
  }
  case OP_SELP: put(s, t, in, 0, get(s, t, in, 3) ? get(s, t, in, 1) : get(s, t, in, 2)); break;
  case OP_FMA: {
    if (strcmp(last_type(in), "f64")) {
      fail(s, in->line, "unsupported fma type");
      break;
    }
    double r = fma(f64_of(get(s, t, in, 1)), f64_of(get(s, t, in, 2)), f64_of(get(s, t, in, 3)));
    put(s, t, in, 0, bits_of64(r));
    break;
  }
  case OP_SETP: setp(s, t, in); break;
  case OP_LD: load(s, t, in); break;
  case OP_ST: store(s, t, in); break;
  default: fail(s, in->line, "unexpected instruction"); break;
  }
}

static bool guard_holds(Sim *s, Thread *t, const Ins *in) {
  if (in->guard < 0) return true;
  bool v = reg_get(s, t, C_PRED, (uint32_t)in->guard, in->line) != 0;
  return in->guard_neg ? !v : v;
}

/* Runs t until it waits at shfl/bar (returns true) or ends. */
static bool run_thread(Sim *s, Thread *t) {
  while (!t->done && !s->failed) {
    if (t->pc >= s->k->count) return fail(s, 0, "ran past the end"), false;
    const Ins *in = &s->k->ins[t->pc];
    if (++s->steps > 400000000) return fail(s, in->line, "too many steps (endless loop?)"), false;
    if (in->op == OP_SHFL || in->op == OP_BAR) return true;
    bool run = guard_holds(s, t, in);
    if (in->op == OP_RET && run)
      t->done = 1;
    else if (in->op == OP_BRA && run)
      t->pc = in->target;
    else {
      if (run && in->op != OP_BRA && in->op != OP_RET) step(s, t, in);
      t->pc++;
    }
  }
  return false;
}

static void shuffle(Sim *s, Thread *warp, int lanes) {
  const Ins *in = &s->k->ins[warp[0].pc];
  uint64_t v[32];
  for (int l = 0; l < lanes; l++) v[l] = get(s, &warp[l], in, 1);
  uint64_t offset = get(s, &warp[0], in, 2);
  for (int l = 0; l < lanes && !s->failed; l++) {
    int from = l ^ (int)offset;
    put(s, &warp[l], in, 0, from < lanes ? v[from] : v[l]);
    warp[l].pc++;
  }
}

/* Completes the synchronizations all waiters agree on; false if none. */
static bool synchronize(Sim *s, int threads) {
  Thread *t = s->t;
  int first_live = -1;
  bool bar = false;
  for (int i = 0; i < threads; i++)
    if (!t[i].done) {
      if (first_live < 0) first_live = i;
      bar |= s->k->ins[t[i].pc].op == OP_BAR;
    }
  if (first_live < 0) return false;
  if (bar) {
    for (int i = 0; i < threads; i++)
      if (t[i].done || t[i].pc != t[first_live].pc)
        return fail(s, s->k->ins[t[first_live].pc].line,
                    "bar.sync not reached by every thread (thread %d)", i);
    for (int i = 0; i < threads; i++) t[i].pc++;
    return true;
  }
  for (int w = 0; w < threads; w += 32) {
    int lanes = threads - w < 32 ? threads - w : 32;
    bool any = false;
    for (int l = 0; l < lanes; l++) any |= !t[w + l].done;
    if (!any) continue;
    for (int l = 0; l < lanes; l++)
      if (t[w + l].done || t[w + l].pc != t[w].pc || s->k->ins[t[w].pc].op != OP_SHFL)
        return fail(s, s->k->ins[t[first_live].pc].line,
                    "shfl.sync not reached by every lane of warp %d", w / 32);
    shuffle(s, &t[w], lanes);
  }
  return true;
}

static void run_cta(Sim *s) {
  int n = s->k->threads;
  for (int i = 0; i < n; i++) {
    s->t[i].pc = 0;
    s->t[i].done = 0;
    s->t[i].tid = i;
    for (int c = 0; c < C_COUNT; c++) memset(s->t[i].set[c], 0, s->k->regs[c]);
  }
  if (s->k->smem) memset(s->smem, 0xA5, (size_t)s->k->smem);
  for (;;) {
    for (int i = 0; i < n && !s->failed; i++) run_thread(s, &s->t[i]);
    if (s->failed || !synchronize(s, n)) return;
  }
}

static bool alloc_threads(Sim *s) {
  s->t = calloc((size_t)s->k->threads, sizeof *s->t);
  s->smem = calloc((size_t)s->k->smem + 16, 1);
  if (!s->t || !s->smem) return false;
  for (int i = 0; i < s->k->threads; i++)
    for (int c = 0; c < C_COUNT; c++) {
      s->t[i].r[c] = calloc((size_t)s->k->regs[c] + 1, sizeof(uint64_t));
      s->t[i].set[c] = calloc((size_t)s->k->regs[c] + 1, 1);
      if (!s->t[i].r[c] || !s->t[i].set[c]) return false;
    }
  return true;
}

static void free_sim(Sim *s, Kernel *k) {
  for (int i = 0; s->t && i < k->threads; i++)
    for (int c = 0; c < C_COUNT; c++) {
      free(s->t[i].r[c]);
      free(s->t[i].set[c]);
    }
  free(s->t);
  free(s->smem);
  free(k->ins);
}

bool ptxsim_run(const char *ptx, const tj_arg *args, int nargs, int64_t programs, int ctas,
                char *why, size_t why_size) {
  Kernel k;
  memset(&k, 0, sizeof k);
  Sim s = {&k, args, nargs, programs, 0, ctas, NULL, NULL, why, why_size, false, 0};
  why[0] = '\0';
  bool ok = parse_kernel(&k, ptx, why, why_size);
  if (ok && (k.threads < 1 || k.threads > 1024 || k.nparams != nargs + 1))
    ok = false, snprintf(why, why_size, "bad kernel: %d threads, %d params for %d args", k.threads,
                         k.nparams, nargs);
  if (ok && !alloc_threads(&s)) ok = false, snprintf(why, why_size, "out of memory");
  for (s.cta = 0; ok && s.cta < ctas && !s.failed; s.cta++) run_cta(&s);
  free_sim(&s, &k);
  return ok && !s.failed;
}
