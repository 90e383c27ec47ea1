/*
 * codegen.h — the internal header of the PTX backend (src/codegen).
 *
 * tj_emit_ptx turns a specialized program into PTX text in one pass over the
 * instructions, after small planning steps:
 *
 *   analyze.c  facts per value: shape (scalar, splat, affine, per-slot),
 *              divisibility, pointer alignment, uniformity, monotone masks
 *   geometry.c the levels a tile spreads over (lanes, warps, cluster, grid),
 *              the prologue's indices, the instance loop, slot index math
 *   layout.c   for each tile length its vector width (VEC) and repeats (R);
 *              the num_warps table and the occupancy request
 *   reduce.c   the plan of shared-memory regions and barriers, then the
 *              lowering of reductions, one combiner per level
 *   lower.c    the kernel skeleton and the dispatch over IR ops
 *   values.c   the helpers every lowering file uses
 *   phase.c    rows at any 16-byte phase: the rotated layout, wrap tests
 *   memory.c   loads and stores: 16-byte vectors, masks as predicates
 *   ptx_ops.c  the op -> PTX text table (from TJ_OP_LIST), and casts
 *   exp_shift.c exp(t - m) for one value m as an fma and an ex2 a slot
 *   emit.c     the arena, registers and the one printf-checked emitter
 *   arch.c     arch -> minimum PTX ISA, and per-feature requirements
 *   ptxas.c    running ptxas on PTX text (tools and tests; never on the
 *              hot path), and parsing its -v report
 *   codegen.c  tj_emit_ptx: the driver that calls the stages in order
 *
 * Everything a compile allocates lives in one arena freed at the end; only
 * the PTX text outlives it. Nothing here prints, exits or keeps global state.
 */
#ifndef TJ_CODEGEN_H
#define TJ_CODEGEN_H

#include "ir/ir.h"

/* ------------------------------------------------------------- arch.c */

typedef struct CgArch {
  int sm;             /* 10*major + minor */
  int ptx;            /* lowest PTX ISA that knows the target, 10*major + minor */
  const char *target; /* "sm_90" */
  int threads_per_sm; /* resident threads one SM holds at most */
} CgArch;

/* Instructions that need more than the oldest supported arch and ISA. */
enum {
  CG_FEAT_CVT_BF16 = 1u << 0, /* cvt.rn.bf16.f32: sm_80, PTX 7.0 */
  CG_FEAT_CLUSTER = 1u << 1,  /* clusters: mapa, barrier.cluster, st.async: sm_90, PTX 8.1 */
};

#define CG_DEFAULT_ARCH 90
#define CG_PTX_MAX      90 /* the newest ISA this backend writes (CUDA 13.0) */

const CgArch *cg_arch_find(int sm); /* NULL if the arch is not supported */
int cg_arch_count(void);
const CgArch *cg_arch_at(int i);
bool cg_arch_has(int sm, unsigned feature);
/* The lowest ISA that has the arch and every feature in the set. */
int cg_ptx_version(int sm, unsigned features);

/* ------------------------------------------------------------- emit.c */

typedef struct CgChunk CgChunk;
typedef struct CgArena {
  CgChunk *head;
} CgArena;
void *cg_arena_alloc(CgArena *a, size_t size); /* zeroed; NULL on failure */
void cg_arena_free(CgArena *a);

/* Register classes; each has its own counter and declaration. */
typedef enum CgClass { CG_PRED, CG_B16, CG_B32, CG_B64, CG_F32, CG_CLASS_COUNT } CgClass;

/* A PTX operand: a virtual register, or an immediate of its class. A pred
 * immediate stands for "always" (bits 1); it never reaches the text. */
typedef struct CgOperand {
  uint8_t cls; /* CgClass */
  uint8_t imm;
  uint32_t reg;
  uint64_t bits;
} CgOperand;

typedef struct CgName {
  char s[28];
} CgName;

typedef struct CgEmit {
  TjBuf body;
  uint32_t next[CG_CLASS_COUNT];
  int labels;
} CgEmit;

CgOperand cg_reg(CgEmit *e, CgClass cls);
CgOperand cg_imm(CgClass cls, uint64_t bits);
CgOperand cg_imm_f32(float f);
CgOperand cg_imm_int(CgClass cls, int64_t v);
CgOperand cg_true(void);
bool cg_is_true(CgOperand o);
bool cg_same(CgOperand a, CgOperand b);
/* "%f12", "0f3F800000", "-7", "0xFC00". */
CgName cg_name(CgOperand o);
/* o's name written at out (sizeof(CgName) bytes); returns out. CG_N writes
 * it into a buffer of the calling expression: a CgName returned by value
 * is stored a byte at a time and copied out in wider words, which stalls
 * on every operand (tj-bench --codegen, 2026-11-27: the staged N = 65536
 * kernels 100 -> 88 us). */
char *cg_name_at(char *out, CgOperand o);
#define CG_N(o) cg_name_at((char[sizeof(CgName)]){0}, (o))
/* "[%rd5+512]", "[%r3]": base register plus a byte offset. */
CgName cg_address(CgOperand base, int64_t offset);
/* One instruction line: a tab, the text, a newline. */
void cg_line(CgEmit *e, const char *fmt, ...) TJ_PRINTF(2, 3);
/* A line as is (labels, comments). */
void cg_raw(CgEmit *e, const char *fmt, ...) TJ_PRINTF(2, 3);
/* ".reg .f32 %f<13>;" for each class used. */
void cg_declarations(const CgEmit *e, TjBuf *out);

/* Element types as PTX sees them. */
CgClass cg_elem_class(tj_elem e);
const char *cg_elem_ptx(tj_elem e); /* "f32", "s32", "s64", "b16", "pred" */
int cg_elem_size(tj_elem e);

/* ----------------------------------------------------------- analyze.c */

/* How a value is held. A splat tile has one value for every element; an
 * affine tile holds start + i at element i (an arange moved by a scalar);
 * a per-slot tile has one register per element a thread owns. */
typedef enum CgForm {
  CG_FORM_NONE,
  CG_FORM_SCALAR,
  CG_FORM_POINTER,
  CG_FORM_SPLAT,
  CG_FORM_AFFINE,
  CG_FORM_SLOTS,
} CgForm;

#define CG_POW2_MAX 30

typedef struct CgFacts {
  uint8_t *form;        /* per value: CgForm */
  uint8_t *pow2;        /* per int scalar/splat: log2 of a power of two dividing it;
                           per affine tile: the same for its start */
  uint8_t *align;       /* per pointer: log2 of its guaranteed byte alignment */
  uint8_t *uniform;     /* per value: equal in every program instance of a CTA */
  uint8_t *invariant;   /* per value: equal in every instance; computed once */
  uint8_t *monotone;    /* per pred tile: along increasing elements, true then false */
  uint8_t *materialize; /* per affine tile: per-slot registers are needed */
  uint8_t *remat;       /* per monotone pred tile used only as a mask (and by other
                           such): never held in registers; each load and store
                           computes its predicates again from the expression */
  uint8_t *fold;        /* per f32 tile used only by a reduction that its operands
                           outlive: computed slot by slot inside the reduction
                           (cg_folded) */
  uint8_t *shift;       /* per value: 1, an exp(t - m) computed shifted (exp_shift.c);
                           2, its t - m, which gets no registers */
  uint8_t *reduces;     /* per FOR instruction: its body holds a reduction */
  bool packable;        /* every loop holding a reduction has uniform bounds */
  int max_ptr_size;     /* widest pointee of a pointer parameter (bytes) */
} CgFacts;

typedef struct CgCtx CgCtx;
tj_status cg_analyze(CgCtx *c);

/* ---------------------------------------------------------- geometry.c */

/* The levels of the chain a tile element passes through above the thread's
 * own slots, innermost first (geometry.c's header). */
typedef enum CgLevel {
  CG_LEVEL_LANE,    /* lanes of a group or a warp: shfl.sync */
  CG_LEVEL_WARP,    /* warps of a CTA: shared memory and bar.sync */
  CG_LEVEL_CLUSTER, /* CTAs of a cluster: distributed shared memory */
  CG_LEVEL_GRID,    /* groups of CTAs of the grid: global memory */
  CG_LEVEL_COUNT
} CgLevel;

typedef struct CgGeometry {
  int warps, threads; /* per CTA: T = 32 * warps */
  int group;          /* G: threads of a CTA per instance (1 .. T) */
  int programs;       /* P = T / G: instances side by side in a CTA */
  int cluster;        /* C: CTAs of a cluster per instance (1: no cluster) */
  int split;          /* S: clusters (or CTAs) of the grid per instance (1: none) */
  int64_t span;       /* G * C * S: the threads holding one instance's tiles */
  /* Registers set in the prologue and per instance. */
  CgOperand tid, lane, group_index, group64;
  CgOperand cluster_rank, split_rank; /* multi-CTA: this CTA's ranks (else 0) */
  CgOperand unit, units;              /* multi-CTA: its group (or cluster), and their count */
  CgOperand count, first, stride, inst, inst_valid;
  CgOperand later; /* multi-CTA: pred, this CTA is past its first instance */
  CgOperand parity; /* flip_ctas: b32, 0 in the CTA's even instances, 8 in its odd ones */
} CgGeometry;

#define CG_MAX_CLUSTER  16   /* CTAs in a cluster (above 8: the non-portable sizes) */
#define CG_MAX_SPLIT    1024 /* clusters (or CTAs) of the grid per instance (as specialize.c) */
#define CG_MAX_LAYOUTS  16
#define CG_MAX_SLOTS    128  /* tile elements one thread may hold */
#define CG_HOLD_REGS    48   /* at most, registers a thread holds pieces of a capped stash in */
#define CG_HOLD_PIECES  4    /* ... and at most these pieces */
#define CG_STATIC_SHARED_MAX 49152 /* more shared memory is declared .extern, sized at launch */
#define CG_WARP_ROW_MAX 1024 /* rows up to this stay inside one warp */
#define CG_LANE_SCALARS 8    /* ... each lane at least this many in narrow vectors */
#define CG_LANE_REPS    2    /* ... or this many 16-byte vectors (cg_group_size) */
#define CG_LANE_REPS_PHASED 5 /* ... at most this many over 16 lanes and more, 16-bit phased rows */

/* A tile of len elements: the thread with index `lane` (geometry.c) owns
 * VEC contiguous elements at lane*VEC + j*span*VEC for repeats j < reps;
 * slot k = j*VEC + v. */
typedef struct CgLayout {
  int64_t len;
  int vec, reps, slots;
  int partial;       /* the repeat held by only some lanes, or -1 */
  int partial_lanes; /* lanes below this hold the partial repeat */
  CgOperand base32;  /* lane*VEC as i32 (b32), and as i64 when asked for */
  CgOperand base64;
  CgOperand slot_ok; /* pred: this lane holds the partial repeat */
  CgOperand guard;   /* per instance: slot_ok and the instance's validity */
  bool dynamic;      /* streamed with repeats past the tile: each repeat of a piece has
                        its guard, made at the piece's start (stream.c) */
  CgOperand *rep_guard;
  bool phased;       /* elements rotated by the instance's phase (phase.c) */
  int phase_source;  /* phased: the access whose address gives the phase */
  CgOperand rotated; /* phased, once the phase is known: lane*VEC - phase (base32) */
  CgOperand lanes;   /* phased, once the phase is known: lane*VEC, the slots' positions */
} CgLayout;

/* Threads of a CTA of `threads` per instance whose longest tile has
 * `vectors` vectors, and which holds `held` elements of such tiles at once
 * (the tile's length times the tiles of that length it loads), a lane
 * inside a warp taking min_reps to max_reps vectors (both backends and the
 * runtime's BLOCK use it). */
int cg_group_size(int threads, int64_t held, int64_t vectors, bool packable, int min_reps,
                  int max_reps);
/* cg_group_size's max_reps for a row of VEC-element vectors, at its phase
 * or not: twice min_reps, or CG_LANE_REPS_PHASED for 16-bit phased rows. */
int cg_lane_reps_max(int min_reps, bool phased, int vec);
/* The tiles of length len a program loads (at least 1): what it holds at once. */
int cg_tiles_loaded(const tj_program *p, int64_t len);
/* The geometry of c, once the longest tile, its VEC, the least vectors a
 * lane of a row inside a warp takes, and the tiles of that length loaded
 * are known. */
tj_status cg_plan_geometry(CgCtx *c, int64_t longest, int vec, int min_reps, int max_reps,
                           int loaded);
/* Whether an instance spreads over several CTAs (CLUSTER or SPLIT > 1). */
bool cg_multi_cta(const CgCtx *c);
/* Element offset of slot k within the instance's tile, relative to lane*VEC. */
int64_t cg_slot_offset(const CgCtx *c, const CgLayout *l, int slot);
/* The predicate guarding repeat j of layout l in this instance (or true). */
CgOperand cg_guard(const CgCtx *c, const CgLayout *l, int repeat);
/* Thread indices, layout bases, the reduction levels' addresses, and the
 * head of the instance loop. */
void cg_geometry_prologue(CgCtx *c);
/* The instance loop: its label and per-instance index and guards; its end. */
void cg_instance_start(CgCtx *c);
void cg_instance_end(CgCtx *c);

/* ------------------------------------------------------------ layout.c */

/* Registers a thread of the kernel needs, as estimated for occupancy
 * (without the pieces a capped stash holds in registers). */
int cg_register_need(const CgCtx *c);
/* CTAs per SM asked of ptxas (.minnctapersm, capping registers per thread),
 * or 0 for no request. */
int cg_min_ctas_per_sm(const CgCtx *c);
/* VEC and repeats per tile length, after the geometry. */
tj_status cg_plan_layout(CgCtx *c);
CgLayout *cg_layout_of(CgCtx *c, int value);

/* ------------------------------------------------------------ reduce.c */

typedef struct CgSite {
  int8_t region;        /* shared-memory region of a cross-warp reduction */
  int8_t extra_barrier; /* a barrier of the level's kind first: both regions may be read */
  int8_t first_too;     /* ... already in the first instance (a loop's merge), not only later */
} CgSite;

/* Shared memory of reductions: the warp level's two regions, then the
 * cluster level's two (bytes 0 when unused). */
typedef struct CgShared {
  int bytes;             /* static shared memory in all */
  int warp_region;       /* bytes per region of the warp level */
  CgOperand write, read; /* b32 addresses: this warp's partial; its group's first */
  CgOperand lane0;       /* pred: lane 0 of its warp */
  int cluster_at;        /* offset of the cluster level's regions */
  int cluster_region;    /* bytes per region: a slot per CTA of the cluster */
  int cluster_bars;      /* offset of the regions' two mbarriers (8 bytes each) */
  CgOperand started;     /* predicate: the prologue's cluster arrival not yet waited for */
  CgOperand phases;      /* b32: bit r, the parity of mbarrier r's phase to wait for */
} CgShared;

/* The grid level's workspace (global memory, the tj_workspace parameter):
 * the barrier counter of group g at byte g * CG_COUNTER_STRIDE, then from
 * byte TJ_WORKSPACE_COUNTERS, per group, `block` bytes of partials (two per
 * rank, 16 bytes a rank). Counters and partials never share bytes, so
 * kernels of any SPLIT may follow each other on one workspace. */
typedef struct CgWorkspace {
  int block;
} CgWorkspace;

#define CG_COUNTER_STRIDE 128
#define CG_MAX_GROUPS (TJ_WORKSPACE_COUNTERS / CG_COUNTER_STRIDE)

/* A reduction's value as it travels up the levels: one operand, or, for a
 * reduce_max fused with its reduce_sum (reduce.c), the pair (max, sum of
 * exp(x - max)). */
typedef struct CgRed {
  tj_op op;     /* TJ_OP_REDUCE_MAX or _SUM; a pair travels as MAX */
  tj_elem elem; /* f32 or i32 (an i32 max as keys, cg_int_key) */
  bool pair;
  CgOperand x;  /* the value, or the pair's max */
  CgOperand d;  /* the pair's sum */
} CgRed;

/* Whether reductions combine across this level in c's geometry. */
bool cg_level_used(const CgCtx *c, CgLevel level);
/* Fused pairs (c->partner), where a round is costly: a grid level, or a
 * streamed tile. Then regions and barriers per reduction (c->sites). */
tj_status cg_find_pairs(CgCtx *c);
/* The sum of a fused pair: its max (an earlier instruction) emits the
 * pair, at the max's reduction site. */
bool cg_fused_sum(const CgCtx *c, int inst);
tj_status cg_plan_reductions(CgCtx *c);
/* Addresses the levels in use need, in the kernel's prologue. */
void cg_reduce_prologue(CgCtx *c);
void cg_lower_reduce(CgCtx *c, int inst);
/* The pieces, for streamed kernels (stream.c) and the levels across CTAs:
 * the identity; two values combined; n combined pairwise; the thread's
 * slots [first, first + count) of the reduced tile; a butterfly over
 * `lanes`; one partial per lane read from memory and combined by a
 * butterfly; one round through the warp level's region; every level above
 * the thread; the result (and the fused sum's) set from the final value. */
CgRed cg_red_identity(tj_op op, tj_elem elem, bool pair);
CgRed cg_red_combine(CgCtx *c, CgRed a, CgRed b);
CgRed cg_red_tree(CgCtx *c, CgRed *v, int n);
CgOperand cg_reduce_tree(CgCtx *c, tj_op op, tj_elem elem, CgOperand *v, int n);
CgRed cg_red_slots(CgCtx *c, int inst, int first, int count);
CgRed cg_red_butterfly(CgCtx *c, CgRed r, int lanes);
CgRed cg_red_gather(CgCtx *c, const char *space, CgOperand reader, CgOperand address, int at,
                    CgRed like, int lanes);
CgRed cg_red_gather_strided(CgCtx *c, const char *space, CgOperand tid, int parts, int threads,
                            CgOperand address, int at, int stride, CgRed like);
CgRed cg_red_warps_round(CgCtx *c, int inst, CgRed r);
CgRed cg_red_levels(CgCtx *c, int inst, CgRed r);
void cg_red_finish(CgCtx *c, int inst, CgRed r);
/* Partials in memory: bytes per slot (8 when any pair exists, else 4); the
 * bytes r's value takes (4 or 8); a predicated store at address + at in a
 * state space ("shared", "shared::cluster", "global"), with bar an
 * st.async completing the mbarrier's transaction bytes; n values from
 * slots stride bytes apart. */
int cg_red_slot_bytes(const CgCtx *c);
int cg_red_value_bytes(CgRed r);
void cg_red_store(CgCtx *c, const char *space, CgOperand pred, CgOperand address, int at,
                  CgRed r, const CgOperand *bar);
void cg_red_load(CgCtx *c, const char *space, CgOperand address, int at, int stride, CgRed like,
                 CgRed *v, int n);

/* -------------------------------------------------------- reduce_ctas.c */

/* The levels across CTAs: their prologue (storage sizes, the cluster's
 * start barrier) and their combiners, for reduction instruction `inst`. */
void cg_cluster_prologue(CgCtx *c);
void cg_grid_prologue(CgCtx *c);
CgRed cg_across_cluster(CgCtx *c, int inst, CgRed r);
CgRed cg_across_grid(CgCtx *c, int inst, CgRed r);

/* ------------------------------------------------------------- phase.c */

/* Which layouts are phased (before VEC is chosen), and which stay so once
 * VEC and the stream are planned (not with VEC 1, nor in a streamed kernel). */
void cg_plan_phase(CgCtx *c);
void cg_unphase_streamed(CgCtx *c);
/* At the phase source: the phase from the address of its element 0, and
 * the layout's bases rotated by it. */
void cg_phase_begin(CgCtx *c, CgLayout *l, CgOperand start_address, int esize);
/* Whether affine value v waits for its layout's phase to get its slots. */
bool cg_phase_pending(const CgCtx *c, int value);
/* Whether slot k of a layout may wrap; if so, *wraps is the predicate. */
bool cg_phase_wraps(CgCtx *c, const CgLayout *l, int slot, CgOperand *wraps);
/* Whether slot k of a layout may wrap; if so, *with becomes `with` and
 * whether the slot wraps (wrapped) or holds its element directly
 * (!wrapped), in one compare. */
bool cg_phase_side(CgCtx *c, const CgLayout *l, int slot, bool wrapped, CgOperand *with);
/* An affine value at slot k (start + lane*VEC - phase + offset), plus the
 * tile's length where the slot wraps. */
CgOperand cg_phase_fix(CgCtx *c, const CgLayout *l, CgOperand value, int slot);
/* Whether an access's first address is aligned to its vectors' bytes. */
CgOperand cg_phase_aligned(CgCtx *c, CgOperand address, int bytes);

/* ------------------------------------------------------------ memory.c */

void cg_lower_load(CgCtx *c, int inst);
void cg_lower_store(CgCtx *c, int inst);
void cg_lower_ptr_add(CgCtx *c, int inst);
/* Elements one access of this load/store moves when threads own vec
 * contiguous elements: up to 16 bytes when its offsets are arange + s with s
 * and the pointer aligned enough; 1 (per-element accesses) otherwise. */
int cg_access_chunk(CgCtx *c, int inst, int vec);
/* STAGE on sm_80 and later (stream.c): whether load inst can be copied into
 * its stash by cp.async ahead of its phase's loop: its accesses are whole
 * 16-byte vectors, one per unit of the stash, and not phased. */
bool cg_prefetchable(CgCtx *c, int inst);
/* Whether load inst holds or drops whole vectors only (its mask's runs are
 * multiples of its vector, DIV): no vector is partial. */
bool cg_access_whole(CgCtx *c, int inst);
/* The piece's whole vectors of load inst, copied into the stash by
 * cp.async: the thread's first unit at `at`, its units `stride` bytes
 * apart. A vector not wholly in the mask is left to the loop (cg_lower_load). */
void cg_prefetch_load(CgCtx *c, int inst, CgOperand at, int stride);

/* ------------------------------------------------------------- ptx_ops.c */

/* How lower.c treats an op: the regular ones are one table line each. */
typedef enum CgLowering {
  CG_LOWER_SPECIAL, /* written by hand in lower.c, memory.c or reduce.c */
  CG_LOWER_REGULAR, /* d = text a[, b] */
  CG_LOWER_COMPARE, /* setp.text.type */
} CgLowering;

typedef struct CgOpText {
  CgLowering lowering;
  const char *f32, *i32, *i64, *pred; /* the instruction, per operand type */
} CgOpText;

extern const CgOpText cg_op_text[TJ_OP_COUNT];
const char *cg_op_instruction(tj_op op, tj_elem elem); /* NULL if none */
/* d = cast a from elem `from` to elem `to`; a new register. */
CgOperand cg_cast(CgCtx *c, CgOperand a, tj_elem from, tj_elem to);
/* Emits a regular or compare op on one element. */
CgOperand cg_apply(CgCtx *c, tj_op op, tj_elem elem, const CgOperand *args, int nargs);
/* A compare ANDed with a predicate in the same setp (setp.lt.and). */
CgOperand cg_compare_and(CgCtx *c, tj_op op, tj_elem elem, const CgOperand *args, CgOperand with);
/* An i32 as an order-preserving unsigned key, x ^ 2^31, and back (the same
 * xor): i32 max and min are computed on keys (ptx_ops.c says why). */
CgOperand cg_int_key(CgCtx *c, CgOperand x);
/* 1 / x (f32), correctly rounded, computed without a subroutine call. */
CgOperand cg_reciprocal(CgCtx *c, CgOperand x);
/* Reduction combiners: max/add of one element type; an i32 max combines
 * keys (cg_int_key). */
CgOperand cg_combine(CgCtx *c, tj_op reduce, tj_elem elem, CgOperand a, CgOperand b);
/* The reduction identity: -inf for max (with one more max against it, an
 * all-NaN tile gives -inf, as the interpreter's fmaxf from -inf does), -0.0
 * for sum, 0 for an i32 sum and the key of INT_MIN (0) for an i32 max. */
CgOperand cg_identity(tj_op reduce, tj_elem elem);

/* ------------------------------------------------------------- stream.c */

/* A tile streamed in pieces: its layout, the pieces, the elements one
 * piece moves over the instance (step), and the phase of each instruction. */
typedef struct CgStream {
  int layout; /* -1: nothing is streamed */
  int pieces;
  int slots; /* a whole piece's slots (the layout's, but in the tail piece) */
  int tail;  /* the repeats of the last piece that hold elements of the tile */
  bool cut;  /* the tile's last repeat is partial (layout.c's partial, before streaming) */
  int64_t step;
  int phases;
  int *phase;   /* per instruction */
  int current;  /* the phase being lowered */
  int *stash;   /* STAGE: per load, its pieces' offset in tj_smem, or -1 */
  int *fetched; /* STAGE: per stashed load, the phase that reads memory, or -1 */
  int kept;     /* STAGE: the pieces [0, kept) kept on chip (STASH caps it) */
  int held;     /* ... of them [0, held) in registers, the rest in the stash */
  int held_regs;       /* the registers a thread holds them in */
  int held_piece;      /* the held piece being lowered, or -1 */
  CgOperand **holding; /* per instruction x held piece: its registers */
  uint8_t *prefetched; /* STAGE: per load, copied into its stash ahead of this phase's loop */
  /* PIPE (stream.c): the next instance's first phase inside the last one */
  bool pipe;
  bool reuse_held;     /* held pieces load into the registers the first instance used */
  bool folding_kept;   /* the piece being folded is kept: no branch to memory */
  bool was_shifting;   /* c->shifting, while lowering the next instance */
  uint8_t *need0;      /* the first phase's needs, prefetch dependencies and copies */
  uint8_t *deps0, *pre0;
  struct Running *carried; /* the next instance's running reductions */
  int ncarried;
  struct CgVal *next_vals; /* the first phase's scalars for the next instance */
  CgOperand next_ok;  /* the CTA has a next instance */
} CgStream;

/* Tile elements a thread keeps in registers at most (32768 / T, at most
 * CG_MAX_SLOTS, at most STAGE); a wider tile is streamed where the program
 * allows. */
int cg_stream_limit(const CgCtx *c);
/* Whether the program has a counted loop of its own. */
bool cg_has_loop(const tj_program *p);
/* Decides whether the widest tile is streamed, its pieces, and the phases. */
tj_status cg_plan_stream(CgCtx *c);
/* Whether instruction inst is lowered in the first stream phase's loop (a
 * load there that only later phases use is not). */
bool cg_stream_first_lowers(CgCtx *c, int inst);
/* Whether instruction i runs once per piece. */
bool cg_stream_per_piece(const CgCtx *c, int i);
/* The instance's body of a streamed kernel, phase by phase. */
void cg_lower_streamed(CgCtx *c);
/* The reductions in the order they combine across threads; their count. */
int cg_stream_order(const CgCtx *c, int *order);
/* STAGE: whether load inst reads its piece back from shared memory (a
 * later phase than the one that loaded it), and the moves either way; a
 * piece the stash does not keep (STASH) is neither written nor read. */
bool cg_stash_holds(CgCtx *c, int inst);
/* STAGE with STASH: when the stash does not keep every piece, branches to
 * $Lkept_N if the piece being lowered is kept (kept), else to $Lunkept_N
 * if it is not, and returns N; -1 (no code) when it keeps them all. */
int cg_stash_branch(CgCtx *c, bool kept);
/* STAGE: where load inst's piece being lowered keeps its registers when it
 * is held in them (the first pieces of a capped stash), else NULL; then
 * *fetch tells whether this phase loads it from memory (and records its
 * registers there) rather than reads the registers recorded. */
CgOperand **cg_held_slots(CgCtx *c, int inst, bool *fetch);
/* STAGE with STASH: whether access inst marks its lines evict-first in L2
 * (.cs): the stores, and the loads of the last phase (x's pieces past the
 * stash, read for the last time), so that neither evicts the pieces that
 * the last phase has yet to read again. */
bool cg_stream_evict_first(const CgCtx *c, int inst);
void cg_stash_write(CgCtx *c, int inst, const CgOperand *slots);
void cg_stash_read(CgCtx *c, int inst, CgOperand *slots);
/* STAGE, a prefetched load: writes the units of the piece's registers to
 * the stash at `at` (cg_stash_at) but those whose whole[u] holds, which
 * the prefetch copied there (a predicate per unit: @!whole[u]). With
 * `packed`, regs holds 16-bit elements two to a b32 word (regs[i]: slots
 * 2i and 2i + 1). */
void cg_stash_write_cut(CgCtx *c, int inst, CgOperand at, const CgOperand *regs,
                        const CgOperand *whole, bool packed);
/* STAGE: the thread's first unit of load inst's stash for the piece being
 * lowered, and (*stride) the bytes from one of its units to the next. */
CgOperand cg_stash_at(CgCtx *c, int inst, int *stride);
/* The most shared memory a CTA of the arch may have (with the opt-in). */
int cg_max_shared(int arch);

/* -------------------------------------------------------------- lower.c */

/* Per-slot registers of affine value v (lower.c; phase.c calls it too). */
void cg_materialize(CgCtx *c, int value);

/* exp_shift.c: exp(t - m), m = max t, as 2^(t log2 e - o): -o, whether m
 * takes that path (|m| < 2^24; in a shifted loop also its scale's bound),
 * and the factor its uses take out of the slots there. */
typedef struct CgShift {
  CgOperand neg_o, fast, bias;
  int value, scaled; /* the exp's value and its one scaling use (cg_shift_hoist), or -1 */
  CgOperand scale;   /* that use's scalar times bias */
} CgShift;

/* Per value: how the lowering holds it. */
typedef struct CgVal {
  uint8_t form;    /* CgForm */
  uint8_t elem;    /* tj_elem */
  uint8_t guarded; /* pred tile: false wherever its slot's guard is (cg_guard) */
  int16_t layout;
  CgOperand op;     /* scalar, pointer, splat value, or affine start */
  CgOperand *slots; /* per-slot registers (CG_FORM_SLOTS, materialized affine) */
} CgVal;

struct CgCtx {
  tj_spec *spec;
  tj_program *p;
  int arch, ptx;
  unsigned features;
  bool annotate;
  tj_status status; /* the first error; its message is on the spec */
  CgArena arena;
  CgEmit em;
  CgFacts facts;
  CgVal *vals;
  CgSite *sites;    /* per instruction */
  bool shifting;    /* lowering the shifted copy of a phase's piece loop (exp_shift.c) */
  CgShift shift;    /* ... and its exp's scalars */
  int32_t *partner; /* per instruction: a fused reduce_max's reduce_sum and back, or -1 */
  bool pairs;       /* some reduction is a fused pair */
  int pair_scale;   /* the pairs' exponent times this f32 parameter, or IR_NONE (reduce.c) */
  bool pair_safe;   /* ... their max read as 0 where it is -inf: the sum 0 there, not NaN */
  bool streamed;    /* the widest tile is streamed in pieces (stream.c) */
  bool flip_ctas;   /* the cluster and grid levels' regions flip with each instance (reduce.c) */
  CgStream stream;
  int *stream_order; /* streamed: reductions in the order they combine */
  int nstream_order;
  CgOperand piece_start; /* streamed: the first element of the piece being lowered */
  void *loops;       /* lower.c's stack of open counted loops */
  CgGeometry geo;
  CgLayout layouts[CG_MAX_LAYOUTS];
  int nlayouts;
  CgShared shared;
  CgWorkspace ws;
};

/* The whole kernel: prologue, instance loop, body, epilogue. */
void cg_lower_kernel(CgCtx *c);
/* One instruction, as the body lowers it. */
void cg_lower_inst(CgCtx *c, int i);
/* Whether instruction i is computed once before the loop over instances. */
bool cg_hoisted(const CgCtx *c, int i);

/* ------------------------------------------------------------- exp_shift.c */

#define CG_LOG2_E 1.4426950408889634f

CgShift cg_shift_begin(CgCtx *c, CgOperand m);
/* One slot on the shifted path: exp(t - m) times 1 / bias. */
CgOperand cg_shift_exp(CgCtx *c, const CgShift *s, CgOperand t);
/* A branch between the paths: begin (the shifted path follows), else (the
 * exact one follows), end; both write the same registers. kind names the
 * labels ($Lexact<kind>_N, $Lshifted<kind>_N). */
int cg_shift_branch(CgCtx *c, const CgShift *s, bool uniform, const char *kind);
void cg_shift_else(CgCtx *c, int label, const char *kind);
void cg_shift_end(CgCtx *c, int label, const char *kind);
/* Whether the shift may apply to exps of tile t (staged pieces of t cast
 * from 16-bit elements); analyze.c's shift fact of value where it applies
 * now (in the shifted copy of a piece loop; else 0); whether value is an
 * exp computed shifted (fact 1). */
bool cg_shift_applies(const CgCtx *c, int t);
int cg_shift_fact(const CgCtx *c, int value);
bool cg_shifted(const CgCtx *c, int value);
/* The one exp that need marks in a phase whose loop may be emitted
 * shifted (it has exactly one scaling use there), or -1; its m. */
int cg_shift_candidate(const CgCtx *c, const uint8_t *need);
CgOperand cg_shift_of(const CgCtx *c, int inst);
/* Before a shifted loop: its one scaling use's scalar, the bias folded in;
 * fast then also asks that scalar be at most 2 in magnitude. */
void cg_shift_hoist(CgCtx *c, const uint8_t *need, int exp);
/* Shifted exp inst into r's slots (its scaling use takes the bias out). */
void cg_lower_shifted_exp(CgCtx *c, int inst, CgVal *r);
/* In the shifted loop, the exp's scaling use: each slot times the hoisted
 * scalar; false for any other instruction. */
bool cg_shifted_scale(CgCtx *c, const IrInst *in, CgVal *r);

/* ------------------------------------------------------------- values.c */

tj_status cg_fail(CgCtx *c, tj_status st, const char *fmt, ...) TJ_PRINTF(3, 4);
bool cg_ok(const CgCtx *c);
CgOperand cg_reg_of(CgCtx *c, tj_elem e);
tj_elem cg_elem_of(const CgCtx *c, int value);
/* floor(log2(v)) for v >= 1. */
int cg_log2(int64_t v);
/* mov.<class> d, s. */
void cg_mov(CgCtx *c, CgOperand d, CgOperand s);
/* An operand as a register (immediates are moved into one). */
CgOperand cg_in_reg(CgCtx *c, CgOperand o);
/* Operand of value v at slot k: scalars and splats give their one value. */
CgOperand cg_slot(CgCtx *c, int value, int slot);
/* Whether `value` is folded into its reduction (analyze.c's fold, outside
 * streamed kernels, whose pieces hold every tile in turn). */
bool cg_folded(const CgCtx *c, int value);
/* Elementwise `in` at one slot (slot -1: its scalar or splat value). */
CgOperand cg_apply_at(CgCtx *c, const IrInst *in, int slot);
CgOperand cg_and_pred(CgCtx *c, CgOperand a, CgOperand b);
CgOperand *cg_new_slots(CgCtx *c, int count);

/* ------------------------------------------------------------- ptxas.c */

typedef struct CgPtxasEntry {
  char name[64];
  int registers;
  int spill_stores, spill_loads, stack_frame;
  int local_bytes; /* "bytes lmem" when reported */
  int shared_bytes;
} CgPtxasEntry;

/* The ptxas to run: $PATH, then $CUDA_HOME/bin, then the default toolkit
 * directory. Writes the path into out; false when none exists. */
bool cg_ptxas_find(char *out, size_t size);
/* Runs ptxas -v for arch on ptx; *log receives its whole output (release
 * with tj_free). Returns TJ_OK when it assembled, TJ_ERR_TOOL otherwise. */
tj_status cg_ptxas_run(const char *ptxas, const char *ptx, int arch, char **log);
/* Parses the -v report: up to max entries into out; returns the count. */
int cg_ptxas_parse(const char *log, CgPtxasEntry *out, int max);

/* ---------------------------------------------------- embedded templates */

extern const char tj_template_ptx_prologue[];

#endif /* TJ_CODEGEN_H */
