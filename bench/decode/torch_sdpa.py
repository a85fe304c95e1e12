"""torch SDPA beside flashpp's decode benchmark: the same shapes (one query
token, 32 query / 8 kv heads, head dim 128, bf16, contiguous cache), cuDNN
and flash backends, replayed through CUDA graphs, as KV bytes read per second.
Prints one JSON object per line."""
import json
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

HQ, HKV, D = 32, 8, 128
ROTATE_BYTES = 512 << 20


def run(backend, batch, length):
    kv_bytes = batch * length * HKV * D * 2 * 2
    copies = max(1, min(ROTATE_BYTES // kv_bytes + 1, (8 << 30) // kv_bytes))
    calls = max(copies, 8)
    q = torch.randn(batch, HQ, 1, D, device="cuda", dtype=torch.bfloat16)
    ks = [torch.randn(batch, HKV, length, D, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
    vs = [torch.randn(batch, HKV, length, D, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
    note = "enable_gqa"

    def call(i):
        return torch.nn.functional.scaled_dot_product_attention(q, ks[i % copies], vs[i % copies], enable_gqa=True)

    with sdpa_kernel([backend]):
        try:
            call(0)
        except RuntimeError as e:
            # The backend takes no GQA: give it K/V repeated to 32 heads. It then
            # reads 4x the bytes; kv_tbps still counts the 8-head cache.
            first_error = str(e).splitlines()[0][:160]
            ks = [k.repeat_interleave(HQ // HKV, dim=1) for k in ks]
            vs = [v.repeat_interleave(HQ // HKV, dim=1) for v in vs]
            note = "kv expanded to 32 heads (enable_gqa refused: %s)" % first_error

            def call(i):
                return torch.nn.functional.scaled_dot_product_attention(q, ks[i % copies], vs[i % copies])

            try:
                call(0)
            except RuntimeError as e2:
                return {"error": str(e2).splitlines()[0][:200], "gqa_error": first_error}
        torch.cuda.synchronize()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for i in range(3):
                call(i)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(calls):
                call(i)
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(7):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3 / calls)
    times.sort()
    us = times[len(times) // 2]
    del ks, vs, g
    torch.cuda.empty_cache()
    return {"us": us, "kv_tbps": kv_bytes / (us * 1e-6) / 1e12, "note": note}


def main():
    quick = "--quick" in sys.argv
    print(json.dumps({"kind": "torch", "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                      "gpu": torch.cuda.get_device_name(0)}), flush=True)
    batches = [1, 64] if quick else [1, 16, 64]
    lengths = [16384] if quick else [4096, 16384, 65536]
    for name, backend in [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]:
        for b in batches:
            for n in lengths:
                r = run(backend, b, n)
                r.update({"kind": "sdpa", "backend": name, "batch": b, "cache_len": n})
                print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
