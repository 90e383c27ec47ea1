/*
 * support_ptxsim.h — a small PTX simulator for the suites (support_ptxsim.c).
 *
 * It runs the subset of PTX that tilejit's backend writes on the CPU, over
 * host buffers, so CI (which has no GPU) can check generated kernels
 * against the IR interpreter. It is strict where a GPU would be undefined,
 * would fault or would hang:
 *   - every global access lies inside an argument's buffer or the workspace
 *     and is aligned to its size; shared accesses stay inside tj_smem (its
 *     declared size, or the launch's for an .extern one), and a
 *     shared::cluster access names a CTA of the cluster that has not exited;
 *   - every lane of a warp reaches the same shfl.sync, every thread of a CTA
 *     the same bar.sync, every thread of a cluster each barrier.cluster phase
 *     (arrive, then wait: never twice in a row, never a wait alone, never an
 *     exit in between or while the rest of the cluster takes part);
 *   - a register read before any write is an error, and so is a deadlock:
 *     threads blocked at barriers that cannot complete, or spinning on
 *     memory nobody changes any more;
 *   - it refuses PTX that it would run right but the GPU's own compiler is
 *     known to get wrong: max.s32 and min.s32 (ptxas of CUDA 13.0 for sm_90
 *     fuses max(max(-a, -b), -c) into one VIMNMX3 and drops a negation; the
 *     backend writes them on unsigned keys).
 *
 * Scheduling: ordinary kernels run one CTA at a time; cluster kernels
 * (.reqnctapercluster) one cluster at a time; cooperative kernels (those
 * with a tj_workspace parameter) the whole grid at once, so CTAs can wait
 * for each other through global memory. Threads take turns round robin.
 *
 * Arithmetic follows PTX: f32 math in float, ex2/lg2 through exp2f/log2f
 * with subnormals flushed, max/min like fmaxf/fminf, float to int
 * conversions rounding as their modifier says and saturating. Memory is
 * sequentially consistent, so fences and memory-order qualifiers parse and
 * do nothing.
 */
#ifndef TJ_TEST_SUPPORT_PTXSIM_H
#define TJ_TEST_SUPPORT_PTXSIM_H

#include "tilejit.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One launch: the grid and the hidden parameters. */
typedef struct PtxsimLaunch {
  int64_t programs;       /* the hidden tj_programs value */
  int ctas;               /* CTAs in the grid (a multiple of the cluster size) */
  void *workspace;        /* the tj_workspace buffer, or NULL when the kernel has none */
  size_t workspace_bytes; /* its size: every access is checked against it */
  int64_t max_steps;      /* instructions over every thread before it calls the launch
                             endless (0: 4·10^8) */
  int dynamic_shared;     /* bytes of tj_smem where the kernel declares it .extern
                             (tj_launch_shape.dynamic_shared_bytes) */
} PtxsimLaunch;

/* What a launch did. Global bytes are counted per access (a vector access
 * counts all its elements, an atom both reads and writes); where two
 * arguments overlap, the first that holds the access counts it. */
typedef struct PtxsimStats {
  uint64_t bytes_read[16], bytes_written[16]; /* per tj_arg index (pointer args) */
  uint64_t workspace_read, workspace_written;
  int64_t steps; /* instructions executed, over every thread */
} PtxsimStats;

/* Runs the kernel of ptx with the program's arguments (pointers carry their
 * buffer sizes, as for tj_interpret). The kernel's parameters are the
 * arguments in order, then tj_workspace (when the kernel has one), then
 * tj_programs (always last); the hidden ones are found by name. stats is
 * filled when not NULL (also on failure, up to where it stopped). False
 * with a message in why. */
bool ptxsim_launch(const char *ptx, const tj_arg *args, int nargs, const PtxsimLaunch *launch,
                   PtxsimStats *stats, char *why, size_t why_size);

/* ptxsim_launch of `programs` program instances (the hidden parameter) on
 * `ctas` CTAs, without a workspace or stats. */
bool ptxsim_run(const char *ptx, const tj_arg *args, int nargs, int64_t programs, int ctas,
                char *why, size_t why_size);

/* The PTX tj_emit_ptx makes of s for arch, run for `programs` instances on
 * half the groups of CTAs they need (so that the grid-stride loop runs too;
 * one group for up to two), with a fresh workspace where the kernel has
 * one; max_steps as in PtxsimLaunch; stats as in ptxsim_launch. False with
 * a message in why. */
bool ptxsim_run_spec(tj_spec *s, int arch, const tj_arg *args, int nargs, int64_t programs,
                     int64_t max_steps, PtxsimStats *stats, char *why, size_t why_size);

#endif /* TJ_TEST_SUPPORT_PTXSIM_H */
