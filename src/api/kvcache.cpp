// Public entry points of attention with a KV cache: validate once, resolve
// the number of splits, then hand the parameter block to the backend that
// owns the tensors' device.
#include "flashpp/kvcache.hpp"

#include <string>

#include "api/kvcache_validate.hpp"
#include "cpu/kvcache_backend.hpp"
#ifdef FLASHPP_WITH_CUDA
#include "cuda/decode/decode_backend.hpp"
#endif

namespace flashpp {
namespace {

bool on_cuda(const KVCacheArgs& a) { return a.q.device.kind == DeviceKind::cuda; }

#ifndef FLASHPP_WITH_CUDA
const char* kNoCuda = "flashpp was built without CUDA support; rebuild with a CUDA toolkit to use CUDA tensors";
[[noreturn]] void no_cuda() { throw Error(ErrorKind::not_supported, "q", kNoCuda); }
#endif

// Fills in the split count the backend will use.
void resolve_splits(KVCacheParams& p, const KVCacheArgs& a) {
  if (on_cuda(a)) {
#ifdef FLASHPP_WITH_CUDA
    p.num_splits = cuda::decode::num_splits(p, a.q.device.index);
#else
    no_cuda();
#endif
  } else {
    p.num_splits = cpu::kvcache_num_splits(p);
  }
}

std::size_t workspace_for(const KVCacheParams& p, const KVCacheArgs& a) {
  if (!on_cuda(a)) return cpu::kvcache_workspace_bytes(p);
#ifdef FLASHPP_WITH_CUDA
  return cuda::decode::workspace_bytes(p, a.q.device.index);
#else
  no_cuda();
#endif
}

}  // namespace

int kvcache_num_splits(const KVCacheArgs& args, const AttentionOptions& opts) {
  KVCacheParams p = detail::make_kvcache_params(args, opts, false);
  resolve_splits(p, args);
  return p.num_splits;
}

std::size_t kvcache_workspace_bytes(const KVCacheArgs& args, const AttentionOptions& opts) {
  KVCacheParams p = detail::make_kvcache_params(args, opts, false);
  resolve_splits(p, args);
  return workspace_for(p, args);
}

Selection select_kvcache(const KVCacheArgs& args, const AttentionOptions& opts) {
  [[maybe_unused]] KVCacheParams p = detail::make_kvcache_params(args, opts, false);
  if (!on_cuda(args)) return {true, "cpu", "", ""};
#ifdef FLASHPP_WITH_CUDA
  p.num_splits = cuda::decode::num_splits(p, args.q.device.index);
  const auto c = cuda::decode::select(p, args.q.device.index);
  return {c.ok, c.kernel, c.reason, ""};
#else
  return {false, "", kNoCuda, ""};
#endif
}

void attention_with_kvcache(const KVCacheArgs& args, const AttentionOptions& opts, Workspace workspace) {
  KVCacheParams p = detail::make_kvcache_params(args, opts, true);
  resolve_splits(p, args);
  const std::size_t need = workspace_for(p, args);
  if (need > 0 && (workspace.data == nullptr || workspace.bytes < need))
    throw Error(ErrorKind::value, "workspace",
                "needs " + std::to_string(need) + " bytes (ask kvcache_workspace_bytes), got " +
                    std::to_string(workspace.bytes));
  if (!on_cuda(args)) {
    cpu::attention_with_kvcache(p, workspace.data);
    return;
  }
#ifdef FLASHPP_WITH_CUDA
  const int dev = args.q.device.index;
  const auto c = cuda::decode::select(p, dev);
  if (!c.ok) throw Error(ErrorKind::not_supported, "q", c.reason);
  cuda::decode::run(p, workspace.data, workspace.bytes, opts.stream, dev);
#else
  no_cuda();
#endif
}

std::string describe_kvcache_status(const std::int32_t status[4]) { return detail::kvcache_fault_message(status); }

void check_kvcache_status(const TensorView& st, void* stream) {
  if (!st.defined() || st.ndim != 1 || st.shape[0] != 4 || st.dtype != DType::i32 || st.data == nullptr ||
      st.stride[0] != 1)
    throw Error(ErrorKind::value, "validation_status", "must be a contiguous int32 tensor of shape (4,)");
  std::int32_t host[4];
  if (st.device.kind == DeviceKind::cuda) {
#ifdef FLASHPP_WITH_CUDA
    cuda::decode::read_status(static_cast<const std::int32_t*>(st.data), host, stream, st.device.index);
#else
    (void)stream;
    no_cuda();
#endif
  } else {
    for (int i = 0; i < 4; ++i) host[i] = static_cast<const std::int32_t*>(st.data)[i];
  }
  if (host[0] == 0) return;
  throw Error(ErrorKind::value, detail::kvcache_fault_argument(host[0]), detail::kvcache_fault_message(host));
}

}  // namespace flashpp
