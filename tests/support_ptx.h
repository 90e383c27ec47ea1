/*
 * support_ptx.h — helpers for the suites that look at generated PTX
 * (support_ptx.c): softmax PTX for one configuration, counting and picking
 * instructions out of a listing, and assembling many kernels with ptxas in
 * a few processes (batches run two at a time; each kernel's register and
 * spill report comes back separately).
 */
#ifndef TJ_TEST_SUPPORT_PTX_H
#define TJ_TEST_SUPPORT_PTX_H

#include "tilejit.h"

#include <check.h>

#include <stdbool.h>
#include <stddef.h>

/* One softmax configuration. align 0: 16; arch 0: 90; warps 0: default;
 * phased: tj_spec_options.phased. */
typedef struct SoftmaxConfig {
  tj_softmax_template which;
  tj_dtype dtype;
  int64_t n, block;
  int warps, align, arch, annotate, phased;
} SoftmaxConfig;

/* The CTAs per row of softmax_ptx's kernels (0: as planned for 65536 rows),
 * for the sweeps over clusters and splits. */
typedef struct SoftmaxSpread {
  int cluster, split;
} SoftmaxSpread;

/* The PTX of cfg (release with tj_free), or NULL with the reason in why.
 * status, when not NULL, receives the status of the failing step. */
char *softmax_ptx(const SoftmaxConfig *cfg, tj_kernel_info *info, tj_status *status, char *why,
                  size_t why_size);
char *softmax_ptx_spread(const SoftmaxConfig *cfg, SoftmaxSpread spread, tj_kernel_info *info,
                         tj_status *status, char *why, size_t why_size);
/* The same with DIV (tj_spec_options.multiple; 0: none), as tj_softmax
 * specializes on n. */
char *softmax_ptx_div(const SoftmaxConfig *cfg, SoftmaxSpread spread, int multiple,
                      tj_kernel_info *info, tj_status *status, char *why, size_t why_size);

/* Lines of ptx containing needle. */
int ptx_count(const char *ptx, const char *needle);
/* The offsets of every shfl.sync.bfly in order, up to max; returns the count. */
int ptx_shfl_offsets(const char *ptx, int *offsets, int max);
/* The index of the first line at or after line `from` containing needle, or -1. */
int ptx_find_line(const char *ptx, const char *needle, int from);

/* ---- ptxas in batches -------------------------------------------------- */

typedef struct PtxReport {
  int assembled; /* the batch it was in assembled */
  int registers;
  int spill_bytes; /* stores + loads */
  int stack_bytes;
  int local_bytes;
} PtxReport;

typedef struct PtxBatch PtxBatch;

/* Path of ptxas, or false when there is none (the suite then exits 77). */
bool ptxas_available(char *path, size_t size);
/* main() of a suite that needs ptxas: finds it into path (the suite reads
 * it), prints a note and returns 77 (skipped) without it, else runs s. */
int ptxas_suite_main(Suite *s, char *path, size_t size);
PtxBatch *ptx_batch_new(const char *ptxas, int arch, int per_file);
/* Adds one kernel (its text is copied, its entry renamed); returns its index. */
int ptx_batch_add(PtxBatch *b, const char *ptx);
/* Assembles everything (two ptxas at a time). A file that fails is split
 * down to single kernels so that only the bad ones report assembled = 0. */
void ptx_batch_run(PtxBatch *b);
const PtxReport *ptx_batch_report(const PtxBatch *b, int index);
/* The ptxas log of the first failing kernel ("" if none). */
const char *ptx_batch_first_error(const PtxBatch *b);
int ptx_batch_count(const PtxBatch *b);
void ptx_batch_free(PtxBatch *b);

#endif /* TJ_TEST_SUPPORT_PTX_H */
