#pragma once
// The one plain parameter block every front end fills (C++ API, tests,
// Python) and every backend reads. Plain data only: it is passed to CUDA
// kernels by value as a __grid_constant__ argument.
#include <cstdint>

namespace flashpp {

enum class ElemType : std::uint8_t { f32 = 0, f16 = 1, bf16 = 2, e4m3 = 3 };

struct AttnParams {
  // ---- forward tensors (element strides; last dim contiguous) ----
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;  // may be null in forward (not requested)

  // ---- backward tensors ----
  const void* dout = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;

  // Strides in elements. For varlen the batch stride is unused: row r of
  // sequence b lives at row (cu_seqlens[b] + r).
  std::int64_t q_batch_stride = 0, q_row_stride = 0, q_head_stride = 0;
  std::int64_t k_batch_stride = 0, k_row_stride = 0, k_head_stride = 0;
  std::int64_t v_batch_stride = 0, v_row_stride = 0, v_head_stride = 0;
  std::int64_t o_batch_stride = 0, o_row_stride = 0, o_head_stride = 0;
  std::int64_t do_batch_stride = 0, do_row_stride = 0, do_head_stride = 0;
  std::int64_t dq_batch_stride = 0, dq_row_stride = 0, dq_head_stride = 0;
  std::int64_t dk_batch_stride = 0, dk_row_stride = 0, dk_head_stride = 0;
  std::int64_t dv_batch_stride = 0, dv_row_stride = 0, dv_head_stride = 0;
  // LSE element (b, h, row) = lse[b * lse_batch_stride + h * lse_head_stride
  //                               + (cu_seqlens_q ? cu_seqlens_q[b] : 0) + row]
  std::int64_t lse_batch_stride = 0, lse_head_stride = 0;

  // ---- sizes ----
  int batch = 0;
  int seqlen_q = 0;  // fixed length, or max_seqlen_q for varlen
  int seqlen_k = 0;  // fixed length, or max_seqlen_k for varlen
  int heads_q = 0;
  int heads_kv = 0;
  int gqa_ratio = 1;  // heads_q / heads_kv
  int head_dim = 0;   // of q and k
  int head_dim_v = 0; // of v and out
  std::int64_t total_q = 0;  // varlen: rows of q (= cu_seqlens_q[batch])
  std::int64_t total_k = 0;

  // ---- varlen (device pointers for CUDA tensors) ----
  const std::int32_t* cu_seqlens_q = nullptr;
  const std::int32_t* cu_seqlens_k = nullptr;

  // ---- math ----
  float scale = 1.f;       // softmax_scale
  float scale_log2 = 1.f;  // softmax_scale * log2(e): exp(x*scale) = exp2(x*scale_log2)
  float softcap = 0.f;     // 0 = off
  // Resolved window relative to the bottom-right diagonal; -1 = unbounded.
  // Causal is window_right = 0.
  int window_left = -1;
  int window_right = -1;
  bool causal = false;  // informational: window_right == 0 came from causal
  bool deterministic = false;
  // out/lse belong to a superset of these keys (AttentionOptions::partial_keys).
  bool partial_keys = false;

  ElemType dtype = ElemType::bf16;
};

}  // namespace flashpp
