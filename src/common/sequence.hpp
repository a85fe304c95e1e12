#pragma once
// Where sequence b of a (possibly varlen) batch lives: its lengths and the
// global row of its first query/key. Host-side only (reads cu_seqlens).
#include <cstdint>

#include "common/params.hpp"

namespace flashpp {

struct SequenceInfo {
  int seqlen_q;
  int seqlen_k;
  std::int64_t q_row0;  // global row of query 0 (varlen) or 0
  std::int64_t k_row0;
  std::int64_t lse_row0;  // row offset inside an LSE head: cu_seqlens_q[b] or 0
};

inline SequenceInfo host_sequence(const AttnParams& p, int b) {
  if (p.cu_seqlens_q) {
    const std::int32_t q0 = p.cu_seqlens_q[b], k0 = p.cu_seqlens_k[b];
    return {p.cu_seqlens_q[b + 1] - q0, p.cu_seqlens_k[b + 1] - k0, q0, k0, q0};
  }
  return {p.seqlen_q, p.seqlen_k, 0, 0, 0};
}

// Element offset of (batch b, row r, head h) for a tensor with the given strides.
inline std::int64_t row_offset(std::int64_t batch_stride, std::int64_t row_stride, std::int64_t head_stride, int b,
                               std::int64_t row, int h) {
  return b * batch_stride + row * row_stride + h * head_stride;
}

}  // namespace flashpp
