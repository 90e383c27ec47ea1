/*
 * support.h — helpers every test suite links (support.c): a seeded random
 * generator, matrices of rows in any storage dtype with a guard region, the
 * float64 softmax reference, the tolerance check of the testing rules and
 * NaN poisoning. They know nothing of where the matrices are computed, so
 * the CPU suites (through the interpreter) and the GPU suites (after a copy
 * back) share them.
 *
 * The method they serve: fresh random inputs for every check (a seed per
 * case, through rng_seed(test_seed(...))), scaled so the max subtraction
 * matters; outputs filled with a poison NaN first; afterwards every output
 * element must have been written and close to the reference
 * (|out - ref| <= atol + rtol |ref|, NaN where the reference is NaN), and
 * every element outside the rows (the gaps of a row stride > N and the
 * guard after the last row) must still hold the poison.
 */
#ifndef TJ_TEST_SUPPORT_H
#define TJ_TEST_SUPPORT_H

#include "tilejit.h"

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- random numbers: xoshiro256** seeded through splitmix64 ------------- */

typedef struct TjRng {
  uint64_t s[4];
} TjRng;

void rng_seed(TjRng *r, uint64_t seed);
uint64_t rng_next(TjRng *r);
double rng_uniform(TjRng *r);                        /* [0, 1) */
double rng_normal(TjRng *r);                         /* standard normal */
int64_t rng_range(TjRng *r, int64_t lo, int64_t hi); /* uniform in [lo, hi] */
/* A seed for one case, mixed from the suite's numbers (test, size, dtype...). */
uint64_t test_seed(uint64_t a, uint64_t b, uint64_t c);

/* ---- dtypes ------------------------------------------------------------ */

typedef struct TjTolerance {
  double rtol, atol;
} TjTolerance;

/* f32 1.3e-6 / 1e-5, f16 1e-3 / 1e-5, bf16 1.6e-2 / 1e-5 (torch.testing's). */
TjTolerance dtype_tolerance(tj_dtype d);
size_t dtype_bytes(tj_dtype d);
const char *dtype_label(tj_dtype d);
/* Element i of a buffer as a double (exact), and set from a double (rounded
 * to f32, then to the dtype, round-to-nearest-even). */
double elem_get(const void *buf, tj_dtype d, size_t i);
void elem_set(void *buf, tj_dtype d, size_t i, double v);
/* The raw bits of element i (16 or 32 of them). */
uint32_t elem_bits(const void *buf, tj_dtype d, size_t i);
/* A quiet NaN with a payload no computation makes: "never written". */
uint32_t poison_bits(tj_dtype d);
bool is_poison(const void *buf, tj_dtype d, size_t i);

/* ---- matrices ---------------------------------------------------------- */

/* rows x cols elements; row r starts at element r * stride (stride >= cols).
 * The buffer holds (rows - 1) * stride + cols elements (the span), then
 * `guard` more; at least one element is allocated. */
typedef struct TjMatrix {
  tj_dtype dtype;
  int64_t rows, cols, stride, guard;
  void *data;
  size_t bytes;      /* the whole buffer, guard included */
  size_t span_bytes; /* up to the end of the last row */
} TjMatrix;

/* false on bad sizes or out of memory. The buffer starts all poison. */
bool matrix_alloc(TjMatrix *m, tj_dtype d, int64_t rows, int64_t cols, int64_t stride,
                  int64_t guard);
void matrix_free(TjMatrix *m);
size_t matrix_index(const TjMatrix *m, int64_t row, int64_t col);
double matrix_get(const TjMatrix *m, int64_t row, int64_t col);
void matrix_set(TjMatrix *m, int64_t row, int64_t col, double v);
/* Every element, gaps and guard included, to the poison NaN. */
void matrix_poison(TjMatrix *m);
/* Row elements to scale * normal + offset (offset drawn per row in
 * [-spread, spread]); gaps and guard to the poison, which would turn any
 * row that reads them into NaN. */
void matrix_fill_random(TjMatrix *m, TjRng *r, double scale, double spread);

/* ---- softmax: reference and checks ------------------------------------- */

/* The float64 softmax of every row of x into ref (rows * cols, contiguous):
 * exp(x - max) / sum, with max ignoring NaN; so a row of all -inf, or with
 * +inf or NaN in it, is all NaN, as torch.softmax gives. */
void softmax_reference(const TjMatrix *x, double *ref);
/* The same for any row op: log-softmax is (x - max) - log sum exp(x - max),
 * NaN for the same rows, -inf where x is -inf in a row with a finite max. */
void row_reference(tj_row_op op, const TjMatrix *x, double *ref);

/* Softmax backward's float64 reference: dx = y * (dy - sum(dy * y)) per
 * row, with the same IEEE semantics (an inf or NaN propagates as there). */
void backward_reference(const TjMatrix *y, const TjMatrix *dy, double *ref);
/* Inputs for softmax backward: y the softmax of random rows (as the dtype
 * holds it), dy 3 * normal; gaps and guards to the poison. */
void backward_fill(TjMatrix *y, TjMatrix *dy, TjRng *r);
/* Masked softmax (tj_masked_softmax): the columns row `row` of an m-row call
 * keeps, 0 .. end-1, end = clamp(q + offset + 1, 0, n) for query
 * q = row % rows (rows 0: m), or n when the mask is not causal. Any offset
 * in int64 (no overflow), as the API takes it. */
int64_t masked_softmax_end(const tj_softmax_mask *mask, int64_t m, int64_t n, int64_t row);
/* Its float64 reference: exp(scale * (x - max)) / sum over the kept columns
 * (scale the f32 mask->scale), exactly 0 in the dropped ones; a row that
 * keeps nothing, or whose kept x are all -inf, all 0; a kept +inf or NaN
 * makes the whole row NaN (dropped columns too, as torch's masked softmax).
 * Dropped columns are not read. */
void masked_softmax_reference(const TjMatrix *x, const tj_softmax_mask *mask, double *ref);
/* Inputs for masked softmax: 3 * normal around a row offset (1e4 for f32,
 * 100 for 16-bit types), gaps and guard to the poison; in every odd row
 * with dropped columns a NaN in the first and a +inf in the last, which
 * must not matter since they are not read. */
void masked_softmax_fill(TjMatrix *x, const tj_softmax_mask *mask, TjRng *r);
/* Row r of 10, over its kept columns 0 .. end-1: 0 as filled; 1 a -inf at
 * every third (exact zeros); 2 all -inf (a row of zeros); 3 a +inf and 4 a
 * NaN (NaN rows); 5 NaN, +inf and -inf in the dropped columns only (as if
 * none); 6 subnormals; 7 one-hot from the dtype's largest values; 8 all
 * huge but one as hugely negative; 9 all -inf, with a NaN in the last
 * dropped column (a row of zeros). */
void masked_softmax_extreme_rows(TjMatrix *x, const tj_softmax_mask *mask);
/* A causal mask, and the scales the masked-softmax suites use (1/8, 1,
 * 1/sqrt(80), 3). */
tj_softmax_mask masked_causal(int64_t rows, int64_t offset, float scale);
extern const float masked_scales[4];
/* The masks of attention for rows of n, each with the M of its call:
 * top left (one matrix, and three of 4 queries), bottom right (with more
 * queries than n in a call of rows_past_n rows), negative offsets, offsets
 * past the clamp (every column, no column), no mask (its offset ignored),
 * rows 0 (= M). Fills out (MASKED_CALLS entries). */
typedef struct MaskedCall {
  int64_t m;
  tj_softmax_mask mask;
} MaskedCall;
#define MASKED_CALLS 12
void masked_calls(int64_t n, int64_t rows_past_n, MaskedCall *out);
/* As softmax_spec_options, for any row op's plan (tj_row_plan_for). */
tj_status row_spec_options(tj_row_op op, tj_softmax_template which, tj_dtype dtype, int64_t rows,
                           int64_t n, int arch, int warps, tj_spec_options *o);

/* The specialization tj_softmax would run for `rows` rows of n (the
 * template: which, or the plan's for AUTO) on a nominal device of arch (0:
 * sm_90), with warps (0: the plan's); cluster and split as planned. */
tj_status softmax_spec_options(tj_softmax_template which, tj_dtype dtype, int64_t rows, int64_t n,
                               int arch, int warps, tj_spec_options *o);

/* |got - want| <= atol + rtol |want|; NaN only matches NaN, inf only itself. */
bool close_enough(double got, double want, TjTolerance t);

typedef struct TjCompare {
  int64_t checked;              /* row elements compared */
  int64_t bad;                  /* of those, outside the tolerance (unwritten ones included) */
  int64_t unwritten;            /* row elements still holding the poison */
  int64_t touched;              /* gap and guard elements no longer holding it */
  double max_abs;               /* max |out - ref| over finite references */
  double max_ratio;             /* max |out - ref| / (atol + rtol |ref|) over finite references */
  int64_t first_row, first_col; /* the first bad element (-1: none) */
  double first_got, first_want;
} TjCompare;

/* Compares y with ref (as softmax_reference lays it out) and checks the
 * poison outside the rows. check_written: also count row elements holding
 * the poison (off for in-place runs, whose rows start as x). True if clean. */
bool compare_rows(const TjMatrix *y, const double *ref, TjTolerance t, bool check_written,
                  TjCompare *c);
/* Row elements whose reference is exactly 0 (a dropped column, a -inf, an
 * exp that underflows even in float64) must be exactly +0: returns how many
 * are not, the first of them in *row, *col (-1 when none). */
int64_t compare_exact_zeros(const TjMatrix *y, const double *ref, int64_t *row, int64_t *col);
/* "3 of 4000 bad (first at row 1, col 7: got nan, want 0.25), 0 unwritten, ..." */
void compare_describe(const TjCompare *c, char *out, size_t size);

/* Runs every test of s (forking per test unless CK_FORK=no) and frees it;
 * returns the process exit status: 0 if all passed, 1 otherwise. */
int test_run_suite(Suite *s);

#endif /* TJ_TEST_SUPPORT_H */
