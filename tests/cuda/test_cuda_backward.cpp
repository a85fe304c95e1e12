// CUDA backward (dQ, dK, dV, after our own CUDA forward) against the fp64
// reference: the CPU suite's random and edge cases (fp16/bf16; each random case
// draws deterministic on or off), multi-tile cases in both modes, and bitwise
// repeatability of the deterministic mode.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <tuple>

#include "flashpp/attention.hpp"
#include "gpu_case_runner.hpp"
#include "support/attention_case.hpp"
#include "support/seed.hpp"

namespace flashpp::test::gpu {
namespace {

class CudaBackwardRandom : public testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(CudaBackwardRandom, MatchesReference) {
  FLASHPP_REQUIRE_GPU();
  const auto [dtype, index] = GetParam();
  auto rng = make_rng(std::string("CudaBackwardRandom.") + gpu_dtype_name(dtype), std::uint64_t(index));
  const AttnCase c = on_gpu(sample_case(rng, dtype, kGpuMaxCaseCost));
  expect_gpu_case_matches_reference(c, rng, /*backward=*/true);
}

INSTANTIATE_TEST_SUITE_P(Sampled, CudaBackwardRandom,
                         testing::Combine(testing::ValuesIn(kGpuDtypes), testing::Range(0, kGpuRandomCasesPerDtype)),
                         [](const auto& info) {
                           return std::string(gpu_dtype_name(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param));
                         });

class CudaBackwardEdge : public testing::TestWithParam<std::tuple<DType, int, bool>> {};

TEST_P(CudaBackwardEdge, MatchesReference) {
  FLASHPP_REQUIRE_GPU();
  const auto [dtype, index, deterministic] = GetParam();
  AttnCase c = on_gpu(edge_cases(dtype)[std::size_t(index)]);
  c.deterministic = deterministic;
  auto rng = make_rng("CudaBackwardEdge." + c.label + gpu_dtype_name(dtype) + (deterministic ? "det" : ""));
  expect_gpu_case_matches_reference(c, rng, /*backward=*/true);
}

INSTANTIATE_TEST_SUITE_P(Fixed, CudaBackwardEdge,
                         testing::Combine(testing::ValuesIn(kGpuDtypes),
                                          testing::Range(0, int(edge_cases(DType::f16).size())), testing::Bool()),
                         [](const auto& info) {
                           return edge_cases(std::get<0>(info.param))[std::size_t(std::get<1>(info.param))].label +
                                  "_" + gpu_dtype_name(std::get<0>(info.param)) +
                                  (std::get<2>(info.param) ? "_det" : "_atomic");
                         });

// On an sm_90 GPU head dim 64 and 128 calls must take the Hopper backward by default,
// or these cases would only check the FA2-class kernel there (the "fa2bwd." run forces
// that one: FLASHPP_CUDA_BACKWARD_FAMILY=sm80).
TEST(CudaBackward, HopperKernelTakesHeadDims64And128) {
  FLASHPP_REQUIRE_GPU();
  const char* family = std::getenv("FLASHPP_CUDA_BACKWARD_FAMILY");
  if (family != nullptr && std::string(family) == "sm80")
    GTEST_SKIP() << "the fa2bwd. run forces the FA2-class backward (FLASHPP_CUDA_BACKWARD_FAMILY=sm80)";
  auto hopper = [](const flashpp::Selection& s) { return s.backend.rfind("cuda-sm90", 0) == 0; };
  for (int d : {64, 128}) {
    AttnCase c;
    c.label = "hopper_backward_selected";
    c.dtype = DType::bf16;
    c.head_dim = c.head_dim_v = d;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.seqlen_q = 200;
    c.seqlen_k = 300;
    c.causal = true;
    c = on_gpu(c);
    auto rng = make_rng("CudaBackward.HopperSelected", std::uint64_t(d));
    AttnTensors t = make_tensors(c, rng, true);
    DeviceCase dev(c, t);
    const AttentionOptions opts = dev.options(nullptr);
    if (!hopper(flashpp::select_forward(dev.view(Role::q), dev.view(Role::k), dev.view(Role::v), opts)))
      GTEST_SKIP() << "not an sm_90 GPU (the forward does not take the Hopper family)";
    const flashpp::Selection s =
        flashpp::select_backward(dev.view(Role::q), dev.view(Role::k), dev.view(Role::v), opts);
    EXPECT_TRUE(s.ok) << s.reason;
    EXPECT_EQ(s.backend.rfind("cuda-sm90 bwd bf16 hdim" + std::to_string(d), 0), 0u)
        << s.backend << ": " << s.reason << " " << s.note;
  }
}

// Several key blocks, query blocks and GQA heads per block, at every compiled head dim.
TEST(CudaBackward, MultiTileCases) {
  FLASHPP_REQUIRE_GPU();
  int index = 0;
  for (DType dtype : kGpuDtypes)
    for (int d : {32, 64, 96, 128, 192, 256})
      for (bool det : {false, true}) {
        auto rng = make_rng(std::string("CudaBackward.MultiTile.") + gpu_dtype_name(dtype), std::uint64_t(index++));
        AttnCase c;
        c.label = "multi_tile_d" + std::to_string(d) + (det ? "_det" : "");
        c.dtype = dtype;
        c.batch = 2;
        c.seqlen_q = 200 + int(rng() % 150);
        c.seqlen_k = 250 + int(rng() % 200);
        c.heads_q = 4;
        c.heads_kv = (index % 2) ? 1 : 2;
        c.head_dim = c.head_dim_v = d;
        c.causal = (index % 4) < 2;
        if (index % 3 == 0) c.window_left = 70;
        if (index % 5 == 0) c.softcap = 20.f;
        c.deterministic = det;
        expect_gpu_case_matches_reference(on_gpu(c), rng, /*backward=*/true);
      }
}

// Rows that see two or three keys, one dominant, under a large softmax_scale: dS is a
// small difference there, and D = rowsum(dO * O) from the 16-bit output is off by more
// than the naive reference's own rounding (about 1 draw in 12 at two keys, by a CPU
// emulation). The backward takes D from P and dP for such rows; these draws cover
// fixed length, a narrow sliding window over long rows, and varlen. Then rows of
// exactly one key under huge logits, where D must equal dP exactly (dS = 0).
TEST(CudaBackward, FewKeysLargeScale) {
  FLASHPP_REQUIRE_GPU();
  int index = 0;
  for (DType dtype : kGpuDtypes)
    for (int draw = 0; draw < 24; ++draw) {
      auto rng = make_rng(std::string("CudaBackward.FewKeys.") + gpu_dtype_name(dtype), std::uint64_t(index++));
      AttnCase c;
      c.label = "few_keys_large_scale";
      c.dtype = dtype;
      c.batch = 3;
      c.heads_q = 3;
      c.heads_kv = draw % 2 ? 1 : 3;
      c.head_dim = c.head_dim_v = draw % 3 == 0 ? 128 : 192;
      c.causal = true;
      c.softmax_scale = 0.88f;
      if (draw % 4 == 3) {  // two keys per row over rows longer than a tile
        c.seqlen_q = c.seqlen_k = 150;
        c.window_left = 1;
      } else if (draw % 4 == 2) {
        c.varlen = true;
        c.seqlens_q = {2, 0, 3};
        c.seqlens_k = {2, 1, 3};
      } else {
        c.seqlen_q = c.seqlen_k = 2 + draw % 2;
      }
      expect_gpu_case_matches_reference(on_gpu(c), rng, /*backward=*/true);
    }
  for (DType dtype : kGpuDtypes)
    for (int draw = 0; draw < 6; ++draw) {
      auto rng = make_rng(std::string("CudaBackward.OneKey.") + gpu_dtype_name(dtype), std::uint64_t(index++));
      AttnCase c;
      c.label = "one_key_large_logits";
      c.dtype = dtype;
      c.batch = 3;
      c.heads_q = 4;
      c.heads_kv = 2;
      c.head_dim = c.head_dim_v = draw % 2 ? 160 : 64;
      c.seqlen_q = draw < 3 ? 1 : 40;
      c.seqlen_k = 63;
      c.window_left = c.window_right = 0;  // each row sees the key on its diagonal only
      c.q_magnitude = 80.0;
      expect_gpu_case_matches_reference(on_gpu(c), rng, /*backward=*/true);
    }
}

// Long rows (more than the short-row pass's 64 keys) with most, but not all, of their
// mass on one key: dS of that key is (1 - P) times the spread of dP, and D from the
// 16-bit O is off by ~u |dP| / 4, which by a CPU emulation of these draws fails the
// tolerance rule in one draw in five to nine; the main kernel marks such rows
// (P >= 1/2) for the exact-D passes. Single rows, so no other row's gradient hides
// the error; without the exact D all 16 draws of a dtype pass with probability < 0.15.
TEST(CudaBackward, ConcentratedLongRows) {
  FLASHPP_REQUIRE_GPU();
  int index = 0;
  for (DType dtype : kGpuDtypes)
    for (int draw = 0; draw < 16; ++draw) {
      auto rng = make_rng(std::string("CudaBackward.Concentrated.") + gpu_dtype_name(dtype), std::uint64_t(index++));
      AttnCase c;
      c.label = "concentrated_long_rows";
      c.dtype = dtype;
      c.batch = 1;
      c.heads_q = 3;
      c.heads_kv = 1;
      c.head_dim = c.head_dim_v = draw % 2 ? 32 : 64;
      c.seqlen_q = 1;
      c.seqlen_k = 65 + int(rng() % 200);
      c.q_magnitude = draw % 3 == 0 ? 40.0 : 16.0;
      c.deterministic = draw % 4 == 1;
      expect_gpu_case_matches_reference(on_gpu(c), rng, /*backward=*/true);
    }
}

// deterministic = true: two runs give bitwise-identical dq, dk, dv.
TEST(CudaBackward, DeterministicModeIsBitwiseRepeatable) {
  FLASHPP_REQUIRE_GPU();
  int index = 0;
  for (DType dtype : kGpuDtypes)
    for (int round = 0; round < 3; ++round) {
      auto rng = make_rng(std::string("CudaBackward.Deterministic.") + gpu_dtype_name(dtype), std::uint64_t(index++));
      AttnCase c;
      c.label = "deterministic";
      c.dtype = dtype;
      c.batch = 2;
      c.seqlen_q = 400 + int(rng() % 300);
      c.seqlen_k = 400 + int(rng() % 300);
      c.heads_q = 4;
      c.heads_kv = 2;
      c.head_dim = c.head_dim_v = round == 0 ? 64 : round == 1 ? 128 : 256;
      c.causal = round == 1;
      c.deterministic = true;
      c = on_gpu(c);
      SCOPED_TRACE(c.describe());
      AttnTensors t = make_tensors(c, rng, true);
      DeviceCase dev(c, t);
      dev.run_forward();
      dev.run_backward();
      dev.download();
      const auto dq1 = storage_snapshot(t.dq), dk1 = storage_snapshot(t.dk), dv1 = storage_snapshot(t.dv);
      t.dq.poison();
      t.dk.poison();
      t.dv.poison();
      dev.upload_outputs();
      dev.run_backward();
      dev.download();
      EXPECT_TRUE(bitwise_equal(dq1.data(), t.dq.storage(), dq1.size())) << "dq differs between runs";
      EXPECT_TRUE(bitwise_equal(dk1.data(), t.dk.storage(), dk1.size())) << "dk differs between runs";
      EXPECT_TRUE(bitwise_equal(dv1.data(), t.dv.storage(), dv1.size())) << "dv differs between runs";
    }
}

}  // namespace
}  // namespace flashpp::test::gpu
