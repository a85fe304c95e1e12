#pragma once
// The flashpp C++ API: exact attention, O = softmax(scale * Q K^T + mask) V,
// computed tile by tile so the score matrix never reaches memory.
//
// Layout (batch, seqlen, heads, head_dim), last dim contiguous, other strides
// arbitrary; varlen: (total_tokens, heads, head_dim) with cu_seqlens.
// LSE is fp32 (batch, heads_q, seqlen_q), or (heads_q, total_q) for varlen,
// row-contiguous. A query row that sees no key gets O = 0 and LSE = -inf.
// GQA/MQA: heads_q % heads_kv == 0; K/V heads are shared, never copied.
//
// The backend follows the tensors' device: CPU tensors run on the CPU
// backend, CUDA tensors on the kernels built for that GPU.
#include <cstddef>
#include <string>

#include "flashpp/error.hpp"
#include "flashpp/options.hpp"
#include "flashpp/tensor.hpp"

namespace flashpp {

// Scratch bytes forward() can use for these arguments: 0 for most configs; on a
// CUDA device 256 for varlen batches and for causal or windowed masks (a counter
// of the Hopper kernel's dynamic tile schedule, zeroed by each call on its
// stream). Varlen batches require it; masked fixed-length calls run without it,
// on a static tile order that is slower for many short rows.
std::size_t forward_workspace_bytes(const TensorView& q, const TensorView& k, const TensorView& v,
                                    const AttentionOptions& opts = {});

// out: same layout as q with v's head dim; lse: optional (undefined view = skip).
void forward(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
             const TensorView& lse, const AttentionOptions& opts = {}, Workspace workspace = {});

std::size_t backward_workspace_bytes(const TensorView& q, const TensorView& k, const TensorView& v,
                                     const AttentionOptions& opts = {});

// Gradients of the forward above. dq/dk/dv have the shapes of q/k/v (their own
// strides); every element of them is written.
void backward(const TensorView& dout, const TensorView& q, const TensorView& k, const TensorView& v,
              const TensorView& out, const TensorView& lse, const TensorView& dq, const TensorView& dk,
              const TensorView& dv, const AttentionOptions& opts = {}, Workspace workspace = {});

// Which backend/kernel would run these arguments, or why none can ("" = ok).
// Never throws for unsupported configs; throws Error only for invalid ones.
struct Selection {
  bool ok = false;
  std::string backend;  // "cpu", "cuda-sm80", "cuda-sm90", ...
  std::string reason;   // why not, when !ok
  std::string note;     // why a faster kernel family was passed over, e.g. the
                        // Hopper forward for unaligned strides ("" = none was)
};
Selection select_forward(const TensorView& q, const TensorView& k, const TensorView& v,
                         const AttentionOptions& opts = {});
Selection select_backward(const TensorView& q, const TensorView& k, const TensorView& v,
                          const AttentionOptions& opts = {});

// Library facts for users and bindings.
bool built_with_cuda() noexcept;
const char* version() noexcept;

}  // namespace flashpp
