"""tilejit: a ctypes binding to libtilejit, the C library that JIT-compiles
tile programs to PTX.

It needs no build step beyond the library. libtilejit is found through the
TILEJIT_LIBRARY environment variable (its path; when set, nothing else is
tried), else the build trees beside this file (../build, then the newest
../build-*), else an installed prefix (lib/<multiarch>, lib64, lib under
sys.prefix, /usr/local, /usr), else the dynamic loader's own search, else
ctypes.util.find_library; libtilejit.so.0 before libtilejit.so in each
folder. tilejit.library_path names the one loaded.

    import torch, tilejit
    x = torch.randn(4096, 1000, device="cuda")
    y = tilejit.softmax(x)              # on torch's current stream
    tilejit.softmax(x, out=x)           # in place

softmax() takes torch tensors (2-D with a contiguous last dimension and any
row stride, or 1-D as one row; float32, float16, bfloat16) and any object
with __cuda_array_interface__. Every failure inside tilejit raises
tilejit.Error(status, message) with the library's message; bad Python-side
inputs raise TypeError or ValueError before anything reaches C.

For torch tensors the first call of a layout (dtype, shape, strides,
device, out's layout, options) checks it and keeps the C call's arguments
(as ctypes objects, and as plain ints); later calls of that layout read
only the data pointers and torch's current stream, so a launch costs little
more host time than tj_softmax itself. Where the optional extension
_tilejit_fast (tilejit_fast.c) is built, softmax and log_softmax make those
later calls in C; TILEJIT_PURE_PYTHON=1 keeps to ctypes.

One tj_context is kept per device for the life of the process, created on
first use. For torch tensors it is created for the tensor's device, which
attaches to the context torch made current there or retains that device's
primary context: the one torch uses, so both share memory and streams.

Your own programs, in the text form, run through Function, specialized on
each launch's arguments (tj_function), Triton's kernel[grid](args):

    f = tilejit.Function(open("log_softmax.tj").read(), "f32", size_param="n")
    f[x.shape[0]](y, x, x.stride(0), x.shape[1])    # one program instance a row

dump_ptx() works without a GPU: it prints the PTX (or CUDA C) tilejit
generates for a softmax specialization.
"""

import ctypes
import ctypes.util
import enum
import glob
import itertools
import numbers
import os
import platform
import sys
import sysconfig
import threading

__all__ = [
    "Error", "Status", "DeviceArray", "Function", "softmax", "log_softmax", "softmax_backward",
    "masked_softmax", "dump_ptx", "version",
    "cache_stats", "device_info", "synchronize", "library_path",
]

# The header version this binding mirrors (TJ_VERSION_STRING in tilejit.h).
__version__ = "0.1.0"
DEVICE_CURRENT = -1  # TJ_DEVICE_CURRENT


# ---------------------------------------------------------------- status


class Status(enum.IntEnum):
    """tj_status, in the header's order."""

    OK = 0
    INVALID_ARGUMENT = 1
    TYPE = 2
    PARSE = 3
    VERIFY = 4
    UNSUPPORTED = 5
    OUT_OF_MEMORY = 6
    INTERP = 7
    NO_DRIVER = 8
    NO_DEVICE = 9
    DRIVER = 10
    NO_NVRTC = 11
    NVRTC = 12
    TOOL = 13


class Error(RuntimeError):
    """A failed tilejit call: .status (a Status) and .message (tilejit's text)."""

    def __init__(self, status, message):
        try:
            status = Status(status)
        except ValueError:
            pass
        super().__init__(status, message)
        self.status = status
        self.message = message

    def __str__(self):
        name = self.status.name if isinstance(self.status, Status) else str(self.status)
        return f"{self.message} [{name}]"


# ------------------------------------------------- mirrored C structures


class _ContextOptions(ctypes.Structure):
    _fields_ = [("device", ctypes.c_int), ("arch", ctypes.c_int),
                ("ptx_version", ctypes.c_int), ("cache_capacity", ctypes.c_int)]


class _SoftmaxOptions(ctypes.Structure):
    _fields_ = [("num_warps", ctypes.c_int), ("backend", ctypes.c_int),
                ("which_template", ctypes.c_int), ("cluster", ctypes.c_int),
                ("split", ctypes.c_int), ("stage", ctypes.c_int), ("stash", ctypes.c_int)]


class _SoftmaxMask(ctypes.Structure):
    _fields_ = [("scale", ctypes.c_float), ("causal", ctypes.c_int), ("rows", ctypes.c_int64),
                ("offset", ctypes.c_int64)]


class _SoftmaxPlan(ctypes.Structure):
    _fields_ = [("which", ctypes.c_int), ("block", ctypes.c_int64), ("num_warps", ctypes.c_int),
                ("cluster", ctypes.c_int), ("split", ctypes.c_int), ("stage", ctypes.c_int),
                ("stash", ctypes.c_int)]


class _DeviceInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 128)] + [
        (f, ctypes.c_int) for f in (
            "ordinal", "arch", "target_arch", "ptx_version", "driver_version", "sm_count",
            "max_threads_per_block", "max_threads_per_sm", "max_blocks_per_sm",
            "max_shared_per_block", "max_shared_per_block_optin")
    ] + [("max_grid_x", ctypes.c_int64)] + [
        (f, ctypes.c_int) for f in (
            "max_shared_per_sm", "registers_per_sm", "l2_bytes", "cooperative_launch",
            "cluster_launch")
    ]


class _CacheStats(ctypes.Structure):
    _fields_ = [("hits", ctypes.c_uint64), ("misses", ctypes.c_uint64),
                ("evictions", ctypes.c_uint64), ("failures", ctypes.c_uint64),
                ("entries", ctypes.c_int64), ("capacity", ctypes.c_int64),
                ("codegen_us", ctypes.c_double), ("jit_ms", ctypes.c_double),
                ("disk_hits", ctypes.c_uint64), ("disk_misses", ctypes.c_uint64),
                ("disk_writes", ctypes.c_uint64), ("disk_rejects", ctypes.c_uint64),
                ("disk_errors", ctypes.c_uint64)]


class _SpecOptions(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int64), ("block", ctypes.c_int64), ("num_warps", ctypes.c_int),
                ("dtype", ctypes.c_int), ("align", ctypes.c_int), ("cluster", ctypes.c_int),
                ("split", ctypes.c_int), ("bindings", ctypes.c_void_p),
                ("binding_count", ctypes.c_int), ("phased", ctypes.c_int),
                ("stage", ctypes.c_int), ("stash", ctypes.c_int), ("multiple", ctypes.c_int)]


class _CodegenOptions(ctypes.Structure):
    _fields_ = [("arch", ctypes.c_int), ("ptx_version", ctypes.c_int), ("annotate", ctypes.c_int)]


class _Binding(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_int64)]


class _FunctionOptions(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("num_warps", ctypes.c_int), ("block", ctypes.c_int64),
                ("size_param", ctypes.c_char_p), ("bindings", ctypes.POINTER(_Binding)),
                ("binding_count", ctypes.c_int), ("backend", ctypes.c_int)]


class _ArgValue(ctypes.Union):
    _fields_ = [("ptr", ctypes.c_void_p), ("i", ctypes.c_int64), ("f", ctypes.c_double)]


class _Arg(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("u", _ArgValue), ("bytes", ctypes.c_size_t)]


# ------------------------------------------------------ finding the library


_NAMES = ("libtilejit.so.0", "libtilejit.so")  # the soname first, then the dev link


def _mtime(path):
    try:
        return os.path.getmtime(path)
    except OSError:
        return 0.0


def _build_dirs():
    """The build trees of the checkout this file sits in (python/ beside
    build/): build/ first, then the other build-*/ folders, newest library
    first. For a copy installed by pip (not editable) there are none."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    others = [d for d in glob.glob(os.path.join(root, "build-*")) if os.path.isdir(d)]
    newest = lambda d: max(_mtime(os.path.join(d, name)) for name in _NAMES)  # noqa: E731
    return [os.path.join(root, "build")] + sorted(others, key=newest, reverse=True)


def _prefix_lib_dirs():
    """lib/<multiarch>, lib64 and lib under sys.prefix (a venv or conda
    environment), /usr/local and /usr: where CMake's GNUInstallDirs puts
    libraries on Debian, RPM-based and other systems."""
    multiarch = sysconfig.get_config_var("MULTIARCH") or f"{platform.machine()}-linux-gnu"
    for prefix in dict.fromkeys((sys.prefix, "/usr/local", "/usr")):
        for libdir in (os.path.join("lib", multiarch), "lib64", "lib"):
            yield os.path.join(prefix, libdir)


def _candidates():
    """The libraries to try, in order (a generator, so that the slow
    find_library runs only when nothing before it loads):

    1. TILEJIT_LIBRARY, alone when set;
    2. the build trees beside this file (_build_dirs);
    3. installed prefixes (_prefix_lib_dirs);
    4. the bare names, which the dynamic loader looks up in
       LD_LIBRARY_PATH, its cache and the system directories;
    5. ctypes.util.find_library("tilejit").

    In each folder libtilejit.so.0 (the soname) comes before libtilejit.so."""
    env = os.environ.get("TILEJIT_LIBRARY")
    if env:
        yield env
        return
    for folder in itertools.chain(_build_dirs(), _prefix_lib_dirs()):
        for name in _NAMES:
            yield os.path.join(folder, name)
    yield from _NAMES
    found = ctypes.util.find_library("tilejit")
    if found:
        yield found


_P = ctypes.POINTER
_VP = ctypes.c_void_p
_I = ctypes.c_int
_I64 = ctypes.c_int64
_U64 = ctypes.c_uint64

# name: (restype, argtypes). tj_status returns are c_int.
_PROTOTYPES = {
    "tj_status_string": (ctypes.c_char_p, [_I]),
    "tj_free": (None, [_VP]),
    "tj_program_destroy": (None, [_VP]),
    "tj_program_error": (ctypes.c_char_p, [_VP]),
    "tj_spec_destroy": (None, [_VP]),
    "tj_spec_error": (ctypes.c_char_p, [_VP]),
    "tj_spec_key": (ctypes.c_char_p, [_VP]),
    "tj_softmax_program": (_I, [_I, _I64, _P(_VP)]),
    "tj_softmax_plan_for": (_I, [_VP, _I, _I64, _I64, _P(_SoftmaxOptions), _P(_SoftmaxPlan)]),
    "tj_softmax_spec_options": (_I, [_P(_SoftmaxPlan), _I, _I64, _P(_SpecOptions)]),
    "tj_specialize": (_I, [_VP, _P(_SpecOptions), _P(_VP)]),
    "tj_emit_ptx": (_I, [_VP, _P(_CodegenOptions), _P(_VP), _VP]),
    "tj_emit_cuda": (_I, [_VP, _P(_CodegenOptions), _P(_VP), _VP]),
    "tj_nvrtc_ptx": (_I, [_VP, _P(_CodegenOptions), _P(_VP), _VP]),
    "tj_context_create": (_I, [_P(_ContextOptions), _P(_VP)]),
    "tj_context_destroy": (None, [_VP]),
    "tj_context_error": (ctypes.c_char_p, [_VP]),
    "tj_context_device_info": (_I, [_VP, _P(_DeviceInfo)]),
    "tj_context_cache_stats": (_I, [_VP, _P(_CacheStats)]),
    "tj_context_synchronize": (_I, [_VP]),
    "tj_device_alloc": (_I, [_VP, ctypes.c_size_t, _P(_U64)]),
    "tj_device_free": (_I, [_VP, _U64]),
    "tj_copy_to_device": (_I, [_VP, _U64, _VP, ctypes.c_size_t]),
    "tj_copy_to_host": (_I, [_VP, _VP, _U64, ctypes.c_size_t]),
    "tj_softmax": (_I, [_VP, _I, _I64, _I64, _U64, _I64, _U64, _I64, _VP, _P(_SoftmaxOptions)]),
    "tj_log_softmax": (_I, [_VP, _I, _I64, _I64, _U64, _I64, _U64, _I64, _VP,
                            _P(_SoftmaxOptions)]),
    "tj_softmax_backward": (_I, [_VP, _I, _I64, _I64, _U64, _I64, _U64, _I64, _U64, _I64, _VP,
                                 _P(_SoftmaxOptions)]),
    "tj_masked_softmax": (_I, [_VP, _I, _I64, _I64, _U64, _I64, _U64, _I64, _P(_SoftmaxMask), _VP,
                               _P(_SoftmaxOptions)]),
    "tj_program_parse": (_I, [ctypes.c_char_p, ctypes.c_size_t, _P(_VP)]),
    "tj_function_create": (_I, [_VP, _VP, _P(_FunctionOptions), _P(_VP)]),
    "tj_function_destroy": (None, [_VP]),
    "tj_function_launch": (_I, [_VP, _P(_Arg), _I, _I64, _VP]),
    "tj_function_variants": (_I, [_VP]),
}


def _bind(lib):
    """Sets every prototype on lib; returns the names lib lacks."""
    missing = []
    for name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(lib, name, None)
        if fn is None:
            missing.append(name)
            continue
        fn.restype, fn.argtypes = restype, argtypes
    return missing


def _loaded_path(name):
    """The file the dynamic loader picked for a bare name, from the
    process's memory map (the name itself where there is none)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split(None, 5)[-1].strip()
                if os.path.basename(path).startswith("libtilejit.so"):
                    return path
    except OSError:
        pass
    return name


def _load_library():
    """The first candidate that loads and has every function bound here."""
    missing_files, failures = [], []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            missing_files.append(path)
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            failures.append(f"{path} ({e})")
            continue
        missing = _bind(lib)
        if not missing:
            return lib, path if os.sep in path else _loaded_path(path)
        failures.append(f"{path} (older than this binding: no {', '.join(missing)})")
    raise ImportError("tilejit: cannot load libtilejit.so; set TILEJIT_LIBRARY to its path, or "
                      "build it (cmake -S . -B build && cmake --build build --target tilejit). "
                      f"Not found: {', '.join(missing_files) or '-'}. "
                      f"Failed: {'; '.join(failures) or '-'}")


_lib, library_path = _load_library()
_tj_softmax = _lib.tj_softmax  # with argtypes: checked conversions, for the slow paths
# The same function without argtypes, for the hot path: every argument is
# passed as a ctypes object made beforehand, which costs about half of
# what argtypes' per-call conversions of Python ints do.
_tj_softmax_raw = _lib["tj_softmax"]
_tj_softmax_raw.restype = ctypes.c_int
_tj_log_softmax = _lib.tj_log_softmax
_tj_log_softmax_raw = _lib["tj_log_softmax"]
_tj_log_softmax_raw.restype = ctypes.c_int
_RAW = [_tj_softmax_raw, _tj_log_softmax_raw]  # per row op (tests put recorders here)
_tj_masked_softmax = _lib.tj_masked_softmax  # with argtypes (tests put a recorder here)


def _text(raw):
    return raw.decode("utf-8", "replace") if raw else ""


def _status_name(status):
    return _text(_lib.tj_status_string(status))


# ------------------------------------------------------------ enumerations

_DTYPES = {"f32": 0, "float32": 0, "float": 0, "f16": 1, "float16": 1, "half": 1,
           "bf16": 2, "bfloat16": 2}
_DTYPE_SIZES = (4, 2, 2)
_DTYPE_NAMES = ("f32", "f16", "bf16")
_BACKENDS = {"ptx": 0, "nvrtc": 1}
_TEMPLATES = {"auto": 0, "single": 1, "online": 2}


def _dtype_code(dtype):
    """0, 1 or 2 for a name ("f32", "bfloat16", ...) or a torch dtype."""
    key = dtype if isinstance(dtype, str) else str(dtype).rsplit(".", 1)[-1]
    code = _DTYPES.get(key.lower())
    if code is None:
        raise TypeError(f"tilejit: dtype {dtype!r} is not f32, f16 or bf16")
    return code


def _c_int(value, what, bits=32):
    """value for a C int (or int64) field: ctypes would silently keep only
    its low bits (num_warps=2**32 + 1 would become 1)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"tilejit: {what} must be an int, not {type(value).__name__}")
    if not -2**(bits - 1) <= value < 2**(bits - 1):
        raise ValueError(f"tilejit: {what} must fit {'a C int' if bits == 32 else 'an int64'}, "
                         f"not {value}")
    return value


def _choice(table, value, what):
    code = table.get(value)
    if code is None:
        raise ValueError(f"tilejit: {what} must be one of {', '.join(table)}, not {value!r}")
    return code


# ---------------------------------------------------------------- contexts

_contexts = {}  # device ordinal (or DEVICE_CURRENT) -> c_void_p
_contexts_lock = threading.Lock()


def _create_context(device):
    options = _ContextOptions(device=_c_int(device, "device"))
    handle = _VP()
    status = _lib.tj_context_create(ctypes.byref(options), ctypes.byref(handle))
    if status:
        raise Error(status, _text(_lib.tj_context_error(None)))
    return handle


def _context(device):
    """The process's context for device (an ordinal or DEVICE_CURRENT),
    created once, whichever threads ask first."""
    ctx = _contexts.get(device)
    if ctx is not None:
        return ctx
    with _contexts_lock:
        ctx = _contexts.get(device)
        if ctx is None:
            ctx = _create_context(device)
            if device == DEVICE_CURRENT:
                ctx = _share(ctx)
            _contexts[device] = ctx
    return ctx


def _share(ctx):
    """Keeps one context per device: a DEVICE_CURRENT context on a device
    that already has one is dropped for the existing one."""
    ordinal = _info(ctx).ordinal
    existing = _contexts.get(ordinal)
    if existing is not None:
        _lib.tj_context_destroy(ctx)
        return existing
    _contexts[ordinal] = ctx
    return ctx


def _default_device():
    """torch's current device when torch has started CUDA, else whatever
    context is current on this thread (device 0's primary context if none)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return torch.cuda.current_device()
    return DEVICE_CURRENT


def _ordinal(device):
    """None (the default device), an int, or an object with .index (a
    torch.device; index None is torch's current device)."""
    if device is None:
        return _default_device()
    if isinstance(device, int):
        return device
    index = getattr(device, "index", False)
    if index is None:
        return _default_device()
    if isinstance(index, int):
        return index
    raise TypeError(f"tilejit: device must be an int or a torch.device, not {device!r}")


def _check(status, ctx):
    if status:
        raise Error(status, _text(_lib.tj_context_error(ctx)) or _status_name(status))


def _info(ctx):
    info = _DeviceInfo()
    _check(_lib.tj_context_device_info(ctx, ctypes.byref(info)), ctx)
    return info


def _as_dict(struct):
    out = {}
    for name, _ in struct._fields_:
        value = getattr(struct, name)
        out[name] = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    return out


def version():
    """The tilejit version this binding was written for ("0.1.0")."""
    return __version__


def device_info(device=None):
    """tj_device_info of the context for device (default: the current one), as a dict."""
    return _as_dict(_info(_context(_ordinal(device))))


def cache_stats(device=None):
    """tj_cache_stats of the context for device (default: the current one), as a dict."""
    ctx = _context(_ordinal(device))
    stats = _CacheStats()
    _check(_lib.tj_context_cache_stats(ctx, ctypes.byref(stats)), ctx)
    return _as_dict(stats)


def synchronize(device=None):
    """Waits for all work in the context for device."""
    ctx = _context(_ordinal(device))
    _check(_lib.tj_context_synchronize(ctx), ctx)


# ------------------------------------------------------- softmax options

# (num_warps, backend, template) -> a tj_softmax_options pointer; None is NULL.
_OPTIONS = {(0, "ptx", "auto"): None}


def _options(num_warps, backend, template):
    """The tj_softmax_options pointer for these options (None: the defaults)."""
    key = (num_warps, backend, template)
    if key in _OPTIONS:
        return _OPTIONS[key]
    struct = _SoftmaxOptions(_c_int(num_warps, "num_warps"), _choice(_BACKENDS, backend, "backend"),
                             _choice(_TEMPLATES, template, "template"))
    pointer = ctypes.pointer(struct)
    _OPTIONS[key] = pointer
    return pointer


# ------------------------------------------- arguments as ctypes objects

_C_DTYPES = (_I(0), _I(1), _I(2))
_ARGS = {}  # int -> its c_uint64: device pointers and streams seen so far
_ARGS_LIMIT = 4096  # past this many, the table starts again


def _arg(value):
    """value, a device pointer or a CUstream (an int), as the c_uint64 the
    raw tj_softmax takes, made once per value: a table look-up costs less
    than making the object anew. The hot path inlines the look-up."""
    arg = _ARGS.get(value)
    if arg is None:
        if type(value) is not int:
            raise TypeError(f"tilejit.softmax: a pointer or stream must be an int, "
                            f"not {type(value).__name__}")
        if not 0 <= value < 2**64:
            raise ValueError(f"tilejit.softmax: {value} is not a 64-bit address")
        if len(_ARGS) >= _ARGS_LIMIT:
            _ARGS.clear()
        arg = _ARGS[value] = _U64(value)
    return arg


def _stream_arg(stream):
    """A caller's stream= (a CUstream as an int) as a c_uint64."""
    if type(stream) is not int:  # bool and float hash like ints: refuse them first
        raise TypeError(f"tilejit.softmax: stream must be a CUstream as an int, "
                        f"not {type(stream).__name__}")
    return _arg(stream)


# ------------------------------------------------------ softmax on torch

_Tensor = type("_NoTensorYet", (), {})  # torch.Tensor once a tensor has been seen
_torch_dtypes = None  # torch dtype -> tj_dtype
_raw_stream = None  # device -> torch's current CUstream as an int
_plans = {}  # layout key (see softmax) -> the prepared arguments of its calls
_PLANS_LIMIT = 1024


def _init_torch(torch):
    global _Tensor, _torch_dtypes, _raw_stream
    get = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    _raw_stream = get or (lambda device: torch.cuda.current_stream(device).cuda_stream)
    _torch_dtypes = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
    _Tensor = torch.Tensor
    for op in _FAST_OPS:
        op.configure(torch.Tensor, _raw_stream)


def _matrix_of_tensor(t, what, api="tilejit.softmax"):
    """(m, n, row stride) of a 1-D or 2-D tensor with a contiguous last dim."""
    shape = t.shape
    if len(shape) == 2:
        m, n = shape
        if n > 1 and t.stride(1) != 1:
            raise ValueError(f"{api}: {what}'s last dimension is not contiguous "
                             f"(strides {tuple(t.stride())})")
        return m, n, t.stride(0)
    if len(shape) == 1:
        n = shape[0]
        if n > 1 and t.stride(0) != 1:
            raise ValueError(f"{api}: {what} is not contiguous (stride {t.stride(0)})")
        return 1, n, n
    raise ValueError(f"{api}: {what} must be 1-D or 2-D, not {len(shape)}-D")


def _out_stride(x, out, device, api="tilejit.softmax"):
    """out's row stride, after checking that it is a tensor like x."""
    if not isinstance(out, _Tensor):
        raise TypeError(f"{api}: out must be a torch.Tensor like x, not {type(out).__name__}")
    if out.dtype != x.dtype:
        raise TypeError(f"{api}: out is {out.dtype} but x is {x.dtype}")
    if out.shape != x.shape:
        raise ValueError(f"{api}: out has shape {tuple(out.shape)}, x {tuple(x.shape)}")
    if out.get_device() != device:
        raise ValueError(f"{api}: out is on {out.device}, x on {x.device}")
    return _matrix_of_tensor(out, "out", api)[2]


def _allocator(torch, x, n):
    """How a call of this layout makes its output: empty_like(x) when x is
    exactly contiguous (it then returns the same strides), else a new
    contiguous tensor of x's shape, dtype and device."""
    shape = tuple(x.shape)
    if x.stride() == ((n, 1) if len(shape) == 2 else (1,)):
        return torch.empty_like
    dtype, device = x.dtype, x.device
    return lambda _: torch.empty(shape, dtype=dtype, device=device)


def _plan_tensor_call(torch, x, out, key, num_warps, backend, template, api="tilejit.softmax"):
    """Checks a layout seen for the first time and keeps, under its key
    (unless None), what every call with that layout passes (ctypes objects):
    the context, dtype, m, n, strides, device, options and output allocator,
    then the same arguments as plain ints for the C hot path; returns it. Raises what the layout is wrong for; nothing is kept then."""
    options = _options(num_warps, backend, template)
    dtype = _torch_dtypes.get(x.dtype)
    if dtype is None:
        raise TypeError(f"{api}: x is {x.dtype}; tilejit takes float32, float16, bfloat16")
    if not x.is_cuda:
        raise ValueError(f"{api}: x is on {x.device}; tilejit needs a CUDA tensor")
    m, n, x_stride = _matrix_of_tensor(x, "x", api)
    device = x.get_device()
    allocate = None
    if out is None:
        allocate = _allocator(torch, x, n)
        y_stride = n
    elif out is x:
        y_stride = x_stride
    else:
        y_stride = _out_stride(x, out, device, api)
    ctx = _contexts.get(device) or _context(device)
    # The same arguments as plain ints, for the C hot path (_tilejit_fast).
    raw = (ctx.value or 0, dtype, m, n, y_stride, x_stride,
           ctypes.cast(options, ctypes.c_void_p).value or 0 if options else 0, device)
    plan = (ctx, _C_DTYPES[dtype], _I64(m), _I64(n), _I64(y_stride), _I64(x_stride), device,
            options, allocate, raw)
    if key is not None:
        if len(_plans) >= _PLANS_LIMIT:
            _plans.clear()
        _plans[key] = plan
    return plan


# ------------------------------------- softmax on __cuda_array_interface__


def _interface_dtype(iface, what, api):
    """tj_dtype of an interface: '<f4', '<f2', or bfloat16 when the object says
    so: a 2-byte void typestr whose descr names 'bfloat16', or typestr 'bf16'."""
    typestr = iface.get("typestr", "")
    if typestr in ("<f4", "=f4"):
        return 0
    if typestr in ("<f2", "=f2"):
        return 1
    if typestr.lower() in ("bf16", "bfloat16", "<bf16"):
        return 2
    if typestr in ("<V2", "|V2"):
        names = [str(field[0]).lower() for field in iface.get("descr") or ()]
        if names and names[0] in ("bfloat16", "bf16"):
            return 2
    raise TypeError(f"{api}: {what} has typestr {typestr!r}; tilejit takes '<f4', "
                    "'<f2' and bfloat16 (typestr '<V2' with descr [('bfloat16', '<V2')])")


def _interface_matrix(obj, what, writable, api="tilejit.softmax"):
    """(dtype, shape, m, n, row stride in elements, pointer, stream) of an
    object with __cuda_array_interface__."""
    iface = getattr(obj, "__cuda_array_interface__", None)
    if not isinstance(iface, dict):
        raise TypeError(f"{api}: {what} ({type(obj).__name__}) is neither a torch "
                        "tensor nor an object with __cuda_array_interface__")
    if iface.get("mask") is not None:
        raise ValueError(f"{api}: {what} has a mask; masked arrays are not supported")
    dtype = _interface_dtype(iface, what, api)
    size = _DTYPE_SIZES[dtype]
    shape = tuple(iface["shape"])
    strides = iface.get("strides")
    strides = tuple(strides) if strides is not None else None
    if len(shape) not in (1, 2):
        raise ValueError(f"{api}: {what} must be 1-D or 2-D, not {len(shape)}-D")
    m, n = (1, shape[0]) if len(shape) == 1 else shape
    if strides is None:
        row_bytes, col_bytes = n * size, size
    else:
        row_bytes, col_bytes = (n * size, strides[0]) if len(shape) == 1 else strides
    if n > 1 and col_bytes != size:
        raise ValueError(f"{api}: {what}'s last dimension is not contiguous "
                         f"(strides {strides} bytes)")
    if row_bytes % size:
        raise ValueError(f"{api}: {what}'s row stride {row_bytes} is not a "
                         f"multiple of the element size {size}")
    pointer, readonly = iface["data"]
    if writable and readonly:
        raise ValueError(f"{api}: {what} is read-only")
    stream = iface.get("stream")
    return dtype, shape, m, n, row_bytes // size, pointer or 0, stream or 0


def _softmax_interface(fn, x, out, options, stream, api="tilejit.softmax"):
    dtype, shape, m, n, x_stride, x_ptr, x_stream = _interface_matrix(x, "x", False, api)
    device = _default_device()
    ctx = _context(device)
    if out is None:
        out = DeviceArray(shape, _DTYPE_NAMES[dtype], device=device)
    y_dtype, _, y_m, y_n, y_stride, y_ptr, _ = _interface_matrix(out, "out", True, api)
    if y_dtype != dtype:
        raise TypeError(f"{api}: out is {_DTYPE_NAMES[y_dtype]} but x is {_DTYPE_NAMES[dtype]}")
    if (y_m, y_n) != (m, n):
        raise ValueError(f"{api}: out is {y_m}x{y_n}, x {m}x{n}")
    if stream is None:
        stream = x_stream
    status = fn(ctx, dtype, m, n, y_ptr, y_stride, x_ptr, x_stride, stream, options)
    _check(status, ctx)
    if isinstance(out, DeviceArray):
        out._stream = stream or 1
    return out


def _row_op(which, checked):
    """The Python function of a row op (tj_softmax, tj_log_softmax): _RAW[which]
    is its C function without argtypes (the hot path), checked with them."""

    def op(x, out=None, *, num_warps=0, backend="ptx", template="auto", stream=None):
        # The hot path, for torch tensors: one dictionary look-up on the layout
        # (dtype, shape, strides, device of x and out, and the options) finds
        # everything checked and converted by the first call of that layout;
        # then only the pointers and the stream are read, and the raw C
        # function is called with ctypes objects. Written out flat, since
        # each Python call or attribute read here is a measurable share of the
        # few microseconds a launch costs.
        if isinstance(x, _Tensor):
            if out is None:
                out_key = None
            elif out is x:
                out_key = True
            elif isinstance(out, _Tensor):
                out_key = (out.dtype, out.shape, out.stride(), out.get_device(), out.is_cuda)
            else:
                out_key = False  # never planned: the first call's checks raise
            key = (x.dtype, x.shape, x.stride(), x.get_device(), x.is_cuda, out_key, num_warps,
                   backend, template)
            plan = _plans.get(key)
            if plan is None:
                plan = _plan_tensor_call(sys.modules["torch"], x, out, key, num_warps, backend,
                                         template)
            ctx, dtype, m, n, y_stride, x_stride, device, options, allocate, _ = plan
            if out is None:
                out = allocate(x)
            pointer = out.data_ptr()
            y_arg = _ARGS.get(pointer)
            if y_arg is None:
                y_arg = _arg(pointer)
            pointer = x.data_ptr()
            x_arg = _ARGS.get(pointer)
            if x_arg is None:
                x_arg = _arg(pointer)
            if stream is None:
                stream = _raw_stream(device)
                stream_arg = _ARGS.get(stream)
                if stream_arg is None:
                    stream_arg = _arg(stream)
            else:
                stream_arg = _stream_arg(stream)
            status = _RAW[which](ctx, dtype, m, n, y_arg, y_stride, x_arg, x_stride, stream_arg,
                                 options)
            if status:
                raise Error(status, _text(_lib.tj_context_error(ctx)) or _status_name(status))
            return out
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(x, torch.Tensor):  # the first tensor seen
            _init_torch(torch)
            return op(x, out, num_warps=num_warps, backend=backend, template=template,
                      stream=stream)
        options = _options(num_warps, backend, template)
        return _softmax_interface(checked, x, out, options, stream)

    return op


softmax = _row_op(0, _tj_softmax)
softmax.__name__ = softmax.__qualname__ = "softmax"
softmax.__doc__ = """out = softmax(x) over the last dimension; returns out.

    x: a CUDA torch tensor or an object with __cuda_array_interface__,
    1-D (one row) or 2-D, float32/float16/bfloat16, last dimension
    contiguous, any row stride. out: None (a new contiguous array: a torch
    tensor for torch input, else a DeviceArray), an array like x, or x
    itself (in place). num_warps: 0 (tilejit's choice) or 1..32, a power of
    two. backend: "ptx" or "nvrtc". template: "auto", "single", "online".
    stream: a CUstream as an int; by default torch's current stream for
    torch tensors, else the interface's 'stream' (the legacy default stream
    when it has none). The launch is asynchronous on that stream.
    """

log_softmax = _row_op(1, _tj_log_softmax)
log_softmax.__name__ = log_softmax.__qualname__ = "log_softmax"
log_softmax.__doc__ = """out = log_softmax(x) over the last dimension; returns out. Everything
    as softmax (arguments, layouts, in place, streams, errors), with
    (x - max) - log(sum(exp(x - max))) for the result: torch.log_softmax."""


# ------------------------------------------- the hot path in C (optional)

_FAST_ABI = 2  # FAST_ABI in tilejit_fast.c


def _load_fast():
    """The extension _tilejit_fast (python/tilejit_fast.c), or None: as
    installed beside this module (pip install ./python builds it where
    Python's headers and a C compiler are present), else from the python/
    folder of the build tree the library was loaded from (CMake builds it
    there). TILEJIT_PURE_PYTHON=1 keeps to Python and ctypes."""
    if os.environ.get("TILEJIT_PURE_PYTHON", "") not in ("", "0"):
        return None
    import importlib.machinery
    import importlib.util
    spec = importlib.util.find_spec("_tilejit_fast")
    if spec is None:
        folder = os.path.join(os.path.dirname(library_path), "python")
        spec = importlib.machinery.PathFinder.find_spec("_tilejit_fast", [folder])
    if spec is None:
        return None
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError:
        return None
    return module if getattr(module, "ABI", None) == _FAST_ABI else None


def _fail(status, ctx):
    """Raises what a failed row op raises (the C hot path's error)."""
    ctx = ctypes.c_void_p(ctx)
    raise Error(status, _text(_lib.tj_context_error(ctx)) or _status_name(status))


def _with_fast(op, raw):
    """op with its hot path for torch tensors in C, when the extension
    loaded; op itself otherwise."""
    if _fast is None:
        return op
    fast = _fast.row_op(op, _plans, _fail, ctypes.cast(raw, ctypes.c_void_p).value, raw)
    for name in ("__name__", "__qualname__", "__doc__", "__module__"):
        setattr(fast, name, getattr(op, name))
    fast.__wrapped__ = op  # inspect.signature reads op's
    _FAST_OPS.append(fast)
    return fast


def _set_raw(which, fn):
    """Makes row op which (0 softmax, 1 log_softmax) call fn, a ctypes
    function (tests put recorders here), on both paths."""
    _RAW[which] = fn
    for op in _FAST_OPS:
        if op.__wrapped__ is (_softmax_py, _log_softmax_py)[which]:
            op.set_function(ctypes.cast(fn, ctypes.c_void_p).value, fn)


_fast = _load_fast()
_FAST_OPS = []
_softmax_py, _log_softmax_py = softmax, log_softmax
softmax = _with_fast(softmax, _RAW[0])
log_softmax = _with_fast(log_softmax, _RAW[1])


def softmax_backward(dy, y, out=None, *, num_warps=0, backend="ptx", template="auto",
                     stream=None):
    """out = y * (dy - sum(dy * y)) over the last dimension; returns out: the
    gradient of softmax given its output y and the gradient dy of the loss
    with respect to y (torch's softmax backward, autograd's for
    torch.softmax).

    dy, y and out: alike, as x and out of softmax (torch tensors, or objects
    with __cuda_array_interface__, 1-D or 2-D, each with its own row
    stride); out may be dy or y itself (in place). The options and streams
    as softmax's. Launches through tj_softmax_backward, its checks included.
    """
    options = _options(num_warps, backend, template)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(y, torch.Tensor):
        _init_torch(torch)
        mats = [_backward_tensor(t, what, y) for t, what in ((dy, "dy"), (y, "y"))]
        if out is None:
            out = torch.empty(tuple(y.shape), dtype=y.dtype, device=y.device)
        mats.append(_backward_tensor(out, "out", y))
        device = y.get_device()
        ctx = _contexts.get(device) or _context(device)
        if stream is None:
            stream = _raw_stream(device)
        dtype = _torch_dtypes[y.dtype]
    else:
        mats = [_interface_matrix(a, what, False, "tilejit.softmax_backward")
                for a, what in ((dy, "dy"), (y, "y"))]
        if out is None:
            out = DeviceArray(mats[1][1], _DTYPE_NAMES[mats[1][0]], device=_default_device())
        mats.append(_interface_matrix(out, "out", True, "tilejit.softmax_backward"))
        for what, mat in zip(("dy", "out"), (mats[0], mats[2])):
            if mat[:2] != mats[1][:2]:
                raise ValueError(f"tilejit.softmax_backward: {what} is {_DTYPE_NAMES[mat[0]]} "
                                 f"{mat[1]}, y {_DTYPE_NAMES[mats[1][0]]} {mats[1][1]}")
        ctx = _context(_default_device())
        if stream is None:
            stream = mats[1][6]
        dtype = mats[1][0]
        mats = [mat[2:6] for mat in mats]
    (m, n, dy_stride, dy_ptr), (_, _, y_stride, y_ptr), (_, _, dx_stride, dx_ptr) = mats
    if type(stream) is not int:
        raise TypeError("tilejit.softmax_backward: stream must be a CUstream as an int, "
                        f"not {type(stream).__name__}")
    _check(_lib.tj_softmax_backward(ctx, dtype, m, n, dx_ptr, dx_stride, y_ptr, y_stride, dy_ptr,
                                    dy_stride, stream, options), ctx)
    if isinstance(out, DeviceArray):
        out._stream = stream or 1
    return out


def _backward_tensor(t, what, y):
    """(m, n, row stride, pointer) of a tensor of softmax_backward, checked
    against y."""
    if not isinstance(t, _Tensor):
        raise TypeError(f"tilejit.softmax_backward: {what} must be a torch.Tensor like y, "
                        f"not {type(t).__name__}")
    if t.dtype not in _torch_dtypes:
        raise TypeError(f"tilejit.softmax_backward: {what} is {t.dtype}; "
                        "tilejit takes float32, float16, bfloat16")
    if t.dtype != y.dtype or t.shape != y.shape:
        raise ValueError(f"tilejit.softmax_backward: {what} is {t.dtype} {tuple(t.shape)}, "
                         f"y {y.dtype} {tuple(y.shape)}")
    if not t.is_cuda or t.get_device() != y.get_device():
        raise ValueError(f"tilejit.softmax_backward: {what} is on {t.device}, y on {y.device}; "
                         "all must be on one CUDA device")
    m, n, stride = _matrix_of_tensor(t, what, "tilejit.softmax_backward")
    return m, n, stride, t.data_ptr()


def masked_softmax(x, out=None, *, scale=1.0, causal=False, offset=0, rows=0, num_warps=0,
                   backend="ptx", template="auto", stream=None):
    """out = softmax(scale * x) over the kept columns of each row, exactly 0
    in the others; returns out: the weights of attention, one row per query
    (tj_masked_softmax).

    causal=False keeps every column. causal=True keeps column j of row r
    while j <= r % rows + offset: rows is the number of queries of one
    attention matrix, x being all of them stacked (M = batch * heads *
    rows; 0, the default, means M), and offset 0 is torch.tril's causal mask
    (top left), offset n - rows the bottom-right one. offset and rows apply
    to causal=True only. scale: positive and finite as a float32 (1 /
    sqrt(head size)). A row that keeps no column, or whose kept scores are
    all -inf, comes out all 0 (as scaled_dot_product_attention's safe
    softmax); +inf or NaN among the kept scores make the row NaN. Dropped
    columns are not read.

    x, out and the options, streams and errors as softmax's (x: 1-D or 2-D,
    float32/float16/bfloat16, any row stride; out may be x itself).
    """
    api = "tilejit.masked_softmax"
    mask = _mask(scale, causal, offset, rows)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        _init_torch(torch)
        ctx, dtype, m, n, y_stride, x_stride, device, options, allocate, _ = _plan_tensor_call(
            torch, x, out, None, num_warps, backend, template, api)
        if out is None:
            out = allocate(x)
        if stream is None:
            stream = _raw_stream(device)
        if type(stream) is not int:
            raise TypeError(f"{api}: stream must be a CUstream as an int, not "
                            f"{type(stream).__name__}")
        _check(_tj_masked_softmax(ctx, dtype, m, n, out.data_ptr(), y_stride, x.data_ptr(),
                                  x_stride, mask, stream, options), ctx)
        return out

    def launch(ctx, dtype, m, n, y_ptr, y_stride, x_ptr, x_stride, stream, options):
        if type(stream) is not int:
            raise TypeError(f"{api}: stream must be a CUstream as an int, not "
                            f"{type(stream).__name__}")
        return _tj_masked_softmax(ctx, dtype, m, n, y_ptr, y_stride, x_ptr, x_stride, mask,
                                  stream, options)

    options = _options(num_warps, backend, template)
    return _softmax_interface(launch, x, out, options, stream, api)


def _mask(scale, causal, offset, rows):
    """The tj_softmax_mask of masked_softmax's arguments, checked as
    tj_masked_softmax checks them (and offset, rows with causal only)."""
    api = "tilejit.masked_softmax"
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"{api}: scale must be a float, not {type(scale).__name__}")
    try:
        scale32 = ctypes.c_float(float(scale)).value
    except OverflowError:  # an int past any float
        scale32 = float("inf")
    if not 0.0 < scale32 < float("inf"):
        raise ValueError(f"{api}: scale must be positive and finite as a float32, not "
                         f"{repr(scale):.40}")
    if not isinstance(causal, bool):
        raise TypeError(f"{api}: causal must be True or False, not {causal!r}")
    for name, value, low in (("offset", offset, -2**63), ("rows", rows, 0)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{api}: {name} must be an int, not {type(value).__name__}")
        high = 2**63 - 1 if name == "offset" else 2**31 - 1
        if not low <= value <= high:
            raise ValueError(f"{api}: {name} must be from {low} to {high}, not {value}")
        if value and not causal:
            raise ValueError(f"{api}: {name}={value} applies to causal=True only")
    return ctypes.byref(_SoftmaxMask(scale32, int(causal), rows, offset))


def _prepared_softmax(x, out):
    """A zero-argument callable that makes only the foreign call softmax(x,
    out=out) would make (torch tensors), with the same prepared arguments:
    for measuring the binding's own share of the host time per launch."""
    softmax(x, out=out)  # checks, creates the context, compiles
    ctx, dtype, m, n, y_stride, x_stride, device, options, _, _ = _plan_tensor_call(
        sys.modules["torch"], x, out, None, 0, "ptx", "auto")
    args = (ctx, dtype, m, n, _arg(out.data_ptr()), y_stride, _arg(x.data_ptr()), x_stride,
            _arg(_raw_stream(device)), options)
    raw = _RAW[0]
    return lambda: raw(*args)


# --------------------------------------------------------------- Function

_ARG_PTR, _ARG_INT, _ARG_FLOAT = 0, 1, 2


class Function:
    """A program in the text form bound to a device's context and specialized
    on each launch's arguments (tj_function): ALIGN from the pointers and
    row strides given, BLOCK from the size parameter's value (size_param)
    or fixed (block), and phased (16-byte vectors from each row's own
    boundary) where rows start off 16 bytes at one shared phase. Each
    variant compiles once.

    dtype binds DTYPE; constants ({"NAME": int}) bind the program's own
    constants; num_warps 0 is tilejit's choice; backend "ptx" or "nvrtc".
    Launch with f[grid](*args, stream=None) or f.launch(grid, *args,
    stream=None): args in parameter order, each a torch tensor or an object
    with __cuda_array_interface__ (a pointer), an int or a float. The stream
    is by default torch's current one when an argument is a torch tensor,
    else the first interface's 'stream', else the legacy default stream.
    """

    def __init__(self, text, dtype="f32", *, size_param=None, block=0, num_warps=0,
                 constants=None, backend="ptx", device=None):
        self._handle = None
        if isinstance(text, str):
            text = text.encode("utf-8")
        if not isinstance(text, (bytes, bytearray)):
            raise TypeError(f"tilejit.Function: text must be str or bytes, not "
                            f"{type(text).__name__}")
        if size_param is None and not block:
            raise ValueError("tilejit.Function: give size_param (BLOCK = next_pow2 of its "
                             "value) or block")
        names = list((constants or {}).items())
        self._bindings = (_Binding * max(len(names), 1))(
            *[_Binding(str(k).encode(), _c_int(v, f"constant {k}", 64)) for k, v in names])
        self._size_param = size_param.encode() if size_param is not None else None
        options = _FunctionOptions(
            _dtype_code(dtype), _c_int(num_warps, "num_warps"), _c_int(block, "block", 64),
            self._size_param, self._bindings if names else None, len(names),
            _choice(_BACKENDS, backend, "backend"))
        self._ctx = _context(_ordinal(device))
        self._device = _info(self._ctx).ordinal
        program = _VP()
        status = _lib.tj_program_parse(bytes(text), len(text), ctypes.byref(program))
        try:
            if status:
                raise Error(status, _text(_lib.tj_program_error(program)) if program.value
                            else _status_name(status))
            handle = _VP()
            _check(_lib.tj_function_create(self._ctx, program, ctypes.byref(options),
                                           ctypes.byref(handle)), self._ctx)
            self._handle = handle
        finally:
            _lib.tj_program_destroy(program)

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            try:
                _lib.tj_function_destroy(handle)
            except Exception:  # interpreter shutdown: the process frees it
                pass

    @property
    def variants(self):
        """The variants compiled so far."""
        return _lib.tj_function_variants(self._handle)

    def __getitem__(self, grid):
        return lambda *args, stream=None: self.launch(grid, *args, stream=stream)

    def launch(self, grid, *args, stream=None):
        if not self._handle:
            raise ValueError("tilejit.Function: destroyed")
        grid = _c_int(grid, "grid", 64)
        array = (_Arg * max(len(args), 1))()
        streams = [None, None]  # torch's current stream, the first interface's
        for i, value in enumerate(args):
            kind, field, value, found, from_torch = _launch_arg(value, i, self._device)
            array[i].kind = kind
            setattr(array[i].u, field, value)
            if found is not None and streams[0 if from_torch else 1] is None:
                streams[0 if from_torch else 1] = found
        if stream is None:
            stream = streams[0] if streams[0] is not None else streams[1]
        stream = stream or 0
        if type(stream) is not int:
            raise TypeError(f"tilejit.Function: stream must be a CUstream as an int, not "
                            f"{type(stream).__name__}")
        _check(_lib.tj_function_launch(self._handle, array, len(args), grid, stream or None),
               self._ctx)


def _launch_arg(value, i, device):
    """(kind, union field, value, stream or None, from torch) of launch
    argument i, for a Function on device (an ordinal). A tensor must be a
    CUDA tensor there; its dtype is the caller's to match with the
    program's pointee (tilejit sees only the address)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        if not value.is_cuda or value.get_device() != device:
            raise ValueError(f"tilejit.Function: argument {i} is on {value.device}; the "
                             f"function runs on cuda:{device}")
        if _raw_stream is None:
            _init_torch(torch)
        return _ARG_PTR, "ptr", value.data_ptr() or None, _raw_stream(device), True
    iface = getattr(value, "__cuda_array_interface__", None)
    if isinstance(iface, dict):
        return _ARG_PTR, "ptr", iface["data"][0] or None, iface.get("stream"), False
    if isinstance(value, bool):
        raise TypeError(f"tilejit.Function: argument {i} is a bool; give an int")
    if isinstance(value, int):
        return _ARG_INT, "i", _c_int(value, f"argument {i}", 64), None, False
    if isinstance(value, float):
        return _ARG_FLOAT, "f", value, None, False
    raise TypeError(f"tilejit.Function: argument {i} ({type(value).__name__}) is no tensor, "
                    "__cuda_array_interface__ object, int or float")


# ------------------------------------------------------------ DeviceArray


class DeviceArray:
    """Device memory from tj_device_alloc, exposing __cuda_array_interface__:
    what softmax returns for non-torch input without out. Contiguous."""

    def __init__(self, shape, dtype="f32", device=None):
        self.shape = tuple(int(s) for s in ((shape,) if isinstance(shape, int) else shape))
        if any(s < 0 for s in self.shape):
            raise ValueError(f"tilejit.DeviceArray: negative shape {self.shape}")
        self.dtype = _DTYPE_NAMES[_dtype_code(dtype)]
        self.itemsize = _DTYPE_SIZES[_dtype_code(dtype)]
        count = 1
        for s in self.shape:
            count *= s
        self.nbytes = count * self.itemsize
        self._ctx = _context(_ordinal(device))
        self._stream = None
        self.ptr = 0
        pointer = _U64(0)
        if self.nbytes:
            _check(_lib.tj_device_alloc(self._ctx, self.nbytes, ctypes.byref(pointer)), self._ctx)
        self.ptr = pointer.value

    def __del__(self):
        pointer, self.ptr = getattr(self, "ptr", 0), 0
        if pointer:
            try:
                _lib.tj_device_free(self._ctx, pointer)
            except Exception:  # interpreter shutdown: the process frees it
                pass

    @property
    def __cuda_array_interface__(self):
        typestr = {"f32": "<f4", "f16": "<f2", "bf16": "<V2"}[self.dtype]
        descr = [("bfloat16" if self.dtype == "bf16" else "", typestr)]
        return {"shape": self.shape, "typestr": typestr, "descr": descr, "strides": None,
                "data": (self.ptr, False), "version": 3, "stream": self._stream}

    def copy_from_host(self, data):
        """Copies a bytes-like object of exactly nbytes to the device (synchronous)."""
        view = memoryview(data).cast("B")
        if view.nbytes != self.nbytes:
            raise ValueError(f"tilejit.DeviceArray: {view.nbytes} bytes given, {self.nbytes} held")
        if self.nbytes:
            buffer = (ctypes.c_char * self.nbytes).from_buffer_copy(view)
            _check(_lib.tj_copy_to_device(self._ctx, self.ptr, buffer, self.nbytes), self._ctx)

    def copy_to_host(self):
        """Waits for the context's work, then returns the contents as bytes."""
        buffer = ctypes.create_string_buffer(self.nbytes)
        if self.nbytes:
            _check(_lib.tj_context_synchronize(self._ctx), self._ctx)
            _check(_lib.tj_copy_to_host(self._ctx, buffer, self.ptr, self.nbytes), self._ctx)
        return buffer.raw

    def __repr__(self):
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype!r}, ptr={self.ptr:#x})"


# --------------------------------------------------------------- dump_ptx


def _take_string(pointer):
    try:
        return ctypes.string_at(pointer.value).decode("utf-8", "replace")
    finally:
        _lib.tj_free(pointer)


def dump_ptx(n, dtype="f32", num_warps=0, arch=90, *, align=16, backend="ptx", emit="ptx",
             rows=65536):
    """The code tilejit generates for softmax over rows of n elements: PTX
    (emit="ptx", from backend "ptx" or "nvrtc") or CUDA C (emit="cuda"),
    as planned for `rows` rows on the GPU a tj_context would see (without
    one, a nominal device of the arch). align is the byte alignment of
    pointers and row strides to specialize for (16 is what tilejit.softmax
    picks for torch's allocations). Needs no GPU; backend "nvrtc" needs
    libnvrtc, and runs a row on one CTA."""
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"tilejit.dump_ptx: n must be an int >= 0, not {n!r}")
    code = _dtype_code(dtype)
    emitter = {("ptx", "ptx"): _lib.tj_emit_ptx, ("nvrtc", "ptx"): _lib.tj_nvrtc_ptx,
               ("ptx", "cuda"): _lib.tj_emit_cuda, ("nvrtc", "cuda"): _lib.tj_emit_cuda}
    emit_fn = emitter.get((backend, emit))
    if emit_fn is None:
        raise ValueError(f"tilejit.dump_ptx: backend must be 'ptx' or 'nvrtc' and emit 'ptx' "
                         f"or 'cuda', not {backend!r}, {emit!r}")
    plan = _SoftmaxPlan()
    wanted = _SoftmaxOptions(num_warps=_c_int(num_warps, "num_warps"))
    if backend == "nvrtc" or emit == "cuda":
        wanted.cluster = wanted.split = 1
    status = _lib.tj_softmax_plan_for(None, code, rows, n, ctypes.byref(wanted), ctypes.byref(plan))
    if status:
        raise Error(status, f"tj_softmax_plan_for: no plan for {rows} rows of {n} with "
                            f"num_warps={num_warps} (1, 2, 4, 8, 16 or 32; 0: the plan's)")
    program = _VP()
    status = _lib.tj_softmax_program(plan.which, n, ctypes.byref(program))
    try:
        if status:
            message = _text(_lib.tj_program_error(program)) if program.value else ""
            raise Error(status, message or f"tj_softmax_program: {_status_name(status)} (n = {n})")
        return _emit_softmax(program, plan, code, n, align, arch, emit_fn)
    finally:
        _lib.tj_program_destroy(program)


def _emit_softmax(program, plan, dtype, n, align, arch, emit_fn):
    options = _SpecOptions()
    status = _lib.tj_softmax_spec_options(ctypes.byref(plan), dtype, n, ctypes.byref(options))
    if status:
        raise Error(status, f"tj_softmax_spec_options: no specialization for n = {n}")
    options.align = _c_int(align, "align")
    spec = _VP()
    status = _lib.tj_specialize(program, ctypes.byref(options), ctypes.byref(spec))
    try:
        if status:
            raise Error(status, _text(_lib.tj_program_error(program)) or _status_name(status))
        text = _VP()
        codegen = _CodegenOptions(arch=_c_int(arch, "arch"))
        status = emit_fn(spec, ctypes.byref(codegen), ctypes.byref(text), None)
        if status:
            raise Error(status, _text(_lib.tj_spec_error(spec)) or _status_name(status))
        return _take_string(text)
    finally:
        _lib.tj_spec_destroy(spec)
