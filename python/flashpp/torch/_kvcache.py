"""flash_attn_with_kvcache with flash_attn's signature on flashpp's
inference kernels (contiguous or paged KV cache, in-place append of new
keys/values with in-kernel rotary, split-KV decoding; include/flashpp/kvcache.hpp).

Inference only: no autograd. The call launches on the current CUDA stream,
never synchronizes and allocates only through torch's allocator (the
split-KV scratch), so it can be captured in a CUDA graph.
"""

import torch

from .. import _core
from .._errors import fail
from ._flash_attn import _window
from ._ops import _arrays, _spec


def _int32_on(x, device, argument):
    if x is None:
        return None
    if not isinstance(x, torch.Tensor):
        fail("type", argument, f"must be a torch.Tensor of int32, got {type(x).__name__}")
    if x.dtype != torch.int32:
        fail("type", argument, f"must be int32, got {str(x.dtype).replace('torch.', '')}")
    if x.device != device:
        fail("value", argument, f"must be on {device} like q, got {x.device}")
    return x


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                            softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0, return_softmax_lse=False,
                            split_counters=None):
    """q: (batch, seqlen_q, nheads, headdim). k_cache/v_cache: (batch_cache,
    seqlen_cache, nheads_k, headdim) or, with block_table (int32 (batch,
    max_pages)), paged (num_pages, page_size, nheads_k, headdim). k/v: new
    tokens (batch, seqlen_new, nheads_k, headdim), written into the cache in
    place at cache_seqlens[b] before attention, rotated by rotary_cos/sin
    ((seqlen_ro, rotary_dim / 2)) when given (q too). cache_seqlens: int or
    int32 (batch,). num_splits: 0 picks from the SM count. split_counters
    (flashpp only): an int32 tensor of at least batch * nheads * seqlen_q
    entries on q's device, zero-filled once and left zero by every call, that
    replaces the per-call clearing of the split counters (one call at a time
    per tensor). Returns out, or (out, softmax_lse) with softmax_lse fp32
    (batch, nheads, seqlen_q)."""
    if cache_leftpad is not None:
        fail("not_supported", "cache_leftpad", "left-padded caches are not supported; pass None")
    if alibi_slopes is not None:
        fail("not_supported", "alibi_slopes", "ALiBi biases are not supported; pass None")
    if (k is None) != (v is None):
        fail("value", "k", "k and v (the new tokens) must be given together")
    if (rotary_cos is None) != (rotary_sin is None):
        fail("value", "rotary_cos", "rotary_cos and rotary_sin must be given together")
    if not isinstance(q, torch.Tensor) or q.dim() != 4:
        fail("value", "q", "must be a 4-D torch.Tensor (batch, seqlen_q, nheads, headdim)")
    if isinstance(cache_seqlens, int):
        cache_seqlens = torch.full((q.shape[0],), cache_seqlens, dtype=torch.int32, device=q.device)
    cache_seqlens = _int32_on(cache_seqlens, q.device, "cache_seqlens")
    cache_batch_idx = _int32_on(cache_batch_idx, q.device, "cache_batch_idx")
    block_table = _int32_on(block_table, q.device, "block_table")
    split_counters = _int32_on(split_counters, q.device, "split_counters")
    left, right = _window(window_size)
    if q.stride(-1) != 1:
        q = q.contiguous()
    out = q.new_empty(q.shape[:-1] + (v_cache.shape[-1],))
    lse = (torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32, device=q.device)
           if return_softmax_lse else None)
    opt = lambda x, name: None if x is None else _spec(x, name)  # noqa: E731
    options = _core.Options(softmax_scale=softmax_scale, causal=causal, window_left=left, window_right=right,
                            softcap=softcap, stream=_arrays.stream(q))
    _core.kvcache(_spec(q, "q"), _spec(k_cache, "k_cache"), _spec(v_cache, "v_cache"), opt(k, "k"), opt(v, "v"),
                  opt(cache_seqlens, "cache_seqlens"), opt(cache_batch_idx, "cache_batch_idx"),
                  opt(block_table, "block_table"), opt(rotary_cos, "rotary_cos"), opt(rotary_sin, "rotary_sin"),
                  _spec(out, "out"), opt(lse, "lse"), options, bool(rotary_interleaved), int(num_splits),
                  _arrays.allocator(q), opt(split_counters, "split_counters"))
    return (out, lse) if return_softmax_lse else out
