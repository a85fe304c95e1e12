"""The parent side: a pool of worker processes (one per backend), jobs sent
one at a time with a timeout, and the budgets that keep a run bounded.

Jobs run problem by problem: for each problem ours first (its output is the
reference the others are checked against), then every peer. So when a budget
runs out, every problem measured so far has all its backends side by side.

What can go wrong, and what is recorded:
- the backend's library is missing: 'unavailable' for all its jobs;
- a job raises: 'error' / 'unsupported' / 'oom' with the reason;
- a job hangs: 'timeout', the worker is killed, a new one serves the next job;
- a worker dies (segfault, abort, poisoned CUDA context): 'crashed' with the
  tail of its log, and a new worker likewise;
- a backend fails that way MAX_FAILURES times: its remaining jobs 'skipped';
- a stage, run or backend budget is used up: remaining jobs 'skipped'.
"""

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAX_FAILURES = 3
READY_TIMEOUT_S = 240  # importing torch + the library + creating a CUDA context
KILL_GRACE_S = 5
KILL_WAIT_S = 30


class WorkerTimeout(Exception):
    pass


class WorkerDied(Exception):
    pass


class Worker:
    """One worker process and its line protocol."""

    def __init__(self, backend, device, check_dir, settings, log_path, dry_run, env_extra=None):
        cmd = [sys.executable, "-m", "bench.suite.worker", "--backend", backend, "--device", device,
               "--check-dir", str(check_dir), "--settings", json.dumps(settings)]
        if dry_run:
            cmd.append("--dry-run")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.update(env_extra or {})
        self.backend = backend
        self.log_path = Path(log_path)
        self.log = open(self.log_path, "ab")
        self.log.write(f"=== worker start {time.strftime('%H:%M:%S')} {' '.join(cmd)}\n".encode())
        self.log.flush()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env,
                                     cwd=str(REPO))
        self.buffer = b""
        self.ready = None

    def _read_message(self, timeout):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerTimeout()
            readable, _, _ = select.select([fd], [], [], left)
            if not readable:
                raise WorkerTimeout()
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                code = self.proc.wait()
                raise WorkerDied(f"worker exited with code {code}")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def wait_ready(self, timeout=READY_TIMEOUT_S):
        if self.ready is None:
            self.ready = self._read_message(timeout)
        return self.ready

    def request(self, job, timeout):
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise WorkerDied(f"worker gone before the job ({exc})")
        return self._read_message(timeout)

    def log_tail(self, nbytes=1200):
        try:
            self.log.flush()
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - nbytes))
                return f.read().decode(errors="replace").strip()
        except OSError:
            return ""

    def alive(self):
        return self.proc.poll() is None

    def stop(self, kill=False):
        if self.proc.poll() is None:
            if not kill:
                try:
                    self.proc.stdin.close()
                    self.proc.wait(KILL_GRACE_S)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            if self.proc.poll() is None:
                self.proc.kill()
                try:
                    # A process stuck in the driver may take a while to die;
                    # never let it stall the run.
                    self.proc.wait(KILL_WAIT_S)
                except subprocess.TimeoutExpired:
                    self.log.write(f"=== worker {self.proc.pid} did not exit after SIGKILL\n".encode())
        self.log.close()


class Pool:
    """Live workers by backend name, restarted on demand."""

    def __init__(self, out_dir, device, settings, dry_run, families_env):
        self.out = Path(out_dir)
        self.device = device
        self.settings = settings
        self.dry_run = dry_run
        self.families_env = families_env  # backend -> extra environment
        self.workers = {}
        self.failures = {}
        self.unavailable = {}
        self.environments = {}
        (self.out / "logs").mkdir(parents=True, exist_ok=True)
        (self.out / "check").mkdir(parents=True, exist_ok=True)

    def _start(self, backend):
        log = self.out / "logs" / f"{backend.replace('[', '-').replace(']', '')}.log"
        worker = Worker(backend, self.device, self.out / "check", self.settings, log, self.dry_run,
                        self.families_env.get(backend))
        self.workers[backend] = worker
        return worker

    def prestart(self, backends):
        """Start workers in parallel (their imports overlap)."""
        for backend in backends:
            if backend not in self.workers and backend not in self.unavailable:
                self._start(backend)

    def get(self, backend):
        """A ready worker, or raises WorkerDied/WorkerTimeout; None when the
        backend is unavailable (reason in self.unavailable)."""
        if backend in self.unavailable:
            return None
        worker = self.workers.get(backend)
        if worker is None or not worker.alive() and worker.ready is not None:
            worker = self._start(backend)
        try:
            ready = worker.wait_ready()
        except (WorkerTimeout, WorkerDied):
            self.discard(backend, kill=True)
            raise
        if not ready.get("available"):
            self.unavailable[backend] = ready.get("reason", "unavailable")
            self.discard(backend)
            return None
        self.environments[backend] = ready.get("environment", {})
        return worker

    def discard(self, backend, kill=False):
        worker = self.workers.pop(backend, None)
        if worker is not None:
            worker.stop(kill=kill)

    def close(self):
        for backend in list(self.workers):
            self.discard(backend)


def interleave(jobs, reference="ours"):
    """Problem-major order, the reference backend (ours) first for each
    problem, problems in the order they first appear."""
    by_key, order = {}, []
    for job in jobs:
        if job["key"] not in by_key:
            by_key[job["key"]] = []
            order.append(job["key"])
        by_key[job["key"]].append(job)
    return [job for key in order for job in sorted(by_key[key], key=lambda j: j["backend"] != reference)]


class Budget:
    """Seconds left for a stage / the run / one backend (None = unbounded)."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.start = time.monotonic()

    def left(self):
        if self.seconds is None:
            return None
        return self.seconds - (time.monotonic() - self.start)

    def spent(self):
        left = self.left()
        return left is not None and left <= 0


def run_stage(stage, jobs, pool, recorder, progress, *, job_timeout, stage_budget=None, run_budget=None,
              backend_budgets=None, presets=()):
    """Runs `jobs` (already interleaved) and records one result per job.
    `presets` are (job, status, reason) records added without running."""
    for job, status, reason in presets:
        recorder.add({**job, "status": status, "reason": reason})
    budget = Budget(stage_budget)
    used = {}  # backend -> seconds spent in this stage
    oom_at = {}  # memory stage: backend -> smallest seqlen that ran out of memory
    pool.prestart(sorted({j["backend"] for j in jobs}))
    progress.begin(stage, len(jobs))
    for job in jobs:
        backend = job["backend"]
        skip = _skip_reason(job, pool, budget, run_budget, backend_budgets, used, oom_at)
        if skip:
            progress.done(recorder.add({**job, "status": "skipped", "reason": skip}))
            continue
        started = time.monotonic()
        record = _run_one(job, pool, _timeout(job_timeout, budget, run_budget))
        used[backend] = used.get(backend, 0.0) + time.monotonic() - started
        if record["status"] == "oom" and job["kind"] == "memory":
            oom_at[backend] = min(oom_at.get(backend, 1 << 62), job["seqlen_q"])
        progress.done(recorder.add(record))
    recorder.save()
    progress.end(stage)


def _timeout(job_timeout, budget, run_budget):
    # A job may not outlive its stage's or the run's budget by much.
    limits = [job_timeout] + [b.left() + 15 for b in (budget, run_budget) if b is not None and b.left() is not None]
    return max(10.0, min(limits))


def _skip_reason(job, pool, budget, run_budget, backend_budgets, used, oom_at):
    backend = job["backend"]
    if run_budget is not None and run_budget.spent():
        return f"the run's time budget ({run_budget.seconds:.0f} s) is used up"
    if budget.spent():
        return f"this stage's time budget ({budget.seconds:.0f} s) is used up"
    limit = (backend_budgets or {}).get(backend)
    if limit is not None and used.get(backend, 0.0) >= limit:
        return f"{backend}'s time budget in this stage ({limit:.0f} s) is used up"
    if pool.failures.get(backend, 0) >= MAX_FAILURES:
        return f"{backend} crashed or timed out {MAX_FAILURES} times"
    if job["kind"] == "memory" and backend in oom_at and job["seqlen_q"] > oom_at[backend]:
        return f"out of memory already at seqlen {oom_at[backend]}"
    return None


def _run_one(job, pool, timeout):
    backend = job["backend"]
    if backend in pool.unavailable:
        return {**job, "status": "unavailable", "reason": pool.unavailable[backend]}
    try:
        worker = pool.get(backend)
    except WorkerTimeout:
        pool.failures[backend] = pool.failures.get(backend, 0) + 1
        return {**job, "status": "timeout", "reason": f"worker not ready within {READY_TIMEOUT_S} s"}
    except WorkerDied as exc:
        pool.failures[backend] = pool.failures.get(backend, 0) + 1
        return {**job, "status": "crashed", "reason": f"worker died while starting: {exc}"}
    if worker is None:
        return {**job, "status": "unavailable", "reason": pool.unavailable[backend]}
    try:
        answer = worker.request(job, timeout)
    except WorkerTimeout:
        pool.failures[backend] = pool.failures.get(backend, 0) + 1
        pool.discard(backend, kill=True)
        return {**job, "status": "timeout", "reason": f"no answer within {timeout:.0f} s; worker killed"}
    except WorkerDied as exc:
        pool.failures[backend] = pool.failures.get(backend, 0) + 1
        tail = worker.log_tail().splitlines()[-6:]
        pool.discard(backend, kill=True)
        return {**job, "status": "crashed", "reason": f"{exc}; log tail: {' | '.join(tail)}"[:900]}
    answer.pop("type", None)
    if answer.pop("fatal", False):
        # The worker exits by itself after an error that poisons CUDA.
        pool.failures[backend] = pool.failures.get(backend, 0) + 1
        pool.discard(backend)
        answer["reason"] = (answer.get("reason", "") + " (CUDA context lost; worker restarted)").strip()
    return {**job, **answer}
