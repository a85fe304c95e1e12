#pragma once
// One CPU case end to end, as GoogleTest expectations: build tensors, run our
// forward (and backward), run both references, apply the tolerance rule, the
// masked-row semantics and the padding checks. Shared by the forward and
// backward test executables.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "support/attention_tensors.hpp"
#include "support/expect.hpp"

namespace flashpp::test {

// shape_inputs, when given, rewrites the random inputs before the call.
inline void expect_cpu_case_matches_reference(const AttnCase& c, std::mt19937_64& rng, bool backward,
                                              const std::function<void(AttnTensors&)>& shape_inputs = {}) {
  AttnTensors t = make_tensors(c, rng, backward);
  if (shape_inputs) shape_inputs(t);
  SCOPED_TRACE("case: " + c.describe() + "\n" + t.describe());
  run_forward(c, t);
  if (backward) run_backward(c, t);
  const AttnResult ours = collect(t, backward);
  const AttnResult f64 = reference_result(c, t, reference::Precision::f64, backward);
  const AttnResult naive = reference_result(c, t, reference::Precision::storage, backward);
  expect_within_tolerance(check_results(c, ours, f64, naive, backward));
  expect_no_messages(check_masked_rows(c, ours, backward), "masked rows");
  expect_no_messages(check_padding(t, backward), "padding");
}

// Random cases per dtype and their runtime budget (naive multiply-adds per
// case): the reference is O(seqlen_q * seqlen_k * head_dim) per head.
inline constexpr int kRandomCasesPerDtype = 60;
inline constexpr double kMaxCaseCost = 6e6;

inline const char* short_dtype(DType t) {
  return t == DType::f32 ? "fp32" : t == DType::f16 ? "fp16" : t == DType::bf16 ? "bf16" : "other";
}

}  // namespace flashpp::test
