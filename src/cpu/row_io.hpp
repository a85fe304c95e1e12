#pragma once
// Moving one row between a tensor of any supported dtype and an fp32 buffer.
// The CPU backend computes in fp32 on tile-sized buffers only.
#include <cstdint>

#include "common/half.hpp"
#include "common/params.hpp"

namespace flashpp::cpu {

inline void load_row(const void* base, ElemType t, std::int64_t offset, int n, float* dst) {
  switch (t) {
    case ElemType::f32: {
      const float* s = static_cast<const float*>(base) + offset;
      for (int i = 0; i < n; ++i) dst[i] = s[i];
      return;
    }
    case ElemType::f16: {
      const std::uint16_t* s = static_cast<const std::uint16_t*>(base) + offset;
      for (int i = 0; i < n; ++i) dst[i] = fp16_to_float(s[i]);
      return;
    }
    case ElemType::bf16: {
      const std::uint16_t* s = static_cast<const std::uint16_t*>(base) + offset;
#pragma omp simd
      for (int i = 0; i < n; ++i) dst[i] = bits_to_float(std::uint32_t(s[i]) << 16);
      return;
    }
    case ElemType::e4m3: break;
  }
}

inline void store_row(void* base, ElemType t, std::int64_t offset, int n, const float* src) {
  switch (t) {
    case ElemType::f32: {
      float* d = static_cast<float*>(base) + offset;
      for (int i = 0; i < n; ++i) d[i] = src[i];
      return;
    }
    case ElemType::f16: {
      std::uint16_t* d = static_cast<std::uint16_t*>(base) + offset;
      for (int i = 0; i < n; ++i) d[i] = float_to_fp16(src[i]);
      return;
    }
    case ElemType::bf16: {
      std::uint16_t* d = static_cast<std::uint16_t*>(base) + offset;
      for (int i = 0; i < n; ++i) d[i] = float_to_bf16(src[i]);
      return;
    }
    case ElemType::e4m3: break;
  }
}

inline void store_zero_row(void* base, ElemType t, std::int64_t offset, int n) {
  const std::size_t es = t == ElemType::f32 ? 4 : 2;
  unsigned char* d = static_cast<unsigned char*>(base) + offset * std::int64_t(es);
  for (std::size_t i = 0; i < std::size_t(n) * es; ++i) d[i] = 0;
}

}  // namespace flashpp::cpu
