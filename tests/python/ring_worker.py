"""One rank of the ring-attention tests (started by torch.multiprocessing
with the spawn method, so it must be importable by name): runs every case on
this rank's zigzag/contiguous shard and saves its rows of the output and the
gradients for the parent to check."""

import os

import torch
import torch.distributed as dist

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def full_inputs(case):
    """q, k, v, dout of the whole sequence, the same on every rank (and in the parent)."""
    g = torch.Generator().manual_seed(case["seed"])
    b, n, hq, hkv, d = case["batch"], case["seqlen"], case["heads_q"], case["heads_kv"], case["head_dim"]
    dtype = DTYPES[case["dtype"]]

    def randn(*shape):
        return torch.randn(*shape, generator=g).to(dtype)

    return randn(b, n, hq, d), randn(b, n, hkv, d), randn(b, n, hkv, d), randn(b, n, hq, d)


def _groups(case, rank, world):
    """(group, rank in it, its size): the whole world, or pairs of ranks."""
    if not case.get("pairs"):
        return None, rank, world
    pairs = [dist.new_group([r, r + 1]) for r in range(0, world, 2)]  # every rank creates every group
    return pairs[rank // 2], rank % 2, 2


def run_case(case, rank, world, device):
    from flashpp.distributed import ring_attention, zigzag

    group, grank, gworld = _groups(case, rank, world)
    layout = case["layout"]
    q, k, v, dout = (zigzag.shard(x, grank, gworld, layout).to(device) for x in full_inputs(case))
    q, k, v = (x.requires_grad_(True) for x in (q, k, v))
    out, lse = ring_attention(q, k, v, group, causal=case["causal"], softcap=case["softcap"], layout=layout,
                              return_lse=True)
    out.backward(dout)
    return {name: t.detach().cpu() for name, t in
            (("out", out), ("lse", lse), ("dq", q.grad), ("dk", k.grad), ("dv", v.grad))}


def main(rank, world, backend, init_file, cases, out_dir):
    torch.set_num_threads(1)
    if backend == "nccl":
        torch.cuda.set_device(rank)
    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        results = [run_case(c, rank, world, device) for c in cases]
        torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()
