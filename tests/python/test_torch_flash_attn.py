"""flashpp.torch: the flash_attn functions with autograd, against a float64
torch reference (tolerance rule), on CPU tensors and, where present, CUDA."""

import pytest

torch = pytest.importorskip("torch")

import flashpp  # noqa: E402
import flashpp.torch as ft  # noqa: E402
from torch_devices import DEVICE_DTYPES, DEVICES, low_precision  # noqa: E402
from torch_reference import check_against_naive  # noqa: E402


@pytest.fixture
def gen(seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def randn(gen, shape, dtype, device, scale=1.0):
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * scale).to(dtype).to(device)


def randint(gen, lo, hi):
    return int(torch.randint(lo, hi, (1,), generator=gen))


def make_qkv(gen, dtype, device, *, b=None, sq=None, sk=None, hk=None, gqa=1, d=None, dv=None, scale=1.0):
    b = randint(gen, 1, 3) if b is None else b
    sq = randint(gen, 1, 48) if sq is None else sq
    sk = randint(gen, 1, 48) if sk is None else sk
    hk = randint(gen, 1, 3) if hk is None else hk
    d = 8 * randint(gen, 1, 13) if d is None else d
    dv = d if dv is None else dv
    q = randn(gen, (b, sq, hk * gqa, d), dtype, device, scale)
    k = randn(gen, (b, sk, hk, d), dtype, device, scale)
    v = randn(gen, (b, sk, hk, dv), dtype, device)
    dout = randn(gen, (b, sq, hk * gqa, dv), dtype, device)
    return q, k, v, dout


SCENARIOS = {
    "plain": ({}, {}),
    "causal": ({}, dict(causal=True)),
    "window": ({}, dict(window=(5, 3))),
    "causal_window": ({}, dict(causal=True, window=(7, 0))),
    "softcap": (dict(scale=2.0), dict(softcap=4.0)),
    "gqa": (dict(gqa=3), dict(causal=True)),
    "head_dim_v_differs": (dict(d=32, dv=64), {}),
    "head_dim_not_multiple_of_8": (dict(d=20, dv=20), dict(causal=True)),
    "custom_scale": ({}, dict(softmax_scale=0.21)),
    "seqlen_q_1": (dict(sq=1), dict(causal=True)),
}


@pytest.mark.parametrize("device,dtype", DEVICE_DTYPES)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_flash_attn_func(scenario, device, dtype, gen):
    shape_kw, opts = SCENARIOS[scenario]
    q, k, v, dout = make_qkv(gen, dtype, device, **shape_kw)
    window = opts.get("window", (-1, -1))

    def run(q, k, v):
        return ft.flash_attn_func(q, k, v, softmax_scale=opts.get("softmax_scale"), causal=opts.get("causal", False),
                                  window_size=window, softcap=opts.get("softcap", 0.0), return_attn_probs=True)

    out, lse, _ = check_against_naive(scenario, run, (q, k, v), dout, dtype, **opts)
    assert out.shape == q.shape[:-1] + (v.shape[-1],) and out.dtype == dtype and out.device == q.device
    assert lse.shape == (q.shape[0], q.shape[2], q.shape[1]) and lse.dtype == torch.float32


@pytest.mark.parametrize("device,dtype", DEVICE_DTYPES)
def test_packed_functions(device, dtype, gen):
    q, k, v, dout = make_qkv(gen, dtype, device, sq=29, sk=29, hk=2)
    check_against_naive("qkvpacked", lambda q, k, v: ft.flash_attn_qkvpacked_func(
        torch.stack([q, k, v], dim=2), causal=True), (q, k, v), dout, dtype, causal=True)
    qg, kg, vg, doutg = make_qkv(gen, dtype, device, gqa=2)
    check_against_naive("kvpacked", lambda q, k, v: ft.flash_attn_kvpacked_func(
        q, torch.stack([k, v], dim=2), window_size=(4, 4)), (qg, kg, vg), doutg, dtype, window=(4, 4))


def varlen_batch(gen, dtype, device, hk=2, gqa=2, d=32, same_lengths=False):
    n = randint(gen, 2, 5)
    lq = [randint(gen, 0, 25) for _ in range(n)]
    lk = list(lq) if same_lengths else [randint(gen, 0, 25) for _ in range(n)]
    lq[0] = 0  # an empty sequence
    if same_lengths:
        lk[0] = 0
    seqs = []
    for a, c in zip(lq, lk):
        seqs.append(make_qkv(gen, dtype, device, b=1, sq=a, sk=c, hk=hk, gqa=gqa, d=d))
    cat = [torch.cat([s[i][0] for s in seqs]) for i in range(4)]
    cu = lambda ls: torch.tensor([0] + list(torch.tensor(ls).cumsum(0)), dtype=torch.int32, device=device)
    return seqs, cat, cu(lq), cu(lk), max(lq), max(lk)


@pytest.mark.parametrize("device,dtype", DEVICE_DTYPES)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_flash_attn_varlen_func(device, dtype, causal, gen):
    seqs, (q, k, v, dout), cq, ck, mq, mk = varlen_batch(gen, dtype, device)
    leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
    out, lse, _ = ft.flash_attn_varlen_func(*leaves, cq, ck, mq, mk, causal=causal, return_attn_probs=True)
    assert lse.shape == (q.shape[1], q.shape[0])
    grads = torch.autograd.grad(out, leaves, dout)
    # Each sequence on its own must agree with its slice of the batch.
    for i in range(len(seqs)):
        a, b = cq[i].item(), cq[i + 1].item()
        c, d = ck[i].item(), ck[i + 1].item()
        if b == a:
            continue
        if d == c:  # queries without keys: zero output, -inf LSE, zero gradient
            assert torch.all(out[a:b] == 0) and torch.all(torch.isneginf(lse[:, a:b]))
            assert torch.all(grads[0][a:b] == 0)
            continue
        sl = lambda t, lo, hi: t[lo:hi].unsqueeze(0)
        one = lambda n: torch.tensor([0, n], dtype=torch.int32, device=device)
        check_against_naive(
            f"varlen seq {i}",
            lambda q_, k_, v_: ft.flash_attn_varlen_func(q_[0], k_[0], v_[0], one(b - a), one(d - c), b - a, d - c,
                                                         causal=causal).unsqueeze(0),
            (sl(q, a, b), sl(k, c, d), sl(v, c, d)), sl(dout, a, b), dtype, causal=causal)
        seq_out = ft.flash_attn_func(sl(q, a, b), sl(k, c, d), sl(v, c, d), causal=causal)
        torch.testing.assert_close(out[a:b], seq_out[0], rtol=0, atol=0)
    assert all(torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("device", DEVICES)
def test_varlen_packed_functions(device, gen):
    dtype = low_precision(device)
    seqs, (q, k, v, dout), cq, ck, mq, mk = varlen_batch(gen, dtype, device, gqa=1, same_lengths=True)
    ref = ft.flash_attn_varlen_func(q, k, v, cq, cq, mq, mq, causal=True)
    qkv = torch.stack([q, k, v], dim=1).requires_grad_(True)
    out = ft.flash_attn_varlen_qkvpacked_func(qkv, cq, mq, causal=True)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    (g,) = torch.autograd.grad(out, qkv, dout)
    assert g.shape == qkv.shape and torch.isfinite(g).all()
    kv = torch.stack([k, v], dim=1)
    out2 = ft.flash_attn_varlen_kvpacked_func(q, kv, cq, cq, mq, mq, causal=True)
    torch.testing.assert_close(out2, ref, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_deterministic_backward_is_bitwise_repeatable(device, gen):
    q, k, v, dout = make_qkv(gen, low_precision(device), device, gqa=2)

    def grads():
        leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
        out = ft.flash_attn_func(*leaves, causal=True, deterministic=True)
        return torch.autograd.grad(out, leaves, dout)

    for a, b in zip(grads(), grads()):
        assert torch.equal(a, b)


def test_fully_masked_rows_are_zero_with_zero_grads(gen):
    q, k, v, dout = make_qkv(gen, torch.float32, "cpu", sq=12, sk=4)
    leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
    out, lse, _ = ft.flash_attn_func(*leaves, causal=True, return_attn_probs=True)
    assert torch.all(out[:, :8] == 0) and torch.all(torch.isneginf(lse[:, :, :8]))
    dq, dk, dv = torch.autograd.grad(out, leaves, dout)
    assert torch.all(dq[:, :8] == 0)
    assert all(torch.isfinite(g).all() for g in (dq, dk, dv))


def test_unsupported_options_raise_clear_errors(gen):
    q, k, v, _ = make_qkv(gen, torch.float32, "cpu")
    with pytest.raises(NotImplementedError, match="dropout_p"):
        ft.flash_attn_func(q, k, v, dropout_p=0.1)
    with pytest.raises(NotImplementedError, match="alibi_slopes"):
        ft.flash_attn_func(q, k, v, alibi_slopes=torch.ones(q.shape[2]))
    cu = torch.tensor([0, q.shape[1]], dtype=torch.int32)
    with pytest.raises(NotImplementedError, match="block_table"):
        ft.flash_attn_varlen_func(q[0], k[0], v[0], cu, cu, q.shape[1], q.shape[1], block_table=cu)
    with pytest.raises(ValueError, match="window_size"):
        ft.flash_attn_func(q, k, v, window_size=3)


def test_bad_tensors_raise_library_errors(gen):
    q, k, v, _ = make_qkv(gen, torch.float32, "cpu", d=16)
    with pytest.raises(TypeError, match="flashpp: q: dtype must be") as info:
        ft.flash_attn_func(q.double(), k.double(), v.double())
    assert isinstance(info.value, flashpp.Error) and info.value.argument == "q"
    with pytest.raises(TypeError, match="flashpp: k: dtype must match q"):
        ft.flash_attn_func(q, k.half(), v)
    with pytest.raises(ValueError, match="flashpp: k: batch"):
        ft.flash_attn_func(q, torch.cat([k, k]), torch.cat([v, v]))
    with pytest.raises(TypeError, match="flashpp: q: unsupported dtype int64"):
        ft.flash_attn_func(q.long(), k.long(), v.long())
    with pytest.raises(NotImplementedError, match="head dim"):
        ft.flash_attn_func(torch.zeros(1, 2, 1, 264), torch.zeros(1, 2, 1, 264), torch.zeros(1, 2, 1, 264))


def test_last_dim_strided_inputs_are_accepted(gen):
    # flash_attn makes inputs with a strided last dim contiguous; so do we.
    q, k, v, dout = make_qkv(gen, torch.float32, "cpu", d=16)
    wide = [torch.stack([x, torch.zeros_like(x)], dim=-1).flatten(-2)[..., ::2] for x in (q, k, v)]
    assert all(w.stride(-1) == 2 for w in wide)
    torch.testing.assert_close(ft.flash_attn_func(*wide, causal=True), ft.flash_attn_func(q, k, v, causal=True),
                               rtol=0, atol=0)


def test_opcheck_forward_and_backward(gen):
    # Schema, fake implementation and autograd registration agree with the real kernels.
    q, k, v, dout = make_qkv(gen, torch.float32, "cpu", b=2, sq=9, sk=11, hk=2, gqa=2, d=16)
    args = (q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), None, None, 0, 0, 0.25, True, -1, -1, 0.0,
            False)
    torch.library.opcheck(torch.ops.flashpp.fwd.default, args)
    out, lse = torch.ops.flashpp.fwd(*args)
    bargs = (dout, q.detach(), k.detach(), v.detach(), out.detach(), lse, None, None, 0, 0, 0.25, True, -1, -1, 0.0,
             False)
    torch.library.opcheck(torch.ops.flashpp.bwd.default, bargs)
