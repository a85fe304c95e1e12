"""PNG figures from a results.json (matplotlib, no display needed):

- prefill_<pass>_<mask>.png: TFLOP/s per sequence length, one panel per
  head dim, one bar per backend (the shape of the FlashAttention README
  figures), for fwd, bwd and fwd + bwd, causal and not;
- decode_bandwidth.png: GB/s of KV cache read against cache length, one
  panel per batch size;
- memory.png: peak memory of forward + backward against sequence length,
  standard attention until it runs out of memory, ours to 128K;
- io_gpt2.png and io_sweep.png: HBM traffic measured with Nsight Compute
  beside the analytic model.

    python3 -m bench.plots RESULTS_DIR [--out DIR]
"""

from pathlib import Path

from bench.suite.backends import is_ours
from bench.suite.flops import attention_flops, tflops
from bench.suite.summary import PEER_PRIORITY

OURS_COLOR = "#c0392b"
PEER_COLORS = ["#2c7fb8", "#7fcdbb", "#fdae61", "#756bb1", "#41ab5d", "#969696", "#f768a1", "#8c6d31", "#525252"]
# Measured earlier on this H200: device-to-device copy, bytes read + written.
COPY_CEILING_GBPS = 4266.0


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _backends(records):
    names = {r["backend"] for r in records}
    ours = sorted(n for n in names if is_ours(n))
    peers = sorted((n for n in names if not is_ours(n)),
                   key=lambda b: (PEER_PRIORITY.index(b) if b in PEER_PRIORITY else 99, b))
    return ours + peers


def _colors(backends):
    colors, i = {}, 0
    for b in backends:
        if b == "ours":
            colors[b] = OURS_COLOR
        else:
            colors[b] = PEER_COLORS[i % len(PEER_COLORS)]
            i += 1
    return colors


def _stamp(fig, meta):
    gpu = (meta.get("versions") or {}).get("gpu") or ", ".join(g.get("name", "") for g in meta.get("gpus", []))
    commit = meta.get("describe") or meta.get("sha", "")[:12]
    text = f"{gpu or meta.get('device', '')}  {meta.get('date', '')[:10]}  {commit}"
    fig.text(0.99, 0.005, text, ha="right", va="bottom", fontsize=7, color="#555555")
    if meta.get("dry_run"):
        fig.text(0.5, 0.5, "DRY RUN - synthetic numbers", ha="center", va="center", fontsize=30, color="#e74c3c",
                 alpha=0.25, rotation=20)


def _short(value):
    return f"{value:.0f}" if value >= 10 else f"{value:.2g}"


def _seq_label(n):
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def _prefill_value(r, pass_name):
    if r.get("status") != "ok":
        return None
    if pass_name != "fwd_bwd":
        return r.get(f"{pass_name}_tflops")
    if not r.get("fwd_ms") or not r.get("bwd_ms"):
        return None
    flops = attention_flops("fwd_bwd", r["batch"], r["heads"], r["seqlen_q"], r["seqlen_k"], r["hdim"], r["hdim_v"],
                            r["causal"])
    return tflops(flops, r["fwd_ms"] + r["bwd_ms"])


def prefill(doc, out_dir, dtype="bf16"):
    plt = _plt()
    records = [r for r in doc.get("prefill", []) if r["dtype"] == dtype]
    if not records:
        return []
    made = []
    hdims = sorted({r["hdim"] for r in records})
    titles = {"fwd": "Forward", "bwd": "Backward", "fwd_bwd": "Forward + backward"}
    for pass_name in ("fwd", "bwd", "fwd_bwd"):
        for causal in (False, True):
            subset = [r for r in records if bool(r["causal"]) == causal]
            have = [r for r in subset if _prefill_value(r, pass_name) is not None]
            if not have:
                continue
            backends = _backends(have)
            colors = _colors(backends)
            fig, axes = plt.subplots(1, len(hdims), figsize=(6.2 * len(hdims), 4.6), squeeze=False)
            for ax, hdim in zip(axes[0], hdims):
                rows = [r for r in have if r["hdim"] == hdim]
                seqlens = sorted({r["seqlen_q"] for r in rows})
                width = 0.8 / max(1, len(backends))
                for j, backend in enumerate(backends):
                    values = {r["seqlen_q"]: _prefill_value(r, pass_name) for r in rows if r["backend"] == backend}
                    xs = [i + (j - (len(backends) - 1) / 2) * width for i, n in enumerate(seqlens) if n in values]
                    ys = [values[n] for n in seqlens if n in values]
                    bars = ax.bar(xs, ys, width, label=backend, color=colors[backend],
                                  edgecolor="black" if is_ours(backend) else "none", linewidth=0.6)
                    if len(backends) <= 5:
                        ax.bar_label(bars, labels=[_short(y) for y in ys], fontsize=6, padding=1)
                ax.set_xticks(range(len(seqlens)), [_seq_label(n) for n in seqlens])
                ax.set_xlabel("sequence length")
                ax.set_title(f"head dim {hdim}")
                ax.grid(axis="y", alpha=0.3)
                ax.set_axisbelow(True)
            axes[0][0].set_ylabel("TFLOP/s")
            # Proxy handles: the last panel may lack a backend (e.g. one skipped at that
            # head dim), and an empty bar container would show the wrong colour.
            from matplotlib.patches import Patch
            handles = [Patch(facecolor=colors[b], edgecolor="black" if is_ours(b) else "none", label=b)
                       for b in backends]
            axes[0][-1].legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
            mask = "causal" if causal else "no mask"
            first = subset[0]
            fig.suptitle(f"{titles[pass_name]} speed, {dtype}, {mask} (batch x seqlen = "
                         f"{first['batch'] * first['seqlen_q']}, hidden {first['heads'] * first['hdim']})")
            _stamp(fig, doc.get("meta", {}))
            fig.tight_layout(rect=(0, 0.02, 1, 0.95))
            path = Path(out_dir) / f"prefill_{pass_name}_{'causal' if causal else 'full'}.png"
            fig.savefig(path, dpi=130)
            plt.close(fig)
            made.append(path)
    return made


def decode(doc, out_dir):
    plt = _plt()
    records = [r for r in doc.get("decode", []) if r.get("status") == "ok" and r.get("kv_gbps")]
    if not records:
        return []
    batches = sorted({r["batch"] for r in records})
    series = sorted({(r["backend"], r.get("page_size", 0)) for r in records},
                    key=lambda s: (not is_ours(s[0]), s[1], s[0]))
    colors = _colors(_backends(records))
    fig, axes = plt.subplots(1, len(batches), figsize=(5.2 * len(batches), 4.2), squeeze=False, sharey=True)
    for ax, batch in zip(axes[0], batches):
        for backend, page in series:
            rows = sorted((r for r in records if r["batch"] == batch and r["backend"] == backend
                           and r.get("page_size", 0) == page), key=lambda r: r["cache_len"])
            if not rows:
                continue
            label = backend + (f" (page {page})" if page else "")
            ax.plot([r["cache_len"] for r in rows], [r["kv_gbps"] for r in rows], marker="o",
                    linestyle="--" if page else "-", color=colors[backend], label=label,
                    linewidth=2.2 if is_ours(backend) else 1.2, zorder=3 if is_ours(backend) else 2)
        ax.axhline(COPY_CEILING_GBPS, color="#555555", linestyle=":", linewidth=1)
        ax.text(0.01, COPY_CEILING_GBPS, "device copy (read + write)", fontsize=7, va="bottom", color="#555555",
                transform=ax.get_yaxis_transform())
        ax.set_xscale("log", base=2)
        lengths = sorted({r["cache_len"] for r in records})
        ax.set_xticks(lengths, [_seq_label(n) for n in lengths])
        ax.set_ylim(0, COPY_CEILING_GBPS * 1.12)
        ax.set_xlabel("KV cache length (tokens)")
        ax.set_title(f"batch {batch}")
        ax.grid(alpha=0.3)
    first = records[0]
    axes[0][0].set_ylabel("GB/s of KV cache read")
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(f"Decoding, 1 query token, {first['heads']} query / {first['heads_kv']} KV heads, "
                 f"d = {first['hdim']}, {first['dtype']}")
    _stamp(fig, doc.get("meta", {}))
    fig.tight_layout(rect=(0, 0.02, 1, 0.95))
    path = Path(out_dir) / "decode_bandwidth.png"
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return [path]


def memory(doc, out_dir):
    plt = _plt()
    records = doc.get("memory", [])
    if not any(r.get("status") == "ok" for r in records):
        return []
    fig, ax = plt.subplots(figsize=(7, 4.6))
    backends = _backends(records)
    colors = _colors(backends)
    for backend in backends:
        rows = sorted((r for r in records if r["backend"] == backend), key=lambda r: r["seqlen_q"])
        ok = [r for r in rows if r.get("status") == "ok"]
        if ok:
            ax.plot([r["seqlen_q"] for r in ok], [r["peak_bytes"] / (1 << 30) for r in ok], marker="o",
                    color=colors[backend], label=backend, linewidth=2.2 if is_ours(backend) else 1.2,
                    zorder=3 if is_ours(backend) else 2)
        oom = [r for r in rows if r.get("status") == "oom"]
        if oom and ok:
            n = oom[0]["seqlen_q"]
            ax.scatter([n], [ok[-1]["peak_bytes"] / (1 << 30)], marker="x", s=80, color=colors[backend])
            ax.annotate(f"{backend}: out of memory", (n, ok[-1]["peak_bytes"] / (1 << 30)), fontsize=7,
                        textcoords="offset points", xytext=(-70, -16), color=colors[backend])
    mem = (doc.get("meta", {}).get("versions") or {}).get("memory_bytes")
    if mem:
        ax.axhline(mem / (1 << 30), color="#555555", linestyle=":", linewidth=1)
        ax.text(0.01, mem / (1 << 30), "GPU memory", fontsize=7, va="bottom", color="#555555",
                transform=ax.get_yaxis_transform())
    ax.set_xscale("log", base=2)
    lengths = sorted({r["seqlen_q"] for r in records})
    ax.set_xticks(lengths, [_seq_label(n) for n in lengths])
    ax.set_yscale("log")
    ax.set_xlabel("sequence length")
    ax.set_ylabel("peak memory (GiB)")
    first = records[0]
    ax.set_title(f"Forward + backward peak memory, batch {first['batch']}, {first['heads']} heads, "
                 f"d = {first['hdim']}, {first['dtype']}")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    _stamp(fig, doc.get("meta", {}))
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    path = Path(out_dir) / "memory.png"
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return [path]


def io(doc, out_dir):
    plt = _plt()
    report = doc.get("io") or {}
    made = []
    gpt2 = [r for r in report.get("gpt2", []) if r.get("status") == "ok" and r.get("hbm_gb")]
    if gpt2:
        fig, ax = plt.subplots(figsize=(7.5, 4.2))
        names = [r["backend"] for r in gpt2]
        xs = range(len(gpt2))
        ax.bar([x - 0.2 for x in xs], [r["hbm_gb"] for r in gpt2], 0.4, label="measured (ncu)",
               color=[OURS_COLOR if is_ours(n) else "#2c7fb8" for n in names])
        ax.bar([x + 0.2 for x in xs], [r["model_gb"] for r in gpt2], 0.4, label="IO model", color="#bdbdbd")
        for x, r in zip(xs, gpt2):
            ax.text(x - 0.2, r["hbm_gb"], f"{r['hbm_gb']:.2f}", ha="center", va="bottom", fontsize=7)
        ax.axhline(gpt2[0]["compulsory_gb"], color="#555555", linestyle=":", linewidth=1)
        ax.text(0.01, gpt2[0]["compulsory_gb"], "compulsory: inputs and outputs once", fontsize=7, va="bottom",
                color="#555555", transform=ax.get_yaxis_transform())
        ax.set_xticks(list(xs), names, rotation=15)
        ax.set_yscale("log")
        ax.set_ylabel("HBM read + write (GB)")
        shape = report.get("gpt2_shape", {})
        ax.set_title(f"One fwd + bwd, GPT-2 medium attention (B={shape.get('batch')}, H={shape.get('heads')}, "
                     f"N={shape.get('seqlen')}, d={shape.get('hdim')})")
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3, which="both")
        _stamp(fig, {**doc.get("meta", {}), "dry_run": doc.get("meta", {}).get("dry_run") or report.get("dry_run")})
        fig.tight_layout(rect=(0, 0.02, 1, 1))
        path = Path(out_dir) / "io_gpt2.png"
        fig.savefig(path, dpi=130)
        plt.close(fig)
        made.append(path)
    sweep = [r for r in report.get("sweep", []) if r.get("status") == "ok" and r.get("hbm_gb")]
    if sweep:
        fig, ax = plt.subplots(figsize=(7, 4.4))
        backends = _backends(sweep)
        colors = _colors(backends)
        for backend in backends:
            rows = sorted((r for r in sweep if r["backend"] == backend), key=lambda r: r["seqlen"])
            ax.plot([r["seqlen"] for r in rows], [r["hbm_gb"] for r in rows], marker="o", color=colors[backend],
                    label=f"{backend} measured", linewidth=2)
        rows = sorted({r["seqlen"]: r for r in sweep}.values(), key=lambda r: r["seqlen"])
        ns = [r["seqlen"] for r in rows]
        for key, label, style in (("standard_gb", "standard model  Θ(Nd + N²)", "--"),
                                  ("tiled_gb", "tiled model, no L2 reuse", "-."),
                                  ("compulsory_gb", "compulsory (inputs + outputs once)", ":")):
            ax.plot(ns, [r[key] for r in rows], linestyle=style, color="#555555", label=label, linewidth=1)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns, [_seq_label(n) for n in ns])
        ax.set_yscale("log")
        ax.set_xlabel("sequence length (batch x N constant)")
        ax.set_ylabel("HBM read + write (GB)")
        ax.set_title("HBM traffic of one fwd + bwd, 16 heads, d = 64")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
        _stamp(fig, {**doc.get("meta", {}), "dry_run": doc.get("meta", {}).get("dry_run") or report.get("dry_run")})
        fig.tight_layout(rect=(0, 0.02, 1, 1))
        path = Path(out_dir) / "io_sweep.png"
        fig.savefig(path, dpi=130)
        plt.close(fig)
        made.append(path)
    return made


def make_all(results_path, out_dir):
    """Every figure the results allow; returns the paths written."""
    from bench.suite.results import load

    doc = load(results_path)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    made = []
    for figure in (prefill, decode, memory, io):
        made += figure(doc, out_dir)
    return made
