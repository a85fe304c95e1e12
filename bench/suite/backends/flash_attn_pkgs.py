"""The flash_attn package (FlashAttention-2) and flash_attn_interface
(FlashAttention-3, built from its hopper/ folder), when importable. Both take
the canonical (batch, seqlen, heads, head_dim) layout."""

import importlib
import inspect

from .base import BNHD, Backend, PreparedDecode, PreparedPrefill, Unavailable, leaves, scale_of

MODULES = {
    "flash_attn": ("flash_attn",),
    "flash_attn_interface": ("flash_attn_interface", "flash_attn_3.flash_attn_interface"),
}


def _first(result):
    # Some releases return (out, lse, ...) where others return out.
    return result[0] if isinstance(result, (tuple, list)) else result


class FlashAttnPackage(Backend):
    def __init__(self, name):
        self.name = name
        self.module = None
        errors = []
        for module_name in MODULES[name]:
            try:
                self.module = importlib.import_module(module_name)
                break
            except Exception as exc:  # ImportError, or a broken build raising anything
                errors.append(f"{module_name}: {exc}")
        if self.module is None:
            raise Unavailable("; ".join(errors))
        if not hasattr(self.module, "flash_attn_func"):
            raise Unavailable(f"{self.module.__name__} has no flash_attn_func")

    def version(self):
        version = getattr(self.module, "__version__", None)
        if version is None:
            try:
                from importlib.metadata import version as dist_version

                version = dist_version("flash_attn" if self.name == "flash_attn" else "flash_attn_3")
            except Exception:
                version = "?"
        return f"{self.module.__name__} {version}"

    def prefill(self, job, q, k, v, need_grad):
        lq, lk, lv = leaves(BNHD, (q, k, v), need_grad)
        fn = self.module.flash_attn_func
        scale, causal = scale_of(job), bool(job["causal"])

        def forward():
            return _first(fn(lq, lk, lv, softmax_scale=scale, causal=causal))

        return PreparedPrefill(forward, [lq, lk, lv], BNHD)

    def decode(self, job, q, k_cache, v_cache, cache_seqlens, block_table):
        fn = getattr(self.module, "flash_attn_with_kvcache", None)
        scale = scale_of(job)
        if fn is None:
            if block_table is not None:
                from .base import Unsupported

                raise Unsupported(f"{self.module.__name__} has no flash_attn_with_kvcache")
            plain = self.module.flash_attn_func
            return PreparedDecode(lambda: _first(plain(q, k_cache, v_cache, softmax_scale=scale)), lambda o: o)
        kwargs = {"cache_seqlens": cache_seqlens, "softmax_scale": scale}
        if block_table is not None:
            # FA2 names the page table block_table, FA3 page_table.
            params = inspect.signature(fn).parameters
            kwargs["page_table" if "page_table" in params else "block_table"] = block_table

        def forward():
            return _first(fn(q, k_cache, v_cache, **kwargs))

        return PreparedDecode(forward, lambda o: o)
