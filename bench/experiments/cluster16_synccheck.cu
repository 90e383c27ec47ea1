// cluster16_synccheck.cu - does compute-sanitizer's synccheck flag a plain
// CTA barrier in a thread-block cluster of 16 CTAs (a non-portable size)?
//
// A hand-written check, not part of tilejit. synccheck reported divergent
// threads at a CTA barrier in every cluster of 16 that tilejit generated,
// and nothing in its clusters of 8 (bench/RESULTS.md, 2026-11-26). This
// kernel does what those do around the barrier, a __syncthreads between
// shared-memory stores and loads and then a cluster barrier, in clusters
// of 8 and of 16 (the non-portable size allowed). It ran clean in both
// under synccheck and racecheck on an H100, so the tool handles such
// clusters and the report points at the generated code.
//
//   nvcc -arch=sm_90 -O2 -o /tmp/c16 bench/experiments/cluster16_synccheck.cu &&
//   compute-sanitizer --tool synccheck /tmp/c16
#include <cooperative_groups.h>
#include <cstdio>
namespace cg = cooperative_groups;

__global__ void k(float *y) {
  __shared__ float s[256];
  s[threadIdx.x] = (float)threadIdx.x;
  __syncthreads();
  float v = s[255 - threadIdx.x];
  cg::this_cluster().sync();
  y[blockIdx.x * 256 + threadIdx.x] = v;
}

int main() {
  float *y;
  cudaMalloc(&y, 128 * 256 * sizeof(float));
  cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  for (int c = 8; c <= 16; c += 8) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(128);
    cfg.blockDim = dim3(256);
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = c;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    cudaError_t e = cudaLaunchKernelEx(&cfg, k, y);
    cudaError_t s = cudaDeviceSynchronize();
    printf("cluster %d: launch %s, sync %s\n", c, cudaGetErrorString(e), cudaGetErrorString(s));
  }
  return 0;
}
