"""odd_warps.py: tilejit.softmax at odd, narrow widths (rows off 16 bytes,
moved element by element) with each num_warps, beside torch.softmax, in
one process: whether the warps of the plan are what keeps f32 N = 77 at
0.97x torch.

    python3 bench/experiments/odd_warps.py [--ns 77,197] [--dtype f32] [--rounds 3]

x of 256 MiB (M = 256 MiB / (4 N)), L2 flushed before every call, median
CUDA-event time (bench/compare.py's median_ms); per round the calls in
turn, the figures the medians over the rounds, as % of a copy of the same
bytes and as tilejit over torch. An experiment, not a benchmark of record.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import compare  # noqa: E402  (torch, median_ms, make_input, check)
import tilejit  # noqa: E402  (compare.py put python/ on the path)

torch = compare.torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ns", default="77,197")
    p.add_argument("--dtype", default="f32")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warps", default="0,1,2,4,8,16")
    a = p.parse_args()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    print(f"{torch.cuda.get_device_name()}, {a.dtype}, % of copy (tilejit / torch)")
    for n in map(int, a.ns.split(",")):
        m = (256 << 20) // (4 * n)
        x = compare.make_input(m, n, a.dtype)
        y = torch.empty_like(x)
        ref = torch.softmax(x.double(), -1)
        calls = {"copy": lambda: y.copy_(x), "torch": lambda: torch.softmax(x, -1)}
        for w in map(int, a.warps.split(",")):
            tilejit.softmax(x, out=y, num_warps=w)
            ok, worst, bad = compare.check(y, ref, a.dtype)
            if not ok:
                sys.exit(f"N={n} warps {w}: {bad} elements out of tolerance (worst {worst})")
            calls[f"tilejit w={w}"] = lambda w=w: tilejit.softmax(x, out=y, num_warps=w)
        times = {k: [] for k in calls}
        for _ in range(a.rounds):
            for k, fn in calls.items():
                times[k].append(compare.median_ms(fn, flush))
        ms = {k: statistics.median(v) for k, v in times.items()}
        line = ", ".join(f"{k} {100 * ms['copy'] / v:.1f} ({ms['torch'] / v:.3f})"
                         for k, v in ms.items() if k != "copy")
        print(f"N={n} M={m}: {line}")


if __name__ == "__main__":
    main()
