"""One attention call of one backend on the benchmark's shape (bf16, batch * N =
16K, hidden 2048), a few times, so a profiler can take one launch of the kernel:
    ncu -k regex:fwd --launch-skip 3 -c 1 python3 scripts/probe_prefill.py \
        --backend ours --op fwd --hdim 256 --seqlen 4096
backend: ours (flashpp.torch; FLASHPP_CUDA_FORWARD_FAMILY=sm80 picks the
FA2-class forward on Hopper), flash or cudnn (torch SDPA with only that backend).
op bwd runs forward + backward (profile the backward kernel by name)."""
import argparse

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["ours", "flash", "cudnn"], required=True)
    ap.add_argument("--op", choices=["fwd", "bwd"], default="fwd")
    ap.add_argument("--hdim", type=int, default=128)
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--calls", type=int, default=5)
    a = ap.parse_args()
    batch, heads = max(1, 16384 // a.seqlen), 2048 // a.hdim
    shape = (batch, a.seqlen, heads, a.hdim)  # (batch, seqlen, heads, dim)
    need = a.op == "bwd"
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=need) for _ in range(3))
    dout = torch.randn(shape, device="cuda", dtype=torch.bfloat16)

    if a.backend == "ours":
        import flashpp.torch as ft

        def call():
            return ft.flash_attn_func(q, k, v, causal=a.causal)
    else:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        which = SDPBackend.FLASH_ATTENTION if a.backend == "flash" else SDPBackend.CUDNN_ATTENTION
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

        def call():
            with sdpa_kernel([which]):
                return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=a.causal).transpose(1, 2)

    for _ in range(a.calls):
        o = call()
        if need:
            torch.autograd.grad(o, (q, k, v), dout)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
