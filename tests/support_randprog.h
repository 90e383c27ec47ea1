/*
 * support_randprog.h — random, valid tile programs and the arguments they
 * need (support_randprog.c), for tests that compare code generators with
 * the interpreter: the ptxas suite, the PTX simulator suite, and GPU suites.
 *
 * randprog_make(seed) builds, through the public builder API, a program of
 * a few dozen instructions: row pointers from program_id and an i64 stride,
 * loads of DTYPE and f32 rows with masks (monotone bounds, windows, their
 * unions), a gather through a reversed index and one through an index
 * buffer, random elementwise f32 and i32 arithmetic with broadcast scalars,
 * compares and selects, casts, reductions, and sometimes a counted loop over
 * chunks (loop-carried running values) or a loop whose trip count depends
 * on program_id. Results go to three output buffers, each written by exactly
 * one store per row (so program instances never race on a GPU):
 *   out  (f32)   a tile result per element,
 *   outd (DTYPE) another tile result, cast to the storage type,
 *   outs (f32)   scalar results (reductions, loop-carried values), one slot
 *                each at the start of the row.
 * Compares only ever see values that every backend computes exactly (inputs,
 * integer math, add/sub/mul/max/min, reduce_max), so a select cannot flip
 * between backends on an approximate exp.
 *
 * The same seed always gives the same program, specialization options and
 * argument contents. All buffers are host memory owned by the RandProg.
 */
#ifndef TJ_TEST_SUPPORT_RANDPROG_H
#define TJ_TEST_SUPPORT_RANDPROG_H

#include "tilejit.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RANDPROG_ARGS 9

/* Parameter order of every random program. */
enum {
  RP_OUT,    /* ptr<f32> */
  RP_OUTD,   /* ptr<DTYPE> */
  RP_OUTS,   /* ptr<f32> */
  RP_X,      /* ptr<DTYPE>, inputs */
  RP_F,      /* ptr<f32>, inputs */
  RP_INDEX,  /* ptr<i32>, indices in [0, n) */
  RP_STRIDE, /* i64: row stride of every buffer, in elements */
  RP_N,      /* i32: valid elements per row */
  RP_S,      /* f32 */
};

typedef struct RandProg {
  uint64_t seed;
  tj_program *program;
  tj_spec_options options; /* BLOCK, NUM_WARPS, DTYPE, ALIGN */
  tj_arg args[RANDPROG_ARGS];
  int64_t grid;   /* program instances */
  int64_t rows;   /* rows every buffer holds (>= grid) */
  int64_t stride; /* elements per row */
  char summary[160];
} RandProg;

/* Builds program, options and arguments for seed; false (why set) only if
 * the builder rejects something, which is a bug in the generator. */
bool randprog_make(uint64_t seed, RandProg *rp, char *why, size_t why_size);
/* Sets every output buffer element to a NaN no computation makes. */
void randprog_poison_outputs(RandProg *rp);
/* Buffer of parameter i and its element count (0 for scalars). */
size_t randprog_elements(const RandProg *rp, int i);
/* Output buffer i of a run (got) against the interpreter's (want): the same
 * elements written, each within a tolerance that covers ex2.approx and the
 * order of sums (Check assertions). */
void randprog_compare(const RandProg *rp, int i, const void *got, const void *want);
void randprog_free(RandProg *rp);

#endif /* TJ_TEST_SUPPORT_RANDPROG_H */
