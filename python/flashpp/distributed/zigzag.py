"""Sequence layouts for context parallelism: which chunks of the global
sequence each rank holds.

- "zigzag" (load-balanced causal): the sequence is cut into 2 * world equal
  chunks and rank r holds chunks r and 2 * world - 1 - r, in that order. Under
  a causal mask every rank then has the same amount of visible work: an early
  chunk (few keys) paired with a late one (many keys).
- "contiguous": rank r holds chunk r of world equal chunks. Fine without a
  mask; under causal attention later ranks do more work.

shard() cuts a full tensor into one rank's part, unshard() puts the parts of
all ranks back together; both along `dim` (the sequence dim, 1 for
(batch, seqlen, heads, head_dim)).
"""

from typing import List, Sequence

LAYOUTS = ("zigzag", "contiguous")


def _check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


def chunks_per_rank(layout: str) -> int:
    _check_layout(layout)
    return 2 if layout == "zigzag" else 1


def rank_chunks(layout: str, rank: int, world: int) -> List[int]:
    """Global chunk indices held by `rank`, in their local order."""
    _check_layout(layout)
    if not 0 <= rank < world:
        raise ValueError(f"rank must be in [0, {world}), got {rank}")
    return [rank, 2 * world - 1 - rank] if layout == "zigzag" else [rank]


def num_chunks(layout: str, world: int) -> int:
    return chunks_per_rank(layout) * world


def shard(x, rank: int, world: int, layout: str = "zigzag", dim: int = 1):
    """The part of full tensor x that `rank` holds (a new contiguous tensor)."""
    import torch

    n = num_chunks(layout, world)
    if x.shape[dim] % n != 0:
        raise ValueError(
            f"sequence length {x.shape[dim]} (dim {dim}) must be divisible by {n} chunks "
            f"({layout} layout over {world} ranks)"
        )
    parts = x.chunk(n, dim=dim)
    return torch.cat([parts[c] for c in rank_chunks(layout, rank, world)], dim=dim).contiguous()


def unshard(parts: Sequence, layout: str = "zigzag", dim: int = 1):
    """The full tensor from the parts of ranks 0..world-1 (inverse of shard)."""
    import torch

    world = len(parts)
    per = chunks_per_rank(layout)
    chunks = [None] * num_chunks(layout, world)
    for rank, part in enumerate(parts):
        if part.shape[dim] % per != 0:
            raise ValueError(f"part of rank {rank} has {part.shape[dim]} rows on dim {dim}, not a multiple of {per}")
        for c, piece in zip(rank_chunks(layout, rank, world), part.chunk(per, dim=dim)):
            chunks[c] = piece
    return torch.cat(chunks, dim=dim)
