/*
 * cuda.h — the internal header of tilejit's second backend: IR -> CUDA C ->
 * NVRTC -> PTX. It sits beside the direct PTX generator in src/codegen and
 * shares with it the IR (src/ir/ir.h), the kernel ABI of tilejit.h and the
 * geometry's choice of threads per instance (cg_group_size, geometry.c).
 *
 * Sections below follow the files that define them:
 *   cuda_ops.c   the op -> CUDA C pattern table and element type names
 *   cuda_emit.c  the lowering (tj_emit_cuda)
 *   cuda_order.c where group barriers keep memory accesses in program order
 *   nvrtc.c      libnvrtc loaded at run time (tj_nvrtc_ptx, tj_nvrtc_version)
 *
 * The CUDA C prelude every kernel starts with is templates/cuda_prelude.cu,
 * embedded at build time.
 */
#ifndef TJ_CODEGEN_CUDA_H
#define TJ_CODEGEN_CUDA_H

#include "ir/ir.h"

/* The prelude's text (templates/cuda_prelude.cu). */
extern const char tj_template_cuda_prelude[];

/* Loops over a thread's slots of one tile are unrolled up to this many slots
 * (the prelude's TJ_UNROLL_MAX is the same number); longer ones stay loops. */
#define CG_CUDA_UNROLL_MAX 128
/* A tile needing more slots per thread than this is refused (it could only
 * live in local memory): use more warps or a chunked program. */
#define CG_CUDA_MAX_SLOTS 8192

/* ----------------------------------------------------------- cuda_ops.c */

/* The CUDA C pattern of an op, or NULL for the ops the emitter writes by
 * hand (param, const, load, store and the loop markers). In a pattern,
 *   $0..$3  operand i (its element j for tiles, the value for scalars)
 *   $A      operand 0's name (a whole tile, for reductions)
 *   $L      operand 0's tile length      $G  threads per program instance
 *   $r      the result's element name (i32, f16, ...) */
const char *cg_cuda_pattern(tj_op op);
/* The CUDA C type of an element ("float", "tj_bf16", "bool"). */
const char *cg_cuda_type(tj_elem elem);

/* ---------------------------------------------------------- cuda_emit.c */

/* Appends the whole translation unit (prelude and kernel) for s to out and
 * fills info; on error the message is left on s. */
tj_status cg_cuda_emit(tj_spec *s, const tj_codegen_options *options, TjBuf *out,
                       tj_kernel_info *info);

/* --------------------------------------------------------- cuda_order.c */

/* Whether the store at instruction `store` of a specialized program needs a
 * group barrier before it (a load of another thread may still be pending) or
 * after it (an access of another thread may follow). */
bool cg_cuda_sync_before_store(const tj_program *p, int store);
bool cg_cuda_sync_after_store(const tj_program *p, int store);

/* -------------------------------------------------------------- nvrtc.c */

/* Compiles CUDA C source to PTX for compute_<arch>. On failure, error
 * (TJ_ERROR_MAX bytes) holds what went wrong and NVRTC's program log. */
tj_status cg_nvrtc_compile(const char *source, int arch, char **ptx, char *error);

#endif /* TJ_CODEGEN_CUDA_H */
