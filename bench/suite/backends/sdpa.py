"""torch.nn.functional.scaled_dot_product_attention pinned to one of its
kernels: math (the materializing composite), flash (FA2 inside PyTorch),
efficient (memory-efficient / xformers-style) and cuDNN."""

import warnings

from .base import BHND, Backend, PreparedDecode, PreparedPrefill, Unavailable, Unsupported, leaves, scale_of

KERNELS = {
    "sdpa_math": "MATH",
    "sdpa_flash": "FLASH_ATTENTION",
    "sdpa_efficient": "EFFICIENT_ATTENTION",
    "sdpa_cudnn": "CUDNN_ATTENTION",
}


def _why_not(exc, caught):
    # SDPA explains a refusal in warnings and raises a generic "No available
    # kernel"; keep the explanation.
    reasons = "; ".join(str(w.message).splitlines()[0] for w in caught)[:400]
    return f"{str(exc).splitlines()[0]}{(' (' + reasons + ')') if reasons else ''}"


class Sdpa(Backend):
    def __init__(self, name):
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel

        self.name = name
        self.torch = torch
        self.kernel = getattr(SDPBackend, KERNELS[name], None)
        if self.kernel is None:
            raise Unavailable(f"this torch has no SDPBackend.{KERNELS[name]}")
        self.sdpa_kernel = sdpa_kernel
        self.sdpa = torch.nn.functional.scaled_dot_product_attention

    def version(self):
        v = f"torch {self.torch.__version__}"
        if self.name == "sdpa_cudnn":
            v += f", cuDNN {self.torch.backends.cudnn.version()}"
        return v

    def _call(self, q, k, v, causal, scale, gqa):
        with self.sdpa_kernel([self.kernel]):
            if gqa:
                return self.sdpa(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)
            return self.sdpa(q, k, v, is_causal=causal, scale=scale)

    def _probe(self, fn):
        """Runs fn once; a refusal becomes Unsupported with SDPA's reasons."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                return fn()
            except RuntimeError as exc:
                if "No available kernel" in str(exc):
                    raise Unsupported(_why_not(exc, caught)) from exc
                raise

    def prefill(self, job, q, k, v, need_grad):
        lq, lk, lv = leaves(BHND, (q, k, v), need_grad)
        causal, scale = bool(job["causal"]), scale_of(job)
        gqa = job["heads"] != job["heads_kv"]
        if causal and job["seqlen_q"] != job["seqlen_k"]:
            # is_causal is aligned top-left in SDPA; ours bottom-right.
            raise Unsupported("SDPA's is_causal is top-left aligned; needs seqlen_q == seqlen_k")

        def forward():
            return self._call(lq, lk, lv, causal, scale, gqa)

        # A refusal surfaces on the worker's first (checking) call.
        return PreparedPrefill(forward, [lq, lk, lv], BHND)

    def decode(self, job, q, k_cache, v_cache, cache_seqlens, block_table):
        if block_table is not None:
            raise Unsupported("SDPA has no paged KV cache")
        scale = scale_of(job)
        nq, nk, nv = (BHND.to_native(t) for t in (q, k_cache, v_cache))
        note = ""

        def native_gqa():
            return self._call(nq, nk, nv, False, scale, True)

        try:
            self._probe(native_gqa)
            forward = native_gqa
        except Unsupported as refusal:
            # This kernel has no GQA: give it K/V expanded to the query heads,
            # as a model would have to; the bandwidth is still counted on the
            # real (unexpanded) cache, so the expansion costs it.
            ratio = job["heads"] // job["heads_kv"]
            need = (nk.numel() * nk.element_size() + nv.numel() * nv.element_size()) * ratio
            if nk.is_cuda and need > 0.5 * self.torch.cuda.mem_get_info(nk.device)[0]:
                raise Unsupported(f"{refusal}; expanding K/V for GQA would need {need / 2**30:.0f} GiB") from None
            ek, ev = (t.repeat_interleave(ratio, dim=1) for t in (nk, nv))

            def forward():
                return self._call(nq, ek, ev, False, scale, False)

            self._probe(forward)
            note = f"K/V expanded {ratio}x for GQA ({str(refusal)[:120]})"
        return PreparedDecode(forward, BHND.to_canon, note=note)
