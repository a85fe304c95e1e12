"""Ring attention (context parallelism): exact attention over a sequence
sharded across the ranks of a process group.

Each rank keeps its query shard. The K/V shards travel around the ring, one
hop per step: while the attention kernel works on the shard a rank holds,
the next shard is already being received (torch.distributed isend/irecv).
Partial outputs merge exactly through their LSEs (merge.py). The backward
sends K/V around the ring once more, together with the dK/dV accumulated for
that shard, so after world steps each shard's gradient is back with its
owner; dQ is accumulated locally. Shard backwards use partial_keys (the FA2
form: P from the global LSE, D = rowsum(dO * O) from the global output).
"""

import math
from typing import List, Optional, Tuple

import torch
import torch.distributed as dist

from ..torch import _ops
from . import zigzag
from .comm import Ring
from .merge import merge_into
from .plan import BlockCall, plan_step

_KV_TAG, _DKV_TAG = 0, 1  # the two streams of the backward are in flight together


def _pack(*tensors: torch.Tensor, dtype=None) -> torch.Tensor:
    # One flat buffer per hop: one message instead of two.
    return torch.cat([t.reshape(-1).to(dtype or t.dtype) for t in tensors])


def _unpack(buf: torch.Tensor, like: Tuple[torch.Tensor, ...]) -> List[torch.Tensor]:
    parts, at = [], 0
    for t in like:
        parts.append(buf[at : at + t.numel()].view(t.shape))
        at += t.numel()
    return parts


class _Plan:
    """The calls of every step for one rank: step s works on the K/V shard of
    rank (rank - s) mod world."""

    def __init__(self, layout: str, rank: int, world: int, seqlen_local: int, causal: bool):
        per = zigzag.chunks_per_rank(layout)
        if seqlen_local % per != 0:
            raise ValueError(f"local seqlen must be a multiple of {per} for the {layout} layout, got {seqlen_local}")
        chunk = seqlen_local // per
        mine = zigzag.rank_chunks(layout, rank, world)
        self.steps: List[List[BlockCall]] = []
        for s in range(world):
            src = (rank - s) % world
            self.steps.append(plan_step(mine, zigzag.rank_chunks(layout, src, world), chunk, causal))


def _fwd_call(q, k, v, call: BlockCall, scale: float, softcap: float):
    (q0, q1), (k0, k1) = call.q, call.k
    return _ops.fwd(q[:, q0:q1], k[:, k0:k1], v[:, k0:k1], None, None, 0, 0, scale, call.causal, -1,
                    0 if call.causal else -1, softcap, False)


def _bwd_call(dout, q, k, v, out, lse, call: BlockCall, scale: float, softcap: float, deterministic: bool):
    (q0, q1), (k0, k1) = call.q, call.k
    return _ops.bwd(dout[:, q0:q1], q[:, q0:q1], k[:, k0:k1], v[:, k0:k1], out[:, q0:q1],
                    lse[:, :, q0:q1].contiguous(), None, None, 0, 0, scale, call.causal, -1,
                    0 if call.causal else -1, softcap, deterministic, True)


def ring_forward(ring: Ring, plan: _Plan, q, k, v, scale: float, softcap: float):
    """(out in q's dtype, lse fp32 (batch, heads, seqlen_local))."""
    b, n, h, _ = q.shape
    out = torch.zeros(b, n, h, v.shape[-1], dtype=torch.float32, device=q.device)
    lse = torch.full((b, h, n), float("-inf"), dtype=torch.float32, device=q.device)
    kv = _pack(k, v)
    for s, calls in enumerate(plan.steps):
        nxt = ring.shift([kv], _KV_TAG) if s + 1 < ring.world else None  # overlaps the calls below
        ks, vs = _unpack(kv, (k, v))
        for c in calls:
            o_part, l_part = _fwd_call(q, ks, vs, c, scale, softcap)
            (q0, q1) = c.q
            merge_into(out[:, q0:q1], lse[:, :, q0:q1], o_part, l_part)
        if nxt is not None:
            (kv,) = nxt.wait()
    return out.to(q.dtype), lse


def ring_backward(ring: Ring, plan: _Plan, dout, q, k, v, out, lse, scale: float, softcap: float,
                  deterministic: bool):
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    kv = _pack(k, v)
    dkv: Optional[torch.Tensor] = None  # dK/dV of the shard held, accumulated along the ring
    incoming = None  # the dK/dV sent by the previous rank for the shard held now
    for s, calls in enumerate(plan.steps):
        nxt = ring.shift([kv], _KV_TAG) if s + 1 < ring.world else None
        ks, vs = _unpack(kv, (k, v))
        dk = torch.zeros(k.shape, dtype=torch.float32, device=k.device)
        dv = torch.zeros(v.shape, dtype=torch.float32, device=v.device)
        for c in calls:
            dq_c, dk_c, dv_c = _bwd_call(dout, q, ks, vs, out, lse, c, scale, softcap, deterministic)
            (q0, q1), (k0, k1) = c.q, c.k
            dq[:, q0:q1] += dq_c
            dk[:, k0:k1] += dk_c
            dv[:, k0:k1] += dv_c
        local = _pack(dk, dv, dtype=torch.float32)
        dkv = local if incoming is None else incoming.wait()[0] + local
        # After the last step this hop delivers each shard's total to its owner.
        incoming = ring.shift([dkv], _DKV_TAG) if ring.world > 1 else None
        if nxt is not None:
            (kv,) = nxt.wait()
    if incoming is not None:
        dkv = incoming.wait()[0]
    dk, dv = _unpack(dkv, (k, v))
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


class RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, group, causal, softmax_scale, softcap, layout, deterministic):
        ring = Ring(group)
        plan = _Plan(layout, ring.rank, ring.world, q.shape[1], causal)
        out, lse = ring_forward(ring, plan, q, k, v, softmax_scale, softcap)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.ring, ctx.plan = ring, plan
        ctx.args = (softmax_scale, softcap, deterministic)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = ring_backward(ctx.ring, ctx.plan, dout.contiguous(), q, k, v, out, lse, *ctx.args)
        return dq, dk, dv, None, None, None, None, None, None


def _check(q, k, v, layout):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(f"{name} must be (batch, seqlen_local, heads, head_dim), got shape {tuple(t.shape)}")
    if k.shape[1] != q.shape[1] or v.shape[1] != q.shape[1]:
        raise ValueError(
            f"q, k and v must hold the same local sequence shard, got seqlens {q.shape[1]}, {k.shape[1]}, {v.shape[1]}"
        )
    zigzag.chunks_per_rank(layout)  # validates the name


def ring_attention(q, k, v, group: Optional[dist.ProcessGroup] = None, causal: bool = False,
                   softmax_scale: Optional[float] = None, softcap: float = 0.0, layout: str = "zigzag",
                   deterministic: bool = False, return_lse: bool = False):
    """Exact attention over a sequence sharded across the ranks of `group`.

    q: (batch, seqlen_local, heads, head_dim), k/v: (batch, seqlen_local,
    heads_kv, head_dim / head_dim_v): this rank's shard of the sequence in
    `layout` (zigzag.shard() cuts a full tensor; "zigzag" balances causal
    work, and needs an even seqlen_local). heads % heads_kv == 0 (GQA/MQA).
    causal is over the global sequence. Works for any world size, 1 included.
    Returns this rank's rows of the output (and the fp32 LSE
    (batch, heads, seqlen_local) when return_lse); differentiable in q, k, v.
    """
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("ring_attention needs an initialized torch.distributed process group")
    _check(q, k, v, layout)
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else float(softmax_scale)
    if not math.isfinite(scale):
        raise ValueError(f"softmax_scale must be finite, got {softmax_scale}")
    out, lse = RingAttention.apply(q, k, v, group, bool(causal), scale, float(softcap), layout, bool(deterministic))
    return (out, lse) if return_lse else out
