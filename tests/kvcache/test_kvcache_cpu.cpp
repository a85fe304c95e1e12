// CPU attention with a KV cache against the fp64 reference: random cases drawn
// fresh each run (contiguous and shuffled paged caches, ragged lengths,
// append with and without rotary, masks, softcap, explicit and automatic
// split counts) and fixed edge cases, in fp32, fp16 and bf16.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "kvcache/kvcache_case.hpp"
#include "support/expect.hpp"
#include "support/seed.hpp"

namespace flashpp::test::kv {
namespace {

constexpr DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};
constexpr int kRandomCases = 30;

const char* short_name(DType t) { return t == DType::f32 ? "fp32" : t == DType::f16 ? "fp16" : "bf16"; }

void expect_case_matches_reference(const KVCase& c, std::mt19937_64& rng) {
  KVTensors t = make_kv_tensors(c, rng);
  SCOPED_TRACE("case: " + c.describe() + "\n" + t.describe());
  const KVExpected e = kv_reference(c, t);
  attention_with_kvcache(kv_host_args(c, t), c.options());
  const KVCheck r = check_kv_results(c, t, e);
  expect_within_tolerance(r.tolerance);
  expect_no_messages(r.problems, "kvcache");
}

class KVCacheCpuRandom : public testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(KVCacheCpuRandom, MatchesReference) {
  const auto [dtype, index] = GetParam();
  auto rng = make_rng(std::string("KVCacheCpuRandom.") + short_name(dtype), std::uint64_t(index));
  expect_case_matches_reference(sample_kv_case(rng, dtype, false), rng);
}

INSTANTIATE_TEST_SUITE_P(Sampled, KVCacheCpuRandom,
                         testing::Combine(testing::ValuesIn(kDtypes), testing::Range(0, kRandomCases)),
                         [](const auto& info) {
                           return std::string(short_name(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param));
                         });

class KVCacheCpuEdge : public testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(KVCacheCpuEdge, MatchesReference) {
  const auto [dtype, index] = GetParam();
  const KVCase c = kv_edge_cases(dtype)[std::size_t(index)];
  auto rng = make_rng("KVCacheCpuEdge." + c.label + short_name(dtype));
  expect_case_matches_reference(c, rng);
}

INSTANTIATE_TEST_SUITE_P(Fixed, KVCacheCpuEdge,
                         testing::Combine(testing::ValuesIn(kDtypes),
                                          testing::Range(0, int(kv_edge_cases(DType::f32).size()))),
                         [](const auto& info) {
                           return kv_edge_cases(std::get<0>(info.param))[std::size_t(std::get<1>(info.param))].label +
                                  "_" + short_name(std::get<0>(info.param));
                         });

// Any split count gives the same attention up to fp32 rounding of the merge.
TEST(KVCacheCpu, SplitCountsAgree) {
  auto rng = make_rng("KVCacheCpu.SplitCountsAgree");
  KVCase c = sample_kv_case(rng, DType::f32, false);
  c.seqlen_new = 0;
  c.rotary_dim = 0;
  c.have_seqlens = true;
  c.cache_lens.assign(std::size_t(c.batch), c.capacity());
  c.with_lse = true;
  SCOPED_TRACE(c.describe());
  KVTensors t = make_kv_tensors(c, rng);
  std::vector<double> out1, lse1;
  for (int splits : {1, 2, 5, 17}) {
    c.num_splits = splits;
    attention_with_kvcache(kv_host_args(c, t), c.options());
    const auto out = t.out.to_dense(), lse = t.lse.to_dense();
    if (splits == 1) {
      out1 = out;
      lse1 = lse;
      continue;
    }
    EXPECT_LE(max_abs_diff(out, out1), 1e-5) << "splits " << splits;
    EXPECT_LE(max_abs_diff(lse, lse1), 1e-5) << "splits " << splits;
  }
}

// Two calls give bitwise-identical results (the append is idempotent).
TEST(KVCacheCpu, IsDeterministic) {
  auto rng = make_rng("KVCacheCpu.IsDeterministic");
  const KVCase c = sample_kv_case(rng, DType::bf16, false);
  SCOPED_TRACE(c.describe());
  KVTensors t = make_kv_tensors(c, rng);
  attention_with_kvcache(kv_host_args(c, t), c.options());
  const auto out = storage_snapshot(t.out);
  const auto kc = storage_snapshot(t.k_cache);
  attention_with_kvcache(kv_host_args(c, t), c.options());
  EXPECT_TRUE(storage_snapshot(t.out) == out);
  EXPECT_TRUE(storage_snapshot(t.k_cache) == kc);
}

TEST(KVCacheCpu, ReportsSplitsAndWorkspace) {
  auto rng = make_rng("KVCacheCpu.ReportsSplitsAndWorkspace");
  KVCase c = sample_kv_case(rng, DType::f16, false);
  c.num_splits = 3;
  KVTensors t = make_kv_tensors(c, rng);
  const KVCacheArgs a = kv_host_args(c, t);
  EXPECT_EQ(kvcache_num_splits(a, c.options()), 3);
  EXPECT_EQ(kvcache_workspace_bytes(a, c.options()), 0u);
  const Selection s = select_kvcache(a, c.options());
  EXPECT_TRUE(s.ok);
  EXPECT_EQ(s.backend, "cpu");
}

}  // namespace
}  // namespace flashpp::test::kv
