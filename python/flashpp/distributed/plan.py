"""Which attention calls one ring step needs.

A rank's queries and the K/V shard it holds at a step are each a list of
global chunks of equal length L (zigzag.rank_chunks). Under a causal mask
chunk pair (query chunk a, key chunk b) is
  full     when b < a (every key precedes every query),
  diagonal when b == a (causal within the chunk),
  skipped  when b > a.
plan_step() groups the pairs into as few rectangular calls as it can. For
the zigzag layout every step is one call:
  own shard          -> causal over the whole local block (the chunk order
                        is the global order, so one causal mask is exact);
  shard of rank s<r  -> all queries against the first half of the keys;
  shard of rank s>r  -> the second half of the queries against all keys.
Without a mask every step is one full call.
"""

from dataclasses import dataclass
from typing import List, Sequence, Tuple

FULL, DIAGONAL, SKIPPED = "full", "diagonal", "skipped"


@dataclass(frozen=True)
class BlockCall:
    """Attention of local query rows q[0]:q[1] over local key rows k[0]:k[1]."""

    q: Tuple[int, int]
    k: Tuple[int, int]
    causal: bool  # only for square diagonal blocks, where bottom-right = top-left


def relation(q_chunk: int, k_chunk: int) -> str:
    if k_chunk < q_chunk:
        return FULL
    return DIAGONAL if k_chunk == q_chunk else SKIPPED


def plan_step(q_chunks: Sequence[int], k_chunks: Sequence[int], chunk_len: int, causal: bool) -> List[BlockCall]:
    L = chunk_len
    nq, nk = len(q_chunks), len(k_chunks)
    if L == 0:
        return []
    if not causal:
        return [BlockCall((0, nq * L), (0, nk * L), False)]
    rel = [tuple(relation(a, b) for b in k_chunks) for a in q_chunks]
    flat = [r for row in rel for r in row]
    if all(r == SKIPPED for r in flat):
        return []
    if all(r == FULL for r in flat):
        return [BlockCall((0, nq * L), (0, nk * L), False)]
    if list(q_chunks) == list(k_chunks) and all(a < b for a, b in zip(q_chunks, q_chunks[1:])):
        return [BlockCall((0, nq * L), (0, nk * L), True)]
    calls: List[BlockCall] = []
    i = 0
    while i < nq:
        j = i + 1
        while j < nq and rel[j] == rel[i]:
            j += 1  # a run of query chunks that see the same key chunks
        full = [c for c, r in enumerate(rel[i]) if r == FULL]
        if full and full == list(range(full[0], full[-1] + 1)):
            calls.append(BlockCall((i * L, j * L), (full[0] * L, (full[-1] + 1) * L), False))
        else:
            calls.extend(BlockCall((i * L, j * L), (c * L, (c + 1) * L), False) for c in full)
        for c, r in enumerate(rel[i]):
            if r == DIAGONAL:
                calls.extend(BlockCall((a * L, (a + 1) * L), (c * L, (c + 1) * L), True) for a in range(i, j))
        i = j
    return calls
