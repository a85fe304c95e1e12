#pragma once
// Error metrics and the tolerance rule of the test suite:
//   max_abs_err(ours vs fp64 ref) <= 2 * max_abs_err(same-dtype naive vs fp64 ref) + atol(dtype)
// plus: no NaN/Inf in ours where the fp64 reference is finite, and infinite
// reference entries (LSE of rows that see no key) matched exactly.
// Works on plain double vectors so host and device tests share it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flashpp/tensor.hpp"

namespace flashpp::test {

// The one place absolute tolerances live .
double atol_for(DType dtype);

struct ErrorStats {
  double max_abs_err = 0;         // over entries where both sides are finite
  std::int64_t nonfinite = 0;     // ours NaN/Inf where the reference is finite
  std::int64_t inf_mismatch = 0;  // reference is +-inf and ours is not the same inf
  std::int64_t count = 0;
};

ErrorStats compare(const std::vector<double>& ours, const std::vector<double>& ref);

struct ToleranceResult {
  bool ok = true;
  std::string line;  // one table row: what | case | errors | bound
};

// Applies the rule to one output ("out", "lse", "dq", ...). storage is the
// same-dtype naive result; its own overflow entries only tighten the bound.
ToleranceResult check_tolerance(std::string_view what, std::string_view case_desc, DType dtype,
                                const std::vector<double>& ours, const std::vector<double>& ref_f64,
                                const std::vector<double>& ref_storage);

// Bitwise equality of two buffers (determinism checks).
bool bitwise_equal(const void* a, const void* b, std::size_t bytes);

}  // namespace flashpp::test
