// CPU forward against the fp64 reference: random cases drawn fresh each run
// from a broad space, plus a fixed list of edge cases, in fp32/fp16/bf16.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "flashpp/attention.hpp"
#include "support/case_runner.hpp"
#include "support/drifting_scores.hpp"
#include "support/seed.hpp"

namespace flashpp::test {
namespace {

constexpr DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};

class CpuForwardRandom : public testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(CpuForwardRandom, MatchesReference) {
  const auto [dtype, index] = GetParam();
  auto rng = make_rng(std::string("CpuForwardRandom.") + short_dtype(dtype), std::uint64_t(index));
  const AttnCase c = sample_case(rng, dtype, kMaxCaseCost);
  expect_cpu_case_matches_reference(c, rng, /*backward=*/false);
}

INSTANTIATE_TEST_SUITE_P(Sampled, CpuForwardRandom,
                         testing::Combine(testing::ValuesIn(kDtypes), testing::Range(0, kRandomCasesPerDtype)),
                         [](const auto& info) {
                           return std::string(short_dtype(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param));
                         });

class CpuForwardEdge : public testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(CpuForwardEdge, MatchesReference) {
  const auto [dtype, index] = GetParam();
  const AttnCase c = edge_cases(dtype)[std::size_t(index)];
  auto rng = make_rng("CpuForwardEdge." + c.label + short_dtype(dtype));
  expect_cpu_case_matches_reference(c, rng, /*backward=*/false);
}

INSTANTIATE_TEST_SUITE_P(Fixed, CpuForwardEdge,
                         testing::Combine(testing::ValuesIn(kDtypes),
                                          testing::Range(0, int(edge_cases(DType::f32).size()))),
                         [](const auto& info) {
                           return edge_cases(std::get<0>(info.param))[std::size_t(std::get<1>(info.param))].label +
                                  "_" + short_dtype(std::get<0>(info.param));
                         });

// Rows whose max keeps moving along the keys (support/drifting_scores.hpp), in
// every dtype: the online softmax must follow each move. Short enough for CI.
TEST(CpuForward, DriftingRowMax) {
  int index = 0;
  for (DType dtype : kDtypes)
    for (bool causal : {false, true}) {
      auto rng = make_rng(std::string("CpuForward.DriftingRowMax.") + short_dtype(dtype), std::uint64_t(index));
      ++index;
      AttnCase c;
      c.label = "drifting_max";
      c.dtype = dtype;
      c.head_dim = c.head_dim_v = 64;
      c.heads_q = c.heads_kv = 2;
      c.seqlen_q = 40 + int(rng() % 24);
      c.seqlen_k = 1500 + int(rng() % 300);
      c.causal = causal;
      // 12 log2 units per 128 keys: the max moves by more than 8 on every tile.
      expect_cpu_case_matches_reference(c, rng, /*backward=*/false,
                                        [&](AttnTensors& t) { make_drifting_scores(c, t, rng, 12.0); });
    }
}

// Two runs of the same call give bitwise-identical out and LSE.
TEST(CpuForward, IsDeterministic) {
  for (DType dtype : kDtypes) {
    auto rng = make_rng(std::string("CpuForward.IsDeterministic.") + short_dtype(dtype));
    AttnCase c = sample_case(rng, dtype, kMaxCaseCost);
    while (c.total_q() == 0) c = sample_case(rng, dtype, kMaxCaseCost);
    c.deterministic = true;
    SCOPED_TRACE(c.describe());
    AttnTensors t = make_tensors(c, rng, false);
    run_forward(c, t);
    const std::vector<std::byte> out1 = storage_snapshot(t.out), lse1 = storage_snapshot(t.lse);
    t.out.poison();
    t.lse.poison();
    run_forward(c, t);
    EXPECT_TRUE(bitwise_equal(out1.data(), t.out.storage(), out1.size())) << "out differs between runs";
    EXPECT_TRUE(bitwise_equal(lse1.data(), t.lse.storage(), lse1.size())) << "lse differs between runs";
  }
}

}  // namespace
}  // namespace flashpp::test
