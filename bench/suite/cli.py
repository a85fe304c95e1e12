"""Command line of the benchmark suite (see bench/suite/README.md).

    python3 -m bench.suite run --quick --out bench/results/h200-quick
    python3 -m bench.suite run --stages prefill --backends ours,sdpa_cudnn --hdims 128
    python3 -m bench.suite run --dry-run --out /tmp/dry      # no torch, no GPU
    python3 -m bench.suite summary bench/results/h200-quick
    python3 -m bench.suite backends
"""

import argparse
import shutil
import sys
import time
from pathlib import Path

from . import config, environment, summary
from .backends import ADAPTERS, CUDA_ONLY, DEFAULT_DECODE, DEFAULT_MEMORY, DEFAULT_PREFILL, describe, is_known
from .progress import Progress
from .results import Recorder, load
from .runner import Budget, Pool, interleave, run_stage

STAGES = ("prefill", "decode", "memory", "io", "plots")
REPO = Path(__file__).resolve().parents[2]

# --quick: the main grid (prefill + decode) within about 4 minutes of GPU
# time, the whole run within about 7.
QUICK_STAGE_BUDGETS = {"prefill": 180, "decode": 45, "memory": 45, "io": 150}
QUICK_BACKEND_BUDGETS = {"flex": 60}
QUICK_RUN_BUDGET = 480
QUICK_JOB_TIMEOUT = 90
FULL_JOB_TIMEOUT = 600


def _ints(text):
    return tuple(int(x) for x in text.split(",") if x.strip())


def _names(text):
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _pairs(items, what):
    table = {}
    for item in items or ():
        name, _, seconds = item.partition("=")
        if not seconds:
            raise SystemExit(f"{what}: expected NAME=SECONDS, got {item!r}")
        table[name.strip()] = float(seconds)
    return table


def build_parser():
    parser = argparse.ArgumentParser(prog="python3 -m bench.suite", description="flashpp benchmark suite")
    sub = parser.add_subparsers(dest="command")

    run = sub.add_parser("run", help="measure (the default command)")
    run.add_argument("--out", help="results folder (default bench/results/run-<date>)")
    run.add_argument("--preset", choices=("full", "default", "quick", "tiny"),
                     help="grid and repetitions (default: default on CUDA, tiny on the CPU)")
    run.add_argument("--quick", action="store_true", help="= --preset quick, with time budgets")
    run.add_argument("--stages", default=",".join(STAGES), help=f"comma list of {', '.join(STAGES)}")
    run.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    run.add_argument("--dry-run", action="store_true", help="synthetic numbers, no torch: tests the pipeline")
    run.add_argument("--seed", type=int, help="input seed (default: from the clock; printed)")
    grid = run.add_argument_group("grid (defaults from the preset)")
    grid.add_argument("--backends", help="prefill backends (comma list; see `backends`)")
    grid.add_argument("--decode-backends")
    grid.add_argument("--memory-backends")
    grid.add_argument("--ours-families", default="",
                      help="also run ours[F] for each F, with FLASHPP_KERNEL_FAMILY=F in its worker")
    grid.add_argument("--dtypes")
    grid.add_argument("--hdims")
    grid.add_argument("--seqlens")
    grid.add_argument("--tokens", type=int, help="batch * seqlen of the prefill grid")
    grid.add_argument("--hidden", type=int, help="heads * head_dim of the prefill grid")
    grid.add_argument("--causal", choices=("both", "yes", "no"))
    grid.add_argument("--passes", help="fwd,bwd")
    grid.add_argument("--decode-batches")
    grid.add_argument("--decode-cache")
    grid.add_argument("--decode-pages", help="0 = contiguous cache, else page sizes (e.g. 0,64)")
    grid.add_argument("--memory-seqlens")
    timing = run.add_argument_group("timing")
    timing.add_argument("--warmup", type=int)
    timing.add_argument("--reps", type=int)
    timing.add_argument("--l2", choices=("rotate", "flush", "warm"))
    timing.add_argument("--no-check", action="store_true", help="skip the correctness checks")
    timing.add_argument("--reference", default="ours",
                        help="backend the others are checked against (default ours)")
    timing.add_argument("--no-graphs", action="store_true", help="time decode eagerly, not as CUDA graphs")
    limits = run.add_argument_group("limits")
    limits.add_argument("--job-timeout", type=float, help="seconds one job may take before its worker is killed")
    limits.add_argument("--stage-budget", action="append", metavar="STAGE=S")
    limits.add_argument("--backend-budget", action="append", metavar="BACKEND=S",
                        help="seconds one backend may spend per stage (quick: flex=60)")
    limits.add_argument("--budget-s", type=float, help="seconds for the whole run")
    limits.add_argument("--no-seqlen-caps", action="store_true",
                        help="quick mode: time the materializing backends at every seqlen too")
    run.add_argument("--io-args", default="",
                     help='extra arguments for bench.io_report as one string: --io-args="--no-sweep --reps 5"')
    run.add_argument("--keep-check", action="store_true", help="keep the reference samples under check/")
    run.add_argument("--bundle", metavar="FILE.tar.gz",
                     help="also pack the results folder (without ncu reports) into one file, e.g. $OUT/bench.tar.gz")

    show = sub.add_parser("summary", help="print the summary of a results folder")
    show.add_argument("results")
    sub.add_parser("backends", help="list the backends the suite knows")
    return parser


def _grid_and_settings(args):
    name = "quick" if args.quick else args.preset or ("tiny" if args.device == "cpu" else "default")
    grid, settings, caps = config.preset(name)
    if args.no_seqlen_caps:
        caps = {}
    for field, value, parse in (("dtypes", args.dtypes, _names), ("hdims", args.hdims, _ints),
                                ("seqlens", args.seqlens, _ints), ("passes", args.passes, _names),
                                ("decode_batches", args.decode_batches, _ints),
                                ("decode_cache", args.decode_cache, _ints),
                                ("decode_pages", args.decode_pages, _ints),
                                ("memory_seqlens", args.memory_seqlens, _ints)):
        if value:
            setattr(grid, field, parse(value))
    if args.tokens:
        grid.tokens = args.tokens
    if args.hidden:
        grid.hidden = args.hidden
    if args.causal:
        grid.causal = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    if args.warmup is not None:
        settings.warmup = args.warmup
    if args.reps is not None:
        settings.reps = args.reps
    if args.l2:
        settings.l2 = args.l2
    settings.check = not args.no_check
    settings.graphs = not args.no_graphs
    settings.device = args.device
    settings.reference = args.reference
    return name, grid, settings, caps


def _backend_list(text, default, device, families):
    names = list(_names(text)) if text else [b for b in default if device.startswith("cuda") or b not in CUDA_ONLY]
    if "ours" in names:
        at = names.index("ours") + 1
        names[at:at] = [f"ours[{f}]" for f in families]
    for name in names:
        if not is_known(name):
            raise SystemExit(f"unknown backend {name!r}; known: {', '.join(ADAPTERS)}")
    return names


def cmd_backends():
    for name in ADAPTERS:
        print(f"{name:<22} {describe(name)}")
    print("ours[F]                flashpp with FLASHPP_KERNEL_FAMILY=F (--ours-families F)")
    return 0


def cmd_summary(path):
    print(summary.text(load(path)))
    return 0


def cmd_run(args):
    stages = _names(args.stages)
    for stage in stages:
        if stage not in STAGES:
            raise SystemExit(f"unknown stage {stage!r}; stages: {', '.join(STAGES)}")
    preset_name, grid, settings, caps = _grid_and_settings(args)
    families = _names(args.ours_families)
    prefill_backends = _backend_list(args.backends, DEFAULT_PREFILL, args.device, families)
    decode_backends = _backend_list(args.decode_backends, DEFAULT_DECODE, args.device, families)
    memory_backends = _backend_list(args.memory_backends, DEFAULT_MEMORY, args.device, ())
    seed = args.seed if args.seed is not None else int(time.time() * 1000) % (2**31 - 1)
    out = Path(args.out or REPO / "bench" / "results" / time.strftime("run-%Y%m%d-%H%M%S"))
    out.mkdir(parents=True, exist_ok=True)

    quick = preset_name == "quick"
    stage_budgets = dict(QUICK_STAGE_BUDGETS) if quick else {}
    stage_budgets.update(_pairs(args.stage_budget, "--stage-budget"))
    backend_budgets = dict(QUICK_BACKEND_BUDGETS) if quick else {}
    backend_budgets.update(_pairs(args.backend_budget, "--backend-budget"))
    job_timeout = args.job_timeout or (QUICK_JOB_TIMEOUT if quick else FULL_JOB_TIMEOUT)
    run_budget = Budget(args.budget_s if args.budget_s is not None else (QUICK_RUN_BUDGET if quick else None))

    meta = environment.collect({k: v for k, v in vars(args).items()}, seed, args.dry_run)
    meta.update(out=str(out), preset=preset_name, stages=list(stages), grid=vars(grid), settings=vars(settings),
                seqlen_caps=caps, stage_budgets=stage_budgets, backend_budgets=backend_budgets,
                job_timeout_s=job_timeout, device=args.device)

    recorder = Recorder(out, meta)
    progress = Progress(out / "progress.log")
    progress.note(f"flashpp bench: preset {preset_name}, seed {seed}, device {args.device}"
                  f"{', DRY RUN' if args.dry_run else ''}; results in {out}")
    pool = Pool(out, args.device, vars(settings), args.dry_run,
                # The library reads FLASHPP_CUDA_FORWARD_FAMILY (sm80 forces the FA2-class
                # forward); FLASHPP_KERNEL_FAMILY tells the worker which family to expect.
                {f"ours[{f}]": {"FLASHPP_KERNEL_FAMILY": f, "FLASHPP_CUDA_FORWARD_FAMILY": f} for f in families})

    def stage(name, jobs, presets=()):
        if name in stages:
            run_stage(name, interleave(jobs, settings.reference), pool, recorder, progress,
                      stage_budget=stage_budgets.get(name), presets=presets, job_timeout=job_timeout,
                      run_budget=run_budget, backend_budgets=backend_budgets)

    try:
        jobs, capped = config.prefill_jobs(grid, prefill_backends, seed, caps)
        stage("prefill", jobs, [(j, "skipped", why) for j, why in capped])
        stage("decode", config.decode_jobs(grid, decode_backends, seed))
        stage("memory", config.memory_jobs(grid, memory_backends, seed))
    finally:
        pool.close()
        meta["versions"] = environment.versions_from_workers(pool.environments)
        meta["unavailable"] = pool.unavailable
        recorder.save()
        recorder.write_csv()

    if "io" in stages:
        _io_stage(args, out, recorder, progress, quick, stage_budgets.get("io"), run_budget)
    if "plots" in stages:
        _plots_stage(out, progress)
    if not args.keep_check:
        shutil.rmtree(out / "check", ignore_errors=True)
    meta["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    recorder.save()
    report = summary.text(recorder.document())
    (out / "summary.txt").write_text(report + "\n")
    progress.close()
    if args.bundle:
        report += f"\nbundle: {bundle(out, args.bundle)} (tar -xzf it under bench/results/)"
    print("\n" + report, flush=True)
    return 0


def bundle(out, path):
    """One .tar.gz of the results folder, for machines that return few files.
    The raw ncu reports (large, and re-creatable) stay out."""
    import tarfile

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)

    def keep(info):
        return None if info.name.endswith(".ncu-rep") or "/check/" in info.name + "/" else info

    with tarfile.open(path, "w:gz") as tar:
        tar.add(out, arcname=out.name, filter=keep)
    return path


def _io_stage(args, out, recorder, progress, quick, budget, run_budget):
    from bench.io_report import report as io_report

    left = run_budget.left()
    if left is not None and left <= 0:
        recorder.extra["io"] = {"status": "skipped", "reason": "the run's time budget is used up"}
        progress.note("== io: skipped (run budget used up)")
        return
    limit = min([b for b in (budget, left) if b is not None], default=None)
    progress.note(f"== io: HBM traffic with Nsight Compute{f' (budget {limit:.0f} s)' if limit else ''}")
    try:
        extra = io_report.parse_args(args.io_args.split() + (["--quick"] if quick else [])
                                     + (["--dry-run"] if args.dry_run else []) + ["--device", args.device])
        doc = io_report.run(extra, out / "io", budget_s=limit, log=progress.note)
    except Exception as exc:  # the IO report must not lose the rest of the run
        doc = {"status": "error", "reason": f"{type(exc).__name__}: {exc}"[:600]}
        progress.note(f"io report failed: {doc['reason']}")
    recorder.extra["io"] = doc
    recorder.save()


def _plots_stage(out, progress):
    try:
        from bench.plots import figures

        made = figures.make_all(out / "results.json", out / "plots")
        progress.note(f"== plots: {len(made)} written to {out / 'plots'}")
    except Exception as exc:
        progress.note(f"plots failed: {type(exc).__name__}: {exc}")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("run", "summary", "backends", "-h", "--help"):
        argv.insert(0, "run")  # `python3 -m bench.suite --quick` means run
    args = build_parser().parse_args(argv)
    if args.command == "backends":
        return cmd_backends()
    if args.command == "summary":
        return cmd_summary(args.results)
    return cmd_run(args)
