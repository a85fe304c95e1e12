#pragma once
// Host tensors for one AttnCase, our forward/backward on them, the two
// reference results (fp64 oracle and same-dtype naive) and the checks the
// suite applies. A device test builds the same AttnTensors, copies each
// storage to the device, and calls view_on() with the device pointers.
#include <cstddef>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "reference/reference.hpp"
#include "support/attention_case.hpp"
#include "support/compare.hpp"
#include "support/host_tensor.hpp"

namespace flashpp::test {

struct AttnTensors {
  HostTensor q, k, v, out, lse, dout, dq, dk, dv;
  HostTensor cu_q, cu_k;  // varlen only

  HostTensor& get(Role r);
  const HostTensor& get(Role r) const;
  // The case's options with this object's host cu_seqlens.
  AttentionOptions options(const AttnCase& c) const;
  // Every tensor's geometry, one per line (for failure messages).
  std::string describe() const;
};

// Inputs filled with fresh random values (q scaled by the case's magnitude),
// padding and all outputs poisoned with NaN. dout/dq/dk/dv only when backward.
AttnTensors make_tensors(const AttnCase& c, std::mt19937_64& rng, bool backward);

// A 64-byte aligned host scratch buffer of exactly the requested size.
class HostWorkspace {
 public:
  explicit HostWorkspace(std::size_t bytes);
  Workspace get() const { return {data_.get(), bytes_}; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> data_;
  std::size_t bytes_;
};

// Our forward / backward on the CPU, with exactly the workspace asked for.
void run_forward(const AttnCase& c, AttnTensors& t);
void run_backward(const AttnCase& c, AttnTensors& t);

struct AttnResult {
  std::vector<double> out, lse, dq, dk, dv;
};
// Outputs of the tensors, dense in logical order (after run_forward/backward).
AttnResult collect(const AttnTensors& t, bool backward);
// The reference on the same inputs (reads q, k, v, dout, cu_seqlens).
AttnResult reference_result(const AttnCase& c, const AttnTensors& t, reference::Precision prec, bool backward);

// The tolerance rule applied to every output.
std::vector<ToleranceResult> check_results(const AttnCase& c, const AttnResult& ours, const AttnResult& f64,
                                           const AttnResult& storage, bool backward);

// Exact semantics of masked rows: a query row that sees no key has out = 0
// exactly (and dq = 0 in backward); a key row no query sees has dk = dv = 0.
// Returns one message per violation (empty = fine).
std::vector<std::string> check_masked_rows(const AttnCase& c, const AttnResult& ours, bool backward);

// No call may touch storage outside any tensor's view.
std::vector<std::string> check_padding(const AttnTensors& t, bool backward);

}  // namespace flashpp::test
