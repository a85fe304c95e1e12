#include "cuda/registry.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/score_fold.hpp"
#include "cuda/check.hpp"
#include "cuda/sm80/tile_configs.hpp"
#include "cuda/sm90/bwd_tiles.hpp"
#include "cuda/sm90/fwd_tiles.hpp"
#include "cuda/sm90/tensor_maps.hpp"

namespace flashpp::cuda {

namespace instances {
#define FLASHPP_INSTANCE(name) KernelEntry name();
#include "cuda/instances/instance_list.inc"
#undef FLASHPP_INSTANCE
}  // namespace instances

const char* pass_name(Pass pass) {
  switch (pass) {
    case Pass::forward: return "fwd";
    case Pass::backward: return "bwd";
    case Pass::backward_dq: return "bwd-dq";
  }
  return "?";
}

namespace {

const std::vector<KernelEntry>& table() {
  static const std::vector<KernelEntry> entries = {
#define FLASHPP_INSTANCE(name) instances::name(),
#include "cuda/instances/instance_list.inc"
#undef FLASHPP_INSTANCE
  };
  return entries;
}

const char* dtype_label(ElemType t) {
  switch (t) {
    case ElemType::f16: return "f16";
    case ElemType::bf16: return "bf16";
    case ElemType::f32: return "f32";
    case ElemType::e4m3: return "e4m3";
  }
  return "?";
}

struct DeviceFacts {
  std::string error;  // non-empty: the device cannot be used
  int major = 0, minor = 0;
  std::size_t smem_optin = 0;
};

// Per-device facts and per-(kernel, device) image checks, computed once.
std::mutex g_mutex;
std::map<int, DeviceFacts> g_devices;
std::map<std::pair<const KernelEntry*, int>, std::string> g_images;

DeviceFacts device_facts(int device) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_devices.find(device);
  if (it != g_devices.end()) return it->second;
  DeviceFacts f;
  cudaDeviceProp prop;
  const cudaError_t e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess) {
    cudaGetLastError();
    f.error = "CUDA device " + std::to_string(device) + " is not usable: " + cudaGetErrorString(e);
  } else {
    f.major = prop.major;
    f.minor = prop.minor;
    f.smem_optin = prop.sharedMemPerBlockOptin;
  }
  g_devices.emplace(device, f);
  return f;
}

// Empty when this build carries code of the kernel that runs on `device`.
std::string image_problem(const KernelEntry& e, int device, const DeviceFacts& f) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_images.find({&e, device});
    if (it != g_images.end()) return it->second;
  }
  std::string why;
  try {
    DeviceGuard guard(device);
    cudaFuncAttributes attr;
    const cudaError_t err = e.attributes(&attr);
    if (err != cudaSuccess) {
      cudaGetLastError();
      why = "this build has no code for sm_" + std::to_string(f.major * 10 + f.minor) +
            " (rebuild with FLASHPP_CUDA_GENCODE naming this GPU): " + cudaGetErrorString(err);
    }
  } catch (const Error& ex) {
    why = ex.what();
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  g_images.emplace(std::make_pair(&e, device), why);
  return why;
}

// The table entry of this family, pass, dtype and head dim into s.entry when the device
// can run it; otherwise s.reason says why not.
void take_entry(Selected& s, int arch, Pass pass, ElemType dtype, int d, const DeviceFacts& f, int device) {
  const KernelEntry* found = nullptr;
  for (const KernelEntry& e : table())
    if (e.arch == arch && e.pass == pass && e.dtype == dtype && e.head_dim == d) found = &e;
  if (found == nullptr) {
    s.reason = "no kernel compiled for " + s.name;
    return;
  }
  if (found->smem_bytes > f.smem_optin) {
    s.reason = s.name + " needs " + std::to_string(found->smem_bytes) + " bytes of shared memory per block; device " +
               std::to_string(device) + " allows " + std::to_string(f.smem_optin);
    return;
  }
  s.reason = image_problem(*found, device, f);
  if (s.reason.empty()) s.entry = found;
}

Selected select_fa2(Pass pass, const AttnParams& p, int device) {
  Selected s;
  const int d = sm80::round_head_dim(std::max(p.head_dim, p.head_dim_v));
  s.name = std::string("cuda-sm80 ") + pass_name(pass) + " " + dtype_label(p.dtype) + " hdim" + std::to_string(d);
  if (p.dtype != ElemType::f16 && p.dtype != ElemType::bf16) {
    s.reason = std::string("CUDA kernels take float16 or bfloat16, got ") + dtype_label(p.dtype);
    return s;
  }
  if (d == 0) {
    s.reason = "head dims above 256 have no CUDA kernel (got " + std::to_string(p.head_dim) + ", v " +
               std::to_string(p.head_dim_v) + ")";
    return s;
  }
  if (p.batch > 65535 || p.heads_q > 65535) {
    s.reason = "CUDA kernels take at most 65535 sequences and 65535 heads (grid limit), got batch " +
               std::to_string(p.batch) + ", heads " + std::to_string(p.heads_q);
    return s;
  }
  const DeviceFacts f = device_facts(device);
  if (!f.error.empty()) {
    s.reason = f.error;
    return s;
  }
  if (f.major < 8) {
    s.reason = "FA2-class CUDA kernels need compute capability 8.0 or newer; device " + std::to_string(device) +
               " is " + std::to_string(f.major) + "." + std::to_string(f.minor);
    return s;
  }
  take_entry(s, 80, pass, p.dtype, d, f, device);
  return s;
}


// Why a Hopper family cannot run on this device ("" = it can).
std::string hopper_device_problem(int device, const DeviceFacts& f, const char* family) {
  if (!f.error.empty()) return f.error;
  if (f.major != 9)
    return std::string(family) + " needs an sm_90 GPU (Hopper); device " + std::to_string(device) + " is " +
           std::to_string(f.major) + "." + std::to_string(f.minor);
  return "";
}

// The Hopper forward, or why it cannot run these arguments ("" reason = use it).
Selected select_hopper_forward(const AttnParams& p, int device) {
  Selected s;
  const int d = sm90::round_head_dim(std::max(p.head_dim, p.head_dim_v));
  s.name = std::string("cuda-sm90 fwd ") + dtype_label(p.dtype) + " hdim" + std::to_string(d);
  const char* force = std::getenv("FLASHPP_CUDA_FORWARD_FAMILY");
  if (force != nullptr && std::strcmp(force, "sm80") == 0) {
    s.reason = "FLASHPP_CUDA_FORWARD_FAMILY=sm80 forces the FA2-class forward";
    return s;
  }
  if (p.dtype != ElemType::f16 && p.dtype != ElemType::bf16) {
    s.reason = "the Hopper forward takes float16 or bfloat16";
    return s;
  }
  if (d == 0) {
    s.reason = "head dims above 256 have no Hopper kernel";
    return s;
  }
  const DeviceFacts f = device_facts(device);
  s.reason = hopper_device_problem(device, f, "the FA3-class forward");
  if (!s.reason.empty()) return s;
  const std::int64_t m_blocks = (std::int64_t(p.seqlen_q) + 127) / 128;
  if (m_blocks * p.heads_q * p.batch >= (std::int64_t(1) << 31)) {
    s.reason = "more than 2^31 query tiles";
    return s;
  }
  s.reason = sm90::tma_problem(p);
  if (!s.reason.empty()) return s;
  take_entry(s, 90, Pass::forward, p.dtype, d, f, device);
  return s;
}

// The Hopper backward, or why it cannot run these arguments ("" reason = use it).
Selected select_hopper_backward(const AttnParams& p, int device) {
  Selected s;
  const int d = sm80::round_head_dim(p.head_dim);
  s.name = std::string("cuda-sm90 bwd ") + dtype_label(p.dtype) + " hdim" + std::to_string(d);
  const char* force = std::getenv("FLASHPP_CUDA_BACKWARD_FAMILY");
  if (force != nullptr && std::strcmp(force, "sm80") == 0) {
    s.reason = "FLASHPP_CUDA_BACKWARD_FAMILY=sm80 forces the FA2-class backward";
    return s;
  }
  if (p.dtype != ElemType::f16 && p.dtype != ElemType::bf16) {
    s.reason = "the Hopper backward takes float16 or bfloat16";
    return s;
  }
  if (p.head_dim != p.head_dim_v || !sm90::bwd90_head_dim(d)) {
    s.reason = "the Hopper backward is built for head dims 33-64 and 97-128 (q/k and v alike), got " +
               std::to_string(p.head_dim) + " / " + std::to_string(p.head_dim_v);
    return s;
  }
  if (p.batch > 65535 || p.heads_q > 65535) {
    s.reason = "the Hopper backward takes at most 65535 sequences and heads (grid limit)";
    return s;
  }
  if (p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr) {
    s.reason = "the Hopper backward takes fixed-length batches (varlen runs the FA2-class kernel)";
    return s;
  }
  if (!score_map_folds(p.softcap > 0.f, p.scale_log2)) {
    s.reason = "the Hopper backward takes no softcap and a positive softmax scale";
    return s;
  }
  if (p.deterministic) {
    s.reason = "the deterministic mode runs the FA2-class backward";
    return s;
  }
  if (p.partial_keys) {
    s.reason = "partial-key (ring) backward calls run the FA2-class backward";
    return s;
  }
  const DeviceFacts f = device_facts(device);
  s.reason = hopper_device_problem(device, f, "the Hopper backward");
  if (!s.reason.empty()) return s;
  s.reason = sm90::bwd_tma_problem(p);
  if (!s.reason.empty()) return s;
  take_entry(s, 90, Pass::backward, p.dtype, d, f, device);
  return s;
}

}  // namespace

Selected select(Pass pass, const AttnParams& p, int device) {
  if (pass == Pass::backward) {
    Selected hopper = select_hopper_backward(p, device);
    if (hopper.entry != nullptr) return hopper;
    Selected s = select_fa2(pass, p, device);
    s.note = hopper.name + " not used: " + hopper.reason;
    return s;
  }
  if (pass != Pass::forward) return select_fa2(pass, p, device);
  Selected hopper = select_hopper_forward(p, device);
  if (hopper.entry != nullptr) return hopper;
  Selected s = select_fa2(pass, p, device);
  s.note = hopper.name + " not used: " + hopper.reason;
  return s;
}

}  // namespace flashpp::cuda
