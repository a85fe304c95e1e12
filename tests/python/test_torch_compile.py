"""torch.compile(fullgraph=True) traces flashpp's custom ops (fake
implementations + autograd formula) and gives the eager results."""

import pytest

torch = pytest.importorskip("torch")

import flashpp.torch as ft  # noqa: E402
from torch_devices import DEVICES, low_precision  # noqa: E402


def inputs(seed, device, dtype, b=2, sq=24, sk=24, h=4, hk=2, d=32):
    g = torch.Generator().manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g).to(dtype).to(device)
    return mk(b, sq, h, d), mk(b, sk, hk, d), mk(b, sk, hk, d), mk(b, sq, h, d)


def attention_block(q, k, v):
    # Some tensor code around the op, as a model would have.
    out = ft.flash_attn_func(q * 1.5, k, v, causal=True, window_size=(9, 0), softcap=8.0)
    return out.float().square().mean(dim=-1)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_forward_backward_match_eager(backend, device, seed):
    torch._dynamo.reset()
    dtype = low_precision(device)
    q, k, v, _ = inputs(seed, device, dtype)

    def run(fn):
        leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
        y = fn(*leaves)
        grads = torch.autograd.grad(y.sum(), leaves)
        return y, grads

    y0, g0 = run(attention_block)
    compiled = torch.compile(attention_block, backend=backend, fullgraph=True)
    y1, g1 = run(compiled)
    # The same kernels run in both; only the code around them may be fused differently.
    torch.testing.assert_close(y1, y0)
    for a, b in zip(g1, g0):
        torch.testing.assert_close(a, b)


def test_compile_fullgraph_varlen(seed):
    torch._dynamo.reset()
    q, k, v, _ = inputs(seed, "cpu", torch.float32, b=1, sq=20, sk=20)
    q, k, v = q[0], k[0], v[0]
    cu = torch.tensor([0, 7, 7, 20], dtype=torch.int32)

    def fn(q, k, v):
        return ft.flash_attn_varlen_func(q, k, v, cu, cu, 13, 13, causal=True)

    torch.testing.assert_close(torch.compile(fn, backend="aot_eager", fullgraph=True)(q, k, v), fn(q, k, v),
                               rtol=0, atol=0)
