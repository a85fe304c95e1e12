"""The backends the suite knows, and which stages each takes part in.

Only names and capabilities live here, so the parent process can plan a run
without importing torch; `create()` (called in a worker) imports the adapter.
"""

# name -> (adapter module, class, one-line description)
ADAPTERS = {
    "ours": ("ours", "Ours", "flashpp (its own kernel dispatch)"),
    "sdpa_math": ("sdpa", "Sdpa", "torch SDPA, math kernel (materializes S and P)"),
    "sdpa_flash": ("sdpa", "Sdpa", "torch SDPA, flash kernel (FlashAttention-2 inside PyTorch)"),
    "sdpa_efficient": ("sdpa", "Sdpa", "torch SDPA, memory-efficient kernel"),
    "sdpa_cudnn": ("sdpa", "Sdpa", "torch SDPA, cuDNN kernel"),
    "flex": ("flex", "Flex", "FlexAttention under torch.compile (Triton)"),
    "standard": ("standard", "Standard", "standard attention: matmul, softmax, matmul in PyTorch"),
    "flash_attn": ("flash_attn_pkgs", "FlashAttnPackage", "flash_attn package (FlashAttention-2)"),
    "flash_attn_interface": ("flash_attn_pkgs", "FlashAttnPackage", "flash_attn_interface (FlashAttention-3)"),
    "flashinfer": ("flashinfer_pkg", "FlashInfer", "FlashInfer"),
}

PEERS = ("sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "sdpa_math", "flex", "flash_attn", "flash_attn_interface",
         "flashinfer")
DEFAULT_PREFILL = ("ours",) + PEERS
DEFAULT_DECODE = ("ours", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "sdpa_math", "flex", "flash_attn",
                  "flash_attn_interface", "flashinfer")
DEFAULT_MEMORY = ("standard", "ours", "sdpa_flash")
# CUDA-only kernels; on a CPU run they are left out of the default lists.
CUDA_ONLY = ("sdpa_efficient", "sdpa_cudnn", "flash_attn", "flash_attn_interface", "flashinfer")


def family(name):
    """'ours[sm90]' -> 'ours'."""
    return name.split("[", 1)[0]


def is_known(name):
    return family(name) in ADAPTERS and (family(name) == "ours" or "[" not in name)


def describe(name):
    entry = ADAPTERS.get(family(name))
    text = entry[2] if entry else "?"
    if "[" in name:
        text += f", kernel family {name[name.index('[') + 1:-1]}"
    return text


def is_ours(name):
    return family(name) == "ours"


def create(name):
    """Instantiate the adapter (worker side; imports torch and the library)."""
    import importlib

    module_name, class_name, _ = ADAPTERS[family(name)]
    module = importlib.import_module(f"{__name__}.{module_name}")
    return getattr(module, class_name)(name)
