#pragma once
// Host-side entry points of the CUDA backend (implemented in src/cuda/*.cu when
// flashpp is built with CUDA, otherwise by src/api/cuda_unavailable.cpp).
#include <cstddef>
#include <string>

#include "common/params.hpp"

namespace flashpp::cuda {

struct Choice {
  bool ok = false;
  std::string kernel;  // e.g. "cuda-sm80 fwd bf16 hdim128"
  std::string reason;  // why not, when !ok
  std::string note;    // why a faster kernel family was passed over ("" = none was)
};

// device: CUDA ordinal of the tensors.
Choice select_forward(const AttnParams& p, int device);
Choice select_backward(const AttnParams& p, int device);

std::size_t forward_workspace_bytes(const AttnParams& p, int device);
void forward(const AttnParams& p, void* workspace, std::size_t workspace_bytes, void* stream, int device);

std::size_t backward_workspace_bytes(const AttnParams& p, int device);
void backward(const AttnParams& p, void* workspace, std::size_t workspace_bytes, void* stream, int device);

}  // namespace flashpp::cuda
