"""flashpp.distributed: context parallelism (ring attention) over
torch.distributed process groups (NCCL for CUDA tensors, gloo for CPU).

    from flashpp.distributed import ring_attention, zigzag
    q_local = zigzag.shard(q, rank, world)            # rank's chunks r and 2*world-1-r
    out_local = ring_attention(q_local, k_local, v_local, group, causal=True)
    out = zigzag.unshard(all_gathered_parts)          # back to sequence order

Needs PyTorch with torch.distributed. See docs/ring_attention.md.
"""

from . import zigzag
from .merge import merge_into, merge_lse
from .plan import BlockCall, plan_step
from .ring import RingAttention, ring_attention

__all__ = ["ring_attention", "RingAttention", "zigzag", "plan_step", "BlockCall", "merge_into", "merge_lse"]
