/*
 * support_ptxsim.c — the PTX simulator of support_ptxsim.h.
 *
 * Parsing turns each instruction line into an Ins: an opcode, its dotted
 * modifiers (those of memory, atomic, fence and barrier instructions checked
 * against what PTX accepts for them), the decoded type, vector width, state
 * space and comparison, a guard predicate and decoded operands (registers by
 * class and number, immediates as bits, addresses as base + offset, vectors
 * of registers). Labels become instruction indices.
 *
 * Execution runs a group of CTAs at once: one CTA for ordinary kernels, one
 * cluster for cluster kernels, the whole grid for cooperative kernels (a
 * tj_workspace parameter). Rounds go over the group's threads in order, and
 * each running thread gets a time slice: it stops early when it reaches
 * shfl.sync or bar.sync or a barrier.cluster.wait whose phase is not
 * complete (it blocks), and right after an acquire, relaxed or volatile load
 * or an atom (the poll of a spin loop, so spinning costs few steps). After
 * each round the scheduler completes the synchronizations every participant
 * has reached (a warp's 32 lanes at one shfl; all threads of a CTA at one
 * bar). A round in which nothing happens — no change to memory, no
 * synchronization, no exit, and every running thread polling the same
 * address again and reading the same value — is a deadlock, reported with
 * the instructions threads are stuck at, as is a round in which every live
 * thread is blocked.
 *
 * Global addresses are host addresses: the kernel's pointer parameters are
 * the tj_arg buffers and the workspace, and every access is checked against
 * them and counted. Shared addresses are offsets into the CTA's own tj_smem;
 * mapa turns one into a shared::cluster address, (rank + 1) << 24 | offset
 * (a CTA-local address used as a shared::cluster one names the CTA itself,
 * as in PTX).
 *
 * mbarriers live in their 8 bytes of shared memory (pending and expected
 * arrivals, tx-count, parity); mbarrier.arrive.expect_tx and st.async's
 * complete_tx update them at once, completing a phase when nothing is
 * pending, and try_wait.parity is a poll. Use before init, a phase given
 * more bytes than it expects and an st.async whose mbarrier is in another
 * CTA than its data are errors.
 *
 * cp.async copies are asynchronous here too: each thread keeps its copies
 * pending, in commit groups, and performs them (reading global memory then)
 * only at the cp.async.wait_group or wait_all that waits for them. A shared
 * access of the thread that overlaps one of its pending copies, and a
 * thread that exits with copies pending, are errors.
 */
#include "support_ptxsim.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { C_PRED, C_H, C_R, C_RD, C_F, C_COUNT };
static const char *const class_names[C_COUNT] = {"%p", "%h", "%r", "%rd", "%f"};
enum { K_NONE, K_REG, K_IMM, K_SPECIAL, K_SMEM, K_VEC, K_ADDR };
enum { BASE_REG, BASE_PARAM, BASE_SMEM };
enum { SPACE_GENERIC, SPACE_GLOBAL, SPACE_SHARED, SPACE_CLUSTER, SPACE_PARAM };
enum { ACCESS_READ = 1, ACCESS_WRITE = 2 };

/* Opcodes: enum member and PTX name. */
/* clang-format off */
#define PTXSIM_OPS(X)                                                                              \
  X(MOV, "mov")   X(ADD, "add")   X(SUB, "sub")     X(MUL, "mul")   X(MAD, "mad")   X(DIV, "div")  \
  X(REM, "rem")   X(RCP, "rcp")   X(MAX, "max")     X(MIN, "min")   X(NEG, "neg")   X(ABS, "abs")  \
  X(NOT, "not")   X(AND, "and")   X(OR, "or")       X(XOR, "xor")   X(SHL, "shl")   X(SHR, "shr")  \
  X(BFE, "bfe")   X(CVT, "cvt")   X(CVTA, "cvta")   X(SELP, "selp") X(FMA, "fma")   X(SETP, "setp")\
  X(EX2, "ex2")   X(LG2, "lg2")   X(LD, "ld")       X(ST, "st")     X(ATOM, "atom") X(RED, "red")  \
  X(MAPA, "mapa") X(SHFL, "shfl") X(BAR, "bar")     X(BARRIER, "barrier") X(FENCE, "fence")        \
  X(MEMBAR, "membar") X(BRA, "bra") X(RET, "ret")   X(EXIT, "exit") X(CP, "cp")                 \
  X(MBARRIER, "mbarrier") X(NANOSLEEP, "nanosleep")
/* clang-format on */

typedef enum Op {
#define X(op, name) OP_##op,
  PTXSIM_OPS(X)
#undef X
      OP_COUNT,
  OP_CLUSTER_ARRIVE = OP_COUNT, /* barrier.cluster.arrive, set by decoding */
  OP_CLUSTER_WAIT,              /* barrier.cluster.wait */
  OP_MBAR_INIT,                 /* mbarrier.init */
  OP_MBAR_ARRIVE,               /* mbarrier.arrive.expect_tx */
  OP_MBAR_WAIT,                 /* mbarrier.try_wait.parity */
} Op;

static const char *const op_names[OP_COUNT] = {
#define X(op, name) name,
    PTXSIM_OPS(X)
#undef X
};

/* Types: name, bits, kind. */
/* clang-format off */
typedef enum Ty {
  TY_NONE, TY_PRED, TY_B8, TY_U8, TY_S8, TY_B16, TY_U16, TY_S16, TY_F16, TY_BF16,
  TY_B32, TY_U32, TY_S32, TY_F32, TY_B64, TY_U64, TY_S64, TY_F64, TY_COUNT
} Ty;
/* clang-format on */
enum { TK_BITS, TK_UNSIGNED, TK_SIGNED, TK_FLOAT };
static const struct {
  const char *name;
  uint8_t bits, kind;
} types[TY_COUNT] = {
    {"", 0, TK_BITS},         {"pred", 1, TK_BITS},   {"b8", 8, TK_BITS},
    {"u8", 8, TK_UNSIGNED},   {"s8", 8, TK_SIGNED},   {"b16", 16, TK_BITS},
    {"u16", 16, TK_UNSIGNED}, {"s16", 16, TK_SIGNED}, {"f16", 16, TK_FLOAT},
    {"bf16", 16, TK_FLOAT},   {"b32", 32, TK_BITS},   {"u32", 32, TK_UNSIGNED},
    {"s32", 32, TK_SIGNED},   {"f32", 32, TK_FLOAT},  {"b64", 64, TK_BITS},
    {"u64", 64, TK_UNSIGNED}, {"s64", 64, TK_SIGNED}, {"f64", 64, TK_FLOAT},
};

/* Comparisons of setp (in the order of decode_setp's words); the unordered
 * float ones are the ordered ones + CMP_EQU. */
/* clang-format off */
enum {
  CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_EQU, CMP_NEU, CMP_LTU, CMP_LEU, CMP_GTU,
  CMP_GEU, CMP_LO, CMP_LS, CMP_HI, CMP_HS, CMP_NUM, CMP_NAN
};
/* clang-format on */
enum { MUL_LO, MUL_WIDE, MUL_HI };
enum { CP_COPY, CP_COMMIT, CP_WAIT, CP_WAIT_ALL };
enum { ST_PLAIN, ST_ASYNC }; /* st: st.async...mbarrier::complete_tx::bytes has an mbarrier */
enum { ROUND_NEAREST, ROUND_ZERO, ROUND_DOWN, ROUND_UP };

/* Operations of atom and red. */
enum { AOP_ADD, AOP_MIN, AOP_MAX, AOP_EXCH, AOP_CAS, AOP_AND, AOP_OR, AOP_XOR, AOP_INC, AOP_DEC };
static const char atom_ops[] = "add min max exch cas and or xor inc dec";

/* Special registers, read with mov (the cluster ones for 1-D clusters). */
/* clang-format off */
enum {
  SP_TID, SP_NTID, SP_LANEID, SP_CTAID, SP_NCTAID, SP_CLUSTER_CTARANK, SP_CLUSTER_NCTARANK,
  SP_CLUSTER_CTAID, SP_CLUSTER_NCTAID, SP_CLUSTERID, SP_NCLUSTERID, SP_GLOBALTIMER, SP_COUNT
};
static const char *const special_names[SP_COUNT] = {
    "%tid.x", "%ntid.x", "%laneid", "%ctaid.x", "%nctaid.x", "%cluster_ctarank",
    "%cluster_nctarank", "%cluster_ctaid.x", "%cluster_nctaid.x", "%clusterid.x", "%nclusterid.x",
    "%globaltimer"};
/* clang-format on */

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
  Ty ty;           /* the last modifier as a type (TY_NONE if it is none) */
  uint8_t vec;     /* elements of a vector access (.v2, .v4), else 1 */
  uint8_t space;   /* SPACE_* of ld, st, atom, red */
  uint8_t poll;    /* the thread yields after it: acquire/relaxed/volatile ld, atom */
  uint8_t aligned; /* barrier.cluster.*.aligned */
  uint8_t nc;      /* ld.global.nc: must not read what this launch wrote */
  uint8_t cmp, combine, aop;
  uint8_t mode;      /* mul, mad: MUL_*; cvt: ROUND_*; cp.async: CP_* */
  Ty to;             /* cvt: the destination type (ty is the source) */
  char mods[10][32]; /* the dotted parts after the opcode */
  int nmods;
  int guard; /* predicate register, or -1 */
  int guard_neg;
  Opnd o[5];
  int nops;
  int target; /* branches */
  char label[48];
  char text[64]; /* the instruction, for messages */
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
  int programs_param, workspace_param; /* indices of the hidden parameters, or -1 */
  int threads, smem, target;
  int cluster; /* CTAs per cluster (1 without .reqnctapercluster) */
  bool explicit_cluster;
  int needs_target; /* the sm_XX its instructions need: 90 for clusters, 70 for scopes */
  bool has_nc;      /* some ld.global.nc: track the bytes the launch writes */
  uint32_t regs[C_COUNT];
  char labels[1024][48];
  int label_at[1024];
  int nlabels;
} Kernel;

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

static Ty type_of(const char *name) {
  for (int i = 1; i < TY_COUNT; i++)
    if (!strcmp(name, types[i].name)) return (Ty)i;
  return TY_NONE;
}

/* Whether w is one of the space-separated words of list. */
static bool word_in(const char *w, const char *list) {
  size_t n = strlen(w);
  if (!n) return false;
  for (const char *p = list; (p = strstr(p, w)) != NULL; p += n)
    if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
  return false;
}

/* The index of w among the space-separated words of list, or -1. */
static int word_index(const char *w, const char *list) {
  size_t n = strlen(w);
  int i = 0;
  for (const char *p = list; *p; i++) {
    size_t len = strcspn(p, " ");
    if (len == n && !strncmp(p, w, n)) return i;
    p += len;
    while (*p == ' ') p++;
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

static bool parse_address(Kernel *k, char *text, Opnd *o) {
  o->kind = K_ADDR;
  char *plus = strchr(text, '+'), *close = strchr(text, ']');
  if (!close) return false;
  *close = '\0';
  if (plus) {
    o->off = strtoll(plus + 1, NULL, 10);
    *plus = '\0';
  }
  char *base = text + 1;
  trim(base);
  uint32_t idx;
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
  if (text[0] == '[') return parse_address(k, text, o);
  int cls = class_of(text, &idx);
  if (cls >= 0) {
    o->kind = K_REG;
    o->cls = (uint8_t)cls;
    o->idx = idx;
    return true;
  }
  for (int i = 0; i < SP_COUNT; i++)
    if (strcmp(text, special_names[i]) == 0) {
      o->kind = K_SPECIAL;
      o->idx = (uint32_t)i;
      if (i >= SP_CLUSTER_CTARANK && i != SP_GLOBALTIMER) k->needs_target = 90;
      return true;
    }
  if (strcmp(text, "tj_smem") == 0) {
    o->kind = K_SMEM;
    return true;
  }
  if (strcmp(text, "_") == 0) return true; /* a sink: K_NONE */
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

/* ---- decoding: what each instruction's modifiers and operands mean ---------- */

static bool bad(char *why, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool bad(char *why, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, size, fmt, ap);
  va_end(ap);
  return false;
}

static void need_target(Kernel *k, int sm) {
  if (sm > k->needs_target) k->needs_target = sm;
}

/* The qualifiers of ld, st, atom and red, by kind (types are found by name). */
enum { Q_TYPE, Q_VEC, Q_SPACE, Q_SEM, Q_SCOPE, Q_CACHE, Q_NC, Q_HINT, Q_AOP, Q_COUNT };
static const char *const qualifier_words[Q_COUNT] = {
    "",
    "v2 v4",
    "global shared shared::cta shared::cluster param",
    "weak relaxed acquire release acq_rel volatile",
    "cta cluster gpu sys",
    "ca cg cs lu cv wb wt",
    "nc",
    "L1::evict_normal L1::evict_unchanged L1::evict_first L1::evict_last L1::no_allocate "
    "L2::evict_normal L2::evict_first L2::evict_last L2::64B L2::128B L2::256B L2::cache_hint",
    atom_ops,
};
static const char *const qualifier_kinds[Q_COUNT] = {"type",         "vector",     "state space",
                                                     "memory order", "scope",      "cache",
                                                     "non-coherent", "cache hint", "operation"};

static int qualifier_kind(const char *m) {
  if (type_of(m) != TY_NONE) return Q_TYPE;
  for (int i = 1; i < Q_COUNT; i++)
    if (word_in(m, qualifier_words[i])) return i;
  return -1;
}

static bool has_mod(const Ins *in, const char *m) {
  for (int i = 0; i < in->nmods; i++)
    if (!strcmp(in->mods[i], m)) return true;
  return false;
}

/* Operands of ld, st, atom, red: the address, the value(s), a cache policy. */
static bool check_memory_operands(const Ins *in, char *why, size_t size) {
  bool loads = in->op == OP_LD || in->op == OP_ATOM, hint = has_mod(in, "L2::cache_hint");
  int want = (in->op == OP_ATOM ? 3 : 2) + (in->aop == AOP_CAS && in->op == OP_ATOM) + hint;
  if (in->nops != want) return bad(why, size, "%s takes %d operands", op_names[in->op], want);
  const Opnd *a = &in->o[loads ? 1 : 0], *v = &in->o[loads ? 0 : 1];
  if (hint && (in->o[want - 1].kind != K_REG || in->o[want - 1].cls != C_RD))
    return bad(why, size, ".L2::cache_hint needs a 64-bit cache policy register last");
  if (a->kind != K_ADDR) return bad(why, size, "needs an address in brackets");
  if ((in->space == SPACE_PARAM) != (a->base == BASE_PARAM))
    return bad(why, size, "parameters are read with ld.param [name], and only so");
  if (a->base == BASE_SMEM && in->space != SPACE_SHARED && in->space != SPACE_CLUSTER)
    return bad(why, size, "tj_smem needs a .shared access");
  if (in->vec > 1 ? v->kind != K_VEC || v->n != in->vec : v->kind == K_VEC)
    return bad(why, size, "the value must be %d register%s", in->vec,
               in->vec > 1 ? "s in braces" : "");
  if (v->kind != K_REG && v->kind != K_VEC && (loads || v->kind != K_IMM))
    return bad(why, size, "the value must be a register");
  return true;
}

static bool check_atomic(Ins *in, const char *op, char *why, size_t size) {
  in->aop = (uint8_t)word_index(op, atom_ops);
  if (in->op == OP_RED && (in->aop == AOP_EXCH || in->aop == AOP_CAS))
    return bad(why, size, "red has no .%s", op);
  if (types[in->ty].bits != 32 && types[in->ty].bits != 64)
    return bad(why, size, "atomics of .%s are not supported", types[in->ty].name);
  if (types[in->ty].kind == TK_FLOAT && (in->ty != TY_F32 || in->aop != AOP_ADD))
    return bad(why, size, "of float atomics only .add.f32 is supported");
  return true;
}

/* st.async.shared::cluster.mbarrier::complete_tx::bytes{.v2,.v4}.type
 * [a], v, [bar]: a store into another CTA's shared memory that completes
 * its bytes of the transaction of the mbarrier at bar (in that CTA). */
static bool decode_st_async(Kernel *k, Ins *in, char *why, size_t size) {
  int n = in->nmods;
  bool vec = n == 5 && word_in(in->mods[3], "v2 v4");
  if ((n != 4 && !vec) || strcmp(in->mods[1], "shared::cluster") ||
      strcmp(in->mods[2], "mbarrier::complete_tx::bytes") || in->ty == TY_NONE ||
      types[in->ty].bits < 32)
    return bad(why, size,
               "only st.async.shared::cluster.mbarrier::complete_tx::bytes{.v2,.v4}.type of 32 "
               "or 64 bits is supported");
  if (in->nops != 3 || in->o[2].kind != K_ADDR || in->o[2].base != BASE_REG)
    return bad(why, size, "st.async takes an address, a value and an mbarrier's address");
  in->vec = vec ? (uint8_t)(in->mods[3][1] - '0') : 1;
  in->space = SPACE_CLUSTER;
  in->mode = ST_ASYNC;
  in->nops = 2; /* the address and value as a store's; o[2] stays the mbarrier */
  need_target(k, 90);
  bool ok = check_memory_operands(in, why, size);
  in->nops = 3;
  return ok;
}

static bool decode_memory(Kernel *k, Ins *in, char *why, size_t size) {
  if (in->op == OP_ST && in->nmods && !strcmp(in->mods[0], "async"))
    return decode_st_async(k, in, why, size);
  const char *q[Q_COUNT] = {0};
  for (int i = 0; i < in->nmods; i++) {
    const char *m = in->mods[i];
    int kind = qualifier_kind(m);
    if (kind < 0) return bad(why, size, "unknown qualifier .%s", m);
    if (kind != Q_HINT && q[kind])
      return bad(why, size, "two %s qualifiers (.%s and .%s)", qualifier_kinds[kind], q[kind], m);
    q[kind] = m;
  }
  if (in->ty == TY_NONE || in->ty == TY_PRED || type_of(in->mods[in->nmods - 1]) != in->ty)
    return bad(why, size, "%s needs a type as its last qualifier", op_names[in->op]);
  bool ld = in->op == OP_LD, st = in->op == OP_ST, atomic = !ld && !st;
  const char *orders = ld                  ? "weak relaxed acquire volatile"
                       : st                ? "weak relaxed release volatile"
                       : in->op == OP_ATOM ? "relaxed acquire release acq_rel"
                                           : "relaxed release";
  if (q[Q_SEM] && !word_in(q[Q_SEM], orders))
    return bad(why, size, "%s does not take .%s", op_names[in->op], q[Q_SEM]);
  bool strong = q[Q_SEM] && word_in(q[Q_SEM], "relaxed acquire release acq_rel");
  bool weak = !q[Q_SEM] || !strcmp(q[Q_SEM], "weak");
  if (!atomic && strong && !q[Q_SCOPE])
    return bad(why, size, ".%s needs a scope (.cta, .cluster, .gpu or .sys)", q[Q_SEM]);
  if (!atomic && q[Q_SCOPE] && !strong)
    return bad(why, size, "a scope (.%s) needs .relaxed, .acquire or .release", q[Q_SCOPE]);
  if (q[Q_CACHE] &&
      (atomic || !weak || !word_in(q[Q_CACHE], ld ? "ca cg cs lu cv" : "wb cg cs wt")))
    return bad(why, size,
               "no cache operator .%s here (weak ld: .ca .cg .cs .lu .cv; st: .wb .cg .cs .wt)",
               q[Q_CACHE]);
  if (q[Q_NC] && (!ld || !weak || !q[Q_SPACE] || strcmp(q[Q_SPACE], "global")))
    return bad(why, size, ".nc goes only with a weak ld.global");
  if (atomic != (q[Q_AOP] != NULL))
    return bad(why, size,
               atomic ? "%s needs an operation (.add, .max, .exch, .cas, ...)"
                      : "%s takes no operation",
               op_names[in->op]);
  if (atomic && (q[Q_VEC] || (q[Q_SPACE] && !strcmp(q[Q_SPACE], "param"))))
    return bad(why, size, "no vector or parameter atomics");
  const char *space = q[Q_SPACE] ? q[Q_SPACE] : "";
  in->space = !*space                             ? SPACE_GENERIC
              : !strcmp(space, "global")          ? SPACE_GLOBAL
              : !strcmp(space, "shared::cluster") ? SPACE_CLUSTER
              : !strcmp(space, "param")           ? SPACE_PARAM
                                                  : SPACE_SHARED;
  if (in->space == SPACE_PARAM && !ld) return bad(why, size, "only ld reads parameters");
  if (q[Q_SEM] && !weak) need_target(k, 70);
  if (in->space == SPACE_CLUSTER || (q[Q_SCOPE] && !strcmp(q[Q_SCOPE], "cluster")))
    need_target(k, 90);
  in->vec = q[Q_VEC] ? (uint8_t)(q[Q_VEC][1] - '0') : 1;
  in->nc = q[Q_NC] != NULL;
  k->has_nc |= in->nc;
  in->poll = (ld && q[Q_SEM] && word_in(q[Q_SEM], "relaxed acquire volatile")) || in->op == OP_ATOM;
  if (atomic && !check_atomic(in, q[Q_AOP], why, size)) return false;
  return check_memory_operands(in, why, size);
}

static bool decode_setp(Ins *in, char *why, size_t size) {
  int cmp = in->nmods >= 2 ? word_index(in->mods[0], "eq ne lt le gt ge equ neu ltu leu gtu geu "
                                                     "lo ls hi hs num nan")
                           : -1;
  int combine = in->nmods == 3 ? word_index(in->mods[1], "and or xor") : -1;
  if (cmp < 0 || in->ty == TY_NONE || in->nmods > 3 || (in->nmods == 3 && combine < 0))
    return bad(why, size, "setp needs .cmp{.and|.or|.xor}.type");
  if (in->nops != (in->nmods == 3 ? 4 : 3) || in->o[0].kind != K_REG)
    return bad(why, size, "setp takes a predicate, two values and (combined) a predicate");
  in->cmp = (uint8_t)cmp;
  in->combine = (uint8_t)(combine + 1);
  return true;
}

/* bar.sync 0 and barrier.sync 0 (the whole CTA); barrier.cluster.arrive and
 * barrier.cluster.wait. */
static bool decode_barrier(Kernel *k, Ins *in, char *why, size_t size) {
  if (in->op == OP_BARRIER && in->nmods >= 2 && !strcmp(in->mods[0], "cluster")) {
    bool arrive = !strcmp(in->mods[1], "arrive");
    if (!arrive && strcmp(in->mods[1], "wait"))
      return bad(why, size, "barrier.cluster.%s is not supported", in->mods[1]);
    const char *extra = arrive ? "release relaxed aligned" : "acquire aligned";
    for (int i = 2; i < in->nmods; i++) {
      if (!word_in(in->mods[i], extra) || (i == 3 && !strcmp(in->mods[2], in->mods[3])))
        return bad(why, size, "barrier.cluster.%s does not take .%s", in->mods[1], in->mods[i]);
      in->aligned |= !strcmp(in->mods[i], "aligned");
    }
    if (in->nmods > 4 || in->nops) return bad(why, size, "barrier.cluster takes no operands");
    in->op = arrive ? OP_CLUSTER_ARRIVE : OP_CLUSTER_WAIT;
    need_target(k, 90);
    return true;
  }
  bool sync = false;
  for (int i = 0; i < in->nmods; i++) {
    if (!word_in(in->mods[i], "cta sync aligned"))
      return bad(why, size, "%s.%s is not supported (bar.sync, barrier.sync, barrier.cluster)",
                 op_names[in->op], in->mods[i]);
    sync |= !strcmp(in->mods[i], "sync");
  }
  if (!sync) return bad(why, size, "%s needs .sync", op_names[in->op]);
  if (in->nops != 1 || in->o[0].kind != K_IMM || in->o[0].imm != 0)
    return bad(why, size, "only barrier 0 over the whole CTA is supported");
  in->op = OP_BAR;
  return true;
}

static bool decode_fence(Kernel *k, Ins *in, char *why, size_t size) {
  if (in->nops) return bad(why, size, "%s takes no operands", op_names[in->op]);
  if (in->op == OP_MEMBAR) {
    if (in->nmods != 1 || !word_in(in->mods[0], "cta gl sys"))
      return bad(why, size, "membar needs one of .cta, .gl, .sys");
    return true;
  }
  if (in->nmods == 3 && !strcmp(in->mods[0], "mbarrier_init") &&
      !strcmp(in->mods[1], "release") && !strcmp(in->mods[2], "cluster")) {
    need_target(k, 90);
    return true;
  }
  if (in->nmods != 2 || !word_in(in->mods[0], "sc acq_rel acquire release") ||
      !word_in(in->mods[1], "cta cluster gpu sys"))
    return bad(why, size, "fence needs .sc or .acq_rel and a scope (.cta .cluster .gpu .sys)");
  need_target(k, !strcmp(in->mods[1], "cluster") ? 90 : 70);
  return true;
}

static bool decode_mapa(Kernel *k, Ins *in, char *why, size_t size) {
  if (in->nmods != 2 || strcmp(in->mods[0], "shared::cluster") ||
      (in->ty != TY_U32 && in->ty != TY_U64))
    return bad(why, size, "only mapa.shared::cluster.u32 and .u64 are supported");
  if (in->nops != 3 || in->o[0].kind != K_REG || in->o[1].kind == K_VEC ||
      in->o[1].kind == K_ADDR || (in->o[2].kind != K_REG && in->o[2].kind != K_IMM))
    return bad(why, size, "mapa takes a register, a shared address and a CTA rank");
  need_target(k, 90);
  return true;
}

/* mbarrier.init.shared::cta.b64 [a], count;
 * mbarrier.arrive.expect_tx.shared::cta.b64 _, [a], bytes;
 * mbarrier.try_wait.parity{.acquire.cta,.acquire.cluster}.shared::cta.b64
 * p, [a], parity. */
static bool decode_mbarrier(Kernel *k, Ins *in, char *why, size_t size) {
  const char *what = in->nmods ? in->mods[0] : "";
  int n = in->nmods;
  bool cta = n >= 2 && !strcmp(in->mods[n - 2], "shared::cta") && in->ty == TY_B64;
  bool init = !strcmp(what, "init") && n == 3, arrive = false, wait = false;
  if (n == 4 && !strcmp(what, "arrive")) arrive = !strcmp(in->mods[1], "expect_tx");
  if (n >= 4 && !strcmp(what, "try_wait")) /* .parity{.acquire{.cta,.cluster}} */
    wait = !strcmp(in->mods[1], "parity") &&
           (n == 4 || (n == 6 && !strcmp(in->mods[2], "acquire") &&
                       word_in(in->mods[3], "cta cluster")));
  int addr = init ? 0 : 1;
  if (!cta || !(init || arrive || wait) || in->nops != addr + 2 ||
      in->o[addr].kind != K_ADDR || in->o[addr].base == BASE_PARAM ||
      (in->o[addr + 1].kind != K_REG && in->o[addr + 1].kind != K_IMM) ||
      (arrive && in->o[0].kind != K_NONE) ||
      (wait && (in->o[0].kind != K_REG || in->o[0].cls != C_PRED)))
    return bad(why, size,
               "only mbarrier.init [a], count, mbarrier.arrive.expect_tx _, [a], bytes and "
               "mbarrier.try_wait.parity p, [a], parity (.shared::cta.b64) are supported");
  in->op = init ? OP_MBAR_INIT : arrive ? OP_MBAR_ARRIVE : OP_MBAR_WAIT;
  in->space = SPACE_SHARED;
  in->poll = wait;
  need_target(k, 90);
  return true;
}

/* cp.async.cg.shared.global [d], [s], 16; cp.async.commit_group;
 * cp.async.wait_group N; cp.async.wait_all. */
static bool decode_cp(Kernel *k, Ins *in, char *why, size_t size) {
  const char *what = in->nmods >= 2 && !strcmp(in->mods[0], "async") ? in->mods[1] : "";
  need_target(k, 80);
  if (!strcmp(what, "commit_group") || !strcmp(what, "wait_all")) {
    in->mode = what[0] == 'c' ? CP_COMMIT : CP_WAIT_ALL;
    if (in->nmods == 2 && in->nops == 0) return true;
  } else if (!strcmp(what, "wait_group")) {
    in->mode = CP_WAIT;
    if (in->nmods == 2 && in->nops == 1 && in->o[0].kind == K_IMM) return true;
  } else if (!strcmp(what, "cg") && in->nmods == 4 && !strcmp(in->mods[2], "shared") &&
             !strcmp(in->mods[3], "global")) {
    in->mode = CP_COPY;
    in->space = SPACE_SHARED;
    if (in->nops == 3 && in->o[0].kind == K_ADDR && in->o[1].kind == K_ADDR &&
        in->o[0].base != BASE_PARAM && in->o[1].base == BASE_REG && in->o[2].kind == K_IMM &&
        in->o[2].imm == 16)
      return true;
  }
  return bad(why, size,
             "only cp.async.cg.shared.global [d], [s], 16, cp.async.commit_group, "
             "cp.async.wait_group N and cp.async.wait_all are supported");
}

static bool decode(Kernel *k, Ins *in, char *why, size_t size) {
  in->ty = in->nmods ? type_of(in->mods[in->nmods - 1]) : TY_NONE;
  in->vec = 1;
  bool sync = in->op == OP_SHFL || in->op == OP_BAR || in->op == OP_BARRIER;
  if (sync && in->guard >= 0)
    return bad(why, size, "a guarded %s is not supported", op_names[in->op]);
  switch (in->op) {
  case OP_LD:
  case OP_ST:
  case OP_ATOM:
  case OP_RED: return decode_memory(k, in, why, size);
  case OP_SETP: return decode_setp(in, why, size);
  case OP_BAR:
  case OP_BARRIER: return decode_barrier(k, in, why, size);
  case OP_FENCE:
  case OP_MEMBAR: return decode_fence(k, in, why, size);
  case OP_MAPA: return decode_mapa(k, in, why, size);
  case OP_CP: return decode_cp(k, in, why, size);
  case OP_MBARRIER: return decode_mbarrier(k, in, why, size);
  case OP_NANOSLEEP:
    need_target(k, 70);
    if (in->ty != TY_U32 || in->nops != 1 || in->o[0].kind == K_NONE)
      return bad(why, size, "only nanosleep.u32 t is supported");
    return true;
  case OP_SHFL:
    if (in->nmods != 3 || strcmp(in->mods[0], "sync") || strcmp(in->mods[1], "bfly") ||
        in->ty != TY_B32 || in->nops != 5 || in->o[0].kind != K_REG)
      return bad(why, size, "only shfl.sync.bfly.b32 d, a, offset, clamp, mask is supported");
    return true;
  case OP_MUL:
  case OP_MAD:
    in->mode = has_mod(in, "wide") ? MUL_WIDE : has_mod(in, "hi") ? MUL_HI : MUL_LO;
    return true;
  case OP_CVT:
    in->to = in->nmods >= 2 ? type_of(in->mods[in->nmods - 2]) : TY_NONE;
    if (in->to == TY_NONE || in->ty == TY_NONE) return bad(why, size, "cvt needs two types");
    for (int i = 0; i < in->nmods - 2; i++) {
      int round = word_index(in->mods[i], "rn rz rm rp rni rzi rmi rpi");
      if (round >= 0) in->mode = (uint8_t)(round % 4);
    }
    return true;
  case OP_MAX:
  case OP_MIN:
    if (in->ty == TY_S32)
      return bad(why, size,
                 "%s.s32, which ptxas for sm_90 miscompiles in trees of negations (write i32 "
                 "max/min on unsigned keys)",
                 op_names[in->op]);
    return true;
  default: return true;
  }
}

/* Parses one instruction (text without its ';') into k->ins; false with a
 * reason in why (empty when the line is not an instruction at all). */
static bool parse_instruction(Kernel *k, char *text, int line, char *why, size_t size) {
  if (k->count == k->cap) {
    k->cap = k->cap ? 2 * k->cap : 256;
    Ins *p = realloc(k->ins, sizeof *p * (size_t)k->cap);
    if (!p) return bad(why, size, "out of memory");
    k->ins = p;
  }
  Ins *in = &k->ins[k->count];
  memset(in, 0, sizeof *in);
  in->line = line;
  in->guard = -1;
  snprintf(in->text, sizeof in->text, "%s", text);
  if (text[0] == '@') {
    char *space = strchr(text, ' ');
    if (!space) return false;
    *space = '\0';
    in->guard_neg = text[1] == '!';
    uint32_t idx;
    if (class_of(text + 1 + in->guard_neg, &idx) != C_PRED) return false;
    in->guard = (int)idx;
    text = space + 1;
    while (isspace((unsigned char)*text)) text++;
  }
  char *space = strpbrk(text, " \t");
  char *args = space ? space + 1 : text + strlen(text);
  if (space) *space = '\0';
  char *dot = strchr(text, '.');
  if (dot) *dot = '\0';
  int i = 0;
  while (i < OP_COUNT && strcmp(op_names[i], text) != 0) i++;
  if (i == OP_COUNT) return bad(why, size, "unknown instruction %s", text);
  in->op = (Op)i;
  for (char *m = dot ? strtok(dot + 1, ".") : NULL; m; m = strtok(NULL, ".")) {
    if (in->nmods == 10 || strlen(m) >= sizeof in->mods[0])
      return bad(why, size, "too many or too long modifiers");
    snprintf(in->mods[in->nmods++], sizeof in->mods[0], "%s", m);
  }
  if (in->op == OP_BRA) {
    snprintf(in->label, sizeof in->label, "%s", args);
    trim(in->label);
    k->count++;
    return true;
  }
  char *ops[5];
  in->nops = *args ? split_operands(args, ops, 5) : 0;
  for (int j = 0; j < in->nops; j++)
    if (!parse_operand(k, ops[j], &in->o[j])) return bad(why, size, "bad operand %d", j + 1);
  if (!decode(k, in, why, size)) return false;
  k->count++;
  return true;
}

/* Directives: registers, shared memory, parameters, the CTA and cluster
 * shape, the target. Unknown ones are ignored. */
static bool parse_declaration(Kernel *k, const char *s, char *why, size_t size) {
  char type[8], prefix[8];
  unsigned n;
  int x, y = 1, z = 1;
  if (sscanf(s, ".reg .%7s %7[^<]<%u>;", type, prefix, &n) == 3) {
    uint32_t idx;
    char probe[16];
    snprintf(probe, sizeof probe, "%s0", prefix);
    int cls = class_of(probe, &idx);
    if (cls < 0) return bad(why, size, "unknown register class %s", prefix);
    k->regs[cls] = n;
    return true;
  }
  if (!strcmp(s, ".extern .shared .align 16 .b8 tj_smem[];")) {
    k->smem = -1; /* sized by the launch */
    return true;
  }
  if (!strncmp(s, ".shared", 7)) {
    if (sscanf(s, ".shared .align 16 .b8 tj_smem[%d];", &k->smem) == 1 && k->smem > 0 &&
        k->smem < (1 << 24))
      return true;
    return bad(why, size, "only .shared .align 16 .b8 tj_smem[N] is supported");
  }
  if (sscanf(s, ".reqntid %d", &k->threads) == 1) return true;
  if (sscanf(s, ".target sm_%d", &k->target) == 1) return true;
  if (!strcmp(s, ".explicitcluster")) return k->explicit_cluster = true;
  if (sscanf(s, ".reqnctapercluster %d , %d , %d", &x, &y, &z) >= 1) {
    if (x < 1 || x > 16 || y != 1 || z != 1)
      return bad(why, size, "clusters of 1 to 16 CTAs along x only are supported");
    k->cluster = x;
    need_target(k, 90);
    return true;
  }
  char name[64];
  if (sscanf(s, ".param .%7s %63[^,)]", type, name) == 2) {
    if (k->nparams == 32) return bad(why, size, "too many parameters");
    trim(name);
    snprintf(k->params[k->nparams].type, sizeof k->params[0].type, "%s", type);
    snprintf(k->params[k->nparams].name, sizeof k->params[0].name, "%s", name);
    k->nparams++;
  }
  return true;
}

/* Branch targets, hidden parameters, the cluster shape, the target. */
static bool resolve(Kernel *k, char *why, size_t size) {
  for (int i = 0; i < k->count; i++) {
    if (k->ins[i].op != OP_BRA) continue;
    k->ins[i].target = -1;
    for (int j = 0; j < k->nlabels; j++)
      if (strcmp(k->labels[j], k->ins[i].label) == 0) k->ins[i].target = k->label_at[j];
    if (k->ins[i].target < 0) return bad(why, size, "no label %s", k->ins[i].label);
  }
  k->programs_param = k->workspace_param = -1;
  for (int i = 0; i < k->nparams; i++) {
    if (!strcmp(k->params[i].name, "tj_programs")) k->programs_param = i;
    if (!strcmp(k->params[i].name, "tj_workspace")) k->workspace_param = i;
  }
  if (k->programs_param < 0) k->programs_param = k->nparams - 1; /* NVRTC's names */
  if (k->programs_param != k->nparams - 1 ||
      (k->workspace_param >= 0 && k->workspace_param != k->nparams - 2))
    return bad(why, size, "tj_programs must be the last parameter, tj_workspace the one before");
  for (int i = 0; i < k->nparams; i++)
    if ((i == k->programs_param || i == k->workspace_param) && strcmp(k->params[i].type, "u64"))
      return bad(why, size, "parameter %s must be .u64", k->params[i].name);
  if (k->explicit_cluster && !k->cluster)
    return bad(why, size, ".explicitcluster without .reqnctapercluster");
  if (!k->cluster) k->cluster = 1;
  if (k->target && k->target < k->needs_target)
    return bad(why, size, "the kernel needs sm_%d (clusters, memory scopes), not sm_%d",
               k->needs_target, k->target);
  return true;
}

static bool parse_kernel(Kernel *k, const char *ptx, char *why, size_t size) {
  char *copy = malloc(strlen(ptx) + 1);
  if (!copy) return bad(why, size, "out of memory");
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
    char reason[160] = "", original[96];
    snprintf(original, sizeof original, "%s", s);
    if (!len || s[0] == '{' || s[0] == '}' || s[0] == ')') continue;
    if (s[len - 1] == ':') {
      s[len - 1] = '\0';
      if (k->nlabels == 1024) {
        ok = bad(reason, sizeof reason, "too many labels");
      } else {
        snprintf(k->labels[k->nlabels], sizeof k->labels[0], "%s", s);
        k->label_at[k->nlabels++] = k->count;
      }
    } else if (s[0] == '.') {
      ok = parse_declaration(k, s, reason, sizeof reason);
    } else if (s[len - 1] == ';') {
      s[len - 1] = '\0';
      ok = parse_instruction(k, s, line, reason, sizeof reason);
    }
    if (!ok && reason[0])
      snprintf(why, size, "ptx line %d: %s (in '%s')", line, reason, original);
    else if (!ok)
      snprintf(why, size, "ptx line %d: cannot parse '%s'", line, original);
  }
  free(copy);
  if (ok && !resolve(k, why, size)) return false;
  return ok;
}

/* ---- the machine ------------------------------------------------------------ */

enum { T_RUN, T_SHFL, T_BAR, T_CLUSTER, T_DONE }; /* running, or blocked at / exited */

typedef struct Cta Cta;

/* A pending cp.async: 16 bytes from src (global) to dst (the CTA's tj_smem). */
typedef struct Copy {
  uint8_t *dst;
  const uint8_t *src;
  uint32_t group; /* the commit group it belongs to (Thread.groups when issued) */
  int line;
} Copy;

typedef struct Thread {
  uint8_t *regs; /* its register block: values at Sim.value_at, written flags at set_at */
  Copy *copies;  /* cp.async copies issued and not yet waited for */
  int ncopies, capcopies;
  uint32_t groups; /* cp.async.commit_group executed */
  Cta *cta;
  int pc, tid;
  int spin_pc;                    /* the poll it last yielded after, or -1 */
  uint64_t poll_addr, poll_value; /* what that poll read */
  int arrive_pc;                  /* its last barrier.cluster.arrive */
  uint32_t arrivals;              /* barrier.cluster.arrive executed */
  uint8_t state;                  /* T_* */
  uint8_t arrived;                /* arrived at barrier.cluster, not yet waited */
} Thread;

typedef struct Cluster {
  uint32_t phase;         /* barrier.cluster phases completed */
  int arrived, threads;   /* arrivals in the current phase, of every thread of the cluster */
  int arrive_line;        /* the first arrival of the current phase */
  uint32_t exit_arrivals; /* fewest arrivals of a thread that exited (UINT32_MAX: none) */
  int exit_cta, exit_tid, exit_line;
} Cluster;

struct Cta {
  int id, rank;              /* ctaid, and its rank in its cluster */
  int live, at_bar, at_shfl; /* threads not exited, blocked at bar.sync, at shfl.sync */
  uint8_t *smem;
  Thread *t;
  Cluster *cluster;
};

typedef struct Sim {
  const Kernel *k;
  const tj_arg *args;
  int nargs;
  const PtxsimLaunch *launch;
  PtxsimStats *stats;
  int group; /* CTAs that run at once: 1, a cluster, or the grid */
  Cta *ctas;
  Cluster *clusters;
  Thread *threads;
  uint8_t *regs, *smem;
  uint8_t **written; /* kernels with ld.global.nc: a bit per byte written, per buffer */
  size_t value_at[C_COUNT], set_at[C_COUNT], block; /* a thread's register block */
  int live;                                         /* threads of the group not exited */
  uint64_t changes;               /* stores and atomics that changed memory so far */
  uint64_t poll_addr, poll_value; /* the last load's or atom's address and value */
  uint64_t progress;              /* threads blocked, released or exited so far */
  int64_t steps;
  int cur_cta, cur_tid; /* where the failing instruction ran, for messages (-1: none) */
  char *why;
  size_t why_size;
  bool failed;
} Sim;

static bool fail(Sim *s, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail(Sim *s, int line, const char *fmt, ...) {
  if (s->failed) return false;
  char where[48] = "";
  if (s->cur_cta >= 0 && s->cur_tid >= 0)
    snprintf(where, sizeof where, " (CTA %d thread %d)", s->cur_cta, s->cur_tid);
  else if (s->cur_cta >= 0)
    snprintf(where, sizeof where, " (CTA %d)", s->cur_cta);
  va_list ap;
  va_start(ap, fmt);
  int n = snprintf(s->why, s->why_size, "ptx line %d%s: ", line, where);
  if (n > 0 && (size_t)n < s->why_size) vsnprintf(s->why + n, s->why_size - (size_t)n, fmt, ap);
  va_end(ap);
  s->failed = true;
  return false;
}

/* ---- values ----------------------------------------------------------------- */

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

static uint64_t low_bits(int bits) { return bits >= 64 ? ~0ull : (1ull << bits) - 1; }

/* v as a 64-bit integer of type ty: zero- or sign-extended from its width. */
static uint64_t extend(uint64_t v, Ty ty) {
  int bits = types[ty].bits;
  if (bits == 0 || bits >= 64) return v;
  v &= low_bits(bits);
  if (types[ty].kind == TK_SIGNED && (v >> (bits - 1)) & 1) v |= ~low_bits(bits);
  return v;
}

static bool is_signed(Ty ty) { return types[ty].kind == TK_SIGNED; }

/* A float of type ty (f16, bf16, f32, f64) as a double, exactly. */
static double float_value(uint64_t bits, Ty ty) {
  switch (ty) {
  case TY_F16: return tj_f16_to_f32((uint16_t)bits);
  case TY_BF16: return tj_bf16_to_f32((uint16_t)bits);
  case TY_F64: return f64_of(bits);
  default: return f32_of(bits);
  }
}

static uint64_t class_mask(int cls) {
  return cls == C_PRED ? 1 : cls == C_H ? 0xFFFF : cls == C_RD ? ~0ull : 0xFFFFFFFFull;
}

static uint64_t reg_get(Sim *s, Thread *t, int cls, uint32_t idx, int line) {
  if (idx >= s->k->regs[cls]) return fail(s, line, "register out of range"), 0;
  if (!t->regs[s->set_at[cls] + idx])
    return fail(s, line, "register %s%u read before written", class_names[cls], idx), 0;
  const uint8_t *p = t->regs + s->value_at[cls];
  if (cls == C_RD) {
    uint64_t v;
    memcpy(&v, p + 8 * (size_t)idx, sizeof v);
    return v;
  }
  uint32_t v;
  memcpy(&v, p + 4 * (size_t)idx, sizeof v);
  return v;
}

static void reg_set(Sim *s, Thread *t, int cls, uint32_t idx, uint64_t v, int line) {
  if (idx >= s->k->regs[cls]) {
    fail(s, line, "register out of range");
    return;
  }
  uint8_t *p = t->regs + s->value_at[cls];
  if (cls == C_RD) {
    memcpy(p + 8 * (size_t)idx, &v, sizeof v);
  } else {
    uint32_t u = (uint32_t)(v & class_mask(cls));
    memcpy(p + 4 * (size_t)idx, &u, sizeof u);
  }
  t->regs[s->set_at[cls] + idx] = 1;
}

static uint64_t special(const Sim *s, const Thread *t, uint32_t which) {
  const Cta *c = t->cta;
  int cluster = s->k->cluster;
  switch (which) {
  case SP_TID: return (uint64_t)t->tid;
  case SP_NTID: return (uint64_t)s->k->threads;
  case SP_LANEID: return (uint64_t)(t->tid % 32);
  case SP_CTAID: return (uint64_t)c->id;
  case SP_NCTAID: return (uint64_t)s->launch->ctas;
  case SP_CLUSTER_CTARANK:
  case SP_CLUSTER_CTAID: return (uint64_t)c->rank;
  case SP_CLUSTER_NCTARANK:
  case SP_CLUSTER_NCTAID: return (uint64_t)cluster;
  case SP_CLUSTERID: return (uint64_t)(c->id / cluster);
  case SP_GLOBALTIMER: return (uint64_t)s->steps; /* a nanosecond a step of any thread */
  default: return (uint64_t)(s->launch->ctas / cluster);
  }
}

static uint64_t get(Sim *s, Thread *t, const Ins *in, int i) {
  const Opnd *o = &in->o[i];
  switch (o->kind) {
  case K_REG: {
    uint64_t v = reg_get(s, t, o->cls, o->idx, in->line);
    return o->neg ? !v : v;
  }
  case K_IMM: return o->imm;
  case K_SPECIAL: return special(s, t, o->idx);
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
  reg_set(s, t, o->cls, o->idx, v, in->line);
}

/* ---- arithmetic --------------------------------------------------------------- */

static uint64_t float_arith(Sim *s, const Ins *in, uint64_t a, uint64_t b) {
  if (in->ty == TY_F64) {
    double x = f64_of(a), y = f64_of(b);
    switch (in->op) {
    case OP_ADD: return bits_of64(x + y);
    case OP_SUB: return bits_of64(x - y);
    case OP_MUL: return bits_of64(x * y);
    case OP_DIV: return bits_of64(x / y);
    case OP_MAX: return bits_of64(fmax(x, y));
    case OP_MIN: return bits_of64(fmin(x, y));
    default: break;
    }
  } else if (in->ty == TY_F32) {
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
  }
  return fail(s, in->line, "unsupported float arithmetic"), 0;
}

/* mul and mad: .lo keeps the low bits, .wide all of a 32-bit product, .hi
 * its high half. x and y are extended to 64 bits. */
static uint64_t product(Sim *s, const Ins *in, uint64_t x, uint64_t y) {
  int bits = types[in->ty].bits;
  if (in->mode == MUL_LO) return x * y;
  if (bits != 16 && bits != 32) return fail(s, in->line, "64-bit .wide/.hi is not supported"), 0;
  uint64_t p = is_signed(in->ty) ? (uint64_t)((int64_t)x * (int64_t)y) : x * y;
  if (in->mode == MUL_WIDE) return p;
  return is_signed(in->ty) ? (uint64_t)((int64_t)p >> bits) : p >> bits;
}

static uint64_t divide(Sim *s, const Ins *in, uint64_t x, uint64_t y) {
  if (y == 0) return fail(s, in->line, "integer division by zero"), 0;
  bool div = in->op == OP_DIV;
  if (!is_signed(in->ty)) return div ? x / y : x % y;
  int64_t p = (int64_t)x, q = (int64_t)y;
  if (q == -1) return div ? 0 - x : 0; /* no INT64_MIN / -1 */
  return (uint64_t)(div ? p / q : p % q);
}

static uint64_t int_arith(Sim *s, const Ins *in, uint64_t a, uint64_t b) {
  int bits = types[in->ty].bits;
  bool sgn = is_signed(in->ty);
  uint64_t x = extend(a, in->ty), y = extend(b, in->ty);
  uint32_t shift = (uint32_t)b;
  if (bits == 0) return fail(s, in->line, "arithmetic without a type"), 0;
  switch (in->op) {
  case OP_ADD: return x + y;
  case OP_SUB: return x - y;
  case OP_MUL: return product(s, in, x, y);
  case OP_DIV:
  case OP_REM: return divide(s, in, x, y);
  case OP_MAX: return (sgn ? (int64_t)x > (int64_t)y : x > y) ? x : y;
  case OP_MIN: return (sgn ? (int64_t)x < (int64_t)y : x < y) ? x : y;
  case OP_AND: return a & b;
  case OP_OR: return a | b;
  case OP_XOR: return a ^ b;
  case OP_SHL: return shift >= (uint32_t)bits ? 0 : x << shift;
  case OP_SHR:
    if (sgn) return (uint64_t)((int64_t)x >> (shift > 63 ? 63 : shift));
    return shift >= (uint32_t)bits ? 0 : x >> shift;
  default: return fail(s, in->line, "unsupported integer arithmetic"), 0;
  }
}

static uint64_t arith(Sim *s, const Ins *in, uint64_t a, uint64_t b) {
  if (types[in->ty].kind == TK_FLOAT) return float_arith(s, in, a, b);
  return int_arith(s, in, a, b);
}

/* fma and mad: a * b + c. */
static uint64_t ternary(Sim *s, const Ins *in, uint64_t a, uint64_t b, uint64_t c) {
  if (in->ty == TY_F32) return bits_of(fmaf(f32_of(a), f32_of(b), f32_of(c)));
  if (in->ty == TY_F64) return bits_of64(fma(f64_of(a), f64_of(b), f64_of(c)));
  if (in->op == OP_FMA || types[in->ty].kind == TK_FLOAT || !types[in->ty].bits)
    return fail(s, in->line, "unsupported %s type", op_names[in->op]), 0;
  return product(s, in, extend(a, in->ty), extend(b, in->ty)) + c;
}

/* cmp holds for a comparison that came out `order` (<0, 0, >0). */
static bool holds(int cmp, int order) {
  switch (cmp) {
  case CMP_EQ: return order == 0;
  case CMP_NE: return order != 0;
  case CMP_LT: return order < 0;
  case CMP_LE: return order <= 0;
  case CMP_GT: return order > 0;
  case CMP_GE: return order >= 0;
  default: return false;
  }
}

static bool compare(int cmp, Ty ty, uint64_t a, uint64_t b) {
  if (types[ty].kind == TK_FLOAT) {
    double x = float_value(a, ty), y = float_value(b, ty);
    bool unordered = isnan(x) || isnan(y);
    if (cmp == CMP_NUM || cmp == CMP_NAN) return unordered == (cmp == CMP_NAN);
    if (unordered) return cmp >= CMP_EQU && cmp <= CMP_GEU;
    if (cmp >= CMP_EQU && cmp <= CMP_GEU) cmp -= CMP_EQU;
    return holds(cmp, x < y ? -1 : x > y);
  }
  bool sgn = is_signed(ty) && cmp < CMP_LO;
  if (cmp >= CMP_LO && cmp <= CMP_HS) cmp = cmp - CMP_LO + CMP_LT;
  uint64_t x = extend(a, ty), y = extend(b, ty);
  if (sgn) return holds(cmp, (int64_t)x < (int64_t)y ? -1 : (int64_t)x > (int64_t)y);
  return holds(cmp, x < y ? -1 : x > y);
}

static void setp(Sim *s, Thread *t, const Ins *in) {
  bool r = compare(in->cmp, in->ty, get(s, t, in, 1), get(s, t, in, 2));
  if (in->combine) {
    bool c = get(s, t, in, 3) != 0;
    r = in->combine == 1 ? r && c : in->combine == 2 ? r || c : r != c;
  }
  put(s, t, in, 0, r);
}

static uint16_t f32_to_bf16_rne(float f) {
  uint32_t u = (uint32_t)bits_of(f);
  if (isnan(f)) return 0x7FFF;
  return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

/* Float to integer: rounded as the modifier says, saturated, NaN gives 0. */
static uint64_t float_to_int(double v, int mode, Ty to) {
  int bits = types[to].bits;
  bool sgn = is_signed(to);
  if (isnan(v)) return 0;
  double r = mode == ROUND_ZERO   ? trunc(v)
             : mode == ROUND_DOWN ? floor(v)
             : mode == ROUND_UP   ? ceil(v)
                                  : nearbyint(v);
  double limit = ldexp(1.0, sgn ? bits - 1 : bits);
  if (r >= limit) return low_bits(sgn ? bits - 1 : bits);
  if (r < (sgn ? -limit : 0)) return sgn ? 0 - (1ull << (bits - 1)) : 0;
  return sgn ? (uint64_t)(int64_t)r : (uint64_t)r;
}

static uint64_t convert(Sim *s, const Ins *in, uint64_t a) {
  Ty from = in->ty, to = in->to;
  if (types[from].kind == TK_FLOAT) {
    double v = float_value(a, from);
    if (to == TY_F64) return bits_of64(v);
    if (to == TY_F32) return bits_of((float)v);
    if (types[to].kind != TK_FLOAT) return float_to_int(v, in->mode, to);
    if (from == TY_F64) return fail(s, in->line, "unsupported cvt"), 0;
    return to == TY_F16 ? tj_f32_to_f16((float)v) : f32_to_bf16_rne((float)v);
  }
  uint64_t i = extend(a, from);
  double v = is_signed(from) ? (double)(int64_t)i : (double)i;
  float f = is_signed(from) ? (float)(int64_t)i : (float)i;
  switch (to) {
  case TY_F64: return bits_of64(v);
  case TY_F32: return bits_of(f);
  case TY_F16: return tj_f32_to_f16(f);
  case TY_BF16: return f32_to_bf16_rne(f);
  default: return i; /* integer widening and narrowing; put() truncates */
  }
}

static uint64_t unary(Sim *s, const Ins *in, uint64_t a) {
  Ty ty = in->ty;
  float x = f32_of(a);
  uint64_t i = extend(a, ty);
  switch (in->op) {
  case OP_NEG:
    if (ty == TY_F64) return bits_of64(-f64_of(a));
    return ty == TY_F32 ? bits_of(-x) : 0 - i;
  case OP_ABS:
    if (ty == TY_F64) return bits_of64(fabs(f64_of(a)));
    if (ty == TY_F32) return bits_of(fabsf(x));
    return is_signed(ty) && (int64_t)i < 0 ? 0 - i : i;
  case OP_NOT: return ty == TY_PRED ? !a : ~a;
  case OP_RCP: /* rcp.approx.ftz.f64: exact here, which the Newton steps after it keep */
    return ty == TY_F64 ? bits_of64(1.0 / f64_of(a)) : bits_of(1.0f / x);
  case OP_EX2: return bits_of(ftz(exp2f(ftz(x))));
  case OP_LG2: return bits_of(ftz(log2f(ftz(x))));
  case OP_CVT: return convert(s, in, a);
  case OP_CVTA: return a;
  default: return fail(s, in->line, "unsupported unary op"), 0;
  }
}

/* bfe: len bits of a from bit pos, sign-extended for signed types. */
static uint64_t bit_field(const Ins *in, uint64_t a, uint64_t pos, uint64_t len) {
  pos &= 0xFF;
  len &= 0xFF;
  uint64_t field = pos >= 64 ? 0 : extend(a, in->ty) >> pos;
  if (len == 0) return 0;
  if (len < 64) {
    field &= low_bits((int)len);
    if (is_signed(in->ty) && (field >> (len - 1)) & 1) field |= ~low_bits((int)len);
  }
  return field;
}

/* ---- memory ----------------------------------------------------------------- */

static void count_bytes(Sim *s, int buffer, size_t bytes, int access) {
  if (!s->stats) return;
  PtxsimStats *st = s->stats;
  bool read = access & ACCESS_READ, write = access & ACCESS_WRITE;
  if (buffer < 0) {
    st->workspace_read += read ? bytes : 0;
    st->workspace_written += write ? bytes : 0;
  } else if (buffer < 16) {
    st->bytes_read[buffer] += read ? bytes : 0;
    st->bytes_written[buffer] += write ? bytes : 0;
  }
}

/* ld.global.nc reads through the non-coherent cache, which may return
 * stale data for bytes written during the launch: an error. Buffer nargs is
 * the workspace; its bitmap is made on the first access. */
static bool track_written(Sim *s, const Ins *in, int buffer, uint64_t offset, size_t bytes,
                          size_t size, int access) {
  uint8_t **bits = &s->written[buffer];
  if (!*bits && !(*bits = calloc(size / 8 + 1, 1))) return fail(s, in->line, "out of memory");
  for (uint64_t i = offset; i < offset + bytes; i++) {
    if ((access & ACCESS_WRITE)) (*bits)[i / 8] |= (uint8_t)(1u << (i % 8));
    if (in->nc && ((*bits)[i / 8] >> (i % 8) & 1))
      return fail(s, in->line,
                  "ld.global.nc of memory this launch wrote: the non-coherent cache may return "
                  "stale data (use ld.global or .cg)");
  }
  return true;
}

static bool inside(uint64_t addr, size_t bytes, const void *buffer, size_t size) {
  uint64_t lo = (uint64_t)(uintptr_t)buffer;
  return buffer && size >= bytes && addr >= lo && addr - lo <= size - bytes;
}

/* The host address of a global access: inside an argument's buffer (the
 * first that holds it) or the workspace, aligned to its size. */
static void *global_at(Sim *s, const Ins *in, uint64_t addr, size_t bytes, int access) {
  if (addr % bytes)
    return fail(s, in->line, "misaligned %zu-byte access at %#llx", bytes,
                (unsigned long long)addr),
           NULL;
  for (int i = 0; i < s->nargs; i++)
    if (s->args[i].kind == TJ_ARG_PTR && inside(addr, bytes, s->args[i].u.ptr, s->args[i].bytes)) {
      count_bytes(s, i, bytes, access);
      uint64_t offset = addr - (uint64_t)(uintptr_t)s->args[i].u.ptr;
      if (s->written && !track_written(s, in, i, offset, bytes, s->args[i].bytes, access))
        return NULL;
      return (void *)(uintptr_t)addr;
    }
  if (inside(addr, bytes, s->launch->workspace, s->launch->workspace_bytes)) {
    count_bytes(s, -1, bytes, access);
    uint64_t offset = addr - (uint64_t)(uintptr_t)s->launch->workspace;
    if (s->written &&
        !track_written(s, in, s->nargs, offset, bytes, s->launch->workspace_bytes, access))
      return NULL;
    return (void *)(uintptr_t)addr;
  }
  return fail(s, in->line, "global access of %zu bytes at %#llx is outside every buffer", bytes,
              (unsigned long long)addr),
         NULL;
}

/* A shared access: an offset into the thread's own tj_smem, or (for
 * .shared::cluster) a mapa address into the tj_smem of a CTA of its cluster
 * that has not exited. */
static uint8_t *shared_at(Sim *s, Thread *t, const Ins *in, uint64_t addr, size_t bytes) {
  Cta *c = t->cta, *target = c;
  uint64_t rank = addr >> 24, offset = addr & 0xFFFFFF;
  bool cluster = in->space == SPACE_CLUSTER;
  if (rank && !cluster)
    return fail(s, in->line,
                "CTA-local shared access at %#llx, a shared::cluster address (mapa's): it "
                "needs .shared::cluster",
                (unsigned long long)addr),
           NULL;
  if (rank) {
    if (addr >> 32 || rank > (uint64_t)s->k->cluster)
      return fail(s, in->line, "shared::cluster address %#llx names no CTA of a cluster of %d",
                  (unsigned long long)addr, s->k->cluster),
             NULL;
    target = c - c->rank + (int)(rank - 1);
    if (!target->live)
      return fail(s, in->line,
                  "shared::cluster access to CTA %d (rank %d of its cluster), which has exited",
                  target->id, target->rank),
             NULL;
  }
  if (offset % bytes || offset + bytes > (uint64_t)s->k->smem)
    return fail(s, in->line, "bad %s access of %zu bytes at offset %llu (tj_smem has %d bytes)",
                cluster ? "shared::cluster" : "shared", bytes, (unsigned long long)offset,
                s->k->smem),
           NULL;
  uint8_t *at = target->smem + offset;
  for (int i = 0; i < t->ncopies; i++)
    if (at < t->copies[i].dst + 16 && t->copies[i].dst < at + bytes)
      return fail(s, in->line,
                  "shared access at offset %llu overlaps the thread's cp.async of line %d, not "
                  "yet waited for",
                  (unsigned long long)offset, t->copies[i].line),
             NULL;
  return at;
}

static uint64_t param_value(Sim *s, const Ins *in, int index) {
  if (index == s->k->programs_param) return (uint64_t)s->launch->programs;
  if (index == s->k->workspace_param) return (uint64_t)(uintptr_t)s->launch->workspace;
  if (index >= s->nargs) return fail(s, in->line, "missing argument %d", index), 0;
  const tj_arg *a = &s->args[index];
  if (a->kind == TJ_ARG_PTR) return (uint64_t)(uintptr_t)a->u.ptr;
  if (a->kind == TJ_ARG_FLOAT) return bits_of((float)a->u.f);
  return (uint64_t)a->u.i;
}

static uint8_t *address(Sim *s, Thread *t, const Ins *in, const Opnd *o, size_t bytes, int access) {
  uint64_t base = o->base == BASE_REG ? reg_get(s, t, o->cls, o->idx, in->line) : 0;
  if (s->failed) return NULL;
  uint64_t addr = base + (uint64_t)o->off;
  if (in->space == SPACE_SHARED || in->space == SPACE_CLUSTER)
    return shared_at(s, t, in, addr, bytes);
  return global_at(s, in, addr, bytes, access);
}

static void load(Sim *s, Thread *t, const Ins *in) {
  const Opnd *dst = &in->o[0], *src = &in->o[1];
  if (in->space == SPACE_PARAM) {
    put(s, t, in, 0, param_value(s, in, (int)src->idx));
    return;
  }
  int n = in->vec, size = types[in->ty].bits / 8;
  uint8_t *p = address(s, t, in, src, (size_t)(n * size), ACCESS_READ);
  s->poll_addr = (uint64_t)(uintptr_t)p;
  s->poll_value = 0;
  for (int i = 0; i < n && p; i++) {
    uint64_t v = 0;
    memcpy(&v, p + i * size, (size_t)size);
    reg_set(s, t, dst->cls, dst->kind == K_VEC ? dst->vidx[i] : dst->idx, v, in->line);
    s->poll_value = s->poll_value * 0x100000001B3ull ^ v;
  }
}

static void store(Sim *s, Thread *t, const Ins *in) {
  const Opnd *dst = &in->o[0], *src = &in->o[1];
  int n = in->vec, size = types[in->ty].bits / 8;
  uint64_t v[4];
  for (int i = 0; i < n; i++)
    v[i] = src->kind == K_VEC ? reg_get(s, t, src->cls, src->vidx[i], in->line) : get(s, t, in, 1);
  uint8_t *p = s->failed ? NULL : address(s, t, in, dst, (size_t)(n * size), ACCESS_WRITE);
  for (int i = 0; i < n && p; i++) {
    s->changes += memcmp(p + i * size, &v[i], (size_t)size) != 0;
    memcpy(p + i * size, &v[i], (size_t)size);
  }
}

/* The new value of an atom/red on old. */
static uint64_t atom_value(const Ins *in, uint64_t old, uint64_t b, uint64_t c) {
  uint64_t mask = low_bits(types[in->ty].bits);
  b &= mask;
  c &= mask;
  bool sgn = is_signed(in->ty);
  bool less = sgn ? (int64_t)extend(old, in->ty) < (int64_t)extend(b, in->ty) : old < b;
  switch (in->aop) {
  case AOP_ADD: return in->ty == TY_F32 ? bits_of(f32_of(old) + f32_of(b)) : old + b;
  case AOP_MIN: return less ? old : b;
  case AOP_MAX: return less ? b : old;
  case AOP_EXCH: return b;
  case AOP_CAS: return old == b ? c : old;
  case AOP_AND: return old & b;
  case AOP_OR: return old | b;
  case AOP_XOR: return old ^ b;
  case AOP_INC: return old >= b ? 0 : old + 1;
  default: return old == 0 || old > b ? b : old - 1; /* AOP_DEC */
  }
}

/* atom d, [a], b{, c} and red [a], b: read, modify, write, in one step. */
static void atomic(Sim *s, Thread *t, const Ins *in) {
  bool red = in->op == OP_RED;
  size_t size = types[in->ty].bits / 8;
  uint64_t b = get(s, t, in, red ? 1 : 2), c = in->aop == AOP_CAS ? get(s, t, in, 3) : 0;
  uint8_t *p =
      s->failed ? NULL : address(s, t, in, &in->o[red ? 0 : 1], size, ACCESS_READ | ACCESS_WRITE);
  if (!p) return;
  uint64_t old = 0, value;
  memcpy(&old, p, size);
  value = atom_value(in, old, b, c);
  memcpy(p, &value, size);
  s->changes += (value & low_bits(types[in->ty].bits)) != old;
  s->poll_addr = (uint64_t)(uintptr_t)p;
  s->poll_value = old;
  if (!red) put(s, t, in, 0, old);
}

/* Performs the thread's pending copies of groups below `below`. */
static void complete_copies(Sim *s, Thread *t, uint32_t below) {
  int kept = 0;
  for (int i = 0; i < t->ncopies; i++) {
    Copy *cp = &t->copies[i];
    if (cp->group >= below) {
      t->copies[kept++] = *cp;
      continue;
    }
    s->changes += memcmp(cp->dst, cp->src, 16) != 0;
    memcpy(cp->dst, cp->src, 16);
  }
  t->ncopies = kept;
}

/* cp.async: a copy issued (pending), a group committed, or a wait. */
static void async_copy(Sim *s, Thread *t, const Ins *in) {
  if (in->mode == CP_COMMIT) {
    t->groups++;
  } else if (in->mode == CP_WAIT_ALL) {
    complete_copies(s, t, UINT32_MAX);
  } else if (in->mode == CP_WAIT) {
    uint64_t n = in->o[0].imm;
    complete_copies(s, t, n >= t->groups ? 0 : t->groups - (uint32_t)n);
  } else {
    uint64_t d = reg_get(s, t, in->o[0].cls, in->o[0].idx, in->line) + (uint64_t)in->o[0].off;
    uint64_t a = reg_get(s, t, in->o[1].cls, in->o[1].idx, in->line) + (uint64_t)in->o[1].off;
    uint8_t *dst = s->failed ? NULL : shared_at(s, t, in, d, 16);
    const uint8_t *src = dst ? global_at(s, in, a, 16, ACCESS_READ) : NULL;
    if (!src) return;
    if (t->ncopies == t->capcopies) {
      int cap = t->capcopies ? 2 * t->capcopies : 16;
      Copy *more = realloc(t->copies, sizeof *more * (size_t)cap);
      if (!more) {
        fail(s, in->line, "out of memory");
        return;
      }
      t->copies = more;
      t->capcopies = cap;
    }
    t->copies[t->ncopies++] = (Copy){dst, src, t->groups, in->line};
  }
}

/* An mbarrier, kept in its 8 bytes of shared memory: pending arrivals
 * (bits 0-19), expected arrivals (20-39), tx-count + 2^21 (40-61: it may go
 * below zero while bytes arrive before their phase's expect_tx), set
 * (62: initialized) and the phase's parity (63). */
typedef struct Mbar {
  int64_t pending, expected, tx;
  unsigned phase;
} Mbar;

static uint8_t *mbar_at(Sim *s, Thread *t, const Ins *in, const Opnd *o, Mbar *m) {
  uint64_t addr = reg_get(s, t, o->cls, o->idx, in->line) + (uint64_t)o->off;
  Ins local = *in;
  local.space = (addr >> 24) ? SPACE_CLUSTER : SPACE_SHARED;
  uint8_t *at = s->failed ? NULL : shared_at(s, t, &local, addr, 8);
  if (!at || !m) return at;
  uint64_t w;
  memcpy(&w, at, 8);
  if (!(w >> 62 & 1))
    return fail(s, in->line, "mbarrier at %#llx used before mbarrier.init", (unsigned long long)addr),
           NULL;
  *m = (Mbar){(int64_t)(w & 0xFFFFF), (int64_t)(w >> 20 & 0xFFFFF),
              (int64_t)(w >> 40 & 0x3FFFFF) - (1 << 21), (unsigned)(w >> 63)};
  return at;
}

/* Stores m, completing its phase where nothing is pending: arrivals, and
 * bytes (more bytes than expected is an error). */
static void mbar_put(Sim *s, const Ins *in, uint8_t *at, Mbar m) {
  if (m.pending < 0 || m.tx < -(1 << 20) || m.tx >= (1 << 20)) {
    fail(s, in->line, "mbarrier: %lld arrivals pending, tx-count %lld, out of range",
         (long long)m.pending, (long long)m.tx);
    return;
  }
  if (m.pending == 0 && m.tx < 0) {
    fail(s, in->line, "mbarrier: %lld bytes more than its phase expects", (long long)-m.tx);
    return;
  }
  if (m.pending == 0 && m.tx == 0) {
    m.phase ^= 1;
    m.pending = m.expected;
    s->progress++;
  }
  uint64_t w = (uint64_t)m.pending | (uint64_t)m.expected << 20 |
               (uint64_t)(m.tx + (1 << 21)) << 40 | 1ull << 62 | (uint64_t)m.phase << 63;
  s->changes++;
  memcpy(at, &w, 8);
}

/* mbarrier.init, arrive.expect_tx and try_wait.parity; st.async's bytes. */
static void mbarrier(Sim *s, Thread *t, const Ins *in) {
  Mbar m = {0, 0, 0, 0};
  if (in->op == OP_MBAR_INIT) {
    uint8_t *at = mbar_at(s, t, in, &in->o[0], NULL);
    uint64_t count = get(s, t, in, 1);
    if (at && (count < 1 || count >= (1 << 20)))
      fail(s, in->line, "mbarrier.init with a count of %llu", (unsigned long long)count);
    else if (at)
      mbar_put(s, in, at, (Mbar){(int64_t)count, (int64_t)count, 0, 0});
    return;
  }
  const Opnd *bar = &in->o[in->op == OP_ST ? 2 : 1];
  uint8_t *at = mbar_at(s, t, in, bar, &m);
  if (!at) return;
  if (in->op == OP_MBAR_WAIT) {
    s->poll_addr = (uint64_t)(uintptr_t)at;
    memcpy(&s->poll_value, at, 8);
    put(s, t, in, 0, m.phase != (get(s, t, in, 2) & 1));
    return;
  }
  if (in->op == OP_MBAR_ARRIVE) {
    m.tx += (int64_t)get(s, t, in, 2);
    m.pending--;
  } else { /* st.async: into the CTA whose mbarrier it completes */
    uint64_t data = reg_get(s, t, in->o[0].cls, in->o[0].idx, in->line),
             where = reg_get(s, t, bar->cls, bar->idx, in->line);
    if ((data >> 24 ? data >> 24 : (uint64_t)t->cta->rank + 1) !=
        (where >> 24 ? where >> 24 : (uint64_t)t->cta->rank + 1)) {
      fail(s, in->line, "st.async into one CTA completes an mbarrier of another");
      return;
    }
    m.tx -= (int64_t)in->vec * types[in->ty].bits / 8;
  }
  mbar_put(s, in, at, m);
}

/* mapa.shared::cluster d, a, rank: a's offset in the tj_smem of CTA rank. */
static void map_address(Sim *s, Thread *t, const Ins *in) {
  uint64_t a = get(s, t, in, 1), rank = get(s, t, in, 2), offset = a & 0xFFFFFF;
  int cluster = s->k->cluster;
  if (rank >= (uint64_t)cluster)
    fail(s, in->line, "mapa to CTA rank %llu of a cluster of %d", (unsigned long long)rank,
         cluster);
  else if (a >> 32 || (a >> 24) > (uint64_t)cluster || offset > (uint64_t)s->k->smem)
    fail(s, in->line, "mapa of %#llx, which is no address in tj_smem (%d bytes)",
         (unsigned long long)a, s->k->smem);
  else
    put(s, t, in, 0, (rank + 1) << 24 | offset);
}

/* mov, also packing registers into one ({lo, hi}) and unpacking. */
static void move(Sim *s, Thread *t, const Ins *in) {
  const Opnd *d = &in->o[0], *a = &in->o[1], *v = d->kind == K_VEC ? d : a;
  if (v->kind != K_VEC) {
    put(s, t, in, 0, get(s, t, in, 1));
    return;
  }
  int part = types[in->ty].bits / v->n;
  if (part == 0) {
    fail(s, in->line, "bad vector mov");
    return;
  }
  uint64_t x = v == d ? get(s, t, in, 1) : 0;
  for (int i = 0; i < v->n; i++) {
    if (v == d)
      reg_set(s, t, d->cls, d->vidx[i], (x >> (i * part)) & low_bits(part), in->line);
    else
      x |= (reg_get(s, t, a->cls, a->vidx[i], in->line) & low_bits(part)) << (i * part);
  }
  if (v == a) put(s, t, in, 0, x);
}

/* ---- execution -------------------------------------------------------------- */

/* Runs one instruction that needs no other thread. */
static void step(Sim *s, Thread *t, const Ins *in) {
  switch (in->op) {
  case OP_MOV: move(s, t, in); break;
  case OP_ADD:
  case OP_SUB:
  case OP_MUL:
  case OP_DIV:
  case OP_REM:
  case OP_MAX:
  case OP_MIN:
  case OP_AND:
  case OP_OR:
  case OP_XOR:
  case OP_SHL:
  case OP_SHR: put(s, t, in, 0, arith(s, in, get(s, t, in, 1), get(s, t, in, 2))); break;
  case OP_MAD:
  case OP_FMA:
    put(s, t, in, 0, ternary(s, in, get(s, t, in, 1), get(s, t, in, 2), get(s, t, in, 3)));
    break;
  case OP_NEG:
  case OP_ABS:
  case OP_NOT:
  case OP_RCP:
  case OP_EX2:
  case OP_LG2:
  case OP_CVT:
  case OP_CVTA: put(s, t, in, 0, unary(s, in, get(s, t, in, 1))); break;
  case OP_BFE:
    put(s, t, in, 0, bit_field(in, get(s, t, in, 1), get(s, t, in, 2), get(s, t, in, 3)));
    break;
  case OP_SELP: put(s, t, in, 0, get(s, t, in, 3) ? get(s, t, in, 1) : get(s, t, in, 2)); break;
  case OP_SETP: setp(s, t, in); break;
  case OP_LD: load(s, t, in); break;
  case OP_ST:
    store(s, t, in);
    if (in->mode == ST_ASYNC && !s->failed) mbarrier(s, t, in);
    break;
  case OP_MBAR_INIT:
  case OP_MBAR_ARRIVE:
  case OP_MBAR_WAIT: mbarrier(s, t, in); break;
  case OP_ATOM:
  case OP_RED: atomic(s, t, in); break;
  case OP_MAPA: map_address(s, t, in); break;
  case OP_CP: async_copy(s, t, in); break;
  case OP_FENCE:
  case OP_MEMBAR: break; /* the simulator is sequentially consistent */
  case OP_NANOSLEEP: break; /* time passes with the steps (%globaltimer) */
  default: fail(s, in->line, "unexpected instruction"); break;
  }
}

static bool guard_holds(Sim *s, Thread *t, const Ins *in) {
  if (in->guard < 0) return true;
  bool v = reg_get(s, t, C_PRED, (uint32_t)in->guard, in->line) != 0;
  return in->guard_neg ? !v : v;
}

/* ---- synchronization ---------------------------------------------------------- */

/* Completes the current barrier.cluster phase: checks that the lanes of
 * each warp arrived together where the arrive was .aligned, and releases
 * the threads waiting for it. */
static void complete_phase(Sim *s, Cta *first) {
  Cluster *cl = first->cluster;
  int n = s->k->threads;
  for (int r = 0; r < s->k->cluster; r++) {
    Cta *c = first + r;
    for (int i = 0; i < n && !s->failed; i++) {
      const Thread *lane0 = &c->t[i - i % 32];
      if (s->k->ins[lane0->arrive_pc].aligned && c->t[i].arrive_pc != lane0->arrive_pc) {
        s->cur_cta = c->id;
        s->cur_tid = i;
        fail(s, s->k->ins[c->t[i].arrive_pc].line,
             "barrier.cluster.arrive.aligned: lanes of warp %d of CTA %d arrive at different "
             "instructions (lines %d and %d)",
             i / 32, c->id, s->k->ins[lane0->arrive_pc].line, s->k->ins[c->t[i].arrive_pc].line);
      }
    }
    for (int i = 0; i < n; i++) {
      Thread *t = &c->t[i];
      if (t->state != T_CLUSTER) continue;
      t->state = T_RUN;
      t->arrived = 0;
      t->pc++;
    }
  }
  cl->phase++;
  cl->arrived = 0;
  s->progress++;
}

static void cluster_arrive(Sim *s, Thread *t, const Ins *in) {
  Cluster *cl = t->cta->cluster;
  if (t->arrived) {
    fail(s, in->line, "barrier.cluster.arrive twice without a wait (the arrive at line %d)",
         s->k->ins[t->arrive_pc].line);
    return;
  }
  if (cl->exit_arrivals <= cl->phase) {
    fail(s, in->line,
         "barrier.cluster.arrive: thread %d of CTA %d exited (line %d) without taking part in "
         "this phase of its cluster's barrier",
         cl->exit_tid, cl->exit_cta, cl->exit_line);
    return;
  }
  t->arrived = 1;
  t->arrive_pc = t->pc;
  t->arrivals++;
  if (cl->arrived++ == 0) cl->arrive_line = in->line;
  if (cl->arrived == cl->threads) complete_phase(s, t->cta - t->cta->rank);
}

/* True when the thread may go on; false when it blocks (or failed). */
static bool cluster_wait(Sim *s, Thread *t, const Ins *in) {
  if (!t->arrived)
    return fail(s, in->line, "barrier.cluster.wait without a barrier.cluster.arrive before it");
  if (t->cta->cluster->phase >= t->arrivals) {
    t->arrived = 0;
    return true;
  }
  t->state = T_CLUSTER;
  return false;
}

static void exit_thread(Sim *s, Thread *t, const Ins *in) {
  Cta *c = t->cta;
  Cluster *cl = c->cluster;
  t->state = T_DONE;
  c->live--;
  s->live--;
  s->progress++;
  if (t->ncopies)
    fail(s, in->line, "exits with %d cp.async copies pending (the first issued at line %d)",
         t->ncopies, t->copies[0].line);
  else if (t->arrived)
    fail(s, in->line, "exits between barrier.cluster.arrive (line %d) and barrier.cluster.wait",
         s->k->ins[t->arrive_pc].line);
  else if (cl->arrived)
    fail(s, in->line,
         "exits while its cluster's barrier (arrived at line %d) waits for it: the GPU would hang",
         cl->arrive_line);
  if (t->arrivals < cl->exit_arrivals) {
    cl->exit_arrivals = t->arrivals;
    cl->exit_cta = c->id;
    cl->exit_tid = t->tid;
    cl->exit_line = in->line;
  }
}

static void shuffle(Sim *s, Thread *warp, int lanes) {
  const Ins *in = &s->k->ins[warp[0].pc];
  uint64_t v[32];
  for (int l = 0; l < lanes; l++) v[l] = get(s, &warp[l], in, 1);
  uint64_t offset = get(s, &warp[0], in, 2);
  for (int l = 0; l < lanes && !s->failed; l++) {
    int from = l ^ (int)offset;
    put(s, &warp[l], in, 0, from < lanes ? v[from] : v[l]);
    warp[l].state = T_RUN;
    warp[l].pc++;
  }
}

/* Completes the bar.sync every thread of c waits at, and the shfl.sync of
 * each warp whose lanes all wait at it. */
static void complete_cta(Sim *s, Cta *c) {
  int n = s->k->threads;
  s->cur_cta = c->id;
  if (c->at_bar == n) {
    int pc = c->t[0].pc;
    for (int i = 1; i < n; i++)
      if (c->t[i].pc != pc) {
        fail(s, s->k->ins[pc].line,
             "bar.sync not reached by every thread (thread %d waits at line %d)", i,
             s->k->ins[c->t[i].pc].line);
        return;
      }
    for (int i = 0; i < n; i++) {
      c->t[i].state = T_RUN;
      c->t[i].pc++;
    }
    c->at_bar = 0;
    s->progress++;
  }
  for (int w = 0; w < n && c->at_shfl && !s->failed; w += 32) {
    int lanes = n - w < 32 ? n - w : 32;
    Thread *warp = &c->t[w];
    bool all = true;
    for (int l = 0; l < lanes && all; l++)
      all = warp[l].state == T_SHFL && warp[l].pc == warp[0].pc;
    if (!all) continue;
    shuffle(s, warp, lanes);
    c->at_shfl -= lanes;
    s->progress++;
  }
  s->cur_cta = -1;
}

/* ---- scheduling ---------------------------------------------------------------- */

enum { SLICE_STEPS = 256 };
static const int64_t default_max_steps = 400000000;

/* Why a time slice ended: used up; after a poll (Y_SPIN: one that read what
 * the thread's previous poll read, at the same instruction and address);
 * blocked; exited or failed (with s->failed). */
typedef enum Yield { Y_SLICE, Y_POLL, Y_SPIN, Y_BLOCK, Y_EXIT } Yield;

/* Runs t for one time slice. */
static Yield run_slice(Sim *s, Thread *t) {
  const Kernel *k = s->k;
  int64_t limit = s->launch->max_steps ? s->launch->max_steps : default_max_steps;
  for (int n = 0; n < SLICE_STEPS; n++) {
    if (t->pc >= k->count) return fail(s, 0, "ran past the end"), Y_EXIT;
    const Ins *in = &k->ins[t->pc];
    if (++s->steps > limit) return fail(s, in->line, "too many steps (endless loop?)"), Y_EXIT;
    switch (in->op) {
    case OP_SHFL:
      t->state = T_SHFL;
      t->cta->at_shfl++;
      return Y_BLOCK;
    case OP_BAR:
      t->state = T_BAR;
      t->cta->at_bar++;
      return Y_BLOCK;
    case OP_CLUSTER_ARRIVE:
      cluster_arrive(s, t, in);
      t->pc++;
      if (s->failed) return Y_EXIT;
      continue;
    case OP_CLUSTER_WAIT:
      if (!cluster_wait(s, t, in)) return s->failed ? Y_EXIT : Y_BLOCK;
      t->pc++;
      continue;
    default: break;
    }
    bool run = guard_holds(s, t, in);
    if (run && (in->op == OP_RET || in->op == OP_EXIT)) {
      exit_thread(s, t, in);
      return Y_EXIT;
    }
    if (run && in->op == OP_BRA) {
      t->pc = in->target;
      continue;
    }
    if (run) step(s, t, in);
    if (s->failed) return Y_EXIT;
    t->pc++;
    if (run && in->poll) {
      bool again =
          t->spin_pc == t->pc - 1 && t->poll_addr == s->poll_addr && t->poll_value == s->poll_value;
      t->spin_pc = t->pc - 1;
      t->poll_addr = s->poll_addr;
      t->poll_value = s->poll_value;
      return again ? Y_SPIN : Y_POLL;
    }
  }
  return Y_SLICE;
}

/* Appends to a message (printf-checked, never past its end). */
static void append(char *text, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void append(char *text, size_t size, const char *fmt, ...) {
  size_t used = strlen(text);
  if (used + 1 >= size) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text + used, size - used, fmt, ap);
  va_end(ap);
}

/* A CTA whose live threads all wait at bar.sync or shfl.sync that cannot
 * complete: the divergence, as a failure. */
static void explain_cta(Sim *s, Cta *c) {
  int n = s->k->threads;
  for (int i = 0; i < n; i++)
    if (c->t[i].state == T_RUN || c->t[i].state == T_CLUSTER) return;
  s->cur_cta = c->id;
  for (int w = 0; w < n && !s->failed; w += 32) {
    int lanes = n - w < 32 ? n - w : 32, first = -1;
    for (int l = 0; l < lanes && first < 0; l++)
      if (c->t[w + l].state == T_SHFL) first = w + l;
    for (int l = 0; first >= 0 && l < lanes && !s->failed; l++) {
      const Thread *t = &c->t[w + l];
      if (t->state == T_DONE)
        fail(s, s->k->ins[c->t[first].pc].line,
             "shfl.sync not reached by every lane of warp %d (lane %d has exited)", w / 32, l);
      else if (t->state != T_SHFL || t->pc != c->t[first].pc)
        fail(s, s->k->ins[c->t[first].pc].line,
             "shfl.sync not reached by every lane of warp %d (lane %d waits at line %d)", w / 32, l,
             s->k->ins[t->pc].line);
    }
  }
  int first = -1;
  for (int i = 0; i < n && first < 0; i++)
    if (c->t[i].state == T_BAR) first = i;
  for (int i = 0; first >= 0 && i < n && !s->failed; i++) {
    const Thread *t = &c->t[i];
    int line = s->k->ins[c->t[first].pc].line;
    if (t->state == T_DONE)
      fail(s, line, "bar.sync not reached by every thread (thread %d has exited)", i);
    else if (t->pc != c->t[first].pc)
      fail(s, line, "bar.sync not reached by every thread (thread %d waits at line %d)", i,
           s->k->ins[t->pc].line);
  }
  s->cur_cta = -1;
}

/* Threads stuck at one instruction, for the deadlock message. */
typedef struct Stuck {
  int state, pc, count, cta, tid;
} Stuck;

/* No thread can make progress: names where they are stuck. */
static void report_deadlock(Sim *s) {
  for (int i = 0; i < s->group && !s->failed; i++)
    if (s->ctas[i].live) explain_cta(s, &s->ctas[i]);
  if (s->failed) return;
  Stuck stuck[6];
  int nstuck = 0, others = 0;
  for (int i = 0; i < s->group; i++)
    for (int j = 0; j < s->k->threads; j++) {
      const Thread *t = &s->ctas[i].t[j];
      int pc = t->state == T_RUN && t->spin_pc >= 0 ? t->spin_pc : t->pc, e = 0;
      if (t->state == T_DONE) continue;
      while (e < nstuck && (stuck[e].state != t->state || stuck[e].pc != pc)) e++;
      if (e == nstuck && nstuck == 6) {
        others++;
        continue;
      }
      if (e == nstuck) stuck[nstuck++] = (Stuck){t->state, pc, 0, s->ctas[i].id, t->tid};
      stuck[e].count++;
    }
  char text[900] = "";
  for (int e = 0; e < nstuck; e++)
    append(text, sizeof text, "%s%d thread%s %s at line %d `%s` (first: CTA %d thread %d)",
           e ? "; " : "", stuck[e].count, stuck[e].count == 1 ? "" : "s",
           stuck[e].state == T_RUN ? "spin" : "wait", s->k->ins[stuck[e].pc].line,
           s->k->ins[stuck[e].pc].text, stuck[e].cta, stuck[e].tid);
  if (others) append(text, sizeof text, "; %d more threads elsewhere", others);
  for (int i = 0; i < s->group / s->k->cluster; i++)
    if (s->clusters[i].arrived) {
      append(text, sizeof text, "; barrier.cluster of cluster %d: %d of %d threads arrived",
             s->ctas[i * s->k->cluster].id / s->k->cluster, s->clusters[i].arrived,
             s->clusters[i].threads);
      break;
    }
  fail(s, nstuck ? s->k->ins[stuck[0].pc].line : 0, "deadlock: no thread can make progress: %s",
       text);
}

/* Runs the group's CTAs to the end: rounds of time slices, then the
 * synchronizations that can complete. A round in which no store or atom
 * changed memory, no thread blocked, exited or was released, and every
 * running thread ended its slice at a poll that read what its previous poll
 * read (same instruction, address and value) is a deadlock: nothing will
 * ever change. (Registers are not compared: a spin bounded by a counter and
 * nothing else would be taken for one.) */
static void run_group(Sim *s) {
  int n = s->k->threads;
  while (s->live > 0 && !s->failed) {
    uint64_t changes = s->changes, progress = s->progress;
    bool idle = true;
    for (int i = 0; i < s->group && !s->failed; i++) {
      Cta *c = &s->ctas[i];
      for (int j = 0; j < n && c->live && !s->failed; j++) {
        Thread *t = &c->t[j];
        if (t->state != T_RUN) continue;
        s->cur_cta = c->id;
        s->cur_tid = t->tid;
        if (run_slice(s, t) != Y_SPIN) idle = false;
      }
    }
    s->cur_cta = s->cur_tid = -1;
    for (int i = 0; i < s->group && !s->failed; i++)
      if (s->ctas[i].at_bar || s->ctas[i].at_shfl) complete_cta(s, &s->ctas[i]);
    if (!s->failed && s->live > 0 && idle && changes == s->changes && progress == s->progress)
      report_deadlock(s);
  }
}

/* ---- launch ---------------------------------------------------------------------- */

static bool check_launch(const Kernel *k, int nargs, const PtxsimLaunch *l, char *why,
                         size_t size) {
  bool workspace = k->workspace_param >= 0;
  if (k->threads < 1 || k->threads > 1024 || k->nparams != nargs + 1 + workspace)
    return bad(why, size, "bad kernel: %d threads, %d params for %d args", k->threads, k->nparams,
               nargs);
  if (k->smem < 0 && (l->dynamic_shared <= 0 || l->dynamic_shared >= (1 << 24)))
    return bad(why, size, "tj_smem is .extern: launch it with its dynamic_shared bytes");
  if (l->ctas < 1 || l->ctas % k->cluster)
    return bad(why, size, "a grid of %d CTAs is no whole number of clusters of %d", l->ctas,
               k->cluster);
  if (workspace != (l->workspace != NULL))
    return bad(why, size,
               workspace ? "the kernel has a tj_workspace parameter: launch it with one"
                         : "a workspace for a kernel without tj_workspace");
  return true;
}

/* A thread's register block: 64-bit values, 32-bit values, written flags. */
static void layout_registers(Sim *s) {
  const uint32_t *regs = s->k->regs;
  size_t at = 8 * ((size_t)regs[C_RD] + 1);
  s->value_at[C_RD] = 0;
  for (int c = 0; c < C_COUNT; c++)
    if (c != C_RD) s->value_at[c] = at, at += 4 * ((size_t)regs[c] + 1);
  for (int c = 0; c < C_COUNT; c++) s->set_at[c] = at, at += (size_t)regs[c] + 1;
  s->block = (at + 7) / 8 * 8;
}

static bool alloc_group(Sim *s) {
  int n = s->k->threads, clusters = s->group / s->k->cluster;
  size_t threads = (size_t)s->group * (size_t)n, smem = ((size_t)s->k->smem + 15) / 16 * 16 + 16;
  s->ctas = calloc((size_t)s->group, sizeof *s->ctas);
  s->clusters = calloc((size_t)clusters, sizeof *s->clusters);
  s->threads = calloc(threads, sizeof *s->threads);
  s->regs = malloc(threads * s->block);
  s->smem = malloc((size_t)s->group * smem);
  if (s->k->has_nc && !(s->written = calloc((size_t)s->nargs + 1, sizeof *s->written)))
    return false;
  if (!s->ctas || !s->clusters || !s->threads || !s->regs || !s->smem) return false;
  for (int i = 0; i < s->group; i++) {
    s->ctas[i].t = s->threads + (size_t)i * (size_t)n;
    s->ctas[i].smem = s->smem + (size_t)i * smem;
  }
  for (size_t i = 0; i < threads; i++) s->threads[i].regs = s->regs + i * s->block;
  return true;
}

static void init_group(Sim *s, int base) {
  const Kernel *k = s->k;
  size_t set_from = s->set_at[0], set_bytes = s->block - set_from;
  for (int i = 0; i < s->group; i++) {
    Cta *c = &s->ctas[i];
    c->id = base + i;
    c->rank = c->id % k->cluster;
    c->cluster = &s->clusters[i / k->cluster];
    c->live = k->threads;
    c->at_bar = c->at_shfl = 0;
    if (k->smem) memset(c->smem, 0xA5, (size_t)k->smem);
    for (int j = 0; j < k->threads; j++) {
      Thread *t = &c->t[j];
      memset(t->regs + set_from, 0, set_bytes);
      t->cta = c;
      t->pc = t->arrive_pc = 0;
      t->tid = j;
      t->spin_pc = -1;
      t->arrivals = 0;
      t->ncopies = 0;
      t->groups = 0;
      t->state = T_RUN;
      t->arrived = 0;
    }
  }
  for (int i = 0; i < s->group / k->cluster; i++) {
    memset(&s->clusters[i], 0, sizeof s->clusters[i]);
    s->clusters[i].threads = k->cluster * k->threads;
    s->clusters[i].exit_arrivals = UINT32_MAX;
  }
  s->live = s->group * k->threads;
}

static void free_group(Sim *s) {
  size_t threads = s->threads ? (size_t)s->group * (size_t)s->k->threads : 0;
  for (size_t i = 0; i < threads; i++) free(s->threads[i].copies);
  for (int i = 0; s->written && i <= s->nargs; i++) free(s->written[i]);
  free(s->written);
  free(s->ctas);
  free(s->clusters);
  free(s->threads);
  free(s->regs);
  free(s->smem);
}

bool ptxsim_launch(const char *ptx, const tj_arg *args, int nargs, const PtxsimLaunch *launch,
                   PtxsimStats *stats, char *why, size_t why_size) {
  Kernel *k = calloc(1, sizeof *k);
  Sim s;
  memset(&s, 0, sizeof s);
  s.k = k;
  s.args = args;
  s.nargs = nargs;
  s.launch = launch;
  s.stats = stats;
  s.cur_cta = s.cur_tid = -1;
  s.why = why;
  s.why_size = why_size;
  why[0] = '\0';
  if (stats) memset(stats, 0, sizeof *stats);
  bool ok =
      k && parse_kernel(k, ptx, why, why_size) && check_launch(k, nargs, launch, why, why_size);
  if (ok) {
    if (k->smem < 0) k->smem = launch->dynamic_shared;
    s.group = k->workspace_param >= 0 ? launch->ctas : k->cluster;
    layout_registers(&s);
    if (!alloc_group(&s)) ok = bad(why, why_size, "out of memory");
  }
  for (int base = 0; ok && !s.failed && base < launch->ctas; base += s.group) {
    init_group(&s, base);
    run_group(&s);
  }
  if (stats) stats->steps = s.steps;
  free_group(&s);
  if (k) free(k->ins);
  free(k);
  return ok && !s.failed;
}

bool ptxsim_run_spec(tj_spec *s, int arch, const tj_arg *args, int nargs, int64_t programs,
                     int64_t max_steps, PtxsimStats *stats, char *why, size_t why_size) {
  tj_codegen_options o = {arch, 0, 0};
  tj_kernel_info info;
  char *ptx = NULL;
  if (tj_emit_ptx(s, &o, &ptx, &info) != TJ_OK) {
    snprintf(why, why_size, "emit: %s", tj_spec_error(s));
    return false;
  }
  const tj_launch_shape *shape = &info.shape;
  int64_t units = (programs + shape->programs_per_cta - 1) / shape->programs_per_cta;
  units = units > 2 ? units / 2 : units > 0 ? units : 1;
  size_t ws_bytes = TJ_WORKSPACE_COUNTERS + (size_t)units * (size_t)shape->workspace_bytes;
  void *ws = shape->workspace_bytes ? calloc(1, ws_bytes) : NULL;
  PtxsimLaunch launch = {programs,  (int)units * shape->ctas_per_program, ws, ws ? ws_bytes : 0,
                         max_steps, shape->dynamic_shared_bytes};
  bool ok = (ws || !shape->workspace_bytes) &&
            ptxsim_launch(ptx, args, nargs, &launch, stats, why, why_size);
  if (shape->workspace_bytes && !ws) snprintf(why, why_size, "no memory for the workspace");
  free(ws);
  tj_free(ptx);
  return ok;
}

bool ptxsim_run(const char *ptx, const tj_arg *args, int nargs, int64_t programs, int ctas,
                char *why, size_t why_size) {
  PtxsimLaunch launch = {programs, ctas, NULL, 0, 0, 0};
  return ptxsim_launch(ptx, args, nargs, &launch, NULL, why, why_size);
}
