"""F.scaled_dot_product_attention runs on flashpp once the "flashpp" flash
implementation is activated through torch.nn.attention; the counters in
flashpp.torch.sdpa prove the dispatch."""

import pytest

torch = pytest.importorskip("torch")
import torch.nn.attention as attn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import flashpp.torch as ft  # noqa: E402
from torch_devices import DEVICES, low_precision  # noqa: E402
from torch_reference import DTYPE_NAMES, check_close  # noqa: E402

pytestmark = pytest.mark.skipif(not ft.sdpa.available(),
                                reason=f"torch {torch.__version__} has no register_flash_attention_impl")


@pytest.fixture
def flashpp_sdpa():
    attn.activate_flash_attention_impl("flashpp")
    ft.sdpa.calls.clear()
    yield ft.sdpa.calls
    attn.restore_flash_attention_impl()


def bhsd(seed, device, dtype, b, h, hk, sq, sk, d):
    g = torch.Generator().manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g).to(dtype).to(device)
    return mk(b, h, sq, d), mk(b, hk, sk, d), mk(b, hk, sk, d), mk(b, h, sq, d)


def reference(q, k, v, dout, prec, is_causal=False, attn_mask=None, scale=None):
    """SDPA semantics (top-left causal) computed in `prec` with autograd."""
    xs = [x.detach().to(prec).requires_grad_(True) for x in (q, k, v)]
    rep = q.shape[1] // k.shape[1]
    kk, vv = (x.repeat_interleave(rep, dim=1) for x in xs[1:])
    s = xs[0] @ kk.transpose(-1, -2) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if is_causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril(), float("-inf"))
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask.to(prec)
    out = torch.softmax(s, dim=-1) @ vv
    return out, torch.autograd.grad(out, xs, dout.to(prec))


def check_sdpa(q, k, v, dout, **kw):
    leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
    out = F.scaled_dot_product_attention(*leaves, enable_gqa=k.shape[1] != q.shape[1], **kw)
    grads = torch.autograd.grad(out, leaves, dout)
    o64, g64 = reference(q, k, v, dout, torch.float64, **kw)
    on, gn = reference(q, k, v, dout, q.dtype, **kw)
    check_close("sdpa out", out, o64, on, q.dtype)
    for name, a, r, n in zip("qkv", grads, g64, gn):
        check_close(f"sdpa d{name}", a, r, n, q.dtype)


CASES = {
    "square_causal": dict(sq=40, sk=40, is_causal=True),
    "full": dict(sq=33, sk=47),
    "causal_more_queries": dict(sq=45, sk=30, is_causal=True),
    "head_dim_20": dict(sq=17, sk=17, d=20, is_causal=True),
    "scale": dict(sq=16, sk=24, scale=0.3),
    "gqa": dict(sq=21, sk=21, hk=2, is_causal=True),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(CASES))
def test_sdpa_dispatches_to_flashpp(flashpp_sdpa, case, device, seed):
    kw = dict(CASES[case])
    sq, sk, d, hk = kw.pop("sq"), kw.pop("sk"), kw.pop("d", 64), kw.pop("hk", 4)
    q, k, v, dout = bhsd(seed, device, low_precision(device), 2, 4, hk, sq, sk, d)
    check_sdpa(q, k, v, dout, **kw)
    if device == "cuda" and kw.get("is_causal") and sq != sk:
        # PyTorch's SDPA never hands non-square causal calls to its flash
        # backend on CUDA (its FA2 had other alignment rules); they go elsewhere.
        assert sum(flashpp_sdpa.values()) == 0, dict(flashpp_sdpa)
        return
    assert flashpp_sdpa["forward"] == 1 and flashpp_sdpa["backward"] == 1, dict(flashpp_sdpa)
    assert flashpp_sdpa["fallback_forward"] == 0


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=lambda t: DTYPE_NAMES[t])
def test_sdpa_half_precision_on_cpu(flashpp_sdpa, dtype, seed):
    q, k, v, dout = bhsd(seed, "cpu", dtype, 1, 2, 2, 31, 31, 32)
    check_sdpa(q, k, v, dout, is_causal=True)
    assert flashpp_sdpa["forward"] == 1 and flashpp_sdpa["backward"] == 1, dict(flashpp_sdpa)


def test_sdpa_masks_run_exactly_through_the_fallback(flashpp_sdpa, seed):
    q, k, v, dout = bhsd(seed, "cpu", torch.float32, 2, 2, 2, 12, 20, 16)
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(2, 1, 12, 20, generator=g) > 0.3
    mask[..., 0] = True  # every row sees a key
    check_sdpa(q, k, v, dout, attn_mask=mask)
    # CPU SDPA hands masked calls to its flash operator too; flashpp computes them exactly in math.
    assert flashpp_sdpa["fallback_forward"] == 1 and flashpp_sdpa["fallback_backward"] == 1, dict(flashpp_sdpa)
    assert flashpp_sdpa["forward"] == 0


def test_restore_brings_back_the_builtin_kernels(seed):
    q, k, v, _ = bhsd(seed, "cpu", torch.float32, 1, 2, 2, 16, 16, 32)
    before = torch._C._get_sdp_priority_order()
    attn.activate_flash_attention_impl("flashpp")
    assert attn.current_flash_attention_impl() == "flashpp"
    assert torch._C._get_sdp_priority_order()[0] == int(attn.SDPBackend.FLASH_ATTENTION)
    attn.restore_flash_attention_impl()
    assert torch._C._get_sdp_priority_order() == before
    ft.sdpa.calls.clear()
    F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert sum(ft.sdpa.calls.values()) == 0
    assert "flashpp" in attn.list_flash_attention_impls()


def test_sdpa_under_compile(flashpp_sdpa, seed):
    torch._dynamo.reset()
    q, k, v, _ = bhsd(seed, "cpu", torch.float32, 1, 2, 2, 16, 16, 32)
    fn = torch.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), backend="aot_eager",
                       fullgraph=True)
    out = fn(q, k, v)
    assert flashpp_sdpa["forward"] == 1
    o64, _ = reference(q, k, v, torch.zeros_like(q), torch.float64, is_causal=True)
    on, _ = reference(q, k, v, torch.zeros_like(q), torch.float32, is_causal=True)
    check_close("compiled sdpa out", out, o64, on, torch.float32)
