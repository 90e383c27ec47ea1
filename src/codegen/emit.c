/*
 * emit.c — the emitter: an arena for everything one compile allocates,
 * virtual registers, operand names and the one printf-checked line writer.
 *
 * Registers are virtual and numbered per class from 1 in the order they are
 * asked for (%p, %h, %r, %rd, %f), so the same program always gives the same
 * names. The body is written first; the declarations, which need the final
 * counts, are written before it by the driver (cg_declarations).
 *
 * Immediates are operands too: f32 as 0fXXXXXXXX (the exact bits), integers
 * in decimal, b16 in hex. Nothing here knows about the IR.
 */
#include "codegen/codegen.h"

#include <stdlib.h>
#include <string.h>

/* ---- arena --------------------------------------------------------------- */

struct CgChunk {
  CgChunk *next;
  size_t used, size;
  _Alignas(16) unsigned char data[];
};

#define CG_CHUNK_SIZE (64u * 1024u)

void *cg_arena_alloc(CgArena *a, size_t size) {
  size = (size + 15u) & ~(size_t)15u;
  CgChunk *c = a->head;
  if (!c || c->size - c->used < size) {
    size_t want = size > CG_CHUNK_SIZE ? size : CG_CHUNK_SIZE;
    c = tj_alloc(sizeof *c + want);
    if (!c) return NULL;
    c->size = want;
    c->next = a->head;
    a->head = c;
  }
  void *p = c->data + c->used;
  c->used += size;
  memset(p, 0, size);
  return p;
}

void cg_arena_free(CgArena *a) {
  while (a->head) {
    CgChunk *next = a->head->next;
    free(a->head);
    a->head = next;
  }
}

/* ---- operands ------------------------------------------------------------ */

static const struct {
  const char *prefix, *type;
} classes[CG_CLASS_COUNT] = {
    [CG_PRED] = {"%p", ".pred"}, [CG_B16] = {"%h", ".b16"}, [CG_B32] = {"%r", ".b32"},
    [CG_B64] = {"%rd", ".b64"},  [CG_F32] = {"%f", ".f32"},
};

CgOperand cg_reg(CgEmit *e, CgClass cls) {
  CgOperand o = {(uint8_t)cls, 0, ++e->next[cls], 0};
  return o;
}

CgOperand cg_imm(CgClass cls, uint64_t bits) {
  CgOperand o = {(uint8_t)cls, 1, 0, bits};
  return o;
}

CgOperand cg_imm_f32(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return cg_imm(CG_F32, bits);
}

CgOperand cg_imm_int(CgClass cls, int64_t v) { return cg_imm(cls, (uint64_t)v); }

CgOperand cg_true(void) { return cg_imm(CG_PRED, 1); }

bool cg_is_true(CgOperand o) { return o.cls == CG_PRED && o.imm; }

bool cg_same(CgOperand a, CgOperand b) {
  return a.cls == b.cls && a.imm == b.imm && (a.imm ? a.bits == b.bits : a.reg == b.reg);
}

/* The low `digits` hexadecimal digits of v, upper case, at out. */
static char *hex(char *out, uint64_t v, int digits) {
  for (int i = digits - 1; i >= 0; i--, v >>= 4) out[i] = "0123456789ABCDEF"[v & 15];
  return out + digits;
}

/* o's name at out, without snprintf (names are most of what the emitter
 * writes, and immediates through snprintf took about a sixth of
 * tj_emit_ptx); returns the end, unterminated. */
static char *name_end(char *out, CgOperand o) {
  char *p = out;
  if (!o.imm) {
    for (const char *s = classes[o.cls].prefix; *s; s++) *p++ = *s;
    return tj_decimal(p, o.reg);
  }
  if (o.cls == CG_F32 || o.cls == CG_B16) {
    *p++ = '0';
    *p++ = o.cls == CG_F32 ? 'f' : 'x';
    return hex(p, o.bits, o.cls == CG_F32 ? 8 : 4);
  }
  if (o.cls == CG_B32 || o.cls == CG_B64)
    return tj_decimal(p, o.cls == CG_B32 ? (int32_t)(uint32_t)o.bits : (int64_t)o.bits);
  *p++ = '1';
  return p;
}

char *cg_name_at(char *out, CgOperand o) {
  *name_end(out, o) = '\0';
  return out;
}

CgName cg_name(CgOperand o) {
  CgName n;
  cg_name_at(n.s, o);
  return n;
}

CgName cg_address(CgOperand base, int64_t offset) {
  CgName n;
  char *p = n.s;
  *p++ = '[';
  p = name_end(p, base);
  if (offset > 0) *p++ = '+';
  if (offset) p = tj_decimal(p, offset); /* '-' and the digits where negative */
  *p++ = ']';
  *p = '\0';
  return n;
}

/* ---- lines --------------------------------------------------------------- */

/* fmt's text onto the body, as a line (a tab before, a newline after) or
 * as it is, in one append: tj_format's conversions in one pass (what the
 * emitter uses), anything else or a longer line through buf_vprintf. The
 * format attribute on cg_line still checks every call. */
static void append(CgEmit *e, bool line, const char *fmt, va_list ap) {
  char text[512], *out = text;
  if (line) *out++ = '\t';
  va_list copy;
  va_copy(copy, ap);
  size_t n = tj_format(out, sizeof text - 2, fmt, copy);
  va_end(copy);
  if (n == (size_t)-1) {
    if (line) buf_puts(&e->body, "\t");
    buf_vprintf(&e->body, fmt, ap);
    if (line) buf_puts(&e->body, "\n");
    return;
  }
  out += n;
  if (line) *out++ = '\n';
  buf_putn(&e->body, text, (size_t)(out - text));
}

void cg_line(CgEmit *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  append(e, true, fmt, ap);
  va_end(ap);
}

void cg_raw(CgEmit *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  append(e, false, fmt, ap);
  va_end(ap);
}

void cg_declarations(const CgEmit *e, TjBuf *out) {
  for (int c = 0; c < CG_CLASS_COUNT; c++)
    if (e->next[c])
      buf_printf(out, "\t.reg %s %s<%u>;\n", classes[c].type, classes[c].prefix, e->next[c] + 1);
}

/* ---- element types ------------------------------------------------------- */

CgClass cg_elem_class(tj_elem e) {
  switch (e) {
  case TJ_I32: return CG_B32;
  case TJ_I64: return CG_B64;
  case TJ_F16:
  case TJ_BF16: return CG_B16;
  case TJ_PRED: return CG_PRED;
  default: return CG_F32;
  }
}

const char *cg_elem_ptx(tj_elem e) {
  switch (e) {
  case TJ_I32: return "s32";
  case TJ_I64: return "s64";
  case TJ_F16:
  case TJ_BF16: return "b16";
  case TJ_PRED: return "pred";
  default: return "f32";
  }
}

int cg_elem_size(tj_elem e) {
  switch (e) {
  case TJ_I64: return 8;
  case TJ_F16:
  case TJ_BF16: return 2;
  case TJ_PRED: return 1;
  default: return 4;
  }
}
