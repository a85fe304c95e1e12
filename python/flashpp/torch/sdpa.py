"""flashpp as the flash-attention implementation behind PyTorch's
F.scaled_dot_product_attention.

Importing flashpp.torch registers the implementation "flashpp" with
torch.nn.attention.register_flash_attention_impl (PyTorch >= 2.11, the
mechanism of its FA3/FA4 plug-ins). Activating it,

    torch.nn.attention.activate_flash_attention_impl("flashpp")   # or
    flashpp.torch.sdpa.activate()

replaces the kernels of the flash-attention ATen operators and moves SDPA's
flash backend to the front of its priority order (PyTorch otherwise prefers
cuDNN on Hopper), so unchanged F.scaled_dot_product_attention code runs on
flashpp wherever the flash backend can take the call: `_scaled_dot_product_flash_attention` (+ backward) and
`_flash_attention_forward` (+ backward) on CUDA, and
`_scaled_dot_product_flash_attention_for_cpu` (+ backward) on the CPU.
torch.nn.attention.restore_flash_attention_impl() undoes both.

A call flashpp cannot run exactly (an attn_mask, a top-left causal mask with
more keys than queries, a head dim over 256, float64) is computed by a plain
float32/float64 math implementation instead, counted under "fallback_*";
dropout is refused. `calls` counts both, for tests and diagnostics.
"""

import collections
import warnings

import torch

from .._errors import fail
from . import _ops

NAME = "flashpp"

# How often each entry point ran: "forward", "backward" (flashpp kernels),
# "fallback_forward", "fallback_backward" (math).
calls = collections.Counter()

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


class _Handle:
    """Keeps the kernel registrations alive; remove() takes them out again
    and restores SDPA's backend priority."""

    def __init__(self, library, previous_priority):
        self.library = library
        self.previous_priority = previous_priority

    def remove(self):
        if self.library is not None:
            self.library._destroy()
            self.library = None
        if self.previous_priority is not None:
            torch._C._set_sdp_priority_order(self.previous_priority)
            self.previous_priority = None


def _prefer_flash_backend():
    """Puts SDPA's flash backend first in its priority order (PyTorch prefers
    cuDNN on Hopper, which would bypass the flash kernels); returns the order
    to restore, or None when nothing changed."""
    get = getattr(torch._C, "_get_sdp_priority_order", None)
    set_ = getattr(torch._C, "_set_sdp_priority_order", None)
    if get is None or set_ is None:
        return None
    if torch.cuda.is_available():
        # PyTorch makes its cuDNN-first choice once, at its first CUDA SDPA
        # dispatch; let that happen now, or it would later undo our order.
        t = torch.empty((1, 1, 1, 8), dtype=torch.float16, device="cuda")
        torch._fused_sdp_choice(t, t, t)
    order = [int(b) for b in get()]
    flash = int(torch.nn.attention.SDPBackend.FLASH_ATTENTION)
    if order and order[0] == flash:
        return None
    set_([flash] + [b for b in order if b != flash])
    return order


def _plan(query, key, value, is_causal, attn_mask):
    """(causal, window_right) for the flashpp kernels in (batch, heads, seq,
    dim) terms, or None when the math fallback must run."""
    if attn_mask is not None or query.dtype not in _FLOATS:
        return None
    if query.shape[-1] > 256 or value.shape[-1] > 256 or query.shape[1] % key.shape[1] != 0:
        return None
    if not is_causal:
        return False, -1
    sq, sk = query.shape[-2], key.shape[-2]
    # SDPA's causal mask is aligned top-left (query i sees keys j <= i); with
    # flashpp's bottom-right alignment that is a right window of sq - sk.
    if sq == sk:
        return True, 0
    if sq > sk:
        return False, sq - sk
    return None


def _padded(x):
    d = x.shape[-1]
    return x if d % 8 == 0 else torch.nn.functional.pad(x, [0, 8 - d % 8])


def _bshd(x):
    return x.transpose(1, 2)


def _alloc_like(query, shape):
    # The layout the operators' meta functions promise (empty_like(query)), so
    # compiled graphs that assert strides keep holding.
    if tuple(query.shape) == tuple(shape):
        return torch.empty_like(query)
    order = sorted(range(4), key=lambda i: query.stride(i), reverse=True)
    out = torch.empty([shape[i] for i in order], dtype=query.dtype, device=query.device)
    return out.permute([order.index(i) for i in range(4)])


def _check_dropout(dropout_p):
    if dropout_p != 0.0:
        fail("not_supported", "dropout_p", f"flashpp has no attention dropout; got {dropout_p}")


def _scale(query, scale):
    return query.shape[-1] ** (-0.5) if scale is None else scale


# ---- the computation, in (batch, heads, seq, dim) layout --------------------

def _flash_forward(query, key, value, plan, scale):
    """(out in the layout of empty_like(query), lse (batch, heads, seq_q) fp32)."""
    causal, right = plan
    dv = value.shape[-1]
    out = _alloc_like(query, query.shape[:-1] + (dv,))
    q, k, v = _padded(query), _padded(key), _padded(value)
    lse = torch.empty(query.shape[:-1], dtype=torch.float32, device=query.device)
    if v.shape[-1] != dv:
        tmp = torch.empty(query.shape[:-1] + (v.shape[-1],), dtype=query.dtype, device=query.device)
        _ops.run_forward(_bshd(q), _bshd(k), _bshd(v), _bshd(tmp), lse, softmax_scale=scale, causal=causal,
                         window_right=right)
        out.copy_(tmp[..., :dv])
    else:
        _ops.run_forward(_bshd(q), _bshd(k), _bshd(v), _bshd(out), lse, softmax_scale=scale, causal=causal,
                         window_right=right)
    calls["forward"] += 1
    return out, lse


def _flash_backward(grad_out, query, key, value, out, lse, plan, scale, grads):
    causal, right = plan
    dq, dk, dv = grads
    q, k, v = _padded(query), _padded(key), _padded(value)
    padded = q is not query or v is not value
    if padded:
        go, o = _padded(grad_out), _padded(out)
        pdq, pdk, pdv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    else:
        go, o, pdq, pdk, pdv = grad_out, out, dq, dk, dv
    go, o = _ops._last_dim_contiguous(go), _ops._last_dim_contiguous(o)
    _ops.run_backward(_bshd(go), _bshd(q), _bshd(k), _bshd(v), _bshd(o), lse.contiguous(), _bshd(pdq), _bshd(pdk),
                      _bshd(pdv), softmax_scale=scale, causal=causal, window_right=right,
                      deterministic=torch.are_deterministic_algorithms_enabled())
    if padded:
        dq.copy_(pdq[..., :query.shape[-1]])
        dk.copy_(pdk[..., :key.shape[-1]])
        dv.copy_(pdv[..., :value.shape[-1]])
    calls["backward"] += 1


def _math_scores(query, key, is_causal, attn_mask, scale):
    work = torch.float64 if query.dtype == torch.float64 else torch.float32
    rep = query.shape[1] // key.shape[1]
    k = key.to(work).repeat_interleave(rep, dim=1) if rep > 1 else key.to(work)
    s = torch.matmul(query.to(work), k.transpose(-1, -2)) * scale
    sq, sk = s.shape[-2], s.shape[-1]
    if is_causal:
        keep = torch.ones(sq, sk, dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            s = s.masked_fill(~attn_mask, float("-inf"))
        else:
            s = s + attn_mask.to(work)
    return s, k, rep, work


def _math_probs(s, lse):
    p = torch.exp(s - lse.unsqueeze(-1))
    # Rows that see no key: lse = -inf gives NaN above; they contribute nothing.
    return torch.nan_to_num(p, nan=0.0)


def _math_forward(query, key, value, is_causal, attn_mask, scale):
    s, _, rep, work = _math_scores(query, key, is_causal, attn_mask, scale)
    lse = torch.logsumexp(s, dim=-1)
    v = value.to(work).repeat_interleave(rep, dim=1) if rep > 1 else value.to(work)
    out = torch.matmul(_math_probs(s, lse), v)
    calls["fallback_forward"] += 1
    return out.to(query.dtype), lse.to(torch.float32)


def _math_backward(grad_out, query, key, value, out, lse, is_causal, attn_mask, scale):
    s, k, rep, work = _math_scores(query, key, is_causal, attn_mask, scale)
    p = _math_probs(s, lse.to(work))
    v = value.to(work).repeat_interleave(rep, dim=1) if rep > 1 else value.to(work)
    go = grad_out.to(work)
    dv = torch.matmul(p.transpose(-1, -2), go)
    dp = torch.matmul(go, v.transpose(-1, -2))
    ds = p * (dp - (go * out.to(work)).sum(-1, keepdim=True))
    dq = torch.matmul(ds, k) * scale
    dk = torch.matmul(ds.transpose(-1, -2), query.to(work)) * scale
    if rep > 1:  # GQA: a kv head's gradient sums over its query heads
        b, h, n = key.shape[0], key.shape[1], key.shape[2]
        dk = dk.reshape(b, h, rep, n, -1).sum(2)
        dv = dv.reshape(b, h, rep, n, -1).sum(2)
    calls["fallback_backward"] += 1
    return dq.to(query.dtype), dk.to(key.dtype), dv.to(value.dtype)


def _forward(query, key, value, is_causal, attn_mask, scale):
    """(out, lse) by flashpp's kernels where _plan allows, else by the math
    fallback; out is in the layout of empty_like(query) either way."""
    scale = _scale(query, scale)
    plan = _plan(query, key, value, is_causal, attn_mask)
    if plan is None:
        out, lse = _math_forward(query, key, value, is_causal, attn_mask, scale)
        return _alloc_like(query, out.shape).copy_(out), lse
    return _flash_forward(query, key, value, plan, scale)


def _backward_into(grads, grad_out, query, key, value, out, lse, is_causal, attn_mask, scale):
    """Writes (dq, dk, dv) into `grads`, by the same choice as _forward."""
    scale = _scale(query, scale)
    plan = _plan(query, key, value, is_causal, attn_mask)
    if plan is None:
        for g, r in zip(grads, _math_backward(grad_out, query, key, value, out, lse, is_causal, attn_mask, scale)):
            g.copy_(r)
    else:
        _flash_backward(grad_out, query, key, value, out, lse, plan, scale, grads)


# ---- ATen kernels -----------------------------------------------------------

def _cpu_forward(query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    _check_dropout(dropout_p)
    out, lse = _forward(query, key, value, is_causal, attn_mask, scale)
    # The CPU operator's LSE is (batch, seq_q, heads) memory seen as (batch, heads, seq_q).
    lse_t = torch.empty((lse.shape[0], lse.shape[2], lse.shape[1]), dtype=torch.float32,
                        device=lse.device).transpose(1, 2)
    lse_t.copy_(lse)
    return out, lse_t


def _cpu_backward(grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, *, attn_mask=None,
                  scale=None):
    _check_dropout(dropout_p)
    # Gradients in (batch, seq, heads, dim) memory, as the operator's meta function says.
    grads = tuple(torch.empty_permuted(x.shape, (0, 2, 1, 3), dtype=x.dtype, device=x.device)
                  for x in (query, key, value))
    _backward_into(grads, grad_out, query, key, value, out, logsumexp, is_causal, attn_mask, scale)
    return grads


def _cuda_forward(query, key, value, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None):
    _check_dropout(dropout_p)
    if return_debug_mask:
        fail("not_supported", "return_debug_mask", "flashpp does not materialize attention probabilities")
    out, lse = _forward(query, key, value, is_causal, None, scale)
    dev = query.device
    rng_state = torch.empty((2,), dtype=torch.uint64, device=dev)
    unused = torch.empty((), dtype=torch.uint64, device=dev)
    debug = torch.empty(0, dtype=query.dtype, device=dev)
    return out, lse, None, None, query.shape[2], key.shape[2], rng_state, unused, debug


def _cuda_backward(grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p,
                   is_causal, philox_seed, philox_offset, *, scale=None):
    _check_dropout(dropout_p)
    grads = (torch.empty_like(query), torch.empty_like(key), torch.empty_like(value))
    _backward_into(grads, grad_out, query, key, value, out, logsumexp, is_causal, None, scale)
    return grads


def _window_args(left, right, is_causal):
    left = -1 if left is None else int(left)
    right = -1 if right is None else int(right)
    return left, (0 if is_causal else right)


def _flash_attention_forward(query, key, value, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal,
                             return_debug_mask, *, scale=None, window_size_left=None, window_size_right=None,
                             seqused_k=None, alibi_slopes=None):
    # flash_attn-style entry (batch, seq, heads, dim) or varlen; bottom-right causal.
    _check_dropout(dropout_p)
    if return_debug_mask:
        fail("not_supported", "return_debug_mask", "flashpp does not materialize attention probabilities")
    if seqused_k is not None:
        fail("not_supported", "seqused_k", "not supported by flashpp's varlen forward")
    if alibi_slopes is not None:
        fail("not_supported", "alibi_slopes", "ALiBi biases are not supported")
    left, right = _window_args(window_size_left, window_size_right, is_causal)
    out = torch.empty_like(query)
    varlen = cum_seq_q is not None
    lse_shape = (query.shape[1], query.shape[0]) if varlen else (query.shape[0], query.shape[2], query.shape[1])
    lse = torch.empty(lse_shape, dtype=torch.float32, device=query.device)
    _ops.run_forward(query, key, value, out, lse, cum_seq_q, cum_seq_k, max_q if varlen else 0,
                     max_k if varlen else 0, softmax_scale=scale, causal=is_causal, window_left=left,
                     window_right=right)
    calls["forward"] += 1
    dev = query.device
    return (out, lse, torch.empty((2,), dtype=torch.uint64, device=dev), torch.empty((), dtype=torch.uint64, device=dev),
            torch.empty(0, dtype=query.dtype, device=dev))


def _flash_attention_backward(grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k,
                              dropout_p, is_causal, rng_state, unused, *, scale=None, window_size_left=None,
                              window_size_right=None):
    _check_dropout(dropout_p)
    left, right = _window_args(window_size_left, window_size_right, is_causal)
    varlen = cum_seq_q is not None and cum_seq_q.numel() > 0
    grads = (torch.empty_like(query), torch.empty_like(key), torch.empty_like(value))
    _ops.run_backward(_ops._last_dim_contiguous(grad_out), query, key, value, out, logsumexp, *grads,
                      cum_seq_q if varlen else None, cum_seq_k if varlen else None, max_q if varlen else 0,
                      max_k if varlen else 0, softmax_scale=scale, causal=is_causal, window_left=left,
                      window_right=right, deterministic=torch.are_deterministic_algorithms_enabled())
    calls["backward"] += 1
    return grads


def register_kernels():
    """Puts flashpp's kernels into the dispatcher (what activation runs)."""
    lib = torch.library.Library("aten", "IMPL")  # noqa: TOR901 - overriding ATen kernels is the point
    with warnings.catch_warnings():
        # Replacing the built-in kernels is what activation asks for; torch warns about each one.
        warnings.filterwarnings("ignore", message="(?s).*Overriding a previously registered kernel")
        lib.impl("_scaled_dot_product_flash_attention_for_cpu", _cpu_forward, "CPU")
        lib.impl("_scaled_dot_product_flash_attention_for_cpu_backward", _cpu_backward, "CPU")
        lib.impl("_scaled_dot_product_flash_attention", _cuda_forward, "CUDA")
        lib.impl("_scaled_dot_product_flash_attention_backward", _cuda_backward, "CUDA")
        lib.impl("_flash_attention_forward", _flash_attention_forward, "CUDA")
        lib.impl("_flash_attention_backward", _flash_attention_backward, "CUDA")
    return _Handle(lib, _prefer_flash_backend())


def available():
    """Whether this PyTorch has torch.nn.attention's flash-attention registry."""
    import torch.nn.attention as attn

    return hasattr(attn, "register_flash_attention_impl")


def register():
    """Registers "flashpp" with torch.nn.attention (done on import of flashpp.torch)."""
    import torch.nn.attention as attn

    if available():
        attn.register_flash_attention_impl(NAME, register_fn=register_kernels)


def activate():
    """torch.nn.attention.activate_flash_attention_impl("flashpp")."""
    import torch.nn.attention as attn

    if not available():
        fail("not_supported", "torch", f"PyTorch {torch.__version__} has no register_flash_attention_impl "
                                       "(needs 2.11 or newer)")
    register()
    attn.activate_flash_attention_impl(NAME)


def restore():
    """torch.nn.attention.restore_flash_attention_impl()."""
    import torch.nn.attention as attn

    if available():
        attn.restore_flash_attention_impl()
