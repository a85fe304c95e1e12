#pragma once
// Naive attention that materializes S and P for one (batch, head) at a time.
// It is the oracle of the tests (Precision::f64) and the "standard attention"
// baseline: Precision::storage rounds every intermediate (S, P, O, dP, dS, ...)
// to the input dtype the way a framework's unfused implementation does, which
// gives the error budget of the tolerance rule.
#include <vector>

#include "common/params.hpp"

namespace flashpp::reference {

enum class Precision { f64, storage };

// out: row-major (batch, seqlen_q, heads_q, head_dim_v), or (total_q, heads_q,
// head_dim_v) for varlen; lse: (batch, heads_q, seqlen_q) or (heads_q, total_q).
// Rows that see no key: out 0, lse -inf. Reads p.q/k/v (host memory).
void forward(const AttnParams& p, Precision prec, std::vector<double>& out, std::vector<double>& lse);

// Gradients for upstream gradient p.dout, in the logical layouts of q, k, v
// (row-major). Recomputes the forward itself; does not read p.o or p.lse.
void backward(const AttnParams& p, Precision prec, std::vector<double>& dq, std::vector<double>& dk,
              std::vector<double>& dv);

// Value of element `index` of a host buffer of dtype t, as double.
double load(const void* base, ElemType t, long long index);
// x rounded to dtype t (identity for f64 semantics is not offered: use double).
double round_to(double x, ElemType t);

}  // namespace flashpp::reference
