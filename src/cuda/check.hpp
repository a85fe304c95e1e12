#pragma once
// CUDA runtime errors -> flashpp::Error (kind runtime), and a guard that runs host
// code against a given device without changing the caller's current device.
#include <cuda_runtime.h>

#include <string>

#include "flashpp/error.hpp"

namespace flashpp::cuda {

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(ErrorKind::runtime, "cuda", std::string(what) + " failed: " + cudaGetErrorName(e) + " (" +
                                                cudaGetErrorString(e) + ")");
}

// After a kernel launch: configuration errors surface here (execution errors later,
// at the caller's next synchronizing call).
inline void check_launch(const char* what) { check_cuda(cudaGetLastError(), what); }

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) check_cuda(cudaSetDevice(device), "cudaSetDevice");
    changed_ = previous_ != device;
  }
  ~DeviceGuard() {
    if (changed_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

}  // namespace flashpp::cuda
