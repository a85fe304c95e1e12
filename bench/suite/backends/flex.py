"""FlexAttention (torch.nn.attention.flex_attention) under torch.compile,
i.e. the Triton kernels it generates. The causal mask is a block mask built
once per problem, outside the timing. Compilation happens on the worker's
first (checking) call and is reported as first_call_s, never timed."""

from .base import BHND, Backend, PreparedDecode, PreparedPrefill, Unsupported, leaves, scale_of


class Flex(Backend):
    name = "flex"

    def __init__(self, name="flex"):
        import torch
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        self.torch = torch
        self.create_block_mask = create_block_mask
        # Every problem of the grid has new static shapes, hence a recompile;
        # the default limit (8) would silently fall back to eager mode.
        for knob in ("cache_size_limit", "recompile_limit"):
            if hasattr(torch._dynamo.config, knob):
                setattr(torch._dynamo.config, knob, 256)
        # The timed backward replays one graph (retain_graph=True), which compiled
        # backwards with donated buffers refuse.
        functorch_config = getattr(getattr(torch, "_functorch", None), "config", None)
        if functorch_config is not None and hasattr(functorch_config, "donated_buffer"):
            functorch_config.donated_buffer = False
        self.compiled = torch.compile(flex_attention, dynamic=False)

    def version(self):
        try:
            import triton

            triton_version = triton.__version__
        except ImportError:
            triton_version = "none"
        return f"torch {self.torch.__version__}, triton {triton_version}"

    def _mask(self, nq, nk, device):
        offset = nk - nq  # bottom-right alignment, as ours

        def causal(b, h, q_idx, kv_idx):
            return q_idx + offset >= kv_idx

        return self.create_block_mask(causal, B=None, H=None, Q_LEN=nq, KV_LEN=nk, device=device)

    def prefill(self, job, q, k, v, need_grad):
        lq, lk, lv = leaves(BHND, (q, k, v), need_grad)
        scale = scale_of(job)
        gqa = job["heads"] != job["heads_kv"]
        mask = self._mask(job["seqlen_q"], job["seqlen_k"], q.device) if job["causal"] else None
        compiled = self.compiled

        def forward():
            return compiled(lq, lk, lv, block_mask=mask, scale=scale, enable_gqa=gqa)

        return PreparedPrefill(forward, [lq, lk, lv], BHND)

    def decode(self, job, q, k_cache, v_cache, cache_seqlens, block_table):
        if block_table is not None:
            raise Unsupported("paged KV caches are not wired up for FlexAttention here")
        nq, nk, nv = (BHND.to_native(t) for t in (q, k_cache, v_cache))
        scale = scale_of(job)
        compiled = self.compiled

        def forward():
            return compiled(nq, nk, nv, scale=scale, enable_gqa=True)

        return PreparedDecode(forward, BHND.to_canon)
