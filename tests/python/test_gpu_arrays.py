"""flashpp.attention on GPU arrays of other frameworks through DLPack (CuPy,
JAX), checked against the NumPy float64 reference; skipped without them."""

import numpy as np
import pytest

import attn_reference as ref
import flashpp


def host_inputs(rng, dtype=np.float16, b=2, sq=33, sk=40, h=4, hk=2, d=64):
    mk = lambda *s: rng.standard_normal(s).astype(dtype)
    return mk(b, sq, h, d), mk(b, sk, hk, d), mk(b, sk, hk, d)


def check(q, k, v, out, lse, causal):
    o64, l64 = ref.forward(q, k, v, causal=causal)
    on, ln = ref.forward(q, k, v, causal=causal, precision=q.dtype)
    ref.check_close("out", out, o64, on, q.dtype.name)
    ref.check_close("lse", lse, l64, ln, q.dtype.name)


def cupy_or_skip():
    cp = pytest.importorskip("cupy")
    if not flashpp.built_with_cuda():
        pytest.skip("flashpp was built without the CUDA backend")
    try:
        if cp.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("no CUDA device")
    except cp.cuda.runtime.CUDARuntimeError:
        pytest.skip("no CUDA device")
    return cp


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_cupy_arrays(causal, rng):
    cp = cupy_or_skip()
    q, k, v = host_inputs(rng)
    out, lse = flashpp.attention(cp.asarray(q), cp.asarray(k), cp.asarray(v), causal=causal, return_lse=True)
    assert isinstance(out, cp.ndarray) and out.dtype == cp.float16
    check(q, k, v, cp.asnumpy(out), cp.asnumpy(lse), causal)
    dout = cp.asarray(rng.standard_normal(out.shape).astype(np.float16))
    dq, dk, dv = flashpp.attention_backward(dout, cp.asarray(q), cp.asarray(k), cp.asarray(v), out, lse,
                                            causal=causal)
    assert dq.shape == q.shape and bool(cp.isfinite(dq).all())


def test_jax_arrays(rng):
    jax = pytest.importorskip("jax")
    if not flashpp.built_with_cuda():
        pytest.skip("flashpp was built without the CUDA backend")
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        pytest.skip("JAX sees no GPU")
    q, k, v = host_inputs(rng)
    put = lambda x: jax.device_put(x, gpus[0])
    out, lse = flashpp.attention(put(q), put(k), put(v), causal=True, return_lse=True)
    out.block_until_ready()
    check(q, k, v, np.asarray(out), np.asarray(lse), True)
