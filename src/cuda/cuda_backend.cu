// The CUDA backend behind flashpp::forward/backward: picks the kernel through the
// registry, lays out the workspace and orders the backward passes on the caller's
// stream. Nothing here keeps per-call state, so calls from several host threads on
// different streams run independently.
#include "cuda/cuda_backend.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/mask.hpp"
#include "cuda/check.hpp"
#include "cuda/registry.hpp"
#include "cuda/sm80/bwd_prep.hpp"
#include "cuda/sm80/tile_configs.hpp"
#include "flashpp/error.hpp"

namespace flashpp::cuda {
namespace {

constexpr std::size_t kAlign = 256;

std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

std::int64_t total_q_rows(const AttnParams& p) {
  return p.cu_seqlens_q != nullptr ? p.total_q : std::int64_t(p.batch) * p.seqlen_q;
}

Choice to_choice(const Selected& s) { return {s.entry != nullptr, s.name, s.reason, s.note}; }

const KernelEntry& require(Pass pass, const AttnParams& p, int device) {
  const Selected s = select(pass, p, device);
  if (s.entry == nullptr) throw Error(ErrorKind::not_supported, "q", s.reason);
  return *s.entry;
}

// Backward workspace: D = rowsum(dO * O) (heads_q x rows), its correction ddelta
// (same shape) and the concentrated-row marks (sm80/bwd_exact_d.cuh: a 16-byte
// word holding the two any-mark flags, two bytes per 16 query rows per query head
// (flagged, marked) and one per 16 key rows per kv head), then, unless
// deterministic, the fp32 dQ accumulator (rows rounded up to 8 x heads_q x compiled
// head dim, in 8 x 8 blocks).
struct BwdLayout {
  std::size_t dsum_bytes = 0, mark_q_groups = 0, mark_k_groups = 0, mark_bytes = 0, accum_bytes = 0;
  std::size_t total() const { return 2 * dsum_bytes + mark_bytes + accum_bytes; }
};

std::int64_t total_k_rows(const AttnParams& p) {
  return p.cu_seqlens_k != nullptr ? p.total_k : std::int64_t(p.batch) * p.seqlen_k;
}

BwdLayout bwd_layout(const AttnParams& p, int compiled_head_dim) {
  const std::int64_t rows = total_q_rows(p);
  BwdLayout l;
  l.dsum_bytes = align_up(std::size_t(rows) * p.heads_q * sizeof(float));
  constexpr std::int64_t G = sm80::kHotGroupRows;
  l.mark_q_groups = std::size_t((rows + G - 1) / G);
  l.mark_k_groups = std::size_t((total_k_rows(p) + G - 1) / G);
  l.mark_bytes = align_up(16 + 2 * l.mark_q_groups * p.heads_q + l.mark_k_groups * p.heads_kv);
  // Whole 8-row bands (sm80::dq_accum_index).
  const std::int64_t band_rows = (rows + 7) / 8 * 8;
  if (!p.deterministic)
    l.accum_bytes = align_up(std::size_t(band_rows) * p.heads_q * compiled_head_dim * sizeof(float));
  return l;
}

// The caller's workspace: at least `need` bytes and, like every CUDA workspace
// (flashpp/options.hpp), 256-byte aligned device memory.
void check_workspace(const void* workspace, std::size_t bytes, std::size_t need, const char* ask) {
  if (need > 0 && (workspace == nullptr || bytes < need))
    throw Error(ErrorKind::value, "workspace", "needs " + std::to_string(need) + " bytes (ask " + ask + ")");
  if (reinterpret_cast<std::uintptr_t>(workspace) % kAlign != 0)
    throw Error(ErrorKind::value, "workspace", "must be 256-byte aligned device memory");
}

}  // namespace

Choice select_forward(const AttnParams& p, int device) { return to_choice(select(Pass::forward, p, device)); }

Choice select_backward(const AttnParams& p, int device) {
  Selected s = select(Pass::backward, p, device);
  if (s.entry != nullptr && p.deterministic) {
    const Selected dq = select(Pass::backward_dq, p, device);
    if (dq.entry == nullptr) return to_choice(dq);
    s.name += " (deterministic dQ)";
  }
  return to_choice(s);
}

// Forward workspace: one aligned block for the Hopper kernel's dynamic-schedule
// tile counter (sm90/tile_queue.cuh). Varlen batches must have it; causal or
// windowed ones use it when given (a claimed, L2-grouped tile order) and take the
// static order without it; unmasked fixed-length ones need none.
std::size_t forward_workspace_bytes(const AttnParams& p, int) {
  return p.cu_seqlens_q != nullptr || has_window(p.window_left, p.window_right) ? kAlign : 0;
}

void forward(const AttnParams& p, void* workspace, std::size_t workspace_bytes, void* stream, int device) {
  const KernelEntry& e = require(Pass::forward, p, device);
  const std::size_t required = p.cu_seqlens_q != nullptr ? kAlign : 0;
  check_workspace(workspace, workspace_bytes, required, "forward_workspace_bytes");
  DeviceGuard guard(device);
  LaunchArgs a;
  a.stream = static_cast<cudaStream_t>(stream);
  if (workspace != nullptr && workspace_bytes >= kAlign && forward_workspace_bytes(p, device) > 0)
    a.tile_counter = static_cast<int*>(workspace);
  e.launch(p, a);
}

std::size_t backward_workspace_bytes(const AttnParams& p, int) {
  const int d = sm80::round_head_dim(std::max(p.head_dim, p.head_dim_v));
  return d == 0 ? 0 : bwd_layout(p, d).total();
}

void backward(const AttnParams& p, void* workspace, std::size_t workspace_bytes, void* stream, int device) {
  const KernelEntry& main = require(Pass::backward, p, device);
  const KernelEntry* dq = p.deterministic ? &require(Pass::backward_dq, p, device) : nullptr;
  const BwdLayout layout = bwd_layout(p, main.head_dim);
  check_workspace(workspace, workspace_bytes, layout.total(), "backward_workspace_bytes");

  DeviceGuard guard(device);
  const std::int64_t rows = total_q_rows(p);
  LaunchArgs a;
  a.stream = static_cast<cudaStream_t>(stream);
  auto* base = static_cast<unsigned char*>(workspace);
  a.bwd.dsum = reinterpret_cast<float*>(base);
  a.bwd.dsum_head_stride = rows;
  a.bwd.ddelta = reinterpret_cast<float*>(base + layout.dsum_bytes);
  unsigned char* marks = base + 2 * layout.dsum_bytes;
  a.bwd.flags = marks;
  a.bwd.flag_words = std::int64_t(layout.mark_bytes / 16);
  a.bwd.any_flag = reinterpret_cast<int*>(marks);
  a.bwd.any_hot = reinterpret_cast<int*>(marks) + 1;
  a.bwd.flag_q = marks + 16;
  a.bwd.hot_q = a.bwd.flag_q + layout.mark_q_groups * p.heads_q;
  a.bwd.hot_q_head_stride = std::int64_t(layout.mark_q_groups);
  a.bwd.hot_k = a.bwd.hot_q + layout.mark_q_groups * p.heads_q;
  a.bwd.hot_k_head_stride = std::int64_t(layout.mark_k_groups);
  if (!p.deterministic) {
    a.bwd.dq_accum = reinterpret_cast<float*>(base + 2 * layout.dsum_bytes + layout.mark_bytes);
    a.bwd.dq_accum_row_stride = std::int64_t(p.heads_q) * main.head_dim;
    if (layout.accum_bytes > 0)
      check_cuda(cudaMemsetAsync(a.bwd.dq_accum, 0, layout.accum_bytes, a.stream), "cudaMemsetAsync(dQ accumulator)");
  }
  if (rows * p.heads_q == 0) {  // nothing clears the marks: no extra passes
    a.bwd.any_flag = nullptr;
    a.bwd.any_hot = nullptr;
  }
  sm80::launch_dot_do_o(p, a.bwd, rows, a.stream);
  sm80::launch_short_row_dsum(p, a.bwd.dsum, rows, a.stream);
  main.launch(p, a);
  if (dq != nullptr)
    dq->launch(p, a);
  else
    sm80::launch_dq_convert(p, a.bwd.dq_accum, rows, main.head_dim, a.stream);
}

}  // namespace flashpp::cuda
