"""flashpp.attention / attention_backward on NumPy arrays (CPU backend) against
the float64 NumPy reference, with the tolerance rule of attn_reference.py."""

import numpy as np
import pytest

import attn_reference as ref
import flashpp

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # bf16 on NumPy needs ml_dtypes
    BF16 = None

DTYPES = [
    pytest.param(np.dtype(np.float32), id="float32"),
    pytest.param(np.dtype(np.float16), id="float16"),
    pytest.param(BF16, id="bfloat16",
                 marks=pytest.mark.skipif(BF16 is None, reason="ml_dtypes is not installed (bf16 NumPy arrays)")),
]


def randn(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def hdim(rng, hi=128):
    return int(rng.integers(1, hi // 8 + 1)) * 8


class Case:
    """A random problem for one scenario; sizes are fresh every run."""

    def __init__(self, rng, dtype, *, sq=None, sk=None, heads_kv=None, gqa=None, d=None, dv=None, causal=False,
                 window=(-1, -1), softcap=0.0, softmax_scale=None, scale_inputs=1.0, q_magnitude=1.0):
        self.b = int(rng.integers(1, 3))
        self.sq = int(rng.integers(1, 70)) if sq is None else sq
        self.sk = int(rng.integers(1, 70)) if sk is None else sk
        self.hk = int(rng.integers(1, 3)) if heads_kv is None else heads_kv
        self.hq = self.hk * (1 if gqa is None else gqa)
        self.d = hdim(rng) if d is None else d
        self.dv = self.d if dv is None else dv
        self.dtype = dtype
        self.scale_inputs = scale_inputs
        self.q_magnitude = q_magnitude
        self.opts = dict(causal=causal, window=window, softcap=softcap, softmax_scale=softmax_scale)
        self.q = randn(rng, (self.b, self.sq, self.hq, self.d), dtype, scale_inputs * q_magnitude)
        self.k = randn(rng, (self.b, self.sk, self.hk, self.d), dtype, scale_inputs)
        self.v = randn(rng, (self.b, self.sk, self.hk, self.dv), dtype)
        self.dout = randn(rng, (self.b, self.sq, self.hq, self.dv), dtype)

    def __repr__(self):
        return (f"b={self.b} sq={self.sq} sk={self.sk} hq={self.hq} hk={self.hk} d={self.d} dv={self.dv} "
                f"{self.dtype.name} {self.opts} input scale {self.scale_inputs} q magnitude {self.q_magnitude:.1f}")


def check_forward(c, out, lse):
    o64, l64 = ref.forward(c.q, c.k, c.v, **c.opts)
    on, ln = ref.forward(c.q, c.k, c.v, precision=c.dtype, **c.opts)
    assert out.dtype == c.dtype and out.shape == o64.shape, c
    assert lse.dtype == np.float32 and lse.shape == l64.shape, c
    ref.check_close(f"out [{c}]", out, o64, on, c.dtype.name)
    ref.check_close(f"lse [{c}]", lse, l64, ln, c.dtype.name)


def check_backward(c, dq, dk, dv):
    g64 = ref.backward(c.dout, c.q, c.k, c.v, **c.opts)
    gn = ref.backward(c.dout, c.q, c.k, c.v, precision=c.dtype, **c.opts)
    for name, ours, r64, rn, x in zip(("dq", "dk", "dv"), (dq, dk, dv), g64, gn, (c.q, c.k, c.v)):
        assert ours.dtype == c.dtype and ours.shape == x.shape, (name, c)
        ref.check_close(f"{name} [{c}]", ours, r64, rn, c.dtype.name)


def run_both(c):
    out, lse = flashpp.attention(c.q, c.k, c.v, return_lse=True, **c.opts)
    check_forward(c, out, lse)
    dq, dk, dv = flashpp.attention_backward(c.dout, c.q, c.k, c.v, out, lse, **c.opts)
    check_backward(c, dq, dk, dv)
    return out, lse


SCENARIOS = {
    "plain": {},
    "causal": dict(causal=True),
    "causal_square": dict(causal=True, same_len=True),
    "window": dict(window="random"),
    "causal_window": dict(causal=True, window="left"),
    "softcap": dict(softcap=5.0, scale_inputs=2.0),
    "gqa": dict(gqa=3),
    "mqa": dict(heads_kv=1, gqa=4),
    "head_dim_v_differs": dict(dv="random"),
    "custom_scale": dict(softmax_scale=0.37),
    # Logits of hundreds (as in the C++ suite): exp without max subtraction overflows.
    "large_logits": dict(q_magnitude="random"),
    "seqlen_q_1": dict(sq=1),
    "seqlen_k_1": dict(sk=1),
    "head_dim_256": dict(d=256, sq=9, sk=13),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_forward_backward(scenario, dtype, rng):
    kw = dict(SCENARIOS[scenario])
    if kw.pop("same_len", False):
        kw["sq"] = kw["sk"] = int(rng.integers(1, 70))
    if kw.get("window") == "random":
        kw["window"] = (int(rng.integers(0, 20)), int(rng.integers(0, 20)))
    elif kw.get("window") == "left":
        kw["window"] = (int(rng.integers(0, 20)), 0)
    if kw.get("dv") == "random":
        kw["dv"] = hdim(rng)
    if kw.get("q_magnitude") == "random":
        # fp32 at logits in the hundreds: score rounding sets both errors (see docs/testing.md).
        kw["q_magnitude"] = float(rng.uniform(4, 24) if dtype == np.float32 else rng.uniform(30, 100))
    c = Case(rng, dtype, **kw)
    run_both(c)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fully_masked_rows_give_zero_and_minus_inf(dtype, rng):
    # Causal with seqlen_q > seqlen_k: the first sq - sk query rows see no key.
    sk = int(rng.integers(1, 10))
    c = Case(rng, dtype, sq=sk + int(rng.integers(1, 10)), sk=sk, causal=True)
    out, lse = run_both(c)
    dead = c.sq - c.sk
    assert np.all(out[:, :dead] == 0)
    assert np.all(np.isneginf(lse[:, :, :dead]))
    dq, _, _ = flashpp.attention_backward(c.dout, c.q, c.k, c.v, out, lse, causal=True)
    assert np.all(dq[:, :dead] == 0) and np.all(np.isfinite(dq))


@pytest.mark.parametrize("dtype", DTYPES)
def test_non_contiguous_inputs(dtype, rng):
    # q/k/v as views of (batch, heads, seqlen, dim) buffers with spare heads:
    # only the last dim is contiguous. At least two rows per tensor: a single row
    # (batch, seqlen and heads all 1) is contiguous whatever its strides.
    c = Case(rng, dtype, sq=int(rng.integers(2, 70)), sk=int(rng.integers(2, 70)))
    def strided(x):
        b, s, h, d = x.shape
        big = randn(rng, (b, h + 2, s, d + 8), dtype)
        view = np.swapaxes(big, 1, 2)[:, :, 1:h + 1, :d]
        view[...] = x
        assert not view.flags.c_contiguous
        return view
    q, k, v, dout = (strided(x) for x in (c.q, c.k, c.v, c.dout))
    out, lse = flashpp.attention(q, k, v, return_lse=True, **c.opts)
    check_forward(c, out, lse)
    dq, dk, dv = flashpp.attention_backward(dout, q, k, v, out, lse, **c.opts)
    check_backward(c, dq, dk, dv)


@pytest.mark.parametrize("dtype", DTYPES)
def test_outputs_given_are_fully_written(dtype, rng):
    c = Case(rng, dtype, causal=True)
    out = np.full((c.b, c.sq, c.hq, c.dv), np.nan, dtype=dtype)
    lse = np.full((c.b, c.hq, c.sq), np.nan, dtype=np.float32)
    got_out, got_lse = flashpp.attention(c.q, c.k, c.v, out=out, lse=lse, **c.opts)
    assert got_out is out and got_lse is lse
    check_forward(c, out, lse)
    dq, dk, dv = (np.full(x.shape, np.nan, dtype=dtype) for x in (c.q, c.k, c.v))
    res = flashpp.attention_backward(c.dout, c.q, c.k, c.v, out, lse, dq=dq, dk=dk, dv=dv, **c.opts)
    assert res[0] is dq and res[1] is dk and res[2] is dv
    check_backward(c, dq, dk, dv)


def test_without_lse_returns_out_only(rng):
    c = Case(rng, np.dtype(np.float32))
    out = flashpp.attention(c.q, c.k, c.v)
    assert isinstance(out, np.ndarray)
    o64, _ = ref.forward(c.q, c.k, c.v)
    on, _ = ref.forward(c.q, c.k, c.v, precision=np.float32)
    ref.check_close("out", out, o64, on, "float32")


def varlen_case(rng, dtype, causal):
    # Sequence lengths include empty queries and empty keys.
    nseq = int(rng.integers(2, 5))
    lq = rng.integers(0, 30, nseq)
    lk = rng.integers(0, 30, nseq)
    lq[0], lk[1 % nseq] = 0, 0
    cq = np.concatenate([[0], np.cumsum(lq)]).astype(np.int32)
    ck = np.concatenate([[0], np.cumsum(lk)]).astype(np.int32)
    hk, gqa, d = int(rng.integers(1, 3)), int(rng.integers(1, 3)), hdim(rng, 64)
    q = randn(rng, (int(cq[-1]), hk * gqa, d), dtype)
    k = randn(rng, (int(ck[-1]), hk, d), dtype)
    v = randn(rng, (int(ck[-1]), hk, d), dtype)
    dout = randn(rng, q.shape, dtype)
    return q, k, v, dout, cq, ck, dict(causal=causal)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_varlen(dtype, causal, rng):
    q, k, v, dout, cq, ck, opts = varlen_case(rng, dtype, causal)
    lens = dict(cu_seqlens_q=cq, cu_seqlens_k=ck)
    out, lse = flashpp.attention(q, k, v, return_lse=True, **lens, **opts)
    assert lse.shape == (q.shape[1], q.shape[0])
    o64, l64 = ref.forward(q, k, v, **lens, **opts)
    on, ln = ref.forward(q, k, v, precision=dtype, **lens, **opts)
    ref.check_close("varlen out", out, o64, on, dtype.name)
    ref.check_close("varlen lse", lse, l64, ln, dtype.name)
    grads = flashpp.attention_backward(dout, q, k, v, out, lse, **lens, **opts)
    g64 = ref.backward(dout, q, k, v, **lens, **opts)
    gn = ref.backward(dout, q, k, v, precision=dtype, **lens, **opts)
    for name, ours, r64, rn in zip(("dq", "dk", "dv"), grads, g64, gn):
        ref.check_close(f"varlen {name}", ours, r64, rn, dtype.name)


def test_varlen_explicit_max_seqlen_matches_derived(rng):
    q, k, v, _, cq, ck, opts = varlen_case(rng, np.dtype(np.float32), True)
    a = flashpp.attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, **opts)
    b = flashpp.attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, max_seqlen_q=int(np.diff(cq).max()),
                          max_seqlen_k=int(np.diff(ck).max()), **opts)
    assert np.array_equal(a, b)


def test_deterministic_backward_is_bitwise_repeatable(rng):
    c = Case(rng, np.dtype(np.float16), causal=True, gqa=2)
    out, lse = flashpp.attention(c.q, c.k, c.v, return_lse=True, **c.opts)
    first = flashpp.attention_backward(c.dout, c.q, c.k, c.v, out, lse, deterministic=True, **c.opts)
    second = flashpp.attention_backward(c.dout, c.q, c.k, c.v, out, lse, deterministic=True, **c.opts)
    for a, b in zip(first, second):
        assert a.tobytes() == b.tobytes()


def test_select_reports_cpu_backend(rng):
    c = Case(rng, np.dtype(np.float32))
    ok, backend, reason = flashpp.select_forward(c.q, c.k, c.v)
    assert ok and backend == "cpu" and reason == ""
    ok, backend, _ = flashpp.select_backward(c.q, c.k, c.v, causal=True)
    assert ok and backend == "cpu"
