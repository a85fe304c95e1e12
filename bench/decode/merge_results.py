"""Merges the flashpp and torch decode benchmark lines into one JSON file
(bench/results/decode-<date>.json) and prints the markdown table used in
docs/kvcache.md.
  python3 merge_results.py ours.jsonl torch.jsonl out.json [git_sha]"""
import datetime
import json
import sys


def lines(path):
    try:
        with open(path) as f:
            return [json.loads(l) for l in f if l.strip().startswith("{")]
    except FileNotFoundError:
        return []


def main():
    ours, theirs, out = lines(sys.argv[1]), lines(sys.argv[2]), sys.argv[3]
    sha = sys.argv[4] if len(sys.argv) > 4 else "unknown"
    dev = next((x for x in ours if x.get("kind") == "device"), {})
    tv = next((x for x in theirs if x.get("kind") == "torch"), {})
    runs = [x for x in ours if x.get("kind") == "flashpp"]
    sdpa = [x for x in theirs if x.get("kind") == "sdpa"]
    doc = {"date": datetime.date.today().isoformat(), "git_sha": sha, "gpu": dev.get("gpu"),
           "device_copy_tbps": dev.get("copy_tbps"), "reference_copy_tbps": 4.27,
           "torch": tv.get("torch"), "cudnn": tv.get("cudnn"),
           "shape": {"heads_q": 32, "heads_kv": 8, "head_dim": 128, "dtype": "bf16", "causal": True},
           "flashpp": runs, "torch_sdpa": sdpa}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)

    def sd(backend, b, n):
        for x in sdpa:
            if x["backend"] == backend and x["batch"] == b and x["cache_len"] == n:
                return "%.2f" % x["kv_tbps"] if "kv_tbps" in x else "n/a"
        return "-"

    print("| batch | cache | layout | sq | splits | us | TB/s | % of 4.27 | best split (TB/s) | cuDNN | flash |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        layout = "contiguous" if r["page_size"] == 0 else "page %d" % r["page_size"]
        if r["validate"]:
            layout += " +validate"
        extra = sd("cudnn", r["batch"], r["cache_len"]), sd("flash", r["batch"], r["cache_len"])
        if r["page_size"] != 0 or r["seqlen_q"] != 1 or r["validate"]:
            extra = ("", "")
        print("| %d | %dK | %s | %d | %d | %.1f | %.2f | %.0f%% | %d (%.2f) | %s | %s |" % (
            r["batch"], r["cache_len"] // 1024, layout, r["seqlen_q"], r["splits"], r["us"], r["kv_tbps"],
            r["pct_copy_4_27"], r["best_splits"], r["best_tbps"], extra[0], extra[1]))


if __name__ == "__main__":
    main()
