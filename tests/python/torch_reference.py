"""Naive attention in torch with autograd, for the torch-layer tests: in
float64 it is the reference, in the input dtype it is the "same-dtype naive"
implementation of the tolerance rule (attn_reference.ATOL)."""

import torch

from attn_reference import ATOL
from seeding import reproduce_hint

DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


def visible(sq, sk, window_left, window_right, device):
    i = torch.arange(sq, device=device)[:, None]
    j = torch.arange(sk, device=device)[None, :]
    diag = i + sk - sq
    ok = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if window_left >= 0:
        ok &= j >= diag - window_left
    if window_right >= 0:
        ok &= j <= diag + window_right
    return ok


def attention(q, k, v, *, causal=False, window=(-1, -1), softcap=0.0, softmax_scale=None, dtype=None):
    """q, k, v: (batch, seq, heads, dim) -> out (batch, seq_q, heads, dim_v),
    lse (batch, heads, seq_q); computed in `dtype` (default: q's)."""
    dtype = dtype or q.dtype
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else softmax_scale
    q, k, v = (x.to(dtype).transpose(1, 2) for x in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    left, right = window[0], 0 if causal else window[1]
    keep = visible(s.shape[-2], s.shape[-1], left, right, s.device)
    s = s.masked_fill(~keep, float("-inf"))
    m = s.detach().amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(s - m)
    l = e.sum(dim=-1, keepdim=True)
    p = e / torch.where(l > 0, l, torch.ones_like(l))
    out = torch.matmul(p, v).transpose(1, 2)
    lse = torch.where(l > 0, m + torch.log(l), torch.full_like(l, float("-inf")))[..., 0]
    return out, lse


def max_err(ours, ref):
    ours, ref = ours.detach().double().cpu(), ref.detach().double().cpu()
    finite = torch.isfinite(ref)
    inf_ok = bool(torch.equal(ours[~finite], ref[~finite]))
    nonfinite = int((~torch.isfinite(ours[finite])).sum())
    err = float((ours[finite] - ref[finite]).abs().max()) if finite.any() else 0.0
    return err, inf_ok, nonfinite


def check_close(what, ours, ref64, naive, dtype):
    e, inf_ok, nonfinite = max_err(ours, ref64)
    n, _, _ = max_err(naive, ref64)
    bound = 2 * n + ATOL[DTYPE_NAMES[dtype]]
    assert inf_ok and nonfinite == 0 and e <= bound, (
        f"{what}: ours {e:.3e} > bound {bound:.3e} (naive {n:.3e}), inf match {inf_ok}, "
        f"nonfinite {nonfinite}; {reproduce_hint()}"
    )


def check_against_naive(what, fn, inputs, dout, dtype, **opts):
    """Runs fn(*inputs) -> out (or (out, lse, ...)) with autograd and checks out,
    lse (if returned) and the input gradients against the naive attention."""
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    res = fn(*leaves)
    out, lse = (res[0], res[1]) if isinstance(res, tuple) else (res, None)
    grads = torch.autograd.grad(out, leaves, dout)

    def naive(prec):
        xs = [x.detach().to(prec).requires_grad_(True) for x in inputs]
        o, l = attention(*xs, dtype=prec, **opts)
        return o, l, torch.autograd.grad(o, xs, dout.to(prec))

    o64, l64, g64 = naive(torch.float64)
    on, ln, gn = naive(dtype)
    check_close(f"{what} out", out, o64, on, dtype)
    if lse is not None:
        check_close(f"{what} lse", lse, l64, ln.float(), dtype)
    for name, g, r, n in zip("qkv", grads, g64, gn):
        check_close(f"{what} d{name}", g, r, n, dtype)
    return out, lse, grads
