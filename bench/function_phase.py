"""function_phase.py: a user's own program through the JIT function handle
(tilejit.Function) against the shipped op, on rows that start E elements
past a 16-byte boundary, in one process on the GPU.

    python3 bench/function_phase.py [--dtype f32,bf16] [--ns 1000,4096,32001]
                                    [--offsets 0,1] [--reps 15]

The program is templates/log_softmax.tj, the text tj_log_softmax runs, so
the two should run alike: the function's variant is selected from the
actual pointers and strides (ALIGN, BLOCK, and phased where the rows share
a phase), tj_log_softmax's from the same. x and y are views E elements into
M rows of N + 16 (x >= 256 MiB in f32), so both sit at the same phase. It
prints % of a device copy of the same bytes, each the median of --reps
runs after a 512 MiB write that flushes L2, by CUDA events, after checking
that neither output's largest error against float64 is over twice
torch.log_softmax's. Needs torch with CUDA and the library
(TILEJIT_LIBRARY or a build tree beside python/).
"""

import argparse
import os
import sys

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
import tilejit  # noqa: E402
from row_ops import DTYPES, median_ms  # noqa: E402  (this directory's)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtype", default="f32,bf16")
    p.add_argument("--ns", default="1000,4096,32001")
    p.add_argument("--offsets", default="0,1")
    p.add_argument("--reps", type=int, default=15)
    args = p.parse_args()
    with open(os.path.join(ROOT, "templates", "log_softmax.tj")) as f:
        text = f.read()
    flush = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    print(f"function_phase: {torch.cuda.get_device_name()}, tilejit {tilejit.version()} "
          f"({tilejit.library_path})")
    print(f"{'dtype':>5} {'M':>7} {'N':>6} {'E':>2} {'function %':>10} {'op %':>6} "
          f"{'fn/op':>6} {'variants':>8}")
    for name in args.dtype.split(","):
        dtype = DTYPES[name]
        fn = tilejit.Function(text, name, size_param="n")
        for n in (int(v) for v in args.ns.split(",")):
            m = max(1, (256 << 20) // (4 * n))
            for e in (int(v) for v in args.offsets.split(",")):
                xs = (torch.randn(m, n + 16, device="cuda") * 3).to(dtype)
                ys, zs = torch.empty_like(xs), torch.empty_like(xs)
                x, y, z = xs[:, e:e + n], ys[:, e:e + n], zs[:, e:e + n]
                stride = xs.stride(0)

                def run_fn():
                    fn[m](y, x, stride, stride, n)

                def run_op():
                    tilejit.log_softmax(x, out=z)

                run_fn()
                run_op()
                ref = torch.log_softmax(x.double(), dim=-1)
                torch_err = float((torch.log_softmax(x, dim=-1).double() - ref).abs().max())
                for what, out in (("function", y), ("op", z)):
                    err = float((out.double() - ref).abs().max())
                    if not err <= 2 * torch_err + 1e-6:
                        raise SystemExit(f"{name} {m}x{n} +{e}: the {what}'s max error {err:.3g} "
                                         f"against float64, torch's {torch_err:.3g}")
                source = torch.empty(x.numel(), dtype=dtype, device="cuda")
                target = torch.empty_like(source)
                t_copy = median_ms(lambda: target.copy_(source), flush, args.reps)
                t_fn = median_ms(run_fn, flush, args.reps)
                t_op = median_ms(run_op, flush, args.reps)
                print(f"{name:>5} {m:>7} {n:>6} {e:>2} {100 * t_copy / t_fn:>10.1f} "
                      f"{100 * t_copy / t_op:>6.1f} {t_op / t_fn:>6.2f} {fn.variants:>8}",
                      flush=True)
                del xs, ys, zs, x, y, z, source, target


if __name__ == "__main__":
    main()
