"""row_ops.py: tilejit's shipped row ops beside torch's, in one process on the GPU.

    python3 bench/row_ops.py [--op log_softmax] [--dtype f32,f16,bf16] [--reps 15]

For each N (512 .. 32768, and the wide and huge rows), x of at least 256 MiB
in f32 (M = 256 MiB / (4 N) rows in every dtype), it times tilejit's op,
torch's and a device copy of the same bytes (y.copy_(x)), each the median
of --reps runs after a 512 MiB write that flushes L2, by CUDA events. It
prints GB/s counting every byte the op moves (read x, write y), % of the
copy, and tilejit over torch; the outputs are checked against torch's
first (torch.testing tolerances of the dtype). Needs torch with CUDA and
the library (TILEJIT_LIBRARY or a build tree beside python/).
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import tilejit  # noqa: E402

OPS = {"log_softmax": (tilejit.log_softmax, lambda x, y: torch.log_softmax(x, dim=-1, out=y)),
       "softmax": (tilejit.softmax, lambda x, y: torch.softmax(x, dim=-1, out=y))}
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
NS = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 262144, 1048576]


def median_ms(fn, flush, reps):
    times = []
    for _ in range(reps):
        flush.fill_(1)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return sorted(times)[len(times) // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--op", choices=list(OPS), default="log_softmax")
    p.add_argument("--dtype", default="f32,f16,bf16")
    p.add_argument("--reps", type=int, default=15)
    args = p.parse_args()
    ours, theirs = OPS[args.op]
    flush = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    print(f"{args.op}: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"tilejit {tilejit.version()} ({tilejit.library_path})")
    print(f"{'dtype':>5} {'M':>7} {'N':>8} {'tilejit GB/s':>12} {'torch GB/s':>10} "
          f"{'copy GB/s':>9} {'% copy':>6} {'tj/torch':>8}")
    for name in args.dtype.split(","):
        for n in NS:
            m = max(1, (256 << 20) // (4 * n))
            x = torch.randn(m, n, device="cuda").to(DTYPES[name]) * 3
            y, want = torch.empty_like(x), torch.empty_like(x)
            theirs(x, want)
            ours(x, out=y)
            torch.testing.assert_close(y, want)
            t_ours = median_ms(lambda: ours(x, out=y), flush, args.reps)
            t_theirs = median_ms(lambda: theirs(x, want), flush, args.reps)
            t_copy = median_ms(lambda: want.copy_(x), flush, args.reps)
            gb = 2 * x.numel() * x.element_size() / 1e6
            print(f"{name:>5} {m:>7} {n:>8} {gb / t_ours:>12.0f} {gb / t_theirs:>10.0f} "
                  f"{gb / t_copy:>9.0f} {100 * t_copy / t_ours:>6.1f} {t_theirs / t_ours:>8.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
