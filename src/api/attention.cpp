// Public entry points: validate once, then hand the parameter block to the
// backend that owns the tensors' device.
#include "flashpp/attention.hpp"

#include <string>

#include "api/validate.hpp"
#include "cpu/cpu_backend.hpp"
#include "cuda/cuda_backend.hpp"

#ifndef FLASHPP_VERSION
#define FLASHPP_VERSION "0.0.0"
#endif

namespace flashpp {
namespace {

void check_workspace(const Workspace& ws, std::size_t need) {
  if (need == 0) return;
  if (ws.data == nullptr || ws.bytes < need)
    throw Error(ErrorKind::value, "workspace",
                "needs " + std::to_string(need) + " bytes (ask *_workspace_bytes), got " + std::to_string(ws.bytes));
}

bool on_cuda(const TensorView& q) { return q.device.kind == DeviceKind::cuda; }

}  // namespace

std::size_t forward_workspace_bytes(const TensorView& q, const TensorView& k, const TensorView& v,
                                    const AttentionOptions& opts) {
  const AttnParams p = detail::make_shape_params(q, k, v, opts);
  return on_cuda(q) ? cuda::forward_workspace_bytes(p, q.device.index) : cpu::forward_workspace_bytes(p);
}

void forward(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
             const TensorView& lse, const AttentionOptions& opts, Workspace workspace) {
  const AttnParams p = detail::make_forward_params(q, k, v, out, lse, opts);
  if (on_cuda(q)) {
    const auto choice = cuda::select_forward(p, q.device.index);
    if (!choice.ok) throw Error(ErrorKind::not_supported, "q", choice.reason);
    // cuda::forward checks the workspace: part of what forward_workspace_bytes
    // asks for is optional there (flashpp/attention.hpp).
    cuda::forward(p, workspace.data, workspace.bytes, opts.stream, q.device.index);
  } else {
    check_workspace(workspace, cpu::forward_workspace_bytes(p));
    cpu::forward(p, workspace.data);
  }
}

std::size_t backward_workspace_bytes(const TensorView& q, const TensorView& k, const TensorView& v,
                                     const AttentionOptions& opts) {
  const AttnParams p = detail::make_shape_params(q, k, v, opts);
  return on_cuda(q) ? cuda::backward_workspace_bytes(p, q.device.index) : cpu::backward_workspace_bytes(p);
}

void backward(const TensorView& dout, const TensorView& q, const TensorView& k, const TensorView& v,
              const TensorView& out, const TensorView& lse, const TensorView& dq, const TensorView& dk,
              const TensorView& dv, const AttentionOptions& opts, Workspace workspace) {
  const AttnParams p = detail::make_backward_params(dout, q, k, v, out, lse, dq, dk, dv, opts);
  if (on_cuda(q)) {
    const auto choice = cuda::select_backward(p, q.device.index);
    if (!choice.ok) throw Error(ErrorKind::not_supported, "q", choice.reason);
    check_workspace(workspace, cuda::backward_workspace_bytes(p, q.device.index));
    cuda::backward(p, workspace.data, workspace.bytes, opts.stream, q.device.index);
  } else {
    check_workspace(workspace, cpu::backward_workspace_bytes(p));
    cpu::backward(p, workspace.data);
  }
}

Selection select_forward(const TensorView& q, const TensorView& k, const TensorView& v,
                         const AttentionOptions& opts) {
  const AttnParams p = detail::make_shape_params(q, k, v, opts);
  if (!on_cuda(q)) return {true, "cpu", "", ""};
  const auto c = cuda::select_forward(p, q.device.index);
  return {c.ok, c.kernel, c.reason, c.note};
}

Selection select_backward(const TensorView& q, const TensorView& k, const TensorView& v,
                          const AttentionOptions& opts) {
  const AttnParams p = detail::make_shape_params(q, k, v, opts);
  if (!on_cuda(q)) return {true, "cpu", "", ""};
  const auto c = cuda::select_backward(p, q.device.index);
  return {c.ok, c.kernel, c.reason, c.note};
}

bool built_with_cuda() noexcept {
#ifdef FLASHPP_WITH_CUDA
  return true;
#else
  return false;
#endif
}

const char* version() noexcept { return FLASHPP_VERSION; }

}  // namespace flashpp
