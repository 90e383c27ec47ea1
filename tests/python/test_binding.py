"""Tests of the Python binding (python/tilejit.py), under pytest or not:

    python3 tests/python/run_tests.py                 # every module; see there
    python3 -m pytest tests/python -m "not gpu"       # the host checks only
    python3 tests/python/test_binding.py              # this module alone, no pytest

Host checks run anywhere the library loads: dump_ptx (and ptxas on its
output when a ptxas is found), the ctypes structures against tilejit.h, and
the no-driver path (a subprocess with TILEJIT_LIBCUDA=/nonexistent must get
tilejit.Error NO_DRIVER). GPU checks need torch with CUDA: f32/f16/bf16
softmax against a float64 CPU reference with the project's testing
tolerances, NaN-poisoned outputs, strided rows, in place, streams,
__cuda_array_interface__ objects, concurrent first use, the per-layout
argument cache, and the errors each bad input must raise; log_softmax
against torch.log_softmax; softmax_backward against torch's softmax
backward; masked_softmax against torch's masked softmax (attention's, with
its fully masked rows 0); and a user's program through tilejit.Function.
masked_softmax's argument checks run on the host.

Run as a script, it exits 0 when all passed, 1 when a check failed, 77 when
the host checks passed and the GPU checks were skipped (no torch or GPU).
"""

import ctypes
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading

import harness
from harness import ROOT, gpu, skip

import tilejit  # noqa: E402  (harness puts this checkout's python/ first)

torch = harness.torch
TOLERANCES = {"f32": (1.3e-6, 1e-5), "f16": (1e-3, 1e-5), "bf16": (1.6e-2, 1e-5)}
WIDTHS = [1, 2, 3, 7, 31, 32, 33, 100, 127, 128, 500, 513, 777, 1000, 1023, 1024, 1025, 2047,
          4096, 4099, 8192, 16384, 32768, 32769, 65536, 100003]


def expect(condition, what):
    if not condition:
        raise AssertionError(what)


def expect_raises(kinds, fn, *fragments):
    """fn() must raise one of kinds, with every fragment in its message."""
    try:
        fn()
    except kinds as e:
        text = str(e)
        for fragment in fragments:
            expect(fragment.lower() in text.lower(), f"message {text!r} lacks {fragment!r}")
        return e
    raise AssertionError(f"no {kinds} raised")


# ------------------------------------------------------------ host checks


def find_ptxas():
    found = shutil.which("ptxas")
    if found:
        return found
    try:
        import triton  # its wheel ships a ptxas
        candidate = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin",
                                 "ptxas")
        return candidate if os.access(candidate, os.X_OK) else None
    except Exception:
        return None


def test_dump_ptx():
    for n in (1, 32, 1000, 4096, 32768, 32769, 262144):
        for dtype in ("f32", "f16", "bf16"):
            ptx = tilejit.dump_ptx(n, dtype)
            expect(".entry" in ptx and ".target sm_90" in ptx, f"n={n} {dtype}: no entry/target")
            expect(ptx == tilejit.dump_ptx(n, dtype), f"n={n} {dtype}: output not deterministic")
    expect(".target sm_80" in tilejit.dump_ptx(1000, arch=80), "arch=80 not honoured")
    expect("__global__" in tilejit.dump_ptx(1000, emit="cuda"), "emit='cuda' gave no kernel")
    e = expect_raises(tilejit.Error, lambda: tilejit.dump_ptx(1000, num_warps=3), "num_warps")
    expect(e.status == tilejit.Status.INVALID_ARGUMENT, f"status {e.status!r}")
    # Past a C int: refused, not cut to its low 32 bits (2**32 + 1 was 1).
    expect_raises(ValueError, lambda: tilejit.dump_ptx(1000, num_warps=2**32 + 1), "num_warps")
    expect_raises(ValueError, lambda: tilejit.dump_ptx(1000, arch=2**32 + 90), "arch")
    expect_raises(ValueError, lambda: tilejit.dump_ptx(1000, align=2**32 + 16), "align")
    expect_raises(TypeError, lambda: tilejit.dump_ptx(1000, num_warps=4.0), "num_warps")
    expect_raises(TypeError, lambda: tilejit.dump_ptx(1000, "f64"))
    expect_raises(ValueError, lambda: tilejit.dump_ptx(1000, backend="llvm"))
    expect(tilejit.version() == "0.1.0", f"version {tilejit.version()!r}")


def test_ptxas_accepts_dump():
    ptxas = find_ptxas()
    if not ptxas:
        skip("no ptxas on PATH or in a triton wheel")
    with tempfile.TemporaryDirectory() as tmp:
        for n, dtype in ((32, "f32"), (1000, "f16"), (4096, "bf16"), (100003, "f32")):
            path = os.path.join(tmp, "k.ptx")
            with open(path, "w") as f:
                f.write(tilejit.dump_ptx(n, dtype))
            done = subprocess.run([ptxas, "-arch=sm_90", path, "-o", os.path.join(tmp, "k.o")],
                                  capture_output=True, text=True)
            expect(done.returncode == 0, f"ptxas rejected n={n} {dtype}: {done.stderr[-2000:]}")
    print(f"ptxas: {ptxas}")


def test_nvrtc_dump():
    try:
        ptx = tilejit.dump_ptx(1000, "bf16", backend="nvrtc")
    except tilejit.Error as e:
        if e.status == tilejit.Status.NO_NVRTC:
            skip(f"no libnvrtc: {e.message}")
        raise
    expect(".entry" in ptx, "NVRTC PTX has no entry")


MIRRORED_STRUCTS = {
    "tj_context_options": "_ContextOptions", "tj_softmax_options": "_SoftmaxOptions",
    "tj_device_info": "_DeviceInfo", "tj_cache_stats": "_CacheStats",
    "tj_spec_options": "_SpecOptions", "tj_codegen_options": "_CodegenOptions",
    "tj_binding": "_Binding", "tj_function_options": "_FunctionOptions", "tj_arg": "_Arg",
    "tj_softmax_mask": "_SoftmaxMask",
}


def mirrored_constants():
    """C expression -> the value the binding uses for it."""
    constants = {"TJ_DEVICE_CURRENT": tilejit.DEVICE_CURRENT,
                 "TJ_STATUS_COUNT": len(tilejit.Status)}
    for status in tilejit.Status:
        constants["TJ_OK" if status == 0 else f"TJ_ERR_{status.name}"] = int(status)
    constants.update({"TJ_ARG_PTR": tilejit._ARG_PTR, "TJ_ARG_INT": tilejit._ARG_INT,
                      "TJ_ARG_FLOAT": tilejit._ARG_FLOAT})
    for table, prefix in ((tilejit._BACKENDS, "TJ_BACKEND_"), (tilejit._TEMPLATES, "TJ_SOFTMAX_"),
                          ({"f32": 0, "f16": 1, "bf16": 2}, "TJ_DTYPE_")):
        for name, value in table.items():
            constants[prefix + name.upper()] = value
    return constants


def test_struct_layouts():
    """The ctypes mirrors match tilejit.h: every size, field offset and
    constant, printed by a C program compiled against the header."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        skip("no C compiler")
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "tilejit.h"', "int main(void) {"]
    expected = []
    for c_name, py_name in MIRRORED_STRUCTS.items():
        cls = getattr(tilejit, py_name)
        lines.append(f'printf("%zu\\n", sizeof({c_name}));')
        expected.append((f"sizeof({c_name})", ctypes.sizeof(cls)))
        for field, _ in cls._fields_:
            lines.append(f'printf("%zu\\n", offsetof({c_name}, {field}));')
            expected.append((f"offsetof({c_name}, {field})", getattr(cls, field).offset))
    for expression, value in mirrored_constants().items():
        lines.append(f'printf("%d\\n", (int)({expression}));')
        expected.append((expression, value))
    lines.append(f'printf("%s\\n", TJ_VERSION_STRING);')
    expected.append(("TJ_VERSION_STRING", tilejit.version()))
    lines.append("return 0; }")
    with tempfile.TemporaryDirectory() as tmp:
        source, program = os.path.join(tmp, "layout.c"), os.path.join(tmp, "layout")
        with open(source, "w") as f:
            f.write("\n".join(lines) + "\n")
        done = subprocess.run([cc, "-I", os.path.join(ROOT, "include"), source, "-o", program],
                              capture_output=True, text=True)
        expect(done.returncode == 0, f"compiling the layout probe failed: {done.stderr[-2000:]}")
        printed = subprocess.run([program], capture_output=True, text=True).stdout.split()
    expect(len(printed) == len(expected), f"probe printed {len(printed)} of {len(expected)}")
    wrong = [f"{what}: C {c}, binding {py}" for (what, py), c in zip(expected, printed)
             if str(py) != c]
    expect(not wrong, "the binding disagrees with tilejit.h: " + "; ".join(wrong))


NO_DRIVER_CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import tilejit
assert ".entry" in tilejit.dump_ptx(1000)  # PTX generation needs no driver
calls = [tilejit.device_info]
try:
    import torch
    if torch.cuda.is_available():
        x = torch.randn(4, 100, device="cuda")
        calls.append(lambda: tilejit.softmax(x))
except ImportError:
    pass


class Interface:  # a valid f32 array at a made-up address: refused for want of a driver
    __cuda_array_interface__ = {"shape": (4, 100), "typestr": "<f4", "version": 3,
                                "data": (0x7F0000000000, False)}


calls.append(lambda: tilejit.masked_softmax(Interface(), scale=0.125, causal=True))
for call in calls:
    try:
        call()
        print("NO ERROR")
    except tilejit.Error as e:
        print(e.status.name, "|", e.message)
"""


def test_no_driver():
    env = dict(os.environ, TILEJIT_LIBCUDA="/nonexistent/libcuda.so.1")
    python_dir = os.path.dirname(os.path.abspath(tilejit.__file__))
    done = subprocess.run([sys.executable, "-c", NO_DRIVER_CHILD, python_dir],
                          capture_output=True, text=True, env=env, timeout=300)
    expect(done.returncode == 0, f"child failed: {done.stderr[-2000:]}")
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    expect(lines, "child printed nothing")
    for line in lines:
        expect(line.startswith("NO_DRIVER |"), f"expected NO_DRIVER, got {line!r}")
        expect("no cuda driver" in line.lower() and "/nonexistent" in line, f"message {line!r}")


class FakeArray:
    """An object with __cuda_array_interface__ at a made-up address, for
    checks that refuse it before anything reaches C."""

    def __init__(self, shape=(4, 100), typestr="<f4", readonly=False):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "version": 3,
                                         "data": (0x7F0000000000, readonly)}


def test_masked_softmax_refusals():
    """masked_softmax refuses a bad mask before it looks at x, and a bad x
    before it makes a context: no GPU needed. Each message names the
    function and the argument."""
    x = FakeArray()
    cases = [
        (ValueError, dict(scale=0.0), "scale must be positive and finite"),
        (ValueError, dict(scale=-0.125), "not -0.125"),
        (ValueError, dict(scale=float("inf")), "not inf"),
        (ValueError, dict(scale=float("nan")), "not nan"),
        (ValueError, dict(scale=1e39), "as a float32"),  # past FLT_MAX
        (ValueError, dict(scale=1e-50), "as a float32"),  # 0 as a float32
        (ValueError, dict(scale=10**400), "scale must be positive"),
        (TypeError, dict(scale="0.5"), "scale must be a float, not str"),
        (TypeError, dict(scale=True), "not bool"),
        (TypeError, dict(causal=1), "causal must be True or False"),
        (TypeError, dict(causal=None), "causal must be True or False"),
        (ValueError, dict(offset=3), "offset=3 applies to causal=True only"),
        (ValueError, dict(rows=16), "rows=16 applies to causal=True only"),
        (ValueError, dict(causal=True, rows=-1), "rows must be from 0 to 2147483647"),
        (ValueError, dict(causal=True, rows=2**31), "not 2147483648"),
        (ValueError, dict(causal=True, offset=2**63), "offset must be from"),
        (TypeError, dict(causal=True, offset=1.0), "offset must be an int, not float"),
        (TypeError, dict(causal=True, rows=True), "rows must be an int, not bool"),
    ]
    for kind, kwargs, fragment in cases:
        e = expect_raises(kind, lambda: tilejit.masked_softmax(x, **kwargs), fragment)
        expect(str(e).startswith("tilejit.masked_softmax: "), f"message {str(e)!r}")
    for bad, fragment in ((FakeArray(typestr="<f8"), "x has typestr '<f8'"),
                          (FakeArray((2, 2, 100)), "x must be 1-D or 2-D, not 3-D"),
                          ([1.0, 2.0], "neither a torch tensor")):
        expect_raises((TypeError, ValueError),
                      lambda: tilejit.masked_softmax(bad, scale=0.5, causal=True, offset=-2,
                                                     rows=4), "tilejit.masked_softmax", fragment)
    # The mask as C gets it: a float32 scale, causal as 0/1, rows, offset.
    mask = tilejit._mask(0.1, True, -(2**40), 7)._obj
    expect((mask.scale, mask.causal, mask.rows, mask.offset) ==
           (ctypes.c_float(0.1).value, 1, 7, -(2**40)), f"mask {mask.scale} {mask.causal} "
           f"{mask.rows} {mask.offset}")
    mask = tilejit._mask(3, False, 0, 0)._obj
    expect((mask.scale, mask.causal, mask.rows, mask.offset) == (3.0, 0, 0, 0), "default mask")


# -------------------------------------------------------------- GPU helpers


def dtype_of(name):
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[name]


def fresh(m, n, name, device="cuda"):
    """Random rows scaled by 3 around a per-row offset (0, +100 or a large
    negative one), so that the max subtraction matters."""
    big = -1e4 if name == "f16" else -1e7
    offsets = torch.tensor([0.0, 100.0, big])[torch.randint(0, 3, (m,))]
    x = torch.randn(m, n) * 3 + offsets[:, None]
    return x.to(dtype_of(name)).to(device)


def poisoned_like(x):
    return torch.full(x.shape, float("nan"), dtype=x.dtype, device=x.device)


def reference(x):
    return torch.softmax(x.detach().cpu().double(), dim=-1)


def expect_close(out, ref, name, what):
    """|out - ref| <= atol + rtol |ref| everywhere; NaN (unwritten) fails."""
    rtol, atol = TOLERANCES[name]
    got = out.detach().cpu().double().reshape(ref.shape)
    error = (got - ref).abs()
    bad = ~(error <= atol + rtol * ref.abs())
    if bool(bad.any()):
        count = int(bad.sum())
        nans = int(torch.isnan(got).sum())
        index = tuple(int(i) for i in bad.nonzero()[0])
        raise AssertionError(f"{what}: {count} elements out of tolerance ({nans} NaN); first at "
                             f"{index}: got {float(got[index])}, want {float(ref[index])}")


def interface_of(t, stream=None):
    """A __cuda_array_interface__ v3 dict for tensor t, written by hand
    (strides always given, bfloat16 named in descr)."""
    typestr = {torch.float32: "<f4", torch.float16: "<f2", torch.bfloat16: "<V2",
               torch.float64: "<f8"}[t.dtype]
    descr = [("bfloat16" if t.dtype == torch.bfloat16 else "", typestr)]
    size = t.element_size()
    return {"shape": tuple(t.shape), "strides": tuple(s * size for s in t.stride()),
            "typestr": typestr, "descr": descr, "data": (t.data_ptr(), False), "version": 3,
            "stream": stream}


class Wrapped:
    """A non-torch object exposing a tensor through __cuda_array_interface__."""

    def __init__(self, t, stream=None, use_torch_interface=False):
        self.tensor = t
        self.__cuda_array_interface__ = (t.__cuda_array_interface__ if use_torch_interface
                                         else interface_of(t, stream))


# ---------------------------------------------------------------- GPU checks


@gpu
def test_concurrent_first_use():
    """Threads racing on the first call: one context, one compile, all right."""
    n, count = 777, 8
    xs = [fresh(33, n, "f32") for _ in range(count)]
    outs = [poisoned_like(x) for x in xs]
    torch.cuda.synchronize()
    barrier = threading.Barrier(count)
    errors = []

    def worker(i):
        try:
            barrier.wait()
            tilejit.softmax(xs[i], out=outs[i])
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    expect(not errors, f"threads raised: {errors}")
    for x, out in zip(xs, outs):
        expect_close(out, reference(x), "f32", "threaded call")
    device = torch.cuda.current_device()
    contexts = {id(c) for key, c in tilejit._contexts.items() if key in (device, -1)}
    expect(len(contexts) == 1, f"{len(contexts)} contexts for one device")
    stats = tilejit.cache_stats()
    expect(stats["misses"] == 1, f"{stats['misses']} compiles for one key: {stats}")


@gpu
def test_dtypes_and_widths():
    checked = 0
    for name in ("f32", "f16", "bf16"):
        for n in WIDTHS:
            m = 67 if n <= 4096 else 3
            x = fresh(m, n, name)
            ref = reference(x)
            out = poisoned_like(x)
            expect(tilejit.softmax(x, out=out) is out, "softmax did not return out")
            expect_close(out, ref, name, f"{name} {m}x{n} out=")
            expect_close(tilejit.softmax(x), ref, name, f"{name} {m}x{n} allocated")
            checked += 1
    print(f"{checked} shapes x 2")


@gpu
def test_log_softmax():
    """tilejit.log_softmax against torch.log_softmax in float64: every dtype,
    widths to 100003, out poisoned, strided, in place, and the extreme rows
    (all -inf, +inf, NaN: NaN; -inf among finite values: -inf)."""
    checked = 0
    for name in ("f32", "f16", "bf16"):
        for n in WIDTHS[::3] + [WIDTHS[-1]]:
            m = 67 if n <= 4096 else 3
            x = fresh(m, n, name)
            ref = torch.log_softmax(x.detach().cpu().double(), dim=-1)
            out = poisoned_like(x)
            expect(tilejit.log_softmax(x, out=out) is out, "log_softmax did not return out")
            expect_close(out, ref, name, f"{name} {m}x{n} log_softmax")
            wide = poisoned_like(torch.empty(m, n + 5, dtype=x.dtype, device="cuda"))
            wide[:, :n] = x
            tilejit.log_softmax(wide[:, :n], out=wide[:, :n])  # strided, in place
            expect_close(wide[:, :n], ref, name, f"{name} {m}x{n} in place, strided")
            expect(bool(torch.isnan(wide[:, n:]).all()), f"{name} {m}x{n}: gap written")
            checked += 1
        x = fresh(4, 100, name)
        x[0] = float("-inf")
        x[1, 7] = float("inf")
        x[2, 9] = float("nan")
        x[3, ::3] = float("-inf")
        out = tilejit.log_softmax(x).double().cpu()
        expect(bool(torch.isnan(out[:3]).all()), f"{name}: extreme rows are not all NaN")
        expect(bool((out[3, ::3] == float("-inf")).all()), f"{name}: -inf does not give -inf")
        ref = torch.log_softmax(x.detach().cpu().double(), dim=-1)[3]
        finite = torch.isfinite(ref)
        expect_close(out[3][finite], ref[finite], name, f"{name} -inf among finite")
    print(f"{checked} shapes x 2")


def backward_inputs(m, n, name):
    """y = softmax of fresh rows (as the dtype holds it), dy = 3 * normal."""
    y = torch.softmax(fresh(m, n, "f32").float(), dim=-1).to(dtype_of(name))
    dy = (torch.randn(m, n, device="cuda") * 3).to(dtype_of(name))
    return dy, y


def backward_reference(dy, y):
    """torch's softmax backward in float64, from the same stored inputs."""
    dy, y = dy.detach().cpu().double(), y.detach().cpu().double()
    return torch._softmax_backward_data(dy, y, -1, torch.float64)


@gpu
def test_softmax_backward():
    """tilejit.softmax_backward against torch's softmax backward in float64:
    every dtype, widths to 2^20, poisoned outputs, three different row
    strides, in place (out=dy and out=y), an interface object, the extreme
    rows, and the errors of mismatched inputs."""
    checked = 0
    for name in ("f32", "f16", "bf16"):
        for n in WIDTHS[::2] + [WIDTHS[-1], 1 << 20]:
            m = 67 if n <= 4096 else 3 if n < 1 << 20 else 2
            dy, y = backward_inputs(m, n, name)
            ref = backward_reference(dy, y)
            out = poisoned_like(y)
            expect(tilejit.softmax_backward(dy, y, out=out) is out, "did not return out")
            expect_close(out, ref, name, f"{name} {m}x{n} softmax_backward")
            wide = [poisoned_like(torch.empty(m, n + pad, dtype=y.dtype, device="cuda"))
                    for pad in (3, 8, 1)]
            wide[1][:, :n], wide[2][:, :n] = y, dy
            tilejit.softmax_backward(wide[2][:, :n], wide[1][:, :n], out=wide[0][:, :n])
            expect_close(wide[0][:, :n], ref, name, f"{name} {m}x{n} strided")
            for w, pad in zip(wide, (3, 8, 1)):
                expect(bool(torch.isnan(w[:, n:]).all()), f"{name} {m}x{n}: gap written")
            tilejit.softmax_backward(wide[2][:, :n], wide[1][:, :n], out=wide[2][:, :n])
            expect_close(wide[2][:, :n], ref, name, f"{name} {m}x{n} in place (out=dy)")
            checked += 1
        dy, y = backward_inputs(6, 100, name)  # row 5 stays finite
        y[0, 3] = float("nan")
        dy[1, 7] = float("nan")
        dy[2, 9] = float("inf")
        y[3, 0], dy[3, 0] = 0.0, float("-inf")
        y[4] = float("nan")
        ref = backward_reference(dy, y)
        got = tilejit.softmax_backward(dy, y).double().cpu()
        expect(bool((torch.isnan(got) == torch.isnan(ref)).all()),
               f"{name}: NaN where torch has none, or none where it has")
        expect(bool((got[torch.isinf(ref)] == ref[torch.isinf(ref)]).all()) and
               bool((torch.isinf(got) == torch.isinf(ref)).all()), f"{name}: infs differ")
        finite = torch.isfinite(ref)
        expect(bool(finite.any()), f"{name}: the extreme rows left nothing finite to compare")
        expect_close(got[finite], ref[finite], name, f"{name} extreme rows, finite elements")
        y_in = y.clone()
        tilejit.softmax_backward(dy, y_in, out=y_in)  # in place, out=y
        expect(bool((torch.isnan(y_in.double().cpu()) == torch.isnan(ref)).all()),
               f"{name}: in place (out=y), extreme rows")
    dy, y = backward_inputs(4, 100, "f32")
    ref = backward_reference(dy, y)
    array = tilejit.softmax_backward(Wrapped(dy), Wrapped(y))
    got = torch.frombuffer(bytearray(array.copy_to_host()), dtype=torch.float32).reshape(4, 100)
    expect_close(got, ref, "f32", "interface objects")
    expect_raises(ValueError, lambda: tilejit.softmax_backward(dy[:, :50], y), "dy")
    expect_raises(ValueError, lambda: tilejit.softmax_backward(dy.half(), y), "dy")
    expect_raises(ValueError, lambda: tilejit.softmax_backward(dy, y, out=dy.cpu()), "out")
    expect_raises(TypeError, lambda: tilejit.softmax_backward(dy, y, out=[0]), "out")
    buffer = torch.empty(401 * 100, device="cuda")
    y_in, out = buffer[:40000].view(400, 100)[:4], buffer[1:40001].view(400, 100)[:4]
    y_in.copy_(y)
    expect_raises(tilejit.Error, lambda: tilejit.softmax_backward(dy, y_in, out=out),
                  "dx and y overlap")
    print(f"{checked} shapes x 3")


def masked_reference(x, scale, causal, offset, rows):
    """torch.softmax((scale * x).masked_fill(~keep, -inf), -1) in float64,
    with the rows that keep nothing, or only -inf, set to 0 (torch's safe
    softmax in scaled_dot_product_attention); the float32 scale C gets.
    Returns (the reference, keep)."""
    x = x.detach().cpu().double()
    m, n = x.shape
    keep = torch.ones(m, n, dtype=torch.bool)
    if causal:
        query = torch.arange(m) % (rows or m)
        keep = torch.arange(n)[None, :] <= query[:, None] + offset
    scores = (ctypes.c_float(scale).value * x).masked_fill(~keep, float("-inf"))
    ref = torch.softmax(scores, dim=-1)
    ref[(scores == float("-inf")).all(dim=-1)] = 0.0
    return ref, keep


def masked_cases(m, n, rows):
    """(scale, causal, offset, rows) for rows of n: no mask, torch.tril's
    mask (offset 0), the bottom-right one (n - rows), one at a random
    offset, and rows 0 (every row its own query) at offset 0."""
    offset = int(torch.randint(-rows, n + 1, ()).item())
    return [(0.125, False, 0, 0), (0.0883883, True, 0, rows), (1.0, True, n - rows, rows),
            (0.5, True, offset, rows), (0.25, True, 0, 0)]


@gpu
def test_masked_softmax():
    """tilejit.masked_softmax against torch's masked softmax in float64:
    every dtype, widths 1 to 2^20 sampled, each mask of masked_cases with M
    = 4 * rows (four attention matrices), poisoned outputs, dropped columns
    exactly 0, strided rows in and out, in place, an interface object."""
    checked = 0
    for name in ("f32", "f16", "bf16"):
        for n in WIDTHS[1::3] + [WIDTHS[-1], (1 << 20) - 1, 1 << 20]:
            rows = 16 if n <= 4096 else 2 if n < 1 << 20 else 1
            m = 4 * rows
            x = fresh(m, n, name)
            for scale, causal, offset, r in masked_cases(m, n, rows):
                what = f"{name} {m}x{n} scale={scale} causal={causal} offset={offset} rows={r}"
                ref, keep = masked_reference(x, scale, causal, offset, r)
                out = poisoned_like(x)
                got = tilejit.masked_softmax(x, out=out, scale=scale, causal=causal, offset=offset,
                                             rows=r)
                expect(got is out, "masked_softmax did not return out")
                expect_close(out, ref, name, what)
                expect(bool((out.cpu()[~keep] == 0).all()), f"{what}: a dropped column is not 0")
                checked += 1
            scale, causal, offset, r = masked_cases(m, n, rows)[2]
            ref, _ = masked_reference(x, scale, causal, offset, r)
            expect_close(tilejit.masked_softmax(x, scale=scale, causal=causal, offset=offset,
                                                rows=r), ref, name, f"{name} {m}x{n} allocated")
            if n > 100003:
                continue
            wide = [poisoned_like(torch.empty(m, n + pad, dtype=x.dtype, device="cuda"))
                    for pad in (3, 8)]
            wide[1][:, :n] = x
            tilejit.masked_softmax(wide[1][:, :n], out=wide[0][:, :n], scale=scale,
                                   causal=causal, offset=offset, rows=r)
            expect_close(wide[0][:, :n], ref, name, f"{name} {m}x{n} strided")
            expect(bool(torch.isnan(wide[0][:, n:]).all()), f"{name} {m}x{n}: gap written")
            tilejit.masked_softmax(wide[1][:, :n], out=wide[1][:, :n], scale=scale,
                                   causal=causal, offset=offset, rows=r)
            expect_close(wide[1][:, :n], ref, name, f"{name} {m}x{n} in place, strided")
    x = fresh(8, 1000, "f32")
    ref, _ = masked_reference(x, 0.125, True, 0, 4)
    array = tilejit.masked_softmax(Wrapped(x), scale=0.125, causal=True, rows=4)
    got = torch.frombuffer(bytearray(array.copy_to_host()), dtype=torch.float32).reshape(8, 1000)
    expect_close(got, ref, "f32", "interface object -> DeviceArray")
    print(f"{checked} shapes and masks")


@gpu
def test_masked_softmax_extreme_rows():
    """Rows that keep nothing or only -inf are all 0; NaN or +inf among the
    kept scores make the row NaN; NaN and +inf among the dropped ones
    change nothing (they are not read); -inf among finite kept scores gives
    exactly 0 there. Then what the checks refuse on the GPU path."""
    for name in ("f32", "f16", "bf16"):
        x = fresh(8, 100, name)  # causal, offset 50, rows 8: row r keeps j <= r + 50
        x[0, :51] = float("-inf")
        x[1, 3] = float("nan")
        x[2, 7] = float("inf")
        x[3, 60] = float("nan")  # dropped
        x[4, ::3] = float("-inf")
        x[5, 56:] = float("inf")  # dropped
        x[6, 57:] = float("nan")  # dropped
        ref, keep = masked_reference(x, 0.125, True, 50, 8)
        got = tilejit.masked_softmax(x, scale=0.125, causal=True, offset=50).double().cpu()
        expect(bool((got[0] == 0).all()), f"{name}: a row of kept -inf is not all 0")
        expect(bool(torch.isnan(got[1:3]).all()), f"{name}: NaN or +inf kept: not all NaN")
        expect(bool((got[4, ::3] == 0).all()), f"{name}: -inf among finite scores is not 0")
        expect(bool((got[3:][~keep[3:]] == 0).all()), f"{name}: a dropped column is not 0")
        for r in range(3, 8):
            expect_close(got[r], ref[r], name, f"{name}: extreme row {r}")
        got = tilejit.masked_softmax(x, scale=0.125, causal=True, offset=-3, rows=4).cpu()
        for r in (0, 1, 2, 4, 5, 6):  # r % 4 + -3 < 0: nothing kept
            expect(bool((got[r] == 0).all()), f"{name}: row {r} keeps nothing but is not 0")
        finite = fresh(8, 100, name)
        ref, _ = masked_reference(finite, 0.125, True, -3, 4)
        expect_close(tilejit.masked_softmax(finite, scale=0.125, causal=True, offset=-3, rows=4),
                     ref, name, f"{name}: offset -3")
    x = fresh(4, 100, "f32")
    for call, kind, fragment in (
            (lambda: tilejit.masked_softmax(x.reshape(2, 2, 100)), ValueError, "3-D"),
            (lambda: tilejit.masked_softmax(x.double()), TypeError, "float64"),
            (lambda: tilejit.masked_softmax(x.cpu()), ValueError, "cpu"),
            (lambda: tilejit.masked_softmax(x, out=x[:, :50]), ValueError, "shape"),
            (lambda: tilejit.masked_softmax(x, out=x.half()), TypeError, "float16"),
            (lambda: tilejit.masked_softmax(x, stream="0"), TypeError, "stream")):
        expect_raises(kind, call, "tilejit.masked_softmax", fragment)
    wide = fresh(4, 101, "f32")
    e = expect_raises(tilejit.Error, lambda: tilejit.masked_softmax(wide[:, :100],
                                                                    out=wide[:, 1:]), "overlap")
    expect(e.status == tilejit.Status.INVALID_ARGUMENT, f"status {e.status!r}")


@gpu
def test_layout_cache():
    """Calls of one layout share the arguments prepared by the first: each
    must still use its own pointers, out and the current stream."""
    a, b = fresh(64, 1000, "f32"), fresh(64, 1000, "f32")
    ya, yb = tilejit.softmax(a), tilejit.softmax(b)
    expect(ya.data_ptr() != yb.data_ptr(), "two calls returned one buffer")
    expect_close(ya, reference(a), "f32", "first of a layout")
    expect_close(yb, reference(b), "f32", "second of a layout")
    out = poisoned_like(a)
    tilejit.softmax(b, out=out)
    expect_close(out, reference(b), "f32", "out= of the layout")
    tilejit.softmax(a, out=out)
    expect_close(out, reference(a), "f32", "out= again, other x")
    c = a.clone()
    tilejit.softmax(c, out=c)
    expect_close(c, reference(a), "f32", "in place after out of place")
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        d = fresh(64, 1000, "f32")
        for _ in range(20):
            d.mul_(1.0)
        d.add_(1.0)
        yd = tilejit.softmax(d)
    side.synchronize()
    expect_close(yd, reference(d), "f32", "a cached layout on a side stream")
    for x in (fresh(8, 1100, "f16")[:, :1000], fresh(1, 1100, "bf16")[:, :1000]):
        y = tilejit.softmax(x)
        expect(y.is_contiguous() and y.shape == x.shape, f"output strides {y.stride()}")
        name = "f16" if x.dtype == torch.float16 else "bf16"
        expect_close(y, reference(x), name, f"strided {tuple(x.shape)} allocated")


@gpu
def test_strided_rows():
    """x and out are column slices of wider, NaN-poisoned buffers: the rows
    are strided and offset, and nothing outside out may be written."""
    for name in ("f32", "f16", "bf16"):
        for n, pad in ((100, 28), (1000, 1), (4096, 8), (40000, 3)):
            wide = fresh(19, n + pad, name)
            before = wide.clone()
            x = wide[:, pad:]
            out_wide = torch.full((19, n + 2 * pad + 5), float("nan"), dtype=wide.dtype,
                                  device="cuda")
            out = out_wide[:, pad + 1:pad + 1 + n]
            tilejit.softmax(x, out=out)
            expect_close(out, reference(x), name, f"{name} strided n={n}")
            outside = torch.cat([out_wide[:, :pad + 1], out_wide[:, pad + 1 + n:]], dim=1)
            expect(bool(torch.isnan(outside).all()), f"{name} n={n}: wrote outside out")
            expect(torch.equal(wide, before), f"{name} n={n}: x was modified")


@gpu
def test_in_place_and_shapes():
    for name in ("f32", "f16", "bf16"):
        x = fresh(50, 1000, name)
        ref = reference(x)
        expect(tilejit.softmax(x, out=x) is x, "in place did not return x")
        expect_close(x, ref, name, f"{name} in place")
        wide = fresh(10, 600, name)
        x = wide[:, :500]
        ref = reference(x)
        tilejit.softmax(x, out=x)
        expect_close(x, ref, name, f"{name} strided in place")
    row = fresh(1, 3000, "f32")[0]
    expect_close(tilejit.softmax(row), reference(row), "f32", "1-D")
    for shape in ((0, 100), (5, 0), (0,)):
        empty = torch.empty(shape, device="cuda")
        expect(tuple(tilejit.softmax(empty).shape) == shape, f"empty {shape}")


@gpu
def test_streams():
    """The launch goes on torch's current stream: work queued just before on
    a side stream, with no synchronization, must be seen."""
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = fresh(256, 4096, "f32")
        for _ in range(20):  # keep the stream busy before x's final value
            x.mul_(1.0)
        x.add_(1.0)
        y = tilejit.softmax(x)
    side.synchronize()
    expect_close(y, reference(x), "f32", "side stream")
    explicit = torch.cuda.Stream()
    x = fresh(8, 1000, "f32")
    out = poisoned_like(x)
    torch.cuda.synchronize()  # torch's streams do not wait for the default stream
    tilejit.softmax(x, out=out, stream=explicit.cuda_stream)
    explicit.synchronize()
    expect_close(out, reference(x), "f32", "stream=")


@gpu
def test_interface_objects():
    for name in ("f32", "f16", "bf16"):
        wide = fresh(40, 1100, name)
        x = wide[:, 50:1050]
        ref = reference(x)
        out = poisoned_like(x)
        stream = torch.cuda.current_stream().cuda_stream or 1  # CAI: 1 is the legacy stream
        result = tilejit.softmax(Wrapped(x, stream), out=Wrapped(out))
        expect(isinstance(result, Wrapped), "out= was not returned")
        torch.cuda.synchronize()
        expect_close(out, ref, name, f"{name} interface out=")
        array = tilejit.softmax(Wrapped(x))
        expect(isinstance(array, tilejit.DeviceArray), f"got {type(array).__name__}")
        expect(array.shape == (40, 1000), f"DeviceArray shape {array.shape}")
        raw = bytearray(array.copy_to_host())
        got = torch.frombuffer(raw, dtype=dtype_of(name)).reshape(40, 1000)
        expect_close(got, ref, name, f"{name} interface -> DeviceArray")
    x = fresh(12, 345, "f32")
    result = tilejit.softmax(Wrapped(x, use_torch_interface=True))
    got = torch.frombuffer(bytearray(result.copy_to_host()), dtype=torch.float32)
    expect_close(got, reference(x), "f32", "torch's own interface -> DeviceArray")
    if importlib.util.find_spec("numpy") is None:  # torch reads an interface through numpy
        print("torch.as_tensor(DeviceArray) not checked: no numpy")
        return
    view = torch.as_tensor(result, device="cuda").clone()
    expect_close(view, reference(x), "f32", "DeviceArray -> torch.as_tensor")


@gpu
def test_nvrtc_backend():
    for name in ("f32", "bf16"):
        for n in (1000, 40000):
            x = fresh(9, n, name)
            try:
                y = tilejit.softmax(x, backend="nvrtc")
            except tilejit.Error as e:
                if e.status == tilejit.Status.NO_NVRTC:
                    skip(f"no libnvrtc: {e.message}")
                raise
            expect_close(y, reference(x), name, f"nvrtc {name} n={n}")


@gpu
def test_options():
    x = fresh(20, 1000, "f32")
    ref = reference(x)
    for warps in (1, 2, 4, 8, 16, 32):
        expect_close(tilejit.softmax(x, num_warps=warps), ref, "f32", f"num_warps={warps}")
    for template in ("single", "online"):
        expect_close(tilejit.softmax(x, template=template), ref, "f32", f"template={template}")


@gpu
def test_errors():
    x = fresh(4, 100, "f32")
    expect_raises(ValueError, lambda: tilejit.softmax(x.reshape(2, 2, 100)), "3-D")
    expect_raises((TypeError, ValueError), lambda: tilejit.softmax(x.cpu()), "cpu")
    expect_raises(TypeError, lambda: tilejit.softmax(x.double()), "float64")
    expect_raises(ValueError, lambda: tilejit.softmax(fresh(100, 8, "f32").t()), "contiguous")
    expect_raises(ValueError, lambda: tilejit.softmax(x, out=torch.empty(4, 101, device="cuda")))
    expect_raises(TypeError, lambda: tilejit.softmax(x, out=torch.empty_like(x).half()))
    expect_raises(TypeError, lambda: tilejit.softmax(x, out=[0.0] * 400))
    expect_raises(TypeError, lambda: tilejit.softmax([1.0, 2.0]))
    expect_raises(ValueError, lambda: tilejit.softmax(x, backend="llvm"))
    expect_raises(TypeError, lambda: tilejit.softmax(Wrapped(x.double())))
    wide = fresh(4, 101, "f32")
    e = expect_raises(tilejit.Error, lambda: tilejit.softmax(wide[:, :100], out=wide[:, 1:]),
                      "overlap")
    expect(e.status == tilejit.Status.INVALID_ARGUMENT, f"status {e.status!r}")
    expect_raises(tilejit.Error, lambda: tilejit.softmax(x[:1].expand(4, 100)), "stride")
    expect_raises(tilejit.Error, lambda: tilejit.softmax(x, num_warps=3), "num_warps")


LOG_SOFTMAX = """kernel log_softmax
%y : ptr<DTYPE> = param y
%x : ptr<DTYPE> = param x
%stride : i64 = param stride
%n : i32 = param n
%scale : f32 = param scale
%pid : i32 = program_id
%row : i64 = cast %pid
%off : i64 = mul %row, %stride
%xr : ptr<DTYPE> = ptr_add %x, %off
%yr : ptr<DTYPE> = ptr_add %y, %off
%i : tile<i32,BLOCK> = arange
%in : tile<pred,BLOCK> = lt %i, %n
%ninf : f32 = const -inf
%xt : tile<DTYPE,BLOCK> = load %xr, %i, %in, %ninf
%xf : tile<f32,BLOCK> = cast %xt
%v : tile<f32,BLOCK> = mul %xf, %scale
%m : f32 = reduce_max %v
%d : tile<f32,BLOCK> = sub %v, %m
%e : tile<f32,BLOCK> = exp %d
%s : f32 = reduce_sum %e
%l : f32 = log %s
%o : tile<f32,BLOCK> = sub %d, %l
%ot : tile<DTYPE,BLOCK> = cast %o
store %yr, %i, %ot, %in
"""


def test_function_refusals():
    """What Function refuses before anything reaches the GPU."""
    expect_raises(ValueError, lambda: tilejit.Function(LOG_SOFTMAX), "size_param")
    expect_raises(TypeError, lambda: tilejit.Function(42, size_param="n"), "text must be")
    expect_raises(ValueError, lambda: tilejit.Function(LOG_SOFTMAX, size_param="n",
                                                        backend="llvm"), "backend")


@gpu
def test_function():
    """A user's scaled log-softmax in the text form, launched f[grid](...) on
    torch tensors of several widths, strides and offsets in every dtype,
    against torch.log_softmax; out-of-row elements stay poisoned; each
    (ALIGN, BLOCK) variant compiles once."""
    for name in ("f32", "f16", "bf16"):
        f = tilejit.Function(LOG_SOFTMAX, name, size_param="n")
        seen = set()
        for n, pad, offset in ((1, 0, 0), (31, 0, 0), (31, 1, 1), (1000, 8, 0), (1000, 3, 2),
                               (4096, 0, 0), (33000, 0, 0)):
            m, stride = 37, n + pad
            x = fresh(m, n, name)
            xbuf = poisoned_like(torch.empty(m * stride + offset + 8, dtype=x.dtype,
                                             device="cuda"))
            ybuf = poisoned_like(xbuf)
            xv = xbuf[offset:offset + m * stride].view(m, stride)[:, :n]
            xv.copy_(x)
            yv = ybuf[offset:offset + m * stride].view(m, stride)[:, :n]
            f[m](yv, xv, stride, n, 0.5)
            want = torch.log_softmax(x.double() * 0.5, dim=1)
            rtol, atol = TOLERANCES[name]
            torch.testing.assert_close(yv.double(), want, rtol=max(rtol, 1e-5), atol=atol * 10,
                                       msg=lambda text: f"{name} n={n}: {text}")
            rows = torch.zeros(ybuf.shape, dtype=torch.bool, device="cuda")
            rows[offset:offset + m * stride].view(m, stride)[:, :n] = True
            expect(bool(torch.isnan(ybuf[~rows]).all()),
                   f"{name} n={n}: written outside the rows (gaps, head or tail)")
            size = x.element_size()
            align = 16
            for v in (xv.data_ptr(), yv.data_ptr(), stride * size):
                while v % align:
                    align //= 2
            seen.add((align, 1 << max(n - 1, 0).bit_length()))
        expect(f.variants == len(seen), f"{name}: {f.variants} variants, want {len(seen)}")
    bad = tilejit.Function(LOG_SOFTMAX, "f32", size_param="n")
    x = fresh(4, 32, "f32")
    expect_raises(tilejit.Error, lambda: bad[4](x, x, 32, 32), "takes 5 arguments, got 4")
    expect_raises(TypeError, lambda: bad[4](x, x, 32, True, 1.0), "bool")
    expect_raises(ValueError, lambda: bad[4](x.cpu(), x, 32, 32, 1.0), "the function runs on")


@gpu
def test_info():
    info = tilejit.device_info()
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    expect(info["name"] == props.name, f"name {info['name']!r} != {props.name!r}")
    expect(info["arch"] == 10 * props.major + props.minor, f"arch {info['arch']}")
    expect(info["sm_count"] == props.multi_processor_count, f"sm_count {info['sm_count']}")
    stats = tilejit.cache_stats()
    expect(stats["entries"] > 0 and stats["hits"] > 0, f"cache stats {stats}")
    print(f"{info['name']}, sm_{info['arch']}, {stats['entries']} kernels, "
          f"codegen {stats['codegen_us']:.0f} us, JIT {stats['jit_ms']:.0f} ms in all")


def main():
    """This module alone, without pytest: exit 0, 1, or 77 (GPU checks skipped)."""
    print(f"tilejit {tilejit.version()} from {tilejit.library_path}", flush=True)
    if harness.NO_GPU is None:
        seed = int.from_bytes(os.urandom(4), "little")
        torch.manual_seed(seed)
        print(f"GPU checks on {torch.cuda.get_device_name()} (torch {torch.__version__}, "
              f"seed {seed})", flush=True)
    passed, failed, skipped = harness.run_modules([__name__])
    print(f"{passed} passed, {failed} failed, {skipped} skipped", flush=True)
    if failed:
        return 1
    return 77 if harness.NO_GPU else 0


if __name__ == "__main__":
    sys.exit(main())
