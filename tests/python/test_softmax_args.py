"""tilejit.softmax's torch path without a GPU: stand-in tensors (fake_torch.py)
go through the checks and the per-layout argument cache, and a recorder
takes the place of the C call, so that each test sees exactly what would
reach tj_softmax (context, dtype, m, n, pointers, strides, stream, options).

Each test runs in a child process of its own, since the stand-in must be
imported as "torch" before tilejit sees a tensor: test_X runs child_X
there, twice: on Python and ctypes alone (TILEJIT_PURE_PYTHON=1), and with
the hot path in C (python/tilejit_fast.c) where the extension is built.
The recorder is a C function pointer, so both paths reach the same thing.
The no-driver test leaves the C library in place and expects its
NO_DRIVER error.
"""

import ctypes
import os
import subprocess
import sys

import harness

HERE = harness.HERE
CTX0, CTX1 = 0xC0DE00, 0xC1DE00


def fast_built():
    """Whether the binding loads its C hot path here. CI builds it
    (TJ_REQUIRE_PYTHON_EXT=1 there makes its absence a failure)."""
    import tilejit

    built = tilejit._fast is not None
    assert built or os.environ.get("TJ_REQUIRE_PYTHON_EXT") != "1", \
        "TJ_REQUIRE_PYTHON_EXT=1 but tilejit loads no _tilejit_fast"
    return built


def run_child(name, modes=("python", "c"), **env):
    """Runs child_<name> in a fresh interpreter with the stand-in torch, once
    per mode: "python" (TILEJIT_PURE_PYTHON=1) and "c" (the extension, where
    it is built)."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import fake_torch; fake_torch.install(); "
            "import test_softmax_args as t; t.in_child(sys.argv[2], sys.argv[3])")
    for mode in modes:
        if mode == "c" and not fast_built():
            print(f"child_{name}: no C hot path built; ran on Python alone")
            continue
        pure = {"TILEJIT_PURE_PYTHON": "1" if mode == "python" else "0"}
        done = subprocess.run([sys.executable, "-c", code, HERE, name, mode], capture_output=True,
                              text=True, env=dict(os.environ, **pure, **env), timeout=120)
        assert done.returncode == 0 and "CHILD OK" in done.stdout, \
            f"child_{name} ({mode}) failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def test_arguments():
    run_child("arguments")


def test_errors_before_any_call():
    run_child("errors_before_any_call")


def test_library_error():
    run_child("library_error")


def test_no_driver():
    run_child("no_driver", TILEJIT_LIBCUDA="/nonexistent/libcuda.so.1")


def test_prepared_call():
    run_child("prepared_call")


def test_argument_table():
    run_child("argument_table")


def test_masked_arguments():
    run_child("masked_arguments")


def test_hot_path_in_c():
    if not fast_built():
        harness.skip("the binding's C hot path (_tilejit_fast) is not built here")
    run_child("hot_path", modes=("c",))


# ------------------------------------------------------ inside the child


# tj_softmax's C signature, the stream as the 64-bit integer it is.
ROW_OP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int64,
                          ctypes.c_int64, ctypes.c_uint64, ctypes.c_int64, ctypes.c_uint64,
                          ctypes.c_int64, ctypes.c_uint64, ctypes.c_void_p)


class Recorder:
    """A C function in the place of tj_softmax: keeps each call's arguments
    as plain values (options as a dict of the struct's fields, or None) and
    returns status."""

    def __init__(self, options_type):
        self.calls, self.status, self.options_type = [], 0, options_type
        self.fn = ROW_OP(self.record)

    def record(self, *args):
        values = list(args)
        if values[9] is not None:
            struct = self.options_type.from_address(values[9])
            values[9] = {name: getattr(struct, name) for name, _ in struct._fields_}
        self.calls.append(values)
        return self.status


def in_child(name, mode):
    import tilejit

    assert (tilejit._fast is not None) == (mode == "c"), (mode, tilejit._fast)
    recorder = None
    if name != "no_driver":
        recorder = Recorder(tilejit._SoftmaxOptions)
        tilejit._set_raw(0, recorder.fn)
        tilejit._contexts[0] = ctypes.c_void_p(CTX0)
        tilejit._contexts[1] = ctypes.c_void_p(CTX1)
        tilejit._lib.tj_context_error = lambda ctx: b"fake: x and y overlap"
    globals()[f"child_{name}"](tilejit, sys.modules["torch"], recorder)
    print("CHILD OK")


def child_arguments(tilejit, torch, recorder):
    import fake_torch

    x = torch.Tensor((4, 32))
    y = tilejit.softmax(x)
    assert isinstance(y, torch.Tensor) and y is not x and y.shape == (4, 32)
    assert recorder.calls[-1] == [CTX0, 0, 4, 32, y.data_ptr(), 32, x.data_ptr(), 32, 0x5000, None]
    # The same layout again: the cached plan, with this call's pointers.
    x2 = torch.Tensor((4, 32))
    y2 = tilejit.softmax(x2)
    assert recorder.calls[-1][4] == y2.data_ptr() != y.data_ptr()
    assert recorder.calls[-1][6] == x2.data_ptr() != x.data_ptr()
    assert len(tilejit._plans) == 1, tilejit._plans
    # The stream is asked for on every call, not kept with the plan.
    fake_torch.CURRENT_STREAM[0] = 0x6000
    tilejit.softmax(x)
    assert recorder.calls[-1][8] == 0x6000 and fake_torch.STREAM_QUERIES[-1] == 0
    tilejit.softmax(x, stream=0x7000)
    assert recorder.calls[-1][8] == 0x7000
    tilejit.softmax(x, stream=0)
    assert recorder.calls[-1][8] == 0
    # In place; strided rows in and out; a row as a 1-D tensor.
    assert tilejit.softmax(x, out=x) is x
    assert recorder.calls[-1][4:8] == [x.data_ptr(), 32, x.data_ptr(), 32]
    wide = torch.Tensor((4, 40))
    xv = wide.view_of((4, 32), (40, 1), offset=8)
    yv = tilejit.softmax(xv)
    assert yv.stride() == (32, 1)
    assert recorder.calls[-1][4:8] == [yv.data_ptr(), 32, wide.data_ptr() + 32, 40]
    out_wide = torch.Tensor((4, 48))
    out = out_wide.view_of((4, 32), (48, 1), offset=3)
    assert tilejit.softmax(xv, out=out) is out
    assert recorder.calls[-1][4:8] == [out_wide.data_ptr() + 12, 48, wide.data_ptr() + 32, 40]
    row = torch.Tensor((100,))
    tilejit.softmax(row)
    assert recorder.calls[-1][1:4] == [0, 1, 100] and recorder.calls[-1][5] == 100
    # dtypes, the second device, empty tensors.
    tilejit.softmax(torch.Tensor((2, 8), torch.float16))
    assert recorder.calls[-1][1] == 1
    tilejit.softmax(torch.Tensor((2, 8), torch.bfloat16, "cuda:1"))
    assert recorder.calls[-1][:2] == [CTX1, 2] and fake_torch.STREAM_QUERIES[-1] == 1
    tilejit.softmax(torch.Tensor((0, 100)))
    assert recorder.calls[-1][2:4] == [0, 100]
    # Options reach C as a struct; the defaults as NULL.
    tilejit.softmax(x, num_warps=8)
    assert recorder.calls[-1][9] == {"num_warps": 8, "backend": 0, "which_template": 0,
                                     "cluster": 0, "split": 0, "stage": 0, "stash": 0}
    tilejit.softmax(x, backend="nvrtc", template="online")
    assert recorder.calls[-1][9]["backend"] == 1 and recorder.calls[-1][9]["which_template"] == 2
    tilejit.softmax(x)
    assert recorder.calls[-1][9] is None


def expect_raises(kind, fn, fragment):
    try:
        fn()
    except kind as e:
        assert fragment.lower() in str(e).lower(), f"{str(e)!r} lacks {fragment!r}"
        return e
    raise AssertionError(f"no {kind.__name__} ({fragment})")


def child_errors_before_any_call(tilejit, torch, recorder):
    x = torch.Tensor((4, 100))
    cases = [
        (TypeError, lambda: tilejit.softmax(torch.Tensor((4, 100), torch.float64)), "float64"),
        (ValueError, lambda: tilejit.softmax(torch.Tensor((4, 100), device="cpu")), "cpu"),
        (ValueError, lambda: tilejit.softmax(torch.Tensor((2, 2, 100))), "3-D"),
        (ValueError, lambda: tilejit.softmax(torch.Tensor((100, 8), strides=(1, 100))),
         "contiguous"),
        (ValueError, lambda: tilejit.softmax(torch.Tensor((100,), strides=(2,))), "contiguous"),
        (ValueError, lambda: tilejit.softmax(x, out=torch.Tensor((4, 101))), "shape"),
        (TypeError, lambda: tilejit.softmax(x, out=torch.Tensor((4, 100), torch.float16)),
         "float16"),
        (TypeError, lambda: tilejit.softmax(x, out=[0.0] * 400), "list"),
        (ValueError, lambda: tilejit.softmax(x, out=torch.Tensor((4, 100), device="cuda:1")),
         "cuda:1"),
        (ValueError, lambda: tilejit.softmax(x, backend="llvm"), "backend"),
        (ValueError, lambda: tilejit.softmax(x, template="two-pass"), "template"),
        (ValueError, lambda: tilejit.softmax(x, num_warps=2**32 + 1), "num_warps"),
        (TypeError, lambda: tilejit.softmax(x, num_warps=4.5), "num_warps"),
        (TypeError, lambda: tilejit.softmax([1.0, 2.0]), "__cuda_array_interface__"),
    ]
    for kind, fn, fragment in cases:
        expect_raises(kind, fn, fragment)
        expect_raises(kind, fn, fragment)  # the same again: nothing was kept
    assert recorder.calls == [], recorder.calls
    assert tilejit._plans == {}, tilejit._plans
    # A bad stream is refused before the call (the layout is planned by then).
    expect_raises(TypeError, lambda: tilejit.softmax(x, stream="0"), "stream")
    expect_raises(TypeError, lambda: tilejit.softmax(x, stream=True), "stream")
    expect_raises(TypeError, lambda: tilejit.softmax(x, stream=1.0), "stream")
    expect_raises(ValueError, lambda: tilejit.softmax(x, stream=-1), "64-bit")
    assert recorder.calls == [], recorder.calls
    tilejit.softmax(x)
    assert len(recorder.calls) == 1


def child_library_error(tilejit, torch, recorder):
    recorder.status = int(tilejit.Status.INVALID_ARGUMENT)
    x = torch.Tensor((4, 100))
    for _ in range(2):  # the first call plans, the second uses the plan
        e = expect_raises(tilejit.Error, lambda: tilejit.softmax(x, out=x), "overlap")
        assert e.status == tilejit.Status.INVALID_ARGUMENT and e.message.startswith("fake:")
    assert len(recorder.calls) == 2


def child_no_driver(tilejit, torch, recorder):
    x = torch.Tensor((4, 100))
    for _ in range(2):
        e = expect_raises(tilejit.Error, lambda: tilejit.softmax(x), "no cuda driver")
        assert e.status == tilejit.Status.NO_DRIVER and "/nonexistent" in e.message, e
    assert tilejit._plans == {}, tilejit._plans


def child_prepared_call(tilejit, torch, recorder):
    x, y = torch.Tensor((1, 32)), torch.Tensor((1, 32))
    call = tilejit._prepared_softmax(x, y)
    assert call() == 0
    assert recorder.calls[-1] == recorder.calls[-2], recorder.calls
    assert recorder.calls[-1] == [CTX0, 0, 1, 32, y.data_ptr(), 32, x.data_ptr(), 32, 0x5000, None]


def child_argument_table(tilejit, torch, recorder):
    first = tilejit._arg(0x1000)
    assert first.value == 0x1000 and tilejit._arg(0x1000) is first
    assert tilejit._arg(2**64 - 1).value == 2**64 - 1
    expect_raises(ValueError, lambda: tilejit._arg(2**64), "64-bit")
    expect_raises(TypeError, lambda: tilejit._arg(12345.0), "int")
    for value in range(tilejit._ARGS_LIMIT + 10):
        tilejit._arg(value)
    assert len(tilejit._ARGS) <= tilejit._ARGS_LIMIT


def child_hot_path(tilejit, torch, recorder):
    """Once a layout is planned, its calls run in C: the Python op's C call
    (_RAW) is a tripwire, and every call still reaches the recorder with
    this call's pointers, stream and options."""
    x, y = torch.Tensor((4, 32)), torch.Tensor((4, 32))
    for kwargs in ({}, {"out": y}, {"out": x}, {"num_warps": 8}, {"stream": 0x9000}):
        tilejit.softmax(x, **kwargs)  # plans each layout, on the Python path

    def tripwire(*args):
        raise AssertionError("the Python path ran")

    tilejit._RAW[0] = tripwire
    count = len(recorder.calls)
    x2 = torch.Tensor((4, 32))
    y2 = tilejit.softmax(x2)
    assert isinstance(y2, torch.Tensor) and y2.shape == (4, 32) and y2 is not x2
    assert recorder.calls[-1] == [CTX0, 0, 4, 32, y2.data_ptr(), 32, x2.data_ptr(), 32, 0x5000,
                                  None], recorder.calls[-1]
    assert tilejit.softmax(x2, y) is y and recorder.calls[-1][4] == y.data_ptr()
    assert tilejit.softmax(x2, out=y) is y and recorder.calls[-1][6] == x2.data_ptr()
    assert tilejit.softmax(x2, out=x2) is x2 and recorder.calls[-1][4] == x2.data_ptr()
    tilejit.softmax(x2, num_warps=8)
    assert recorder.calls[-1][9]["num_warps"] == 8
    tilejit.softmax(x2, stream=0x9000)
    assert recorder.calls[-1][8] == 0x9000
    tilejit.softmax(x2, stream=0xA000)  # any int: the stream is not in the key
    assert recorder.calls[-1][8] == 0xA000
    assert len(recorder.calls) == count + 7, recorder.calls[count:]
    # A failure in C raises tilejit.Error with the context's message.
    recorder.status = int(tilejit.Status.INVALID_ARGUMENT)
    e = expect_raises(tilejit.Error, lambda: tilejit.softmax(x2, out=x2), "overlap")
    assert e.status == tilejit.Status.INVALID_ARGUMENT
    recorder.status = 0
    # What the hot path does not take goes to Python, which refuses it.
    for bad in ("0", True, 1.0):
        expect_raises(TypeError, lambda: tilejit.softmax(x2, stream=bad), "stream")
    expect_raises(ValueError, lambda: tilejit.softmax(x2, stream=-1), "64-bit")
    expect_raises(TypeError, lambda: tilejit.softmax(x2, out=[0.0]), "list")
    assert len(recorder.calls) == count + 8
    assert tilejit.softmax.__name__ == "softmax" and "softmax(x)" in tilejit.softmax.__doc__
    # A current stream that is not an int reaches the Python op's refusal.
    import fake_torch
    fake_torch.CURRENT_STREAM[0] = True
    expect_raises(TypeError, lambda: tilejit.softmax(x2), "int")
    fake_torch.CURRENT_STREAM[0] = 0x5000
    # An interrupt while the key is read propagates; it is not handed on.
    def stride_once():
        del x2.stride
        raise KeyboardInterrupt

    x2.stride = stride_once
    expect_raises(KeyboardInterrupt, lambda: tilejit.softmax(x2), "")
    assert len(recorder.calls) == count + 8
    tilejit.softmax(x2)
    assert len(recorder.calls) == count + 9
    # log_softmax has its own C hot path and function.
    logs = Recorder(tilejit._SoftmaxOptions)
    tilejit._set_raw(1, logs.fn)
    tilejit.log_softmax(x)  # plans, on the Python path
    tilejit._RAW[1] = tripwire
    y3 = tilejit.log_softmax(x2)
    assert logs.calls[-1] == [CTX0, 0, 4, 32, y3.data_ptr(), 32, x2.data_ptr(), 32, 0x5000,
                              None], logs.calls
    assert len(logs.calls) == 2 and len(recorder.calls) == count + 9


class MaskedRecorder:
    """Takes tilejit's tj_masked_softmax: keeps each call's arguments as
    plain values, the mask and options as dicts of their fields."""

    def __init__(self):
        self.calls = []

    def __call__(self, *args):
        assert len(args) == 11, f"{len(args)} arguments"
        values = []
        for arg in args:
            if arg is None or isinstance(arg, int):
                values.append(arg)
            elif isinstance(arg, ctypes._Pointer) or hasattr(arg, "_obj"):  # pointer, byref
                struct = arg.contents if isinstance(arg, ctypes._Pointer) else arg._obj
                values.append({name: getattr(struct, name) for name, _ in struct._fields_})
            else:
                values.append(arg.value)
        self.calls.append(values)
        return 0


def child_masked_arguments(tilejit, torch, recorder):
    """What masked_softmax passes to tj_masked_softmax for torch tensors: the
    layout as softmax's, then the mask, the current stream and the options;
    and what it refuses before any call."""
    masked = tilejit._tj_masked_softmax = MaskedRecorder()
    x = torch.Tensor((64, 1000))
    y = tilejit.masked_softmax(x, scale=0.125, causal=True, offset=-3, rows=16)
    assert isinstance(y, torch.Tensor) and y is not x and y.shape == (64, 1000)
    mask = {"scale": 0.125, "causal": 1, "rows": 16, "offset": -3}
    assert masked.calls[-1] == [CTX0, 0, 64, 1000, y.data_ptr(), 1000, x.data_ptr(), 1000, mask,
                                0x5000, None], masked.calls[-1]
    tilejit.masked_softmax(x, out=x)  # no mask: scale 1, every column
    assert masked.calls[-1][4:10] == [x.data_ptr(), 1000, x.data_ptr(), 1000,
                                      {"scale": 1.0, "causal": 0, "rows": 0, "offset": 0}, 0x5000]
    wide = torch.Tensor((4, 40), torch.bfloat16, "cuda:1")
    xv = wide.view_of((4, 32), (40, 1), offset=8)
    out = tilejit.masked_softmax(xv, scale=0.1, causal=True, stream=0x7000, num_warps=2)
    assert masked.calls[-1][:8] == [CTX1, 2, 4, 32, out.data_ptr(), 32, wide.data_ptr() + 16, 40]
    assert masked.calls[-1][8]["scale"] == ctypes.c_float(0.1).value
    assert masked.calls[-1][9] == 0x7000 and masked.calls[-1][10]["num_warps"] == 2
    count = len(masked.calls)
    for kind, call, fragment in (
            (ValueError, lambda: tilejit.masked_softmax(x, scale=0.0), "scale"),
            (ValueError, lambda: tilejit.masked_softmax(x, offset=2), "causal=True only"),
            (TypeError, lambda: tilejit.masked_softmax(torch.Tensor((4, 8), torch.float64)),
             "float64"),
            (ValueError, lambda: tilejit.masked_softmax(torch.Tensor((4, 8), device="cpu")), "cpu"),
            (ValueError, lambda: tilejit.masked_softmax(x, out=torch.Tensor((64, 999))), "shape"),
            (TypeError, lambda: tilejit.masked_softmax(x, stream=1.0), "stream"),
            (ValueError, lambda: tilejit.masked_softmax(x, template="two-pass"), "template")):
        e = expect_raises(kind, call, fragment)
        assert str(e).startswith("tilejit"), e
    assert len(masked.calls) == count, masked.calls[count:]
    assert recorder.calls == [], recorder.calls  # tj_softmax was never called
