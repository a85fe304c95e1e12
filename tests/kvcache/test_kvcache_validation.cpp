// Bad arguments to attention_with_kvcache raise flashpp::Error naming the
// argument, before anything is written.
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>

#include "kvcache/kvcache_case.hpp"
#include "support/seed.hpp"

namespace flashpp::test::kv {
namespace {

KVCase paged_case() {
  KVCase c;
  c.label = "valid_paged";
  c.dtype = DType::f16;
  c.batch = 2;
  c.seqlen_q = 2;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.head_dim = c.head_dim_v = 32;
  c.paged = true;
  c.page_size = 16;
  c.max_pages = 4;
  c.cache_lens = {20, 5};
  c.seqlen_new = 2;
  c.rotary_dim = 16;
  c.causal = true;
  return c;
}

KVCase contiguous_case() {
  KVCase c = paged_case();
  c.label = "valid_contiguous";
  c.paged = false;
  c.seqlen_cache = 40;
  c.use_batch_idx = true;
  c.extra_cache_rows = 2;
  return c;
}

// Calls with a corrupted copy of valid arguments; expects an Error about `arg`
// and an untouched cache.
void expect_rejected(const KVCase& c, const std::string& arg, const std::function<void(KVCacheArgs&, KVTensors&)>& corrupt,
                     const std::optional<AttentionOptions>& options = std::nullopt) {
  auto rng = make_rng("KVCacheValidation." + arg);
  KVTensors t = make_kv_tensors(c, rng);
  KVCacheArgs a = kv_host_args(c, t);
  const AttentionOptions opts = options ? *options : c.options();
  corrupt(a, t);
  const auto before = storage_snapshot(t.k_cache);
  try {
    attention_with_kvcache(a, opts);
    ADD_FAILURE() << "accepted bad " << arg;
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), arg) << e.what();
    EXPECT_NE(std::string(e.what()).find(arg), std::string::npos) << e.what();
  }
  EXPECT_TRUE(storage_snapshot(t.k_cache) == before) << "the cache was written by a rejected call";
}

TEST(KVCacheValidation, ValidArgumentsRun) {
  for (const KVCase& c : {paged_case(), contiguous_case()}) {
    auto rng = make_rng("KVCacheValidation.ValidArgumentsRun." + c.label);
    KVTensors t = make_kv_tensors(c, rng);
    EXPECT_NO_THROW(attention_with_kvcache(kv_host_args(c, t), c.options())) << c.describe();
    // Split counters are accepted (and unused) on the CPU.
    HostTensor counters(DType::i32, {std::int64_t(c.batch) * c.heads_q * c.seqlen_q});
    KVCacheArgs a = kv_host_args(c, t);
    a.split_counters = counters.view();
    EXPECT_NO_THROW(attention_with_kvcache(a, c.options())) << c.describe();
  }
}

TEST(KVCacheValidation, CacheSeqlensBeyondCapacity) {
  expect_rejected(paged_case(), "cache_seqlens", [](KVCacheArgs&, KVTensors& t) { t.cache_seqlens.set(1, 63); });
  expect_rejected(paged_case(), "cache_seqlens", [](KVCacheArgs&, KVTensors& t) { t.cache_seqlens.set(0, -1); });
  expect_rejected(contiguous_case(), "cache_seqlens", [](KVCacheArgs&, KVTensors& t) { t.cache_seqlens.set(0, 39); });
}

TEST(KVCacheValidation, PageOutsidePool) {
  expect_rejected(paged_case(), "block_table", [](KVCacheArgs&, KVTensors& t) { t.block_table.set(1, 9); });
  expect_rejected(paged_case(), "block_table", [](KVCacheArgs&, KVTensors& t) { t.block_table.set(4, -1); });
}

TEST(KVCacheValidation, BatchIndex) {
  expect_rejected(contiguous_case(), "cache_batch_idx", [](KVCacheArgs&, KVTensors& t) { t.cache_batch_idx.set(1, 4); });
  expect_rejected(contiguous_case(), "cache_batch_idx", [](KVCacheArgs&, KVTensors& t) {
    t.cache_batch_idx.set(1, t.cache_batch_idx.get(0));  // two sequences appending into one row
  });
  expect_rejected(paged_case(), "cache_batch_idx", [](KVCacheArgs& a, KVTensors&) { a.cache_batch_idx = a.cache_seqlens; });
}

TEST(KVCacheValidation, MismatchedHeadsAndDims) {
  expect_rejected(paged_case(), "k_cache", [](KVCacheArgs& a, KVTensors&) { a.k_cache.shape[2] = 3; a.v_cache.shape[2] = 3; });
  expect_rejected(paged_case(), "v_cache", [](KVCacheArgs& a, KVTensors&) { a.v_cache.shape[2] = 1; });
  expect_rejected(paged_case(), "k_cache", [](KVCacheArgs& a, KVTensors&) { a.k_cache.shape[3] = 24; });
  expect_rejected(paged_case(), "k_new", [](KVCacheArgs& a, KVTensors&) { a.k_new.shape[2] = 1; });
  expect_rejected(paged_case(), "v_new", [](KVCacheArgs& a, KVTensors&) { a.v_new.shape[3] = 16; });
  expect_rejected(paged_case(), "out", [](KVCacheArgs& a, KVTensors&) { a.out.shape[3] = 16; });
  expect_rejected(paged_case(), "q", [](KVCacheArgs& a, KVTensors&) { a.q.shape[3] = 12; a.k_cache.shape[3] = 12; });
  expect_rejected(paged_case(), "block_table", [](KVCacheArgs& a, KVTensors&) { a.block_table.shape[0] = 1; });
  expect_rejected(contiguous_case(), "k_cache", [](KVCacheArgs& a, KVTensors&) { a.cache_batch_idx = TensorView{}; });
}

TEST(KVCacheValidation, DtypesAndPairs) {
  expect_rejected(paged_case(), "k_cache", [](KVCacheArgs& a, KVTensors&) { a.k_cache.dtype = DType::bf16; });
  expect_rejected(paged_case(), "lse", [](KVCacheArgs& a, KVTensors&) { a.lse.dtype = DType::f16; });
  expect_rejected(paged_case(), "cache_seqlens", [](KVCacheArgs& a, KVTensors&) { a.cache_seqlens.dtype = DType::f32; });
  expect_rejected(paged_case(), "v_new", [](KVCacheArgs& a, KVTensors&) { a.v_new = TensorView{}; });
  expect_rejected(paged_case(), "cache_seqlens", [](KVCacheArgs& a, KVTensors&) { a.cache_seqlens = TensorView{}; });
}

TEST(KVCacheValidation, Rotary) {
  expect_rejected(paged_case(), "rotary_sin", [](KVCacheArgs& a, KVTensors&) { a.rotary_sin = TensorView{}; });
  expect_rejected(paged_case(), "rotary_cos", [](KVCacheArgs& a, KVTensors&) {
    a.k_new = a.v_new = TensorView{};
  });
  expect_rejected(paged_case(), "rotary_cos", [](KVCacheArgs& a, KVTensors&) {
    a.rotary_cos.shape[1] = a.rotary_sin.shape[1] = 4;  // rotary_dim 8
  });
  expect_rejected(paged_case(), "rotary_cos", [](KVCacheArgs& a, KVTensors&) {
    a.rotary_cos.shape[0] = a.rotary_sin.shape[0] = 21;  // sequence 0 needs position 21
  });
}

TEST(KVCacheValidation, OptionsAndSplits) {
  expect_rejected(paged_case(), "num_splits", [](KVCacheArgs& a, KVTensors&) { a.num_splits = -1; });
  expect_rejected(paged_case(), "num_splits", [](KVCacheArgs& a, KVTensors&) { a.num_splits = 1000; });
  expect_rejected(paged_case(), "validation_status", [](KVCacheArgs& a, KVTensors&) { a.validate_on_device = true; });
  expect_rejected(paged_case(), "validation_status", [](KVCacheArgs& a, KVTensors& t) {
    a.validate_on_device = true;
    a.validation_status = t.cache_seqlens.view();
  });
  expect_rejected(paged_case(), "split_counters", [](KVCacheArgs& a, KVTensors& t) {
    a.split_counters = t.cache_seqlens.view();  // 2 entries, needs batch * heads_q * seqlen_q = 16
  });
  expect_rejected(paged_case(), "split_counters", [](KVCacheArgs& a, KVTensors& t) { a.split_counters = t.lse.view(); });
  const HostTensor cu = make_cu_seqlens({1, 1});
  AttentionOptions varlen;
  varlen.causal = true;
  varlen.cu_seqlens_q = cu.view();
  varlen.cu_seqlens_k = cu.view();
  expect_rejected(paged_case(), "cu_seqlens_q", [](KVCacheArgs&, KVTensors&) {}, varlen);
  AttentionOptions bad_window;
  bad_window.causal = true;
  bad_window.window_right = 3;
  expect_rejected(paged_case(), "window", [](KVCacheArgs&, KVTensors&) {}, bad_window);
}

TEST(KVCacheValidation, StatusWordsNameTheArgument) {
  HostTensor st(DType::i32, {4});
  for (int i = 0; i < 4; ++i) st.set(i, 0);
  EXPECT_NO_THROW(check_kvcache_status(st.view()));
  st.set(0, int(KVCacheFault::page_out_of_range));
  st.set(1, 3);
  st.set(2, 7);
  st.set(3, 12345);
  try {
    check_kvcache_status(st.view());
    ADD_FAILURE() << "no error for a recorded fault";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "block_table");
    EXPECT_NE(std::string(e.what()).find("12345"), std::string::npos) << e.what();
  }
  const std::int32_t words[4] = {int(KVCacheFault::cache_seqlen_out_of_range), 2, 0, 99};
  EXPECT_NE(describe_kvcache_status(words).find("sequence 2"), std::string::npos);
}

}  // namespace
}  // namespace flashpp::test::kv
