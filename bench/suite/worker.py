"""One backend's measurements, in a process of its own.

    python3 -m bench.suite.worker --backend NAME --device cuda --check-dir DIR --settings JSON

The parent writes one job (JSON) per line to stdin; the worker answers each
with one result line on its protocol channel: the stdout it was started
with. Everything else the process prints (library chatter, warnings, C-level
output) goes to stderr, which the parent keeps as this backend's log. The
first line a worker sends says whether the backend is usable at all.

A backend that crashes, hangs or corrupts its CUDA context only loses its
own process: the parent kills or restarts it and the run goes on. After an
error that poisons the CUDA context the worker exits by itself (status
'fatal') so the next job gets a fresh process.
"""

import argparse
import gc
import json
import os
import sys
import time
import traceback
import warnings

from . import checks
from .backends import create, is_ours
from .backends.base import Unavailable, Unsupported, scale_of
from .inputs import decode_inputs, nbytes, prefill_inputs
from .timing import Timer, rotations

# Errors after which the CUDA context is unusable.
FATAL_MARKERS = ("illegal memory access", "device-side assert", "unspecified launch failure",
                 "misaligned address", "CUDA error: an illegal instruction", "CUBLAS_STATUS_EXECUTION_FAILED",
                 "cudaErrorLaunchFailure", "uncorrectable ECC")


def classify(exc, caught=()):
    """(status, reason, fatal) for an exception raised by a job."""
    text = f"{type(exc).__name__}: {exc}".strip()
    first = text.splitlines()[0][:600] if text else type(exc).__name__
    if isinstance(exc, Unsupported):
        return "unsupported", str(exc)[:600], False
    if "OutOfMemory" in type(exc).__name__ or "out of memory" in text.lower():
        return "oom", first, False
    if isinstance(exc, NotImplementedError) or "No available kernel" in text:
        reasons = "; ".join(str(w.message).splitlines()[0] for w in caught)[:400]
        return "unsupported", first + (f" ({reasons})" if reasons else ""), False
    fatal = any(marker in text for marker in FATAL_MARKERS)
    return "error", first, fatal


class TorchEngine:
    """Runs jobs for one backend with real tensors."""

    def __init__(self, backend_name, device, settings, check_dir):
        import torch

        self.torch = torch
        self.device = device
        self.settings = settings
        self.check_dir = check_dir
        self.name = backend_name
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise Unavailable("torch sees no CUDA device")
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 self-check references stay fp32
        self.backend = create(backend_name)
        self.timer = Timer(torch, device, settings.get("l2", "rotate"))

    def environment(self):
        torch = self.torch
        env = {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "backend_version": self.backend.version()}
        if self.device.startswith("cuda"):
            props = torch.cuda.get_device_properties(torch.device(self.device))
            env.update(gpu=props.name, sm_count=props.multi_processor_count,
                       capability=f"{props.major}.{props.minor}", memory_bytes=props.total_memory,
                       l2_bytes=self.timer.l2_bytes, cudnn=torch.backends.cudnn.version())
        try:
            import triton

            env["triton"] = triton.__version__
        except ImportError:
            pass
        return env

    # -- jobs ---------------------------------------------------------------

    def run(self, job):
        torch = self.torch
        result = {"id": job["id"], "status": "ok"}
        started = time.time()
        caught = []
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                runner = {"prefill": self._prefill, "decode": self._decode, "memory": self._memory}[job["kind"]]
                result.update(runner(job))
        except Exception as exc:  # every failure becomes a recorded status
            status, reason, fatal = classify(exc, caught)
            result.update(status=status, reason=reason)
            if fatal:
                result["fatal"] = True
            if status == "error":
                traceback.print_exc(file=sys.stderr)
        finally:
            gc.collect()
            if self.device.startswith("cuda") and not result.get("fatal"):
                try:
                    torch.cuda.synchronize()
                    torch.cuda.empty_cache()
                except Exception as exc:
                    result.update(status="error", reason=f"after the job: {exc}"[:600], fatal=True)
        result["wall_s"] = round(time.time() - started, 3)
        kernel = self.backend.describe(job)
        if kernel:
            result["kernel"] = kernel
        return result

    def _self_checked(self):
        """Ours (every family) and the run's reference get the fp32 check."""
        return is_ours(self.name) or self.name == self.settings.get("reference", "ours")

    def _check(self, job, prep_out, grads, inputs):
        """Correctness before timing: ours stores the reference, others compare."""
        torch = self.torch
        tensors = {"out": prep_out}
        if grads is not None:
            tensors.update(dq=grads[0], dk=grads[1], dv=grads[2])
        result = {"finite": checks.finite(torch, tensors)}
        values = checks.samples(torch, tensors, job["seed"])
        ref = checks.load_reference(torch, self.check_dir, job["check_key"])
        reference = self.settings.get("reference", "ours")
        if ref is None and self.name == reference:
            checks.save_reference(torch, self.check_dir, job["check_key"], values, self.name,
                                  self.backend.describe(job))
            result["check"] = {"status": "reference"}
        elif ref is None:
            result["check"] = {"status": "no reference", "detail": f"{reference} has no result for this problem"}
        else:  # a peer, another kernel family of ours, or a paged cache against the contiguous one
            result["check"] = checks.compare(torch, values, ref["values"], job["dtype"])
        if inputs is not None:
            q, k, v, dout = inputs
            own = checks.self_check(torch, job, q, k, v, dout, prep_out, grads, scale_of(job),
                                    bool(job.get("causal")))
            if own is not None:
                result["self_check"] = own
        return result

    def _prefill(self, job):
        torch, settings = self.torch, self.settings
        inputs = prefill_inputs(torch, job, self.device)
        q, k, v, dout = inputs
        want_bwd = "bwd" in job["passes"]
        need_grad = want_bwd and self.backend.supports_backward
        prep = self.backend.prefill(job, q, k, v, need_grad)
        out = {}
        if want_bwd and not need_grad:
            out.update(bwd_status="unsupported", bwd_reason=f"{self.name} has no backward")

        t0 = time.perf_counter()
        try:
            o = prep.forward()
        except Exception as exc:
            # Some backends refuse a forward that autograd would differentiate
            # (FlexAttention on the CPU): measure the forward alone.
            status, reason, fatal = classify(exc)
            if not need_grad or status != "unsupported":
                raise
            need_grad = False
            out.update(bwd_status=status, bwd_reason=reason)
            prep = self.backend.prefill(job, q, k, v, False)
            o = prep.forward()
        grads = None
        if need_grad:
            # A backend may run the forward and refuse the backward: keep the
            # forward's numbers and record why the backward has none.
            try:
                grads = [prep.canon(g) for g in torch.autograd.grad(o, prep.leaves, prep.native(dout))]
            except Exception as exc:
                status, reason, fatal = classify(exc)
                if fatal or status == "oom":
                    raise
                out.update(bwd_status=status, bwd_reason=reason)
                traceback.print_exc(file=sys.stderr)
        self.timer.sync()
        out["first_call_s"] = round(time.perf_counter() - t0, 3)
        if settings.get("check", True):
            out.update(self._check(job, prep.canon(o), grads, inputs if self._self_checked() else None))
        have_grads = grads is not None
        del o, grads

        set_bytes = nbytes(q, k, v, dout)
        count = rotations(set_bytes, self.timer.l2_bytes, settings.get("l2", "rotate"))
        out["input_sets"] = count
        sets = [prep] + [self.backend.prefill(job, *prefill_inputs(torch, job, self.device, i)[:3], False)
                         for i in range(1, count)]
        with torch.no_grad():
            fwd = self.timer.eager([s.forward for s in sets], settings["warmup"], settings["reps"])
        out.update({f"fwd_{k}": val for k, val in fwd.items()})
        del sets
        if have_grads:
            calls = []
            for i in range(count):
                if i == 0:
                    p, do = prep, dout
                else:
                    qi, ki, vi, do = prefill_inputs(torch, job, self.device, i)
                    p = self.backend.prefill(job, qi, ki, vi, True)
                calls.append(_backward_call(torch, p, p.native(do)))
            bwd = self.timer.eager(calls, settings["warmup"], settings["reps"])
            out.update({f"bwd_{k}": val for k, val in bwd.items()})
        return out

    def _decode(self, job):
        torch, settings = self.torch, self.settings
        q, kc, vc, seqlens, table = decode_inputs(torch, job, self.device)
        prep = self.backend.decode(job, q, kc, vc, seqlens, table)
        out = {}
        if prep.note:
            out["note"] = prep.note
        with torch.no_grad():
            t0 = time.perf_counter()
            o = prep.forward()
            self.timer.sync()
            out["first_call_s"] = round(time.perf_counter() - t0, 3)
            if settings.get("check", True):
                plain = (q, kc, vc, None) if table is None and self._self_checked() else None
                out.update(self._check(job, prep.to_canon(o), None, plain))
            del o
            count = rotations(nbytes(kc, vc), self.timer.l2_bytes, settings.get("l2", "rotate"))
            out["input_sets"] = count
            sets = [prep] + [self.backend.decode(job, *decode_inputs(torch, job, self.device, i))
                             for i in range(1, count)]
            calls = [s.forward for s in sets]
            timing = None
            if settings.get("graphs", True) and self.device.startswith("cuda"):
                try:
                    timing = self.timer.graph(calls, settings["warmup"], settings["reps"])
                    out["graph"] = True
                except Exception as exc:  # capture is not supported by every library
                    out["graph"] = False
                    out["graph_reason"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
                    torch.cuda.synchronize()
            if timing is None:
                timing = self.timer.eager(calls, settings["warmup"], settings["reps"])
        out.update({f"fwd_{k}": val for k, val in timing.items()})
        return out

    def _memory(self, job):
        torch = self.torch
        if not self.device.startswith("cuda"):
            raise Unsupported("peak memory is read from the CUDA caching allocator; needs a CUDA device")
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        q, k, v, dout = prefill_inputs(torch, job, self.device)
        prep = self.backend.prefill(job, q, k, v, True)
        dout_native = prep.native(dout)
        del q, k, v, dout  # keep only what the backend itself holds
        held = nbytes(*prep.leaves, dout_native)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        o = prep.forward()
        grads = torch.autograd.grad(o, prep.leaves, dout_native)
        end.record()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        del o, grads
        return {"peak_bytes": int(peak), "input_bytes": int(held), "fwd_bwd_ms": start.elapsed_time(end)}


def _backward_call(torch, prep, dout):
    o = prep.forward()
    leaves = prep.leaves

    def call():
        return torch.autograd.grad(o, leaves, dout, retain_graph=True)

    return call


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--check-dir", required=True)
    parser.add_argument("--settings", default="{}")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)

    # The protocol keeps the original stdout; fd 1 becomes stderr so stray
    # prints (Python or C) cannot corrupt it.
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(message):
        channel.write(json.dumps(message) + "\n")
        channel.flush()

    settings = json.loads(args.settings)
    try:
        if args.dry_run:
            from .fake import FakeEngine

            engine = FakeEngine(args.backend, args.device, settings, args.check_dir)
        else:
            engine = TorchEngine(args.backend, args.device, settings, args.check_dir)
        send({"type": "ready", "available": True, "environment": engine.environment()})
    except Unavailable as exc:
        send({"type": "ready", "available": False, "reason": str(exc)[:600]})
        return 0
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        send({"type": "ready", "available": False, "reason": f"{type(exc).__name__}: {exc}"[:600]})
        return 0

    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        job = json.loads(line)
        print(f"--- {job['id']}", file=sys.stderr, flush=True)
        result = engine.run(job)
        send({"type": "result", **result})
        if result.get("fatal"):
            return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
