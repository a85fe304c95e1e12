#pragma once
// GoogleTest glue for the device-agnostic checks in support/: one failure per
// broken rule, carrying the compact table line of the case.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/compare.hpp"

namespace flashpp::test {

inline void expect_within_tolerance(const std::vector<ToleranceResult>& results) {
  for (const auto& r : results) EXPECT_TRUE(r.ok) << r.line;
}

inline void expect_no_messages(const std::vector<std::string>& messages, const char* what) {
  for (const auto& m : messages) ADD_FAILURE() << what << ": " << m;
}

}  // namespace flashpp::test
