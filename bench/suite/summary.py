"""Tables made from a results document: the summary printed at the end of a
run (`python3 -m bench.suite summary DIR` prints it again) and the tables
of docs/performance.md. Each builder returns (headers, rows); render()
writes them as aligned text or as Markdown."""

from .backends import is_ours
from .results import STATUSES, check_summary

PEER_PRIORITY = ("sdpa_cudnn", "flash_attn_interface", "sdpa_flash", "flash_attn", "flashinfer", "flex",
                 "sdpa_efficient", "sdpa_math", "standard")


def _fmt(value, digits=1):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}" if abs(value) >= 10 else f"{value:.3g}"
    return str(value)


def render(headers, rows, markdown=False):
    cells = [[_fmt(c) for c in row] for row in rows]
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in cells]
        return "\n".join(lines)
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
              for row in cells]
    return "\n".join(lines)


def _ok(records):
    return [r for r in records if r.get("status") == "ok"]


def _peers(records):
    return sorted({r["backend"] for r in records if not is_ours(r["backend"])},
                  key=lambda b: (PEER_PRIORITY.index(b) if b in PEER_PRIORITY else 99, b))


def _problem(r):
    if r["kind"] == "prefill":
        return (r["dtype"], r["hdim"], bool(r["causal"]), r["seqlen_q"])
    return (r["dtype"], r.get("page_size", 0), r["cache_len"], r["batch"])


def _index(records, value_key):
    table = {}
    for r in _ok(records):
        if r.get(value_key) is not None:
            table[(_problem(r), r["backend"])] = r[value_key]
    return table


def _best(table, problem, peers):
    best = None
    for peer in peers:
        value = table.get((problem, peer))
        if value is not None and (best is None or value > best[1]):
            best = (peer, value)
    return best


def _ratio(ours, best):
    """'0.87' for ours over the best peer, None when either is missing."""
    if ours is None or best is None or not best[1]:
        return None
    return f"{ours / best[1]:.2f}"


def prefill_headline(doc, ours="ours"):
    """Per problem: ours fwd/bwd TFLOP/s beside the fastest same-run peer."""
    records = doc.get("prefill", [])
    peers = _peers(records)
    fwd, bwd = _index(records, "fwd_tflops"), _index(records, "bwd_tflops")
    problems = sorted({_problem(r) for r in records})
    headers = ["dtype", "hdim", "N", "causal", "ours fwd", "best peer fwd", "ratio", "ours bwd", "best peer bwd",
               "ratio"]
    rows = []
    for p in problems:
        bf, bb = _best(fwd, p, peers), _best(bwd, p, peers)
        of, ob = fwd.get((p, ours)), bwd.get((p, ours))
        if of is None and bf is None:
            continue
        rows.append([p[0], p[1], p[3], "yes" if p[2] else "no", of,
                     f"{_fmt(bf[1])} ({bf[0]})" if bf else None, _ratio(of, bf), ob,
                     f"{_fmt(bb[1])} ({bb[0]})" if bb else None, _ratio(ob, bb)])
    return headers, rows


def prefill_full(doc, hdim, causal, pass_name, dtype="bf16"):
    """TFLOP/s of every backend (columns) per seqlen (rows)."""
    records = [r for r in doc.get("prefill", []) if r["hdim"] == hdim and bool(r["causal"]) == causal
               and r["dtype"] == dtype]
    backends = [b for b in _ordered_backends(records)]
    table = _index(records, f"{pass_name}_tflops")
    status = {(_problem(r), r["backend"]): r for r in records}
    seqlens = sorted({r["seqlen_q"] for r in records})
    rows = []
    for n in seqlens:
        p = (dtype, hdim, causal, n)
        rows.append([n] + [_cell_or_status(table, status, p, b, pass_name) for b in backends])
    return ["N"] + backends, rows


def _cell_or_status(table, status, problem, backend, pass_name):
    value = table.get((problem, backend))
    if value is not None:
        return value
    r = status.get((problem, backend))
    if r is None:
        return None
    if r.get("status") == "ok" and r.get(f"{pass_name}_status"):
        return r[f"{pass_name}_status"]
    return r.get("status") if r.get("status") != "ok" else None


def _ordered_backends(records):
    names = {r["backend"] for r in records}
    ours = sorted(b for b in names if is_ours(b))
    return ours + _peers([r for r in records if not is_ours(r["backend"])])


def decode_headline(doc, ours="ours"):
    records = doc.get("decode", [])
    peers = _peers(records)
    table = _index(records, "kv_gbps")
    headers = ["dtype", "page", "cache", "batch", "ours GB/s", "best peer GB/s", "ratio"]
    rows = []
    for p in sorted({_problem(r) for r in records}):
        best, value = _best(table, p, peers), table.get((p, ours))
        if value is None and best is None:
            continue
        rows.append([p[0], p[1] or "-", p[2], p[3], value, f"{_fmt(best[1], 0)} ({best[0]})" if best else None,
                     _ratio(value, best)])
    return headers, rows


def decode_full(doc, page_size=0, dtype="bf16"):
    records = [r for r in doc.get("decode", []) if r.get("page_size", 0) == page_size and r["dtype"] == dtype]
    backends = _ordered_backends(records)
    table = _index(records, "kv_gbps")
    status = {(_problem(r), r["backend"]): r for r in records}
    rows = []
    for p in sorted({_problem(r) for r in records}):
        rows.append([p[2], p[3]] + [_cell_or_status(table, status, p, b, "fwd") for b in backends])
    return ["cache", "batch"] + backends, rows


def memory_table(doc):
    records = doc.get("memory", [])
    backends = _ordered_backends(records)
    by = {(r["seqlen_q"], r["backend"]): r for r in records}
    rows = []
    for n in sorted({r["seqlen_q"] for r in records}):
        row = [n]
        for b in backends:
            r = by.get((n, b))
            if r is None:
                row.append(None)
            elif r.get("status") == "ok":
                row.append(f"{r['peak_bytes'] / (1 << 30):.2f}")
            else:
                row.append("OOM" if r.get("status") == "oom" else r.get("status"))
        rows.append(row)
    return ["N"] + [f"{b} GiB" for b in backends], rows


def status_table(doc):
    counts = {}
    for kind in ("prefill", "decode", "memory"):
        for r in doc.get(kind, []):
            row = counts.setdefault(r["backend"], {s: 0 for s in STATUSES + ("check fail",)})
            row[r.get("status", "error")] = row.get(r.get("status", "error"), 0) + 1
            status, _ = check_summary(r)
            if status in ("fail", "non-finite"):
                row["check fail"] += 1
    headers = ["backend"] + list(STATUSES) + ["check fail"]
    return headers, [[b] + [c[s] for s in headers[1:]] for b, c in sorted(counts.items())]


def problems(doc, limit=25, width=140):
    """Failures worth a look: errors, timeouts, crashes, failed checks."""
    rows = []
    for kind in ("prefill", "decode", "memory"):
        for r in doc.get(kind, []):
            status, worst = check_summary(r)
            own = (r.get("self_check") or {}).get("status")
            if r.get("status") in ("error", "timeout", "crashed"):
                rows.append([r["backend"], r["key"], r["status"], str(r.get("reason", ""))[:width]])
            elif status in ("fail", "non-finite"):
                rows.append([r["backend"], r["key"], f"check {status}", f"max rel err {worst}"])
            elif own == "fail":
                rows.append([r["backend"], r["key"], "self-check fail", str(r["self_check"].get("err"))[:width]])
    return ["backend", "problem", "status", "reason"], rows[:limit]


def io_table(doc):
    io = doc.get("io") or {}
    rows = []
    for r in io.get("gpt2", []):
        rows.append([r["backend"], r.get("gflops"), r.get("hbm_gb"), r.get("runtime_ms"), r.get("model_gb"),
                     r.get("status", "ok")])
    return ["backend", "GFLOPs", "HBM GB (ncu)", "runtime ms", "IO model GB", "status"], rows


def text(doc):
    """The whole summary as text (printed last by a run)."""
    meta = doc.get("meta", {})
    parts = [f"flashpp benchmark summary  {meta.get('date', '')}  {meta.get('describe') or meta.get('sha', '')}  "
             f"{(meta.get('versions') or {}).get('gpu') or meta.get('device', '')}"
             f"{'  [DRY RUN: synthetic numbers]' if meta.get('dry_run') else ''}"]
    # Most important last: a reader (or a tool keeping the tail of the output)
    # sees the statuses and problems first.
    sections = [("Prefill TFLOP/s: ours vs the fastest peer of this run", prefill_headline(doc)),
                ("Decode GB/s of KV cache read", decode_headline(doc)), ("Peak memory, fwd + bwd", memory_table(doc)),
                ("IO, GPT-2 medium attention fwd + bwd", io_table(doc)), ("Status per backend", status_table(doc)),
                ("Problems (first 12; all in results.json)", problems(doc, limit=12, width=100))]
    for title, (headers, rows) in sections:
        if rows:
            parts.append(f"\n{title}\n{render(headers, rows)}")
    if meta.get("out"):
        parts.append(f"\nresults: {meta['out']}/results.json (+ *.csv, plots/, logs/)")
    return "\n".join(parts)
