/*
 * support.c — the shared test helpers of support.h: xoshiro256** random
 * numbers, matrices in f32/f16/bf16 with poisoned gaps and guard, the
 * float64 softmax reference and the tolerance checks.
 *
 * Everything works on host memory and on the bit patterns tilejit's public
 * conversions (tj_f32_to_f16, ...) define, so a GPU suite copies its output
 * back into a TjMatrix and calls the same checks. No state outside the
 * caller's structs.
 */
#include "support.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- random numbers ---------------------------------------------------- */

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void rng_seed(TjRng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

uint64_t rng_next(TjRng *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double rng_uniform(TjRng *r) { return (double)(rng_next(r) >> 11) * 0x1p-53; }

double rng_normal(TjRng *r) {
  double u = rng_uniform(r), v = rng_uniform(r);
  return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

int64_t rng_range(TjRng *r, int64_t lo, int64_t hi) {
  uint64_t span = (uint64_t)hi - (uint64_t)lo + 1;
  uint64_t k = span ? rng_next(r) % span : rng_next(r);
  return (int64_t)((uint64_t)lo + k);
}

uint64_t test_seed(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t state = a * 0x100000001b3ull ^ b;
  state = splitmix64(&state) ^ c;
  return splitmix64(&state);
}

/* ---- dtypes ------------------------------------------------------------ */

TjTolerance dtype_tolerance(tj_dtype d) {
  static const TjTolerance t[TJ_DTYPE_COUNT] = {{1.3e-6, 1e-5}, {1e-3, 1e-5}, {1.6e-2, 1e-5}};
  return t[d];
}

size_t dtype_bytes(tj_dtype d) { return d == TJ_DTYPE_F32 ? 4 : 2; }

const char *dtype_label(tj_dtype d) {
  return d == TJ_DTYPE_F32 ? "f32" : d == TJ_DTYPE_F16 ? "f16" : "bf16";
}

uint32_t elem_bits(const void *buf, tj_dtype d, size_t i) {
  if (d == TJ_DTYPE_F32) {
    uint32_t u;
    memcpy(&u, (const unsigned char *)buf + 4 * i, 4);
    return u;
  }
  return ((const uint16_t *)buf)[i];
}

static void set_bits(void *buf, tj_dtype d, size_t i, uint32_t bits) {
  if (d == TJ_DTYPE_F32) memcpy((unsigned char *)buf + 4 * i, &bits, 4);
  else ((uint16_t *)buf)[i] = (uint16_t)bits;
}

double elem_get(const void *buf, tj_dtype d, size_t i) {
  uint32_t bits = elem_bits(buf, d, i);
  if (d == TJ_DTYPE_F16) return tj_f16_to_f32((uint16_t)bits);
  if (d == TJ_DTYPE_BF16) return tj_bf16_to_f32((uint16_t)bits);
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

void elem_set(void *buf, tj_dtype d, size_t i, double v) {
  float f = (float)v;
  uint32_t bits;
  if (d == TJ_DTYPE_F16) bits = tj_f32_to_f16(f);
  else if (d == TJ_DTYPE_BF16) bits = tj_f32_to_bf16(f);
  else memcpy(&bits, &f, 4);
  set_bits(buf, d, i, bits);
}

uint32_t poison_bits(tj_dtype d) {
  return d == TJ_DTYPE_F32 ? 0x7fd1d1d1u : d == TJ_DTYPE_F16 ? 0x7e5au : 0x7fd1u;
}

bool is_poison(const void *buf, tj_dtype d, size_t i) {
  return elem_bits(buf, d, i) == poison_bits(d);
}

/* ---- matrices ---------------------------------------------------------- */

static size_t span_of(int64_t rows, int64_t cols, int64_t stride) {
  return rows > 0 && cols > 0 ? (size_t)((rows - 1) * stride + cols) : 0;
}

static size_t total_elements(const TjMatrix *m) {
  return span_of(m->rows, m->cols, m->stride) + (size_t)m->guard;
}

bool matrix_alloc(TjMatrix *m, tj_dtype d, int64_t rows, int64_t cols, int64_t stride,
                  int64_t guard) {
  memset(m, 0, sizeof *m);
  if ((unsigned)d >= TJ_DTYPE_COUNT || rows < 0 || cols < 0 || stride < cols || guard < 0)
    return false;
  *m = (TjMatrix){d, rows, cols, stride, guard, NULL, 0, 0};
  size_t count = total_elements(m);
  m->span_bytes = span_of(rows, cols, stride) * dtype_bytes(d);
  m->bytes = count * dtype_bytes(d);
  m->data = malloc(count ? m->bytes : 1);
  if (m->data) matrix_poison(m);
  return m->data != NULL;
}

void matrix_free(TjMatrix *m) {
  free(m->data);
  m->data = NULL;
}

size_t matrix_index(const TjMatrix *m, int64_t row, int64_t col) {
  return (size_t)(row * m->stride + col);
}

double matrix_get(const TjMatrix *m, int64_t row, int64_t col) {
  return elem_get(m->data, m->dtype, matrix_index(m, row, col));
}

void matrix_set(TjMatrix *m, int64_t row, int64_t col, double v) {
  elem_set(m->data, m->dtype, matrix_index(m, row, col), v);
}

void matrix_poison(TjMatrix *m) {
  size_t count = total_elements(m);
  for (size_t i = 0; i < count; i++) set_bits(m->data, m->dtype, i, poison_bits(m->dtype));
}

void matrix_fill_random(TjMatrix *m, TjRng *r, double scale, double spread) {
  matrix_poison(m);
  for (int64_t row = 0; row < m->rows; row++) {
    double offset = (2.0 * rng_uniform(r) - 1.0) * spread;
    for (int64_t col = 0; col < m->cols; col++)
      matrix_set(m, row, col, scale * rng_normal(r) + offset);
  }
}

/* ---- softmax ----------------------------------------------------------- */

static void reference_row(const TjMatrix *x, int64_t row, double *ref) {
  double max = -INFINITY, sum = 0.0;
  for (int64_t c = 0; c < x->cols; c++) max = fmax(max, matrix_get(x, row, c));
  for (int64_t c = 0; c < x->cols; c++) sum += ref[c] = exp(matrix_get(x, row, c) - max);
  for (int64_t c = 0; c < x->cols; c++) ref[c] /= sum;
}

void softmax_reference(const TjMatrix *x, double *ref) {
  for (int64_t row = 0; row < x->rows; row++) reference_row(x, row, ref + row * x->cols);
}

/* A value beyond the dtype's finite range is the infinity its f32
 * arithmetic or its rounding to the dtype gives (torch's too). */
static double in_range(double v, tj_dtype d) {
  double most = d == TJ_DTYPE_F32 ? FLT_MAX : d == TJ_DTYPE_F16 ? 65504.0 : 0x1.fep127;
  return fabs(v) > most ? copysign(INFINITY, v) : v;
}

static void log_reference_row(const TjMatrix *x, int64_t row, double *ref) {
  double max = -INFINITY, sum = 0.0;
  for (int64_t c = 0; c < x->cols; c++) max = fmax(max, matrix_get(x, row, c));
  for (int64_t c = 0; c < x->cols; c++) sum += exp(ref[c] = matrix_get(x, row, c) - max);
  for (int64_t c = 0; c < x->cols; c++) ref[c] = in_range(ref[c] - log(sum), x->dtype);
}

void row_reference(tj_row_op op, const TjMatrix *x, double *ref) {
  if (op == TJ_ROW_SOFTMAX) {
    softmax_reference(x, ref);
    return;
  }
  for (int64_t row = 0; row < x->rows; row++) log_reference_row(x, row, ref + row * x->cols);
}

void backward_reference(const TjMatrix *y, const TjMatrix *dy, double *ref) {
  for (int64_t row = 0; row < y->rows; row++) {
    double sum = 0.0, *out = ref + row * y->cols;
    for (int64_t c = 0; c < y->cols; c++) sum += matrix_get(y, row, c) * matrix_get(dy, row, c);
    for (int64_t c = 0; c < y->cols; c++)
      out[c] = in_range(matrix_get(y, row, c) * (matrix_get(dy, row, c) - sum), y->dtype);
  }
}

void backward_fill(TjMatrix *y, TjMatrix *dy, TjRng *r) {
  matrix_fill_random(y, r, 3.0, 10.0);
  matrix_fill_random(dy, r, 3.0, 0.0);
  double *row = malloc((size_t)y->cols * sizeof *row);
  TjMatrix one = *y;
  one.rows = 1;
  for (int64_t i = 0; row && i < y->rows; i++) {
    one.data = (char *)y->data + (size_t)(i * y->stride) * dtype_bytes(y->dtype);
    softmax_reference(&one, row);
    for (int64_t c = 0; c < y->cols; c++) matrix_set(y, i, c, row[c]);
  }
  free(row);
}

int64_t masked_softmax_end(const tj_softmax_mask *mask, int64_t m, int64_t n, int64_t row) {
  int64_t rows = mask->rows ? mask->rows : m, q = rows > 0 ? row % rows : row;
  if (!mask->causal || mask->offset >= n) return n;
  if (mask->offset < -q - 1) return 0;
  int64_t end = q + mask->offset + 1; /* q < 2^63 - n and -q-1 <= offset < n: no overflow */
  return end < 0 ? 0 : end > n ? n : end;
}

static void masked_reference_row(const TjMatrix *x, int64_t row, int64_t end, double scale,
                                 double *ref) {
  double max = -INFINITY, sum = 0.0;
  bool nan = false;
  for (int64_t c = 0; c < end; c++) {
    double v = matrix_get(x, row, c);
    nan |= isnan(v);
    max = fmax(max, v);
  }
  if (nan || max == INFINITY) {
    for (int64_t c = 0; c < x->cols; c++) ref[c] = NAN;
    return;
  }
  for (int64_t c = 0; c < x->cols; c++) ref[c] = 0.0;
  if (max == -INFINITY) return; /* no column kept, or every kept one -inf */
  for (int64_t c = 0; c < end; c++) sum += ref[c] = exp(scale * (matrix_get(x, row, c) - max));
  for (int64_t c = 0; c < end; c++) ref[c] /= sum;
}

void masked_softmax_reference(const TjMatrix *x, const tj_softmax_mask *mask, double *ref) {
  for (int64_t row = 0; row < x->rows; row++)
    masked_reference_row(x, row, masked_softmax_end(mask, x->rows, x->cols, row),
                         (double)mask->scale, ref + row * x->cols);
}

void masked_softmax_fill(TjMatrix *x, const tj_softmax_mask *mask, TjRng *r) {
  matrix_fill_random(x, r, 3.0, x->dtype == TJ_DTYPE_F32 ? 1e4 : 100.0);
  for (int64_t row = 1; row < x->rows; row += 2) {
    int64_t end = masked_softmax_end(mask, x->rows, x->cols, row);
    if (end == x->cols) continue;
    matrix_set(x, row, x->cols - 1, INFINITY);
    matrix_set(x, row, end, NAN);
  }
}

void masked_softmax_extreme_rows(TjMatrix *x, const tj_softmax_mask *mask) {
  int64_t n = x->cols;
  bool f16 = x->dtype == TJ_DTYPE_F16;
  double big = f16 ? 65504.0 : 3e38, huge = f16 ? 6e4 : 1e30, tiny = f16 ? 1e-6 : 1e-40;
  static const double dropped[3] = {NAN, INFINITY, -INFINITY};
  for (int64_t r = 1; r < x->rows; r++) {
    int64_t end = masked_softmax_end(mask, x->rows, n, r);
    switch (r % 10) {
    case 1:
      for (int64_t c = 0; c + 1 < end; c += 3) matrix_set(x, r, c, -INFINITY);
      break;
    case 2:
    case 9:
      for (int64_t c = 0; c < end; c++) matrix_set(x, r, c, -INFINITY);
      if (r % 10 == 9 && end < n) matrix_set(x, r, n - 1, NAN);
      break;
    case 3:
      if (end) matrix_set(x, r, end / 2, INFINITY);
      break;
    case 4:
      if (end) matrix_set(x, r, end - 1, NAN);
      break;
    case 5:
      for (int64_t c = end; c < n; c++) matrix_set(x, r, c, dropped[c % 3]);
      break;
    case 6:
      for (int64_t c = 0; c < end; c++) matrix_set(x, r, c, tiny * (double)(c % 3 - 1));
      break;
    case 7:
      for (int64_t c = 0; c < end; c++) matrix_set(x, r, c, c == end / 3 ? big : -big);
      break;
    case 8:
      for (int64_t c = 0; c < end; c++) matrix_set(x, r, c, c == end - 1 ? -huge : huge);
      break;
    }
  }
}

tj_softmax_mask masked_causal(int64_t rows, int64_t offset, float scale) {
  return (tj_softmax_mask){scale, 1, rows, offset};
}

const float masked_scales[4] = {0.125f, 1.0f, 0.111803398875f /* 1 / sqrt(80) */, 3.0f};

void masked_calls(int64_t n, int64_t rows_past_n, MaskedCall *out) {
  const MaskedCall calls[MASKED_CALLS] = {
      {8, masked_causal(0, 0, 0.125f)},
      {12, masked_causal(4, 0, 0.125f)},
      {10, masked_causal(5, n - 5, 1.0f)},
      {rows_past_n, masked_causal(n + 3, -3, 0.125f)},
      {12, masked_causal(6, -2, masked_scales[2])},
      {12, masked_causal(6, -n / 2, 3.0f)},
      {6, masked_causal(3, INT64_MAX, 0.125f)},
      {6, masked_causal(3, (int64_t)1 << 31, 1.0f)},
      {6, masked_causal(3, INT64_MIN, 0.125f)},
      {6, masked_causal(3, -((int64_t)1 << 31) + 2, 0.125f)},
      {8, {masked_scales[2], 0, 4, -7}},
      {5, {1.0f, 0, 0, 0}},
  };
  memcpy(out, calls, sizeof calls);
}

tj_status row_spec_options(tj_row_op op, tj_softmax_template which, tj_dtype dtype, int64_t rows,
                           int64_t n, int arch, int warps, tj_spec_options *o) {
  tj_device_info device;
  tj_softmax_options options = {.num_warps = warps, .which_template = which};
  tj_softmax_plan plan;
  tj_status st = tj_device_nominal(arch ? arch : 90, &device);
  if (st == TJ_OK) st = tj_row_plan_for(&device, op, dtype, rows, n, &options, &plan);
  if (st == TJ_OK) st = tj_softmax_spec_options(&plan, dtype, n, o);
  return st;
}

tj_status softmax_spec_options(tj_softmax_template which, tj_dtype dtype, int64_t rows, int64_t n,
                               int arch, int warps, tj_spec_options *o) {
  return row_spec_options(TJ_ROW_SOFTMAX, which, dtype, rows, n, arch, warps, o);
}

bool close_enough(double got, double want, TjTolerance t) {
  if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
  if (isinf(want) || isinf(got)) return got == want;
  return fabs(got - want) <= t.atol + t.rtol * fabs(want);
}

static void note_bad(TjCompare *c, int64_t row, int64_t col, double got, double want) {
  if (c->bad++ == 0) {
    c->first_row = row;
    c->first_col = col;
    c->first_got = got;
    c->first_want = want;
  }
}

static void compare_element(const TjMatrix *y, double want, TjTolerance t, bool check_written,
                            int64_t row, int64_t col, TjCompare *c) {
  size_t i = matrix_index(y, row, col);
  double got = elem_get(y->data, y->dtype, i);
  bool unwritten = check_written && is_poison(y->data, y->dtype, i);
  c->checked++;
  c->unwritten += unwritten;
  if (unwritten || !close_enough(got, want, t)) note_bad(c, row, col, got, want);
  if (isfinite(want) && isfinite(got)) {
    double err = fabs(got - want);
    c->max_abs = fmax(c->max_abs, err);
    c->max_ratio = fmax(c->max_ratio, err / (t.atol + t.rtol * fabs(want)));
  }
}

/* Gap and guard elements: everything in the buffer that is in no row. */
static void count_touched(const TjMatrix *y, TjCompare *c) {
  size_t count = total_elements(y);
  for (size_t i = 0; i < count; i++) {
    int64_t row = y->stride ? (int64_t)i / y->stride : 0, col = (int64_t)i - row * y->stride;
    bool in_row = row < y->rows && col < y->cols;
    if (!in_row && !is_poison(y->data, y->dtype, i)) c->touched++;
  }
}

bool compare_rows(const TjMatrix *y, const double *ref, TjTolerance t, bool check_written,
                  TjCompare *c) {
  memset(c, 0, sizeof *c);
  c->first_row = c->first_col = -1;
  for (int64_t row = 0; row < y->rows; row++)
    for (int64_t col = 0; col < y->cols; col++)
      compare_element(y, ref[row * y->cols + col], t, check_written, row, col, c);
  count_touched(y, c);
  return c->bad == 0 && c->touched == 0;
}

int64_t compare_exact_zeros(const TjMatrix *y, const double *ref, int64_t *row, int64_t *col) {
  int64_t bad = 0;
  *row = *col = -1;
  for (int64_t r = 0; r < y->rows; r++)
    for (int64_t c = 0; c < y->cols; c++) {
      if (ref[r * y->cols + c] != 0.0) continue;
      double got = matrix_get(y, r, c);
      if (got == 0.0 && !signbit(got)) continue;
      if (bad++ == 0) {
        *row = r;
        *col = c;
      }
    }
  return bad;
}

void compare_describe(const TjCompare *c, char *out, size_t size) {
  snprintf(out, size,
           "%lld of %lld bad (first at row %lld, col %lld: got %.9g, want %.9g), %lld unwritten, "
           "%lld outside the rows touched, max abs error %.3g, max error/tolerance %.3g",
           (long long)c->bad, (long long)c->checked, (long long)c->first_row,
           (long long)c->first_col, c->first_got, c->first_want, (long long)c->unwritten,
           (long long)c->touched, c->max_abs, c->max_ratio);
}

int test_run_suite(Suite *s) {
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
