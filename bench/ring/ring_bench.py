"""Ring attention (flashpp.distributed.ring_attention) throughput and
scaling efficiency.

On GPUs, one process per GPU, NCCL:
    torchrun --nproc-per-node 8 bench/ring/ring_bench.py --seqlens 32768,65536,131072,262144
Without GPUs, a small correctness and plumbing run over gloo on CPU tensors
(starts its own processes unless launched by torchrun):
    python bench/ring/ring_bench.py --dry-run --world 2

For each global sequence length N the sequence is sharded in the zigzag
layout over the W ranks; forward and forward+backward are timed over
--iters iterations after --warmup (wall time between barriers, the slowest
rank's). Reported per N:
    tokens/s     N * batch / time, for the whole group
    TFLOP/s/GPU  4 * batch * heads * N^2 * head_dim (halved when causal;
                 backward 2.5x forward) / time / W
    efficiency   t_1(N) / (W * t_W(N)), t_1 being single-GPU flashpp on the
                 whole sequence (measured on rank 0; --baseline-max-n bounds it)
One JSON object per N goes to stdout (and to --out as a list), then a table.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seqlens", default="32768,65536,131072,262144", help="global sequence lengths N")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--heads-kv", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    p.add_argument("--no-causal", dest="causal", action="store_false")
    p.add_argument("--layout", default="zigzag", choices=["zigzag", "contiguous"])
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--baseline-max-n", type=int, default=262144, help="largest N timed on one GPU (0: none)")
    p.add_argument("--out", default=None, help="write the JSON results here (rank 0)")
    p.add_argument("--dry-run", action="store_true", help="gloo + CPU tensors, tiny shapes, checks the output")
    p.add_argument("--world", type=int, default=2, help="--dry-run without torchrun: processes to start")
    a = p.parse_args(argv)
    if a.dry_run:
        a.dtype = "float32"
        if a.seqlens == p.get_default("seqlens"):
            a.seqlens = "256,512"
        a.heads, a.heads_kv, a.head_dim = min(a.heads, 4), min(a.heads_kv, 2), min(a.head_dim, 32)
        a.iters, a.warmup = min(a.iters, 2), min(a.warmup, 1)
        a.baseline_max_n = max(a.baseline_max_n, 512)
    a.seqlens = [int(x) for x in a.seqlens.split(",") if x]
    return a


def attention_flops(a, n):
    f = 4.0 * a.batch * a.heads * n * n * a.head_dim
    return f / 2 if a.causal else f


def timed(fn, a, device, group_sync=True):
    """Median seconds per call; wall time between barriers, max over ranks."""
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if group_sync:
            dist.barrier()

    for _ in range(a.warmup):
        fn()
    times = []
    for _ in range(a.iters):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    t = torch.tensor([statistics.median(times)], dtype=torch.float64, device=device)
    if group_sync:
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def inputs(a, n, device, seed=0):
    """q, k, v, dout of n tokens, drawn on `device`."""
    dtype = getattr(torch, a.dtype)
    g = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=dtype)

    return (randn(a.batch, n, a.heads, a.head_dim), randn(a.batch, n, a.heads_kv, a.head_dim),
            randn(a.batch, n, a.heads_kv, a.head_dim), randn(a.batch, n, a.heads, a.head_dim))


def bench_ring(a, n, rank, world, device):
    from flashpp.distributed import ring_attention, zigzag

    if a.dry_run:  # the same global inputs on every rank, to check against one process
        full = inputs(a, n, torch.device("cpu"))
        q, k, v, dout = (zigzag.shard(x, rank, world, a.layout).to(device) for x in full)
    else:  # timing only: each rank draws its own shard where it lives
        q, k, v, dout = inputs(a, n // world, device, seed=rank)
    q, k, v = (x.requires_grad_(True) for x in (q, k, v))

    def fwd():
        with torch.no_grad():
            ring_attention(q, k, v, causal=a.causal, layout=a.layout)

    def fwd_bwd():
        out = ring_attention(q, k, v, causal=a.causal, layout=a.layout)
        torch.autograd.grad(out, (q, k, v), dout)

    res = {"t_fwd": timed(fwd, a, device), "t_fwd_bwd": timed(fwd_bwd, a, device)}
    if a.dry_run:
        res["max_abs_diff_vs_single"] = check_against_single(a, full, q, k, v, dout, rank, world)
    return res


def check_against_single(a, full, q, k, v, dout, rank, world):
    """Dry run: this rank's rows of the ring output and gradients against single-process flashpp."""
    from flashpp.distributed import ring_attention, zigzag
    from flashpp.torch import flash_attn_func

    out = ring_attention(q, k, v, causal=a.causal, layout=a.layout)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    leaves = [x.clone().requires_grad_(True) for x in full[:3]]
    ref = flash_attn_func(*leaves, causal=a.causal)
    ref_grads = torch.autograd.grad(ref, leaves, full[3])
    diff = 0.0
    for ours, theirs in zip((out,) + grads, (ref,) + ref_grads):
        theirs = zigzag.shard(theirs.detach(), rank, world, a.layout)
        diff = max(diff, float((ours.detach().cpu().float() - theirs.float()).abs().max()))
    t = torch.tensor([diff], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def bench_single(a, n, device):
    from flashpp.torch import flash_attn_func

    q, k, v, dout = inputs(a, n, device)
    q, k, v = (x.requires_grad_(True) for x in (q, k, v))

    def fwd():
        with torch.no_grad():
            flash_attn_func(q, k, v, causal=a.causal)

    def fwd_bwd():
        out = flash_attn_func(q, k, v, causal=a.causal)
        torch.autograd.grad(out, (q, k, v), dout)

    return {"t1_fwd": timed(fwd, a, device, False), "t1_fwd_bwd": timed(fwd_bwd, a, device, False)}


def run(a, rank, world, device):
    rows = []
    for n in a.seqlens:
        per = 2 * world if a.layout == "zigzag" else world
        if n % per != 0:
            raise SystemExit(f"N={n} must be divisible by {per} ({a.layout} over {world} ranks)")
        row = {"N": n, "world": world, "batch": a.batch, "heads": a.heads, "heads_kv": a.heads_kv,
               "head_dim": a.head_dim, "dtype": a.dtype, "causal": a.causal, "layout": a.layout,
               "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
               "backend": dist.get_backend()}
        row.update(bench_ring(a, n, rank, world, device))
        if rank == 0 and n <= a.baseline_max_n:
            row.update(bench_single(a, n, device))
        dist.barrier()
        f = attention_flops(a, n)
        row["tokens_per_s_fwd"] = a.batch * n / row["t_fwd"]
        row["tokens_per_s_fwd_bwd"] = a.batch * n / row["t_fwd_bwd"]
        row["tflops_per_gpu_fwd"] = f / row["t_fwd"] / world / 1e12
        row["tflops_per_gpu_fwd_bwd"] = 3.5 * f / row["t_fwd_bwd"] / world / 1e12
        if "t1_fwd" in row:
            row["efficiency_fwd"] = row["t1_fwd"] / (world * row["t_fwd"])
            row["efficiency_fwd_bwd"] = row["t1_fwd_bwd"] / (world * row["t_fwd_bwd"])
        if rank == 0:
            print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def table(rows):
    head = f"{'N':>8} {'W':>3} {'tok/s fwd':>12} {'tok/s f+b':>12} {'TF/GPU fwd':>10} {'TF/GPU f+b':>10} {'eff fwd':>8} {'eff f+b':>8}"
    lines = [head]
    for r in rows:
        eff = lambda k: f"{r[k]:8.2f}" if k in r else f"{'-':>8}"  # noqa: E731
        lines.append(f"{r['N']:>8} {r['world']:>3} {r['tokens_per_s_fwd']:12.4g} {r['tokens_per_s_fwd_bwd']:12.4g} "
                     f"{r['tflops_per_gpu_fwd']:10.4g} {r['tflops_per_gpu_fwd_bwd']:10.4g} "
                     f"{eff('efficiency_fwd')} {eff('efficiency_fwd_bwd')}")
    return "\n".join(lines)


def worker(rank, world, a, init_file):
    """One rank, either from torchrun (env://) or spawned for --dry-run."""
    if init_file is None:
        dist.init_process_group("gloo" if a.dry_run else "nccl")
    else:
        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    rank, world = dist.get_rank(), dist.get_world_size()
    if a.dry_run:
        device = torch.device("cpu")
        torch.set_num_threads(1)
    else:
        local = int(os.environ.get("LOCAL_RANK", rank))
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    try:
        rows = run(a, rank, world, device)
        if rank == 0:
            print(table(rows), flush=True)
            if a.out:
                with open(a.out, "w") as f:
                    json.dump(rows, f, indent=1)
            if a.dry_run:
                worst = max(r["max_abs_diff_vs_single"] for r in rows)
                print(f"dry run: max |ring - single-process| = {worst:.3e}", flush=True)
                if not math.isfinite(worst) or worst > 1e-4:
                    raise SystemExit("dry run: ring attention disagrees with single-process flashpp")
    finally:
        dist.destroy_process_group()


def main(argv=None):
    a = parse_args(argv)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # torchrun
        worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), a, None)
        return
    if not a.dry_run:
        raise SystemExit("launch with torchrun (one process per GPU), or pass --dry-run for a CPU run")
    import tempfile

    import torch.multiprocessing as mp

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(worker, args=(a.world, a, os.path.join(tmp, "init")), nprocs=a.world, join=True)


if __name__ == "__main__":
    sys.exit(main())
