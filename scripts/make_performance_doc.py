#!/usr/bin/env python3
"""Regenerates docs/performance.md (and the plots it shows) from benchmark
results committed under bench/results/.

    scripts/make_performance_doc.py                     # newest runs under bench/results/
    scripts/make_performance_doc.py bench/results/h200-2026-12-03   # these runs only

Each section (prefill, decode, memory, IO) comes from the newest given run
that has data for it and names that run: date, commit, GPU, driver, torch
and peer versions. Dry runs (synthetic numbers) are refused unless
--allow-dry-run. Reference figures measured earlier on the same GPU model
(h200-peers.json) are shown in a section of their own, never mixed with the
run's same-run ratios.
"""

import argparse
import json
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.io_report.report import REFERENCE_GPT2, gpt2_rows, sweep_rows  # noqa: E402
from bench.plots import figures  # noqa: E402
from bench.suite import summary  # noqa: E402
from bench.suite.results import load  # noqa: E402

DOC = REPO / "docs" / "performance.md"
REFERENCE_CANDIDATES = (REPO / "bench" / "results" / "reference" / "h200-peers.json",
                        REPO.parent / "shared" / "reference" / "h200-peers.json")
COMMAND = "scripts/make_performance_doc.py"


def find_runs(paths):
    """Run folders (with results.json), newest first."""
    folders = []
    for path in paths:
        path = Path(path)
        if (path / "results.json").exists():
            folders.append(path)
        elif path.is_dir():
            folders += [p.parent for p in path.glob("*/results.json")]
    runs = []
    for folder in folders:
        try:
            runs.append((folder, load(folder)))
        except (OSError, json.JSONDecodeError) as exc:
            print(f"skipping {folder}: {exc}", file=sys.stderr)
    return sorted(runs, key=lambda run: run[1].get("meta", {}).get("date", ""), reverse=True)


def _rel(path):
    return os.path.relpath(path, DOC.parent)


def provenance(folder, doc):
    meta = doc.get("meta", {})
    versions = meta.get("versions") or {}
    gpus = ", ".join(g.get("name", "") for g in meta.get("gpus", [])) or versions.get("gpu", "?")
    peers = ", ".join(f"{name}: {v}" for name, v in sorted((versions.get("backends") or {}).items()) if v)
    dirty = " (uncommitted changes)" if meta.get("dirty") else ""
    lines = [f"Run `{_rel(folder)}`: {meta.get('date', '?')}, commit `{meta.get('sha', '?')[:12]}`{dirty}, "
             f"{gpus}, driver {meta.get('driver') or '?'}, torch {versions.get('torch', '?')} "
             f"(CUDA {versions.get('torch_cuda', '?')}, cuDNN {versions.get('cudnn', '?')}, "
             f"triton {versions.get('triton', '?')}), preset `{meta.get('preset', '?')}`, seed {meta.get('seed')}."]
    if peers:
        lines.append(f"Backends: {peers}.")
    unavailable = meta.get("unavailable") or {}
    if unavailable:
        missing = "; ".join(f"{k} ({v[:80]})" for k, v in sorted(unavailable.items()))
        lines.append(f"Not importable in that run: {missing}.")
    return " ".join(lines)


def image(path, alt):
    return f"![{alt}]({_rel(path)})"


def prefill_section(folder, doc, plots):
    out = ["## Prefill: forward and backward TFLOP/s", "", provenance(folder, doc), "",
           "FLOPs are the FlashAttention convention: 4 · batch · heads · N² · d per forward, halved when causal; "
           "the backward counts 2.5x the forward. `ratio` is ours over the fastest other backend of the same run "
           "on the same problem.", ""]
    for pass_name in ("fwd", "bwd", "fwd_bwd"):
        for mask in ("full", "causal"):
            path = plots / f"prefill_{pass_name}_{mask}.png"
            if path.exists():
                out += [image(path, f"prefill {pass_name} {mask}"), ""]
    out += ["### Ours beside the fastest peer", "", summary.render(*summary.prefill_headline(doc), markdown=True), ""]
    records = doc.get("prefill", [])
    for hdim in sorted({r["hdim"] for r in records}):
        for causal in (False, True):
            for pass_name in ("fwd", "bwd"):
                headers, rows = summary.prefill_full(doc, hdim, causal, pass_name)
                if rows:
                    out += [f"#### head dim {hdim}, {'causal' if causal else 'no mask'}, {pass_name} TFLOP/s", "",
                            summary.render(headers, rows, markdown=True), ""]
    return out


def decode_section(folder, doc, plots):
    out = ["## Decoding: KV cache bandwidth", "", provenance(folder, doc), "",
           "One query token per sequence over a full cache; GB/s counts each cached key and value read once "
           "(query and output bytes are negligible). Timed as CUDA graphs of 20 calls, inputs rotated so the "
           "cache does not sit in the L2.", ""]
    path = plots / "decode_bandwidth.png"
    if path.exists():
        out += [image(path, "decode bandwidth"), ""]
    out += [summary.render(*summary.decode_headline(doc), markdown=True), ""]
    for page in sorted({r.get("page_size", 0) for r in doc.get("decode", [])}):
        headers, rows = summary.decode_full(doc, page)
        if rows:
            out += [f"#### {'contiguous cache' if not page else f'paged cache, page {page}'}, GB/s", "",
                    summary.render(headers, rows, markdown=True), ""]
    return out


def memory_section(folder, doc, plots):
    out = ["## Memory: standard attention against ours", "", provenance(folder, doc), "",
           "Peak memory of one forward + backward read from the CUDA caching allocator (inputs, outputs, "
           "gradients and everything the backend keeps for the backward). Standard attention stores the "
           "N x N scores and probabilities, so it grows as N² and runs out of memory; ours stores O(N).", ""]
    path = plots / "memory.png"
    if path.exists():
        out += [image(path, "peak memory"), ""]
    out += [summary.render(*summary.memory_table(doc), markdown=True), ""]
    return out


def io_section(folder, doc, plots):
    report = doc.get("io") or {}
    shape = report.get("gpt2_shape", {})
    out = ["## IO: HBM traffic", "", provenance(folder, doc), ""]
    tool = report.get("ncu") or {}
    out += [f"Bytes read + written in HBM (`dram__bytes_read.sum + dram__bytes_write.sum`) summed over every kernel "
            f"of one forward + backward, measured with Nsight Compute {tool.get('version', '')} "
            f"(`--clock-control none`, `--cache-control {tool.get('cache_control', 'all')}`), each backend in its "
            f"own process, warm-up outside the profiled range. The model columns are the analytic counts of "
            f"`bench/io_report/model.py`: standard attention moves Θ(N d + N²) per head (every N x N "
            f"intermediate through HBM), the tiled algorithm Θ(N² d² / M) (K and V re-read once per query "
            f"tile, with no L2 reuse assumed, so it is an upper bound), and the compulsory traffic reads each "
            f"input and writes each output once. GFLOPs count the matmuls each algorithm runs (standard: 6, "
            f"recomputing kernels: 7).", ""]
    if report.get("status") not in (None, "ok"):
        out += [f"IO report status: {report.get('status')}: {report.get('reason', '')}", ""]
    out += [f"### GPT-2 medium (batch {shape.get('batch')}, {shape.get('heads')} heads, N = {shape.get('seqlen')}, "
            f"d = {shape.get('hdim')}, bf16), one forward + backward", ""]
    if report.get("gpt2"):
        out += [summary.render(*gpt2_rows(report), markdown=True), ""]
    ref = report.get("reference_gpt2") or {}
    if ref:
        out += ["Measured earlier on this H200 model (" + report.get("reference_source", "") + "): " +
                "; ".join(f"{k} {v['hbm_gb']} GB / {v['runtime_ms']} ms" for k, v in ref.items()) + ".", ""]
    for name, alt in (("io_gpt2.png", "HBM traffic GPT-2"), ("io_sweep.png", "HBM traffic sweep")):
        if (plots / name).exists():
            out += [image(plots / name, alt), ""]
    if report.get("sweep"):
        out += ["### Sequence-length sweep", "", summary.render(*sweep_rows(report), markdown=True), ""]
    return out


def reference_section(path):
    if path is None:
        return []
    data = json.loads(Path(path).read_text())
    rows = {}
    for r in data.get("prefill", []):
        key = (r["hdim"], r["seqlen"], r["causal"])
        rows.setdefault(key, {})[r["backend"]] = (r.get("fwd_tflops"), r.get("bwd_tflops"))
    names = sorted({b for v in rows.values() for b in v})
    headers = ["hdim", "N", "causal"] + [f"{b} fwd / bwd" for b in names]
    table = []
    for key in sorted(rows):
        cells = []
        for b in names:
            fwd, bwd = rows[key].get(b, (None, None))
            cells.append("-" if fwd is None else f"{fwd:.0f} / {bwd:.0f}" if bwd is not None else f"{fwd:.0f}")
        table.append([key[0], key[1], "yes" if key[2] else "no"] + cells)
    decode_rows = [[r["backend"] + (f" page {r['page']}" if r.get("page") else ""), r["batch"], r["kvlen"], r["GBps"]]
                   for r in data.get("decode", [])]
    ceilings = data.get("ceilings", {})
    out = ["## Reference figures (earlier measurement, not this run)", "",
           data.get("about", ""), "",
           f"Ceilings: bf16 GEMM {ceilings.get('bf16_gemm_tflops', 0):.0f} TFLOP/s, fp8 GEMM "
           f"{ceilings.get('fp8_gemm_tflops', 0):.0f} TFLOP/s, device copy {ceilings.get('d2d_copy_TBps', 0):.2f} "
           "TB/s (read + write).", "",
           "### Prefill TFLOP/s", "", summary.render(headers, table, markdown=True), "",
           "### Decode GB/s (32 query / 8 KV heads, d = 128)", "",
           summary.render(["backend", "batch", "cache", "GB/s"], decode_rows, markdown=True), "",
           "### HBM traffic, GPT-2 medium attention, one forward + backward", "",
           summary.render(["backend", "HBM GB", "runtime ms"],
                          [[name, v["hbm_gb"], v["runtime_ms"]] for name, v in REFERENCE_GPT2.items()],
                          markdown=True), ""]
    return out


def newest_grid(paths):
    """The newest run folder among paths (run folders or folders of runs) holding a grid
    table (device_check.sh's grid step): newest date in the folder name first, then an
    H200 over other GPUs, then the rest of the name with its numbers compared as numbers
    (session 11 after session 9)."""
    tables = []
    for path in map(Path, paths):
        tables += [path / "grid_table.md"] if (path / "grid_table.md").exists() else list(path.glob("*/grid_table.md"))
    best = None
    for table in tables:
        folder = table.parent
        m = re.search(r"(\d{4}-\d{2}-\d{2})(.*)$", folder.name)
        if not m:
            continue
        rest = [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", m.group(2))]
        key = (m.group(1), folder.name.startswith("h200"), rest)
        if best is None or key > best[0]:
            best = (key, folder)
    return best[1] if best else None


def grid_section(folder):
    """The grid table of a device run as committed, with where it came from."""
    if folder is None:
        return []
    notes = folder / "NOTES.md"
    title = notes.read_text().splitlines()[0].lstrip("# ").strip() if notes.exists() else "?"
    summary_txt = folder / "summary.txt"
    gpu = "?"
    if summary_txt.exists():
        lines = summary_txt.read_text().splitlines()
        if len(lines) > 1 and "," in lines[1]:
            gpu = lines[1].split(",")[0].strip()
    table = [line for line in (folder / "grid_table.md").read_text().splitlines() if line.startswith("|")]
    return ["## Same-run grid: our benchmark beside torch SDPA (flash, cuDNN)", "",
            f"Run `{_rel(folder)}` ({title}), {gpu}; how it was run and what changed: "
            f"[NOTES.md]({_rel(notes)}). `scripts/device_check.sh` step `grid`: `flashpp_cuda_bench --grid` and "
            "`scripts/peer_bench.py` on identical shapes (batch x N = 16K, hidden 2048, bf16), each idling 250 ms "
            "before every timed pass. Ratios are ours over the peer; \"FA2-class\" is our sm80 kernel family "
            "forced on this GPU.", ""] + table + [""]


def build(runs, reference, regenerate_plots=True, grid_folder=None):
    lines = ["# Performance", "",
             f"Generated by `{COMMAND}` from results under `bench/results/`; do not edit by hand. "
             "How to produce results: [bench/suite/README.md](../bench/suite/README.md).", ""]
    if any(doc.get("meta", {}).get("dry_run") for _, doc in runs):
        lines += ["**DRY RUN: every number below is synthetic (pipeline test only).**", ""]
    sections = (("prefill", prefill_section), ("decode", decode_section), ("memory", memory_section),
                ("io", io_section))
    used = set()
    for key, make in sections:
        for folder, doc in runs:
            has = doc.get(key) if key != "io" else (doc.get("io") or {}).get("gpt2")
            if has and any(r.get("status") == "ok" for r in (has if isinstance(has, list) else [])):
                plots = folder / "plots"
                if regenerate_plots and folder not in used:
                    figures.make_all(folder / "results.json", plots)
                used.add(folder)
                lines += make(folder, doc, plots)
                break
    if not used:
        lines += ["## No GPU results yet", "",
                  "No benchmark run is committed under `bench/results/` yet. On a GPU machine:", "",
                  "```sh", "python3 -m bench.suite run --quick --out bench/results/<gpu>-<date>",
                  f"{COMMAND}", "```", ""]
    else:
        problems = []
        for folder in sorted(used):
            doc = dict(runs)[folder]
            headers, rows = summary.problems(doc, limit=40)
            if rows:
                problems += [f"Run `{_rel(folder)}`:", "", summary.render(headers, rows, markdown=True), ""]
        if problems:
            lines += ["## Failures and skipped checks", ""] + problems
    lines += grid_section(grid_folder)
    lines += reference_section(reference)
    lines += ["## Method", "",
              "- Each backend runs in its own worker process; a crash, hang (per-job timeout) or lost CUDA "
              "context costs that job only, and is recorded with its reason.",
              "- Before any timing, every backend's output (and gradients) is compared with ours on the same "
              "seeded random inputs at 8192 random positions per tensor (max error over max magnitude); ours is "
              "also checked against fp32 standard attention. Fresh inputs every run (the seed is recorded).",
              "- Times are medians of CUDA-event timings of individual calls after warm-up; inputs rotate through "
              "enough copies to exceed twice the L2 (or `--l2 flush` writes a buffer before each call). "
              "Forward times are taken under `torch.no_grad()`; backward times exclude the forward.",
              "- Decoding is timed as CUDA graphs (launch overhead would otherwise dominate microsecond kernels); "
              "a backend whose calls cannot be captured is timed eagerly and marked so.",
              "- Inputs are converted once, outside the timing, to each library's preferred layout "
              "((batch, heads, seqlen, d) for SDPA and FlexAttention).", ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="*", help="run folders or folders of runs (default bench/results)")
    parser.add_argument("--reference", help="h200-peers.json (default: bench/results/reference/, then shared/)")
    parser.add_argument("--allow-dry-run", action="store_true", help="accept synthetic results (testing only)")
    parser.add_argument("--output", default=str(DOC))
    parser.add_argument("--no-plots", action="store_true", help="use the PNGs already in the runs")
    args = parser.parse_args(argv)
    runs = find_runs(args.results or [REPO / "bench" / "results"])
    dry = [folder for folder, doc in runs if doc.get("meta", {}).get("dry_run")]
    if dry and not args.allow_dry_run:
        print("leaving out dry runs (synthetic numbers): " + ", ".join(map(str, dry)), file=sys.stderr)
        runs = [(f, d) for f, d in runs if not d.get("meta", {}).get("dry_run")]
    reference = args.reference or next((str(p) for p in REFERENCE_CANDIDATES if p.exists()), None)
    text = build(runs, reference, not args.no_plots, newest_grid(args.results or [REPO / "bench" / "results"]))
    Path(args.output).write_text(text + "\n")
    print(f"wrote {args.output} from {len(runs)} run(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
