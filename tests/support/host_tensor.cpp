#include "support/host_tensor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "common/half.hpp"

namespace flashpp::test {
namespace {

// Poison patterns: quiet NaNs for floats, a recognizable value for ints.
constexpr std::uint32_t kPoisonF32 = 0x7fc0dead;
constexpr std::uint16_t kPoisonF16 = 0x7e5a;
constexpr std::uint16_t kPoisonBF16 = 0x7fda;
constexpr std::int32_t kPoisonI32 = 0x7eadbeef;

std::int64_t pick_pad(std::mt19937_64& rng, int align) {
  // Mostly small pads; sometimes none so that mixtures occur.
  const std::int64_t units = std::uniform_int_distribution<int>(0, 3)(rng);
  return units * align + (align == 1 ? std::uniform_int_distribution<int>(0, 1)(rng) : 0);
}

}  // namespace

void HostTensor::Free::operator()(std::byte* p) const { std::free(p); }

Layout contiguous_layout() { return Layout{}; }

Layout padded_layout(int ndim, std::mt19937_64& rng, int align) {
  Layout l;
  l.pad.resize(ndim);
  for (auto& p : l.pad) p = pick_pad(rng, align);
  l.offset = pick_pad(rng, align);
  l.name = "padded";
  return l;
}

Layout heads_outer_layout(int ndim) {
  Layout l;
  if (ndim == 4) l.order = {0, 2, 1};
  else if (ndim == 3) l.order = {1, 0};
  l.name = "heads-outer";
  return l;
}

Layout packed_slot_layout(const std::vector<std::int64_t>& shape, int slots, int slot) {
  const int nd = int(shape.size());
  Layout l;
  l.pad.assign(nd, 0);
  // The heads dim (second to last) carries the other slots: its storage
  // extent becomes slots * heads and element 0 sits at slot * heads * dim.
  l.pad[nd - 2] = (slots - 1) * shape[nd - 2];
  l.offset = slot * shape[nd - 2] * shape[nd - 1];
  l.name = "packed(" + std::to_string(slots) + ",slot" + std::to_string(slot) + ")";
  return l;
}

Layout shuffled_layout(int ndim, std::mt19937_64& rng, int align) {
  Layout l = padded_layout(ndim, rng, align);
  l.order.resize(ndim - 1);
  std::iota(l.order.begin(), l.order.end(), 0);
  std::shuffle(l.order.begin(), l.order.end(), rng);
  l.name = "shuffled";
  return l;
}

HostTensor::HostTensor(DType dtype, std::vector<std::int64_t> shape, const Layout& layout)
    : dtype_(dtype), shape_(std::move(shape)), offset_(layout.offset), layout_name_(layout.name) {
  const int nd = ndim();
  if (nd < 1 || nd > kMaxDims) throw std::invalid_argument("HostTensor: rank must be in [1, 4]");
  std::vector<int> order = layout.order;
  if (order.empty()) {
    order.resize(nd - 1);
    std::iota(order.begin(), order.end(), 0);
  }
  order.push_back(nd - 1);
  std::vector<std::int64_t> pad = layout.pad;
  pad.resize(nd, 0);
  stride_.assign(nd, 0);
  std::int64_t st = 1;
  for (int k = nd - 1; k >= 0; --k) {
    const int d = order[k];
    stride_[d] = st;
    st *= std::max<std::int64_t>(shape_[d], 1) + pad[d];
  }
  // Enough storage for the whole padded box after the offset.
  storage_elems_ = offset_ + st;
  const std::size_t bytes = (storage_bytes() + 63) / 64 * 64;
  buf_.reset(static_cast<std::byte*>(std::aligned_alloc(64, std::max<std::size_t>(bytes, 64))));
  if (!buf_) throw std::bad_alloc();
  addressed_.assign(storage_elems_, 0);
  for (std::int64_t i = 0, n = numel(); i < n; ++i) addressed_[storage_index(i)] = 1;
  poison();
}

std::int64_t HostTensor::numel() const {
  std::int64_t n = 1;
  for (auto s : shape_) n *= s;
  return n;
}

std::size_t HostTensor::storage_bytes() const { return std::size_t(storage_elems_) * dtype_size(dtype_); }

TensorView HostTensor::view() const {
  if (shape_.empty()) return TensorView{};
  return view_on(const_cast<std::byte*>(buf_.get()), Device::cpu());
}

TensorView HostTensor::view_on(void* storage_base, Device device) const {
  TensorView t;
  t.data = static_cast<std::byte*>(storage_base) + offset_ * std::int64_t(dtype_size(dtype_));
  t.dtype = dtype_;
  t.ndim = ndim();
  t.device = device;
  for (int i = 0; i < ndim(); ++i) {
    t.shape[i] = shape_[i];
    t.stride[i] = stride_[i];
  }
  return t;
}

std::int64_t HostTensor::storage_index(std::int64_t linear) const {
  std::int64_t idx = offset_;
  for (int d = ndim() - 1; d >= 0; --d) {
    idx += (linear % shape_[d]) * stride_[d];
    linear /= shape_[d];
  }
  return idx;
}

double HostTensor::get(std::int64_t linear) const {
  const std::int64_t i = storage_index(linear);
  const std::byte* b = buf_.get();
  switch (dtype_) {
    case DType::f32: { float f; std::memcpy(&f, b + 4 * i, 4); return f; }
    case DType::f64: { double f; std::memcpy(&f, b + 8 * i, 8); return f; }
    case DType::i32: { std::int32_t f; std::memcpy(&f, b + 4 * i, 4); return f; }
    case DType::f16: { std::uint16_t h; std::memcpy(&h, b + 2 * i, 2); return fp16_to_float(h); }
    case DType::bf16: { std::uint16_t h; std::memcpy(&h, b + 2 * i, 2); return bf16_to_float(h); }
    case DType::e4m3: break;
  }
  throw std::invalid_argument("HostTensor::get: unsupported dtype");
}

void HostTensor::set(std::int64_t linear, double value) {
  const std::int64_t i = storage_index(linear);
  std::byte* b = buf_.get();
  switch (dtype_) {
    case DType::f32: { const float f = float(value); std::memcpy(b + 4 * i, &f, 4); return; }
    case DType::f64: { std::memcpy(b + 8 * i, &value, 8); return; }
    case DType::i32: { const auto f = std::int32_t(value); std::memcpy(b + 4 * i, &f, 4); return; }
    case DType::f16: { const auto h = float_to_fp16(float(value)); std::memcpy(b + 2 * i, &h, 2); return; }
    case DType::bf16: { const auto h = float_to_bf16(float(value)); std::memcpy(b + 2 * i, &h, 2); return; }
    case DType::e4m3: break;
  }
  throw std::invalid_argument("HostTensor::set: unsupported dtype");
}

std::vector<double> HostTensor::to_dense() const {
  std::vector<double> out(static_cast<std::size_t>(numel()));
  for (std::int64_t i = 0; i < numel(); ++i) out[std::size_t(i)] = get(i);
  return out;
}

void HostTensor::fill_normal(std::mt19937_64& rng, double magnitude) {
  poison();
  std::normal_distribution<double> dist(0.0, 1.0);
  for (std::int64_t i = 0; i < numel(); ++i) {
    double x = dist(rng) * magnitude;
    // Exact zeros would hide accumulation bugs; nudge them away.
    if (std::abs(x) < 1e-3 * magnitude) x = x < 0 ? -1e-3 * magnitude : 1e-3 * magnitude;
    set(i, x);
  }
}

void HostTensor::store_poison(std::int64_t i) {
  std::byte* b = buf_.get();
  switch (dtype_) {
    case DType::f32: std::memcpy(b + 4 * i, &kPoisonF32, 4); return;
    case DType::f64: { const double nan = std::numeric_limits<double>::quiet_NaN(); std::memcpy(b + 8 * i, &nan, 8); return; }
    case DType::i32: std::memcpy(b + 4 * i, &kPoisonI32, 4); return;
    case DType::f16: std::memcpy(b + 2 * i, &kPoisonF16, 2); return;
    case DType::bf16: std::memcpy(b + 2 * i, &kPoisonBF16, 2); return;
    case DType::e4m3: { const std::uint8_t nan = 0x7f; std::memcpy(b + i, &nan, 1); return; }
  }
}

bool HostTensor::holds_poison(std::int64_t i) const {
  const std::size_t es = dtype_size(dtype_);
  std::byte want[8];
  switch (dtype_) {
    case DType::f32: std::memcpy(want, &kPoisonF32, 4); break;
    case DType::f64: { const double nan = std::numeric_limits<double>::quiet_NaN(); std::memcpy(want, &nan, 8); break; }
    case DType::i32: std::memcpy(want, &kPoisonI32, 4); break;
    case DType::f16: std::memcpy(want, &kPoisonF16, 2); break;
    case DType::bf16: std::memcpy(want, &kPoisonBF16, 2); break;
    case DType::e4m3: want[0] = std::byte{0x7f}; break;
  }
  return std::memcmp(buf_.get() + std::size_t(i) * es, want, es) == 0;
}

void HostTensor::poison() {
  for (std::int64_t i = 0; i < storage_elems_; ++i) store_poison(i);
}

bool HostTensor::padding_is_poison() const {
  for (std::int64_t i = 0; i < storage_elems_; ++i)
    if (!addressed_[std::size_t(i)] && !holds_poison(i)) return false;
  return true;
}

std::string HostTensor::describe() const {
  auto list = [](const std::vector<std::int64_t>& v) {
    std::string s = "(";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + ")";
  };
  return std::string(dtype_name(dtype_)) + " " + list(shape_) + " strides " + list(stride_) + " +" +
         std::to_string(offset_) + " [" + layout_name_ + "]";
}

std::vector<std::byte> storage_snapshot(const HostTensor& t) {
  const auto* p = static_cast<const std::byte*>(t.storage());
  return std::vector<std::byte>(p, p + t.storage_bytes());
}

HostTensor make_cu_seqlens(const std::vector<int>& lens) {
  HostTensor t(DType::i32, {std::int64_t(lens.size()) + 1});
  std::int64_t acc = 0;
  t.set(0, 0);
  for (std::size_t i = 0; i < lens.size(); ++i) {
    acc += lens[i];
    t.set(std::int64_t(i) + 1, double(acc));
  }
  return t;
}

}  // namespace flashpp::test
