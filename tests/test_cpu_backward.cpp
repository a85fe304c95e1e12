// CPU backward against the fp64 reference (random dout; dq/dk/dv compared;
// rows with no visible key must get exactly zero gradients), determinism of
// deterministic=true, and the workspace contract.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "flashpp/attention.hpp"
#include "support/case_runner.hpp"
#include "support/seed.hpp"

namespace flashpp::test {
namespace {

constexpr DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};

class CpuBackwardRandom : public testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(CpuBackwardRandom, MatchesReference) {
  const auto [dtype, index] = GetParam();
  auto rng = make_rng(std::string("CpuBackwardRandom.") + short_dtype(dtype), std::uint64_t(index));
  const AttnCase c = sample_case(rng, dtype, kMaxCaseCost);
  expect_cpu_case_matches_reference(c, rng, /*backward=*/true);
}

INSTANTIATE_TEST_SUITE_P(Sampled, CpuBackwardRandom,
                         testing::Combine(testing::ValuesIn(kDtypes), testing::Range(0, kRandomCasesPerDtype)),
                         [](const auto& info) {
                           return std::string(short_dtype(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param));
                         });

class CpuBackwardEdge : public testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(CpuBackwardEdge, MatchesReference) {
  const auto [dtype, index] = GetParam();
  const AttnCase c = edge_cases(dtype)[std::size_t(index)];
  auto rng = make_rng("CpuBackwardEdge." + c.label + short_dtype(dtype));
  expect_cpu_case_matches_reference(c, rng, /*backward=*/true);
}

INSTANTIATE_TEST_SUITE_P(Fixed, CpuBackwardEdge,
                         testing::Combine(testing::ValuesIn(kDtypes),
                                          testing::Range(0, int(edge_cases(DType::f32).size()))),
                         [](const auto& info) {
                           return edge_cases(std::get<0>(info.param))[std::size_t(std::get<1>(info.param))].label +
                                  "_" + short_dtype(std::get<0>(info.param));
                         });

// deterministic=true: two backward runs give bitwise-identical dq/dk/dv. GQA
// and long key sequences are forced so that any reduction across heads or key
// blocks would have a chance to reorder.
TEST(CpuBackward, DeterministicIsBitwiseReproducible) {
  for (DType dtype : kDtypes) {
    for (int trial = 0; trial < 2; ++trial) {
      auto rng = make_rng(std::string("CpuBackward.Deterministic.") + short_dtype(dtype), std::uint64_t(trial));
      AttnCase c = sample_case(rng, dtype, kMaxCaseCost);
      c.varlen = false;
      c.batch = 2;
      c.seqlen_q = 130;
      c.seqlen_k = 257;
      c.heads_q = 4;
      c.heads_kv = trial == 0 ? 1 : 2;
      c.head_dim = c.head_dim_v = 64;
      c.deterministic = true;
      SCOPED_TRACE(c.describe());
      AttnTensors t = make_tensors(c, rng, true);
      run_forward(c, t);
      run_backward(c, t);
      const auto dq = storage_snapshot(t.dq), dk = storage_snapshot(t.dk), dv = storage_snapshot(t.dv);
      t.dq.poison();
      t.dk.poison();
      t.dv.poison();
      run_backward(c, t);
      EXPECT_TRUE(bitwise_equal(dq.data(), t.dq.storage(), dq.size())) << "dq differs between runs";
      EXPECT_TRUE(bitwise_equal(dk.data(), t.dk.storage(), dk.size())) << "dk differs between runs";
      EXPECT_TRUE(bitwise_equal(dv.data(), t.dv.storage(), dv.size())) << "dv differs between runs";
    }
  }
}

// Configurations likely to need scratch memory in either pass.
std::vector<AttnCase> workspace_probes() {
  std::vector<AttnCase> v;
  for (bool det : {false, true})
    for (bool varlen : {false, true}) {
      AttnCase c;
      c.dtype = DType::bf16;
      c.deterministic = det;
      c.heads_q = 4;
      c.heads_kv = 1;
      c.head_dim = c.head_dim_v = 128;
      if (varlen) {
        c.varlen = true;
        c.batch = 3;
        c.seqlens_q = {130, 0, 257};
        c.seqlens_k = {257, 7, 257};
      } else {
        c.batch = 2;
        c.seqlen_q = 257;
        c.seqlen_k = 257;
      }
      v.push_back(c);
    }
  return v;
}

// The API requires the workspace that *_workspace_bytes asks for: exactly
// that much works (run_forward/run_backward allocate exactly), less is an
// Error naming "workspace".
TEST(CpuWorkspace, TooSmallIsRejected) {
  int probed_nonzero = 0;
  for (const AttnCase& c : workspace_probes()) {
    SCOPED_TRACE(c.describe());
    auto rng = make_rng("CpuWorkspace.TooSmall");
    AttnTensors t = make_tensors(c, rng, true);
    const AttentionOptions o = t.options(c);
    const std::size_t fwd = forward_workspace_bytes(t.q.view(), t.k.view(), t.v.view(), o);
    const std::size_t bwd = backward_workspace_bytes(t.q.view(), t.k.view(), t.v.view(), o);
    EXPECT_NO_THROW(run_forward(c, t));
    EXPECT_NO_THROW(run_backward(c, t));
    if (fwd > 0) {
      ++probed_nonzero;
      const HostWorkspace small(fwd - 1);
      Workspace ws = small.get();
      try {
        forward(t.q.view(), t.k.view(), t.v.view(), t.out.view(), t.lse.view(), o, ws);
        ADD_FAILURE() << "forward accepted " << ws.bytes << " of " << fwd << " workspace bytes";
      } catch (const Error& e) {
        EXPECT_EQ(e.argument(), "workspace") << e.what();
      }
      EXPECT_THROW(forward(t.q.view(), t.k.view(), t.v.view(), t.out.view(), t.lse.view(), o, Workspace{}), Error);
    }
    if (bwd > 0) {
      ++probed_nonzero;
      const HostWorkspace small(bwd - 1);
      try {
        backward(t.dout.view(), t.q.view(), t.k.view(), t.v.view(), t.out.view(), t.lse.view(), t.dq.view(),
                 t.dk.view(), t.dv.view(), o, small.get());
        ADD_FAILURE() << "backward accepted " << bwd - 1 << " of " << bwd << " workspace bytes";
      } catch (const Error& e) {
        EXPECT_EQ(e.argument(), "workspace") << e.what();
        EXPECT_NE(std::string(e.what()).find(std::to_string(bwd)), std::string::npos) << e.what();
      }
      // Null data with a claimed size is rejected too.
      Workspace fake{nullptr, bwd};
      EXPECT_THROW(backward(t.dout.view(), t.q.view(), t.k.view(), t.v.view(), t.out.view(), t.lse.view(),
                            t.dq.view(), t.dk.view(), t.dv.view(), o, fake),
                   Error);
    }
  }
  if (probed_nonzero == 0) GTEST_SKIP() << "the CPU backend needs no workspace for any probed configuration";
}

}  // namespace
}  // namespace flashpp::test
