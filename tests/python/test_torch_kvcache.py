"""flashpp.torch.flash_attn_with_kvcache against naive attention over the
cache as flash_attn defines it: contiguous and paged caches (shuffled pages),
ragged cache lengths, in-place append of new tokens with rotary (both
layouts), GQA, causal/window/softcap, forced split-KV, LSE; tolerance rule
of DESIGN.md (ours <= 2 x same-dtype naive + atol, both vs float64)."""

import pytest

torch = pytest.importorskip("torch")

import flashpp.torch as ft  # noqa: E402
from torch_devices import DEVICE_DTYPES, DEVICES, low_precision  # noqa: E402
from torch_reference import attention, check_close  # noqa: E402


def rotate(x, cos, sin, positions, interleaved):
    """Rotary on the first 2 * cos.shape[-1] dims of x (batch, seq, heads, d) at
    positions (batch, seq), in float64."""
    rd = 2 * cos.shape[-1]
    c = cos.double()[positions][:, :, None, :]
    s = sin.double()[positions][:, :, None, :]
    x = x.double()
    head, tail = x[..., :rd], x[..., rd:]
    if interleaved:
        x1, x2 = head[..., 0::2], head[..., 1::2]
        r = torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)
    else:
        x1, x2 = head[..., : rd // 2], head[..., rd // 2:]
        r = torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)
    return torch.cat((r, tail), dim=-1)


def expected(q, k_cache, v_cache, seqlens, k_new, v_new, rot, block_table, page, dtype, **opts):
    """Per sequence: the keys the call sees after the append (float64 inputs
    rounded as stored), and naive attention over them in `dtype`; returns out,
    lse and the expected cache contents of each appended slot."""
    outs, lses = [], []
    batch, sq = q.shape[0], q.shape[1]
    for b in range(batch):
        n0 = int(seqlens[b])
        if block_table is not None:
            pages = block_table[b]
            kc = k_cache[pages].flatten(0, 1)
            vc = v_cache[pages].flatten(0, 1)
        else:
            kc, vc = k_cache[b], v_cache[b]
        kb, vb = kc[:n0].double(), vc[:n0].double()
        qb = q[b:b + 1].double()
        if k_new is not None:
            kn, vn = k_new[b:b + 1], v_new[b:b + 1]
            if rot is not None:
                cos, sin, inter = rot
                pos_k = torch.arange(n0, n0 + kn.shape[1], device=q.device)[None]
                pos_q = (torch.arange(n0, n0 + sq, device=q.device)[None]
                         if opts.get("causal") or opts.get("window", (-1, -1)) != (-1, -1)
                         else torch.full((1, sq), n0, device=q.device))
                kn = rotate(kn, cos, sin, pos_k, inter).to(k_new.dtype)
                qb = rotate(q[b:b + 1], cos, sin, pos_q, inter).to(q.dtype).double()
            kb = torch.cat((kb, kn[0].double()), 0)
            vb = torch.cat((vb, vn[0].double()), 0)
        if kb.shape[0] == 0:  # no key at all: O = 0, LSE = -inf
            o = torch.zeros(qb.shape[:-1] + (v_cache.shape[-1],), dtype=torch.float64, device=q.device)
            l = torch.full((1, qb.shape[2], sq), float("-inf"), dtype=torch.float64, device=q.device)
            n, nl = o.to(dtype), l.float()
        else:
            o, l = attention(qb.to(dtype), kb[None].to(dtype), vb[None].to(dtype), dtype=torch.float64, **opts)
            n, nl = attention(qb.to(dtype), kb[None].to(dtype), vb[None].to(dtype), dtype=dtype, **opts)
        outs.append((o, n))
        lses.append((l, nl))
    return outs, lses


def make_cache(g, device, dtype, batch, capacity, hk, d, page):
    """Contiguous (page 0) or paged cache with shuffled pages and a block table."""
    mk = lambda *s: torch.randn(*s, generator=g).to(dtype).to(device)  # noqa: E731
    if page == 0:
        return mk(batch, capacity, hk, d), mk(batch, capacity, hk, d), None
    per_seq = capacity // page
    num_pages = batch * per_seq + 3
    order = torch.randperm(num_pages, generator=g)[: batch * per_seq]
    table = order.view(batch, per_seq).to(torch.int32).to(device)
    return mk(num_pages, page, hk, d), mk(num_pages, page, hk, d), table


CASES = [
    # page, sq, new, causal, window, softcap, rotary(interleaved or None), splits
    (0, 1, 0, False, (-1, -1), 0.0, None, 0),
    (16, 1, 0, False, (-1, -1), 0.0, None, 3),
    (0, 3, 2, True, (-1, -1), 0.0, True, 0),
    (16, 4, 4, True, (-1, -1), 0.0, False, 2),
    (1, 2, 1, True, (20, 0), 0.0, None, 0),
    (64, 1, 1, False, (-1, -1), 30.0, False, 0),
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("device,dtype", DEVICE_DTYPES)
def test_kvcache_matches_naive(device, dtype, case, seed):
    page, sq, new, causal, window, softcap, rot, splits = CASES[case]
    g = torch.Generator().manual_seed(seed)
    batch, h, hk, d, capacity = 3, 4, 2, 64, 128
    k_cache, v_cache, table = make_cache(g, device, dtype, batch, capacity, hk, d, page)
    seqlens = torch.tensor([37, 0, 120][:batch], dtype=torch.int32)
    seqlens = torch.minimum(seqlens, torch.tensor(capacity - new, dtype=torch.int32)).to(device)
    q = torch.randn(batch, sq, h, d, generator=g).to(dtype).to(device)
    k_new = v_new = rot_args = None
    if new:
        k_new = torch.randn(batch, new, hk, d, generator=g).to(dtype).to(device)
        v_new = torch.randn(batch, new, hk, d, generator=g).to(dtype).to(device)
    kwargs = {}
    if rot is not None:
        rd = 32
        angle = torch.rand(capacity, rd // 2, generator=g, dtype=torch.float64) * 6.3
        cos, sin = angle.cos().to(dtype).to(device), angle.sin().to(dtype).to(device)
        rot_args = (cos, sin, rot)
        kwargs.update(rotary_cos=cos, rotary_sin=sin, rotary_interleaved=rot)
    opts = dict(causal=causal, window=window, softcap=softcap)
    ref_out, ref_lse = expected(q, k_cache.clone(), v_cache.clone(), seqlens.cpu(), k_new, v_new, rot_args,
                                None if table is None else table.long(), page, dtype, **opts)
    k_before = k_cache.clone()
    out, lse = ft.flash_attn_with_kvcache(q, k_cache, v_cache, k=k_new, v=v_new, cache_seqlens=seqlens,
                                          block_table=table, causal=causal, window_size=window, softcap=softcap,
                                          num_splits=splits, return_softmax_lse=True, **kwargs)
    for b in range(batch):
        (o64, on), (l64, ln) = ref_out[b], ref_lse[b]
        check_close(f"out[{b}]", out[b:b + 1], o64, on, dtype)
        check_close(f"lse[{b}]", lse[b:b + 1], l64, ln, dtype)
    if new:
        # The appended slots hold k (rotated when rotary is on); nothing else changed.
        for b in range(batch):
            n0 = int(seqlens[b])
            rows = torch.arange(n0, n0 + new)
            if table is None:
                got = k_cache[b, rows]
                before = k_before[b]
            else:
                flat = k_cache[table[b].long()].flatten(0, 1)
                got = flat[rows]
                before = k_before[table[b].long()].flatten(0, 1)
            want = k_new[b]
            if rot is not None:
                want = rotate(k_new[b:b + 1], rot_args[0], rot_args[1], rows[None].to(device), rot)[0]
            assert (got.double() - want.double()).abs().max() <= 2e-2 * max(1.0, float(want.abs().max()))
            keep = torch.ones(before.shape[0], dtype=torch.bool)
            keep[rows] = False
            current = k_cache[b] if table is None else k_cache[table[b].long()].flatten(0, 1)
            assert torch.equal(current[keep.to(current.device)], before[keep.to(before.device)])


@pytest.mark.parametrize("device", DEVICES)
def test_kvcache_int_seqlens_and_errors(device, seed):
    dtype = low_precision(device)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 1, 4, 64, generator=g).to(dtype).to(device)
    kc = torch.randn(2, 50, 1, 64, generator=g).to(dtype).to(device)
    vc = torch.randn(2, 50, 1, 64, generator=g).to(dtype).to(device)
    a = ft.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=30)
    b = ft.flash_attn_with_kvcache(q, kc[:, :30], vc[:, :30])
    assert torch.allclose(a.float(), b.float(), atol=1e-2)
    with pytest.raises(Exception, match="cache_seqlens"):
        ft.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=torch.zeros(2, dtype=torch.int64, device=device))
    with pytest.raises(Exception, match="alibi_slopes"):
        ft.flash_attn_with_kvcache(q, kc, vc, alibi_slopes=torch.zeros(4))


@pytest.mark.parametrize("device", DEVICES)
def test_kvcache_split_counters(device, seed):
    """Caller-owned split counters: same output as without them, left zero by
    every call (shapes and split counts change between calls), and a buffer
    that is too small is rejected by name."""
    dtype = low_precision(device)
    g = torch.Generator().manual_seed(seed)
    counters = torch.zeros(4096, dtype=torch.int32, device=device)
    for batch, sq, splits in ((2, 1, 3), (3, 2, 7), (1, 4, 0)):
        q = torch.randn(batch, sq, 8, 64, generator=g).to(dtype).to(device)
        kc = torch.randn(batch, 300, 2, 64, generator=g).to(dtype).to(device)
        vc = torch.randn(batch, 300, 2, 64, generator=g).to(dtype).to(device)
        seqlens = torch.tensor([300, 17, 250][:batch], dtype=torch.int32, device=device)
        want = ft.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, causal=True, num_splits=splits)
        got = ft.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, causal=True, num_splits=splits,
                                         split_counters=counters)
        assert torch.equal(got, want)
        assert int(counters.abs().sum()) == 0
    with pytest.raises(Exception, match="split_counters"):
        ft.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens[:1], split_counters=counters[:3])
