"""flashpp itself, through its PyTorch layer (flashpp.torch).

`ours` is the library's own dispatch. `ours[FAMILY]` runs the same calls in a
worker started with FLASHPP_KERNEL_FAMILY=FAMILY, for libraries built with
more than one kernel family; the worker refuses to label numbers with a
family the library did not actually select (see check_family).
"""

import importlib
import os
import sys
from pathlib import Path

from .base import BNHD, Backend, PreparedDecode, PreparedPrefill, Unavailable, Unsupported, leaves, scale_of

FAMILY_ENV = "FLASHPP_KERNEL_FAMILY"


REPO = Path(__file__).resolve().parents[3]


def _source_tree_package():
    """A folder holding an importable flashpp built from this checkout:
    python/ itself when the extension was built in place, else a copy of
    python/flashpp with the newest build*/python/_core*.so (a CMake build
    with FLASHPP_BUILD_PYTHON=ON). None when there is neither."""
    tree = REPO / "python"
    if any(tree.glob("flashpp/_core*")):
        return tree
    built = sorted(REPO.glob("build*/python/_core*.so"), key=lambda p: p.stat().st_mtime)
    if not built:
        return None
    import atexit
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="flashpp-bench-"))
    atexit.register(shutil.rmtree, folder, True)
    shutil.copytree(tree / "flashpp", folder / "flashpp")
    shutil.copy2(built[-1], folder / "flashpp" / built[-1].name)
    return folder


def _import_flashpp():
    """flashpp.torch from the environment, else from this checkout's build."""
    try:
        return importlib.import_module("flashpp.torch"), importlib.import_module("flashpp")
    except ImportError as first:
        folder = _source_tree_package()
        if folder is None:
            raise Unavailable(f"cannot import flashpp.torch ({first}) and no build of it in this checkout") from first
        sys.path.insert(0, str(folder))
        for name in [m for m in sys.modules if m == "flashpp" or m.startswith("flashpp.")]:
            del sys.modules[name]
        try:
            return importlib.import_module("flashpp.torch"), importlib.import_module("flashpp")
        except ImportError as second:
            raise Unavailable(f"cannot import flashpp.torch from {folder} ({second})") from second


class Ours(Backend):
    def __init__(self, name="ours"):
        self.name = name
        self.family = name[len("ours["):-1] if name.startswith("ours[") else ""
        if self.family and os.environ.get(FAMILY_ENV) != self.family:
            raise Unavailable(f"{name} needs {FAMILY_ENV}={self.family} in the worker's environment")
        self.ft, self.fp = _import_flashpp()
        if not hasattr(self.ft, "flash_attn_func"):
            raise Unavailable("flashpp.torch has no flash_attn_func")

    def version(self):
        built = getattr(self.fp, "built_with_cuda", lambda: None)()
        where = Path(self.fp.__file__).parent
        return f"{getattr(self.fp, '__version__', '?')} (CUDA backend built: {built}; from {where})"

    def _selection(self, job, q, k, v, backward):
        select = getattr(self.fp, "select_backward" if backward else "select_forward", None)
        if select is None:
            return ""
        try:
            answer = select(q, k, v, causal=job.get("causal", False))
        except Exception as exc:  # a selection query must never stop a measurement
            return f"select failed: {exc}"
        if isinstance(answer, tuple) and len(answer) == 3:
            ok, name, reason = answer
            return str(name) if ok else f"none: {reason}"
        return str(answer)

    def check_family(self, selected):
        if self.family and self.family not in selected:
            raise Unsupported(f"{FAMILY_ENV}={self.family} not honoured: the library selected '{selected}'")

    def prefill(self, job, q, k, v, need_grad):
        self.kernels = {}
        fwd_name = self._selection(job, q, k, v, backward=False)
        self.check_family(fwd_name)
        self.kernels = {"fwd": fwd_name}
        if need_grad:
            bwd_name = self._selection(job, q, k, v, backward=True)
            self.check_family(bwd_name)
            self.kernels["bwd"] = bwd_name
        lq, lk, lv = leaves(BNHD, (q, k, v), need_grad)
        scale, causal = scale_of(job), bool(job["causal"])
        fn = self.ft.flash_attn_func

        def forward():
            return fn(lq, lk, lv, softmax_scale=scale, causal=causal)

        return PreparedPrefill(forward, [lq, lk, lv], BNHD)

    def decode(self, job, q, k_cache, v_cache, cache_seqlens, block_table):
        self.kernels = {}
        scale = scale_of(job)
        kvcache = getattr(self.ft, "flash_attn_with_kvcache", None)
        if kvcache is not None:
            kwargs = {"cache_seqlens": cache_seqlens, "softmax_scale": scale}
            if block_table is not None:
                kwargs["block_table"] = block_table

            def forward():
                return kvcache(q, k_cache, v_cache, **kwargs)

            return PreparedDecode(forward, lambda o: o, note="flash_attn_with_kvcache")
        if block_table is not None:
            raise Unsupported("flashpp.torch has no flash_attn_with_kvcache for a paged cache")
        self.kernels = {"fwd": self._selection(job, q, k_cache, v_cache, backward=False)}
        fn = self.ft.flash_attn_func

        def forward_plain():
            return fn(q, k_cache, v_cache, softmax_scale=scale)

        return PreparedDecode(forward_plain, lambda o: o, note="flash_attn_func (seqlen_q = 1)")

    def describe(self, job):
        return "; ".join(f"{k}: {v}" for k, v in getattr(self, "kernels", {}).items())
