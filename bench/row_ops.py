"""row_ops.py: tilejit's shipped row ops beside torch's, in one process on the GPU.

    python3 bench/row_ops.py [--op log_softmax|softmax|softmax_backward|masked_softmax]
                             [--dtype f32,f16,bf16] [--reps 15] [--ns 512,1024,...]

For each N (512 .. 32768, and the wide and huge rows), x of at least 256 MiB
in f32 (M = 256 MiB / (4 N) rows in every dtype), it times tilejit's op,
torch's and a device copy of the same bytes, each the median of --reps
runs after a 512 MiB write that flushes L2, by CUDA events. It prints GB/s
counting every byte the op moves (softmax and log-softmax read x and write
y; softmax backward reads y and dy and writes dx, against torch's
_softmax_backward_data, what autograd runs for torch.softmax; the masked
softmax is counted as softmax is, 2 * M * N * elem, though it reads only
the kept part of x), % of the copy, and tilejit over torch; both outputs
are compared with torch's op in float64 first, and tilejit's largest error
must be at most twice torch's (both printed). The copy moves the same
bytes: a copy of (inputs + 1) / 2 times x's elements. Needs torch with
CUDA and the library (TILEJIT_LIBRARY or a build tree beside python/).
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import tilejit  # noqa: E402

def _inputs_x(m, n, dtype):
    return [(torch.randn(m, n, device="cuda") * 3).to(dtype)]


def _inputs_backward(m, n, dtype):
    y = torch.softmax(torch.randn(m, n, device="cuda") * 3, dim=-1).to(dtype)
    return [(torch.randn(m, n, device="cuda") * 3).to(dtype), y]


# The masked softmax's mask: attention's scores of head size 64 (scale 1/8,
# exact in every dtype), rows = min(M, N) queries per matrix and a causal
# mask aligned to the bottom right (offset N - rows; for square matrices
# torch.tril's), so that wide rows keep nearly every column. M is a
# multiple of rows: x is batch matrices of rows x N.
MASKED_SCALE = 0.125


def _inputs_masked(m, n, dtype):
    rows = min(m, n)
    return [(torch.randn(m // rows * rows, n, device="cuda") * 3).to(dtype)]


def _masked_tilejit(x, out):
    rows = min(x.shape)
    return tilejit.masked_softmax(x, out=out, scale=MASKED_SCALE, causal=True,
                                  offset=x.shape[1] - rows, rows=rows)


def _masked_torch(x, out):
    """As a user would write it in torch: the scores scaled and masked with
    a (rows, N) mask broadcast over the matrices, then softmax, in x's dtype
    (F.scaled_dot_product_attention does this inside, not on its own)."""
    m, n = x.shape
    rows = min(m, n)
    keep = torch.ones(rows, n, dtype=torch.bool, device=x.device).tril(diagonal=n - rows)
    scores = (x.view(m // rows, rows, n) * MASKED_SCALE).masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1).view(m, n)


# name -> (tilejit's op(*inputs, out=), torch's (*inputs, out) -> its result, inputs)
OPS = {"log_softmax": (tilejit.log_softmax, lambda x, y: torch.log_softmax(x, dim=-1, out=y),
                       _inputs_x),
       "softmax": (tilejit.softmax, lambda x, y: torch.softmax(x, dim=-1, out=y), _inputs_x),
       "softmax_backward": (tilejit.softmax_backward,
                            lambda dy, y, out: torch._softmax_backward_data(dy, y, -1, y.dtype),
                            _inputs_backward),
       "masked_softmax": (_masked_tilejit, _masked_torch, _inputs_masked)}
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
    p.add_argument("--ns", default=",".join(str(n) for n in NS))
    args = p.parse_args()
    ours, theirs, make_inputs = OPS[args.op]
    flush = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    print(f"{args.op}: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"tilejit {tilejit.version()} ({tilejit.library_path})")
    print(f"{'dtype':>5} {'M':>7} {'N':>8} {'tilejit GB/s':>12} {'torch GB/s':>10} "
          f"{'copy GB/s':>9} {'% copy':>6} {'tj/torch':>8} {'err tj':>8} {'err torch':>9}")
    for name in args.dtype.split(","):
        for n in (int(v) for v in args.ns.split(",")):
            m = max(1, (256 << 20) // (4 * n))
            inputs = make_inputs(m, n, DTYPES[name])
            x = inputs[0]
            m = x.shape[0]
            y, want = torch.empty_like(x), torch.empty_like(x)
            want = theirs(*inputs, want)
            ours(*inputs, out=y)
            wide = [t.double() for t in inputs]
            ref = theirs(*wide, torch.empty_like(wide[0]))
            err_ours = float((y.double() - ref).abs().max())
            err_torch = float((want.double() - ref).abs().max())
            del wide, ref
            if not err_ours <= 2 * err_torch + 1e-6:
                raise SystemExit(f"{name} {m}x{n}: tilejit's max error {err_ours:.3g} against "
                                 f"float64, torch's {err_torch:.3g}")
            source = torch.empty(x.numel() * (len(inputs) + 1) // 2, dtype=x.dtype, device="cuda")
            target = torch.empty_like(source)
            t_ours = median_ms(lambda: ours(*inputs, out=y), flush, args.reps)
            t_theirs = median_ms(lambda: theirs(*inputs, want), flush, args.reps)
            t_copy = median_ms(lambda: target.copy_(source), flush, args.reps)
            # Every input read and the output written, whole: 2 * M * N * elem for the
            # masked softmax too, whose dropped columns are not read.
            gb = (len(inputs) + 1) * x.numel() * x.element_size() / 1e6
            print(f"{name:>5} {m:>7} {n:>8} {gb / t_ours:>12.0f} {gb / t_theirs:>10.0f} "
                  f"{gb / t_copy:>9.0f} {100 * t_copy / t_ours:>6.1f} {t_theirs / t_ours:>8.2f} "
                  f"{err_ours:>8.2g} {err_torch:>9.2g}", flush=True)
            del inputs, x, y, want, source, target


if __name__ == "__main__":
    main()
