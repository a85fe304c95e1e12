#pragma once
// Device-side plumbing for the GPU tests, behind a CUDA-free interface so the test
// sources compile in every build: without a CUDA toolkit (or without a GPU) every
// GPU test skips with the reason gpu_unavailable_reason() gives.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "support/attention_tensors.hpp"

namespace flashpp::test::gpu {

// Empty when a CUDA device can run flashpp's kernels; otherwise why not.
const std::string& gpu_unavailable_reason();

#define FLASHPP_REQUIRE_GPU()                                                                      \
  do {                                                                                             \
    if (!::flashpp::test::gpu::gpu_unavailable_reason().empty())                                   \
      GTEST_SKIP() << "no usable GPU: " << ::flashpp::test::gpu::gpu_unavailable_reason();          \
  } while (0)

// Device memory (cudaMalloc, so 256-byte aligned); throws std::runtime_error on failure.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  void upload(const void* host, std::size_t bytes, std::size_t offset = 0);
  void download(void* host, std::size_t bytes, std::size_t offset = 0) const;
  void fill_byte(int value);

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// A non-blocking CUDA stream (opaque handle for AttentionOptions::stream).
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void* handle() const { return s_; }
  void synchronize() const;

 private:
  void* s_ = nullptr;
};

void device_synchronize();
std::size_t free_device_memory();  // also surfaces asynchronous kernel errors as std::runtime_error

// The tensors of one case mirrored on the device: every host storage (padding and
// poison included) is copied up, our CUDA forward/backward run on device views of
// the same geometry, and the storages are copied back so the host-side checks of
// support/ (tolerance, masked rows, padding) apply unchanged.
class DeviceCase {
 public:
  DeviceCase(const AttnCase& c, AttnTensors& host);
  // with_workspace = false passes none (fixed-length masked calls then take the
  // Hopper forward's static tile order instead of the claimed one).
  void run_forward(void* stream = nullptr, bool with_workspace = true);
  void run_backward(void* stream = nullptr);
  void download();        // device storages -> host tensors
  void upload_outputs();  // host (re-poisoned) outputs -> device
  TensorView view(Role r) const;
  AttentionOptions options(void* stream) const;

 private:
  const AttnCase& c_;
  AttnTensors& host_;
  DeviceBuffer buf_[kRoles];
  DeviceBuffer cu_q_, cu_k_;
  DeviceBuffer workspace_;
};

}  // namespace flashpp::test::gpu
