"""Ring attention (flashpp.distributed) against single-process flashpp and
the float64 reference: world sizes 1, 2 and 4 over gloo with CPU tensors
(processes started by torch.multiprocessing, spawn), and the same over NCCL
on as many GPUs as the machine has (world 1 on one GPU: the NCCL
process group and our CUDA kernels, without a hop). Outputs and gradients follow the tolerance rule
    err(ring vs f64) <= 2 * err(naive same dtype vs f64) + atol
and agree with single-process flashpp within the same bound. Also the pieces
that need no processes: the step plans cover the causal mask exactly, the
zigzag layout round-trips, and the LSE merge of two key halves is exact."""

import itertools
import os

import pytest

torch = pytest.importorskip("torch", reason="ring attention needs PyTorch")
dist = pytest.importorskip("torch.distributed", reason="ring attention needs torch.distributed")
if not dist.is_available():
    pytest.skip("torch was built without torch.distributed", allow_module_level=True)

import torch.multiprocessing as mp  # noqa: E402

import flashpp  # noqa: E402
from flashpp.distributed import merge_into, plan_step, zigzag  # noqa: E402
from flashpp.torch import flash_attn_func  # noqa: E402

import ring_worker  # noqa: E402
from attn_reference import ATOL  # noqa: E402
from torch_reference import attention as naive_attention  # noqa: E402
from torch_reference import max_err  # noqa: E402
from seeding import reproduce_hint  # noqa: E402

# ---- no processes ----------------------------------------------------------


@pytest.mark.parametrize("layout", zigzag.LAYOUTS)
@pytest.mark.parametrize("world", [1, 2, 3, 4, 5])
def test_plans_cover_the_causal_mask_once(world, layout):
    chunk = 3
    per = zigzag.chunks_per_rank(layout)
    n = world * per * chunk
    # global position of each local row of each rank
    pos = []
    for r in range(world):
        pos.append([c * chunk + i for c in zigzag.rank_chunks(layout, r, world) for i in range(chunk)])
    for r, s in itertools.product(range(world), range(world)):
        covered = torch.zeros(per * chunk, per * chunk, dtype=torch.int32)
        calls = plan_step(zigzag.rank_chunks(layout, r, world), zigzag.rank_chunks(layout, s, world), chunk, True)
        for c in calls:
            (q0, q1), (k0, k1) = c.q, c.k
            block = torch.ones(q1 - q0, k1 - k0, dtype=torch.int32)
            covered[q0:q1, k0:k1] += block.tril() if c.causal else block
        want = torch.tensor([[int(pk <= pq) for pk in pos[s]] for pq in pos[r]], dtype=torch.int32)
        assert torch.equal(covered, want), f"rank {r}, kv of rank {s}: {calls}"
        if layout == "zigzag":
            assert len(calls) == 1, f"zigzag steps are one call each, got {calls}"
    assert n == sum(len(p) for p in pos)


def test_zigzag_shard_roundtrip():
    x = torch.arange(2 * 24 * 3).reshape(2, 24, 3)
    for world, layout in itertools.product([1, 2, 3], zigzag.LAYOUTS):
        parts = [zigzag.shard(x, r, world, layout) for r in range(world)]
        assert torch.equal(zigzag.unshard(parts, layout), x)
    # rank 0 of 2 holds chunks 0 and 3 of 4
    assert torch.equal(zigzag.shard(x, 0, 2)[0, :, 0], torch.cat([x[0, 0:6, 0], x[0, 18:24, 0]]))
    with pytest.raises(ValueError, match="divisible by 4"):
        zigzag.shard(x[:, :22], 0, 2)


def test_merge_of_key_halves_is_exact():
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(1, 20, 2, 32, generator=g) for _ in range(3))
    # causal over 20 keys from two halves: rows 0-9 see no key of the second half
    out, lse, _ = flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    acc = torch.zeros_like(out)
    acc_lse = torch.full_like(lse, float("-inf"))
    for k0, k1 in ((0, 10), (10, 20)):
        o, l = flashpp.attention(q, k[:, k0:k1], v[:, k0:k1], window=(-1, 20 - k1), return_lse=True)
        merge_into(acc, acc_lse, o, l)
    torch.testing.assert_close(acc, out, rtol=0, atol=2e-6)
    torch.testing.assert_close(acc_lse, lse, rtol=0, atol=2e-6)
    # a row no part saw stays exactly zero with LSE -inf
    empty = torch.full_like(lse, float("-inf"))
    acc2 = torch.zeros_like(out)
    merge_into(acc2, empty.clone(), torch.full_like(out, float("nan")), empty)
    assert torch.equal(acc2, torch.zeros_like(out))


# ---- processes ---------------------------------------------------------------


def cases(world, seed, gpu=False):
    """Small shapes: the whole file stays well under a minute on two cores."""
    low = ["bfloat16", "float16"] if gpu else ["float32", "bfloat16", "float16"]
    base = [
        # dtype, causal, layout, batch, chunk, heads_q, heads_kv, head_dim, softcap
        (low[0], False, "zigzag", 2, 12, 2, 2, 32, 0.0),
        (low[0], True, "zigzag", 1, 16, 2, 2, 32, 0.0),
        (low[0], True, "zigzag", 1, 10, 4, 1, 64, 0.0),  # MQA
        (low[0], True, "contiguous", 1, 16, 2, 2, 32, 0.0),  # later ranks skip steps
        (low[0], True, "zigzag", 1, 12, 2, 2, 32, 20.0),  # softcap
        (low[1], True, "zigzag", 1, 16, 4, 2, 64, 0.0),  # GQA, low precision
        (low[-1], False, "zigzag", 1, 16, 4, 2, 32, 0.0),
    ]
    out = []
    for i, (dtype, causal, layout, b, chunk, hq, hkv, d, cap) in enumerate(base):
        out.append(dict(seed=(seed + i) % (1 << 62), dtype=dtype, causal=causal, layout=layout, batch=b,
                        seqlen=world * zigzag.chunks_per_rank(layout) * chunk, heads_q=hq, heads_kv=hkv,
                        head_dim=d, softcap=cap, world=world))
    if world == 4:  # two independent rings of two ranks each (subgroups)
        c = dict(out[1], seed=(seed + 99) % (1 << 62), pairs=True, world=2)
        c["seqlen"] = 2 * 2 * 16
        out.append(c)
    return out


def run_world(world, backend, case_list, tmp_path, monkeypatch):
    # One OpenMP thread per rank: the ranks share a few cores.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    init_file = tmp_path / "init"
    mp.spawn(ring_worker.main, args=(world, backend, str(init_file), case_list, str(tmp_path)), nprocs=world,
             join=True)
    return [torch.load(tmp_path / f"rank{r}.pt") for r in range(world)]


def single_process(case, device):
    q, k, v, dout = (x.to(device) for x in ring_worker.full_inputs(case))
    leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
    out, lse, _ = flash_attn_func(*leaves, causal=case["causal"], softcap=case["softcap"], return_attn_probs=True)
    grads = torch.autograd.grad(out, leaves, dout)
    return {"out": out, "lse": lse, "dq": grads[0], "dk": grads[1], "dv": grads[2]}


def naive(case, prec):
    q, k, v, dout = ring_worker.full_inputs(case)
    xs = [x.to(prec).requires_grad_(True) for x in (q, k, v)]
    o, l = naive_attention(*xs, causal=case["causal"], softcap=case["softcap"], dtype=prec)
    g = torch.autograd.grad(o, xs, dout.to(prec))
    return {"out": o, "lse": l, "dq": g[0], "dk": g[1], "dv": g[2]}


def check_case(case, parts, device):
    dtype = ring_worker.DTYPES[case["dtype"]]
    layout = case["layout"]
    ring = {name: zigzag.unshard([p[name] for p in parts], layout, dim=2 if name == "lse" else 1)
            for name in ("out", "lse", "dq", "dk", "dv")}
    single = {n: t.detach().cpu() for n, t in single_process(case, device).items()}
    ref64, ref_naive = naive(case, torch.float64), naive(case, dtype)
    what = (f"world {case['world']} {case['dtype']} causal={case['causal']} {layout} b={case['batch']} "
            f"n={case['seqlen']} h={case['heads_q']}/{case['heads_kv']} d={case['head_dim']} cap={case['softcap']}")
    for name in ("out", "lse", "dq", "dk", "dv"):
        n_err, _, _ = max_err(ref_naive[name].float() if name == "lse" else ref_naive[name], ref64[name])
        bound = 2 * n_err + ATOL[case["dtype"]]
        err, inf_ok, nonfinite = max_err(ring[name], ref64[name])
        diff, _, _ = max_err(ring[name], single[name])
        assert inf_ok and nonfinite == 0 and err <= bound and diff <= bound, (
            f"{what} {name}: ring {err:.3e}, vs single-process {diff:.3e}, bound {bound:.3e} "
            f"(naive {n_err:.3e}), inf match {inf_ok}, nonfinite {nonfinite}; {reproduce_hint()}"
        )


def _check_all(world, case_list, results, device):
    for i, case in enumerate(case_list):
        per_rank = [r[i] for r in results]
        if case.get("pairs"):
            for pair in range(0, world, 2):
                check_case(case, per_rank[pair : pair + 2], device)
        else:
            check_case(case, per_rank, device)


def _gloo_reason():
    return None if dist.is_gloo_available() else "torch.distributed was built without gloo"


@pytest.mark.skipif(_gloo_reason() is not None, reason=_gloo_reason() or "")
@pytest.mark.parametrize("world", [1, 2, 4])
def test_ring_attention_gloo_cpu(world, seed, tmp_path, monkeypatch):
    case_list = cases(world, seed)
    results = run_world(world, "gloo", case_list, tmp_path, monkeypatch)
    _check_all(world, case_list, results, "cpu")


def _nccl_reason():
    if not dist.is_nccl_available():
        return "torch.distributed was built without NCCL"
    if not flashpp.built_with_cuda():
        return "flashpp was built without the CUDA backend"
    if torch.cuda.device_count() < 1:
        return "needs a CUDA device"
    return None


@pytest.mark.skipif(_nccl_reason() is not None, reason=_nccl_reason() or "")
@pytest.mark.parametrize("world", [1, 2, 4, 8])
def test_ring_attention_nccl(world, seed, tmp_path, monkeypatch):
    if torch.cuda.device_count() < world:
        pytest.skip(f"needs {world} CUDA devices, found {torch.cuda.device_count()}")
    case_list = cases(world, seed, gpu=True)
    results = run_world(world, "nccl", case_list, tmp_path, monkeypatch)
    _check_all(world, case_list, results, "cuda")


def test_needs_an_initialized_group():
    from flashpp.distributed import ring_attention

    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    x = torch.randn(1, 4, 1, 8)
    with pytest.raises(RuntimeError, match="initialized torch.distributed"):
        ring_attention(x, x, x)
