#pragma once
// One case on the GPU, checked exactly like the CPU suite checks its cases
// (support/case_runner.hpp): same cases, same tolerance rule against the fp64
// reference, same masked-row and padding checks, outputs poisoned beforehand.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "gpu_support.hpp"
#include "support/attention_tensors.hpp"
#include "support/expect.hpp"

namespace flashpp::test::gpu {

// CUDA needs 16-byte aligned row starts: pads and offsets in multiples of 8 elements.
inline AttnCase on_gpu(AttnCase c) {
  c.align = 8;
  return c;
}

// shape_inputs, when given, rewrites the random inputs before the call (structured
// scores: see CudaForward.DriftingRowMax).
inline void expect_gpu_case_matches_reference(const AttnCase& c, std::mt19937_64& rng, bool backward,
                                              const std::function<void(AttnTensors&)>& shape_inputs = {}) {
  AttnTensors t = make_tensors(c, rng, backward);
  if (shape_inputs) shape_inputs(t);
  SCOPED_TRACE("case: " + c.describe() + "\n" + t.describe());
  DeviceCase dev(c, t);
  dev.run_forward();
  if (backward) dev.run_backward();
  dev.download();
  const AttnResult ours = collect(t, backward);
  const AttnResult f64 = reference_result(c, t, reference::Precision::f64, backward);
  const AttnResult naive = reference_result(c, t, reference::Precision::storage, backward);
  expect_within_tolerance(check_results(c, ours, f64, naive, backward));
  expect_no_messages(check_masked_rows(c, ours, backward), "masked rows");
  expect_no_messages(check_padding(t, backward), "padding");
}

inline constexpr DType kGpuDtypes[] = {DType::f16, DType::bf16};
inline constexpr int kGpuRandomCasesPerDtype = 48;
inline constexpr double kGpuMaxCaseCost = 6e6;

inline const char* gpu_dtype_name(DType t) { return t == DType::f16 ? "fp16" : "bf16"; }

}  // namespace flashpp::test::gpu
