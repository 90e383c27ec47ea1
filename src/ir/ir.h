/*
 * ir.h — the internal header of the IR subsystem (src/ir).
 *
 * A program is a flat array of uniform instructions (IrInst) and a table of
 * values indexed by small integers. Structured loops are spelled with
 * FOR / ITER ... YIELD / ENDFOR markers inside the same array, so every pass
 * is a single forward walk. Per-pass side data lives in arrays indexed by
 * value or instruction.
 *
 * Sections below follow the files that define them:
 *   util.c       allocation, text buffers, errors, hashing
 *   number.c     numbers as text, the same in every locale
 *   ops.c        the op table expanded into names, kinds and type rules
 *   program.c    program storage, constants, append, copy
 *   types.c      the type rules shared by builder, parser and verifier
 *   builder.c    the public builder API (include/tilejit.h)
 *   verify.c     the verifier
 *   print.c      the text printer
 *   parse.c      the text parser
 *   specialize.c binding constants, the specialization key
 *   interp.c     the CPU interpreter
 *   softmax.c    the embedded softmax templates
 */
#ifndef TJ_IR_H
#define TJ_IR_H

#include "tilejit.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define TJ_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define TJ_PRINTF(fmt, args)
#endif

#define TJ_COUNTOF(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------- util.c */

void *tj_alloc(size_t size);                /* zeroed; NULL on failure */
void *tj_realloc(void *p, size_t size);     /* NULL on failure, p untouched */
char *tj_strdup(const char *s);
/* Tests only: makes the nth allocation from now on this thread (tj_alloc,
 * tj_realloc, tj_strdup, text buffers) fail; 0 disarms. Returns how many
 * were left before the failure: 0 if it happened (or none was armed). */
long tj_test_fail_allocation(long nth);
/* Grows *items (of elem bytes each) so that it holds at least need; false on OOM. */
bool tj_grow(void **items, int *cap, int need, size_t elem);

/* A growable, always NUL-terminated text buffer. On allocation failure it
 * sets oom and drops further text, so callers check once at the end. */
typedef struct TjBuf {
  char *data;
  size_t len, cap;
  bool oom;
} TjBuf;

void buf_init(TjBuf *b);
void buf_free(TjBuf *b);
void buf_printf(TjBuf *b, const char *fmt, ...) TJ_PRINTF(2, 3);
void buf_vprintf(TjBuf *b, const char *fmt, va_list ap) TJ_PRINTF(2, 0);
void buf_puts(TjBuf *b, const char *s);
void buf_putn(TjBuf *b, const char *s, size_t n); /* n bytes of s */
/* v in decimal at out, '-' first where negative; returns the end
 * (unterminated). Inline: the code generator writes every register
 * number and offset with it. */
static inline char *tj_decimal(char *out, int64_t v) {
  uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  char digits[20];
  int n = 0;
  if (v < 0) *out++ = '-';
  do digits[n++] = (char)('0' + u % 10);
  while ((u /= 10) != 0);
  while (n) *out++ = digits[--n];
  return out;
}
/* fmt's text at out (at most size bytes, its NUL included) when it uses only
 * %s, %d, %u, %lld and %%, in one pass; (size_t)-1 for any other
 * conversion, a NULL string or text that does not fit, which the caller
 * then formats with vsnprintf. buf_vprintf's and the emitter's fast path. */
size_t tj_format(char *out, size_t size, const char *fmt, va_list ap);
/* Hands the text over to the caller (release with tj_free); the buffer is reset. */
char *buf_take(TjBuf *b);

/* Error messages kept on handles. */
#define TJ_ERROR_MAX 1024
void tj_set_error(char *dst, const char *fmt, ...) TJ_PRINTF(2, 3);

uint64_t tj_fnv1a(const void *data, size_t len, uint64_t seed);
#define TJ_FNV_SEED 0xcbf29ce484222325ull

/* ----------------------------------------------------------- number.c */

/* Shortest decimal text that reads back as the same double, in any locale
 * ("0.5", "-0", "1e+300", "inf", "-inf", "nan", "-nan"). */
void tj_format_double(char *out, size_t size, double v);
/* snprintf's "%.*g" in the C locale (a '.' whatever the process's locale). */
void tj_format_g(char *out, size_t size, int digits, double v);
/* strtod in the C locale over exactly len bytes; false unless it reads them
 * all (or len is 0 or over 128). Overflow gives +-inf, underflow 0. */
bool tj_parse_double(const char *s, size_t len, double *out);

typedef enum IrDecimal { DECIMAL_INTEGER, DECIMAL_FRACTION, DECIMAL_TOO_BIG } IrDecimal;
/* The exact integer a decimal literal (digits [. digits] [e [+-] digits],
 * unsigned, at most 128 bytes) stands for, negated when neg: "1.5e3" is
 * 1500; "0.5" and "1e-999" are fractions; past int64 is too big. */
IrDecimal ir_decimal_integer(const char *s, size_t len, bool neg, int64_t *out);
/* A decimal integer for the tools' arguments: [-]digits and nothing else
 * (no blanks, no '+', no octal or hex: "010" is ten), within [lo, hi]. */
bool tj_parse_decimal(const char *text, int64_t lo, int64_t hi, int64_t *out);

/* ------------------------------------------------------------- ops.c */

typedef enum IrKind { KIND_SOURCE, KIND_ELEMENTWISE, KIND_MEMORY, KIND_REDUCE, KIND_CONTROL } IrKind;

typedef enum IrRule {
  RULE_I32_SCALAR, /* no operands; an i32 scalar */
  RULE_DECLARED,   /* the result type is given (param, const, arange) */
  RULE_ARITH,      /* numeric (i32, i64, f32) operands of one elem; broadcast */
  RULE_FLOAT1,     /* one f32 operand */
  RULE_FLOAT2,     /* two f32 operands; broadcast */
  RULE_INT2,       /* two int (i32, i64) operands of one elem; broadcast */
  RULE_COMPARE,    /* two numeric operands of one elem; a pred result */
  RULE_LOGIC,      /* two pred operands */
  RULE_SELECT,     /* pred, then two of one elem */
  RULE_CAST,       /* numeric to numeric, shape kept */
  RULE_PTR_ADD,    /* pointer and an int scalar */
  RULE_LOAD,       /* pointer, int tile offsets, [pred mask], [scalar other] */
  RULE_STORE,      /* pointer, int tile offsets, value of the pointee, [pred mask] */
  RULE_REDUCE,     /* f32 or i32 tile to a scalar */
  RULE_FOR,        /* three int scalars of one elem */
  RULE_ITER,       /* a scalar, directly after for or iter */
  RULE_YIELD,      /* an iter of the innermost loop and its next value */
  RULE_ENDFOR
} IrRule;

typedef struct IrOpInfo {
  const char *name;
  int min_args, max_args;
  IrKind kind;
  IrRule rule;
  const char *doc;
} IrOpInfo;

extern const IrOpInfo ir_ops[TJ_OP_COUNT];
/* The op with this text name, or -1. */
int ir_op_lookup(const char *name, size_t len);
/* Whether the op defines a result value. */
bool ir_op_has_result(tj_op op);

const char *ir_elem_name(tj_elem e); /* "i32", "DTYPE", ... */
int ir_elem_lookup(const char *name, size_t len); /* -1 if none */
bool ir_elem_is_float(tj_elem e);    /* f32, f16, bf16, DTYPE */
bool ir_elem_is_int(tj_elem e);      /* i32, i64 */
tj_elem ir_dtype_elem(tj_dtype d);
const char *ir_dtype_name(tj_dtype d);
int ir_dtype_size(tj_dtype d);

/* ---------------------------------------------------------- program.c */

#define IR_NONE (-1)
#define IR_MAX_ARGS 4
#define IR_MAX_VALUES (1 << 20)
/* The longest tile: 2^30 elements, so that every element index fits i32. */
#define IR_MAX_TILE (1 << 30)
/* Parameters a program may have: with the hidden ones (the workspace, the
 * instance count), 8 bytes each, they stay well inside the 4 KB a kernel's
 * parameters had before CUDA 12.1. */
#define IR_MAX_PARAMS 256

typedef struct IrInst {
  uint8_t op;               /* tj_op */
  int32_t result;           /* value index, or IR_NONE */
  int32_t args[IR_MAX_ARGS]; /* value indices, IR_NONE past the last */
  int nargs;
  double fimm;  /* CONST: the value */
  int64_t iimm; /* PARAM: parameter index; CONSTEXPR: constant index; FOR: matching ENDFOR
                   (0 while the loop is open) */
} IrInst;

typedef struct IrConst {
  char *name;
  bool bound;    /* has a value: a default from the text, or a specialization */
  int64_t value;
} IrConst;

struct tj_program {
  char *name;
  uint32_t tag; /* stamped into every tj_value handed out */
  IrInst *insts;
  int ninsts, cap_insts;
  tj_type *types; /* per value */
  int32_t *defs;  /* per value: defining instruction */
  int32_t *scopes; /* per value: the FOR instruction it lives in, or IR_NONE at top level */
  int nvalues, cap_values;
  IrConst *consts;
  int nconsts, cap_consts;
  char **params; /* per parameter: its name */
  int nparams, cap_params;
  int nparam_insts; /* PARAM instructions so far */
  /* Builder state: the stack of open FOR instructions. */
  int32_t *open_loops;
  int nopen, cap_open;
  bool specialized; /* constants bound, DTYPE replaced */
  tj_dtype dtype;   /* when specialized */
  char error[TJ_ERROR_MAX];
};

tj_program *ir_program_new(const char *name);
void ir_program_free(tj_program *p);
tj_program *ir_program_copy(const tj_program *p);
/* Sets p->error and returns status, for `return ir_fail(p, ...)`. */
tj_status ir_fail(tj_program *p, tj_status status, const char *fmt, ...) TJ_PRINTF(3, 4);

int ir_const_find(const tj_program *p, const char *name, size_t len); /* -1 if none */
tj_status ir_const_add(tj_program *p, const char *name, size_t len, int *index);
int ir_param_add(tj_program *p, const char *name, size_t len); /* -1 on OOM */
/* Names of kernels, constants and parameters: [A-Za-z_][A-Za-z0-9_]*, at most 63 bytes. */
bool ir_valid_identifier(const char *name, size_t len);

tj_value ir_value_handle(const tj_program *p, int index);
/* The index of a handle of p, or -1 if it is not one (another program, 0, junk). */
int ir_value_index(const tj_program *p, tj_value v);

/* The one way instructions enter a program (builder and parser alike): it
 * checks the operands against the op's rule (types.c), infers the result type
 * (declared is used for RULE_DECLARED and CAST, and otherwise, when its shape
 * is not 0xff, must equal the inferred type), and appends. */
typedef struct IrAppend {
  tj_op op;
  int32_t args[IR_MAX_ARGS];
  int nargs;
  tj_type declared; /* shape 0xff: none given */
  double fimm;
  int64_t iimm;
} IrAppend;
tj_status ir_append(tj_program *p, const IrAppend *a, int32_t *result);
tj_type ir_no_type(void);

/* ------------------------------------------------------------ types.c */

bool ir_type_equal(tj_type a, tj_type b);
/* "tile<f32,BLOCK>"; tiles of a specialized program print their constant's name too. */
void ir_type_format(const tj_program *p, tj_type t, char *out, size_t size);
/* Checks instruction operands (value indices, already known to be defined
 * and in scope) against the op's rule and computes the result type. On
 * failure writes why into why (without the instruction) and returns false. */
bool ir_infer(const tj_program *p, tj_op op, const int32_t *args, int nargs, tj_type declared,
              tj_type *result, char *why, size_t why_size);
/* The one rule for the value of a const of elem e, for the builder and the
 * parser alike: i32 and i64 take integers of their range; f32 takes any
 * value that rounds to a finite float, and inf, -inf and NaN given as such.
 * On success *stored is what the program keeps: the value rounded to f32
 * (a NaN keeps its sign and the payload an f32 holds), or the integer (0
 * for -0). On failure *why is the reason, to follow the value in a message
 * ("is out of range for f32"). */
bool ir_const_immediate(tj_elem e, double v, double *stored, const char **why);

/* ----------------------------------------------------------- verify.c */

tj_status ir_verify(tj_program *p);

/* ------------------------------------------------------------ print.c */

/* Appends the canonical text of p. */
void ir_print(const tj_program *p, TjBuf *out);
/* Appends the text of one instruction (no newline), as the printer writes it. */
void ir_print_inst(const tj_program *p, int inst, TjBuf *out);

/* ------------------------------------------------------------ parse.c */

tj_status ir_parse(const char *text, size_t length, tj_program **out);

/* ------------------------------------------------------- specialize.c */

struct tj_spec {
  tj_program *prog; /* specialized copy */
  char *key;
  uint64_t hash;
  tj_dtype dtype;
  int64_t block;
  int num_warps;
  int align;
  int cluster; /* CLUSTER, >= 1 */
  int split;   /* SPLIT, >= 1 */
  bool phased; /* vectors from each instance's own 16-byte phase (tj_spec_options) */
  int stage;   /* STAGE, 0: none (tj_spec_options) */
  int stash;   /* STASH: the stash's most bytes a CTA, 0: all it needs */
  int multiple; /* DIV: every i32 parameter is a multiple of it, >= 1 (tj_spec_options) */
  char error[TJ_ERROR_MAX];
};

/* The value of a constant in a specialized program. */
int64_t ir_const_value(const tj_program *p, int index);
/* The bound length of a tile type in a specialized program. */
int64_t ir_tile_len(const tj_program *p, tj_type t);

/* ----------------------------------------------------------- interp.c */

/* (public: tj_interpret) */

/* ---------------------------------------------------------- softmax.c */

/* The template texts, embedded at build time from templates/. */
extern const char tj_template_softmax[];
extern const char tj_template_softmax_online[];
extern const char tj_template_log_softmax[];
extern const char tj_template_log_softmax_online[];
extern const char tj_template_softmax_backward[];
extern const char tj_template_softmax_backward_online[];
extern const char tj_template_masked_softmax[];
extern const char tj_template_masked_softmax_online[];

#endif /* TJ_IR_H */
