"""Standard attention as the FlashAttention paper's baseline writes it in
PyTorch: S = scale * Q K^T and P = softmax(S) are materialized in HBM, then
O = P V. Autograd stores S and P for the backward, which is why its memory
grows as N^2 and why it is the 'standard' line of the memory and IO reports."""

from .base import BHND, Backend, PreparedDecode, PreparedPrefill, leaves, scale_of


def standard_attention(torch, q, k, v, scale, mask=None):
    """q: (B, Hq, Nq, d), k/v: (B, Hkv, Nk, d); mask: bool (Nq, Nk), True = hidden."""
    b, hq, nq, d = q.shape
    hkv = k.shape[1]
    if hq != hkv:  # GQA: group the query heads of each KV head, no K/V copy
        q = q.reshape(b, hkv, hq // hkv, nq, d)
        k, v = k.unsqueeze(2), v.unsqueeze(2)
    s = torch.matmul(q, k.transpose(-2, -1)) * scale
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    o = torch.matmul(p, v)
    return o.reshape(b, hq, nq, v.shape[-1])


def bottom_right_causal_mask(torch, nq, nk, device):
    """True where query i may not see key j (j > i + nk - nq)."""
    return torch.ones(nq, nk, dtype=torch.bool, device=device).triu(nk - nq + 1)


class Standard(Backend):
    name = "standard"

    def __init__(self, name="standard"):
        import torch

        self.torch = torch

    def version(self):
        return f"torch {self.torch.__version__} (matmul + softmax + matmul)"

    def prefill(self, job, q, k, v, need_grad):
        torch = self.torch
        lq, lk, lv = leaves(BHND, (q, k, v), need_grad)
        scale = scale_of(job)
        mask = bottom_right_causal_mask(torch, job["seqlen_q"], job["seqlen_k"], q.device) if job["causal"] else None

        def forward():
            return standard_attention(torch, lq, lk, lv, scale, mask)

        return PreparedPrefill(forward, [lq, lk, lv], BHND)

    def decode(self, job, q, k_cache, v_cache, cache_seqlens, block_table):
        from .base import Unsupported

        if block_table is not None:
            raise Unsupported("standard attention has no paged KV cache")
        nq, nk, nv = (BHND.to_native(t) for t in (q, k_cache, v_cache))
        scale = scale_of(job)
        return PreparedDecode(lambda: standard_attention(self.torch, nq, nk, nv, scale), BHND.to_canon)
