"""few_rows.py: few short rows, tilejit's plan (a warp a row) against the
softmax template at a BLOCK past 1024, where one row takes a whole CTA
(geometry.c packs rows of up to 1024 elements in a warp), on one GPU.

    TILEJIT_LIBRARY=build/libtilejit.so python3 bench/experiments/few_rows.py

Each figure: the median of 200 CUDA-event times, L2 flushed (256 MB zeroed)
before each call (two_phases.py's median_ms), as GB/s (2 * M * N * element bytes) and as the ratio to
the plan in the same process. Every output is checked against torch.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
sys.path.insert(0, os.path.dirname(__file__))
import torch  # noqa: E402
import tilejit  # noqa: E402
from two_phases import median_ms  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
TEXT = open(os.path.join(ROOT, "templates", "softmax.tj")).read()
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
flush = torch.empty(256 * 1000 * 1000, dtype=torch.uint8, device="cuda")


def median_us(fn, reps=200):
    return median_ms(fn, flush, reps) * 1000


def main():
    print(torch.cuda.get_device_name())
    for m, n, dt in [(1024, 512, "f32"), (1024, 1024, "f32"), (1024, 512, "bf16"),
                     (1024, 1024, "bf16"), (1024, 1024, "f16"), (4096, 1024, "f32"),
                     (65536, 1024, "f32")]:
        x = torch.randn(m, n, dtype=DTYPES[dt], device="cuda")
        y = torch.empty_like(x)
        want = torch.softmax(x.float(), -1)
        gb = 2 * m * n * x.element_size() / 1e3
        plan_us = median_us(lambda: tilejit.softmax(x, out=y))
        line = f"{m:6d} x {n:5d} {dt:4s} plan {gb / plan_us:7.0f} GB/s"
        for block, warps in [(2048, 4), (2048, 8), (4096, 4)]:
            f = tilejit.Function(TEXT, dt, block=block, num_warps=warps)
            y.fill_(float("nan"))
            f[m](y, x, n, n, n)
            ok = torch.allclose(y.float(), want, rtol=2e-2, atol=1e-5)
            us = median_us(lambda: f[m](y, x, n, n, n))
            line += f" | B{block} w{warps} {gb / us:7.0f} ({plan_us / us:.2f}x{'' if ok else ' WRONG'})"
        print(line, flush=True)


if __name__ == "__main__":
    main()
