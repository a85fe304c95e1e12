"""What a result was measured on: date, commit, GPU, driver, and the
versions of torch and of every peer library (reported by the workers)."""

import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(cmd, cwd=None):
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=20, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def git_state():
    # A copy of the tree without its own history (e.g. shipped to a remote GPU
    # machine) names the commit it was made from in FLASHPP_SOURCE_SHA.
    given = os.environ.get("FLASHPP_SOURCE_SHA", "").strip()
    if given:
        return {"sha": given, "dirty": False, "describe": given[:7] + " (FLASHPP_SOURCE_SHA)"}
    sha = _run(["git", "rev-parse", "HEAD"], cwd=REPO)
    dirty = bool(_run(["git", "status", "--porcelain", "--", "src", "include", "python", "bench"], cwd=REPO))
    describe = _run(["git", "describe", "--always", "--dirty"], cwd=REPO)
    return {"sha": sha or "unknown", "dirty": dirty, "describe": describe}


def nvidia_smi():
    """GPU name, driver, memory and clocks; {} without nvidia-smi."""
    fields = ["name", "driver_version", "memory.total", "clocks.max.sm", "clocks.max.mem", "power.limit"]
    text = _run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"])
    gpus = []
    for line in text.splitlines():
        values = [v.strip() for v in line.split(",")]
        if len(values) == len(fields):
            gpus.append(dict(zip(fields, values)))
    return {"gpus": gpus, "driver": gpus[0]["driver_version"] if gpus else ""} if gpus else {}


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def collect(args_dict, seed, dry_run):
    now = datetime.datetime.now(datetime.timezone.utc)
    return {
        "date": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        **git_state(),
        **nvidia_smi(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "seed": seed,
        "dry_run": dry_run,
        "args": args_dict,
    }


def versions_from_workers(environments):
    """{'torch': ..., 'cudnn': ..., 'backends': {name: version}} from the
    workers' ready messages."""
    merged = {"backends": {}}
    for backend, env in sorted(environments.items()):
        for key in ("torch", "torch_cuda", "cudnn", "triton", "gpu", "sm_count", "capability", "memory_bytes",
                    "l2_bytes"):
            if env.get(key) is not None and key not in merged:
                merged[key] = env[key]
        merged["backends"][backend] = env.get("backend_version", "")
    return merged
