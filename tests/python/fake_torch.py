"""A stand-in for the few parts of torch that tilejit.softmax reads, so that
its torch path (checks, the per-layout argument cache, what reaches the C
call) can be tested on a machine with no GPU and no torch.

install() puts it in sys.modules as "torch"; it must run in a process of
its own (test_softmax_args.py starts one per test) before tilejit sees a
tensor. Tensors hold no data: a shape, strides in elements, a dtype, a
device ("cuda:N" or "cpu") and a made-up data pointer. empty_like and empty
return new contiguous tensors at fresh addresses; CURRENT_STREAM is what
torch._C._cuda_getCurrentRawStream answers.
"""

import sys
import types

CURRENT_STREAM = [0x5000]
STREAM_QUERIES = []  # the device of each current-stream query
_next_address = [0x7F0000000000]


class dtype:
    def __init__(self, name, size):
        self.name, self.itemsize = name, size

    def __repr__(self):
        return f"torch.{self.name}"


float32, float16, bfloat16, float64 = (dtype("float32", 4), dtype("float16", 2),
                                       dtype("bfloat16", 2), dtype("float64", 8))


def _address(nbytes):
    address = _next_address[0]
    _next_address[0] += (nbytes + 511) // 512 * 512 + 512
    return address


def _contiguous_strides(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


class Tensor:
    def __init__(self, shape, dtype=float32, device="cuda:0", strides=None, pointer=None):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.device = device
        self._strides = tuple(strides) if strides is not None else _contiguous_strides(shape)
        count = 1
        for size in self.shape:
            count *= size
        self._pointer = pointer if pointer is not None else _address(count * dtype.itemsize)

    @property
    def is_cuda(self):
        return self.device.startswith("cuda")

    def get_device(self):
        return int(self.device.split(":")[1]) if self.is_cuda else -1

    def stride(self, dim=None):
        return self._strides if dim is None else self._strides[dim]

    def data_ptr(self):
        return self._pointer

    def view_of(self, shape, strides, offset=0):
        """A view of this tensor's memory: shape, strides, offset in elements."""
        return Tensor(shape, self.dtype, self.device, strides,
                      self._pointer + offset * self.dtype.itemsize)


def empty_like(t):
    return Tensor(t.shape, t.dtype, t.device)


def empty(shape, dtype=float32, device="cuda:0"):
    return Tensor(shape, dtype, device)


def _current_stream(device):
    STREAM_QUERIES.append(device)
    return CURRENT_STREAM[0]


def install():
    module = types.ModuleType("torch")
    for name in ("float32", "float16", "bfloat16", "float64", "Tensor", "empty_like", "empty"):
        setattr(module, name, globals()[name])
    module._C = types.SimpleNamespace(_cuda_getCurrentRawStream=_current_stream)
    module.cuda = types.SimpleNamespace(is_initialized=lambda: True, current_device=lambda: 0,
                                        is_available=lambda: False)
    sys.modules["torch"] = module
    return module
