"""FlashInfer, when importable: forward prefill through its ragged batch
wrapper, decoding through its paged decode wrapper (a contiguous cache is a
paged one with one page per sequence). It has no backward. Its plan()
arguments changed names across releases, so only the ones the installed
version accepts are passed."""

import inspect

from .base import BNHD, Backend, PreparedDecode, PreparedPrefill, Unavailable, Unsupported, scale_of

WORKSPACE_BYTES = 256 << 20


def _call_accepting(fn, *args, **kwargs):
    params = inspect.signature(fn).parameters
    if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in params}
    return fn(*args, **kwargs)


class FlashInfer(Backend):
    name = "flashinfer"
    supports_backward = False

    def __init__(self, name="flashinfer"):
        try:
            import flashinfer
        except Exception as exc:
            raise Unavailable(f"flashinfer: {exc}") from exc
        import torch

        self.fi = flashinfer
        self.torch = torch
        self.workspace = None

    def version(self):
        return f"flashinfer {getattr(self.fi, '__version__', '?')}"

    def _workspace(self, device):
        if self.workspace is None:
            self.workspace = self.torch.zeros(WORKSPACE_BYTES, dtype=self.torch.uint8, device=device)
        return self.workspace

    def prefill(self, job, q, k, v, need_grad):
        if need_grad:
            raise Unsupported("flashinfer has no backward")
        torch = self.torch
        b, nq, hq, d = q.shape
        nk, hkv = k.shape[1], k.shape[2]
        # Ragged layout (total_tokens, heads, head_dim): a reshape, no copy.
        rq, rk, rv = q.reshape(b * nq, hq, d), k.reshape(b * nk, hkv, d), v.reshape(b * nk, hkv, v.shape[-1])
        qo_indptr = torch.arange(0, (b + 1) * nq, nq, dtype=torch.int32, device=q.device)
        kv_indptr = torch.arange(0, (b + 1) * nk, nk, dtype=torch.int32, device=q.device)
        wrapper = self.fi.BatchPrefillWithRaggedKVCacheWrapper(self._workspace(q.device), "NHD")
        plan = getattr(wrapper, "plan", None) or wrapper.begin_forward
        _call_accepting(plan, qo_indptr, kv_indptr, hq, hkv, d, head_dim_vo=v.shape[-1],
                        causal=bool(job["causal"]), sm_scale=scale_of(job), q_data_type=q.dtype,
                        kv_data_type=k.dtype)
        run = getattr(wrapper, "run", None) or wrapper.forward

        def forward():
            return run(rq, rk, rv).reshape(b, nq, hq, -1)

        return PreparedPrefill(forward, [q, k, v], BNHD)

    def decode(self, job, q, k_cache, v_cache, cache_seqlens, block_table):
        torch = self.torch
        b, _, hq, d = q.shape
        if block_table is None:
            # One page per sequence: (batch, cache_len, heads_kv, d) is already
            # the NHD paged layout (num_pages, page_size, heads_kv, d).
            page = k_cache.shape[1]
            indices = torch.arange(b, dtype=torch.int32, device=q.device)
            pages_per_seq = 1
        else:
            page = k_cache.shape[1]
            pages_per_seq = block_table.shape[1]
            indices = block_table.reshape(-1).contiguous()
        hkv = k_cache.shape[2]
        indptr = torch.arange(0, (b + 1) * pages_per_seq, pages_per_seq, dtype=torch.int32, device=q.device)
        last = torch.full((b,), job["cache_len"] - (pages_per_seq - 1) * page, dtype=torch.int32, device=q.device)
        wrapper = _call_accepting(self.fi.BatchDecodeWithPagedKVCacheWrapper, self._workspace(q.device), "NHD",
                                  use_tensor_cores=hq != hkv)
        plan = getattr(wrapper, "plan", None) or wrapper.begin_forward
        _call_accepting(plan, indptr, indices, last, hq, hkv, d, page, sm_scale=scale_of(job), data_type=q.dtype,
                        q_data_type=q.dtype, kv_data_type=k_cache.dtype)
        run = getattr(wrapper, "run", None) or wrapper.forward
        q3 = q.reshape(b, hq, d)

        def forward():
            return run(q3, (k_cache, v_cache)).reshape(b, 1, hq, -1)

        return PreparedDecode(forward, lambda o: o, note=f"paged wrapper, page {page}")
