"""flashpp as a Hugging Face transformers attention implementation.

    import flashpp.transformers          # registers "flashpp"
    model = AutoModelForCausalLM.from_pretrained(..., attn_implementation="flashpp")
    # or: model.set_attn_implementation("flashpp")

The attention function takes the model's (batch, heads, seq, dim) tensors,
runs flashpp's kernels in (batch, seq, heads, dim) without copying, and
handles padding like transformers' flash-attention integration: the model
hands over the 2D padding mask (transformers' `flash_attention_mask`), the
padded tokens are gathered out into a varlen batch, and the output is
scattered back. Packed sequences (cu_seq_lens_* keyword arguments, or
position_ids restarting at 0) also run as varlen batches. Sliding windows,
softcap, GQA and the model's scaling are passed through.
"""

import torch

from ._errors import fail
from .torch import flash_attn_func, flash_attn_varlen_func

NAME = "flashpp"


def _gather_rows(x, indices):
    # (batch, seq, ...) -> (tokens, ...): the rows named by flat `indices`.
    return x.reshape(-1, *x.shape[2:]).index_select(0, indices)


def _scatter_rows(x, indices, batch, seqlen):
    # The inverse of _gather_rows; padded positions get zeros.
    out = x.new_zeros((batch * seqlen,) + tuple(x.shape[1:]))
    return out.index_put((indices,), x).reshape(batch, seqlen, *x.shape[1:])


def _lengths(mask):
    """indices of kept tokens, int32 cu_seqlens and the max length of a (batch, seq) mask."""
    seqlens = mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(mask.flatten(), as_tuple=False).flatten()
    cu = torch.nn.functional.pad(torch.cumsum(seqlens, dim=0, dtype=torch.int32), (1, 0))
    return indices, cu, int(seqlens.max()) if seqlens.numel() else 0


def _padded_attention(q, k, v, mask, **opts):
    """Attention over a batch with padding; mask: (batch, kv_len), True = token."""
    mask = mask.bool()
    batch, q_len = q.shape[0], q.shape[1]
    if k.shape[1] > mask.shape[-1]:  # a static cache longer than the tokens seen
        k, v = k[:, : mask.shape[-1]], v[:, : mask.shape[-1]]
    idx_k, cu_k, max_k = _lengths(mask)
    k, v = _gather_rows(k, idx_k), _gather_rows(v, idx_k)
    if q_len == mask.shape[-1]:
        idx_q, cu_q, max_q = idx_k, cu_k, max_k
    elif q_len == 1:  # decoding: one query per sequence
        cu_q = torch.arange(batch + 1, dtype=torch.int32, device=q.device)
        idx_q, max_q = cu_q[:-1].long(), 1
    else:  # queries are the last q_len positions (left padding)
        idx_q, cu_q, max_q = _lengths(mask[:, -q_len:])
    out = flash_attn_varlen_func(_gather_rows(q, idx_q), k, v, cu_q, cu_k, max_q, max_k, **opts)
    return _scatter_rows(out, idx_q, batch, q_len)


def _packed_from_position_ids(position_ids):
    """cu_seqlens of sequences packed into one row (position ids restart at 0), or None."""
    if position_ids is None or position_ids.dim() != 2 or position_ids.shape[0] != 1:
        return None
    pos = position_ids[0]
    starts = torch.nonzero(pos == 0, as_tuple=False).flatten()
    if starts.numel() <= 1 and (starts.numel() == 0 or int(starts[0]) == 0):
        return None
    ends = torch.cat([starts, starts.new_tensor([pos.numel()])])
    if int(ends[0]) != 0:
        ends = torch.cat([ends.new_zeros(1), ends])
    lengths = ends[1:] - ends[:-1]
    return ends.to(torch.int32), int(lengths.max())


def flashpp_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                              sliding_window=None, softcap=None, is_causal=None, **kwargs):
    """transformers attention interface: query/key/value (batch, heads, seq, dim)
    -> (attn_output (batch, seq, heads, dim_v), None)."""
    if kwargs.get("output_attentions", False):
        fail("not_supported", "output_attentions", "flashpp never materializes attention weights; use 'eager'")
    if kwargs.get("s_aux") is not None:
        fail("not_supported", "s_aux", "attention sinks are not supported")
    if dropout:
        fail("not_supported", "dropout", f"attention dropout is not supported (got {dropout}); set it to 0")
    q, k, v = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    window = (-1, -1)
    if sliding_window is not None and k.shape[1] > sliding_window:
        # transformers counts the window with the current token; flashpp's bounds exclude it.
        window = (sliding_window - 1, 0 if causal else sliding_window - 1)
    opts = dict(softmax_scale=scaling, causal=causal, window_size=window, softcap=softcap or 0.0)

    if attention_mask is not None:
        if attention_mask.dim() != 2:
            fail("value", "attention_mask", "flashpp expects transformers' 2D padding mask "
                 f"(its 'flashpp' mask function), got shape {tuple(attention_mask.shape)}")
        out = _padded_attention(q, k, v, attention_mask, **opts)
        return out, None

    cu_q, cu_k = kwargs.get("cu_seq_lens_q"), kwargs.get("cu_seq_lens_k")
    if cu_q is not None and cu_k is not None:
        max_q, max_k = kwargs.get("max_length_q"), kwargs.get("max_length_k")
        packed = (cu_q.to(torch.int32), cu_k.to(torch.int32), int(max_q), int(max_k))
    else:
        same_len = q.shape[1] == k.shape[1]
        found = _packed_from_position_ids(kwargs.get("position_ids")) if same_len else None
        packed = None if found is None else (found[0], found[0], found[1], found[1])
    if packed is not None:
        flat = [x.reshape(-1, *x.shape[2:]) for x in (q, k, v)]
        out = flash_attn_varlen_func(*flat, *packed, **opts)
        return out.reshape(q.shape[0], -1, *out.shape[1:]), None

    return flash_attn_func(q, k, v, **opts), None


def _hook_flash_loader(name):
    """transformers treats every implementation whose name contains "flash" as
    a flash_attn-style kernel and preloads its functions by name (for
    torch.compile); teach that loader where ours are."""
    try:
        import transformers.modeling_flash_attention_utils as fa_utils
    except ImportError:
        return
    original = getattr(fa_utils, "_lazy_imports", None)
    if original is None or getattr(original, "flashpp_names", None) is not None:
        if original is not None:
            original.flashpp_names.add(name)
        return

    def _lazy_imports(implementation, *args, **kwargs):
        base = implementation.split("|")[-1] if isinstance(implementation, str) else implementation
        if base in _lazy_imports.flashpp_names:
            return flash_attn_func, flash_attn_varlen_func, None, fa_utils._pad_input, fa_utils._unpad_input
        return original(implementation, *args, **kwargs)

    _lazy_imports.flashpp_names = {name}
    fa_utils._lazy_imports = _lazy_imports


def register(name=NAME):
    """Makes attn_implementation=`name` select flashpp (done on import)."""
    from transformers import AttentionInterface

    AttentionInterface.register(name, flashpp_attention_forward)
    try:
        from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask
    except ImportError:  # older transformers: models pass their own masks
        pass
    else:
        AttentionMaskInterface.register(name, flash_attention_mask)
    if "flash" in name:
        _hook_flash_loader(name)


register()
