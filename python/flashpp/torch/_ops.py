"""The torch operators flashpp::fwd and flashpp::bwd.

They are torch.library custom ops with fake (meta) implementations, so
torch.compile(fullgraph=True) traces through them, and an autograd formula,
so fwd is differentiable. Each launch runs on the current CUDA stream and
allocates outputs and scratch memory through torch's allocator only, which
keeps the ops CUDA-graph capturable.
"""

from typing import Optional, Tuple

import torch
from torch import Tensor

from .. import _core
from .._arrays import TorchArrays

_arrays = TorchArrays()


def _spec(t: Tensor, name: str):
    return _arrays.spec(t, name)


def _last_dim_contiguous(t: Tensor) -> Tensor:
    # The core needs a unit stride on the last dim only; other strides pass through.
    return t if t.stride(-1) == 1 or t.size(-1) <= 1 else t.contiguous()


def _options(q, max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap,
             deterministic, partial_keys=False):
    return _core.Options(
        softmax_scale=softmax_scale,
        causal=causal,
        window_left=window_left,
        window_right=window_right,
        softcap=softcap,
        deterministic=deterministic,
        partial_keys=partial_keys,
        max_seqlen_q=max_seqlen_q,
        max_seqlen_k=max_seqlen_k,
        stream=_arrays.stream(q),
    )


def run_forward(q, k, v, out, lse, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0, *,
                softmax_scale=None, causal=False, window_left=-1, window_right=-1, softcap=0.0):
    """Runs the forward kernel into the given tensors (lse may be None)."""
    _core.forward(
        _spec(q, "q"), _spec(k, "k"), _spec(v, "v"), _spec(out, "out"),
        None if lse is None else _spec(lse, "lse"),
        _options(q, max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap, False),
        None if cu_seqlens_q is None else _spec(cu_seqlens_q, "cu_seqlens_q"),
        None if cu_seqlens_k is None else _spec(cu_seqlens_k, "cu_seqlens_k"),
        _arrays.allocator(q),
    )


def run_backward(dout, q, k, v, out, lse, dq, dk, dv, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0,
                 max_seqlen_k=0, *, softmax_scale=None, causal=False, window_left=-1, window_right=-1,
                 softcap=0.0, deterministic=False, partial_keys=False):
    """Runs the backward kernel into dq, dk, dv (partial_keys: out/lse belong
    to a larger key set than k/v, e.g. one ring shard)."""
    _core.backward(
        _spec(dout, "dout"), _spec(q, "q"), _spec(k, "k"), _spec(v, "v"), _spec(out, "out"), _spec(lse, "lse"),
        _spec(dq, "dq"), _spec(dk, "dk"), _spec(dv, "dv"),
        _options(q, max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap,
                 deterministic, partial_keys),
        None if cu_seqlens_q is None else _spec(cu_seqlens_q, "cu_seqlens_q"),
        None if cu_seqlens_k is None else _spec(cu_seqlens_k, "cu_seqlens_k"),
        _arrays.allocator(q),
    )


def _forward_outputs(q: Tensor, v: Tensor, varlen: bool) -> Tuple[Tensor, Tensor]:
    # Shared by the real and the fake implementation so their strides agree.
    out = q.new_empty(q.shape[:-1] + (v.shape[-1],))
    if varlen:
        lse_shape = (q.shape[1], q.shape[0])  # (heads, total_q)
    else:
        lse_shape = (q.shape[0], q.shape[2], q.shape[1])  # (batch, heads, seqlen_q)
    return out, q.new_empty(lse_shape, dtype=torch.float32)


@torch.library.custom_op("flashpp::fwd", mutates_args=())
def fwd(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    cu_seqlens_q: Optional[Tensor],
    cu_seqlens_k: Optional[Tensor],
    max_seqlen_q: int,
    max_seqlen_k: int,
    softmax_scale: float,
    causal: bool,
    window_left: int,
    window_right: int,
    softcap: float,
    deterministic: bool,
) -> Tuple[Tensor, Tensor]:
    """(out, lse) of exact attention; `deterministic` is kept for the backward."""
    q, k, v = (_last_dim_contiguous(t) for t in (q, k, v))
    out, lse = _forward_outputs(q, v, cu_seqlens_q is not None)
    run_forward(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                softmax_scale=softmax_scale, causal=causal, window_left=window_left, window_right=window_right,
                softcap=softcap)
    return out, lse


@fwd.register_fake
def _fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left,
              window_right, softcap, deterministic):
    return _forward_outputs(q, v, cu_seqlens_q is not None)


def _backward_outputs(q: Tensor, k: Tensor, v: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


@torch.library.custom_op("flashpp::bwd", mutates_args=())
def bwd(
    dout: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    out: Tensor,
    lse: Tensor,
    cu_seqlens_q: Optional[Tensor],
    cu_seqlens_k: Optional[Tensor],
    max_seqlen_q: int,
    max_seqlen_k: int,
    softmax_scale: float,
    causal: bool,
    window_left: int,
    window_right: int,
    softcap: float,
    deterministic: bool,
    partial_keys: bool = False,
) -> Tuple[Tensor, Tensor, Tensor]:
    """(dq, dk, dv) for upstream gradient dout of fwd's out; partial_keys when
    out/lse come from a larger key set than k/v (one shard of a ring)."""
    dq, dk, dv = _backward_outputs(q, k, v)
    dout, q, k, v, out = (_last_dim_contiguous(t) for t in (dout, q, k, v, out))
    run_backward(dout, q, k, v, out, lse, dq, dk, dv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                 softmax_scale=softmax_scale, causal=causal, window_left=window_left, window_right=window_right,
                 softcap=softcap, deterministic=deterministic, partial_keys=partial_keys)
    return dq, dk, dv


@bwd.register_fake
def _bwd_fake(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
              window_left, window_right, softcap, deterministic, partial_keys=False):
    return _backward_outputs(q, k, v)


def _setup_context(ctx, inputs, output):
    q, k, v, cu_q, cu_k, max_q, max_k, scale, causal, left, right, softcap, deterministic = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k)
    ctx.args = (max_q, max_k, scale, causal, left, right, softcap, deterministic)
    # The LSE is an auxiliary output (as in flash_attn): no gradient flows through it.
    ctx.mark_non_differentiable(lse)


def _backward(ctx, dout, _dlse):
    q, k, v, out, lse, cu_q, cu_k = ctx.saved_tensors
    dq, dk, dv = bwd(dout, q, k, v, out, lse, cu_q, cu_k, *ctx.args)
    return (dq, dk, dv) + (None,) * 10


fwd.register_autograd(_backward, setup_context=_setup_context)
