"""small_kernels.py: run tilejit's softmax and Triton's (bench/compare.py's
tutorial kernel) once each on the small set, for Nsight Compute to profile
side by side. An experiment for finding where small problems lose time.

    ncu --csv --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,\
sm__warps_active.avg.pct_of_peak_sustained_active,launch__waves_per_multiprocessor,\
launch__grid_size,launch__block_size,launch__registers_per_thread,\
sm__cycles_active.avg,gpc__cycles_elapsed.max \
        python3 bench/experiments/small_kernels.py [--dtype f32,bf16]

Each shape runs three times per side (the last is the one to read); the
kernels are told apart by name (tj_softmax, _softmax_kernel).
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import torch  # noqa: E402
import tilejit  # noqa: E402
import compare  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dtype", default="f32,bf16")
    a = p.parse_args()
    for name in a.dtype.split(","):
        dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[name]
        for m, n in compare.SMALL:
            x = torch.randn(m, n, device="cuda").to(dtype)
            y = torch.empty_like(x)
            for _ in range(3):
                tilejit.softmax(x, out=y)
                compare.triton_softmax(x, y)
            torch.cuda.synchronize()
            print(f"{name} {m}x{n}", flush=True)


if __name__ == "__main__":
    main()
