"""Correctness checks run before any timing (worker side).

Ours runs every problem first and stores its output (and gradients) at a
few thousand random positions under <out>/check/; every other backend's
result for the same problem is compared there. Comparing samples instead of
whole tensors keeps the backends in separate processes (a crash in one
cannot take the others down) and the files tiny; random positions across
the whole tensor still catch any layout, mask or scaling mistake.

The error is max |x - ref| / max |ref| over the samples: a gross-error
detector for benchmarking, not the accuracy test (that is the test suite's
fp64 rule). Its bounds are a few units of bf16/fp16 rounding of O(1)
values; two correct kernels that accumulate in fp32 differ by far less.
Ours is additionally checked against an fp32 standard attention on the same
inputs (a slice of it where the full problem would be too large).
"""

import math
from pathlib import Path

SAMPLES = 8192
# (forward output, gradients) bounds per input dtype.
TOLERANCE = {"bf16": (2e-2, 5e-2), "fp16": (1e-2, 2.5e-2), "fp32": (1e-3, 2e-3)}
# Largest score matrix (elements) the fp32 self-check materializes.
SELF_CHECK_ELEMENTS = 1 << 26


def reference_path(check_dir, check_key):
    return Path(check_dir) / f"{check_key}.pt"


def _positions(torch, shape, seed, salt):
    """Random multi-indices into `shape`, the same in every process."""
    numel = math.prod(shape)
    gen = torch.Generator().manual_seed((int(seed) * 31 + salt) % (2**62))
    flat = torch.randint(0, numel, (min(SAMPLES, numel),), generator=gen)
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat = flat // size
    return tuple(reversed(index))


def take(torch, tensor, seed, salt):
    """tensor's values at the sampled positions, as fp32 on the CPU; works on
    strided views without copying the tensor."""
    idx = _positions(torch, tuple(tensor.shape), seed, salt)
    idx = tuple(i.to(tensor.device) for i in idx)
    return tensor[idx].float().cpu()


def samples(torch, tensors, seed):
    """{name: sampled values} for the canonical out / dq / dk / dv."""
    return {name: take(torch, t, seed, salt) for salt, (name, t) in enumerate(tensors.items()) if t is not None}


def rel_err(torch, x, ref):
    scale = ref.abs().max().item()
    diff = (x - ref).abs().max().item()
    if not math.isfinite(diff):
        return float("inf")
    return diff / max(scale, 1e-12)


def compare(torch, got, ref, dtype):
    """{'status': pass|fail, 'err': {...}, 'tol': {...}} for sampled values."""
    tol_out, tol_grad = TOLERANCE[dtype]
    errs, tols, ok = {}, {}, True
    for name, values in got.items():
        if name not in ref:
            continue
        errs[name] = rel_err(torch, values, ref[name])
        tols[name] = tol_out if name == "out" else tol_grad
        ok = ok and errs[name] <= tols[name]
    if not errs:
        return {"status": "no reference", "detail": "the reference has none of these outputs"}
    return {"status": "pass" if ok else "fail", "err": errs, "tol": tols}


def finite(torch, tensors):
    return all(bool(torch.isfinite(t).all().item()) for t in tensors.values() if t is not None)


def save_reference(torch, check_dir, check_key, values, backend, kernel):
    path = reference_path(check_dir, check_key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save({"values": values, "backend": backend, "kernel": kernel}, tmp)
    tmp.replace(path)  # atomic: a reader never sees half a file


def load_reference(torch, check_dir, check_key):
    path = reference_path(check_dir, check_key)
    if not path.exists():
        return None
    return torch.load(path, weights_only=True)


def self_check(torch, job, q, k, v, dout, out, grads, scale, causal):
    """Ours against fp32 standard attention on the same inputs.

    Uses batch 0 and as many heads as keep the fp32 score matrix under
    SELF_CHECK_ELEMENTS; gradients are compared when they were computed.
    Returns the compare() dict, or None when even one head is too large."""
    from .backends.standard import bottom_right_causal_mask, standard_attention

    nq, nk = q.shape[1], k.shape[1]
    h, hkv = q.shape[2], k.shape[2]
    ratio = h // hkv
    kv_heads = max(1, min(hkv, SELF_CHECK_ELEMENTS // max(1, ratio * nq * nk)))
    if ratio * nq * nk > SELF_CHECK_ELEMENTS:
        return None
    hs = kv_heads * ratio

    def part(t, heads):
        return t[0:1, :, :heads].transpose(1, 2).float().detach()

    want_grad = grads is not None
    rq, rk, rv = (part(t, n).requires_grad_(want_grad) for t, n in ((q, hs), (k, kv_heads), (v, kv_heads)))
    mask = bottom_right_causal_mask(torch, nq, nk, q.device) if causal else None
    ref_out = standard_attention(torch, rq, rk, rv, scale, mask)
    got = {"out": out[0:1, :, :hs].float().transpose(1, 2)}
    ref = {"out": ref_out}
    if want_grad:
        rdo = part(dout, hs)
        ref_grads = torch.autograd.grad(ref_out, (rq, rk, rv), rdo)
        for name, g, r, n in zip(("dq", "dk", "dv"), grads, ref_grads, (hs, kv_heads, kv_heads)):
            got[name] = g[0:1, :, :n].float().transpose(1, 2)
            ref[name] = r
    got = {name: t.detach().reshape(-1) for name, t in got.items()}
    ref = {name: t.detach().reshape(-1) for name, t in ref.items()}
    result = compare(torch, got, ref, job["dtype"])
    result["slice"] = f"batch 0, {hs} of {h} query heads, fp32 standard attention"
    return result
