#pragma once
// Host tensors for tests: a 64-byte aligned buffer plus a strided geometry.
// Storage the view does not address ("padding") holds a NaN poison pattern, so
// a backend that reads outside its view produces NaN and one that writes
// outside it is caught by padding_is_poison(). The geometry is independent of
// the buffer: view_on() lays the same strides over another copy of the
// storage (e.g. a device buffer of storage_bytes()).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "flashpp/tensor.hpp"

namespace flashpp::test {

// How a tensor's elements sit in its buffer.
struct Layout {
  // Storage order of the leading dims, outermost first; the last logical dim
  // is always innermost with stride 1. Empty = logical order.
  std::vector<int> order;
  // Extra (unaddressed) elements appended to each logical dim's extent in the
  // buffer; pad[last] widens every row. Empty = no padding.
  std::vector<std::int64_t> pad;
  std::int64_t offset = 0;  // elements before element 0
  std::string name = "contiguous";
};

// Named layouts. `align` (elements) keeps every pad and offset a multiple of
// it so the same layouts satisfy CUDA's 16-byte rule (align 8 for 2-byte types).
Layout contiguous_layout();
// Random padding on every dim and a random leading offset.
Layout padded_layout(int ndim, std::mt19937_64& rng, int align);
// (b, s, h, d) stored as (b, h, s, d), or varlen (t, h, d) stored as (h, t, d).
Layout heads_outer_layout(int ndim);
// One slot of a packed tensor, e.g. q of a (b, s, 3, h, d) qkv buffer: the
// other slots are padding around the heads dim.
Layout packed_slot_layout(const std::vector<std::int64_t>& shape, int slots, int slot);
// Random storage order of the leading dims, random pads and offset.
Layout shuffled_layout(int ndim, std::mt19937_64& rng, int align);

class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, std::vector<std::int64_t> shape, const Layout& layout = contiguous_layout());

  DType dtype() const { return dtype_; }
  int ndim() const { return int(shape_.size()); }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  const std::vector<std::int64_t>& strides() const { return stride_; }
  std::int64_t offset() const { return offset_; }
  std::int64_t numel() const;
  std::int64_t storage_elems() const { return storage_elems_; }
  std::size_t storage_bytes() const;
  void* storage() { return buf_.get(); }
  const void* storage() const { return buf_.get(); }

  // A CPU view of this tensor (undefined view when the tensor is empty-constructed).
  TensorView view() const;
  // The same geometry over another copy of the storage; storage_base points
  // at that copy's first byte (not at element 0).
  TensorView view_on(void* storage_base, Device device) const;

  // Storage index (elements) of the logical row-major index `linear`.
  std::int64_t storage_index(std::int64_t linear) const;
  double get(std::int64_t linear) const;
  // Stores value rounded to the tensor's dtype (ints are truncated).
  void set(std::int64_t linear, double value);

  // All elements in logical row-major order, as doubles.
  std::vector<double> to_dense() const;
  // Element values N(0, 1) * magnitude (never all zeros); padding poisoned.
  void fill_normal(std::mt19937_64& rng, double magnitude = 1.0);
  // Every byte of storage, addressed or not, set to the poison pattern.
  void poison();
  // True when no storage outside the view was modified since poison()/fill.
  bool padding_is_poison() const;
  // "bf16 (2, 17, 4, 64) strides (.., ..) +off [layout]"
  std::string describe() const;

 private:
  void store_poison(std::int64_t storage_idx);
  bool holds_poison(std::int64_t storage_idx) const;

  struct Free {
    void operator()(std::byte* p) const;
  };
  DType dtype_ = DType::f32;
  std::vector<std::int64_t> shape_, stride_;
  std::int64_t offset_ = 0;
  std::int64_t storage_elems_ = 0;
  std::string layout_name_;
  std::unique_ptr<std::byte[], Free> buf_;
  std::vector<std::uint8_t> addressed_;  // per storage element: 1 when the view addresses it
};

// A copy of every storage byte (determinism checks).
std::vector<std::byte> storage_snapshot(const HostTensor& t);

// int32 prefix sums (lens.size() + 1 entries) for cu_seqlens.
HostTensor make_cu_seqlens(const std::vector<int>& lens);

}  // namespace flashpp::test
