"""How flashpp sees each array framework: the view it hands to the C++ core,
how it allocates outputs and scratch memory, and which stream it runs on.

NumPy and torch arrays become spec tuples (address, dtype code, shape,
strides in elements, device kind, device index) read straight from the
array, which is zero-copy and costs no DLPack round trip; NumPy's bfloat16
and float8 (ml_dtypes) have no DLPack type, and torch's __dlpack__ would
synchronize streams, which CUDA graph capture forbids. Any other array goes
through DLPack, exported for the stream the kernels will run on.
"""

import sys

from . import _core
from ._errors import fail

# Values of flashpp::DType (include/flashpp/tensor.hpp).
DTYPE_CODES = {
    "float32": 0,
    "float16": 1,
    "bfloat16": 2,
    "float64": 3,
    "int32": 4,
    "float8_e4m3fn": 5,
}
CPU, CUDA = 0, 1

# DLPack stream value meaning "the legacy default stream" (0 is reserved).
_DLPACK_LEGACY_STREAM = 1
_DLPACK_CUDA_DEVICES = (2, 13)  # kDLCUDA, kDLCUDAManaged


def _same_framework(x, cls, framework, argument):
    if not isinstance(x, cls):
        fail("type", argument, f"must be a {framework} array like q, got {type(x).__module__}.{type(x).__qualname__}")


def _element_strides(x, argument):
    """Byte strides (NumPy, CuPy) in elements. An empty array's strides are
    arbitrary (NumPy reports zeros), so it gets the row-major ones."""
    if x.size == 0:
        strides, step = [], 1
        for n in reversed(x.shape):
            strides.append(step)
            step *= max(int(n), 1)
        return tuple(reversed(strides))
    size = x.itemsize
    out = []
    for s in x.strides:
        if s % size:
            fail("value", argument, f"strides must be whole elements, got {x.strides} bytes")
        out.append(s // size)
    return tuple(out)


def _dtype_code(name, argument):
    code = DTYPE_CODES.get(name)
    if code is None:
        fail("type", argument, f"unsupported dtype {name}")
    return code


class NumpyArrays:
    """NumPy arrays on the host; bfloat16/float8 come from ml_dtypes."""

    name = "numpy"

    def __init__(self):
        import numpy

        self.np = numpy

    def spec(self, x, argument, writable=False):
        _same_framework(x, self.np.ndarray, "NumPy", argument)
        if writable and not x.flags.writeable:
            fail("value", argument, "must be writable")
        return (x.__array_interface__["data"][0], _dtype_code(x.dtype.name, argument), x.shape,
                _element_strides(x, argument), CPU, 0)

    def empty(self, like, shape, dtype=None):
        return self.np.empty(shape, dtype=like.dtype if dtype is None else self.np.dtype(dtype))

    def stream(self, like):
        return 0

    def allocator(self, like):
        np = self.np

        def alloc(nbytes):
            # The CPU backend wants 64-byte aligned scratch memory.
            buf = np.empty(nbytes + 64, dtype=np.uint8)
            address = buf.__array_interface__["data"][0]
            return buf, (address + 63) & ~63

        return alloc

    def is_cuda(self, x):
        return False

    def finish(self, like):
        """Nothing to wait for: the work is ordered on the framework's own stream."""


class TorchArrays:
    """torch tensors on the CPU or a CUDA device, launched on the current stream."""

    name = "torch"

    def __init__(self):
        import torch

        self.torch = torch
        t = torch
        self.codes = {t.float32: 0, t.float16: 1, t.bfloat16: 2, t.float64: 3, t.int32: 4}
        if hasattr(t, "float8_e4m3fn"):
            self.codes[t.float8_e4m3fn] = 5

    def spec(self, x, argument, writable=False):
        _same_framework(x, self.torch.Tensor, "torch", argument)
        code = self.codes.get(x.dtype)
        if code is None:
            fail("type", argument, f"unsupported dtype {str(x.dtype).replace('torch.', '')}")
        dev = x.device
        if dev.type == "cpu":
            kind, index = CPU, 0
        elif dev.type == "cuda":
            kind, index = CUDA, dev.index if dev.index is not None else 0
        else:
            fail("type", argument, f"device must be cpu or cuda, got {dev}")
        return (x.data_ptr(), code, tuple(x.shape), tuple(x.stride()), kind, index)

    def empty(self, like, shape, dtype=None):
        dt = like.dtype if dtype is None else getattr(self.torch, dtype)
        return self.torch.empty(shape, dtype=dt, device=like.device)

    def stream(self, like):
        if like.device.type != "cuda":
            return 0
        return self.torch.cuda.current_stream(like.device).cuda_stream

    def allocator(self, like):
        torch = self.torch
        device = like.device

        def alloc(nbytes):
            # torch's allocators align to at least 64 bytes (CPU) and 512 (CUDA);
            # the CUDA caching allocator ties the block to the current stream.
            buf = torch.empty(nbytes, dtype=torch.uint8, device=device)
            return buf, buf.data_ptr()

        return alloc

    def is_cuda(self, x):
        return x.device.type == "cuda"

    def finish(self, like):
        """Nothing to wait for: the work is ordered on the framework's own stream."""


class CupyArrays:
    """CuPy arrays, launched on CuPy's current stream."""

    name = "cupy"

    def __init__(self):
        import cupy

        self.cp = cupy

    def spec(self, x, argument, writable=False):
        _same_framework(x, self.cp.ndarray, "CuPy", argument)
        return (x.data.ptr, _dtype_code(x.dtype.name, argument), x.shape, _element_strides(x, argument), CUDA,
                x.device.id)

    def empty(self, like, shape, dtype=None):
        with like.device:
            return self.cp.empty(shape, dtype=like.dtype if dtype is None else dtype)

    def stream(self, like):
        with like.device:
            return self.cp.cuda.get_current_stream().ptr

    def allocator(self, like):
        cp = self.cp
        device = like.device

        def alloc(nbytes):
            with device:
                buf = cp.empty(nbytes, dtype=cp.uint8)
            return buf, buf.data.ptr

        return alloc

    def is_cuda(self, x):
        return True

    def finish(self, like):
        """Nothing to wait for: the work is ordered on the framework's own stream."""


class DLPackArrays:
    """Any other array with __dlpack__ (JAX, ...): outputs come from the
    array-API namespace of the input (x.__array_namespace__()) unless given."""

    name = "dlpack"

    def __init__(self, stream=None):
        self._stream = stream

    def spec(self, x, argument, writable=False):
        if not hasattr(x, "__dlpack__"):
            # Buffer-protocol objects, capsules or junk: the core decides.
            return x
        if self.is_cuda(x):
            # Exported for our stream, so the producer orders its pending work before ours.
            return x.__dlpack__(stream=self._stream or _DLPACK_LEGACY_STREAM)
        return x

    def _namespace(self, like, argument):
        ns = getattr(like, "__array_namespace__", None)
        if ns is None:
            fail("type", argument, f"cannot allocate outputs for {type(like).__name__}; pass them explicitly")
        return ns()

    def empty(self, like, shape, dtype=None):
        xp = self._namespace(like, "out")
        dt = like.dtype if dtype is None else getattr(xp, dtype)
        device = getattr(like, "device", None)
        if device is None:
            return xp.empty(shape, dtype=dt)
        return xp.empty(shape, dtype=dt, device=device)

    def stream(self, like):
        return self._stream or 0

    def allocator(self, like):
        def alloc(nbytes):
            buf = self.empty(like, (nbytes + 256,), "uint8")
            address = _core.address_of(buf)
            return buf, (address + 255) & ~255

        return alloc

    def is_cuda(self, x):
        probe = getattr(x, "__dlpack_device__", None)
        return probe is not None and int(probe()[0]) in _DLPACK_CUDA_DEVICES

    def finish(self, like):
        """Without a stream from the caller the kernels ran on the legacy
        default stream, which this framework does not wait for: wait here."""
        if self._stream is None and self.is_cuda(like):
            _core.synchronize_stream(0, int(like.__dlpack_device__()[1]))


_ADAPTERS = {}


def _cached(cls):
    a = _ADAPTERS.get(cls)
    if a is None:
        a = _ADAPTERS[cls] = cls()
    return a


def arrays_for(x, stream=None):
    """The adapter for the framework of `x`. Frameworks are recognised only
    when already imported, so importing flashpp never imports them."""
    mod = type(x).__module__.split(".", 1)[0]
    if mod == "numpy" and isinstance(x, sys.modules["numpy"].ndarray):
        return _cached(NumpyArrays)
    if mod == "torch" and isinstance(x, sys.modules["torch"].Tensor):
        return _cached(TorchArrays)
    if mod == "cupy" and isinstance(x, sys.modules["cupy"].ndarray):
        return _cached(CupyArrays)
    return DLPackArrays(stream)
