"""attention_backward(..., partial_keys=True) through the NumPy API: keys
split in two, each half's backward run with the merged out/LSE of the whole
attention; dq summed over the halves and dk/dv per half follow the tolerance
rule against the float64 reference of the whole attention."""

import numpy as np
import pytest

import attn_reference as ref
import flashpp


@pytest.mark.parametrize("causal", [False, True])
def test_halves_add_up_to_the_whole(rng, causal):
    b, n, hq, hkv, d = 1, 48, 4, 2, 32
    q, k, v, dout = (rng.standard_normal((b, n, h, d)).astype(np.float32) for h in (hq, hkv, hkv, hq))
    out, lse = flashpp.attention(q, k, v, causal=causal, return_lse=True)
    dq = np.zeros_like(q)
    dk, dv = np.empty_like(k), np.empty_like(v)
    cut = 20
    for k0, k1 in ((0, cut), (cut, n)):
        # The causal diagonal of keys [k0, k1) sits n - k1 columns right of the block's corner.
        window = (-1, n - k1) if causal else (-1, -1)
        gq, gk, gv = flashpp.attention_backward(dout, q, k[:, k0:k1], v[:, k0:k1], out, lse, window=window,
                                                partial_keys=True)
        dq += gq
        dk[:, k0:k1], dv[:, k0:k1] = gk, gv
    r64 = ref.backward(dout, q, k, v, causal=causal)
    naive = ref.backward(dout, q, k, v, causal=causal, precision=np.float32)
    for name, ours, r, nv in zip(("dq", "dk", "dv"), (dq, dk, dv), r64, naive):
        ref.check_close(name, ours, r, nv, "float32")


def test_without_the_flag_a_half_is_its_own_attention(rng):
    q, k, v, dout = (rng.standard_normal((1, 32, 2, 16)).astype(np.float32) for _ in range(4))
    out, lse = flashpp.attention(q, k, v, return_lse=True)
    own = flashpp.attention_backward(dout, q, k[:, :16], v[:, :16], out, lse)
    shard = flashpp.attention_backward(dout, q, k[:, :16], v[:, :16], out, lse, partial_keys=True)
    assert not np.allclose(own[0], shard[0], atol=1e-3)
