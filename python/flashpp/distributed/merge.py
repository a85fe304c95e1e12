"""Exact merge of partial attention results through their log-sum-exps, the
same algebra as src/common/lse_merge.hpp: over disjoint key sets with
normalized outputs O_k and LSE_k,
    LSE = log(sum_k exp(LSE_k)),    O = sum_k exp(LSE_k - LSE) O_k.
A part with LSE_k = -inf (its rows saw no key) has weight 0 and its O_k is
never read; when every part is empty the result is O = 0, LSE = -inf.
"""

import torch

_NEG_INF = float("-inf")


def merge_lse(lse_a: torch.Tensor, lse_b: torch.Tensor) -> torch.Tensor:
    """log(exp(a) + exp(b)) elementwise, -inf when both are -inf."""
    m = torch.maximum(lse_a, lse_b)
    live = m > _NEG_INF
    m0 = torch.where(live, m, torch.zeros_like(m))
    total = m0 + torch.log(torch.exp(lse_a - m0) + torch.exp(lse_b - m0))
    return torch.where(live, total, torch.full_like(m, _NEG_INF))


def merge_weight(part_lse: torch.Tensor, total_lse: torch.Tensor) -> torch.Tensor:
    """exp(LSE_k - LSE), 0 for empty parts."""
    w = torch.exp(part_lse - torch.where(part_lse > _NEG_INF, total_lse, torch.zeros_like(total_lse)))
    return torch.where(part_lse > _NEG_INF, w, torch.zeros_like(w))


def _rows(w: torch.Tensor) -> torch.Tensor:
    # (batch, heads, seqlen) -> (batch, seqlen, heads, 1), to scale out rows
    return w.transpose(1, 2).unsqueeze(-1)


def merge_into(out_acc: torch.Tensor, lse_acc: torch.Tensor, out_part: torch.Tensor, lse_part: torch.Tensor) -> None:
    """In place: (out_acc, lse_acc) becomes the merge of itself and the part.

    out_acc: float32 (batch, seqlen, heads, head_dim_v), possibly a view of
    rows of a larger accumulator; lse_acc: float32 (batch, heads, seqlen).
    out_part / lse_part: the same shapes (out_part in any float dtype).
    """
    total = merge_lse(lse_acc, lse_part)
    w_acc, w_part = _rows(merge_weight(lse_acc, total)), _rows(merge_weight(lse_part, total))
    zero = out_acc.new_zeros(())
    # An empty side is selected away, not multiplied by 0: its rows are never read.
    merged = torch.where(w_acc > 0, out_acc * w_acc, zero) + torch.where(w_part > 0, out_part.float() * w_part, zero)
    out_acc.copy_(merged)
    lse_acc.copy_(total)
