#!/usr/bin/env python3
"""tj-tune: measure num_warps for softmax rows held by one CTA, and write the
tuning table tj_softmax's default plan reads (src/runtime/softmax_tuning.inc).

    tools/tj-tune.py --bench BUILD/tools/tj-bench [--out FILE] [--reps K]
                     [--rounds R] [--dtype f32,f16,bf16] [--margin P]
                     [--few-rows M]

Run it on the GPU machine, from a build of the current tree. For each dtype
and each BLOCK from 2048 to 32768, tj-bench measures the % of copy of every
candidate num_warps (4, 8, 16, 32, those leaving a thread at least 8
elements and at most 128 bytes of them, 32 in f32 and 64 in 16 bits: f32
threads of 64 spilled in their phased kernels and in softmax backward's,
which plans two tiles by this table; the warps set the rows a CTA holds
and the CTAs an SM holds) in
two regimes of rows: many (M = 256 MiB / (4 BLOCK): x of 256 MiB in f32,
128 MiB in 16 bits, many waves of CTAs) and few (M = 1024, default, the
small problems' rows: about one wave, where the grid's ramp and tail
weigh). R rounds each, every measurement in its own process, L2 flushed
before every call; the figures compared are the medians over the rounds.
A candidate is fit when in neither regime it is more than P points
(default 1.5) behind that regime's best. The plan as built (its NUM_WARPS,
from dump-ptx next to tj-bench) stays when it is fit, so that
regenerating the table on the same GPU does not churn on noise; else the
fit candidate with the highest sum of the two regimes replaces it. One
line per (arch, dtype, BLOCK)
is written, with every measurement in a comment; the build embeds the file
(#include), and an explicit num_warps (tj_softmax_options, tj-bench
--warps) still overrides it.

Exit status: 0 when the table was written; 1 on a failed measurement.
"""
import argparse
import csv
import io
import os
import re
import statistics
import subprocess
import sys

BLOCKS = [2048, 4096, 8192, 16384, 32768]
WARPS = [4, 8, 16, 32]
DTYPE_ENUM = {"f32": "TJ_DTYPE_F32", "f16": "TJ_DTYPE_F16", "bf16": "TJ_DTYPE_BF16"}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench(tool, dtype, warps, reps, rows=None):
    """% of copy per BLOCK (one tj-bench process; M = rows, else tj-bench's
    256 MiB / (4 N)), and tj-bench's device line."""
    cmd = [tool, "--bandwidth", "-n", ",".join(map(str, BLOCKS)), "--dtype", dtype,
           "--warps", str(warps), "--reps", str(reps), "--csv", "-"]
    if rows:
        cmd += ["-m", str(rows)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"tj-tune: {' '.join(cmd)} failed ({run.returncode}):\n{run.stderr[-2000:]}")
    out = {int(row["n"]): float(row["value"]) for row in csv.DictReader(io.StringIO(run.stdout))
           if row["section"] == "bandwidth" and row["metric"] == "pct_copy"}
    if sorted(out) != BLOCKS:
        sys.exit(f"tj-tune: {' '.join(cmd)} measured {sorted(out)}")
    device = next((l for l in run.stderr.splitlines() if l.startswith("tj-bench:")), "")
    return out, device


def plan_warps(dump, arch, dtype, block):
    """NUM_WARPS of the plan as built, from dump-ptx's header line."""
    m = -(-(256 << 20) // (4 * block))
    run = subprocess.run([dump, "softmax", "-n", str(block), "-m", str(m), "--dtype", dtype,
                          "--arch", f"sm_{arch}"], capture_output=True, text=True)
    found = re.search(r"NUM_WARPS=(\d+)", run.stdout)
    if run.returncode != 0 or not found:
        sys.exit(f"tj-tune: dump-ptx gave no NUM_WARPS for {dtype} {block}: {run.stderr[-500:]}")
    return int(found.group(1))


def choose(regimes, current, margin):
    """The warps to keep: current when it is fit (in each regime at most
    margin points behind the best there), else the fit candidate with the
    highest sum over the regimes (the highest sum when none is fit).
    regimes: warps -> [% of copy with many rows, with few rows]."""
    best = [max(v[k] for v in regimes.values()) for k in (0, 1)]
    fit = [w for w, v in regimes.items() if all(v[k] >= best[k] - margin for k in (0, 1))]
    if current in fit:
        return current
    return max(fit or regimes, key=lambda w: sum(regimes[w]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bench", required=True, help="tj-bench of a build of this tree")
    p.add_argument("--out", default=os.path.join(ROOT, "src", "runtime", "softmax_tuning.inc"))
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--dtype", default="f32,f16,bf16")
    p.add_argument("--margin", type=float, default=1.5)
    p.add_argument("--few-rows", type=int, default=1024,
                   help="M of the few-rows regime (default 1024)")
    args = p.parse_args()
    dump = os.path.join(os.path.dirname(args.bench), "dump-ptx")
    lines, device = [], ""
    for dtype in args.dtype.split(","):
        rounds = []  # per round: (many, few) -> warps -> BLOCK -> % of copy
        for _ in range(args.rounds):
            got = ({}, {})
            for w in WARPS:
                got[0][w], dev = bench(args.bench, dtype, w, args.reps)
                got[1][w], _ = bench(args.bench, dtype, w, args.reps, args.few_rows)
                device = device or dev
            rounds.append(got)
        found = re.search(r"sm_(\d+)", device)
        if not found:
            sys.exit(f"tj-tune: no arch in tj-bench's header: {device!r}")
        arch = found.group(1)
        for block in BLOCKS:
            size = 4 if dtype == "f32" else 2
            ok = [w for w in WARPS if 8 <= block // (32 * w) and block // (32 * w) * size <= 128]
            regimes = {w: [statistics.median(r[k][w][block] for r in rounds) for k in (0, 1)]
                       for w in ok}
            current = plan_warps(dump, arch, dtype, block)
            choice = choose(regimes, current, args.margin)
            shown = ", ".join(f"{w} warps {regimes[w][0]:.1f}/{regimes[w][1]:.1f}" for w in ok)
            lines.append(f"TUNED({arch}, {DTYPE_ENUM[dtype]}, {block}, {choice}) "
                         f"/* % of copy, many/few rows: {shown} */")
            print(f"{dtype} BLOCK={block}: {choice} warps (as built {current}; {shown})")
    arch = re.search(r"sm_(\d+)", device).group(1)
    text = open(args.out).read()
    head, rest = text.split("*/", 1)
    kept, mine = [], False  # other archs' blocks, each from its "/* sm_NN:" line
    for line in rest.splitlines():
        if line.startswith("/* sm_"):
            mine = line.startswith(f"/* sm_{arch}:")
        if line.strip() and not mine:
            kept.append(line)
    stamp = (f"/* sm_{arch}: {device.removeprefix('tj-bench: ')};\n"
             f"   tools/tj-tune.py --reps {args.reps} --rounds {args.rounds} "
             f"--margin {args.margin} --few-rows {args.few_rows} */")
    head = head.replace(" Until then this file holds no line.", "")
    with open(args.out, "w") as f:
        f.write(head + "*/\n" + "\n".join(kept + [stamp] + lines) + "\n")
    print(f"tj-tune: wrote {len(lines)} lines for sm_{arch} to {args.out}")


if __name__ == "__main__":
    main()
