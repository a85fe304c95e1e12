"""flashpp.attention / flashpp.attention_backward: the C++ API over any array
framework (NumPy on the CPU; torch, CuPy or JAX on the GPU), zero-copy."""

from . import _core
from ._arrays import arrays_for
from ._errors import fail


def _window(window):
    try:
        left, right = window
        left, right = int(left), int(right)
    except (TypeError, ValueError):
        fail("value", "window", f"must be a pair (left, right) of ints, got {window!r}")
    return left, right


def _max_seqlen(given, cu_seqlens, argument):
    if given is not None:
        return int(given)
    # Reading the lengths back costs a device synchronization for GPU arrays;
    # pass max_seqlen_q/k to avoid it.
    try:
        lengths = cu_seqlens[1:] - cu_seqlens[:-1]
        return int(lengths.max()) if len(lengths) else 0
    except (TypeError, AttributeError, ValueError):
        fail("value", argument, "is required: it cannot be derived from the cu_seqlens given")


def _options(causal, window, softcap, softmax_scale, deterministic, cu_seqlens_q, cu_seqlens_k,
             max_seqlen_q, max_seqlen_k, stream, partial_keys=False):
    left, right = _window(window)
    varlen = cu_seqlens_q is not None and cu_seqlens_k is not None
    return _core.Options(
        softmax_scale=None if softmax_scale is None else float(softmax_scale),
        causal=bool(causal),
        window_left=left,
        window_right=right,
        softcap=float(softcap),
        deterministic=bool(deterministic),
        partial_keys=bool(partial_keys),
        max_seqlen_q=_max_seqlen(max_seqlen_q, cu_seqlens_q, "max_seqlen_q") if varlen else 0,
        max_seqlen_k=_max_seqlen(max_seqlen_k, cu_seqlens_k, "max_seqlen_k") if varlen else 0,
        stream=int(stream),
    )


def _shape(x):
    shape = getattr(x, "shape", None)
    return tuple(shape) if shape is not None else None


def _lse_shape(q_shape, varlen):
    # LSE is (batch, heads, seqlen_q), or (heads, total_q) for varlen.
    return (q_shape[1], q_shape[0]) if varlen else (q_shape[0], q_shape[2], q_shape[1])


def _spec_or_none(spec, x, argument, writable=False):
    # The core takes None for an array not given: an optional one (lse, varlen
    # offsets) or an output left unallocated for inputs the core will reject.
    return None if x is None else spec(x, argument, writable)


def _cu_seqlens_specs(spec, cu_seqlens_q, cu_seqlens_k):
    return _spec_or_none(spec, cu_seqlens_q, "cu_seqlens_q"), _spec_or_none(spec, cu_seqlens_k, "cu_seqlens_k")


def _launch(entry, arrays, like, specs, opts, cu_seqlens_q, cu_seqlens_k):
    """Calls _core.forward or _core.backward, whose arguments end alike: the
    arrays' specs, then the options, the varlen offsets and an allocator of
    scratch memory in the framework of `like`; then waits for the work where
    that framework needs it."""
    entry(*specs, opts, *_cu_seqlens_specs(arrays.spec, cu_seqlens_q, cu_seqlens_k), arrays.allocator(like))
    arrays.finish(like)


def _select(core_select, q, k, v, causal, window, softcap, softmax_scale, deterministic, cu_seqlens_q, cu_seqlens_k,
            max_seqlen_q, max_seqlen_k):
    """Asks the core's select_forward or select_backward; choosing a backend
    launches nothing, so there is no stream."""
    arrays = arrays_for(q)
    opts = _options(causal, window, softcap, softmax_scale, deterministic, cu_seqlens_q, cu_seqlens_k,
                    max_seqlen_q, max_seqlen_k, 0)
    spec = arrays.spec
    return core_select(spec(q, "q"), spec(k, "k"), spec(v, "v"), opts,
                       *_cu_seqlens_specs(spec, cu_seqlens_q, cu_seqlens_k))


def attention(q, k, v, *, causal=False, window=(-1, -1), softcap=0.0, softmax_scale=None, return_lse=False,
              cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, out=None, lse=None,
              stream=None):
    """Exact attention ``softmax(scale * q @ k^T + mask) @ v``.

    q: (batch, seqlen_q, heads, head_dim); k, v: (batch, seqlen_k, heads_kv,
    head_dim / head_dim_v), last dim contiguous, any other strides. With
    cu_seqlens_q/k (int32, batch + 1 prefix sums) the arrays are varlen:
    (total_tokens, heads, head_dim). heads % heads_kv == 0 gives GQA/MQA.

    causal / window=(left, right) are aligned to the bottom-right corner
    (query i sees key j when i + sk - sq - left <= j <= i + sk - sq + right;
    -1 is unbounded). softcap > 0 caps scores with softcap * tanh(s / softcap).
    softmax_scale defaults to 1 / sqrt(head_dim).

    Outputs are allocated with the inputs' framework unless `out` (and
    `lse`, fp32 (batch, heads, seqlen_q) or (heads, total_q)) are given.
    GPU work runs on `stream` (a cudaStream_t as int) or, when None, on the
    framework's current stream (torch, CuPy) or the legacy default stream.

    Returns out, or (out, lse) when return_lse is true or lse is given.
    """
    arrays = arrays_for(q, stream)
    opts = _options(causal, window, softcap, softmax_scale, False, cu_seqlens_q, cu_seqlens_k,
                    max_seqlen_q, max_seqlen_k, arrays.stream(q) if stream is None else stream)
    varlen = cu_seqlens_q is not None
    want_lse = bool(return_lse) or lse is not None
    rank = 3 if varlen else 4
    qs, vs = _shape(q), _shape(v)
    shapes_ok = qs is not None and vs is not None and len(qs) == rank and len(vs) == rank
    # With shapes the core will reject, allocate nothing: it names the bad input.
    if out is None and shapes_ok:
        out = arrays.empty(q, qs[:-1] + (vs[-1],))
    if lse is None and want_lse and shapes_ok:
        lse = arrays.empty(q, _lse_shape(qs, varlen), "float32")
    spec = arrays.spec
    _launch(_core.forward, arrays, q, [
        spec(q, "q"),
        spec(k, "k"),
        spec(v, "v"),
        _spec_or_none(spec, out, "out", True),
        _spec_or_none(spec, lse, "lse", True),
    ], opts, cu_seqlens_q, cu_seqlens_k)
    return (out, lse) if want_lse else out


def attention_backward(dout, q, k, v, out, lse, *, causal=False, window=(-1, -1), softcap=0.0,
                       softmax_scale=None, deterministic=False, cu_seqlens_q=None, cu_seqlens_k=None,
                       max_seqlen_q=None, max_seqlen_k=None, dq=None, dk=None, dv=None, stream=None,
                       partial_keys=False):
    """Gradients (dq, dk, dv) of attention() for the upstream gradient dout.

    out and lse are the forward's results (call attention(..., return_lse=True)),
    and every option must match the forward's. dq/dk/dv have the shapes of
    q/k/v and are allocated like the inputs unless given. deterministic=True
    gives bitwise-identical gradients from run to run.

    partial_keys=True: out and lse come from attention over a larger key set
    than k/v (one shard of a ring, say); the gradients are then this shard's
    part of the whole attention's (dq summed over the shards, dk/dv per shard).
    """
    arrays = arrays_for(q, stream)
    opts = _options(causal, window, softcap, softmax_scale, deterministic, cu_seqlens_q, cu_seqlens_k,
                    max_seqlen_q, max_seqlen_k, arrays.stream(q) if stream is None else stream, partial_keys)
    grads = []
    for g, x in ((dq, q), (dk, k), (dv, v)):
        shape = _shape(x)
        grads.append(arrays.empty(x, shape) if g is None and shape is not None else g)
    dq, dk, dv = grads
    spec = arrays.spec
    _launch(_core.backward, arrays, q, [
        spec(dout, "dout"),
        spec(q, "q"),
        spec(k, "k"),
        spec(v, "v"),
        spec(out, "out"),
        _spec_or_none(spec, lse, "lse"),
        _spec_or_none(spec, dq, "dq", True),
        _spec_or_none(spec, dk, "dk", True),
        _spec_or_none(spec, dv, "dv", True),
    ], opts, cu_seqlens_q, cu_seqlens_k)
    return dq, dk, dv


def select_forward(q, k, v, *, causal=False, window=(-1, -1), softcap=0.0, softmax_scale=None,
                   cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None):
    """(ok, backend, reason): which backend would run attention() on these
    arguments, or why none can. Raises only for invalid arguments."""
    return _select(_core.select_forward, q, k, v, causal, window, softcap, softmax_scale, False, cu_seqlens_q,
                   cu_seqlens_k, max_seqlen_q, max_seqlen_k)


def select_backward(q, k, v, *, causal=False, window=(-1, -1), softcap=0.0, softmax_scale=None,
                    deterministic=False, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
                    max_seqlen_k=None):
    """Like select_forward, for attention_backward()."""
    return _select(_core.select_backward, q, k, v, causal, window, softcap, softmax_scale, deterministic,
                   cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
