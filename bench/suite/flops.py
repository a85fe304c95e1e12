"""Work and traffic counts used to turn times into TFLOP/s and GB/s.

The conventions are the FlashAttention papers' (and the ones behind the
reference figures in docs), so our numbers and theirs divide the same way:

- forward FLOPs = 2 matmuls of (seqlen_q x seqlen_k x head_dim) per head:
  2 * B * H * Nq * Nk * (d + dv), which is 4 * B * H * N^2 * d when dv == d;
- causal halves it (the FA convention; the exact visible fraction for
  Nq == Nk is (N + 1) / (2N), a 0.05 % difference at N = 1K);
- backward counts 2.5x the forward (5 matmuls instead of 2, the recomputation
  of S included), whatever the backend actually executes.

Decode is bandwidth bound, so its figure of merit is bytes of KV cache read
per second (each cached key and value read once); query and output bytes are
reported beside it but are negligible.
"""

BWD_FLOP_FACTOR = 2.5


def attention_fwd_flops(batch, heads, seqlen_q, seqlen_k, head_dim, head_dim_v=None, causal=False):
    """Nominal forward FLOPs of exact attention (see module docstring)."""
    dv = head_dim if head_dim_v is None else head_dim_v
    flops = 2.0 * batch * heads * seqlen_q * seqlen_k * (head_dim + dv)
    return flops / 2.0 if causal else flops


def attention_flops(pass_name, batch, heads, seqlen_q, seqlen_k, head_dim, head_dim_v=None, causal=False):
    """FLOPs of one pass: 'fwd', 'bwd' (2.5x fwd) or 'fwd_bwd' (3.5x fwd)."""
    fwd = attention_fwd_flops(batch, heads, seqlen_q, seqlen_k, head_dim, head_dim_v, causal)
    factor = {"fwd": 1.0, "bwd": BWD_FLOP_FACTOR, "fwd_bwd": 1.0 + BWD_FLOP_FACTOR}[pass_name]
    return fwd * factor


def decode_kv_bytes(batch, cache_len, heads_kv, head_dim, head_dim_v=None, elem_bytes=2):
    """Bytes of K and V cache that one decoding step must read."""
    dv = head_dim if head_dim_v is None else head_dim_v
    return float(batch) * cache_len * heads_kv * (head_dim + dv) * elem_bytes


def decode_total_bytes(batch, seqlen_q, cache_len, heads_q, heads_kv, head_dim, head_dim_v=None, elem_bytes=2):
    """KV read plus the query read and the output written."""
    dv = head_dim if head_dim_v is None else head_dim_v
    q_o = float(batch) * seqlen_q * heads_q * (head_dim + dv) * elem_bytes
    return decode_kv_bytes(batch, cache_len, heads_kv, head_dim, dv, elem_bytes) + q_o


def tflops(flops, ms):
    """TFLOP/s from FLOPs and milliseconds (None when the time is missing)."""
    if not ms or ms <= 0:
        return None
    return flops / (ms * 1e-3) / 1e12


def gbps(nbytes, ms):
    """GB/s (1e9 bytes per second) from bytes and milliseconds."""
    if not ms or ms <= 0:
        return None
    return nbytes / (ms * 1e-3) / 1e9


DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}
