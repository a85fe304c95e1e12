#include "gpu_support.hpp"

#include <stdexcept>

#include "flashpp/attention.hpp"

#if defined(FLASHPP_WITH_CUDA)
#include <cuda_runtime.h>
#endif

namespace flashpp::test::gpu {

#if defined(FLASHPP_WITH_CUDA)
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

std::string probe() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(e);
  if (n == 0) return "cudaGetDeviceCount returned 0 devices";
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "cudaGetDeviceProperties(0) failed";
  if (prop.major < 8)
    return "device 0 (" + std::string(prop.name) + ") is sm_" + std::to_string(prop.major * 10 + prop.minor) +
           "; the kernels need sm_80 or newer";
  return "";
}

}  // namespace

const std::string& gpu_unavailable_reason() {
  static const std::string why = probe();
  return why;
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}
void DeviceBuffer::upload(const void* host, std::size_t bytes, std::size_t offset) {
  if (offset + bytes > bytes_) throw std::out_of_range("DeviceBuffer::upload past the end");
  if (bytes)
    check(cudaMemcpy(static_cast<char*>(ptr_) + offset, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}
void DeviceBuffer::download(void* host, std::size_t bytes, std::size_t offset) const {
  if (offset + bytes > bytes_) throw std::out_of_range("DeviceBuffer::download past the end");
  if (bytes)
    check(cudaMemcpy(host, static_cast<const char*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}
void DeviceBuffer::fill_byte(int value) {
  if (bytes_) check(cudaMemset(ptr_, value, bytes_), "cudaMemset");
}

Stream::Stream() {
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  s_ = s;
}
Stream::~Stream() { cudaStreamDestroy(static_cast<cudaStream_t>(s_)); }
void Stream::synchronize() const { check(cudaStreamSynchronize(static_cast<cudaStream_t>(s_)), "cudaStreamSynchronize"); }

void device_synchronize() {
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  check(cudaGetLastError(), "kernel error");
}

std::size_t free_device_memory() {
  std::size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  return free_b;
}

#else  // built without CUDA: every GPU test skips

const std::string& gpu_unavailable_reason() {
  static const std::string why = "flashpp was built without its CUDA backend (FLASHPP_CUDA=OFF, or no nvcc at configure time)";
  return why;
}
DeviceBuffer::DeviceBuffer(std::size_t) { throw std::runtime_error(gpu_unavailable_reason()); }
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(DeviceBuffer&&) noexcept = default;
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&&) noexcept = default;
void DeviceBuffer::upload(const void*, std::size_t, std::size_t) {}
void DeviceBuffer::download(void*, std::size_t, std::size_t) const {}
void DeviceBuffer::fill_byte(int) {}
Stream::Stream() { throw std::runtime_error(gpu_unavailable_reason()); }
Stream::~Stream() = default;
void Stream::synchronize() const {}
void device_synchronize() {}
std::size_t free_device_memory() { return 0; }

#endif

// ---- DeviceCase (plain API calls; the CUDA-specific parts are above) ----

DeviceCase::DeviceCase(const AttnCase& c, AttnTensors& host) : c_(c), host_(host) {
  for (int r = 0; r < kRoles; ++r) {
    const HostTensor& t = host.get(Role(r));
    if (t.ndim() == 0) continue;
    buf_[r] = DeviceBuffer(t.storage_bytes());
    buf_[r].upload(t.storage(), t.storage_bytes());
  }
  if (c.varlen) {
    cu_q_ = DeviceBuffer(host.cu_q.storage_bytes());
    cu_q_.upload(host.cu_q.storage(), host.cu_q.storage_bytes());
    cu_k_ = DeviceBuffer(host.cu_k.storage_bytes());
    cu_k_.upload(host.cu_k.storage(), host.cu_k.storage_bytes());
  }
}

TensorView DeviceCase::view(Role r) const {
  const HostTensor& t = host_.get(r);
  if (t.ndim() == 0) return {};
  return t.view_on(buf_[int(r)].get(), Device::cuda(0));
}

AttentionOptions DeviceCase::options(void* stream) const {
  AttentionOptions o = c_.options();
  if (c_.varlen) {
    o.cu_seqlens_q = host_.cu_q.view_on(cu_q_.get(), Device::cuda(0));
    o.cu_seqlens_k = host_.cu_k.view_on(cu_k_.get(), Device::cuda(0));
  }
  o.stream = stream;
  return o;
}

void DeviceCase::run_forward(void* stream, bool with_workspace) {
  const AttentionOptions o = options(stream);
  const std::size_t ws = forward_workspace_bytes(view(Role::q), view(Role::k), view(Role::v), o);
  if (workspace_.bytes() < ws) workspace_ = DeviceBuffer(ws);
  const Workspace given = with_workspace ? Workspace{workspace_.get(), workspace_.bytes()} : Workspace{};
  forward(view(Role::q), view(Role::k), view(Role::v), view(Role::out), view(Role::lse), o, given);
}

void DeviceCase::run_backward(void* stream) {
  const AttentionOptions o = options(stream);
  const std::size_t ws = backward_workspace_bytes(view(Role::q), view(Role::k), view(Role::v), o);
  if (workspace_.bytes() < ws) workspace_ = DeviceBuffer(ws);
  backward(view(Role::dout), view(Role::q), view(Role::k), view(Role::v), view(Role::out), view(Role::lse),
           view(Role::dq), view(Role::dk), view(Role::dv), o, {workspace_.get(), workspace_.bytes()});
}

void DeviceCase::download() {
  device_synchronize();
  for (int r = 0; r < kRoles; ++r) {
    HostTensor& t = host_.get(Role(r));
    if (t.ndim() == 0) continue;
    buf_[r].download(t.storage(), t.storage_bytes());
  }
}

void DeviceCase::upload_outputs() {
  for (Role r : {Role::out, Role::lse, Role::dq, Role::dk, Role::dv}) {
    HostTensor& t = host_.get(r);
    if (t.ndim() == 0) continue;
    buf_[int(r)].upload(t.storage(), t.storage_bytes());
  }
}

}  // namespace flashpp::test::gpu
