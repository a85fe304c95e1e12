"""Bad input raises ValueError/TypeError/NotImplementedError with the library's
message naming the argument; nothing crashes the interpreter."""

import subprocess
import sys

import numpy as np
import pytest

import flashpp


def inputs(rng, b=2, sq=5, sk=7, h=4, hk=2, d=16, dtype=np.float32):
    q = rng.standard_normal((b, sq, h, d)).astype(dtype)
    k = rng.standard_normal((b, sk, hk, d)).astype(dtype)
    v = rng.standard_normal((b, sk, hk, d)).astype(dtype)
    return q, k, v


def raises(cls, argument, fn, *args, **kwargs):
    with pytest.raises(cls) as info:
        fn(*args, **kwargs)
    err = info.value
    assert isinstance(err, flashpp.Error)
    assert err.argument == argument, str(err)
    assert str(err).startswith(f"flashpp: {argument}: "), str(err)
    return err


def test_error_classes_derive_from_builtins():
    assert issubclass(flashpp.InvalidValueError, ValueError)
    assert issubclass(flashpp.InvalidTypeError, TypeError)
    assert issubclass(flashpp.NotSupportedError, NotImplementedError)
    assert issubclass(flashpp.NotSupportedError, RuntimeError)
    assert issubclass(flashpp.BackendError, RuntimeError)
    for cls in (flashpp.InvalidValueError, flashpp.InvalidTypeError, flashpp.NotSupportedError,
                flashpp.BackendError):
        assert issubclass(cls, flashpp.Error)


def test_unsupported_dtype(rng):
    q, k, v = inputs(rng)
    raises(TypeError, "q", flashpp.attention, q.astype(np.int64), k, v)
    err = raises(TypeError, "q", flashpp.attention, q.astype(np.float64), k.astype(np.float64),
                 v.astype(np.float64))
    assert "float64" in str(err) and err.kind == "type"


def test_mixed_dtypes(rng):
    q, k, v = inputs(rng)
    err = raises(TypeError, "k", flashpp.attention, q, k.astype(np.float16), v)
    assert "float32" in str(err) and "float16" in str(err)


def test_wrong_rank(rng):
    q, k, v = inputs(rng)
    raises(ValueError, "q", flashpp.attention, q[0], k, v)


def test_mismatched_shapes(rng):
    q, k, v = inputs(rng)
    raises(ValueError, "k", flashpp.attention, q, k[:1], v)  # batch
    raises(ValueError, "v", flashpp.attention, q, k, v[:, :3])  # seqlen
    raises(ValueError, "k", flashpp.attention, q, k[..., :8], v)  # head dim
    q3, k3, v3 = inputs(rng, h=3, hk=2)
    err = raises(ValueError, "k", flashpp.attention, q3, k3, v3)  # GQA ratio
    assert "multiple" in str(err)


def test_unsupported_head_dim(rng):
    q, k, v = inputs(rng, d=12)
    err = raises(NotImplementedError, "q", flashpp.attention, q, k, v)
    assert isinstance(err, RuntimeError) and err.kind == "not_supported"
    q, k, v = inputs(rng, d=264)
    raises(NotImplementedError, "q", flashpp.attention, q, k, v)


def test_last_dim_must_be_contiguous(rng):
    q, k, v = inputs(rng, d=32)
    err = raises(ValueError, "q", flashpp.attention, q[..., ::2], k[..., :16], v[..., :16])
    assert "contiguous" in str(err)


def test_bad_options(rng):
    q, k, v = inputs(rng)
    raises(ValueError, "window", flashpp.attention, q, k, v, window=(-2, 3))
    raises(ValueError, "window", flashpp.attention, q, k, v, causal=True, window=(-1, 2))
    raises(ValueError, "window", flashpp.attention, q, k, v, window=5)
    raises(ValueError, "softcap", flashpp.attention, q, k, v, softcap=-1.0)
    raises(ValueError, "softmax_scale", flashpp.attention, q, k, v, softmax_scale=float("nan"))


def test_bad_outputs(rng):
    q, k, v = inputs(rng)
    raises(ValueError, "out", flashpp.attention, q, k, v, out=np.empty((2, 5, 4, 8), np.float32))
    raises(TypeError, "out", flashpp.attention, q, k, v, out=np.empty(q.shape, np.float16))
    raises(TypeError, "lse", flashpp.attention, q, k, v, lse=np.empty((2, 4, 5), np.float16))
    raises(ValueError, "lse", flashpp.attention, q, k, v, lse=np.empty((2, 5, 4), np.float32))
    frozen = np.empty(q.shape, np.float32)
    frozen.flags.writeable = False
    raises(ValueError, "out", flashpp.attention, q, k, v, out=frozen)


def test_not_an_array(rng):
    q, k, v = inputs(rng)
    raises(TypeError, "q", flashpp.attention, q.tolist(), k, v)
    raises(TypeError, "k", flashpp.attention, q, "keys", v)


def test_backward_needs_lse_and_matching_grads(rng):
    q, k, v = inputs(rng)
    out, lse = flashpp.attention(q, k, v, return_lse=True)
    dout = rng.standard_normal(out.shape).astype(np.float32)
    raises(ValueError, "lse", flashpp.attention_backward, dout, q, k, v, out, None)
    raises(ValueError, "dk", flashpp.attention_backward, dout, q, k, v, out, lse,
           dk=np.empty(q.shape, np.float32))
    raises(ValueError, "dout", flashpp.attention_backward, dout[:, :2], q, k, v, out, lse)


def test_bad_cu_seqlens(rng):
    q = rng.standard_normal((9, 2, 16)).astype(np.float32)
    k = rng.standard_normal((7, 2, 16)).astype(np.float32)
    cq = np.array([0, 4, 9], np.int32)
    ck = np.array([0, 3, 7], np.int32)
    raises(TypeError, "cu_seqlens_q", flashpp.attention, q, k, k, cu_seqlens_q=cq.astype(np.int64),
           cu_seqlens_k=ck)
    raises(ValueError, "cu_seqlens_k", flashpp.attention, q, k, k, cu_seqlens_q=cq,
           cu_seqlens_k=np.array([0, 3, 6], np.int32))
    raises(ValueError, "cu_seqlens_q", flashpp.attention, q, k, k, cu_seqlens_q=np.array([0, 5, 4], np.int32),
           cu_seqlens_k=ck, max_seqlen_q=9, max_seqlen_k=4)
    raises(ValueError, "cu_seqlens_q", flashpp.attention, q, k, k, cu_seqlens_q=cq, cu_seqlens_k=ck,
           max_seqlen_q=3, max_seqlen_k=4)
    raises(ValueError, "cu_seqlens_k", flashpp.attention, q, k, k, cu_seqlens_q=cq)


def test_import_needs_no_framework():
    code = ("import sys, flashpp; "
            "assert not {'torch', 'cupy', 'jax'} & set(sys.modules), sorted(sys.modules); "
            "print(flashpp.__version__)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == flashpp.__version__
