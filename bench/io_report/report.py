"""The IO report: HBM bytes of one forward + backward measured with Nsight
Compute for standard attention, torch's kernels and ours, beside the analytic
model (model.py), and the FlashAttention paper's GPT-2 medium table
(N = 1024, d = 64, 16 heads, batch 64: GFLOPs, HBM GB, runtime) on this GPU.

Every (backend, shape) point is its own process under ncu, with a timeout,
so a crash or a hang costs one point. Results: <out>/io_report.json and
io_report.md; the raw ncu reports and CSVs under <out>/ncu/.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.suite.results import write_json
from bench.suite.summary import render

from . import model, ncu

REPO = Path(__file__).resolve().parents[2]
GPT2 = {"batch": 64, "heads": 16, "seqlen": 1024, "hdim": 64}
GPT2_BACKENDS = ("standard", "sdpa_math", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "ours")
QUICK_GPT2_BACKENDS = ("standard", "sdpa_math", "sdpa_flash", "sdpa_cudnn", "ours")
SWEEP_BACKENDS = ("standard", "ours")
SWEEP_SEQLENS = (512, 1024, 2048, 4096)
SWEEP_TOKENS = 64 * 1024
# The same table measured earlier on this H200 (reference figures), shown
# as a reference beside this run's numbers, never as this run's.
REFERENCE_GPT2 = {"standard attention (torch)": {"hbm_gb": 89.6, "runtime_ms": 36.5},
                  "sdpa_flash": {"hbm_gb": 3.27, "runtime_ms": 4.1},
                  "sdpa_cudnn": {"hbm_gb": 2.77, "runtime_ms": 2.5}}
RECOMPUTING = ("standard", "sdpa_math")  # backends that store P instead of recomputing it
# ncu messages meaning it cannot read counters on this machine at all (no
# permission, or a sandboxed runtime): the remaining points are timed only.
NCU_UNUSABLE = ("LibraryNotLoaded", "ERR_NVGPUCTRPERM", "Failed to initialize the profiler",
                "Profiling is not supported")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m bench.io_report", description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="output folder (standalone use)")
    parser.add_argument("--quick", action="store_true", help="GPT-2 table only, fewer backends")
    parser.add_argument("--dry-run", action="store_true", help="synthetic numbers, no GPU, no ncu")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--backends", help="GPT-2 table backends (comma list)")
    parser.add_argument("--sweep", dest="sweep", action="store_true", default=None, help="also sweep seqlen")
    parser.add_argument("--no-sweep", dest="sweep", action="store_false")
    parser.add_argument("--sweep-seqlens", default=",".join(map(str, SWEEP_SEQLENS)))
    parser.add_argument("--sweep-tokens", type=int, default=SWEEP_TOKENS, help="batch * seqlen of the sweep")
    parser.add_argument("--separate-timing", dest="separate_timing", action="store_true", default=None,
                        help="time in a process without ncu (default: on unless --quick)")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--ncu", help="path of ncu (default: from PATH or /usr/local/cuda)")
    parser.add_argument("--cache-control", default="all", choices=("all", "none"),
                        help="ncu's cache control: all flushes caches before each profiled kernel")
    parser.add_argument("--timeout", type=float, default=240, help="seconds per profiled process")
    parser.add_argument("--sram-bytes", type=int, default=228 * 1024, help="M of the Theta(N^2 d^2 / M) model")
    parser.add_argument("--block-m", type=int, default=128)
    parser.add_argument("--block-n", type=int, default=128)
    parser.add_argument("--seed", type=int, default=None)
    return parser.parse_args(argv)


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def _driver_cmd(backend, shape, args, timing, profile):
    cmd = [sys.executable, "-m", "bench.io_report.driver", "--backend", backend, "--batch", str(shape["batch"]),
           "--heads", str(shape["heads"]), "--seqlen", str(shape["seqlen"]), "--hdim", str(shape["hdim"]),
           "--device", args.device, "--reps", str(args.reps)]
    if args.seed is not None:
        cmd += ["--seed", str(args.seed)]
    if timing:
        cmd.append("--time")
    if not profile:
        cmd.append("--no-profile")
    return cmd


def _last_json(text):
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return None


def _run(cmd, timeout, log_path):
    """(returncode, stdout) of cmd; stdout and stderr are appended to log_path."""
    with open(log_path, "a") as log:
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        try:
            done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=log, text=True, timeout=timeout, env=_env(),
                                  cwd=str(REPO))
        except subprocess.TimeoutExpired as exc:
            log.write(f"timed out after {timeout:.0f} s\n")
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            return None, out
        log.write(done.stdout)
        return done.returncode, done.stdout


def measure(backend, shape, args, tool, out_dir, timeout):
    """One point: ncu bytes (when ncu exists) and the runtime."""
    name = f"{backend}-b{shape['batch']}-h{shape['heads']}-n{shape['seqlen']}-d{shape['hdim']}"
    log_path = out_dir / "logs" / f"{name}.log"
    record = {"backend": backend, **shape, "status": "ok"}
    separate = args.separate_timing if args.separate_timing is not None else not args.quick
    started = time.monotonic()
    if tool:
        report = out_dir / "ncu" / name
        cmd = ncu.profile_command(tool, report, _driver_cmd(backend, shape, args, not separate, True),
                                  args.cache_control)
        code, stdout = _run(cmd, timeout, log_path)
        result = _last_json(stdout) or {}
        if code is None:
            return {**record, "status": "timeout", "reason": f"no result within {timeout:.0f} s"}
        if result.get("status", "error") != "ok":
            reason = result.get("reason") or f"ncu exited with {code}; see {log_path.relative_to(out_dir)}"
            return {**record, "status": result.get("status", "error"), "reason": reason}
        record.update({k: v for k, v in result.items() if k not in ("status", "backend")})
        code, csv_text = _run(ncu.import_command(tool, f"{report}.ncu-rep"), 120, log_path)
        (out_dir / "ncu" / f"{name}.csv").write_text(csv_text or "")
        kernels = ncu.parse_csv(csv_text or "")
        if not kernels:
            errors = [line for line in log_path.read_text(errors="replace").splitlines() if "==ERROR==" in line]
            hint = f": {errors[0][:200]}" if errors else ""
            record.update(status="error", reason=f"ncu reported no kernel in the profiled range{hint} "
                                                 f"(see {log_path.relative_to(out_dir)})")
        else:
            sums = ncu.totals(kernels)
            record.update(hbm_read_gb=sums["read_bytes"] / 1e9, hbm_write_gb=sums["write_bytes"] / 1e9,
                          hbm_gb=sums["bytes"] / 1e9, kernels=sums["kernels"],
                          top_kernels=sorted(kernels, key=lambda k: -(k["read"] + k["write"]))[:5])
    else:
        record.update(hbm_status="not measured (no usable ncu)")
        separate = True
    if separate:
        left = timeout - (time.monotonic() - started)
        code, stdout = _run(_driver_cmd(backend, shape, args, True, False), max(30.0, left), log_path)
        result = _last_json(stdout) or {}
        if result.get("status") == "ok":
            record.update(runtime_ms=result.get("runtime_ms"), runtime_ms_min=result.get("runtime_ms_min"),
                          version=result.get("version"), kernel=result.get("kernel"))
        elif record["status"] == "ok" and "hbm_gb" not in record:
            record.update(status=result.get("status", "error"), reason=result.get("reason", "timing failed"))
    return record


def _with_models(record, args):
    b, h, n, d = record["batch"], record["heads"], record["seqlen"], record["hdim"]
    m = model.models(b, h, n, d, 2, False, True, args.sram_bytes, args.block_m, args.block_n)
    record.update({k.replace("_bytes", "_gb"): v / 1e9 for k, v in m.items() if k.endswith("_bytes")})
    record["model_gb"] = record["standard_gb"] if record["backend"] in RECOMPUTING else record["tiled_gb"]
    record["gflops"] = model.matmul_flops(b, h, n, d, recompute=record["backend"] not in RECOMPUTING) / 1e9
    return record


def _fake(backend, shape, args):
    """Dry run: numbers shaped like real ones, flagged as synthetic."""
    rec = _with_models({"backend": backend, **shape, "status": "ok"}, args)
    factor = {"standard": 1.1, "sdpa_math": 2.5}.get(backend)
    rec["hbm_gb"] = rec["standard_gb"] * factor if factor else rec["compulsory_gb"] * 2.0
    rec.update(hbm_read_gb=rec["hbm_gb"] * 0.6, hbm_write_gb=rec["hbm_gb"] * 0.4, kernels=3,
               runtime_ms=rec["hbm_gb"] / 3000 * 1e3 + rec["gflops"] / 400e3 * 1e3)
    return rec


def run(args, out_dir, budget_s=None, log=print):
    out_dir = Path(out_dir)
    (out_dir / "logs").mkdir(parents=True, exist_ok=True)
    (out_dir / "ncu").mkdir(parents=True, exist_ok=True)
    doc = {"status": "ok", "dry_run": bool(args.dry_run), "gpt2_shape": GPT2, "reference_gpt2": REFERENCE_GPT2,
           "reference_source": "reference figures, an earlier run on this H200; not this run",
           "model": {"sram_bytes": args.sram_bytes, "block_m": args.block_m, "block_n": args.block_n,
                     "doc": model.__doc__.strip()},
           "gpt2": [], "sweep": []}
    if not args.device.startswith("cuda") and not args.dry_run:
        doc.update(status="skipped", reason="HBM traffic needs a CUDA device and Nsight Compute")
        write_json(out_dir / "io_report.json", doc)
        return doc
    tool = None
    if not args.dry_run:
        tool = args.ncu or ncu.find_ncu()
        doc["ncu"] = {"path": tool, "version": ncu.version(tool) if tool else "",
                      "metrics": list(ncu.METRICS), "cache_control": args.cache_control,
                      "clock_control": "none"}
        if not tool:
            log("io: ncu not found; recording runtimes only")
    measure_points(doc, plan(args), args, tool, out_dir, budget_s, log)
    return doc


def plan(args):
    """(table, backend, shape) of every point the options ask for."""
    backends = tuple(b for b in (args.backends or "").split(",") if b) or (
        QUICK_GPT2_BACKENDS if args.quick else GPT2_BACKENDS)
    sweep = args.sweep if args.sweep is not None else not args.quick
    points = [("gpt2", b, dict(GPT2)) for b in backends]
    if sweep:
        for n in (int(x) for x in args.sweep_seqlens.split(",") if x):
            shape = {"batch": max(1, args.sweep_tokens // n), "heads": 16, "seqlen": n, "hdim": 64}
            points += [("sweep", b, shape) for b in SWEEP_BACKENDS]
    return points


def measure_points(doc, points, args, tool, out_dir, budget_s=None, log=print):
    """Measures every point into doc['gpt2'] / doc['sweep'] and writes the
    report files after each."""
    started = time.monotonic()
    done = {}  # the sweep's N = 1024 point is the GPT-2 shape: measured once
    for i, (table, backend, shape) in enumerate(points, 1):
        left = None if budget_s is None else budget_s - (time.monotonic() - started)
        point = (backend,) + tuple(sorted(shape.items()))
        if point in done:
            rec = dict(done[point])
        elif left is not None and left <= 5:
            rec = {"backend": backend, **shape, "status": "skipped", "reason": "the IO stage's time budget is used up"}
        elif args.dry_run:
            rec = _fake(backend, shape, args)
        else:
            timeout = args.timeout if left is None else min(args.timeout, left)
            rec = measure(backend, shape, args, tool, out_dir, timeout)
            if tool and rec["status"] == "error" and any(m in rec.get("reason", "") for m in NCU_UNUSABLE):
                log(f"io: ncu cannot read counters here ({rec['reason'][:160]}); timing only from now on")
                doc.setdefault("ncu", {})["status"] = f"unusable: {rec['reason'][:300]}"
                tool = None
                rec = measure(backend, shape, args, tool, out_dir, timeout)
        rec = _with_models(rec, args)
        done[point] = rec
        doc[table].append(rec)
        log(f"[io {i}/{len(points)}] {backend:<14} N{shape['seqlen']} b{shape['batch']}  {_line(rec)}")
        write_json(out_dir / "io_report.json", doc)
    (out_dir / "io_report.md").write_text(markdown(doc) + "\n")


def _line(rec):
    if rec["status"] != "ok":
        return f"{rec['status'].upper()}: {rec.get('reason', '')}"[:160]
    hbm = f"{rec['hbm_gb']:.2f} GB" if rec.get("hbm_gb") is not None else rec.get("hbm_status", "-")
    ms = f"{rec['runtime_ms']:.2f} ms" if rec.get("runtime_ms") is not None else "-"
    return f"HBM {hbm}  runtime {ms}  model {rec['model_gb']:.2f} GB"


def gpt2_rows(doc):
    rows = []
    for r in doc.get("gpt2", []):
        rows.append([r["backend"], r.get("gflops"), r.get("hbm_gb"), r.get("hbm_read_gb"), r.get("hbm_write_gb"),
                     r.get("runtime_ms"), r.get("model_gb"), r.get("compulsory_gb"),
                     r["status"] if r["status"] == "ok" else f"{r['status']}: {str(r.get('reason', ''))[:60]}"])
    return (["backend", "GFLOPs", "HBM GB", "read GB", "write GB", "runtime ms", "model GB", "compulsory GB",
             "status"], rows)


def sweep_rows(doc):
    rows = []
    for r in doc.get("sweep", []):
        rows.append([r["backend"], r["seqlen"], r["batch"], r.get("hbm_gb"), r.get("standard_gb"), r.get("tiled_gb"),
                     r.get("theta_tiled_gb"), r.get("compulsory_gb"), r.get("runtime_ms"), r["status"]])
    return (["backend", "N", "batch", "HBM GB", "standard model", "tiled model", "N^2 d^2 / M", "compulsory",
             "runtime ms", "status"], rows)


def markdown(doc):
    shape = doc["gpt2_shape"]
    parts = [f"GPT-2 medium attention, one forward + backward (batch {shape['batch']}, {shape['heads']} heads, "
             f"N = {shape['seqlen']}, d = {shape['hdim']}, bf16)" + (" [DRY RUN: synthetic]" if doc.get("dry_run")
                                                                     else ""),
             "", render(*gpt2_rows(doc), markdown=True)]
    if doc.get("sweep"):
        parts += ["", "Seqlen sweep (batch * N constant, 16 heads, d = 64), GB", "",
                  render(*sweep_rows(doc), markdown=True)]
    return "\n".join(parts)


def main(argv=None):
    args = parse_args(argv)
    out = Path(args.out or REPO / "bench" / "results" / time.strftime("io-%Y%m%d-%H%M%S"))
    doc = run(args, out)
    print(markdown(doc))
    print(f"\nwritten: {out / 'io_report.json'}")
    return 0
