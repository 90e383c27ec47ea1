/*
 * support_ptxsim.h — a small PTX simulator for the suites (support_ptxsim.c).
 *
 * It runs the subset of PTX that tilejit's backend writes on the CPU, over
 * host buffers, so CI (which has no GPU) can check generated kernels
 * against the IR interpreter. It is strict where a GPU would be undefined
 * or would fault: every global access must lie inside an argument's buffer
 * and be aligned to its size; every lane of a warp must reach the same
 * shfl.sync, and every thread of a CTA the same bar.sync; a register read
 * before any write is an error. It also refuses PTX that it would run right
 * but the GPU's own compiler is known to get wrong: max.s32 and min.s32
 * (ptxas of CUDA 13.0 for sm_90 fuses max(max(-a, -b), -c) into one
 * VIMNMX3 and drops a negation; the backend writes them on unsigned keys). Threads of a CTA run one at a time between
 * those synchronization points, CTAs one after another.
 *
 * Arithmetic follows PTX: f32 math in float, ex2/lg2 through exp2f/log2f
 * with subnormals flushed, max/min like fmaxf/fminf, conversions rounding to
 * nearest even.
 */
#ifndef TJ_TEST_SUPPORT_PTXSIM_H
#define TJ_TEST_SUPPORT_PTXSIM_H

#include "tilejit.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Runs the kernel of ptx with the program's arguments (pointers carry
 * their buffer sizes, as for tj_interpret), `programs` program instances
 * (the hidden parameter) on `ctas` CTAs. False with a message in why. */
bool ptxsim_run(const char *ptx, const tj_arg *args, int nargs, int64_t programs, int ctas,
                char *why, size_t why_size);

#endif /* TJ_TEST_SUPPORT_PTXSIM_H */
