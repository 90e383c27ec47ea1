/*
 * util.c — the small services every subsystem uses: allocation through one
 * set of functions, a growable text buffer with a printf-checked append,
 * handle error messages and FNV-1a hashing. (Numbers as text: number.c.)
 *
 * Nothing here holds state of its own: every buffer belongs to its caller.
 * The one exception is a per-thread countdown that lets tests make any
 * chosen allocation fail (tj_test_fail_allocation); it is 0 otherwise.
 */
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tests only (tj_test_fail_allocation): allocations left on this thread
 * before the one that fails; 0: none fails. */
static _Thread_local long allocations_to_failure;

long tj_test_fail_allocation(long nth) {
  long left = allocations_to_failure;
  allocations_to_failure = nth > 0 ? nth : 0;
  return left;
}

static bool injected_failure(void) {
  return allocations_to_failure > 0 && --allocations_to_failure == 0;
}

void *tj_alloc(size_t size) { return injected_failure() ? NULL : calloc(1, size ? size : 1); }

void *tj_realloc(void *p, size_t size) {
  return injected_failure() ? NULL : realloc(p, size ? size : 1);
}

void tj_free(void *p) { free(p); }

const char *tj_version(void) { return TJ_VERSION_STRING; }

char *tj_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = tj_realloc(NULL, n);
  if (d) memcpy(d, s, n);
  return d;
}

bool tj_grow(void **items, int *cap, int need, size_t elem) {
  if (need <= *cap) return true;
  int n = *cap ? *cap : 8;
  while (n < need) n *= 2;
  void *p = tj_realloc(*items, (size_t)n * elem);
  if (!p) return false;
  memset((char *)p + (size_t)*cap * elem, 0, (size_t)(n - *cap) * elem);
  *items = p;
  *cap = n;
  return true;
}

void buf_init(TjBuf *b) { memset(b, 0, sizeof *b); }

void buf_free(TjBuf *b) {
  free(b->data);
  buf_init(b);
}

static bool reserve(TjBuf *b, size_t extra) {
  if (b->oom) return false;
  if (b->len + extra + 1 <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra + 1) cap *= 2;
  char *d = tj_realloc(b->data, cap);
  if (!d) {
    b->oom = true;
    return false;
  }
  b->data = d;
  b->cap = cap;
  return true;
}

size_t tj_format(char *out, size_t size, const char *fmt, va_list ap) {
  if (size < 24) return (size_t)-1;
  char *p = out, *end = out + size - 1, *numbers = end - 21; /* room for a number */
  for (const char *f = fmt; *f; f++) {
    if (*f != '%' || f[1] == '%') {
      if (p == end) return (size_t)-1;
      *p++ = *f;
      f += *f == '%';
    } else if (f[1] == 's') {
      const char *s = va_arg(ap, const char *);
      if (!s) return (size_t)-1;
      for (; *s; s++) {
        if (p == end) return (size_t)-1;
        *p++ = *s;
      }
      f++;
    } else if (p > numbers) {
      return (size_t)-1;
    } else if (f[1] == 'd') {
      p = tj_decimal(p, va_arg(ap, int));
      f++;
    } else if (f[1] == 'u') {
      p = tj_decimal(p, va_arg(ap, unsigned));
      f++;
    } else if (f[1] == 'l' && f[2] == 'l' && f[3] == 'd') {
      p = tj_decimal(p, va_arg(ap, long long));
      f += 3;
    } else {
      return (size_t)-1;
    }
  }
  *p = '\0';
  return (size_t)(p - out);
}

void buf_vprintf(TjBuf *b, const char *fmt, va_list ap) {
  va_list copy;
  if (!reserve(b, 255)) return;
  va_copy(copy, ap);
  size_t fast = tj_format(b->data + b->len, b->cap - b->len, fmt, copy);
  va_end(copy);
  if (fast != (size_t)-1) {
    b->len += fast;
    return;
  }
  b->data[b->len] = '\0'; /* what the fast path left past the end */
  va_copy(copy, ap);
  int n = vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  if (n < 0 || !reserve(b, (size_t)n)) return;
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  b->len += (size_t)n;
}

void buf_printf(TjBuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  buf_vprintf(b, fmt, ap);
  va_end(ap);
}

void buf_putn(TjBuf *b, const char *s, size_t n) {
  if (!reserve(b, n)) return;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void buf_puts(TjBuf *b, const char *s) { buf_putn(b, s, strlen(s)); }

char *buf_take(TjBuf *b) {
  if (b->oom) {
    buf_free(b);
    return NULL;
  }
  if (!b->data && !reserve(b, 0)) return NULL;
  char *d = b->data;
  d[b->len] = '\0';
  buf_init(b);
  return d;
}

void tj_set_error(char *dst, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dst, TJ_ERROR_MAX, fmt, ap);
  va_end(ap);
}

uint64_t tj_fnv1a(const void *data, size_t len, uint64_t seed) {
  const unsigned char *p = data;
  uint64_t h = seed;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static const char *const status_names[TJ_STATUS_COUNT] = {
    [TJ_OK] = "ok",
    [TJ_ERR_INVALID_ARGUMENT] = "invalid argument",
    [TJ_ERR_TYPE] = "type error",
    [TJ_ERR_PARSE] = "parse error",
    [TJ_ERR_VERIFY] = "verification failed",
    [TJ_ERR_UNSUPPORTED] = "unsupported",
    [TJ_ERR_OUT_OF_MEMORY] = "out of memory",
    [TJ_ERR_INTERP] = "interpreter error",
    [TJ_ERR_NO_DRIVER] = "no CUDA driver",
    [TJ_ERR_NO_DEVICE] = "no such CUDA device",
    [TJ_ERR_DRIVER] = "CUDA driver error",
    [TJ_ERR_NO_NVRTC] = "no NVRTC library",
    [TJ_ERR_NVRTC] = "NVRTC error",
    [TJ_ERR_TOOL] = "external tool failed",
};
_Static_assert(TJ_COUNTOF(status_names) == TJ_STATUS_COUNT, "one name per status");

const char *tj_status_string(tj_status status) {
  if ((unsigned)status >= TJ_STATUS_COUNT) return "unknown status";
  return status_names[status];
}
