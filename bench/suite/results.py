"""Result records and the files they go to.

A record is a job (what was asked) merged with the worker's answer (what
happened) and the derived figures (TFLOP/s, GB/s). results.json holds the
run's metadata and every record, rewritten every few seconds and at the end
of each stage, so a run that is killed still leaves what it measured;
<stage>.csv files are flat copies for spreadsheets.
"""

import csv
import json
import os
import time
from pathlib import Path

from .flops import DTYPE_BYTES, attention_flops, decode_kv_bytes, decode_total_bytes, gbps, tflops

STATUSES = ("ok", "unsupported", "unavailable", "oom", "error", "timeout", "crashed", "skipped")

CSV_COLUMNS = {
    "prefill": ["backend", "dtype", "batch", "heads", "heads_kv", "seqlen_q", "seqlen_k", "hdim", "hdim_v", "causal",
                "status", "fwd_ms", "fwd_tflops", "bwd_status", "bwd_ms", "bwd_tflops", "check_status", "check_err",
                "self_check_status", "input_sets", "first_call_s", "kernel", "reason"],
    "decode": ["backend", "dtype", "batch", "heads", "heads_kv", "cache_len", "hdim", "page_size", "status", "fwd_ms",
               "kv_gbps", "total_gbps", "graph", "check_status", "check_err", "input_sets", "kernel", "note",
               "reason"],
    "memory": ["backend", "dtype", "batch", "heads", "seqlen_q", "hdim", "status", "peak_bytes", "peak_gib",
               "input_bytes", "fwd_bwd_ms", "reason"],
}


def enrich(record):
    """Adds the derived figures to a record in place and returns it."""
    kind = record.get("kind")
    if record.get("status") != "ok":
        return record
    if kind == "prefill":
        for pass_name in ("fwd", "bwd"):
            ms = record.get(f"{pass_name}_ms")
            if ms:
                flops = attention_flops(pass_name, record["batch"], record["heads"], record["seqlen_q"],
                                        record["seqlen_k"], record["hdim"], record["hdim_v"], record["causal"])
                record[f"{pass_name}_flops"] = flops
                record[f"{pass_name}_tflops"] = tflops(flops, ms)
    elif kind == "decode":
        ms = record.get("fwd_ms")
        elem = DTYPE_BYTES[record["dtype"]]
        kv = decode_kv_bytes(record["batch"], record["cache_len"], record["heads_kv"], record["hdim"],
                             record["hdim_v"], elem)
        total = decode_total_bytes(record["batch"], record.get("seqlen_q", 1), record["cache_len"], record["heads"],
                                   record["heads_kv"], record["hdim"], record["hdim_v"], elem)
        record.update(kv_bytes=kv, total_bytes=total, kv_gbps=gbps(kv, ms), total_gbps=gbps(total, ms))
    elif kind == "memory" and record.get("peak_bytes") is not None:
        record["peak_gib"] = record["peak_bytes"] / (1 << 30)
    return record


def check_summary(record):
    """(status, worst error) of a record's correctness check."""
    check = record.get("check") or {}
    errs = check.get("err") or {}
    worst = max(errs.values()) if errs else None
    status = check.get("status", "")
    if record.get("finite") is False:
        status = "non-finite"
    return status, worst


def flat(record):
    """The CSV view of a record."""
    row = dict(record)
    row["check_status"], row["check_err"] = check_summary(record)
    row["self_check_status"] = (record.get("self_check") or {}).get("status", "")
    return row


def write_json(path, data):
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=False, default=str)
    os.replace(tmp, path)


SAVE_EVERY_S = 2.0


class Recorder:
    def __init__(self, out_dir, meta):
        self.out = Path(out_dir)
        self.meta = meta
        self.records = {"prefill": [], "decode": [], "memory": []}
        self.extra = {}
        self.saved = 0.0

    def add(self, record):
        enrich(record)
        self.records.setdefault(record["kind"], []).append(record)
        if time.monotonic() - self.saved >= SAVE_EVERY_S:
            self.save()
        return record

    def document(self):
        return {"meta": self.meta, **self.records, **self.extra}

    def save(self):
        write_json(self.out / "results.json", self.document())
        self.saved = time.monotonic()

    def write_csv(self):
        for kind, rows in self.records.items():
            if not rows:
                continue
            columns = CSV_COLUMNS.get(kind) or sorted({k for r in rows for k in r})
            with open(self.out / f"{kind}.csv", "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
                writer.writeheader()
                for record in rows:
                    writer.writerow({k: _cell(v) for k, v in flat(record).items()})


def _cell(value):
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return value


def load(path):
    """results.json of a run directory (or the file itself)."""
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    with open(path) as f:
        return json.load(f)
