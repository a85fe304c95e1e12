"""Naive attention in NumPy, the oracle of the Python tests.

`precision=None` computes in float64 (the reference). `precision=<dtype>`
is the "same-dtype naive" implementation, the same one as the C++ suite's
(src/reference, Precision::storage): QK^T accumulated in float32, every
intermediate a framework stores (S, P, O, dP, D, dS, gradients) rounded to
the input dtype. Its error against float64 is the budget of the tolerance rule
    err(ours vs f64) <= 2 * err(naive same dtype vs f64) + atol(dtype).
softmax_scale and softcap are float32 in the library, so both versions use
their float32 values.
"""

import numpy as np

from seeding import reproduce_hint

# The same atol per dtype as the C++ suite (tests/support/compare.cpp).
ATOL = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}


def visible(sq, sk, window_left, window_right):
    """(sq, sk) bool: which keys each query sees, aligned bottom-right."""
    i = np.arange(sq)[:, None]
    j = np.arange(sk)[None, :]
    diag = i + sk - sq
    ok = np.ones((sq, sk), dtype=bool)
    if window_left >= 0:
        ok &= j >= diag - window_left
    if window_right >= 0:
        ok &= j <= diag + window_right
    return ok


class _Math:
    """float64 throughout, or rounding to `dtype` at each stored intermediate."""

    def __init__(self, precision):
        self.dtype = None if precision is None else np.dtype(precision)

    def r(self, x):
        x = np.asarray(x, dtype=np.float64)
        if self.dtype is None:
            return x
        return x.astype(self.dtype).astype(np.float64)

    def mm(self, spec, a, b):
        """A product of stored intermediates; naive: float32 operands and accumulation, as a GEMM."""
        if self.dtype is None:
            return np.einsum(spec, a, b)
        return np.einsum(spec, a.astype(np.float32), b.astype(np.float32)).astype(np.float64)

    def qk(self, q, k):
        """(H, sq, d) x (H, sk, d) -> (H, sq, sk); naive: a float32 running sum over d."""
        if self.dtype is None:
            return np.einsum("hid,hjd->hij", q, k)
        q32, k32 = q.astype(np.float32), k.astype(np.float32)
        acc = np.zeros((q.shape[0], q.shape[1], k.shape[1]), dtype=np.float32)
        for c in range(q.shape[2]):
            acc += q32[:, :, None, c] * k32[:, None, :, c]
        return acc.astype(np.float64)


def _float32_params(q, softmax_scale, softcap):
    scale = 1.0 / np.sqrt(q.shape[-1]) if softmax_scale is None else softmax_scale
    return float(np.float32(scale)), float(np.float32(softcap))


def _window(causal, window):
    left, right = window
    return left, (0 if causal else right)


def _slices(q, k, cu_seqlens_q, cu_seqlens_k):
    """(q rows, k rows) of each sequence: batches, or varlen sequences."""
    if cu_seqlens_q is None:
        return [((b, slice(None)), (b, slice(None))) for b in range(q.shape[0])]
    cq, ck = np.asarray(cu_seqlens_q), np.asarray(cu_seqlens_k)
    return [((slice(cq[b], cq[b + 1]),), (slice(ck[b], ck[b + 1]),)) for b in range(len(cq) - 1)]


def _scores(m, q, k, scale, softcap, mask):
    """q: (H, sq, d), k: (H, sk, d) -> S after scale/softcap, -inf where masked."""
    if m.dtype is None:
        s = m.qk(q, k) * scale
    else:
        s = m.r(m.r(m.qk(q, k)) * m.r(scale))
    if softcap > 0:
        s = m.r(softcap * np.tanh(s / softcap))
    return np.where(mask[None], s, -np.inf)


def _softmax(m, s):
    """Row softmax of S with -inf entries; rows with no key give P = 0, lse = -inf."""
    mx = np.max(s, axis=-1, keepdims=True, initial=-np.inf)
    has = np.isfinite(mx)
    mx = np.where(has, mx, 0.0)
    e = np.exp(s - mx)
    # naive: the row sum in float32, as a framework's softmax reduces.
    l = np.sum(e if m.dtype is None else e.astype(np.float32), axis=-1, keepdims=True).astype(np.float64)
    p = np.where(has, e / np.where(has, l, 1.0), 0.0)
    lse = np.where(has[..., 0], mx[..., 0] + np.log(np.where(has[..., 0], l[..., 0], 1.0)), -np.inf)
    return m.r(p), lse


def _heads(x, gqa):
    """(s, hkv, d) -> (hq, s, d), each kv head shared by `gqa` query heads."""
    return np.repeat(np.swapaxes(x, 0, 1), gqa, axis=0)


def forward(q, k, v, *, causal=False, window=(-1, -1), softcap=0.0, softmax_scale=None, precision=None,
            cu_seqlens_q=None, cu_seqlens_k=None):
    """Returns (out, lse) as float64: out like q with v's head dim, lse
    (batch, heads, seqlen_q) or (heads, total_q) for varlen."""
    m = _Math(precision)
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    scale, softcap = _float32_params(q, softmax_scale, softcap)
    wl, wr = _window(causal, window)
    varlen = cu_seqlens_q is not None
    hq, hk = q.shape[-2], k.shape[-2]
    gqa = hq // hk
    out = np.zeros(q.shape[:-1] + (v.shape[-1],))
    lse = np.full((hq, q.shape[0]) if varlen else (q.shape[0], hq, q.shape[1]), -np.inf)
    for qi, ki in _slices(q, k, cu_seqlens_q, cu_seqlens_k):
        qs, ks, vs = q[qi], k[ki], v[ki]
        sq, sk = qs.shape[0], ks.shape[0]
        if sq == 0:
            continue
        s = _scores(m, np.swapaxes(qs, 0, 1), _heads(ks, gqa), scale, softcap, visible(sq, sk, wl, wr))
        p, row_lse = _softmax(m, s)
        o = m.r(m.mm("hij,hjd->hid", p, _heads(vs, gqa)))
        out[qi] = np.swapaxes(o, 0, 1)
        if varlen:
            lse[:, qi[0]] = row_lse
        else:
            lse[qi[0]] = row_lse
    return out, lse


def backward(dout, q, k, v, *, causal=False, window=(-1, -1), softcap=0.0, softmax_scale=None, precision=None,
             cu_seqlens_q=None, cu_seqlens_k=None):
    """Returns (dq, dk, dv) as float64, shaped like q, k, v."""
    m = _Math(precision)
    q, k, v, dout = (np.asarray(x, dtype=np.float64) for x in (q, k, v, dout))
    scale, softcap = _float32_params(q, softmax_scale, softcap)
    wl, wr = _window(causal, window)
    hq, hk = q.shape[-2], k.shape[-2]
    gqa = hq // hk
    dq, dk, dv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
    for qi, ki in _slices(q, k, cu_seqlens_q, cu_seqlens_k):
        qs, ks, vs, dos = q[qi], k[ki], v[ki], dout[qi]
        sq, sk = qs.shape[0], ks.shape[0]
        if sq == 0 or sk == 0:
            continue
        qh, kh, vh, doh = np.swapaxes(qs, 0, 1), _heads(ks, gqa), _heads(vs, gqa), np.swapaxes(dos, 0, 1)
        s = _scores(m, qh, kh, scale, softcap, visible(sq, sk, wl, wr))
        p, _ = _softmax(m, s)
        dvh = m.r(m.mm("hij,hid->hjd", p, doh))
        dp = m.r(m.mm("hid,hjd->hij", doh, vh))
        pdp = p * dp if m.dtype is None else (p.astype(np.float32) * dp.astype(np.float32))
        d_row = m.r(np.sum(pdp, axis=-1, keepdims=True).astype(np.float64))
        ds = m.r(p * m.r(dp - d_row))
        if softcap > 0:
            capped = np.where(np.isfinite(s), s, 0.0)
            ds = m.r(ds * (1.0 - (capped / softcap) ** 2))
        dqh = m.r(m.mm("hij,hjd->hid", ds, kh) * scale)
        dkh = m.r(m.mm("hij,hid->hjd", ds, qh) * scale)
        dq[qi] = np.swapaxes(dqh, 0, 1)
        # GQA: a kv head's gradient sums over the query heads that share it.
        fold = lambda g: np.swapaxes(g.reshape(hk, gqa, *g.shape[1:]).sum(axis=1), 0, 1)
        dk[ki] = fold(dkh)
        dv[ki] = fold(dvh)
    # An unfused implementation stores the GQA-summed gradients in the input dtype.
    return dq, m.r(dk), m.r(dv)


def max_err(ours, ref):
    """Max |ours - ref| where ref is finite; infinities must match exactly."""
    ours = np.asarray(ours, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    finite = np.isfinite(ref)
    inf_ok = bool(np.all(ours[~finite] == ref[~finite]))
    nonfinite = int(np.count_nonzero(~np.isfinite(ours[finite])))
    err = float(np.max(np.abs(ours[finite] - ref[finite]))) if np.any(finite) else 0.0
    return err, inf_ok, nonfinite


def check_close(what, ours, ref64, naive, dtype_name):
    """Asserts the tolerance rule; the message carries the seed that reproduces it."""
    e, inf_ok, nonfinite = max_err(ours, ref64)
    n, _, _ = max_err(naive, ref64)
    bound = 2 * n + ATOL[dtype_name]
    assert inf_ok and nonfinite == 0 and e <= bound, (
        f"{what}: ours {e:.3e} > bound {bound:.3e} (naive {n:.3e}), inf match {inf_ok}, "
        f"nonfinite {nonfinite}; {reproduce_hint()}"
    )
    return e, bound
