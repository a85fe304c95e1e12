"""Progress display: one line per finished job (count, elapsed, estimate of
what is left, the backend, the problem, its figures and its check), to the
terminal and to <out>/progress.log."""

import sys
import time


def _clock(seconds):
    seconds = int(max(0, seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


def problem_label(r):
    if r["kind"] == "prefill":
        return (f"{r['dtype']} d{r['hdim']} N{r['seqlen_q']} b{r['batch']} h{r['heads']}"
                f"{' causal' if r['causal'] else ''}")
    if r["kind"] == "decode":
        layout = f" page{r['page_size']}" if r.get("page_size") else ""
        return f"{r['dtype']} b{r['batch']} kv{r['cache_len']} h{r['heads']}/{r['heads_kv']} d{r['hdim']}{layout}"
    return f"{r['dtype']} N{r['seqlen_q']} h{r['heads']} d{r['hdim']}"


def num(x):
    """A figure with about four significant digits, however small."""
    if x is None:
        return "-"
    return f"{x:.1f}" if abs(x) >= 100 else f"{x:.4g}"


def figures(r):
    if r["status"] != "ok":
        return f"{r['status'].upper()}: {str(r.get('reason', ''))[:110]}"
    parts = []
    if r["kind"] == "prefill":
        for p in ("fwd", "bwd"):
            if r.get(f"{p}_tflops") is not None:
                parts.append(f"{p} {num(r[f'{p}_ms'])} ms {num(r[f'{p}_tflops']):>6} TF/s")
            elif r.get(f"{p}_status"):
                parts.append(f"{p} {r[f'{p}_status']}")
    elif r["kind"] == "decode":
        mode = "" if r.get("graph") else " (eager)"
        parts.append(f"{num(r['fwd_ms'] * 1e3):>8} us {num(r['kv_gbps']):>7} GB/s{mode}")
    else:
        parts.append(f"peak {r['peak_bytes'] / (1 << 30):7.2f} GiB")
    check = (r.get("check") or {}).get("status")
    if check:
        parts.append(f"check {check}")
    if r.get("finite") is False:
        parts.append("NON-FINITE")
    own = (r.get("self_check") or {}).get("status")
    if own:
        parts.append(f"self {own}")
    return "  ".join(parts)


class Progress:
    def __init__(self, log_path=None, stream=None):
        self.stream = stream or sys.stdout
        self.log = open(log_path, "a") if log_path else None
        self.stage = ""
        self.total = self.count = 0
        self.started = time.monotonic()

    def _emit(self, line):
        print(line, file=self.stream, flush=True)
        if self.log:
            self.log.write(line + "\n")
            self.log.flush()

    def begin(self, stage, total):
        self.stage, self.total, self.count = stage, total, 0
        self.started = time.monotonic()
        self._emit(f"== {stage}: {total} jobs")

    def done(self, record):
        self.count += 1
        elapsed = time.monotonic() - self.started
        left = elapsed / self.count * (self.total - self.count)
        width = len(str(self.total))
        self._emit(f"[{self.stage} {self.count:>{width}}/{self.total} {_clock(elapsed)} ~{_clock(left)} left] "
                   f"{record['backend']:<20} {problem_label(record):<34} {figures(record)}")

    def end(self, stage):
        self._emit(f"== {stage} done in {_clock(time.monotonic() - self.started)}")

    def note(self, line):
        self._emit(line)

    def close(self):
        if self.log:
            self.log.close()
