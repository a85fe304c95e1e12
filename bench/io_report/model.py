"""Analytic HBM traffic of attention, forward + backward, in bytes.

Standard attention materializes the N x N matrices, Theta(N d + N^2) per
head; the tiled algorithm re-reads K and V once per query tile, which is
Theta(N^2 d^2 / M) for an on-chip memory of M elements (the FlashAttention
paper, Theorem 2). Three concrete counts are given per (batch, head):

- standard(): every kernel of the PyTorch composite (bench.suite.backends.
  standard) reading its inputs from and writing its output to HBM, no reuse
  between kernels (the N x N tensors are far larger than the L2);
- tiled(): the FlashAttention-2 schedule with query tile Br and key tile Bc,
  with no reuse in the L2 either: an upper bound, since the L2 serves many of
  the repeated K/V (forward) and Q/dO (backward) tile reads on a real GPU;
- compulsory(): each input read once and each output written once, the floor
  no algorithm goes below.

theta_tiled() is the paper's N^2 d^2 / M term alone, for the scaling plot.
"""

import math

FP32 = 4


def standard(batch, heads, n, d, elem=2, causal=False, backward=True):
    """Bytes moved by matmul / scale / (mask) / softmax / matmul and, with
    backward, by the autograd kernels of that composite."""
    nn, nd = n * n, n * d
    # forward: S = Q K^T (read Q, K, write S); S *= scale (read, write);
    # masked_fill (read, write); P = softmax(S) (read, write); O = P V.
    fwd = (2 * nd + nn) + 2 * nn + (2 * nn if causal else 0) + 2 * nn + (nn + nd + nd)
    bwd = 0
    if backward:
        # dV = P^T dO; dP = dO V^T; dS = softmax_backward(P, dP) (2 reads, 1
        # write); masked_fill backward; scale backward; dQ = dS K; dK = dS^T Q.
        bwd = (nn + 2 * nd) + (2 * nd + nn) + 3 * nn + (2 * nn if causal else 0) + 2 * nn \
            + (nn + 2 * nd) + (nn + 2 * nd)
    return float(batch * heads) * (fwd + bwd) * elem


def tiled(batch, heads, n, d, elem=2, causal=False, backward=True, block_m=128, block_n=128):
    """FlashAttention-2 schedule without L2 reuse (an upper bound)."""
    nd = n * d
    tiles_m, tiles_n = math.ceil(n / block_m), math.ceil(n / block_n)
    # Causal: query tile i reads only the key tiles up to the diagonal.
    kv_passes = (tiles_m + 1) / 2 if causal else tiles_m
    q_passes = (tiles_n + 1) / 2 if causal else tiles_n
    fwd = elem * (nd + 2 * nd * kv_passes + nd) + FP32 * n  # Q, K/V per query tile, O, LSE
    bwd = 0.0
    if backward:
        pre = elem * 2 * nd + FP32 * n  # D = rowsum(dO * O)
        main = elem * 2 * nd  # K, V once per key tile
        main += q_passes * (elem * 2 * nd + 2 * FP32 * n)  # Q, dO, LSE, D per key tile
        main += q_passes * 2 * FP32 * nd  # dQ accumulated in fp32 (read + write)
        main += elem * 2 * nd  # dK, dV
        convert = FP32 * nd + elem * nd  # fp32 dQ to the output dtype
        bwd = pre + main + convert
    return float(batch * heads) * (fwd + bwd)


def compulsory(batch, heads, n, d, elem=2, backward=True):
    """Read Q, K, V and write O; with backward also read Q, K, V, O, dO and
    write dQ, dK, dV."""
    nd = n * d
    passes = 4 + (8 if backward else 0)
    return float(batch * heads) * passes * nd * elem


def theta_tiled(batch, heads, n, d, sram_bytes, elem=2, backward=True):
    """The paper's Theta(N^2 d^2 / M) with M = sram_bytes / elem elements,
    times 3.5 for forward + backward (the backward does 2.5x the work)."""
    m = sram_bytes / elem
    return float(batch * heads) * (n * n * d * d / m) * elem * (3.5 if backward else 1.0)


def matmul_flops(batch, heads, n, d, causal=False, recompute=True, backward=True):
    """Algorithmic FLOPs: 2 matmuls forward; backward 4 (standard, which
    stores P) or 5 (tiled kernels, which recompute S). Each is 2 N^2 d per
    head; causal halves them."""
    count = 2 + ((5 if recompute else 4) if backward else 0)
    flops = count * 2.0 * batch * heads * n * n * d
    return flops / 2 if causal else flops


def models(batch, heads, n, d, elem=2, causal=False, backward=True, sram_bytes=228 * 1024, block_m=128,
           block_n=128):
    return {
        "standard_bytes": standard(batch, heads, n, d, elem, causal, backward),
        "tiled_bytes": tiled(batch, heads, n, d, elem, causal, backward, block_m, block_n),
        "compulsory_bytes": compulsory(batch, heads, n, d, elem, backward),
        "theta_tiled_bytes": theta_tiled(batch, heads, n, d, sram_bytes, elem, backward),
        "sram_bytes": sram_bytes, "block_m": block_m, "block_n": block_n,
    }
