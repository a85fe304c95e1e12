"""flashpp for PyTorch.

- Autograd-aware operators torch.ops.flashpp.fwd / bwd (torch.library custom
  ops with fake implementations: torch.compile(fullgraph=True) traces them;
  launched on the current stream; CUDA-graph capturable).
- The flash_attn functions with their signatures (flash_attn_with_kvcache
  included: paged caches, append with rotary, split-KV decoding), so
      from flashpp.torch import flash_attn_func, flash_attn_varlen_func
  replaces the same import from flash_attn.
- flashpp.torch.sdpa: flashpp behind F.scaled_dot_product_attention
  (registered as "flashpp" in torch.nn.attention on import; activate it with
  torch.nn.attention.activate_flash_attention_impl("flashpp")).
- flashpp.transformers (a sibling module): attn_implementation="flashpp" for
  Hugging Face models.

Works on CUDA tensors (CUDA backend) and CPU tensors (CPU backend).
"""

from . import _ops, sdpa
from ._flash_attn import (
    attention,
    flash_attn_func,
    flash_attn_kvpacked_func,
    flash_attn_qkvpacked_func,
    flash_attn_varlen_func,
    flash_attn_varlen_kvpacked_func,
    flash_attn_varlen_qkvpacked_func,
)
from ._kvcache import flash_attn_with_kvcache

sdpa.register()

__all__ = [
    "attention",
    "flash_attn_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_kvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_varlen_qkvpacked_func",
    "flash_attn_varlen_kvpacked_func",
    "flash_attn_with_kvcache",
    "sdpa",
]
