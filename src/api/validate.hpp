#pragma once
// Argument validation shared by every backend. Each rule throws flashpp::Error
// naming the argument; on success it returns the filled parameter block.
#include "common/params.hpp"
#include "flashpp/attention.hpp"

namespace flashpp::detail {

AttnParams make_forward_params(const TensorView& q, const TensorView& k, const TensorView& v,
                               const TensorView& out, const TensorView& lse, const AttentionOptions& opts);

// Like make_forward_params but out/lse may be undefined (used for sizing and select()).
AttnParams make_shape_params(const TensorView& q, const TensorView& k, const TensorView& v,
                             const AttentionOptions& opts);

AttnParams make_backward_params(const TensorView& dout, const TensorView& q, const TensorView& k,
                                const TensorView& v, const TensorView& out, const TensorView& lse,
                                const TensorView& dq, const TensorView& dk, const TensorView& dv,
                                const AttentionOptions& opts);

ElemType to_elem_type(DType t);

}  // namespace flashpp::detail
