#!/usr/bin/env python3
"""Times PyTorch's SDPA backends (FlashAttention-2 and cuDNN) on the configurations
flashpp's CUDA benchmark uses, in the same run, and prints one table beside
flashpp's numbers (--ours: the JSON written by flashpp_cuda_bench).

bf16, batch * seqlen = 16K, hidden 2048 (heads = 2048 / hdim); FLOPs: forward
4 * B * H * N^2 * d (halved when causal), backward 2.5x forward. CUDA events,
median of repeated calls after warm-up.
"""
import argparse
import json
import sys

CONFIGS = [(64, 2048, False), (64, 16384, False), (128, 1024, False), (128, 4096, False),
           (128, 16384, False), (128, 16384, True), (256, 16384, False)]
# flashpp_cuda_bench --grid: hdim 64/128/256 x causal or not x N 512..16K.
GRID = [(d, 512 << i, c) for d in (64, 128, 256) for c in (False, True) for i in range(6)]


COOL_MS = 0  # --cool-ms: idle before each timed pass, as flashpp_cuda_bench --cool-ms


def median_ms(fn, reps):
    import time
    import torch
    if COOL_MS > 0:
        torch.cuda.synchronize()
        time.sleep(COOL_MS / 1000)
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def bench_peers(reps, quick, grid=False):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = {"torch-flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    rows = []
    configs = GRID if grid else [(128, 4096, False)] if quick else CONFIGS
    for d, n, causal in configs:
        b, h = 16384 // n, 2048 // d
        q, k, v, g = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        for t in (q, k, v):
            t.requires_grad_(True)
        flops = 4.0 * b * h * n * n * d * (0.5 if causal else 1.0)
        for name, backend in backends.items():
            row = {"impl": name, "hdim": d, "seqlen": n, "batch": b, "heads": h, "causal": causal}
            try:
                with sdpa_kernel(backend):
                    fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    row["fwd_ms"] = median_ms(fwd, reps)
                    out = fwd()
                    bwd = lambda: torch.autograd.grad(out, (q, k, v), g, retain_graph=True)
                    row["bwd_ms"] = median_ms(bwd, reps)
                row["fwd_tflops"] = flops / (row["fwd_ms"] * 1e-3) / 1e12
                row["bwd_tflops"] = 2.5 * flops / (row["bwd_ms"] * 1e-3) / 1e12
            except Exception as e:  # a backend may refuse a config (e.g. hdim 256)
                row["error"] = str(e).splitlines()[0][:120]
            rows.append(row)
        del q, k, v, g
        torch.cuda.empty_cache()
    return rows


def table(rows):
    key = lambda r: (r["hdim"], r["seqlen"], r["causal"])
    impls = ["flashpp", "torch-flash", "cudnn"]
    by = {(key(r), r["impl"]): r for r in rows}
    lines = ["| hdim | N | causal | " + " | ".join(f"{i} fwd/bwd TF/s" for i in impls) + " | flashpp/torch-flash fwd, bwd |",
             "|---|---|---|" + "---|" * (len(impls) + 1)]
    for k in sorted({key(r) for r in rows}):
        cells = []
        for i in impls:
            r = by.get((k, i))
            if r is None or "fwd_tflops" not in r:
                cells.append("-" if r is None else "n/a")
            else:
                cells.append(f"{r['fwd_tflops']:.0f} / {r['bwd_tflops']:.0f}")
        ours, peer = by.get((k, "flashpp")), by.get((k, "torch-flash"))
        ratio = "-"
        if ours and peer and "fwd_tflops" in peer:
            ratio = f"{ours['fwd_tflops'] / peer['fwd_tflops']:.2f}, {ours['bwd_tflops'] / peer['bwd_tflops']:.2f}"
        lines.append(f"| {k[0]} | {k[1]} | {'yes' if k[2] else 'no'} | " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(lines)


def grid_table(rows):
    """Per config: our forward (Hopper family on sm90) over cuDNN's and torch flash's,
    our FA2-class forward, our backward and our FA2-class backward over torch flash's (FA2).
    (The FA2-class backward is the default one where no Hopper kernel takes the call.)"""
    key = lambda r: (r["hdim"], r["seqlen"], r["causal"])
    by = {(key(r), r["impl"]): r for r in rows}
    tf = lambda r, f: r.get(f) if r and r.get(f) else None
    fmt = lambda x: "-" if x is None else f"{x:.0f}"
    ratio = lambda a, b: "-" if a is None or b is None else f"{a / b:.2f}"
    lines = ["| hdim | causal | N | ours fwd | cudnn fwd | flash fwd | fwd / cudnn | fwd / flash | "
             "ours FA2-class fwd / flash | ours bwd | cudnn bwd | flash bwd | bwd / flash | "
             "ours FA2-class bwd / flash |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for k in sorted({key(r) for r in rows}, key=lambda k: (k[0], k[2], k[1])):
        o, c, f = (by.get((k, i)) for i in ("flashpp", "cudnn", "torch-flash"))
        of, cf, ff = tf(o, "fwd_tflops"), tf(c, "fwd_tflops"), tf(f, "fwd_tflops")
        o2, ob, cb, fb = tf(o, "fwd_fa2_tflops"), tf(o, "bwd_tflops"), tf(c, "bwd_tflops"), tf(f, "bwd_tflops")
        lines.append(f"| {k[0]} | {'yes' if k[2] else 'no'} | {k[1]} | {fmt(of)} | {fmt(cf)} | {fmt(ff)} | "
                     f"{ratio(of, cf)} | {ratio(of, ff)} | {ratio(o2, ff)} | {fmt(ob)} | {fmt(cb)} | {fmt(fb)} | "
                     f"{ratio(ob, fb)} | {ratio(tf(o, 'bwd_fa2_tflops'), fb)} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="write the peers' numbers here")
    ap.add_argument("--ours", help="flashpp_cuda_bench JSON to show beside them")
    ap.add_argument("--table", help="write the combined table here")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--cool-ms", type=int, default=0, help="idle before each timed pass (milliseconds)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--grid", action="store_true", help="the full grid of flashpp_cuda_bench --grid")
    ap.add_argument("--no-peers", action="store_true", help="only show --ours")
    args = ap.parse_args()
    global COOL_MS
    COOL_MS = args.cool_ms
    rows = []
    try:
        if not args.no_peers:
            import torch
            if not torch.cuda.is_available():
                raise RuntimeError("torch sees no GPU")
            rows = bench_peers(args.reps, args.quick, args.grid)
            print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")
    except Exception as e:
        print(f"peers skipped: {e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.ours:
        try:
            with open(args.ours) as f:
                rows = json.load(f) + rows
        except (OSError, ValueError) as e:
            print(f"no flashpp numbers: {e}")
    t = (grid_table(rows) if args.grid else table(rows)) if rows else "(no benchmark numbers)"
    if args.table:
        with open(args.table, "w") as f:
            f.write(t + "\n")
    print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
