"""One forward + backward of one backend, for Nsight Compute to measure.

    ncu ... python3 -m bench.io_report.driver --backend ours --batch 64 --heads 16 --seqlen 1024 --hdim 64

Inputs are created and the backend warmed up (lazy initialization, cuBLAS
heuristics, compilation) before cudaProfilerStart; exactly one forward and
one backward run between cudaProfilerStart and cudaProfilerStop, inside an
NVTX range named io:<backend>. With --time the driver first times
forward + backward with CUDA events (median of --reps), outside the profiled
range. The last stdout line is a JSON object with the outcome.
"""

import argparse
import json
import statistics
import sys
import time

from bench.suite.backends import create
from bench.suite.backends.base import Unavailable, Unsupported
from bench.suite.config import prefill_key
from bench.suite.inputs import prefill_inputs


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", required=True)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--seqlen", type=int, default=1024)
    parser.add_argument("--hdim", type=int, default=64)
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--time", action="store_true", help="also time fwd + bwd (outside the profiled range)")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--no-profile", action="store_true", help="time only (no profiled range)")
    return parser.parse_args(argv)


def job_for(args):
    key = prefill_key(args.dtype, args.batch, args.heads, args.heads, args.seqlen, args.seqlen, args.hdim, args.hdim,
                      args.causal)
    seed = args.seed if args.seed is not None else int(time.time()) % (2**31 - 1)
    return {"kind": "prefill", "backend": args.backend, "key": key, "check_key": key, "id": f"{args.backend}|{key}",
            "seed": seed, "dtype": args.dtype, "batch": args.batch, "heads": args.heads, "heads_kv": args.heads,
            "seqlen_q": args.seqlen, "seqlen_k": args.seqlen, "hdim": args.hdim, "hdim_v": args.hdim,
            "causal": args.causal, "passes": ["fwd", "bwd"]}


def _timer(torch, cuda):
    """(start, stop) -> milliseconds; CUDA events on the GPU, the wall clock on
    the CPU (where the driver only serves the suite's own tests)."""
    if cuda:
        def measure(fn):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end)
    else:
        def measure(fn):
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1e3
    return measure


def run(args):
    import torch

    cuda = args.device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    job = job_for(args)
    backend = create(args.backend)
    q, k, v, dout = prefill_inputs(torch, job, args.device)
    prep = backend.prefill(job, q, k, v, True)
    dout_native = prep.native(dout)
    del q, k, v, dout

    def step():
        out = prep.forward()
        return torch.autograd.grad(out, prep.leaves, dout_native)

    for _ in range(2):  # warm-up: nothing lazy may land in the profiled range
        step()
    sync()
    result = {"status": "ok", "backend": args.backend, "version": backend.version(), "kernel": backend.describe(job)}
    if args.time:
        measure = _timer(torch, cuda)
        times = [measure(step) for _ in range(args.reps)]
        result.update(runtime_ms=statistics.median(times), runtime_ms_min=min(times), reps=len(times))
    if not args.no_profile:
        if cuda:
            torch.cuda.profiler.start()
            torch.cuda.nvtx.range_push(f"io:{args.backend}")
        step()
        sync()
        if cuda:
            torch.cuda.nvtx.range_pop()
            torch.cuda.profiler.stop()
        result["profiled_steps"] = 1
    return result


def main(argv=None):
    args = parse_args(argv)
    try:
        result = run(args)
    except (Unavailable, Unsupported) as exc:
        result = {"status": "unavailable" if isinstance(exc, Unavailable) else "unsupported", "reason": str(exc)}
    except Exception as exc:
        name = type(exc).__name__
        status = "oom" if "OutOfMemory" in name else "error"
        result = {"status": status, "reason": f"{name}: {exc}".splitlines()[0][:500]}
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
