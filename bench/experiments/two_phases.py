"""two_phases.py: tilejit.softmax on rows whose x and y sit at different
16-byte phases (x one element past a boundary, y on it), the case tj_softmax
runs element by element, against a copy of the same bytes; checked against
torch.softmax first.

    TILEJIT_LIBRARY=... python3 bench/experiments/two_phases.py [--ns 512,1024] [--dtype f32]

M = 256 MiB / (4 N) rows. Prints N, % of the copy (median of --reps runs,
each after a 512 MiB write that flushes L2, timed by CUDA events) and
tilejit's largest difference from torch. An experiment, not a benchmark of
record.
"""

import argparse
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402
import tilejit  # noqa: E402


def median_ms(fn, flush, reps):
    times = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ns", default="512,1000,1024,2048,4096")
    p.add_argument("--dtype", default="f32,f16")
    p.add_argument("--reps", type=int, default=15)
    a = p.parse_args()
    flush = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    print(f"{torch.cuda.get_device_name()}, {tilejit.library_path}")
    for name in a.dtype.split(","):
        dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[name]
        for n in map(int, a.ns.split(",")):
            m = (256 << 20) // (4 * n)
            x = (torch.randn(m, n + 1, device="cuda") * 3).to(dtype)
            y = torch.empty(m, n + 1, device="cuda", dtype=dtype)
            xv, yv = x[:, 1:], y[:, :n]  # x one element past a 16-byte boundary, y on it
            tilejit.softmax(xv, out=yv)
            err = float((yv.float() - torch.softmax(xv.float(), -1)).abs().max())
            src = torch.empty(m * n, device="cuda", dtype=dtype)
            dst = torch.empty_like(src)
            tj = median_ms(lambda: tilejit.softmax(xv, out=yv), flush, a.reps)
            copy = median_ms(lambda: dst.copy_(src), flush, a.reps)
            print(f"{name:5} M={m:7} N={n:6}  {100 * copy / tj:6.1f}% of copy  err {err:.2g}",
                  flush=True)


if __name__ == "__main__":
    main()
