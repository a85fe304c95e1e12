"""CUDA-only behaviour of the torch layer: launches follow the current stream,
and forward + backward can be captured into a CUDA graph and replayed."""

import pytest

torch = pytest.importorskip("torch")

import flashpp.torch as ft  # noqa: E402
from torch_devices import needs_cuda  # noqa: E402

pytestmark = needs_cuda


def inputs(seed, b=2, s=128, h=8, hk=2, d=64, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(seed)
    mk = lambda *shape: torch.randn(*shape, generator=g).to(dtype).cuda()
    return mk(b, s, h, d), mk(b, s, hk, d), mk(b, s, hk, d), mk(b, s, h, d)


def fwd_bwd(q, k, v, dout):
    out = ft.flash_attn_func(q, k, v, causal=True)
    return (out,) + torch.autograd.grad(out, (q, k, v), dout)


def test_side_stream_gives_the_same_results(seed):
    data = inputs(seed)
    leaves = lambda: [x.clone().requires_grad_(i < 3) for i, x in enumerate(data)]
    ref = fwd_bwd(*leaves())
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got = fwd_bwd(*leaves())
    torch.cuda.current_stream().wait_stream(side)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_cuda_graph_capture_and_replay(seed):
    q, k, v, dout = inputs(seed)
    static = [x.clone().requires_grad_(i < 3) for i, x in enumerate((q, k, v, dout))]
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):
        for _ in range(2):
            fwd_bwd(*static)
    torch.cuda.current_stream().wait_stream(warm)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = fwd_bwd(*static)
    # New inputs into the static buffers, replay, compare with an eager run.
    fresh = inputs(seed + 1)
    with torch.no_grad():
        for dst, src in zip(static, fresh):
            dst.copy_(src)
    graph.replay()
    torch.cuda.synchronize()
    eager = fwd_bwd(*[x.clone().requires_grad_(i < 3) for i, x in enumerate(fresh)])
    for a, b in zip(captured, eager):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
