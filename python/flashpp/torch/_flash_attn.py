"""The flash_attn functions, with flash_attn's signatures and semantics, on
flashpp's kernels: `from flashpp.torch import flash_attn_func` replaces
`from flash_attn import flash_attn_func`.

Differences, all raised as clear errors rather than silently ignored:
dropout_p must be 0.0, alibi_slopes and block_table are not supported.
return_attn_probs=True returns (out, softmax_lse, None): flash_attn only
fills its third slot (the dropout-encoded probabilities) when dropout_p > 0,
and flashpp never materializes the probability matrix.
"""

import torch

from .._errors import fail
from . import _ops


def _reject_unsupported(dropout_p, alibi_slopes, block_table=None):
    if dropout_p != 0.0:
        fail("not_supported", "dropout_p", f"attention dropout is not supported; pass 0.0 (got {dropout_p})")
    if alibi_slopes is not None:
        fail("not_supported", "alibi_slopes", "ALiBi biases are not supported; pass None")
    if block_table is not None:
        fail("not_supported", "block_table", "paged KV caches are not supported by this function; pass None")


def _window(window_size):
    try:
        left, right = window_size
    except (TypeError, ValueError):
        fail("value", "window_size", f"must be a pair (left, right), got {window_size!r}")
    return int(left), int(right)


def _pad_head_dim(x, multiple=8):
    # flash_attn pads head dims that are not a multiple of 8; zeros change no
    # score (q, k) and only add output columns that are cut off (v).
    d = x.shape[-1]
    if d % multiple == 0:
        return x
    return torch.nn.functional.pad(x, [0, multiple - d % multiple])


def attention(q, k, v, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0, *,
              softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, deterministic=False):
    """Differentiable (out, lse) through flashpp::fwd; the common core of every
    function below. q/k/v: (batch, seqlen, heads, dim) or varlen (total, heads, dim)."""
    head_dim, head_dim_v = q.shape[-1], v.shape[-1]
    if softmax_scale is None:
        softmax_scale = head_dim ** (-0.5)
    left, right = _window(window_size)
    q, k, v = _pad_head_dim(q), _pad_head_dim(k), _pad_head_dim(v)
    out, lse = _ops.fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q), int(max_seqlen_k),
                        float(softmax_scale), bool(causal), left, right, float(softcap), bool(deterministic))
    if out.shape[-1] != head_dim_v:
        out = out[..., :head_dim_v]
    return out, lse


def _result(out, lse, return_attn_probs):
    return (out, lse, None) if return_attn_probs else out


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """q: (batch, seqlen_q, nheads, headdim); k, v: (batch, seqlen_k, nheads_k, headdim).
    nheads % nheads_k == 0 gives MQA/GQA. causal and window_size=(left, right)
    are aligned to the bottom-right corner; a query row with no visible key
    gets zeros. Returns out (batch, seqlen_q, nheads, headdim), or
    (out, softmax_lse (batch, nheads, seqlen_q), None) if return_attn_probs."""
    _reject_unsupported(dropout_p, alibi_slopes)
    out, lse = attention(q, k, v, softmax_scale=softmax_scale, causal=causal, window_size=window_size,
                         softcap=softcap, deterministic=deterministic)
    return _result(out, lse, return_attn_probs)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                              softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """qkv: (batch, seqlen, 3, nheads, headdim). The gradient arrives packed
    the same way (one stacked tensor, no explicit concatenation)."""
    _reject_unsupported(dropout_p, alibi_slopes)
    q, k, v = qkv.unbind(dim=2)
    out, lse = attention(q, k, v, softmax_scale=softmax_scale, causal=causal, window_size=window_size,
                         softcap=softcap, deterministic=deterministic)
    return _result(out, lse, return_attn_probs)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                             softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """q: (batch, seqlen_q, nheads, headdim); kv: (batch, seqlen_k, 2, nheads_k, headdim)."""
    _reject_unsupported(dropout_p, alibi_slopes)
    k, v = kv.unbind(dim=2)
    out, lse = attention(q, k, v, softmax_scale=softmax_scale, causal=causal, window_size=window_size,
                         softcap=softcap, deterministic=deterministic)
    return _result(out, lse, return_attn_probs)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    """q: (total_q, nheads, headdim); k, v: (total_k, nheads_k, headdim);
    cu_seqlens_q/k: int32 (batch + 1,) prefix sums of the sequence lengths on
    the tensors' device. softmax_lse is (nheads, total_q)."""
    _reject_unsupported(dropout_p, alibi_slopes, block_table)
    out, lse = attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                         softmax_scale=softmax_scale, causal=causal, window_size=window_size, softcap=softcap,
                         deterministic=deterministic)
    return _result(out, lse, return_attn_probs)


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p=0.0, softmax_scale=None, causal=False,
                                     window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
                                     return_attn_probs=False):
    """qkv: (total, 3, nheads, headdim); one cu_seqlens for queries and keys."""
    _reject_unsupported(dropout_p, alibi_slopes)
    q, k, v = qkv.unbind(dim=1)
    out, lse = attention(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, softmax_scale=softmax_scale,
                         causal=causal, window_size=window_size, softcap=softcap, deterministic=deterministic)
    return _result(out, lse, return_attn_probs)


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                                    softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """q: (total_q, nheads, headdim); kv: (total_k, 2, nheads_k, headdim)."""
    _reject_unsupported(dropout_p, alibi_slopes)
    k, v = kv.unbind(dim=1)
    out, lse = attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                         softmax_scale=softmax_scale, causal=causal, window_size=window_size, softcap=softcap,
                         deterministic=deterministic)
    return _result(out, lse, return_attn_probs)
