"""flashpp: exact, IO-aware attention (the FlashAttention family).

    import flashpp
    out = flashpp.attention(q, k, v, causal=True)             # any DLPack array
    out, lse = flashpp.attention(q, k, v, return_lse=True)
    dq, dk, dv = flashpp.attention_backward(dout, q, k, v, out, lse)

Arrays are (batch, seqlen, heads, head_dim) with a contiguous last dim.
PyTorch users want flashpp.torch (autograd, torch.compile, the flash_attn
functions, SDPA and Hugging Face integration). Importing flashpp itself
needs neither PyTorch nor any other framework.
"""

from . import _core
from ._api import attention, attention_backward, select_backward, select_forward
from ._errors import BackendError, Error, InvalidTypeError, InvalidValueError, NotSupportedError

__version__ = _core.version()


def built_with_cuda() -> bool:
    """Whether this build of flashpp has the CUDA backend."""
    return _core.built_with_cuda()


__all__ = [
    "attention",
    "attention_backward",
    "select_forward",
    "select_backward",
    "built_with_cuda",
    "Error",
    "InvalidValueError",
    "InvalidTypeError",
    "NotSupportedError",
    "BackendError",
    "__version__",
]
