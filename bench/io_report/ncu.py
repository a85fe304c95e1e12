"""Nsight Compute: the command that profiles the driver, and the reading of
its report into bytes read / written per kernel.

The driver brackets its one measured forward + backward with
cudaProfilerStart/Stop (and an NVTX range), and ncu runs with
--profile-from-start off, so warm-up, input creation and autotuning are not
counted. Clocks are left alone (--clock-control none) so the kernels run as
they do outside the profiler.
"""

import csv
import io
import os
import shutil
import subprocess

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
UNIT_SCALE = {"byte": 1, "bytes": 1, "b": 1, "kbyte": 1e3, "kb": 1e3, "mbyte": 1e6, "mb": 1e6, "gbyte": 1e9,
              "gb": 1e9, "tbyte": 1e12, "kibyte": 1024, "mibyte": 1024**2, "gibyte": 1024**3}


def find_ncu():
    """Path of ncu, or None."""
    found = shutil.which("ncu")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda", "/opt/nvidia/nsight-compute"):
        if root:
            for candidate in (os.path.join(root, "bin", "ncu"), os.path.join(root, "ncu")):
                if os.access(candidate, os.X_OK):
                    return candidate
    return None


def version(ncu):
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def profile_command(ncu, report_path, app, cache_control="all"):
    """ncu command line that writes report_path(.ncu-rep) for `app` (a list)."""
    return [ncu, "--clock-control", "none", "--cache-control", cache_control, "--metrics", ",".join(METRICS),
            "--profile-from-start", "off", "--target-processes", "all", "--force-overwrite", "--export",
            str(report_path)] + list(app)


def import_command(ncu, report_path):
    return [ncu, "--import", str(report_path), "--csv", "--page", "raw", "--print-units", "base"]


def _number(text):
    text = (text or "").strip().replace(",", "")
    if text in ("", "n/a", "N/A", "-"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _scale(unit):
    return UNIT_SCALE.get((unit or "byte").strip().lower(), 1)


def parse_csv(text):
    """Per-kernel {'name', 'read', 'write'} (bytes) from `ncu --csv` output
    of either the raw page (one row per kernel, a units row under the
    header) or the details page (one row per kernel and metric)."""
    rows = list(csv.reader(io.StringIO(_strip_preamble(text))))
    if not rows:
        return []
    header = rows[0]
    if "Metric Name" in header:
        return _parse_details(header, rows[1:])
    return _parse_raw(header, rows[1:])


def _strip_preamble(text):
    # ncu may print ==PROF== lines before the table.
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith('"ID"') or line.startswith("ID,") or line.startswith('"Process ID"'):
            return "\n".join(lines[i:])
    return "\n".join(line for line in lines if not line.startswith("=="))


def _parse_raw(header, rows):
    col = {name: i for i, name in enumerate(header)}
    if not all(m in col for m in METRICS):
        return []
    name_col = col.get("Kernel Name", col.get("Function Name"))
    units = {}
    kernels = []
    for row in rows:
        if len(row) < len(header):
            continue
        read, write = _number(row[col[METRICS[0]]]), _number(row[col[METRICS[1]]])
        if read is None and write is None:
            # The units row right under the header.
            units = {m: row[col[m]] for m in METRICS}
            continue
        kernels.append({"name": row[name_col] if name_col is not None else "?",
                        "read": (read or 0.0) * _scale(units.get(METRICS[0])),
                        "write": (write or 0.0) * _scale(units.get(METRICS[1]))})
    return kernels


def _parse_details(header, rows):
    col = {name: i for i, name in enumerate(header)}
    key_col = col.get("ID")
    name_col = col.get("Kernel Name", col.get("Function Name"))
    kernels, order = {}, []
    for row in rows:
        if len(row) < len(header):
            continue
        metric = row[col["Metric Name"]]
        if metric not in METRICS:
            continue
        key = row[key_col] if key_col is not None else len(order)
        if key not in kernels:
            kernels[key] = {"name": row[name_col] if name_col is not None else "?", "read": 0.0, "write": 0.0}
            order.append(key)
        unit = row[col["Metric Unit"]] if "Metric Unit" in col else "byte"
        value = (_number(row[col["Metric Value"]]) or 0.0) * _scale(unit)
        kernels[key]["read" if metric == METRICS[0] else "write"] += value
    return [kernels[k] for k in order]


def totals(kernels):
    read = sum(k["read"] for k in kernels)
    write = sum(k["write"] for k in kernels)
    return {"read_bytes": read, "write_bytes": write, "bytes": read + write, "kernels": len(kernels)}
