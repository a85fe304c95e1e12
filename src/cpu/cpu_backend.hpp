#pragma once
// CPU backend: the same tiled algorithm as the GPU kernels (online softmax,
// deferred normalization, LSE; backward recomputes P from LSE), threaded and
// vectorized, deterministic. Never allocates O(seqlen^2) memory.
#include <cstddef>

#include "common/params.hpp"

namespace flashpp::cpu {

std::size_t forward_workspace_bytes(const AttnParams& p);
void forward(const AttnParams& p, void* workspace);

std::size_t backward_workspace_bytes(const AttnParams& p);
void backward(const AttnParams& p, void* workspace);

}  // namespace flashpp::cpu
