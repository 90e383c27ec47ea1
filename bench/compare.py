"""bench/compare.py: tilejit's softmax side by side with torch.softmax and a
Triton fused softmax, in one process, on one GPU.

    python3 bench/compare.py [--dtype f32|f16|bf16 | --all-dtypes] [--quick]
                             [--sets large,small,wide,huge,odd] [--out DIR]
                             [--backend ptx|nvrtc] [--budget SECONDS]

Shapes are those of tj-bench: the large set (N from 32 to 262144, M chosen
so that x is at least 256 MiB in f32; the same M for f16 and bf16), the
small set (M = 1024 with N = 512 ... 32768, 8765x4096, 4096x2048), the wide
set (N = 32768 ... 2^20, x at least 256 MiB in every dtype) and the huge
set (M = 1 and 4, N = 10^6, 10^7, 2^24 and 5*10^7); the odd set (N = 77,
197, 577, 1023, 3000, 12345, 32001 and 50257, rows at every phase of 16
bytes, x at least 256 MiB). Triton's fused softmax
(BLOCK = next_pow2(N), one program a row) is run up to N = 262144; past
that it cannot hold a row, and its column says so.

For each shape, on a fresh random input (rows scaled by 3 around per-row
offsets, so the max subtraction matters), every implementation first writes
a NaN-poisoned output that is checked against a float64 reference with the
testing tolerances; then it is timed. Timing is our own CUDA-event loop,
the method of triton.testing.do_bench: median of per-call event times,
with a 256 MB buffer zeroed before every call to flush L2 (warm-up about
10 ms, about 50 ms of repetitions, 10 to 500 of them). GB/s counts
2*M*N*element bytes. Copy is the better of x.copy_ into y and a Triton copy
of 16-byte vectors over the same buffers, counting bytes read plus written;
"% copy" is against it, and "% dev" against the same copies over 256 MiB
measured first (the device's copy bandwidth, which the targets use; for a
small problem the same-size copy also pays the launch and the tail).

Also measured: first-call time in a fresh process (tilejit: import,
context creation, code generation, driver JIT, launch; Triton: an empty
TRITON_CACHE_DIR), both with the driver's JIT cache off; and host time per
launch of a 1x32 softmax (wall time of back-to-back calls, read before the
closing synchronize).

Writes DIR/DATE-GPU.md, DIR/DATE-GPU.csv and a plot of GB/s against N for
the large set (DATE-GPU.png with matplotlib, else an SVG drawn here), where
DIR defaults to bench/results.
"""

import argparse
import csv
import datetime
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

try:
    import torch
except ImportError:
    torch = None

try:
    import triton
    import triton.language as tl
except Exception:  # absent or broken: the Triton columns are left out
    triton = None

tilejit = None  # imported in main(), so that the first-call child can time its import

LARGE_N = [32, 64, 128, 256, 500, 512, 1000, 1024, 2048, 4096, 8192, 16384, 32768, 65536,
           131072, 262144]
SMALL = [(1024, n) for n in (512, 1024, 2048, 4096, 8192, 16384, 32768)] + [(8765, 4096),
                                                                            (4096, 2048)]
WIDE_N = [32768, 65536, 131072, 262144, 524288, 1 << 20]
HUGE = [(m, n) for m in (1, 4) for n in (10**6, 10**7, 1 << 24, 5 * 10**7)]
ODD_N = [77, 197, 577, 1023, 3000, 12345, 32001, 50257]  # rows start at every phase
TRITON_MAX_N = 262144
QUICK_LARGE_N = [128, 1024, 8192, 65536]
QUICK_SMALL = [(1024, 4096)]
LARGE_BYTES = 256 << 20  # x in f32
TOLERANCES = {"f32": (1.3e-6, 1e-5), "f16": (1e-3, 1e-5), "bf16": (1.6e-2, 1e-5)}
SIZES = {"f32": 4, "f16": 2, "bf16": 2}
IMPLS = ("tilejit", "torch", "triton")
FLUSH_BYTES = 256 * 1000 * 1000
FIRST_CALL_SHAPE = (4096, 4096)


def say(*parts):
    print(*parts, flush=True)


# ------------------------------------------------------------------ Triton

if triton is not None:

    # One row per program; the row in one BLOCK = next_pow2(n) tile.
    @triton.jit
    def _softmax_kernel(y_ptr, x_ptr, y_stride, x_stride, n, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf"))
        x = x.to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=0))
        y = e / tl.sum(e, axis=0)
        tl.store(y_ptr + row * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)

    # Unmasked, so every access is a full 16-byte vector.
    @triton.jit
    def _copy_kernel(dst_ptr, src_ptr, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst_ptr + offs, tl.load(src_ptr + offs))


def triton_warps(block):
    """The tutorial's choice: 4 warps, 8 from 2048 elements, 16 from 4096."""
    return 16 if block >= 4096 else 8 if block >= 2048 else 4


def triton_softmax(x, y=None):
    m, n = x.shape
    if y is None:
        y = torch.empty_like(x)
    block = triton.next_power_of_2(n)
    _softmax_kernel[(m,)](y, x, y.stride(0), x.stride(0), n, BLOCK=block,
                          num_warps=triton_warps(block))
    return y


COPY_BLOCK = 8192


def triton_copy(dst, src):
    """Copies the whole COPY_BLOCKs of src; returns the elements copied."""
    count = src.numel() // COPY_BLOCK * COPY_BLOCK
    if count:
        _copy_kernel[(count // COPY_BLOCK,)](dst.view(-1), src.view(-1), BLOCK=COPY_BLOCK,
                                             num_warps=8)
    return count


# ------------------------------------------------------------ measurements


def median_ms(fn, flush, warmup_ms=10.0, rep_ms=50.0):
    """Median CUDA-event time of fn() with L2 flushed before each call."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-3)
    for _ in range(int(min(max(warmup_ms / estimate, 1), 200))):
        fn()
    reps = int(min(max(rep_ms / estimate, 10), 500))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        flush.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def make_input(m, n, dtype):
    """Normal values times 3 around a per-row offset of 0, +100 or a large
    negative one (-1e4 in f16, else -1e7)."""
    big = -1e4 if dtype == "f16" else -1e7
    offsets = torch.tensor([0.0, 100.0, big], device="cuda")
    offsets = offsets[torch.randint(0, 3, (m,), device="cuda")]
    x = torch.randn(m, n, device="cuda")
    x.mul_(3).add_(offsets[:, None])
    return x.to(torch_dtype(dtype))


def torch_dtype(name):
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[name]


def check(out, ref, dtype):
    """(passed, max |out - ref|, elements out of tolerance); NaN fails."""
    rtol, atol = TOLERANCES[dtype]
    error = (out.double() - ref).abs_()
    bad = int((~(error <= ref.abs().mul_(rtol).add_(atol))).sum())
    worst = float(torch.nan_to_num(error, nan=math.inf).max()) if error.numel() else 0.0
    return bad == 0, worst, bad


def torch_softmax_into(x, y):
    """torch's softmax kernel writing into y, for the poisoned-output check."""
    try:
        torch.ops.aten._softmax.out(x, -1, False, out=y)
    except Exception:
        y.copy_(torch.softmax(x, -1))


def runners(x, y, backend):
    """name -> a zero-argument call writing softmax(x) into y (torch: its own
    output, as users call it, for timing)."""
    calls = {"tilejit": lambda: tilejit.softmax(x, out=y, backend=backend),
             "torch": lambda: torch.softmax(x, -1)}
    if triton is not None and x.shape[1] <= TRITON_MAX_N:
        calls["triton"] = lambda: triton_softmax(x, y)
    return calls


def check_all(x, y, dtype, backend, row):
    ref = torch.softmax(x.double(), -1)
    checkers = {"tilejit": lambda: tilejit.softmax(x, out=y, backend=backend),
                "torch": lambda: torch_softmax_into(x, y)}
    if triton is not None and x.shape[1] <= TRITON_MAX_N:
        checkers["triton"] = lambda: triton_softmax(x, y)
    elif triton is not None:
        row["notes"].append(f"triton: not run: BLOCK = next_pow2(N) = {1 << (x.shape[1] - 1).bit_length()} "
                            f"is more than one program holds")
    for name, call in checkers.items():
        y.fill_(float("nan"))
        try:
            call()
            torch.cuda.synchronize()
            row[f"{name}_ok"], row[f"{name}_err"], bad = check(y, ref, dtype)
            if bad:
                row["notes"].append(f"{name}: {bad} elements out of tolerance")
        except Exception as e:
            row[f"{name}_ok"], row[f"{name}_err"] = False, math.nan
            row["notes"].append(f"{name}: {type(e).__name__}: {str(e)[:300]}")
    del ref


def time_all(x, y, backend, flush, row):
    gb = row["bytes"] / 1e9
    copies = {"copy_torch": (lambda: y.copy_(x), row["bytes"])}
    if triton is not None:
        count = x.numel() // COPY_BLOCK * COPY_BLOCK
        if count:
            copies["copy_triton"] = (lambda: triton_copy(y, x), 2 * count * x.element_size())
    for name, (call, nbytes) in copies.items():
        try:
            row[f"{name}_gbs"] = nbytes / 1e9 / (median_ms(call, flush) * 1e-3)
        except Exception as e:
            row["notes"].append(f"{name}: {type(e).__name__}: {str(e)[:300]}")
    found = [row[k] for k in ("copy_torch_gbs", "copy_triton_gbs") if k in row]
    row["copy_gbs"] = max(found) if found else math.nan
    for name, call in runners(x, y, backend).items():
        if not row.get(f"{name}_ok") and math.isnan(row.get(f"{name}_err", 0.0)):
            continue  # it raised in the check
        try:
            ms = median_ms(call, flush)
            row[f"{name}_ms"], row[f"{name}_gbs"] = ms, gb / (ms * 1e-3)
            row[f"{name}_pct"] = 100 * row[f"{name}_gbs"] / row["copy_gbs"]
            row[f"{name}_dev"] = 100 * row[f"{name}_gbs"] / DEVICE_COPY["gbs"]
        except Exception as e:
            row["notes"].append(f"{name} timing: {type(e).__name__}: {str(e)[:300]}")
    tj = row.get("tilejit_gbs", math.nan)
    row["vs_torch"] = tj / row.get("torch_gbs", math.nan)
    row["vs_triton"] = tj / row.get("triton_gbs", math.nan)


def measure_shape(kind, m, n, dtype, backend, flush):
    row = {"dtype": dtype, "set": kind, "M": m, "N": n, "bytes": 2 * m * n * SIZES[dtype],
           "notes": []}
    for name in IMPLS:
        row.update({f"{name}_gbs": math.nan, f"{name}_ms": math.nan, f"{name}_pct": math.nan,
                    f"{name}_dev": math.nan, f"{name}_err": math.nan, f"{name}_ok": False})
    x = make_input(m, n, dtype)
    y = torch.empty_like(x)
    check_all(x, y, dtype, backend, row)
    time_all(x, y, backend, flush, row)
    del x, y
    return row


# --------------------------------------------------- first call and launch


def child_first_call(which):
    """Runs in a fresh process; prints one RESULT line of JSON (ms)."""
    m, n = FIRST_CALL_SHAPE
    x = torch.randn(m, n, device="cuda")
    x2 = torch.randn(m, n + 1, device="cuda")
    torch.cuda.synchronize()
    result = {}
    clock = time.perf_counter
    if which == "tilejit":
        t = clock()
        import tilejit as binding
        result["import_ms"] = (clock() - t) * 1e3
        call = binding.softmax
    else:
        t = clock()
        try:
            triton.runtime.driver.active.utils  # builds Triton's C helpers into the empty cache
        except Exception:
            pass
        result["driver_init_ms"] = (clock() - t) * 1e3
        call = triton_softmax
    for key, arg in (("first_ms", x), ("second_ms", x), ("new_shape_ms", x2)):
        t = clock()
        y = call(arg)
        torch.cuda.synchronize()
        result[key] = (clock() - t) * 1e3
        if key == "first_ms":
            result["max_err"] = float((y - torch.softmax(x, -1)).abs().max())
    if which == "tilejit":
        stats = binding.cache_stats()  # per kernel compiled; none compiled: no figure
        misses = stats["misses"]
        result["codegen_us"] = stats["codegen_us"] / misses if misses else math.nan
        result["jit_ms"] = stats["jit_ms"] / misses if misses else math.nan
    print("RESULT " + json.dumps(result), flush=True)


def first_call(which, runs):
    """Medians over runs of child_first_call in fresh processes, each with
    empty caches of its own: the driver's off, tilejit's and Triton's on
    disk in a new directory (a kernel cached by an earlier run would make
    the first call a load from disk, and its codegen and JIT no figure)."""
    samples, errors = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, CUDA_CACHE_DISABLE="1", TRITON_CACHE_DIR=cache,
                       TILEJIT_CACHE_DIR=cache)
            try:
                done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", which],
                                      capture_output=True, text=True, env=env, timeout=180)
            except subprocess.TimeoutExpired:
                errors.append("timed out after 180 s")
                continue
        lines = [l for l in done.stdout.splitlines() if l.startswith("RESULT ")]
        if done.returncode or not lines:
            errors.append((done.stderr or done.stdout)[-600:])
            continue
        samples.append(json.loads(lines[-1][len("RESULT "):]))
    if errors:
        say(f"  {len(errors)} of {runs} runs failed; the last said: {errors[-1][-300:]}")
    if not samples:
        return {"error": errors[-1] if errors else "no result"}
    return {key: statistics.median(s[key] for s in samples) for key in samples[0]}


def host_us(call, batch=200, repeats=15):
    """Wall time per call of back-to-back calls, read before the closing
    synchronize (batch stays under the driver's launch queue depth)."""
    for _ in range(50):
        call()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(batch):
            call()
        times.append((time.perf_counter() - t) / batch * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)


def host_overheads(backend):
    x = torch.randn(1, 32, device="cuda")
    y = torch.empty_like(x)
    calls = {
        "tilejit.softmax(x)": lambda: tilejit.softmax(x, backend=backend),
        "tilejit.softmax(x, out=y)": lambda: tilejit.softmax(x, out=y, backend=backend),
        "tj_softmax through ctypes alone": lambda: tilejit._prepared_softmax(x, y),
        "torch.softmax(x, -1)": lambda: torch.softmax(x, -1),
    }
    if triton is not None:
        calls["Triton, allocating y"] = lambda: triton_softmax(x)
        calls["Triton, y given"] = lambda: triton_softmax(x, y)
    results = {}
    for name, call in calls.items():
        try:
            if name.startswith("tj_softmax"):
                call = call()  # the prepared foreign call
            results[name] = host_us(call)
        except Exception as e:
            results[name] = f"{type(e).__name__}: {str(e)[:200]}"
    return results


# ----------------------------------------------------------------- output


def fmt(value, digits=0):
    if isinstance(value, float) and math.isnan(value):
        return "-"
    return f"{value:.{digits}f}"


def status_mark(row, name):
    """'' when checked correct (or not run at all), FAIL when out of
    tolerance, ERR when it raised."""
    if row[f"{name}_ok"] or (name == "triton" and triton is None):
        return ""
    return " FAIL" if not math.isnan(row[f"{name}_err"]) else " ERR"


TABLE_HEAD = ["M", "N", "copy GB/s", "tilejit GB/s", "% copy", "% dev", "torch GB/s", "% copy",
              "Triton GB/s", "% copy", "tilejit/torch", "tilejit/Triton"]


def table_cells(row):
    cells = [str(row["M"]), str(row["N"]), fmt(row["copy_gbs"])]
    for name in IMPLS:
        cells += [fmt(row[f"{name}_gbs"]) + status_mark(row, name), fmt(row[f"{name}_pct"])]
        if name == "tilejit":
            cells.append(fmt(row["tilejit_dev"]))
    return cells + [fmt(row["vs_torch"], 2), fmt(row["vs_triton"], 2)]


ROW_WIDTHS = (7, 8, 6, 12, 4, 4, 11, 4, 11, 4, 6, 6)
ROW_HEAD = ["M", "N", "copy", "tilejit", "%", "%dev", "torch", "%", "Triton", "%", "tj/to",
            "tj/tr"]


def print_cells(dtype, kind, cells):
    say(f"{dtype:>5} {kind:>5} " + " ".join(f"{c:>{w}}" for c, w in zip(cells, ROW_WIDTHS)))


def print_row(row):
    print_cells(row["dtype"], row["set"], table_cells(row))


def markdown_table(rows):
    lines = ["| " + " | ".join(TABLE_HEAD) + " |", "|" + "---|" * len(TABLE_HEAD)]
    lines += ["| " + " | ".join(table_cells(r)) + " |" for r in rows]
    return lines


CSV_FIELDS = (["dtype", "set", "M", "N", "bytes", "copy_gbs", "copy_torch_gbs",
               "copy_triton_gbs"]
              + [f"{name}_{what}" for name in IMPLS
                 for what in ("gbs", "ms", "pct", "dev", "err", "ok")]
              + ["vs_torch", "vs_triton", "notes"])


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow(dict(row, notes="; ".join(row["notes"])))


PLOT_LINES = [("copy", "copy_gbs", "#555555"), ("tilejit", "tilejit_gbs", "#d62728"),
              ("torch", "torch_gbs", "#1f77b4"), ("Triton", "triton_gbs", "#2ca02c")]


def plot_png(path, rows, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 5.2), dpi=120)
    ns = [r["N"] for r in rows]
    for label, key, color in PLOT_LINES:
        ax.plot(ns, [r.get(key, math.nan) for r in rows], marker="o", ms=3.5, label=label,
                color=color, lw=1.6 if label != "copy" else 1.2,
                ls="--" if label == "copy" else "-")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("N (row width)")
    ax.set_ylabel("GB/s (2·M·N·elem bytes / time)")
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_svg(path, rows, title):
    """The same plot without matplotlib: a hand-drawn SVG."""
    width, height, left, right, top, bottom = 900, 520, 70, 20, 40, 60
    ns = [r["N"] for r in rows]
    values = [r.get(k, math.nan) for r in rows for _, k, _ in PLOT_LINES]
    ymax = max([v for v in values if not math.isnan(v)] + [1.0]) * 1.08
    lo, hi = math.log2(min(ns)), math.log2(max(ns))
    sx = lambda n: left + (math.log2(n) - lo) / max(hi - lo, 1) * (width - left - right)
    sy = lambda v: height - bottom - v / ymax * (height - top - bottom)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>']
    step = 10 ** math.floor(math.log10(ymax / 5))
    step *= 5 if ymax / step > 25 else 2 if ymax / step > 10 else 1
    for k in range(int(ymax / step) + 1):
        y = sy(k * step)
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" '
                   f'stroke="#ddd"/><text x="{left - 6}" y="{y + 4:.1f}" '
                   f'text-anchor="end">{k * step:g}</text>')
    for p in range(int(lo), int(hi) + 1):
        x = sx(2 ** p)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{height - bottom}" '
                   f'stroke="#eee"/><text x="{x:.1f}" y="{height - bottom + 16}" '
                   f'text-anchor="middle">2^{p}</text>')
    out.append(f'<text x="{width / 2}" y="{height - 18}" text-anchor="middle">N (row width)'
               f'</text><text x="16" y="{height / 2}" transform="rotate(-90 16 {height / 2})" '
               f'text-anchor="middle">GB/s</text>')
    out.append(f'<rect x="{width - 160}" y="{height - bottom - 94}" width="130" height="80" '
               f'fill="white" stroke="#ccc"/>')
    for i, (label, key, color) in enumerate(PLOT_LINES):
        points = [f"{sx(r['N']):.1f},{sy(r[key]):.1f}" for r in rows
                  if not math.isnan(r.get(key, math.nan))]
        dash = ' stroke-dasharray="6 4"' if label == "copy" else ""
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash} '
                   f'points="{" ".join(points)}"/>')
        ly = height - bottom - 80 + 18 * i
        out.append(f'<line x1="{width - 150}" x2="{width - 120}" y1="{ly}" y2="{ly}" '
                   f'stroke="{color}" stroke-width="2"{dash}/><text x="{width - 112}" '
                   f'y="{ly + 4}">{label}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def plot(stem, rows, title):
    """Writes stem.png (matplotlib) or stem.svg; returns the file name."""
    try:
        plot_png(stem + ".png", rows, title)
        return os.path.basename(stem) + ".png"
    except ImportError:
        say("matplotlib is not installed: drawing the plot as an SVG instead of a PNG")
    except Exception as e:
        say(f"matplotlib failed ({type(e).__name__}: {e}): drawing an SVG instead of a PNG")
    plot_svg(stem + ".svg", rows, title)
    return os.path.basename(stem) + ".svg"


# ------------------------------------------------------------------ report


def git_revision():
    try:
        done = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                              capture_output=True, text=True, timeout=10)
        return done.stdout.strip() or "unknown"
    except Exception:
        return "unknown"


def setup_lines(meta):
    info = meta["device"]
    return [
        f"- Device: {info['name']} (sm_{info['arch']}, {info['sm_count']} SMs), driver "
        f"{info['driver_version'] // 1000}.{info['driver_version'] % 1000 // 10}",
        f"- Date (UTC): {meta['date']}; commit {meta['revision']}",
        f"- torch {torch.__version__}, Triton {meta['triton']}, Python "
        f"{platform.python_version()}, tilejit {tilejit.version()} (backend {meta['backend']})",
        f"- Command: `{meta['command']}`",
        "- Timing: median of CUDA-event times per call, a 256 MB buffer zeroed before each call "
        "to flush L2 (the method of triton.testing.do_bench), warm-up about 10 ms, about 50 ms "
        "of repetitions (10 to 500). GB/s counts 2·M·N·element bytes.",
        "- Copy: the better of `y.copy_(x)` and a Triton 16-byte-vector copy over the same "
        "buffers, bytes read plus written; % copy is against it. Peak copy seen: "
        f"{meta['peak_copy']:.0f} GB/s.",
        "- Check: before timing, each implementation wrote a NaN-poisoned output from a fresh "
        "random input (×3, per-row offsets 0, +100, −1e7 or −1e4 in f16), compared with a "
        "float64 reference (rtol/atol 1.3e-6/1e-5 f32, 1e-3/1e-5 f16, 1.6e-2/1e-5 bf16). "
        "FAIL marks a figure whose output failed it, ERR one that raised.",
        "- Triton: one row per program, BLOCK = next_pow2(N), 4/8/16 warps by BLOCK "
        "(the tutorial's rule), written in bench/compare.py.",
    ]


def latency_lines(first, host):
    lines = ["## First call in a fresh process (ms, medians; driver JIT cache off, tilejit's and "
             "Triton's caches empty)", "",
             "| | import | driver init | first call | second call | new shape | "
             "codegen µs | JIT ms |", "|---|---|---|---|---|---|---|---|"]
    for name, r in first.items():
        if "error" in r:
            lines.append(f"| {name} | failed: {r['error'][-200:]!r} | | | | | | |")
            continue
        lines.append(f"| {name} | {fmt(r.get('import_ms', math.nan), 1)} | "
                     f"{fmt(r.get('driver_init_ms', math.nan), 1)} | {fmt(r['first_ms'], 1)} | "
                     f"{fmt(r['second_ms'], 2)} | {fmt(r['new_shape_ms'], 1)} | "
                     f"{fmt(r.get('codegen_us', math.nan), 1)} | "
                     f"{fmt(r.get('jit_ms', math.nan), 1)} |")
    m, n = FIRST_CALL_SHAPE
    lines += ["", f"Shape {m}×{n} f32; the new shape is {m}×{n + 1}. tilejit's first call "
              "includes context creation, code generation, the driver's PTX JIT and the launch; "
              "codegen and JIT are per compiled kernel. Triton's driver init builds its C "
              "helpers into the empty cache; its first call compiles the kernel and its launcher.",
              "", "## Host time per launch (µs, 1×32 f32, back-to-back calls)", "",
              "| call | µs |", "|---|---|"]
    lines += [f"| {k} | {v if isinstance(v, str) else f'{v:.2f}'} |" for k, v in host.items()]
    return lines


def ratio(value):
    return "(no figure)" if math.isnan(value) else f"{value:.2f}×"


def target_lines(rows, first, host):
    """The f32 targets of the issue: met or missed, from this run."""
    big = [r for r in rows if r["dtype"] == "f32" and r["set"] == "large"]
    if not big:
        return []
    lines = ["## Targets (f32, large set)", ""]
    mid = [r for r in big if 512 <= r["N"] <= 16384]
    low_pct = [f"N={r['N']} {fmt(r['tilejit_pct'])}%" for r in mid if not r["tilejit_pct"] >= 90]
    low_tri = [f"N={r['N']} {ratio(r['vs_triton'])}" for r in mid if not r["vs_triton"] >= 1.0]
    slow = [f"N={r['N']} {ratio(r['vs_torch'])}" for r in big if not r["vs_torch"] >= 0.9]
    wrong = [f"{r['dtype']} {r['M']}×{r['N']}" for r in rows if not r["tilejit_ok"]]
    tj = first.get("tilejit", {})
    launch = host.get("tilejit.softmax(x, out=y)")
    checks = [
        ("≥ 90% of copy for 512 ≤ N ≤ 16384", low_pct),
        ("≥ 1.0× Triton for 512 ≤ N ≤ 16384", low_tri),
        ("no N more than 10% slower than torch", slow),
        ("every shape correct", wrong),
        ("codegen ≤ 0.1 ms", [] if tj.get("codegen_us", math.inf) <= 100 else
         [f"{fmt(tj.get('codegen_us', math.nan), 1)} µs"]),
        ("cold compile ≤ 25 ms (JIT per kernel)", [] if tj.get("jit_ms", math.inf) <= 25 else
         [f"{fmt(tj.get('jit_ms', math.nan), 1)} ms"]),
        ("host time per launch ≤ 3 µs (through the binding, out given; tj-bench has C's)",
         [] if isinstance(launch, float) and launch <= 3 else [f"{launch}"]),
    ]
    for name, misses in checks:
        lines.append(f"- {name}: " + ("met" if not misses else "**missed**: " + ", ".join(misses)))
    return lines


def write_report(path, rows, meta, images, first, host, failures):
    lines = [f"# tilejit vs torch vs Triton: {meta['device']['name']}, {meta['date']}", ""]
    lines += setup_lines(meta) + [""]
    for dtype in meta["dtypes"]:
        for kind, title in (("large", "problems of at least 256 MiB in f32"),
                            ("small", "small problems"),
                            ("wide", "wide rows, x of at least 256 MiB"),
                            ("huge", "few huge rows"),
                            ("odd", "odd N (rows at any phase), x of at least 256 MiB")):
            subset = [r for r in rows if r["dtype"] == dtype and r["set"] == kind]
            if subset:
                lines += [f"## {dtype}, {title}", ""] + markdown_table(subset) + [""]
        if dtype in images:
            lines += [f"![GB/s against N, {dtype}]({images[dtype]})", ""]
    lines += latency_lines(first, host) + [""] + target_lines(rows, first, host) + [""]
    notes = [f"- {f}" for f in failures]
    notes += [f"- {r['dtype']} {r['M']}×{r['N']}: {n}" for r in rows for n in r["notes"]]
    if notes:
        lines += ["## Notes", ""] + notes + [""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


# ------------------------------------------------------------------- main


DEVICE_COPY = {"gbs": math.nan}


def measure_device_copy(flush):
    """The copies of 256 MiB: the device's copy bandwidth, for "% dev"."""
    x = torch.empty(LARGE_BYTES // 4, device="cuda")
    x.normal_()
    y = torch.empty_like(x)
    found = [2 * LARGE_BYTES / 1e9 / (median_ms(lambda: y.copy_(x), flush) * 1e-3)]
    if triton is not None:
        count = triton_copy(y, x)
        found.append(2 * count * 4 / 1e9 / (median_ms(lambda: triton_copy(y, x), flush) * 1e-3))
    DEVICE_COPY["gbs"] = max(found)
    say(f"device copy over 256 MiB: {DEVICE_COPY['gbs']:.0f} GB/s")
    del x, y


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtype", choices=list(SIZES), default="f32")
    p.add_argument("--all-dtypes", action="store_true", help="f32, f16 and bf16")
    p.add_argument("--quick", action="store_true", help="a few shapes, one first-call run")
    p.add_argument("--sets", default="large,small",
                   help="comma-separated: large, small, wide, huge")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    p.add_argument("--backend", choices=["ptx", "nvrtc"], default="ptx")
    p.add_argument("--budget", type=float, default=420,
                   help="seconds for the bandwidth tables; later shapes are skipped past it")
    p.add_argument("--child", choices=["tilejit", "triton"], help=argparse.SUPPRESS)
    return p.parse_args(argv)


def shapes(quick, sets, dtype):
    out = []
    if "large" in sets:
        large_n = QUICK_LARGE_N if quick else LARGE_N
        out += [("large", -(-LARGE_BYTES // (4 * n)), n) for n in large_n]
    if "small" in sets:
        out += [("small", m, n) for m, n in (QUICK_SMALL if quick else SMALL)]
    if "wide" in sets:
        out += [("wide", -(-LARGE_BYTES // (SIZES[dtype] * n)), n) for n in WIDE_N]
    if "huge" in sets:
        out += [("huge", m, n) for m, n in HUGE]
    if "odd" in sets:
        out += [("odd", -(-LARGE_BYTES // (SIZES[dtype] * n)), n) for n in ODD_N]
    return out


def command_line(argv):
    shown = [a if not os.path.isabs(a) else os.path.relpath(a, ROOT)
             if a.startswith(ROOT + os.sep) else "DIR" for a in argv]
    return " ".join(["python3", "bench/compare.py"] + shown)


def cuda_alive():
    """False once the context has a sticky error (an illegal address, say)."""
    try:
        torch.cuda.synchronize()
        torch.empty(1, device="cuda").fill_(1.0).item()
        return True
    except Exception:
        return False


def run_bandwidth(args, dtypes, flush, failures):
    """Rows of every shape; stops early when the budget is spent or the CUDA
    context died (the reason goes to failures)."""
    rows, start = [], time.perf_counter()
    print_cells("dtype", "set", ROW_HEAD)
    for dtype in dtypes:
        for kind, m, n in shapes(args.quick, args.sets.split(","), dtype):
            if time.perf_counter() - start > args.budget:
                say(f"budget of {args.budget:.0f} s spent: skipping {dtype} {m}x{n}")
                continue
            try:
                row = measure_shape(kind, m, n, dtype, args.backend, flush)
            except Exception as e:
                failures.append(f"{dtype} {m}x{n}: {type(e).__name__}: {str(e)[:300]}")
                say(f"{dtype} {m}x{n} failed: {failures[-1]}")
                if not cuda_alive():
                    failures.append("the CUDA context is dead: the rest of this process is skipped")
                    say(failures[-1])
                    return rows
                continue
            rows.append(row)
            print_row(row)
            for note in row["notes"]:
                say(f"    {note}")
    say(f"bandwidth tables: {time.perf_counter() - start:.0f} s")
    return rows


def main(argv):
    global tilejit
    args = parse_args(argv)
    if args.child:
        child_first_call(args.child)
        return 0
    if torch is None or not torch.cuda.is_available():
        say("compare.py needs torch with a CUDA device")
        return 77
    try:
        import tilejit as binding
    except ImportError as e:
        say(str(e))
        return 1
    tilejit = binding
    if triton is None:
        say("Triton is not importable: its columns are left out")
    started = time.perf_counter()
    dtypes = list(SIZES) if args.all_dtypes else [args.dtype]
    flush = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")
    info = device_summary()
    say(f"{info['name']}: torch {torch.__version__}, Triton "
        f"{triton.__version__ if triton else 'absent'}, tilejit from {tilejit.library_path}")
    failures = []
    measure_device_copy(flush)
    rows = run_bandwidth(args, dtypes, flush, failures)
    host = {}
    if not failures or cuda_alive():
        say("host time per launch ...")
        try:
            host = host_overheads(args.backend)
        except Exception as e:
            failures.append(f"host time per launch: {type(e).__name__}: {str(e)[:300]}")
        for name, value in host.items():
            say(f"  {name:34} {value if isinstance(value, str) else f'{value:.2f} us'}")
    runs = 1 if args.quick else 3
    first = {}
    for which in ["tilejit"] + (["triton"] if triton else []):
        say(f"first call in a fresh process: {which} ({runs} run{'s' * (runs > 1)}) ...")
        first[which] = first_call(which, runs)
        say(f"  {first[which]}")
    write_outputs(args, argv, rows, info, dtypes, first, host, failures)
    say(f"total {time.perf_counter() - started:.0f} s")
    return 0 if rows and not failures and all(r["tilejit_ok"] for r in rows) else 1


def device_summary():
    """tilejit's device info; torch's when tilejit cannot make a context
    (every tilejit figure will then show ERR, with the reason in Notes)."""
    try:
        return tilejit.device_info()
    except tilejit.Error as e:
        say(f"tilejit has no context: {e}")
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return {"name": props.name, "arch": 10 * props.major + props.minor,
                "sm_count": props.multi_processor_count, "driver_version": 0}


def write_outputs(args, argv, rows, info, dtypes, first, host, failures):
    os.makedirs(args.out, exist_ok=True)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    gpu = re.sub(r"[^A-Za-z0-9]+", "-", info["name"].replace("NVIDIA ", "")).strip("-")
    stem = os.path.join(args.out, f"{date}-{gpu}")
    copies = [r["copy_gbs"] for r in rows if not math.isnan(r["copy_gbs"])]
    peak = max(copies) if copies else math.nan
    meta = {"device": info, "date": date, "revision": git_revision(), "backend": args.backend,
            "triton": triton.__version__ if triton else "absent", "dtypes": dtypes,
            "command": command_line(argv), "peak_copy": peak}
    images = {}
    for dtype in dtypes:
        large = [r for r in rows if r["dtype"] == dtype and r["set"] in ("large", "wide")]
        large.sort(key=lambda r: r["N"])
        if large:
            suffix = "" if dtype == dtypes[0] else f"-{dtype}"
            images[dtype] = plot(stem + suffix, large, f"softmax {dtype}, {info['name']}")
    write_csv(stem + ".csv", rows)
    write_report(stem + ".md", rows, meta, images, first, host, failures)
    for dtype in dtypes:
        for kind in ("large", "small", "wide", "huge"):
            subset = [r for r in rows if r["dtype"] == dtype and r["set"] == kind]
            if subset:
                say(f"\n{dtype}, {kind} set:")
                say("\n".join(markdown_table(subset)))
    say("\n".join([""] + target_lines(rows, first, host)))
    written = [stem + ".md", stem + ".csv"] + [os.path.join(args.out, i) for i in images.values()]
    for path in written:
        say(f"wrote {os.path.relpath(path, ROOT) if path.startswith(ROOT) else path}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
