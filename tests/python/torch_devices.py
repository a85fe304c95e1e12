"""Devices and dtypes the torch-layer tests run on; CUDA cases skip with a
reason where there is no GPU or flashpp was built without CUDA."""

import pytest
import torch

import flashpp


def cuda_skip_reason():
    if not flashpp.built_with_cuda():
        return "flashpp was built without the CUDA backend"
    if not torch.cuda.is_available():
        return "no CUDA device available to torch"
    return None


CUDA_REASON = cuda_skip_reason()
needs_cuda = pytest.mark.skipif(CUDA_REASON is not None, reason=CUDA_REASON or "")

# (device, dtype) pairs: the CPU backend takes fp32/fp16/bf16, CUDA fp16/bf16.
DEVICE_DTYPES = [
    pytest.param("cpu", torch.float32, id="cpu-float32"),
    pytest.param("cpu", torch.float16, id="cpu-float16"),
    pytest.param("cpu", torch.bfloat16, id="cpu-bfloat16"),
    pytest.param("cuda", torch.float16, id="cuda-float16", marks=needs_cuda),
    pytest.param("cuda", torch.bfloat16, id="cuda-bfloat16", marks=needs_cuda),
]

DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=needs_cuda)]


def low_precision(device):
    """The dtype to use for single-dtype tests on `device`."""
    return torch.float32 if device == "cpu" else torch.bfloat16
