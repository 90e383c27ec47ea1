/*
 * arch.c — which GPU architectures the backend writes PTX for, and which
 * PTX ISA version each one needs.
 *
 * The table gives, per target, the lowest ISA whose assembler knows it (each
 * row checked against ptxas of CUDA 13.0, which still accepts sm_75). A few
 * instructions need more than the oldest arch: they are features, and the
 * emitted .version is the lowest ISA that has the arch and every feature the
 * kernel used. Where an arch lacks a feature, the lowering uses an exact
 * integer equivalent instead (bf16 conversions before sm_80 / sm_90), so no
 * feature ever raises the arch, only possibly the ISA.
 *
 * Each row also gives the threads one SM holds at most, which bounds the
 * .minnctapersm request (layout.c); ptxas ignores, with a warning, one past it.
 *
 * The runtime compares the chosen ISA with what the driver supports.
 */
#include "codegen/codegen.h"

static const CgArch archs[] = {
    {75, 63, "sm_75", 1024},   {80, 70, "sm_80", 2048},   {86, 71, "sm_86", 1536},
    {87, 74, "sm_87", 1536},   {89, 78, "sm_89", 1536},   {90, 78, "sm_90", 2048},
    {100, 86, "sm_100", 2048}, {103, 88, "sm_103", 2048}, {110, 90, "sm_110", 1536},
    {120, 87, "sm_120", 1536}, {121, 88, "sm_121", 1536},
};

static const struct {
  unsigned feature;
  int sm, ptx;
} features[] = {
    {CG_FEAT_CVT_BF16, 80, 70},
    {CG_FEAT_CLUSTER, 90, 81},
};

const CgArch *cg_arch_find(int sm) {
  for (size_t i = 0; i < TJ_COUNTOF(archs); i++)
    if (archs[i].sm == sm) return &archs[i];
  return NULL;
}

int cg_arch_count(void) { return (int)TJ_COUNTOF(archs); }

const CgArch *cg_arch_at(int i) { return i >= 0 && i < cg_arch_count() ? &archs[i] : NULL; }

bool cg_arch_has(int sm, unsigned feature) {
  for (size_t i = 0; i < TJ_COUNTOF(features); i++)
    if (features[i].feature == feature) return sm >= features[i].sm;
  return false;
}

int cg_ptx_version(int sm, unsigned used) {
  const CgArch *a = cg_arch_find(sm);
  int ptx = a ? a->ptx : CG_PTX_MAX;
  for (size_t i = 0; i < TJ_COUNTOF(features); i++)
    if ((used & features[i].feature) && features[i].ptx > ptx) ptx = features[i].ptx;
  return ptx;
}
