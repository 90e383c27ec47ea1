/*
 * data.h — host data the tools share (data.c): a seeded random stream,
 * elements of any pointee type read and written as doubles, the float64
 * reference rows of the shipped row ops (the masked softmax's too), and
 * the testing rules' tolerance per element type.
 */
#ifndef TJ_TOOLS_DATA_H
#define TJ_TOOLS_DATA_H

#include "tilejit.h"

#include <stdbool.h>
#include <stdint.h>

/* splitmix64: the next 64 random bits of *state. */
uint64_t data_next(uint64_t *state);
/* Uniform in [0, 1), and standard normal (Box-Muller). */
double data_uniform(uint64_t *state);
double data_normal(uint64_t *state);

/* Element i of a buffer of elem (f16 and bf16 as raw 16-bit patterns; i32
 * and i64 as integers), as a double, and stored from one (rounded to
 * nearest; integers truncated toward zero). */
double data_get(const void *buf, tj_elem elem, int64_t i);
void data_set(void *buf, tj_elem elem, int64_t i, double v);
int data_elem_size(tj_elem elem); /* bytes; 0 for pred and DTYPE */
tj_elem data_elem_of(tj_dtype d);  /* a storage dtype's element type */

/* The float64 softmax, or log-softmax, of the n elements of x (elem) into
 * want: exp(x - max) / sum, or (x - max) - log sum, max ignoring NaN. */
void data_row_reference(const void *x, tj_elem elem, int64_t n, bool log_softmax,
                        double *want);

/* The float64 masked softmax (tj_masked_softmax) of row r of an m-row
 * matrix, x its n elements, into want: the row is query q = r % rows (rows
 * 0: m), its kept columns j <= q + offset (every one when not causal) give
 * softmax(scale * x) over themselves and the dropped ones exactly 0. A
 * NaN or +inf among the kept makes the whole row NaN; a row that keeps no
 * column, or only -inf, is all 0. The scale is mask->scale, a float. */
void data_row_masked_reference(const void *x, tj_elem elem, int64_t n, int64_t r, int64_t m,
                               const tj_softmax_mask *mask, double *want);

/* |got - want| <= atol + rtol |want| (torch's defaults per dtype: f32
 * 1.3e-6 and 1e-5, f16 1e-3 and 1e-5, bf16 1.6e-2 and 1e-5; integers
 * exactly); NaN matches NaN, an infinity only itself. */
typedef struct DataTolerance {
  double rtol, atol;
} DataTolerance;
DataTolerance data_tolerance(tj_elem elem);
bool data_close(double got, double want, DataTolerance t);

#endif /* TJ_TOOLS_DATA_H */
