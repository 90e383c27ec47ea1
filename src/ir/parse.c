/*
 * parse.c — reads the text form that print.c writes (see there for an
 * example) back into a program. It is a line parser: a cursor walks the
 * text one line at a time, and each line is a kernel line, a constant
 * declaration or one instruction, read by a few small recursive-descent
 * functions (types, immediates, operand lists). Nothing recurses on the
 * input, so arbitrarily deep or long garbage cannot exhaust the stack.
 *
 * Value names (%x) map to value indices through a hash table whose keys
 * point into the text. Instructions enter the program through ir_append,
 * which owns every type and loop-structure rule; its messages get the
 * instruction's "LINE:COL: " in front and keep their status. Syntax errors
 * are TJ_ERR_PARSE with "LINE:COL: expected ..." (1-based, the column of
 * the offending token). The text need not be NUL-terminated; bytes past
 * `length` are never read, and a NUL byte within it is an error.
 */
#include "ir/ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN   63             /* kernel, constant and parameter names */
#define NUMBER_MAX_LEN 128            /* the longest numeric literal */
#define SHOWN_MAX      64             /* the most of a name quoted in a message */

/* A span of the text: its bytes and where it starts. */
typedef struct Token {
  const char *s;
  size_t len;
  size_t pos;
} Token;

/* Walks the text line by line; pos never passes line_end. */
typedef struct Cursor {
  const char *text;
  size_t length;
  size_t pos;
  size_t line_start, line_end; /* the current line, without its '\n' */
  size_t line;                 /* 1-based */
} Cursor;

typedef struct NameSlot {
  const char *name; /* into the text, with its '%'; NULL: empty slot */
  size_t len;
  int32_t value;
} NameSlot;

/* Value names to value indices: open addressing, at most half full. */
typedef struct Names {
  NameSlot *slots;
  size_t cap, count;
} Names;

typedef struct Where {
  size_t line, col;
} Where;

typedef struct Parser {
  Cursor c;
  tj_program *p;
  Names names;
  Where *loops; /* where each open for is */
  int nloops, cap_loops;
  bool named;   /* the kernel line has been read */
  bool in_body; /* an instruction has been read */
} Parser;

/* One instruction line, as read so far. */
typedef struct Line {
  IrAppend a;
  size_t start; /* its first byte */
  Token result; /* %name, or len 0 */
  Token param;  /* param's name */
} Line;

/* ---- errors ------------------------------------------------------------ */

static int shown(size_t len) {
  return len > SHOWN_MAX ? SHOWN_MAX : (int)len;
}

static tj_status fail_at(Parser *ps, tj_status st, size_t pos, const char *fmt, ...)
    TJ_PRINTF(4, 5);
static tj_status fail_at(Parser *ps, tj_status st, size_t pos, const char *fmt, ...) {
  char msg[TJ_ERROR_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ir_fail(ps->p, st, "%zu:%zu: %s", ps->c.line, pos - ps->c.line_start + 1, msg);
}

static tj_status out_of_memory(Parser *ps) {
  return ir_fail(ps->p, TJ_ERR_OUT_OF_MEMORY, "out of memory");
}

/* Puts "LINE:COL: " in front of the message a callee left on the program. */
static tj_status prefix_error(Parser *ps, tj_status st, size_t pos) {
  char msg[TJ_ERROR_MAX];
  if (st == TJ_ERR_OUT_OF_MEMORY) return out_of_memory(ps);
  memcpy(msg, ps->p->error, sizeof msg);
  msg[sizeof msg - 1] = '\0';
  return fail_at(ps, st, pos, "%s", msg);
}

/* ---- the cursor ---------------------------------------------------------- */

static void cursor_start_line(Cursor *c, size_t at) {
  const char *nl = memchr(c->text + at, '\n', c->length - at);
  c->pos = c->line_start = at;
  c->line_end = nl ? (size_t)(nl - c->text) : c->length;
}

/* Moves to the next line; false at the end of the text. */
static bool cursor_next_line(Cursor *c) {
  if (c->line_end >= c->length) {
    c->pos = c->line_end;
    return false;
  }
  c->line++;
  cursor_start_line(c, c->line_end + 1);
  return true;
}

/* The next byte of the line, or -1 at its end. */
static int peek(const Cursor *c) {
  return c->pos < c->line_end ? (unsigned char)c->text[c->pos] : -1;
}

/* Skips blanks; a comment runs to the end of the line. */
static void skip_blank(Cursor *c) {
  for (int ch = peek(c); ch == ' ' || ch == '\t' || ch == '\r' || ch == '#'; ch = peek(c))
    c->pos = ch == '#' ? c->line_end : c->pos + 1;
}

static bool at_line_end(Cursor *c) {
  skip_blank(c);
  return c->pos == c->line_end;
}

static bool is_alpha(int ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
}
static bool is_digit(int ch) {
  return ch >= '0' && ch <= '9';
}
static bool is_word_char(int ch) {
  return is_alpha(ch) || is_digit(ch);
}
static bool is_name_char(int ch) {
  return is_word_char(ch) || ch == '.';
}

static Token scan(Cursor *c, bool (*ok)(int)) {
  Token t = {c->text + c->pos, 0, c->pos};
  while (ok(peek(c)))
    c->pos++;
  t.len = c->pos - t.pos;
  return t;
}

/* An identifier: [A-Za-z_][A-Za-z0-9_]*. */
static bool take_word(Cursor *c, Token *t) {
  skip_blank(c);
  if (!is_alpha(peek(c))) return false;
  *t = scan(c, is_word_char);
  return true;
}

/* A value name: %[A-Za-z0-9_.]+, kept with its '%'. */
static bool take_value_name(Cursor *c, Token *t) {
  skip_blank(c);
  size_t at = c->pos;
  if (peek(c) != '%') return false;
  c->pos++;
  if (!is_name_char(peek(c))) {
    c->pos = at;
    return false;
  }
  scan(c, is_name_char);
  *t = (Token){c->text + at, c->pos - at, at};
  return true;
}

static bool take_char(Cursor *c, char ch) {
  skip_blank(c);
  if (peek(c) != (unsigned char)ch) return false;
  c->pos++;
  return true;
}

static bool token_is(Token t, const char *s) {
  return strlen(s) == t.len && memcmp(t.s, s, t.len) == 0;
}

/* "LINE:COL: expected WHAT" at the next token. */
static tj_status expected(Parser *ps, const char *what) {
  skip_blank(&ps->c);
  return fail_at(ps, TJ_ERR_PARSE, ps->c.pos, "expected %s", what);
}

static tj_status expect_char(Parser *ps, char ch, const char *what) {
  return take_char(&ps->c, ch) ? TJ_OK : expected(ps, what);
}

static tj_status expect_line_end(Parser *ps, const char *what) {
  return at_line_end(&ps->c) ? TJ_OK : expected(ps, what);
}

/* ---- value names ------------------------------------------------------------ */

/* The slot holding name, or the empty slot where it would go (cap > 0). */
static NameSlot *names_slot(const Names *n, const char *s, size_t len) {
  size_t mask = n->cap - 1;
  for (size_t i = tj_fnv1a(s, len, TJ_FNV_SEED) & mask;; i = (i + 1) & mask) {
    NameSlot *slot = &n->slots[i];
    if (!slot->name || (slot->len == len && memcmp(slot->name, s, len) == 0)) return slot;
  }
}

/* The value a name stands for, or -1. */
static int32_t names_find(const Names *n, Token t) {
  if (n->cap == 0) return -1;
  const NameSlot *slot = names_slot(n, t.s, t.len);
  return slot->name ? slot->value : -1;
}

static bool names_grow(Names *n) {
  Names bigger = {NULL, n->cap ? n->cap * 2 : 64, n->count};
  if (!(bigger.slots = tj_alloc(bigger.cap * sizeof *bigger.slots))) return false;
  for (size_t i = 0; i < n->cap; i++)
    if (n->slots[i].name) *names_slot(&bigger, n->slots[i].name, n->slots[i].len) = n->slots[i];
  tj_free(n->slots);
  *n = bigger;
  return true;
}

/* Adds a name that is not in the table yet; false when out of memory. */
static bool names_put(Names *n, Token t, int32_t value) {
  if ((n->count + 1) * 2 > n->cap && !names_grow(n)) return false;
  NameSlot *slot = names_slot(n, t.s, t.len);
  *slot = (NameSlot){t.s, t.len, value};
  n->count++;
  return true;
}

/* ---- numbers ---------------------------------------------------------------- */

/* Decimal digits to an int64 (negated when neg); false when out of range. */
static bool digits_to_int(const char *s, size_t len, bool neg, int64_t *out) {
  uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, v = 0;
  for (size_t i = 0; i < len; i++) {
    uint64_t d = (uint64_t)(s[i] - '0');
    if (v > (limit - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
  return true;
}

/* An integer: -?[0-9]+, not followed by a name character. */
static tj_status parse_int(Parser *ps, int64_t *out) {
  Cursor *c = &ps->c;
  skip_blank(c);
  size_t start = c->pos;
  bool neg = take_char(c, '-');
  Token digits = scan(c, is_digit);
  if (digits.len == 0 || is_name_char(peek(c))) {
    c->pos = start;
    return expected(ps, "an integer");
  }
  if (!digits_to_int(digits.s, digits.len, neg, out))
    return fail_at(ps, TJ_ERR_PARSE, start, "integer out of range");
  return TJ_OK;
}

static bool number_char(int ch) {
  return is_name_char(ch) || ch == '+' || ch == '-';
}

/* Whether s is digits [. digits] [e [+-] digits] with a digit before the e. */
static bool is_decimal(const char *s, size_t len) {
  size_t i = 0, mantissa = 0;
  while (i < len && is_digit(s[i])) i++, mantissa++;
  if (i < len && s[i] == '.')
    for (i++; i < len && is_digit(s[i]); i++)
      mantissa++;
  if (mantissa == 0) return false;
  if (i == len) return true;
  if (s[i] != 'e' && s[i] != 'E') return false;
  if (++i < len && (s[i] == '+' || s[i] == '-')) i++;
  size_t exponent = i;
  while (i < len && is_digit(s[i]))
    i++;
  return i == len && i > exponent;
}

/* A const the type refuses: "LINE:COL: const: TEXT REASON", at the number,
 * with the builder's status and reason (ir_const_immediate). */
static tj_status refuse_const(Parser *ps, size_t start, const char *reason) {
  size_t len = ps->c.pos - start;
  return fail_at(ps, TJ_ERR_TYPE, start, "const: %.*s%s %s", shown(len), ps->c.text + start,
                 len > SHOWN_MAX ? "..." : "", reason);
}

/* A literal's value: inf, nan or a decimal, read the same in every locale.
 * A decimal too large for a double is refused rather than made infinite. */
static tj_status literal_value(Parser *ps, size_t start, Token t, bool neg, tj_elem e,
                               double *out) {
  if (token_is(t, "inf"))
    *out = INFINITY;
  else if (token_is(t, "nan"))
    *out = NAN;
  else if (!tj_parse_double(t.s, t.len, out) || isinf(*out))
    return refuse_const(ps, start, e == TJ_F32 ? "is out of range for f32" : "is out of range");
  if (neg) *out = -*out;
  return TJ_OK;
}

/* For i32 and i64: the exact integer the decimal stands for, which must be
 * one ("1e-999" is not 0) and be held exactly by the double the IR keeps
 * (every integer up to 2^53 is; 9007199254740993 is not). */
static tj_status integer_value(Parser *ps, size_t start, Token t, bool neg, tj_elem e,
                               double *out) {
  int64_t v;
  if (ir_decimal_integer(t.s, t.len, neg, &v) != DECIMAL_INTEGER)
    return refuse_const(ps, start, e == TJ_I32 ? "is not a value of i32" : "is not a value of i64");
  *out = (double)v;
  if (*out >= 0x1p63 || (int64_t)*out != v)
    return refuse_const(ps, start,
                        "is not held exactly: integer constants are doubles, exact "
                        "up to 2^53");
  return TJ_OK;
}

static int hex_digit(char ch) {
  if (is_digit(ch)) return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

/* 0x and 1 to 8 hex digits. */
static bool hex32(Token t, uint32_t *out) {
  if (t.len < 3 || t.len > 10 || t.s[0] != '0' || (t.s[1] != 'x' && t.s[1] != 'X')) return false;
  *out = 0;
  for (size_t i = 2; i < t.len; i++) {
    if (hex_digit(t.s[i]) < 0) return false;
    *out = *out << 4 | (uint32_t)hex_digit(t.s[i]);
  }
  return true;
}

/* nan:0xHHHHHHHH after "nan": the bits of an f32 quiet NaN, sign included. */
static tj_status parse_nan_bits(Parser *ps, size_t start, bool signed_text, double *out) {
  Cursor *c = &ps->c;
  c->pos++; /* ':' */
  Token hex = scan(c, is_name_char);
  uint32_t bits;
  if (signed_text)
    return fail_at(ps, TJ_ERR_PARSE, start, "a NaN's sign is in its bits: expected nan:0x...");
  if (!hex32(hex, &bits))
    return fail_at(ps, TJ_ERR_PARSE, hex.pos, "expected the bits of an f32 NaN (nan:0x7fc00001)");
  if ((bits & 0x7fc00000u) != 0x7fc00000u)
    return fail_at(ps, TJ_ERR_PARSE, hex.pos,
                   "0x%08lx is not a quiet f32 NaN (exponent all ones, top mantissa bit set)",
                   (unsigned long)bits);
  float f;
  memcpy(&f, &bits, sizeof f);
  *out = (double)f; /* exact: converting back to float gives the same bits */
  return TJ_OK;
}

/* The value of const, exactly as the text gives it: integers for i32 and
 * i64, inf and nan by name, other NaNs by their bits; then the builder's
 * rule for the type (ir_const_immediate), which also rounds f32 values. */
static tj_status parse_number(Parser *ps, tj_type type, double *out) {
  Cursor *c = &ps->c;
  tj_elem e = (tj_elem)type.elem;
  skip_blank(c);
  size_t start = c->pos;
  bool neg = peek(c) == '-';
  if (neg || peek(c) == '+') c->pos++;
  Token t = scan(c, number_char);
  bool special = token_is(t, "inf") || token_is(t, "nan");
  tj_status st;
  if (token_is(t, "nan") && peek(c) == ':') {
    st = parse_nan_bits(ps, start, start != t.pos, out);
  } else if (!special && !is_decimal(t.s, t.len)) {
    c->pos = start;
    return expected(ps, "a number");
  } else if (t.len > NUMBER_MAX_LEN) {
    return fail_at(ps, TJ_ERR_PARSE, start, "number is too long");
  } else {
    st = !special && ir_elem_is_int(e) ? integer_value(ps, start, t, neg, e, out)
                                       : literal_value(ps, start, t, neg, e, out);
  }
  const char *why;
  if (st == TJ_OK && !ir_const_immediate(e, *out, out, &why)) return refuse_const(ps, start, why);
  return st;
}

/* ---- types -------------------------------------------------------------- */

static tj_status parse_name_length(Parser *ps, Token t) {
  if (t.len <= NAME_MAX_LEN) return TJ_OK;
  return fail_at(ps, TJ_ERR_PARSE, t.pos, "name '%.*s...' is longer than %d characters",
                 shown(t.len), t.s, NAME_MAX_LEN);
}

/* A constant of the program, by name: its index. */
static tj_status parse_const_ref(Parser *ps, int *index) {
  Token t;
  if (!take_word(&ps->c, &t)) return expected(ps, "a constant name");
  *index = ir_const_find(ps->p, t.s, t.len);
  if (*index < 0)
    return fail_at(ps, TJ_ERR_PARSE, t.pos, "unknown constant '%.*s'", shown(t.len), t.s);
  return TJ_OK;
}

static tj_status parse_elem(Parser *ps, tj_elem *e) {
  Token t;
  if (!take_word(&ps->c, &t)) return expected(ps, "an element type");
  int found = ir_elem_lookup(t.s, t.len);
  if (found < 0)
    return fail_at(ps, TJ_ERR_PARSE, t.pos, "unknown element type '%.*s'", shown(t.len), t.s);
  *e = (tj_elem)found;
  return TJ_OK;
}

/* ptr<ELEM> */
static tj_status parse_pointer(Parser *ps, tj_type *t) {
  tj_elem e = TJ_F32;
  tj_status st = expect_char(ps, '<', "'<'");
  if (st == TJ_OK) st = parse_elem(ps, &e);
  if (st == TJ_OK) st = expect_char(ps, '>', "'>'");
  *t = tj_pointer_type(e);
  return st;
}

/* tile<ELEM,CONSTNAME> */
static tj_status parse_tile(Parser *ps, tj_type *t) {
  tj_elem e = TJ_F32;
  int len = 0;
  tj_status st = expect_char(ps, '<', "'<'");
  if (st == TJ_OK) st = parse_elem(ps, &e);
  if (st == TJ_OK) st = expect_char(ps, ',', "','");
  if (st == TJ_OK) st = parse_const_ref(ps, &len);
  if (st == TJ_OK) st = expect_char(ps, '>', "'>'");
  *t = tj_tile_type(e, len);
  return st;
}

static tj_status parse_type(Parser *ps, tj_type *t) {
  Token w;
  if (!take_word(&ps->c, &w)) return expected(ps, "a type");
  if (token_is(w, "ptr")) return parse_pointer(ps, t);
  if (token_is(w, "tile")) return parse_tile(ps, t);
  int e = ir_elem_lookup(w.s, w.len);
  if (e < 0) return fail_at(ps, TJ_ERR_PARSE, w.pos, "unknown type '%.*s'", shown(w.len), w.s);
  *t = tj_scalar_type((tj_elem)e);
  return TJ_OK;
}

/* ---- instructions ------------------------------------------------------- */

/* %name : TYPE = */
static tj_status parse_result(Parser *ps, Line *l) {
  if (!take_value_name(&ps->c, &l->result)) return expected(ps, "a value name after '%'");
  if (names_find(&ps->names, l->result) >= 0)
    return fail_at(ps, TJ_ERR_PARSE, l->result.pos, "value %.*s is already defined",
                   shown(l->result.len), l->result.s);
  tj_status st = expect_char(ps, ':', "':'");
  if (st == TJ_OK) st = parse_type(ps, &l->a.declared);
  if (st == TJ_OK) st = expect_char(ps, '=', "'='");
  return st;
}

static tj_status parse_op(Parser *ps, Line *l) {
  Token t;
  if (!take_word(&ps->c, &t)) return expected(ps, "an op name");
  int op = ir_op_lookup(t.s, t.len);
  if (op < 0) return fail_at(ps, TJ_ERR_PARSE, t.pos, "unknown op '%.*s'", shown(t.len), t.s);
  l->a.op = (tj_op)op;
  const char *name = ir_ops[op].name;
  if (l->result.len && !ir_op_has_result(l->a.op))
    return fail_at(ps, TJ_ERR_PARSE, t.pos, "%s has no result: expected '%s ...' alone", name,
                   name);
  if (!l->result.len && ir_op_has_result(l->a.op))
    return fail_at(ps, TJ_ERR_PARSE, t.pos, "expected '%%name : type =' before %s", name);
  return TJ_OK;
}

/* An operand: a value defined before. */
static tj_status parse_use(Parser *ps, int32_t *value) {
  Token t;
  if (!take_value_name(&ps->c, &t)) return expected(ps, "an operand (%name)");
  *value = names_find(&ps->names, t);
  if (*value < 0)
    return fail_at(ps, TJ_ERR_PARSE, t.pos, "undefined value %.*s", shown(t.len), t.s);
  return TJ_OK;
}

static tj_status parse_operands(Parser *ps, IrAppend *a) {
  if (at_line_end(&ps->c)) return TJ_OK;
  do {
    if (a->nargs == IR_MAX_ARGS) {
      skip_blank(&ps->c);
      return fail_at(ps, TJ_ERR_PARSE, ps->c.pos, "expected at most %d operands", IR_MAX_ARGS);
    }
    tj_status st = parse_use(ps, &a->args[a->nargs]);
    if (st != TJ_OK) return st;
    a->nargs++;
  } while (take_char(&ps->c, ','));
  return expect_line_end(ps, "',' or end of line");
}

/* What follows the op: param's name, const's value, constexpr's constant, or operands. */
static tj_status parse_tail(Parser *ps, Line *l) {
  tj_status st = TJ_OK;
  int index = 0;
  switch (l->a.op) {
  case TJ_OP_PARAM:
    if (!take_word(&ps->c, &l->param)) return expected(ps, "a parameter name");
    st = parse_name_length(ps, l->param);
    break;
  case TJ_OP_CONST:
    st = parse_number(ps, l->a.declared, &l->a.fimm);
    break;
  case TJ_OP_CONSTEXPR:
    st = parse_const_ref(ps, &index);
    l->a.iimm = index;
    break;
  default:
    if (ir_ops[l->a.op].max_args > 0) return parse_operands(ps, &l->a);
    break;
  }
  return st == TJ_OK ? expect_line_end(ps, "end of line") : st;
}

static tj_status track_loops(Parser *ps, const Line *l) {
  if (l->a.op == TJ_OP_ENDFOR && ps->nloops > 0) ps->nloops--;
  if (l->a.op != TJ_OP_FOR) return TJ_OK;
  if (!tj_grow((void **)&ps->loops, &ps->cap_loops, ps->nloops + 1, sizeof *ps->loops))
    return out_of_memory(ps);
  ps->loops[ps->nloops++] = (Where){ps->c.line, l->start - ps->c.line_start + 1};
  return TJ_OK;
}

/* Hands the instruction to ir_append and names its result. */
static tj_status append(Parser *ps, Line *l) {
  tj_program *p = ps->p;
  if (l->a.op == TJ_OP_PARAM && (l->a.iimm = ir_param_add(p, l->param.s, l->param.len)) < 0)
    return out_of_memory(ps);
  int32_t result = IR_NONE;
  tj_status st = ir_append(p, &l->a, &result);
  if (st != TJ_OK) {
    if (l->a.op == TJ_OP_PARAM) tj_free(p->params[--p->nparams]);
    return prefix_error(ps, st, l->start);
  }
  if (l->result.len && !names_put(&ps->names, l->result, result)) return out_of_memory(ps);
  return track_loops(ps, l);
}

static tj_status parse_instruction(Parser *ps, size_t start) {
  Line l;
  memset(&l, 0, sizeof l);
  l.start = start;
  l.a.declared = ir_no_type();
  for (int i = 0; i < IR_MAX_ARGS; i++)
    l.a.args[i] = IR_NONE;
  ps->in_body = true;
  tj_status st = peek(&ps->c) == '%' ? parse_result(ps, &l) : TJ_OK;
  if (st == TJ_OK) st = parse_op(ps, &l);
  if (st == TJ_OK) st = parse_tail(ps, &l);
  return st == TJ_OK ? append(ps, &l) : st;
}

/* ---- the header ---------------------------------------------------------- */

/* kernel NAME */
static tj_status parse_kernel(Parser *ps, size_t start) {
  Token t;
  if (ps->named) return fail_at(ps, TJ_ERR_PARSE, start, "the kernel is already named");
  if (!take_word(&ps->c, &t)) return expected(ps, "a kernel name");
  tj_status st = parse_name_length(ps, t);
  if (st == TJ_OK) st = expect_line_end(ps, "end of line");
  if (st != TJ_OK) return st;
  char *name = tj_alloc(t.len + 1);
  if (!name) return out_of_memory(ps);
  memcpy(name, t.s, t.len);
  tj_free(ps->p->name);
  ps->p->name = name;
  ps->named = true;
  return TJ_OK;
}

/* Declares NAME (unless it is a built-in) and binds it when a value is given. */
static tj_status declare(Parser *ps, Token name, bool has_value, int64_t value) {
  tj_program *p = ps->p;
  int index = ir_const_find(p, name.s, name.len);
  if (index >= TJ_CONST_BUILTIN_COUNT)
    return fail_at(ps, TJ_ERR_PARSE, name.pos, "constant %.*s is already declared", shown(name.len),
                   name.s);
  if (index >= 0 && has_value && p->consts[index].bound)
    return fail_at(ps, TJ_ERR_PARSE, name.pos, "constant %.*s is already bound", shown(name.len),
                   name.s);
  if (index < 0) {
    tj_status st = ir_const_add(p, name.s, name.len, &index);
    if (st != TJ_OK)
      return prefix_error(ps, st == TJ_ERR_OUT_OF_MEMORY ? st : TJ_ERR_PARSE, name.pos);
  }
  if (has_value) {
    p->consts[index].bound = true;
    p->consts[index].value = value;
  }
  return TJ_OK;
}

/* const NAME [= INTEGER] */
static tj_status parse_const_decl(Parser *ps, size_t start) {
  Token name;
  int64_t value = 0;
  if (ps->in_body)
    return fail_at(ps, TJ_ERR_PARSE, start,
                   "constants must be declared before the first instruction");
  if (!take_word(&ps->c, &name)) return expected(ps, "a constant name");
  bool has_value = take_char(&ps->c, '=');
  tj_status st = has_value ? parse_int(ps, &value) : TJ_OK;
  if (st == TJ_OK) st = expect_line_end(ps, has_value ? "end of line" : "'=' or end of line");
  return st == TJ_OK ? declare(ps, name, has_value, value) : st;
}

/* ---- lines ------------------------------------------------------------- */

static tj_status parse_line(Parser *ps) {
  Cursor *c = &ps->c;
  if (at_line_end(c)) return TJ_OK;
  size_t start = c->pos;
  Token word = {NULL, 0, start};
  bool is_word = take_word(c, &word);
  if (is_word && token_is(word, "kernel")) return parse_kernel(ps, start);
  if (!ps->named) return fail_at(ps, TJ_ERR_PARSE, start, "expected 'kernel NAME'");
  if (is_word && token_is(word, "const")) return parse_const_decl(ps, start);
  c->pos = start;
  return parse_instruction(ps, start);
}

/* At the end of the text: the kernel was named and every loop closed. */
static tj_status finish(Parser *ps) {
  if (!ps->named) return expected(ps, "'kernel NAME'");
  if (ps->nloops == 0) return TJ_OK;
  Where w = ps->loops[ps->nloops - 1];
  return fail_at(ps, TJ_ERR_PARSE, ps->c.pos, "expected endfor (the for at %zu:%zu is not closed)",
                 w.line, w.col);
}

/* A NUL byte is refused wherever it is, comments included: text that holds
 * one is not text, and a caller that took its length with strlen would have
 * lost what follows it. */
static tj_status refuse_nul(Parser *ps) {
  const Cursor *c = &ps->c;
  const char *nul = memchr(c->text + c->line_start, '\0', c->line_end - c->line_start);
  if (!nul) return TJ_OK;
  return fail_at(ps, TJ_ERR_PARSE, (size_t)(nul - c->text), "a NUL byte (the text form is text)");
}

static tj_status parse_text(Parser *ps) {
  cursor_start_line(&ps->c, 0);
  for (;;) {
    tj_status st = refuse_nul(ps);
    if (st == TJ_OK) st = parse_line(ps);
    if (st != TJ_OK) return st;
    if (!cursor_next_line(&ps->c)) return finish(ps);
  }
}

tj_status ir_parse(const char *text, size_t length, tj_program **out) {
  if (!out) return TJ_ERR_INVALID_ARGUMENT;
  if (!(*out = ir_program_new("kernel"))) return TJ_ERR_OUT_OF_MEMORY;
  Parser ps;
  memset(&ps, 0, sizeof ps);
  ps.c = (Cursor){text ? text : "", text ? length : 0, 0, 0, 0, 1};
  ps.p = *out;
  tj_status st = parse_text(&ps);
  tj_free(ps.names.slots);
  tj_free(ps.loops);
  if (st == TJ_ERR_OUT_OF_MEMORY) {
    ir_program_free(*out);
    *out = NULL;
  } else if (st == TJ_OK) {
    (*out)->error[0] = '\0';
  }
  return st;
}
