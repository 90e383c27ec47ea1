/*
 * cuda_prelude.cu - the CUDA C prelude of tilejit's NVRTC backend. The
 * emitter (src/codegen/cuda_emit.c) pastes it in front of every kernel; it is
 * embedded at build time as tj_template_cuda_prelude.
 *
 * It gives every IR op one overloaded helper, so the emitter prints any op as
 * `tj_<op>(a, b)` whatever its element type, with the interpreter's
 * semantics: f32 add/sub/mul/div round to nearest even and are never fused
 * (the _rn intrinsics); i32/i64 arithmetic wraps (done on unsigned); max/min
 * ignore a NaN operand (fmaxf); compares are C++'s (false on NaN, except
 * !=); casts from float to integer truncate and saturate, to f16/bf16 round
 * to nearest even (integers through a round-to-odd f32, so once). exp and
 * exp2 are ex2.approx.ftz, as in the PTX backend (exp(x) = 2^(x*log2 e));
 * log is logf. f16 and bf16 are raw 16-bit structs (no cuda_fp16.h, which
 * NVRTC may not find), converted by cvt (f16) or exact integer code (bf16).
 * Tile reductions combine a thread's own slots, then a shuffle butterfly
 * within the group, then, for groups wider than a warp, warps through
 * shared memory.
 *
 * It needs no header at all: NVRTC compiles it with no include path.
 */

struct tj_f16 {
  unsigned short bits;
};
struct tj_bf16 {
  unsigned short bits;
};

/* Loops over a thread's slots are unrolled up to this many, so that tiles
 * stay in registers; longer ones stay loops (and their tiles in local memory). */
#define TJ_UNROLL_MAX 128

/* ---- conversions: tj_to_<elem>(x), round to nearest even ---------------- */

__device__ __forceinline__ float tj_to_f32(float x) { return x; }
__device__ __forceinline__ float tj_to_f32(int x) { return __int2float_rn(x); }
__device__ __forceinline__ float tj_to_f32(long long x) { return __ll2float_rn(x); }
__device__ __forceinline__ float tj_to_f32(tj_f16 x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
}
__device__ __forceinline__ float tj_to_f32(tj_bf16 x) {
  return __uint_as_float((unsigned)x.bits << 16);
}

/* An integer rounded to f32 toward zero, with the lowest bit set when that
 * was inexact (round to odd): a second rounding to f16 or bf16, which keep
 * fewer bits, is then the correct single rounding of the integer. */
__device__ __forceinline__ float tj_odd_f32(long long x) {
  float f = __ll2float_rz(x);
  if (__float2ll_rz(f) != x) f = __uint_as_float(__float_as_uint(f) | 1u);
  return f;
}

__device__ __forceinline__ tj_f16 tj_to_f16(float x) {
  tj_f16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(x));
  return h;
}
__device__ __forceinline__ tj_f16 tj_to_f16(int x) { return tj_to_f16(tj_odd_f32(x)); }
__device__ __forceinline__ tj_f16 tj_to_f16(long long x) { return tj_to_f16(tj_odd_f32(x)); }
__device__ __forceinline__ tj_f16 tj_to_f16(tj_f16 x) { return x; }
__device__ __forceinline__ tj_f16 tj_to_f16(tj_bf16 x) { return tj_to_f16(tj_to_f32(x)); }

/* f32 -> bf16 by integer rounding: add half an ulp of bf16 minus one, plus
 * the kept lowest bit, so that ties go to even; NaN stays a quiet NaN. */
__device__ __forceinline__ tj_bf16 tj_to_bf16(float x) {
  unsigned u = __float_as_uint(x);
  tj_bf16 b;
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    b.bits = (unsigned short)((u >> 16) | 0x0040u);
    return b;
  }
  u += 0x7fffu + ((u >> 16) & 1u);
  b.bits = (unsigned short)(u >> 16);
  return b;
}
__device__ __forceinline__ tj_bf16 tj_to_bf16(int x) { return tj_to_bf16(tj_odd_f32(x)); }
__device__ __forceinline__ tj_bf16 tj_to_bf16(long long x) { return tj_to_bf16(tj_odd_f32(x)); }
__device__ __forceinline__ tj_bf16 tj_to_bf16(tj_f16 x) { return tj_to_bf16(tj_to_f32(x)); }
__device__ __forceinline__ tj_bf16 tj_to_bf16(tj_bf16 x) { return x; }

/* Float to integer truncates toward zero, as the interpreter does; NaN gives
 * 0 and out-of-range values saturate (cvt.rzi). */
__device__ __forceinline__ int tj_to_i32(int x) { return x; }
__device__ __forceinline__ int tj_to_i32(long long x) {
  return (int)(unsigned)(unsigned long long)x;
}
__device__ __forceinline__ int tj_to_i32(float x) { return __float2int_rz(x); }
__device__ __forceinline__ int tj_to_i32(tj_f16 x) { return __float2int_rz(tj_to_f32(x)); }
__device__ __forceinline__ int tj_to_i32(tj_bf16 x) { return __float2int_rz(tj_to_f32(x)); }

__device__ __forceinline__ long long tj_to_i64(int x) { return (long long)x; }
__device__ __forceinline__ long long tj_to_i64(long long x) { return x; }
__device__ __forceinline__ long long tj_to_i64(float x) { return __float2ll_rz(x); }
__device__ __forceinline__ long long tj_to_i64(tj_f16 x) { return __float2ll_rz(tj_to_f32(x)); }
__device__ __forceinline__ long long tj_to_i64(tj_bf16 x) { return __float2ll_rz(tj_to_f32(x)); }

/* ---- arithmetic --------------------------------------------------------- */

__device__ __forceinline__ float tj_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ int tj_add(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
__device__ __forceinline__ long long tj_add(long long a, long long b) {
  return (long long)((unsigned long long)a + (unsigned long long)b);
}
__device__ __forceinline__ float tj_sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ int tj_sub(int a, int b) { return (int)((unsigned)a - (unsigned)b); }
__device__ __forceinline__ long long tj_sub(long long a, long long b) {
  return (long long)((unsigned long long)a - (unsigned long long)b);
}
__device__ __forceinline__ float tj_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ int tj_mul(int a, int b) { return (int)((unsigned)a * (unsigned)b); }
__device__ __forceinline__ long long tj_mul(long long a, long long b) {
  return (long long)((unsigned long long)a * (unsigned long long)b);
}
__device__ __forceinline__ float tj_div(float a, float b) { return __fdiv_rn(a, b); }

__device__ __forceinline__ float tj_max(float a, float b) { return fmaxf(a, b); }
/* i32 max/min compare sign-flipped unsigned values: ptxas 13.0 miscompiles
 * nested max.s32/min.s32 of negated operands (it drops a negation). */
__device__ __forceinline__ unsigned tj_flip(int a) { return (unsigned)a ^ 0x80000000u; }
__device__ __forceinline__ int tj_max(int a, int b) {
  return (int)((tj_flip(a) > tj_flip(b) ? tj_flip(a) : tj_flip(b)) ^ 0x80000000u);
}
__device__ __forceinline__ long long tj_max(long long a, long long b) { return a > b ? a : b; }
__device__ __forceinline__ float tj_min(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ int tj_min(int a, int b) {
  return (int)((tj_flip(a) < tj_flip(b) ? tj_flip(a) : tj_flip(b)) ^ 0x80000000u);
}
__device__ __forceinline__ long long tj_min(long long a, long long b) { return a < b ? a : b; }

/* a % b, 0 where b is 0 or -1 (as the interpreter). */
template <class T> __device__ __forceinline__ T tj_rem(T a, T b) {
  return b == 0 || b == -1 ? (T)0 : a % b;
}
__device__ __forceinline__ float tj_neg(float a) { return -a; }
__device__ __forceinline__ int tj_neg(int a) { return (int)(0u - (unsigned)a); }
__device__ __forceinline__ long long tj_neg(long long a) {
  return (long long)(0ull - (unsigned long long)a);
}

/* ---- math: the PTX backend's approximations ------------------------------ */

__device__ __forceinline__ float tj_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float tj_exp(float x) {
  return tj_exp2(__fmul_rn(x, 1.44269504088896341f));
}
__device__ __forceinline__ float tj_log(float x) { return logf(x); }

/* ---- compares, logic, select -------------------------------------------- */

template <class T> __device__ __forceinline__ bool tj_lt(T a, T b) { return a < b; }
template <class T> __device__ __forceinline__ bool tj_le(T a, T b) { return a <= b; }
template <class T> __device__ __forceinline__ bool tj_gt(T a, T b) { return a > b; }
template <class T> __device__ __forceinline__ bool tj_ge(T a, T b) { return a >= b; }
template <class T> __device__ __forceinline__ bool tj_eq(T a, T b) { return a == b; }
template <class T> __device__ __forceinline__ bool tj_ne(T a, T b) { return a != b; }
__device__ __forceinline__ bool tj_and(bool a, bool b) { return a && b; }
__device__ __forceinline__ bool tj_or(bool a, bool b) { return a || b; }
template <class T> __device__ __forceinline__ T tj_select(bool c, T a, T b) { return c ? a : b; }

/* ---- groups of threads ---------------------------------------------------- */

/* A program instance runs on a group of G threads (a power of two): G <= 32
 * lanes of one warp, or whole warps (the CTA, or T/G groups of them). The
 * mask names the group's lanes. */
template <int G> __device__ __forceinline__ unsigned tj_group_mask() {
  if constexpr (G >= 32)
    return 0xffffffffu;
  else
    return ((1u << G) - 1u) << ((threadIdx.x & 31u) & ~(unsigned)(G - 1));
}

/* Orders a group's global memory accesses: a store before it is seen by
 * every load of the group after it. */
template <int G> __device__ __forceinline__ void tj_group_sync(unsigned mask) {
  if constexpr (G > 32)
    __syncthreads();
  else
    __syncwarp(mask);
}

/* ---- reductions ----------------------------------------------------------- */

/* As the interpreter: max folds fmaxf from -inf (NaN ignored, so a tile of
 * NaN gives -inf); a sum starts from -0, which adds exactly nothing. */
struct tj_max_op {
  static __device__ __forceinline__ float identity(float) { return __uint_as_float(0xff800000u); }
  static __device__ __forceinline__ int identity(int) { return (int)0x80000000u; }
  template <class T> static __device__ __forceinline__ T apply(T a, T b) { return tj_max(a, b); }
};
struct tj_sum_op {
  static __device__ __forceinline__ float identity(float) { return -0.0f; }
  static __device__ __forceinline__ int identity(int) { return 0; }
  template <class T> static __device__ __forceinline__ T apply(T a, T b) { return tj_add(a, b); }
};

__device__ __forceinline__ unsigned tj_bits(float x) { return __float_as_uint(x); }
__device__ __forceinline__ unsigned tj_bits(int x) { return (unsigned)x; }
__device__ __forceinline__ float tj_from_bits(unsigned u, float) { return __uint_as_float(u); }
__device__ __forceinline__ int tj_from_bits(unsigned u, int) { return (int)u; }

/* Combines x over the G threads of a group; every thread gets the same value
 * (a butterfly gives each lane the same operands, and warps are read in
 * order). For G > 32 (whole warps, the CTA or a part of it), scratch holds
 * one word per warp of the CTA, and a group reads its own warps' words. */
template <class Op, int G, class T>
__device__ __forceinline__ T tj_group_reduce(T x, unsigned mask, unsigned *scratch) {
#pragma unroll
  for (int lanes = (G < 32 ? G : 32) / 2; lanes > 0; lanes /= 2)
    x = Op::apply(x, __shfl_xor_sync(mask, x, lanes));
  if constexpr (G > 32) {
    if ((threadIdx.x & 31u) == 0) scratch[threadIdx.x / 32] = tj_bits(x);
    __syncthreads();
    const unsigned *group = scratch + threadIdx.x / G * (G / 32);
    x = tj_from_bits(group[0], x);
#pragma unroll
    for (int w = 1; w < G / 32; w++) x = Op::apply(x, tj_from_bits(group[w], x));
    __syncthreads();
  }
  return x;
}

/* Reduces a tile of L elements held as E slots per thread (slot j of rank r
 * is element j*G + r; slots past L are padding and left out). */
template <class Op, int G, int L, class T, int E>
__device__ __forceinline__ T tj_reduce(const T (&v)[E], int rank, unsigned mask,
                                       unsigned *scratch) {
  T acc = Op::identity(v[0]);
  if constexpr (E <= TJ_UNROLL_MAX) {
#pragma unroll
    for (int j = 0; j < E; j++)
      if (L % G == 0 || j * G + rank < L) acc = Op::apply(acc, v[j]);
  } else {
#pragma unroll 1
    for (int j = 0; j < E; j++)
      if (L % G == 0 || j * G + rank < L) acc = Op::apply(acc, v[j]);
  }
  return tj_group_reduce<Op, G>(acc, mask, scratch);
}

/* ---- the kernel ----------------------------------------------------------- */
