// CUDA forward against the fp64 reference: the CPU suite's random and edge cases
// (fp16/bf16), a few multi-tile cases, and bitwise repeatability.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/sm90/fwd_tiles.hpp"
#include "gpu_case_runner.hpp"
#include "support/attention_case.hpp"
#include "support/drifting_scores.hpp"
#include "support/seed.hpp"

namespace flashpp::test::gpu {
namespace {

class CudaForwardRandom : public testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(CudaForwardRandom, MatchesReference) {
  FLASHPP_REQUIRE_GPU();
  const auto [dtype, index] = GetParam();
  auto rng = make_rng(std::string("CudaForwardRandom.") + gpu_dtype_name(dtype), std::uint64_t(index));
  const AttnCase c = on_gpu(sample_case(rng, dtype, kGpuMaxCaseCost));
  expect_gpu_case_matches_reference(c, rng, /*backward=*/false);
}

INSTANTIATE_TEST_SUITE_P(Sampled, CudaForwardRandom,
                         testing::Combine(testing::ValuesIn(kGpuDtypes), testing::Range(0, kGpuRandomCasesPerDtype)),
                         [](const auto& info) {
                           return std::string(gpu_dtype_name(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param));
                         });

class CudaForwardEdge : public testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(CudaForwardEdge, MatchesReference) {
  FLASHPP_REQUIRE_GPU();
  const auto [dtype, index] = GetParam();
  const AttnCase c = on_gpu(edge_cases(dtype)[std::size_t(index)]);
  auto rng = make_rng("CudaForwardEdge." + c.label + gpu_dtype_name(dtype));
  expect_gpu_case_matches_reference(c, rng, /*backward=*/false);
}

INSTANTIATE_TEST_SUITE_P(Fixed, CudaForwardEdge,
                         testing::Combine(testing::ValuesIn(kGpuDtypes),
                                          testing::Range(0, int(edge_cases(DType::f16).size()))),
                         [](const auto& info) {
                           return edge_cases(std::get<0>(info.param))[std::size_t(std::get<1>(info.param))].label +
                                  "_" + gpu_dtype_name(std::get<0>(info.param));
                         });

// Sequences spanning many K/V tiles and query blocks, at every compiled head dim.
TEST(CudaForward, MultiTileCases) {
  FLASHPP_REQUIRE_GPU();
  int index = 0;
  for (DType dtype : kGpuDtypes)
    for (int d : {32, 64, 96, 128, 192, 256}) {
      auto rng = make_rng(std::string("CudaForward.MultiTile.") + gpu_dtype_name(dtype), std::uint64_t(index++));
      AttnCase c;
      c.label = "multi_tile_d" + std::to_string(d);
      c.dtype = dtype;
      c.batch = 2;
      c.seqlen_q = 300 + int(rng() % 200);
      c.seqlen_k = 500 + int(rng() % 300);
      c.heads_q = 4;
      c.heads_kv = d <= 96 ? 1 : 2;
      c.head_dim = c.head_dim_v = d;
      c.causal = (index % 2) == 0;
      if (index % 3 == 0) c.window_left = 97;
      expect_gpu_case_matches_reference(on_gpu(c), rng, /*backward=*/false);
    }
}

// Key lengths from which the Hopper forward switches to a wider tile
// (fwd_default_variant in src/cuda/sm90/fwd_tiles.hpp, by head dim and mask):
// fixed length and varlen, causal and not, with a ragged last key tile, just
// past the switch. On other GPUs these are long FA2 cases.
int first_wide_keys(int d, bool masked) {
  for (int n = 256; n <= (1 << 20); n *= 2)
    if (cuda::sm90::fwd_default_variant(d, n, masked) != 0) return n;
  return 4096;
}

TEST(CudaForward, LongKeyCases) {
  FLASHPP_REQUIRE_GPU();
  int index = 0;
  for (DType dtype : kGpuDtypes)
    for (int d : {64, 128, 256})
      for (bool causal : {false, true}) {
        auto rng = make_rng(std::string("CudaForward.LongKeys.") + gpu_dtype_name(dtype), std::uint64_t(index));
        const int from = first_wide_keys(d, causal);
        AttnCase c;
        c.label = "long_keys_d" + std::to_string(d);
        c.dtype = dtype;
        c.head_dim = c.head_dim_v = d;
        c.heads_q = 2;
        c.heads_kv = 1;
        c.causal = causal;
        if (index % 3 == 2) {
          c.varlen = true;
          c.batch = 2;
          c.seqlens_q = {70, 130};
          c.seqlens_k = {from + 37, 900};
        } else {
          c.seqlen_q = 130;
          c.seqlen_k = from + 1 + int(rng() % 200);
        }
        ++index;
        expect_gpu_case_matches_reference(on_gpu(c), rng, /*backward=*/false);
      }
}

// Causal diagonals that reach into a query block's second key tile on the tiles
// that are not square (fwd_tiles.hpp: 192 x 128 at d 64 from 2K keys, 128 x 176 at
// d 128 from 8K, 128 x 80 at d 256 from 4K, 128 x 64 at d 256 below). Every block
// of these shapes but the first at d 128 has its diagonal across two key tiles
// (three in some blocks at 128 x 80): the plain-loop kernel, whose key loop skips
// the mask test, must mask them before the loop. On other GPUs these are long
// causal FA2 cases.
TEST(CudaForward, WideTileCausalDiagonals) {
  FLASHPP_REQUIRE_GPU();
  int index = 0;
  for (DType dtype : kGpuDtypes)
    for (auto [d, len_q, len_k] : {std::tuple{64, 384, 2048}, std::tuple{128, 256, 8192}, std::tuple{256, 256, 4096},
                                          std::tuple{256, 512, 512}}) {
      auto rng = make_rng(std::string("CudaForward.WideDiagonals.") + gpu_dtype_name(dtype), std::uint64_t(index++));
      AttnCase c;
      c.label = "wide_diagonals_d" + std::to_string(d);
      c.dtype = dtype;
      c.head_dim = c.head_dim_v = d;
      c.heads_q = 2;
      c.heads_kv = 1;
      c.causal = true;
      c.seqlen_q = len_q;
      c.seqlen_k = len_k;
      expect_gpu_case_matches_reference(on_gpu(c), rng, /*backward=*/false);
    }
}

// The Hopper epilogue writes O by 64-row slices (a TMA store per slice with the
// staged epilogue, FLASHPP_SM90_O_STORE=tma): varlen sequences whose lengths
// end on, just before and just after slice and block bounds (past a varlen
// sequence's end a slice falls back to direct stores), a fixed length whose last
// box is clipped, padded output strides, and more tiles than SMs so every block
// reuses its staging buffer. Staged in a buffer of its own at d 64 / 128, over V
// at 256.
TEST(CudaForward, EpilogueRowSlices) {
  FLASHPP_REQUIRE_GPU();
  int index = 0;
  for (DType dtype : kGpuDtypes)
    for (int d : {64, 128, 256}) {
      auto rng = make_rng(std::string("CudaForward.EpilogueRowSlices.") + gpu_dtype_name(dtype), std::uint64_t(index));
      auto with_padded_out = [&](const std::string& label, bool causal) {
        AttnCase c;
        c.label = label + std::to_string(d);
        c.dtype = dtype;
        c.head_dim = c.head_dim_v = d;
        c.causal = causal;
        c.layout[int(Role::out)] = LayoutKind::padded;
        return c;
      };
      AttnCase c = with_padded_out("epilogue_slices_d", index % 2 == 1);
      c.varlen = true;
      c.batch = 7;
      c.seqlens_q = {64, 127, 129, 1, 200, 0, 65};
      c.seqlens_k = {150, 127, 40, 90, 230, 17, 65};
      c.heads_q = c.heads_kv = 2;
      expect_gpu_case_matches_reference(on_gpu(c), rng, /*backward=*/false);
      AttnCase f = with_padded_out("epilogue_many_tiles_d", index % 2 == 0);
      f.batch = 3;
      f.heads_q = 48;
      f.heads_kv = 6;
      f.seqlen_q = 228;  // two query blocks, the second clipped at row 100 of its 128
      f.seqlen_k = 40;
      expect_gpu_case_matches_reference(on_gpu(f), rng, /*backward=*/false);
      ++index;
    }
}

// Causal and windowed fixed-length calls with and without the forward workspace:
// without it the Hopper forward walks the static tile order; with it blocks claim
// tiles (the dynamic schedule, from head dim 128), and with FLASHPP_SM90_HEAD_GROUP
// set they claim them group by group (the rule cuts groups only for shapes too
// large for a test). More tiles than SMs, so blocks take several. A tile's
// result does not depend on which block computes it: all three runs must give
// bitwise-identical out and LSE, and the first must match the reference.
TEST(CudaForward, MaskedScheduleAndHeadGroups) {
  FLASHPP_REQUIRE_GPU();
  int index = 0;
  for (DType dtype : kGpuDtypes)
    for (int d : {64, 128, 256}) {
      auto rng = make_rng(std::string("CudaForward.MaskedSchedule.") + gpu_dtype_name(dtype), std::uint64_t(index));
      AttnCase c;
      c.label = "masked_schedule_d" + std::to_string(d);
      c.dtype = dtype;
      c.head_dim = c.head_dim_v = d;
      c.batch = 2;
      c.heads_q = 24;
      c.heads_kv = 6;
      c.seqlen_q = 384 - int(rng() % 64);  // 3 query blocks of 128: 144 tiles
      c.seqlen_k = c.seqlen_q + int(rng() % 80);
      c.causal = index % 2 == 0;
      if (!c.causal) {
        c.window_left = 150;
        c.window_right = 40;
      }
      ++index;
      AttnTensors t = make_tensors(c, rng, false);
      SCOPED_TRACE("case: " + c.describe());
      DeviceCase dev(c, t);
      dev.run_forward(nullptr, /*with_workspace=*/false);
      dev.download();
      const AttnResult ours = collect(t, false);
      const AttnResult f64 = reference_result(c, t, reference::Precision::f64, false);
      const AttnResult naive = reference_result(c, t, reference::Precision::storage, false);
      expect_within_tolerance(check_results(c, ours, f64, naive, false));
      const std::vector<std::byte> out0 = storage_snapshot(t.out), lse0 = storage_snapshot(t.lse);
      const char* outer = std::getenv("FLASHPP_SM90_HEAD_GROUP");
      const std::string saved = outer != nullptr ? outer : "";
      for (const char* groups : {"0", "5"}) {
        SCOPED_TRACE(std::string("FLASHPP_SM90_HEAD_GROUP=") + groups);
        setenv("FLASHPP_SM90_HEAD_GROUP", groups, 1);
        t.out.poison();
        t.lse.poison();
        dev.upload_outputs();
        dev.run_forward();
        dev.download();
        if (outer != nullptr) setenv("FLASHPP_SM90_HEAD_GROUP", saved.c_str(), 1);
        else unsetenv("FLASHPP_SM90_HEAD_GROUP");
        EXPECT_TRUE(bitwise_equal(out0.data(), t.out.storage(), out0.size())) << "out differs from the static order";
        EXPECT_TRUE(bitwise_equal(lse0.data(), t.lse.storage(), lse0.size())) << "lse differs from the static order";
      }
    }
}

// Rows whose max keeps moving (support/drifting_scores.hpp): 3 (unmasked) or 12
// (causal) log2 units per 128 keys, up (head 0) or down (head 1), over 32-80 key
// tiles. A kernel that rescales O only when the max has moved far enough, or skips
// the rescale when no row of a warp moved, must get every move right; one that kept
// the first tiles' max would overflow or lose the late keys.
TEST(CudaForward, DriftingRowMax) {
  FLASHPP_REQUIRE_GPU();
  int index = 0;
  for (DType dtype : kGpuDtypes)
    for (int d : {64, 128, 256})
      for (bool causal : {false, true}) {
        auto rng = make_rng(std::string("CudaForward.DriftingRowMax.") + gpu_dtype_name(dtype), std::uint64_t(index));
        ++index;
        AttnCase c;
        c.label = "drifting_max_d" + std::to_string(d);
        c.dtype = dtype;
        c.head_dim = c.head_dim_v = d;
        c.heads_q = c.heads_kv = 2;
        c.seqlen_q = 130 + int(rng() % 64);
        c.seqlen_k = 4096 + int(rng() % 1024);
        c.causal = causal;
        expect_gpu_case_matches_reference(on_gpu(c), rng, /*backward=*/false,
                                          [&](AttnTensors& t) { make_drifting_scores(c, t, rng, causal ? 12.0 : 3.0); });
      }
}

// Two runs of the same call give bitwise-identical out and LSE.
TEST(CudaForward, IsDeterministic) {
  FLASHPP_REQUIRE_GPU();
  for (DType dtype : kGpuDtypes) {
    auto rng = make_rng(std::string("CudaForward.IsDeterministic.") + gpu_dtype_name(dtype));
    AttnCase c = on_gpu(sample_case(rng, dtype, kGpuMaxCaseCost));
    while (c.total_q() == 0) c = on_gpu(sample_case(rng, dtype, kGpuMaxCaseCost));
    SCOPED_TRACE(c.describe());
    AttnTensors t = make_tensors(c, rng, false);
    DeviceCase dev(c, t);
    dev.run_forward();
    dev.download();
    const std::vector<std::byte> out1 = storage_snapshot(t.out), lse1 = storage_snapshot(t.lse);
    t.out.poison();
    t.lse.poison();
    dev.upload_outputs();
    dev.run_forward();
    dev.download();
    EXPECT_TRUE(bitwise_equal(out1.data(), t.out.storage(), out1.size())) << "out differs between runs";
    EXPECT_TRUE(bitwise_equal(lse1.data(), t.lse.storage(), lse1.size())) << "lse differs between runs";
  }
}

}  // namespace
}  // namespace flashpp::test::gpu
