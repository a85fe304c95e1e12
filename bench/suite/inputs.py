"""Seeded random inputs (worker side).

Every backend of a run gets the same q, k, v, dout for a problem: the seed
comes from the run seed and the problem's check key (config.job_seed), and
torch's generators are deterministic for a given device, shape and dtype.
Values are standard normal (never zeros, never constant); with the default
scale 1/sqrt(d) the scores are O(1), the regime real models run in.
"""

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def torch_dtype(torch, name):
    return getattr(torch, DTYPES[name])


def _randn(torch, shape, gen, device, dtype):
    return torch.randn(shape, generator=gen, device=device, dtype=dtype)


def _generator(torch, device, seed):
    return torch.Generator(device=device).manual_seed(int(seed))


def prefill_inputs(torch, job, device, copy=0):
    """(q, k, v, dout) in the canonical (batch, seqlen, heads, head_dim)
    layout. copy > 0 gives the further input sets used to rotate inputs
    through the L2 cache between timed calls."""
    dtype = torch_dtype(torch, job["dtype"])
    gen = _generator(torch, device, job["seed"] + 7919 * copy)
    b, nq, nk = job["batch"], job["seqlen_q"], job["seqlen_k"]
    h, hkv, d, dv = job["heads"], job["heads_kv"], job["hdim"], job["hdim_v"]
    q = _randn(torch, (b, nq, h, d), gen, device, dtype)
    k = _randn(torch, (b, nk, hkv, d), gen, device, dtype)
    v = _randn(torch, (b, nk, hkv, dv), gen, device, dtype)
    dout = _randn(torch, (b, nq, h, dv), gen, device, dtype)
    return q, k, v, dout


def decode_inputs(torch, job, device, copy=0):
    """(q, k_cache, v_cache, cache_seqlens, block_table) for one decoding
    step over full caches. With page_size > 0 the cache is paged:
    (num_pages, page_size, heads_kv, d) pages in a random order given by
    block_table (batch, pages_per_seq), holding the same logical sequences
    as the contiguous cache of the same seed, so both are checked against
    one reference."""
    dtype = torch_dtype(torch, job["dtype"])
    gen = _generator(torch, device, job["seed"] + 7919 * copy)
    b, n, h, hkv, d, dv = job["batch"], job["cache_len"], job["heads"], job["heads_kv"], job["hdim"], job["hdim_v"]
    q = _randn(torch, (b, job.get("seqlen_q", 1), h, d), gen, device, dtype)
    k = _randn(torch, (b, n, hkv, d), gen, device, dtype)
    v = _randn(torch, (b, n, hkv, dv), gen, device, dtype)
    seqlens = torch.full((b,), n, dtype=torch.int32, device=device)
    page = job.get("page_size", 0)
    if not page:
        return q, k, v, seqlens, None
    if n % page:
        raise ValueError(f"cache_len {n} is not a multiple of page_size {page}")
    per_seq = n // page
    cpu_gen = torch.Generator().manual_seed(int(job["seed"]) + copy)
    order = torch.randperm(b * per_seq, generator=cpu_gen).to(device=device, dtype=torch.int32)
    block_table = order.reshape(b, per_seq).contiguous()
    k_pages = torch.empty((b * per_seq, page, hkv, d), device=device, dtype=dtype)
    v_pages = torch.empty((b * per_seq, page, hkv, dv), device=device, dtype=dtype)
    k_pages[order.long()] = k.reshape(b * per_seq, page, hkv, d)
    v_pages[order.long()] = v.reshape(b * per_seq, page, hkv, dv)
    return q, k_pages, v_pages, seqlens, block_table


def nbytes(*tensors):
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)
