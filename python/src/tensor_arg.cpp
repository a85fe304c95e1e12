#include "tensor_arg.hpp"

#include <cstdint>
#include <string>

#include "flashpp/error.hpp"

namespace nb = nanobind;

namespace flashpp::python {
namespace {

[[noreturn]] void fail(ErrorKind kind, const char* name, const std::string& rule) { throw Error(kind, name, rule); }

constexpr int kDTypeCount = int(DType::e4m3) + 1;

DType dtype_from_code(std::int64_t code, const char* name) {
  if (code < 0 || code >= kDTypeCount) fail(ErrorKind::type, name, "unknown dtype code " + std::to_string(code));
  return DType(code);
}

// DLPack type codes (dlpack.h): 0 int, 2 float, 4 bfloat, 10 float8_e4m3fn.
DType dtype_from_dlpack(const nb::dlpack::dtype& t, const char* name) {
  if (t.lanes == 1) {
    if (t.code == 2 && t.bits == 32) return DType::f32;
    if (t.code == 2 && t.bits == 16) return DType::f16;
    if (t.code == 4 && t.bits == 16) return DType::bf16;
    if (t.code == 2 && t.bits == 64) return DType::f64;
    if (t.code == 0 && t.bits == 32) return DType::i32;
    if (t.code == 10 && t.bits == 8) return DType::e4m3;
  }
  fail(ErrorKind::type, name,
       "unsupported dtype (DLPack code " + std::to_string(t.code) + ", " + std::to_string(t.bits) + " bits, " +
           std::to_string(t.lanes) + " lanes)");
}

// DLPack device types: 1 CPU, 2 CUDA, 3 CUDA pinned host memory, 13 CUDA managed.
Device device_from_dlpack(std::int32_t type, std::int32_t id, const char* name) {
  switch (type) {
    case 1:
    case 3: return Device::cpu();
    case 2:
    case 13: return Device::cuda(id);
    default: break;
  }
  fail(ErrorKind::type, name, "unsupported device (DLPack device type " + std::to_string(type) + ")");
}

void check_rank(std::size_t ndim, const char* name) {
  if (ndim == 0 || ndim > std::size_t(kMaxDims))
    fail(ErrorKind::value, name, "must have 1 to " + std::to_string(kMaxDims) + " dims, got " + std::to_string(ndim));
}

TensorView from_spec(const nb::tuple& spec, const char* name) {
  if (spec.size() != 6) fail(ErrorKind::value, name, "a tensor spec tuple needs 6 entries");
  TensorView t;
  t.data = reinterpret_cast<void*>(nb::cast<std::uintptr_t>(spec[0]));
  t.dtype = dtype_from_code(nb::cast<std::int64_t>(spec[1]), name);
  nb::tuple shape = nb::cast<nb::tuple>(spec[2]);
  nb::tuple stride = nb::cast<nb::tuple>(spec[3]);
  check_rank(shape.size(), name);
  if (stride.size() != shape.size()) fail(ErrorKind::value, name, "shape and strides differ in length");
  t.ndim = int(shape.size());
  for (int i = 0; i < t.ndim; ++i) {
    t.shape[i] = nb::cast<std::int64_t>(shape[i]);
    t.stride[i] = nb::cast<std::int64_t>(stride[i]);
  }
  const auto kind = nb::cast<std::int64_t>(spec[4]);
  const auto index = nb::cast<int>(spec[5]);
  if (kind == 0)
    t.device = Device::cpu();
  else if (kind == 1)
    t.device = Device::cuda(index);
  else
    fail(ErrorKind::type, name, "unknown device kind " + std::to_string(kind));
  return t;
}

TensorView from_ndarray(const nb::ndarray<nb::ro>& a, const char* name) {
  check_rank(a.ndim(), name);
  TensorView t;
  t.data = const_cast<void*>(a.data());
  t.dtype = dtype_from_dlpack(a.dtype(), name);
  t.ndim = int(a.ndim());
  for (int i = 0; i < t.ndim; ++i) {
    t.shape[i] = std::int64_t(a.shape(std::size_t(i)));
    t.stride[i] = std::int64_t(a.stride(std::size_t(i)));
  }
  t.device = device_from_dlpack(a.device_type(), a.device_id(), name);
  return t;
}

}  // namespace

TensorView to_view(nb::handle obj, const char* name, KeepAlive& keep) {
  if (obj.is_none()) return {};
  if (nb::isinstance<nb::tuple>(obj)) return from_spec(nb::borrow<nb::tuple>(obj), name);
  nb::ndarray<nb::ro> a;
  if (!nb::try_cast(obj, a, /*convert=*/false))
    fail(ErrorKind::type, name,
         std::string("expected an array with DLPack or buffer-protocol support, got ") +
             nb::type_name(obj.type()).c_str());
  keep.push_back(a);
  return from_ndarray(a, name);
}

}  // namespace flashpp::python
