#pragma once
// Non-owning tensor views. flashpp never allocates the tensors it reads or
// writes; callers (C++, Python through DLPack, PyTorch) own all memory.
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace flashpp {

enum class DType : std::uint8_t { f32, f16, bf16, f64, i32, e4m3 };

const char* dtype_name(DType t) noexcept;
std::size_t dtype_size(DType t) noexcept;

enum class DeviceKind : std::uint8_t { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;
  static Device cpu() { return {DeviceKind::cpu, 0}; }
  static Device cuda(int i = 0) { return {DeviceKind::cuda, i}; }
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

inline constexpr int kMaxDims = 4;

// shape and strides are in elements (not bytes). An undefined view (ndim == 0,
// data == nullptr) stands for an optional argument that was not given.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  int ndim = 0;
  std::array<std::int64_t, kMaxDims> shape{};
  std::array<std::int64_t, kMaxDims> stride{};
  Device device{};

  bool defined() const noexcept { return ndim > 0; }
  // Number of elements; saturates at INT64_MAX instead of overflowing (a view
  // with a zero size has none, whatever its other sizes).
  std::int64_t numel() const noexcept {
    if (ndim <= 0) return 0;
    for (int i = 0; i < ndim; ++i)
      if (shape[i] == 0) return 0;
    constexpr std::int64_t kMax = INT64_MAX;
    std::int64_t n = 1;
    for (int i = 0; i < ndim; ++i) {
      if (shape[i] < 0) return 0;
      if (n > kMax / shape[i]) return kMax;
      n *= shape[i];
    }
    return n;
  }
  std::int64_t size(int d) const noexcept { return shape[d < 0 ? d + ndim : d]; }

  // A row-major (C-contiguous) view.
  static TensorView contiguous(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                               Device device = Device::cpu()) {
    TensorView t;
    t.data = data;
    t.dtype = dtype;
    t.device = device;
    t.ndim = static_cast<int>(shape.size());
    int i = 0;
    for (auto s : shape) t.shape[i++] = s;
    std::int64_t st = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
      t.stride[d] = st;
      st *= t.shape[d];
    }
    return t;
  }
  // The same view with explicit strides (elements).
  static TensorView strided(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                            std::initializer_list<std::int64_t> strides, Device device = Device::cpu()) {
    TensorView t = contiguous(data, dtype, shape, device);
    int i = 0;
    for (auto s : strides) t.stride[i++] = s;
    return t;
  }
};

}  // namespace flashpp
