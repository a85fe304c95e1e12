#pragma once
// One KV-cache attention test case and everything the CPU and GPU tests do
// with it: random host tensors (shuffled page pools, ragged cache lengths,
// padded layouts, poisoned outputs), the reference (append and rotary applied
// in fp64 on the host, then src/reference on the full per-sequence K/V) and
// the checks (tolerance rule on out/LSE, exact zero rows where nothing is
// visible, cache slots: appended ones hold the rotated new keys, every other
// one is untouched, nothing outside any view is written).
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "flashpp/kvcache.hpp"
#include "support/compare.hpp"
#include "support/host_tensor.hpp"

namespace flashpp::test::kv {

struct KVCase {
  std::string label = "random";
  DType dtype = DType::bf16;
  int batch = 1, seqlen_q = 1, heads_q = 4, heads_kv = 1, head_dim = 64, head_dim_v = 64;
  bool paged = false;
  int page_size = 16;   // paged
  int max_pages = 1;    // paged: block_table columns
  int extra_pages = 0;  // paged: pool pages no sequence uses
  int seqlen_cache = 1; // contiguous: slots per cache row
  bool use_batch_idx = false;  // contiguous: sequences map to shuffled cache rows
  int extra_cache_rows = 0;
  std::vector<int> cache_lens;  // tokens per sequence before the call
  bool have_seqlens = true;     // false: every sequence is full (no cache_seqlens)
  int seqlen_new = 0;
  int rotary_dim = 0;  // 0: no rotary
  bool rotary_interleaved = false;
  int seqlen_ro_extra = 0;
  bool causal = false;
  std::int64_t window_left = -1, window_right = -1;
  float softcap = 0.f;
  std::optional<float> softmax_scale;
  int num_splits = 0;
  bool with_lse = true;
  double q_magnitude = 1.0;
  bool padded_layouts = false;

  int capacity() const { return paged ? max_pages * page_size : seqlen_cache; }
  int cache_len(int b) const { return have_seqlens ? cache_lens[std::size_t(b)] : capacity(); }
  int seqlen_k(int b) const { return cache_len(b) + seqlen_new; }
  AttentionOptions options() const;
  std::string describe() const;
  // Multiply-adds of one naive reference pass (runtime budget of a case).
  double cost() const;
};

// A random case. `large` draws GPU-sized caches (thousands of slots, page
// sizes 1/16/64/256 and odd ones); otherwise CPU-sized ones.
KVCase sample_kv_case(std::mt19937_64& rng, DType dtype, bool large);

// Fixed edge cases (empty caches, fully masked rows, many empty splits, page
// size 1 and 256, rotary over the whole head, wide GQA groups, ...).
std::vector<KVCase> kv_edge_cases(DType dtype);

struct KVTensors {
  HostTensor q, k_cache, v_cache, k_new, v_new;
  HostTensor cache_seqlens, cache_batch_idx, block_table, rotary_cos, rotary_sin;
  HostTensor out, lse, status;
  std::vector<double> k_cache0, v_cache0;  // dense cache contents before the call

  // Every tensor, for copying storage to and from a device.
  std::vector<HostTensor*> all();
  std::string describe() const;
};

KVTensors make_kv_tensors(const KVCase& c, std::mt19937_64& rng);

// The call's arguments over views produced by `view` (host views, or the same
// geometry over device copies). Undefined optional tensors stay undefined.
KVCacheArgs kv_args(const KVCase& c, const KVTensors& t, const std::function<TensorView(const HostTensor&)>& view);
KVCacheArgs kv_host_args(const KVCase& c, const KVTensors& t);

struct KVExpected {
  std::vector<double> out_f64, lse_f64, out_naive, lse_naive;  // (b, sq, hq, dv), (b, hq, sq)
  std::vector<double> k_cache, v_cache;    // dense cache after the append
  std::vector<char> k_written, v_written;  // 1 where the append writes
  std::vector<double> k_slack;             // rotation term sizes of appended k elements
};

// Reads the inputs of t (q, k_new, v_new, the cache as it was before the call,
// the tables, cos/sin).
KVExpected kv_reference(const KVCase& c, const KVTensors& t);

struct KVCheck {
  std::vector<ToleranceResult> tolerance;
  std::vector<std::string> problems;
};

// Checks t's outputs and cache after a call against e.
KVCheck check_kv_results(const KVCase& c, const KVTensors& t, const KVExpected& e);

// Largest |a - b| over two dense outputs (for reports).
double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace flashpp::test::kv
