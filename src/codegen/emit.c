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

#include <stdio.h>
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

/* Decimal digits of v at out; returns the end. */
static char *decimal(char *out, uint64_t v) {
  char digits[24];
  int n = 0;
  do digits[n++] = (char)('0' + v % 10);
  while ((v /= 10) != 0);
  while (n) *out++ = digits[--n];
  return out;
}

CgName cg_name(CgOperand o) {
  CgName n;
  if (!o.imm) {
    const char *p = classes[o.cls].prefix;
    char *end = n.s;
    while (*p) *end++ = *p++;
    *decimal(end, o.reg) = '\0';
    return n;
  }
  switch ((CgClass)o.cls) {
  case CG_F32: snprintf(n.s, sizeof n.s, "0f%08X", (unsigned)(uint32_t)o.bits); break;
  case CG_B16: snprintf(n.s, sizeof n.s, "0x%04X", (unsigned)(uint16_t)o.bits); break;
  case CG_B32: snprintf(n.s, sizeof n.s, "%d", (int)(int32_t)(uint32_t)o.bits); break;
  case CG_B64: snprintf(n.s, sizeof n.s, "%lld", (long long)(int64_t)o.bits); break;
  default: snprintf(n.s, sizeof n.s, "1"); break;
  }
  return n;
}

CgName cg_address(CgOperand base, int64_t offset) {
  CgName n, b = cg_name(base);
  char *p = n.s;
  *p++ = '[';
  for (const char *s = b.s; *s; s++) *p++ = *s;
  if (offset) {
    *p++ = offset < 0 ? '-' : '+';
    p = decimal(p, offset < 0 ? 0 - (uint64_t)offset : (uint64_t)offset);
  }
  *p++ = ']';
  *p = '\0';
  return n;
}

/* ---- lines --------------------------------------------------------------- */

/* The emitter formats every line, so it has its own printf for the few
 * conversions it uses (%s %d %u %lld %%), in one pass; anything else goes
 * to vsnprintf. The format attribute on cg_line still checks every call. */
static size_t format(char *out, size_t size, const char *fmt, va_list ap) {
  char *p = out, *end = out + size - 32;
  for (const char *f = fmt; *f && p < end; f++) {
    if (*f != '%') {
      *p++ = *f;
      continue;
    }
    if (f[1] == 's') {
      for (const char *s = va_arg(ap, const char *); *s && p < end + 31; s++) *p++ = *s;
      f++;
    } else if (f[1] == 'd') {
      int v = va_arg(ap, int);
      if (v < 0) *p++ = '-';
      p = decimal(p, v < 0 ? 0 - (uint64_t)(int64_t)v : (uint64_t)v);
      f++;
    } else if (f[1] == 'u') {
      p = decimal(p, va_arg(ap, unsigned));
      f++;
    } else if (f[1] == 'l' && f[2] == 'l' && f[3] == 'd') {
      long long v = va_arg(ap, long long);
      if (v < 0) *p++ = '-';
      p = decimal(p, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
      f += 3;
    } else if (f[1] == '%') {
      *p++ = '%';
      f++;
    } else {
      return (size_t)-1;
    }
  }
  *p = '\0';
  return (size_t)(p - out);
}

static void append(CgEmit *e, const char *fmt, va_list ap) {
  char line[512];
  va_list copy;
  va_copy(copy, ap);
  size_t n = format(line, sizeof line, fmt, copy);
  va_end(copy);
  if (n == (size_t)-1 || n >= sizeof line - 40)
    buf_vprintf(&e->body, fmt, ap);
  else
    buf_puts(&e->body, line);
}

void cg_line(CgEmit *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  buf_puts(&e->body, "\t");
  append(e, fmt, ap);
  buf_puts(&e->body, "\n");
  va_end(ap);
}

void cg_raw(CgEmit *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  append(e, fmt, ap);
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
