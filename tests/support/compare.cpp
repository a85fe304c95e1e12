#include "support/compare.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace flashpp::test {

double atol_for(DType dtype) {
  switch (dtype) {
    case DType::f32: return 1e-5;
    case DType::f16: return 1e-3;
    case DType::bf16: return 8e-3;
    default: break;
  }
  throw std::invalid_argument("atol_for: no tolerance for this dtype");
}

ErrorStats compare(const std::vector<double>& ours, const std::vector<double>& ref) {
  if (ours.size() != ref.size()) throw std::invalid_argument("compare: size mismatch");
  ErrorStats s;
  s.count = std::int64_t(ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double r = ref[i], o = ours[i];
    if (std::isinf(r)) {
      if (o != r) ++s.inf_mismatch;
      continue;
    }
    if (std::isnan(r)) continue;  // no claim where the reference itself is undefined
    if (!std::isfinite(o)) {
      ++s.nonfinite;
      continue;
    }
    s.max_abs_err = std::max(s.max_abs_err, std::abs(o - r));
  }
  return s;
}

ToleranceResult check_tolerance(std::string_view what, std::string_view case_desc, DType dtype,
                                const std::vector<double>& ours, const std::vector<double>& ref_f64,
                                const std::vector<double>& ref_storage) {
  const ErrorStats e = compare(ours, ref_f64);
  const ErrorStats n = compare(ref_storage, ref_f64);
  const double bound = 2 * n.max_abs_err + atol_for(dtype);
  ToleranceResult r;
  r.ok = e.max_abs_err <= bound && e.nonfinite == 0 && e.inf_mismatch == 0;
  char buf[256];
  std::snprintf(buf, sizeof buf, "| ours %.3e | naive %.3e | bound %.3e | nonfinite %lld | inf-mismatch %lld | n %lld",
                e.max_abs_err, n.max_abs_err, bound, static_cast<long long>(e.nonfinite),
                static_cast<long long>(e.inf_mismatch), static_cast<long long>(e.count));
  r.line = std::string(r.ok ? "ok   " : "FAIL ") + std::string(what) + " | " + std::string(case_desc) + " " + buf;
  return r;
}

bool bitwise_equal(const void* a, const void* b, std::size_t bytes) { return std::memcmp(a, b, bytes) == 0; }

}  // namespace flashpp::test
