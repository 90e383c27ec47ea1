"""bench/python_host_time.py: host time per call of tilejit.softmax against
torch.softmax on tiny tensors, side by side in one process, on one GPU.

    python3 bench/python_host_time.py [--shapes 1x32,4x1024] [--dtype f32|f16|bf16]
                                      [--rounds 300] [--batch 50] [--sync-rounds]

For a tensor this small the GPU work is a few microseconds and the host's
share, what the Python call costs before the launch returns, decides how
fast a model of small ops runs. The target is tilejit.softmax(x) <=
torch.softmax(x, -1) (both allocate their output).

Each shape is first checked (tilejit's output against torch's). Then the
calls below run in interleaved batches: a round times one batch of each
(wall time per call, perf_counter), alternating their order, with the
garbage collector off; the figure is the median over the rounds. Nothing
synchronizes until the end, after the last round, unless --sync-rounds
asks for it between rounds (outside the timed batches). The time that
final synchronize takes shows whether the GPU kept up: when it had fallen
behind, launches may have waited for queue space, the host times measure
the GPU instead, and the script says so.

- torch.softmax(x, -1)
- tilejit.softmax(x)             (the target's call)
- tilejit.softmax(x, out=y)
- torch.empty_like(x)            (the allocation that both pay)
- tj_softmax through ctypes      (the binding's bare foreign call, arguments prepared)

Exit status: 0 when the target is met on every shape, 1 when it is not or
a check failed, 77 when there is no torch, no CUDA device or no library.
"""

import argparse
import gc
import os
import platform
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = 77


def say(*parts):
    print(*parts, flush=True)


def load():
    """(torch, tilejit), or exits 77 naming what is missing."""
    try:
        import torch
    except ImportError as e:
        say(f"python_host_time: needs torch with CUDA: {e}")
        sys.exit(SKIP)
    if not torch.cuda.is_available():
        say("python_host_time: torch sees no CUDA device (no GPU, or no driver)")
        sys.exit(SKIP)
    sys.path.insert(0, os.path.join(ROOT, "python"))
    try:
        import tilejit
    except ImportError as e:
        say(f"python_host_time: {e}")
        sys.exit(SKIP)
    return torch, tilejit


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def calls_for(torch, tilejit, x):
    y = torch.empty_like(x)
    return {
        "torch.softmax(x, -1)": lambda: torch.softmax(x, -1),
        "tilejit.softmax(x)": lambda: tilejit.softmax(x),
        "tilejit.softmax(x, out=y)": lambda: tilejit.softmax(x, out=y),
        "torch.empty_like(x)": lambda: torch.empty_like(x),
        "tj_softmax through ctypes": tilejit._prepared_softmax(x, y),
    }


def check(torch, tilejit, x):
    """tilejit's result against torch's (float32 comparison)."""
    want = torch.softmax(x.float(), -1)
    got = tilejit.softmax(x).float()
    torch.cuda.synchronize()
    tolerance = 1e-5 if x.dtype == torch.float32 else 1e-2
    error = float((got - want).abs().max()) if x.numel() else 0.0
    return error <= tolerance, error


def measure(torch, calls, rounds, batch, sync_rounds):
    """{name: median µs per call}, and the final synchronize's ms."""
    items = list(calls.items())
    for _, fn in items:  # warm-up: compiles, caches, allocator pools
        for _ in range(200):
            fn()
    torch.cuda.synchronize()
    samples = {name: [] for name, _ in items}
    clock = time.perf_counter
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            for name, fn in (items if r % 2 == 0 else items[::-1]):
                start = clock()
                for _ in range(batch):
                    fn()
                samples[name].append((clock() - start) / batch * 1e6)
            if sync_rounds:
                torch.cuda.synchronize()
        start = clock()
        torch.cuda.synchronize()
        drain_ms = (clock() - start) * 1e3
    finally:
        gc.enable()
    return {name: statistics.median(values) for name, values in samples.items()}, drain_ms


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="1x32,4x1024", help="MxN,... (default 1x32,4x1024)")
    parser.add_argument("--dtype", default="f32", choices=("f32", "f16", "bf16"))
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--batch", type=int, default=50, help="calls per timed batch")
    parser.add_argument("--sync-rounds", action="store_true",
                        help="synchronize between rounds (outside the timed batches)")
    args = parser.parse_args()
    torch, tilejit = load()
    dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    try:
        shapes = [tuple(int(v) for v in s.lower().split("x")) for s in args.shapes.split(",")]
        assert all(len(s) == 2 for s in shapes)
    except (ValueError, AssertionError):
        parser.error(f"--shapes {args.shapes!r}: expected MxN,MxN,...")

    say(f"GPU {torch.cuda.get_device_name()}, CPU {cpu_name()}")
    say(f"Python {platform.python_version()}, torch {torch.__version__}, tilejit "
        f"{tilejit.version()} ({tilejit.library_path})")
    say(f"{args.dtype}, median over {args.rounds} rounds of {args.batch} calls each, "
        f"{'synchronized between rounds' if args.sync_rounds else 'one synchronize at the end'}")
    failures, verdicts = [], []
    for m, n in shapes:
        x = torch.randn(m, n, device="cuda").to(dtype)
        ok, error = check(torch, tilejit, x)
        if not ok:
            failures.append(f"{m}x{n}: tilejit differs from torch by {error:.3g}")
            say(f"\n{m}x{n}: FAIL, tilejit differs from torch by {error:.3g}; not timed")
            continue
        times, drain_ms = measure(torch, calls_for(torch, tilejit, x), args.rounds, args.batch,
                                  args.sync_rounds)
        say(f"\n{m}x{n} {args.dtype}      µs per call")
        for name, us in times.items():
            say(f"  {name:<28} {us:7.2f}")
        ratio = times["tilejit.softmax(x)"] / times["torch.softmax(x, -1)"]
        out_ratio = times["tilejit.softmax(x, out=y)"] / times["torch.softmax(x, -1)"]
        met = ratio <= 1.0
        verdicts.append(met)
        say(f"  ratio tilejit.softmax(x) / torch.softmax(x, -1) = {ratio:.3f} "
            f"({'met' if met else 'MISSED'}: target <= 1); with out=y {out_ratio:.3f}")
        say(f"  final synchronize {drain_ms:.2f} ms")
        if drain_ms > 0.5:  # more than ~100 tiny kernels were still queued
            say("  WARNING: the GPU was behind the host; launches may have waited for queue "
                "space, so these figures may be GPU time. Run again with --sync-rounds.")
    say("")
    if failures:
        say("python_host_time: " + "; ".join(failures))
        return 1
    say(f"python_host_time: target met on {sum(verdicts)} of {len(verdicts)} shapes"
        + ("" if all(verdicts) else f", MISSED on {len(verdicts) - sum(verdicts)}"))
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
