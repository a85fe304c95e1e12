#pragma once
// One attention test case: shapes, mask, softcap, scale, input magnitude and
// the memory layout of every tensor. Cases are either drawn at random from a
// broad space (sample_case) or taken from a fixed list of edge cases
// (edge_cases). Device-agnostic: a case only describes; attention_tensors.hpp
// builds host tensors for it.
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "flashpp/options.hpp"
#include "flashpp/tensor.hpp"

namespace flashpp::test {

enum class LayoutKind : std::uint8_t { contiguous, padded, heads_outer, packed, shuffled };
const char* layout_kind_name(LayoutKind k);

// The tensors of one forward + backward call, in a fixed order.
enum class Role : std::uint8_t { q, k, v, out, lse, dout, dq, dk, dv };
inline constexpr int kRoles = 9;
const char* role_name(Role r);

struct AttnCase {
  std::string label = "random";
  DType dtype = DType::f16;
  bool varlen = false;
  int batch = 1;
  int seqlen_q = 1, seqlen_k = 1;         // fixed length
  std::vector<int> seqlens_q, seqlens_k;  // varlen: one entry per sequence
  int max_seqlen_extra = 0;               // varlen: max_seqlen_* = longest + extra
  int heads_q = 1, heads_kv = 1;
  int head_dim = 64, head_dim_v = 64;
  bool causal = false;
  std::int64_t window_left = -1, window_right = -1;
  float softcap = 0.f;
  std::optional<float> softmax_scale;
  bool deterministic = false;
  double q_magnitude = 1.0;  // > 1 makes logits large (naive exp would overflow)
  LayoutKind layout[kRoles] = {};
  int align = 8;  // pads/offsets are multiples of this many elements

  // Sequence lengths of sequence b (fixed-length cases repeat seqlen_q/k).
  int sq(int b) const { return varlen ? seqlens_q[b] : seqlen_q; }
  int sk(int b) const { return varlen ? seqlens_k[b] : seqlen_k; }
  std::int64_t total_q() const;
  std::int64_t total_k() const;
  int max_seqlen_q() const;
  int max_seqlen_k() const;
  // Multiply-adds of one naive forward: the unit of the runtime budget.
  double cost() const;
  // Options without cu_seqlens (the tensors supply those).
  AttentionOptions options() const;
  std::string describe() const;
};

// A random case for dtype whose cost() stays below max_cost.
AttnCase sample_case(std::mt19937_64& rng, DType dtype, double max_cost);

// Fixed edge cases for dtype (fully masked rows, empty sequences, batch 0,
// large logits, extreme head dims, packed/transposed inputs, ...).
std::vector<AttnCase> edge_cases(DType dtype);

}  // namespace flashpp::test
