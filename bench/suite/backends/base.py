"""What every backend adapter gives the worker.

Inputs reach an adapter in the canonical layout (batch, seqlen, heads,
head_dim); an adapter converts them once, outside any timing, to the layout
its library prefers (a real model would keep its tensors that way), and
converts outputs and gradients back for the correctness check.
"""


class Unsupported(Exception):
    """This backend cannot run this problem (head dim, GQA, paging, pass...).
    Recorded as status 'unsupported', which is not a failure."""


class Unavailable(Exception):
    """The backend's library is missing or unusable on this machine."""


class Layout:
    """A conversion between the canonical layout and a backend's own."""

    def __init__(self, name, to_native, to_canon):
        self.name = name
        self.to_native = to_native
        self.to_canon = to_canon


BNHD = Layout("bnhd", lambda t: t, lambda t: t)
# (batch, heads, seqlen, head_dim), made contiguous once so the library sees
# the layout it is fastest with instead of strided views.
BHND = Layout("bhnd", lambda t: t.transpose(1, 2).contiguous(), lambda t: t.transpose(1, 2))


class PreparedPrefill:
    """One prefill problem ready to run: `forward()` returns the output in the
    native layout computed from `leaves` (q, k, v, requiring grad when a
    backward will follow)."""

    def __init__(self, forward, leaves, layout):
        self.forward = forward
        self.leaves = leaves
        self.layout = layout

    def canon(self, t):
        return self.layout.to_canon(t)

    def native(self, t):
        return self.layout.to_native(t)


class PreparedDecode:
    """One decoding step ready to run; `forward()` must be capturable in a
    CUDA graph for the graph timing (the worker falls back to eager timing
    when capture fails)."""

    def __init__(self, forward, to_canon, note=""):
        self.forward = forward
        self.to_canon = to_canon
        self.note = note


class Backend:
    """Base adapter. `name` is the suite's backend name; `version()` goes into
    the results; `prefill()` / `decode()` raise Unsupported for problems the
    library does not handle."""

    name = "?"
    supports_backward = True

    def version(self):
        return ""

    def describe(self, job):
        """Which kernel or path runs this job, when the library says."""
        return ""

    def prefill(self, job, q, k, v, need_grad):
        raise Unsupported(f"{self.name} has no prefill path")

    def decode(self, job, q, k_cache, v_cache, cache_seqlens, block_table):
        raise Unsupported(f"{self.name} has no decode path")


def leaves(layout, tensors, need_grad):
    """Native-layout copies of q, k, v as autograd leaves."""
    return [layout.to_native(t).detach().requires_grad_(need_grad) for t in tensors]


def scale_of(job):
    return job.get("softmax_scale") or job["hdim"] ** -0.5
