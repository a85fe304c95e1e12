"""Synthetic results for --dry-run: the whole pipeline (workers, timeouts,
restarts, budgets, JSON/CSV, summary, plots, docs) without torch or a GPU.

Every number here is made up from nominal rates and says so: results of a
dry run carry "dry_run": true, plots are stamped, and the docs generator
refuses them unless told otherwise.

Failure injection for the suite's own tests (substrings of a job id):
  BENCH_SUITE_FAKE_HANG   the worker sleeps (exercises the job timeout)
  BENCH_SUITE_FAKE_CRASH  the worker dies (exercises the restart)
  BENCH_SUITE_FAKE_ERROR  the job raises (exercises the error record)
  BENCH_SUITE_FAKE_DELAY  seconds each job takes (exercises budgets)
"""

import os
import random
import time

from .backends import family
from .flops import DTYPE_BYTES, attention_flops, decode_kv_bytes

# Nominal fwd TFLOP/s at long sequences and decode TB/s for each backend.
RATES = {
    "ours": (420, 3.6), "sdpa_flash": (330, 3.0), "sdpa_cudnn": (590, 4.2), "sdpa_efficient": (140, 1.5),
    "sdpa_math": (18, 0.9), "standard": (15, 0.9), "flex": (400, 2.5), "flash_attn": (330, 3.0),
    "flash_attn_interface": (640, 3.9), "flashinfer": (450, 3.8),
}
FAKE_MEMORY_BYTES = 140 * (1 << 30)


def _matches(var, job_id):
    pattern = os.environ.get(var, "")
    return bool(pattern) and pattern in job_id


class FakeEngine:
    def __init__(self, backend_name, device, settings, check_dir):
        self.name = backend_name
        self.rng = random.Random(backend_name)

    def environment(self):
        return {"gpu": "dry run (synthetic numbers)", "torch": "none", "backend_version": "dry-run"}

    def _noise(self):
        return 1.0 + self.rng.uniform(-0.02, 0.02)

    def run(self, job):
        delay = float(os.environ.get("BENCH_SUITE_FAKE_DELAY", "0") or 0)
        if delay:
            time.sleep(delay)
        if _matches("BENCH_SUITE_FAKE_HANG", job["id"]):
            time.sleep(3600)
        if _matches("BENCH_SUITE_FAKE_CRASH", job["id"]):
            os._exit(7)
        result = {"id": job["id"], "status": "ok", "wall_s": 0.0}
        if _matches("BENCH_SUITE_FAKE_ERROR", job["id"]):
            result.update(status="error", reason="RuntimeError: injected failure")
            return result
        rate, bandwidth = RATES.get(family(self.name), (100, 1.0))
        if job["kind"] == "prefill":
            result.update(self._prefill(job, rate))
        elif job["kind"] == "decode":
            result.update(self._decode(job, bandwidth))
        else:
            result.update(self._memory(job))
        return result

    def _check(self):
        if self.name == "ours":
            return {"check": {"status": "reference"}, "finite": True}
        return {"check": {"status": "pass", "err": {"out": 1e-3}, "tol": {"out": 2e-2}}, "finite": True}

    def _prefill(self, job, rate):
        if family(self.name) in ("sdpa_flash", "flash_attn") and job["hdim"] > 256:
            return {"status": "unsupported", "reason": "head dim"}
        n = job["seqlen_k"]
        efficiency = n / (n + 768.0) * (0.85 if job["causal"] else 1.0) * (1.0 if job["hdim"] >= 128 else 0.8)
        out = dict(self._check())
        for pass_name, slowdown in (("fwd", 1.0), ("bwd", 1.2)):
            if pass_name not in job["passes"]:
                continue
            if pass_name == "bwd" and family(self.name) == "flashinfer":
                out.update(bwd_status="unsupported", bwd_reason="flashinfer has no backward")
                continue
            flops = attention_flops(pass_name, job["batch"], job["heads"], job["seqlen_q"], n, job["hdim"],
                                    job["hdim_v"], job["causal"])
            ms = flops / (rate * efficiency / slowdown * 1e12) * 1e3 * self._noise()
            out.update({f"{pass_name}_ms": ms, f"{pass_name}_ms_min": ms * 0.98, f"{pass_name}_ms_max": ms * 1.03,
                        f"{pass_name}_reps": 3})
        return out

    def _decode(self, job, bandwidth):
        if job.get("page_size") and family(self.name).startswith("sdpa"):
            return {"status": "unsupported", "reason": "no paged KV cache"}
        nbytes = decode_kv_bytes(job["batch"], job["cache_len"], job["heads_kv"], job["hdim"], job["hdim_v"],
                                 DTYPE_BYTES[job["dtype"]])
        utilization = nbytes / (nbytes + 40e6)
        ms = nbytes / (bandwidth * 1e12 * utilization) * 1e3 * self._noise()
        return {**self._check(), "fwd_ms": ms, "fwd_ms_min": ms, "fwd_ms_max": ms, "fwd_reps": 3, "graph": True}

    def _memory(self, job):
        elem = DTYPE_BYTES[job["dtype"]]
        b, h, n, d = job["batch"], job["heads"], job["seqlen_q"], job["hdim"]
        inputs = 4 * b * n * h * d * elem
        if family(self.name) in ("standard", "sdpa_math"):
            peak = inputs * 2 + 4 * b * h * n * n * elem
        else:
            peak = inputs * 2 + b * h * n * 4
        if peak > FAKE_MEMORY_BYTES:
            return {"status": "oom", "reason": "OutOfMemoryError: (synthetic)"}
        return {"peak_bytes": peak, "input_bytes": inputs, "fwd_bwd_ms": 1.0}
