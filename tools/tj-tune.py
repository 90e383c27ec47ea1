#!/usr/bin/env python3
"""tj-tune: measure num_warps for softmax rows held by one CTA, and write the
tuning table tj_softmax's default plan reads (src/runtime/softmax_tuning.inc).

    tools/tj-tune.py --bench BUILD/tools/tj-bench [--out FILE] [--reps K]
                     [--rounds R] [--dtype f32,f16,bf16] [--margin P]

Run it on the GPU machine, from a build of the current tree. For each dtype
and each BLOCK from 2048 to 32768 (rows of BLOCK elements, M = 256 MiB /
(4 BLOCK): x of 256 MiB in f32, 128 MiB in 16 bits), tj-bench measures the % of copy of every candidate num_warps (4, 8, 16,
32, those leaving a thread 8 to 64 elements), R rounds each in separate
processes, L2 flushed before every call. The best replaces the plan as
built (its NUM_WARPS, from dump-ptx next to tj-bench) only when it beats it
by more than P points (default 1.5) in every round, so that regenerating
the table on the same GPU does not churn on noise. One
line per (arch, dtype, BLOCK) is written, with every measurement in a
comment; the build embeds the file (#include), and an explicit num_warps
(tj_softmax_options, tj-bench --warps) still overrides it.

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


def bench(tool, dtype, warps, reps):
    """% of copy per BLOCK (one tj-bench process), and tj-bench's device line."""
    cmd = [tool, "--bandwidth", "-n", ",".join(map(str, BLOCKS)), "--dtype", dtype,
           "--warps", str(warps), "--reps", str(reps), "--csv", "-"]
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


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bench", required=True, help="tj-bench of a build of this tree")
    p.add_argument("--out", default=os.path.join(ROOT, "src", "runtime", "softmax_tuning.inc"))
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--dtype", default="f32,f16,bf16")
    p.add_argument("--margin", type=float, default=1.5)
    args = p.parse_args()
    dump = os.path.join(os.path.dirname(args.bench), "dump-ptx")
    lines, device = [], ""
    for dtype in args.dtype.split(","):
        rounds = []  # per round: warps -> BLOCK -> % of copy
        for _ in range(args.rounds):
            got = {}
            for w in WARPS:
                got[w], dev = bench(args.bench, dtype, w, args.reps)
                device = device or dev
            rounds.append(got)
        found = re.search(r"sm_(\d+)", device)
        if not found:
            sys.exit(f"tj-tune: no arch in tj-bench's header: {device!r}")
        arch = found.group(1)
        for block in BLOCKS:
            ok = [w for w in WARPS if 8 <= block // (32 * w) <= 64]
            med = {w: statistics.median(r[w][block] for r in rounds) for w in ok}
            best = max(ok, key=lambda w: med[w])
            current = plan_warps(dump, arch, dtype, block)
            wins = current not in ok or all(
                r[best][block] > r[current][block] + args.margin for r in rounds)
            choice = best if wins else current
            shown = ", ".join(f"{w} warps {med[w]:.1f}" for w in ok)
            lines.append(f"TUNED({arch}, {DTYPE_ENUM[dtype]}, {block}, {choice}) "
                         f"/* % of copy: {shown} */")
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
             f"--margin {args.margin} */")
    head = head.replace(" Until then this file holds no line.", "")
    with open(args.out, "w") as f:
        f.write(head + "*/\n" + "\n".join(kept + [stamp] + lines) + "\n")
    print(f"tj-tune: wrote {len(lines)} lines for sm_{arch} to {args.out}")


if __name__ == "__main__":
    main()
