#!/usr/bin/env python3
"""tj-tune: measure num_warps for softmax rows held by one CTA, and the CTAs
that share a wider row, and write the tuning table tj_softmax's default
plan reads (src/runtime/softmax_tuning.inc).

    tools/tj-tune.py --bench BUILD/tools/tj-bench [--out FILE] [--reps K]
                     [--rounds R] [--dtype f32,f16,bf16] [--margin P]
                     [--few-rows M] [--what warps,rows]

--what chooses the sections measured (default both). The lines of this
GPU's arch that were not measured (the other section, other dtypes) are
kept as they are.

Rows (--what rows): for each dtype and each BLOCK from 65536 to 2^20 (rows
of that N, M = 256 MiB / (4 N): rows that fill the device), the staged
plan spreads a row over k CTAs of 256 threads, each keeping its share in
shared memory, in a cluster or over the grid (or in clusters of two over
the grid: 16-bit rows in rounds on sm_90, whose CTAs the plan then makes
128 threads, twice as many). The candidates are k0 (the plan's, from
dump-ptx), k0 / 2 and 2 k0 (at least 2), each in a cluster (k <= 8) and
over the grid, in CTAs of 256 threads at STAGE 32; the plan's own shape
is measured as built; a TUNED_ROWS line is a shape of 256-thread CTAs.
R rounds, medians compared as for the warps; the plan's shape stays
while it is within P points of the best (a comment line records the
measurements), else the best replaces it: a TUNED_ROWS(arch, dtype, BLOCK,
k, in a cluster) line, the measurements in its comment. The plan applies
it to rows of that BLOCK that fill the device, scaled to their width (as
many CTAs as keep a share of the same bytes) where the shares fit
(softmax_plan.c); explicit cluster, split or stage options override it.

Warps (--what warps):

Run it on the GPU machine, from a build of the current tree. For each dtype
and each BLOCK from 2048 to 32768, tj-bench measures the % of copy of every
candidate num_warps (4, 8, 16, 32, those leaving a thread at least 8
elements and at most 32 in f32 or 128 in 16 bits: f32 threads of 64
spilled in their phased kernels and in softmax backward's, which plans two
tiles by this table, while 16-bit threads of 128 assemble without spills
in every op on sm_90 and ran fastest there, at three CTAs an SM; the
warps set the rows a CTA holds and the CTAs an SM holds) in
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
ROW_BLOCKS = [65536, 131072, 262144, 524288, 1048576]
ROW_STAGE = 32
DTYPE_ENUM = {"f32": "TJ_DTYPE_F32", "f16": "TJ_DTYPE_F16", "bf16": "TJ_DTYPE_BF16"}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = os.path.join(ROOT, "src", "runtime", "softmax_tuning.inc")


def bench(tool, dtype, warps, reps, rows=None, blocks=BLOCKS, flags=()):
    """% of copy per BLOCK (one tj-bench process; M = rows, else tj-bench's
    256 MiB / (4 N); warps and flags override the plan), and tj-bench's
    device line."""
    cmd = [tool, "--bandwidth", "-n", ",".join(map(str, blocks)), "--dtype", dtype,
           "--reps", str(reps), "--csv", "-", *flags]
    if warps:
        cmd += ["--warps", str(warps)]
    if rows:
        cmd += ["-m", str(rows)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"tj-tune: {' '.join(cmd)} failed ({run.returncode}):\n{run.stderr[-2000:]}")
    out = {int(row["n"]): float(row["value"]) for row in csv.DictReader(io.StringIO(run.stdout))
           if row["section"] == "bandwidth" and row["metric"] == "pct_copy"}
    if sorted(out) != sorted(blocks):
        sys.exit(f"tj-tune: {' '.join(cmd)} measured {sorted(out)}")
    device = next((l for l in run.stderr.splitlines() if l.startswith("tj-bench:")), "")
    return out, device


def dump_plan(dump, arch, dtype, block, flags=()):
    """dump-ptx's output for softmax over rows of block as tj-bench runs
    them (M = 256 MiB / (4 BLOCK)): the plan as built."""
    m = -(-(256 << 20) // (4 * block))
    run = subprocess.run([dump, "softmax", "-n", str(block), "-m", str(m), "--dtype", dtype,
                          "--arch", f"sm_{arch}", *flags], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"tj-tune: dump-ptx failed for {dtype} {block}: {run.stderr[-500:]}")
    return run.stdout


def plan_warps(dump, arch, dtype, block):
    """NUM_WARPS of the plan as built without staging (--stage -1: the
    table's warps, which tj-bench --warps measures, not a staged plan's),
    from dump-ptx's header line."""
    found = re.search(r"NUM_WARPS=(\d+)", dump_plan(dump, arch, dtype, block, ("--stage", "-1")))
    if not found:
        sys.exit(f"tj-tune: dump-ptx gave no NUM_WARPS for {dtype} {block}")
    return int(found.group(1))


def plan_rows(dump, arch, dtype, block):
    """(CTAs a row, CTAs a cluster) of the plan as built, from dump-ptx's
    layout comment ("over a cluster of 4 CTAs", "over 16 CTAs of the grid",
    "over a cluster of 2 CTAs, over 8 clusters of the grid")."""
    text = dump_plan(dump, arch, dtype, block)
    cluster = re.search(r"over a cluster of (\d+) CTAs", text)
    grid = re.search(r"over (\d+) (?:CTAs|clusters) of the grid", text)
    c = int(cluster.group(1)) if cluster else 1
    return (c * int(grid.group(1)) if grid else c), c


def row_candidates(plan):
    """The shapes measured for a row: the plan's (k0 CTAs), and k0 / 2, k0
    and 2 k0 CTAs (at least 2) in a cluster (at most 8) and over the grid."""
    k0, _ = plan
    shapes = {plan}
    for k in (k0 // 2, k0, 2 * k0):
        if k >= 2:
            shapes.add((k, 1))
            if k <= 8:
                shapes.add((k, k))
    return sorted(shapes)


def shape_name(shape):
    k, c = shape
    if c == 1:
        return f"grid {k}"
    return f"cluster {k}" if c == k else f"grid {k // c} clusters of {c}"


def shape_flags(shape):
    """tj-bench's options for a shape: a split, one cluster, or both."""
    k, c = shape
    flags = ["--cluster", str(c)] if c > 1 else []
    return flags + (["--split", str(k // c)] if k > c else [])


def measure_rows(args, dump, arch, dtype, rounds):
    """TUNED_ROWS lines for dtype: per BLOCK the shape kept, as choose()
    keeps warps (one regime)."""
    lines = []
    for block in ROW_BLOCKS:
        plan = plan_rows(dump, arch, dtype, block)
        got = {shape: [] for shape in row_candidates(plan)}
        for _ in range(rounds):
            for shape in got:
                flags = () if shape == plan else (
                    "--warps", "8", "--stage", str(ROW_STAGE), *shape_flags(shape))
                value, _ = bench(args.bench, dtype, 0, args.reps, blocks=[block], flags=flags)
                got[shape].append(value[block])
        measured = {shape: [statistics.median(v)] for shape, v in got.items()}
        choice = choose(measured, plan, args.margin)
        shown = ", ".join(f"{shape_name(sh)} {v[0]:.1f}{' (plan)' if sh == plan else ''}"
                          for sh, v in measured.items())
        if choice == plan:  # the rules stand: a comment, which the plan does not read
            lines.append(f"/* rows {DTYPE_ENUM[dtype]}, {block}: the plan's {shape_name(plan)} "
                         f"kept; % of copy: {shown} */")
        else:
            lines.append(f"TUNED_ROWS({arch}, {DTYPE_ENUM[dtype]}, {block}, {choice[0]}, "
                         f"{int(choice[1] == choice[0])}) /* % of copy: {shown} */")
        print(f"{dtype} rows of {block}: {shape_name(choice)} (as built {shape_name(plan)}; {shown})")
    return lines


def choose(regimes, current, margin):
    """The warps to keep: current when it is fit (in each regime at most
    margin points behind the best there), else the fit candidate with the
    highest sum over the regimes (the highest sum when none is fit).
    regimes: candidate -> [% of copy in each regime] (warps: with many rows
    and with few; the rows' shapes: many rows only)."""
    count = len(next(iter(regimes.values())))
    best = [max(v[k] for v in regimes.values()) for k in range(count)]
    fit = [w for w, v in regimes.items() if all(v[k] >= best[k] - margin for k in range(count))]
    if current in fit:
        return current
    return max(fit or regimes, key=lambda w: sum(regimes[w]))


def measure_warps(args, dump, arch, dtype):
    """TUNED lines for dtype: per BLOCK the warps kept (choose)."""
    rounds = []  # per round: (many, few) -> warps -> BLOCK -> % of copy
    for _ in range(args.rounds):
        got = ({}, {})
        for w in WARPS:
            got[0][w], _ = bench(args.bench, dtype, w, args.reps)
            got[1][w], _ = bench(args.bench, dtype, w, args.reps, args.few_rows)
        rounds.append(got)
    lines = []
    for block in BLOCKS:
        most = 32 if dtype == "f32" else 128
        ok = [w for w in WARPS if 8 <= block // (32 * w) <= most]
        regimes = {w: [statistics.median(r[k][w][block] for r in rounds) for k in (0, 1)]
                   for w in ok}
        current = plan_warps(dump, arch, dtype, block)
        choice = choose(regimes, current, args.margin)
        shown = ", ".join(f"{w} warps {regimes[w][0]:.1f}/{regimes[w][1]:.1f}" for w in ok)
        lines.append(f"TUNED({arch}, {DTYPE_ENUM[dtype]}, {block}, {choice}) "
                     f"/* % of copy, many/few rows: {shown} */")
        print(f"{dtype} BLOCK={block}: {choice} warps (as built {current}; {shown})")
    return lines


def blocks_of(text):
    """The table's measured blocks after its header comment: (arch, kind,
    lines), each from its "/* sm_NN:" stamp; kind "rows" when the stamp
    says --what rows, else "warps"."""
    blocks = []
    for line in text.splitlines():
        if line.startswith("/* sm_"):
            blocks.append([re.match(r"/\* sm_(\d+)", line).group(1), "warps", []])
        if not line.strip() or not blocks:
            continue
        blocks[-1][2].append(line)
        if "--what rows" in line and len(blocks[-1][2]) <= 2:
            blocks[-1][1] = "rows"
    return blocks


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bench", required=True, help="tj-bench of a build of this tree")
    p.add_argument("--out", default=TABLE,
                   help="the table to update (default the repository's); a new file starts "
                        "from the repository's lines")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--dtype", default="f32,f16,bf16")
    p.add_argument("--margin", type=float, default=1.5)
    p.add_argument("--few-rows", type=int, default=1024,
                   help="M of the few-rows regime (default 1024)")
    p.add_argument("--what", default="warps,rows", help="sections: warps, rows or both")
    args = p.parse_args()
    what = [w for w in ("warps", "rows") if w in args.what.split(",")]
    if not what or set(args.what.split(",")) - set(what):
        p.error(f"--what takes warps, rows or warps,rows, not {args.what!r}")
    # Read before measuring: a table that cannot be read would lose them.
    with open(args.out if os.path.exists(args.out) else TABLE) as f:
        text = f.read()
    dump = os.path.join(os.path.dirname(args.bench), "dump-ptx")
    _, device = bench(args.bench, "f32", 0, 1, rows=1, blocks=[32])
    found = re.search(r"sm_(\d+)", device)
    if not found:
        sys.exit(f"tj-tune: no arch in tj-bench's header: {device!r}")
    arch = found.group(1)
    written = {}
    for section in what:
        lines = []
        for dtype in args.dtype.split(","):
            if section == "warps":
                lines += measure_warps(args, dump, arch, dtype)
            else:
                lines += measure_rows(args, dump, arch, dtype, args.rounds)
        written[section] = lines
    head, rest = text.split("*/", 1)
    dtypes = [DTYPE_ENUM[d] for d in args.dtype.split(",")]
    kept, earlier = [], {}  # earlier: section -> this arch's lines of the other dtypes
    for a, kind, lines in blocks_of(rest):
        if a != arch or kind not in written:
            kept += lines
        else:
            earlier[kind] = [l for l in lines if re.search(r"TJ_DTYPE_\w+", l) and
                             re.search(r"TJ_DTYPE_\w+", l).group(0) not in dtypes]
    for section, lines in written.items():
        extra = f" --few-rows {args.few_rows}" if section == "warps" else ""
        kept.append(f"/* sm_{arch}: {device.removeprefix('tj-bench: ')};\n"
                    f"   tools/tj-tune.py --what {section} --reps {args.reps} "
                    f"--rounds {args.rounds} --margin {args.margin}{extra} */")
        kept += earlier.get(section, []) + lines
    head = head.replace(" Until then this file holds no line.", "")
    with open(args.out, "w") as f:
        f.write(head + "*/\n" + "\n".join(kept) + "\n")
    count = sum(len(v) for v in written.values())
    print(f"tj-tune: wrote {count} lines for sm_{arch} to {args.out}")


if __name__ == "__main__":
    main()
