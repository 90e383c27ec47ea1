/*
 * data.c — host data the tools share: see data.h.
 */
#include "data.h"

#include <math.h>
#include <string.h>

uint64_t data_next(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double data_uniform(uint64_t *state) { return (double)(data_next(state) >> 11) * 0x1p-53; }

/* Box-Muller; one of the pair is enough here. */
double data_normal(uint64_t *state) {
  double u = data_uniform(state), v = data_uniform(state);
  return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

double data_get(const void *buf, tj_elem elem, int64_t i) {
  switch (elem) {
  case TJ_F32: return ((const float *)buf)[i];
  case TJ_F16: return tj_f16_to_f32(((const uint16_t *)buf)[i]);
  case TJ_BF16: return tj_bf16_to_f32(((const uint16_t *)buf)[i]);
  case TJ_I32: return ((const int32_t *)buf)[i];
  case TJ_I64: return (double)((const int64_t *)buf)[i];
  default: return 0;
  }
}

void data_set(void *buf, tj_elem elem, int64_t i, double v) {
  switch (elem) {
  case TJ_F32: ((float *)buf)[i] = (float)v; break;
  case TJ_F16: ((uint16_t *)buf)[i] = tj_f32_to_f16((float)v); break;
  case TJ_BF16: ((uint16_t *)buf)[i] = tj_f32_to_bf16((float)v); break;
  case TJ_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
  case TJ_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
  default: break;
  }
}

int data_elem_size(tj_elem elem) {
  switch (elem) {
  case TJ_F32:
  case TJ_I32: return 4;
  case TJ_F16:
  case TJ_BF16: return 2;
  case TJ_I64: return 8;
  default: return 0;
  }
}

tj_elem data_elem_of(tj_dtype d) {
  return d == TJ_DTYPE_F32 ? TJ_F32 : d == TJ_DTYPE_F16 ? TJ_F16 : TJ_BF16;
}

void data_row_reference(const void *x, tj_elem elem, int64_t n, bool log_softmax,
                        double *want) {
  double m = -INFINITY, s = 0.0;
  for (int64_t i = 0; i < n; i++) m = fmax(m, data_get(x, elem, i));
  for (int64_t i = 0; i < n; i++) s += want[i] = exp(data_get(x, elem, i) - m);
  for (int64_t i = 0; i < n; i++)
    want[i] = log_softmax ? data_get(x, elem, i) - m - log(s) : want[i] / s;
}

/* The kept columns are [0, end); scale > 0 keeps -inf at -inf, so the max
 * of x is taken first and the scale applied to x - max, as the templates do. */
void data_row_masked_reference(const void *x, tj_elem elem, int64_t n, int64_t r, int64_t m,
                               const tj_softmax_mask *mask, double *want) {
  int64_t rows = mask->rows ? mask->rows : m, end = n;
  if (mask->causal) {
    int64_t q = rows > 0 ? r % rows : 0;
    double last = (double)q + (double)mask->offset; /* no overflow for any offset */
    end = last < 0.0 ? 0 : last >= (double)n ? n : q + mask->offset + 1;
  }
  double top = -INFINITY, s = 0.0, scale = mask->scale;
  bool nan = false;
  for (int64_t i = 0; i < end; i++) {
    double v = data_get(x, elem, i);
    nan |= isnan(v) || v == INFINITY;
    top = fmax(top, v);
  }
  for (int64_t i = 0; i < n; i++) {
    double v = i < end && top > -INFINITY ? exp(scale * (data_get(x, elem, i) - top)) : 0.0;
    s += want[i] = nan ? NAN : v;
  }
  for (int64_t i = 0; i < n; i++) want[i] = s > 0.0 ? want[i] / s : want[i];
}

DataTolerance data_tolerance(tj_elem elem) {
  switch (elem) {
  case TJ_F32: return (DataTolerance){1.3e-6, 1e-5};
  case TJ_F16: return (DataTolerance){1e-3, 1e-5};
  case TJ_BF16: return (DataTolerance){1.6e-2, 1e-5};
  default: return (DataTolerance){0, 0};
  }
}

bool data_close(double got, double want, DataTolerance t) {
  if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
  if (isinf(want) || isinf(got)) return got == want;
  return fabs(got - want) <= t.atol + t.rtol * fabs(want);
}
