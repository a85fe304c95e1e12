#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

#include "flashpp/tensor.hpp"

namespace flashpp {

// Options shared by forward and backward. Semantics follow flash_attn:
// causal and windows are aligned bottom-right, so query i sees key j when
//   i + seqlen_k - seqlen_q - window_left <= j <= i + seqlen_k - seqlen_q + window_right
// (a bound of -1 is unbounded; causal means window_right = 0).
struct AttentionOptions {
  std::optional<float> softmax_scale;  // default 1/sqrt(head_dim)
  bool causal = false;
  std::int64_t window_left = -1;
  std::int64_t window_right = -1;
  float softcap = 0.f;  // > 0: scores become softcap * tanh(scores / softcap)
  // Backward: bitwise-identical gradients from run to run (may be slower).
  bool deterministic = false;
  // Backward: out and softmax_lse come from a larger key set than k/v, e.g.
  // one shard of a ring (context parallelism). The backward then uses the FA2
  // form, P = exp(scale * q.k - LSE) with no renormalization and
  // D = rowsum(dout * out), so the gradients of the shards add up to those of
  // the whole attention: dq summed over the shards, dk/dv per shard. The
  // CUDA backward always works this way; the CPU backward by default derives
  // D and a per-row normalization from k/v themselves (more accurate when out
  // and LSE belong to exactly these keys, wrong otherwise).
  bool partial_keys = false;

  // Variable-length batches: q/k/v are (total_tokens, heads, head_dim) and
  // cu_seqlens_* are int32 (batch + 1) prefix sums on the tensors' device.
  TensorView cu_seqlens_q;
  TensorView cu_seqlens_k;
  std::int64_t max_seqlen_q = 0;
  std::int64_t max_seqlen_k = 0;

  // cudaStream_t for CUDA tensors (nullptr = legacy default stream).
  void* stream = nullptr;
};

// Scratch memory owned by the caller. Ask forward_workspace_bytes /
// backward_workspace_bytes for the size; on CUDA it must be device memory
// aligned to 256 bytes, on the CPU host memory aligned to 64 bytes.
struct Workspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};

}  // namespace flashpp
