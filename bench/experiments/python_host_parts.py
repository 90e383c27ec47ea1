"""python_host_parts.py: where the host time of tilejit.softmax(x) goes, part
by part, beside torch.softmax, on one tiny tensor, in one process on the GPU.

    python3 bench/experiments/python_host_parts.py [--shape 4x1024] [--rounds 200]

Each line times one piece of what the binding's hot path does (the key's
attribute reads, the allocations torch offers, the stream look-up, the bare
foreign call with its prepared arguments, a foreign call that does nothing,
and the C hot path's own share with a C function that does nothing),
interleaved in rounds as bench/python_host_time.py times its calls; the
figure is the median µs per call. An experiment for choosing what to cut,
not a benchmark of record.
"""

import argparse
import ctypes
import gc
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402
import tilejit  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shape", default="4x1024")
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--batch", type=int, default=50)
    a = p.parse_args()
    m, n = (int(v) for v in a.shape.split("x"))
    x = torch.randn(m, n, device="cuda")
    y = torch.empty_like(x)
    tilejit.softmax(x)
    dev = x.get_device()
    raw_stream = torch._C._cuda_getCurrentRawStream
    shape, dtype, device = tuple(x.shape), x.dtype, x.device
    noop = tilejit._lib["tj_version"]  # a foreign call that does almost nothing
    noop.restype = ctypes.c_char_p
    u = ctypes.c_uint64(0)
    ten = (u,) * 10
    labs = ctypes.CDLL(None).labs
    labs.restype = ctypes.c_long
    held = ctypes.PyDLL(tilejit.library_path)["tj_softmax"]  # the GIL kept over the call
    held.restype = ctypes.c_int
    prepared = tilejit._prepared_softmax(x, y)
    args = prepared.__closure__[0].cell_contents if prepared.__closure__ else ()
    # The C hot path's own cost: a RowOp whose C function does nothing
    # (feclearexcept(0) returns 0), on the layouts softmax planned above.
    libm = ctypes.CDLL("libm.so.6")
    noop_c = libm.feclearexcept
    noop_c.restype = ctypes.c_int
    glue = None
    if tilejit._fast is not None:
        tilejit.softmax(x, out=y)
        glue = tilejit._fast.row_op(tilejit.softmax.__wrapped__, tilejit._plans, tilejit._fail,
                                    ctypes.cast(noop_c, ctypes.c_void_p).value, noop_c)
        glue.configure(torch.Tensor, raw_stream)
    held_noop = ctypes.PyDLL("libm.so.6").feclearexcept
    held_noop.restype = ctypes.c_int
    calls = {
        "torch.softmax(x, -1)": lambda: torch.softmax(x, -1),
        "torch.softmax(x, -1, out=y)": lambda: torch.softmax(x, -1, out=y),
        "tilejit.softmax(x)": lambda: tilejit.softmax(x),
        "tilejit.softmax(x, out=y)": lambda: tilejit.softmax(x, out=y),
        "prepared foreign call": prepared,
        "prepared foreign call, GIL kept": lambda: held(*args),
        "torch.empty_like(x)": lambda: torch.empty_like(x),
        "x.new_empty(shape)": lambda: x.new_empty(shape),
        "torch.empty(shape, dtype, device)": lambda: torch.empty(shape, dtype=dtype, device=device),
        "torch.empty_strided": lambda: torch.empty_strided(shape, (n, 1), dtype=dtype,
                                                           device=device),
        "key (5 reads + tuple)": lambda: (x.dtype, x.shape, x.stride(), x.get_device(),
                                          x.is_cuda, None, 0, "ptx", "auto"),
        "x.shape": lambda: x.shape,
        "x.stride()": lambda: x.stride(),
        "x.get_device()": lambda: x.get_device(),
        "x.data_ptr()": lambda: x.data_ptr(),
        "raw stream": lambda: raw_stream(dev),
        "foreign noop, 0 args": lambda: noop(),
        "foreign labs, 1 arg": lambda: labs(1),
        "foreign noop, 10 c_uint64": lambda: noop(*ten),
        "empty lambda": lambda: None,
        "foreign feclearexcept(0), GIL released": lambda: noop_c(0),
        "foreign feclearexcept(0), GIL kept": lambda: held_noop(0),
    }
    if glue is not None:
        calls["C hot path, no-op C function, out=y"] = lambda: glue(x, out=y)
        calls["C hot path, no-op C function"] = lambda: glue(x)
        calls["C hot path, no-op, stream given"] = lambda: glue(x, out=y, stream=0)
    items = list(calls.items())
    for _, fn in items:
        for _ in range(200):
            fn()
    torch.cuda.synchronize()
    samples = {k: [] for k in calls}
    clock = time.perf_counter
    gc.collect()
    gc.disable()
    for r in range(a.rounds):
        for name, fn in (items if r % 2 == 0 else items[::-1]):
            start = clock()
            for _ in range(a.batch):
                fn()
            samples[name].append((clock() - start) / a.batch * 1e6)
        torch.cuda.synchronize()
    gc.enable()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {m}x{n} f32, "
          f"median µs per call over {a.rounds} rounds of {a.batch}")
    for name in calls:
        print(f"  {name:<36} {statistics.median(samples[name]):7.2f}")


if __name__ == "__main__":
    main()
