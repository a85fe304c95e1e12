"""Benchmark grids and the jobs they expand into.

A job is a plain JSON-able dict: the parent process builds them, sends them
to a worker over a pipe, and stores them with the results. Its `key` names the
problem independently of the backend, so every backend's output for one key
can be compared with ours (see checks.py).
"""

import dataclasses
import zlib

KB = 1024

# The default grid (the one of the reference figures): bf16, batch * seqlen = 16K tokens,
# hidden 2048 (heads = 2048 / head_dim).
DEFAULT_HDIMS = (64, 128, 256)
DEFAULT_SEQLENS = (512, 1 * KB, 2 * KB, 4 * KB, 8 * KB, 16 * KB)
DEFAULT_TOKENS = 16 * KB
DEFAULT_HIDDEN = 2048

# Decoding: one query token, 32 query / 8 KV heads (GQA 4), head dim 128.
DEFAULT_DECODE_BATCHES = (1, 16, 64)
DEFAULT_DECODE_CACHE = (4 * KB, 16 * KB, 64 * KB)

# Peak memory of one forward + backward, batch 1, 16 heads, head dim 128:
# standard attention stores the 16 x N x N scores, so it runs out of memory
# long before 128K.
DEFAULT_MEMORY_SEQLENS = tuple(KB << i for i in range(8))  # 1K .. 128K


@dataclasses.dataclass
class Settings:
    """How each measurement is taken (shared by every job of a run)."""

    warmup: int = 5
    reps: int = 30
    l2: str = "rotate"  # rotate | flush | warm (see timing.py)
    check: bool = True
    graphs: bool = True  # CUDA graphs for decode
    device: str = "cuda"
    reference: str = "ours"  # the backend every other one is checked against


@dataclasses.dataclass
class Grid:
    dtypes: tuple = ("bf16",)
    hdims: tuple = DEFAULT_HDIMS
    seqlens: tuple = DEFAULT_SEQLENS
    tokens: int = DEFAULT_TOKENS
    hidden: int = DEFAULT_HIDDEN
    causal: tuple = (False, True)
    passes: tuple = ("fwd", "bwd")
    decode_batches: tuple = DEFAULT_DECODE_BATCHES
    decode_cache: tuple = DEFAULT_DECODE_CACHE
    decode_heads: int = 32
    decode_heads_kv: int = 8
    decode_hdim: int = 128
    decode_pages: tuple = (0,)  # 0 = contiguous cache; else page size
    memory_seqlens: tuple = DEFAULT_MEMORY_SEQLENS
    memory_heads: int = 16
    memory_hdim: int = 128


# The longest prefill sequence that backends materializing the N x N scores
# get in each mode; beyond it their jobs are skipped with this reason. They are
# 20-40x slower than the tiled kernels, so they dominate a quick run's time.
MATERIALIZING_BACKENDS = ("sdpa_math", "standard")


def preset(name):
    """(Grid, Settings, per-backend seqlen caps) for a named preset."""
    if name == "full":
        return Grid(decode_pages=(0, 64)), Settings(), {}
    if name == "default":
        return Grid(), Settings(), {}
    if name == "quick":
        caps = {b: 4 * KB for b in MATERIALIZING_BACKENDS}
        return Grid(), Settings(warmup=2, reps=8), caps
    if name == "tiny":
        # For trying the whole pipeline on a CPU in seconds.
        grid = Grid(hdims=(64,), seqlens=(128, 256), tokens=512, hidden=256, decode_batches=(1, 2),
                    decode_cache=(256, 512), decode_heads=4, decode_heads_kv=2, decode_hdim=64,
                    memory_seqlens=(128, 256, 512), memory_heads=2, memory_hdim=64)
        return grid, Settings(warmup=1, reps=3, l2="warm"), {}
    raise ValueError(f"unknown preset {name!r} (full, default, quick, tiny)")


def job_seed(run_seed, key):
    """Per-problem seed: every backend of one run sees the same inputs."""
    return (int(run_seed) + zlib.crc32(key.encode())) % (2**31 - 1)


def prefill_key(dtype, batch, heads, heads_kv, seqlen_q, seqlen_k, hdim, hdim_v, causal):
    return (f"prefill-{dtype}-b{batch}-h{heads}-hkv{heads_kv}-sq{seqlen_q}-sk{seqlen_k}"
            f"-d{hdim}-dv{hdim_v}-{'causal' if causal else 'full'}")


def decode_key(dtype, batch, heads, heads_kv, cache_len, hdim, page_size):
    layout = f"page{page_size}" if page_size else "contig"
    return f"decode-{dtype}-b{batch}-h{heads}-hkv{heads_kv}-kv{cache_len}-d{hdim}-{layout}"


def memory_key(dtype, batch, heads, seqlen, hdim):
    return f"memory-{dtype}-b{batch}-h{heads}-n{seqlen}-d{hdim}"


def _job(kind, backend, key, run_seed, check_key=None, **fields):
    """check_key names the problem whose reference this job is compared with
    (and seeds its inputs): the key itself, except that a paged decode cache
    shares it with the contiguous one holding the same sequences."""
    check_key = key if check_key is None else check_key
    job = {"kind": kind, "backend": backend, "key": key, "check_key": check_key, "id": f"{backend}|{key}",
           "seed": job_seed(run_seed, check_key)}
    job.update(fields)
    return job


def prefill_jobs(grid, backends, run_seed, seqlen_caps=None):
    """Prefill jobs, most informative first (head dim 128, then 64, then 256;
    long sequences, where kernels reach their peak, before short ones), so a
    budget that runs out cuts what matters least. Returns (jobs, skipped)
    where skipped are jobs over a seqlen cap, with their reason."""
    caps = seqlen_caps or {}
    order = sorted(grid.hdims, key=lambda d: (d != 128, d != 64, d))
    jobs, skipped = [], []
    for backend in backends:
        for dtype in grid.dtypes:
            for hdim in order:
                heads = max(1, grid.hidden // hdim)
                for causal in grid.causal:
                    for n in sorted(grid.seqlens, reverse=True):
                        batch = max(1, grid.tokens // n)
                        key = prefill_key(dtype, batch, heads, heads, n, n, hdim, hdim, causal)
                        job = _job("prefill", backend, key, run_seed, dtype=dtype, batch=batch, heads=heads,
                                   heads_kv=heads, seqlen_q=n, seqlen_k=n, hdim=hdim, hdim_v=hdim,
                                   causal=causal, passes=list(grid.passes))
                        cap = caps.get(_family(backend))
                        if cap is not None and n > cap:
                            skipped.append((job, f"seqlen {n} over this mode's cap of {cap} for {backend}"))
                        else:
                            jobs.append(job)
    return jobs, skipped


def decode_jobs(grid, backends, run_seed):
    jobs = []
    for backend in backends:
        for dtype in grid.dtypes:
            for page in grid.decode_pages:
                for cache_len in grid.decode_cache:
                    for batch in grid.decode_batches:
                        key = decode_key(dtype, batch, grid.decode_heads, grid.decode_heads_kv, cache_len,
                                         grid.decode_hdim, page)
                        check_key = key.rsplit("-", 1)[0]
                        jobs.append(_job("decode", backend, key, run_seed, check_key, dtype=dtype, batch=batch,
                                         seqlen_q=1, cache_len=cache_len, heads=grid.decode_heads,
                                         heads_kv=grid.decode_heads_kv, hdim=grid.decode_hdim,
                                         hdim_v=grid.decode_hdim, page_size=page))
    return jobs


def memory_jobs(grid, backends, run_seed):
    jobs = []
    for backend in backends:
        for dtype in grid.dtypes[:1]:
            for n in grid.memory_seqlens:
                key = memory_key(dtype, 1, grid.memory_heads, n, grid.memory_hdim)
                jobs.append(_job("memory", backend, key, run_seed, dtype=dtype, batch=1,
                                 heads=grid.memory_heads, heads_kv=grid.memory_heads, seqlen_q=n, seqlen_k=n,
                                 hdim=grid.memory_hdim, hdim_v=grid.memory_hdim, causal=False,
                                 passes=["fwd", "bwd"]))
    return jobs


def _family(backend):
    """'ours[sm90]' -> 'ours'; other names unchanged."""
    return backend.split("[", 1)[0]
