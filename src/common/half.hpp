#pragma once
// Portable fp16 / bf16 <-> fp32 conversions for host code (round to nearest
// even, NaN and Inf preserved). Device code uses the CUDA intrinsics instead.
#include <cstdint>
#include <cstring>

namespace flashpp {

inline float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline std::uint32_t float_to_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float bf16_to_float(std::uint16_t h) { return bits_to_float(std::uint32_t(h) << 16); }
inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return std::uint16_t(u >> 16);
}

inline float fp16_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (man == 0) return bits_to_float(sign);
    // subnormal: value = man * 2^-24
    float f = float(man) * (1.0f / 16777216.0f);
    return sign ? -f : f;
  }
  return bits_to_float(sign | ((exp + 112u) << 23) | (man << 13));
}

inline std::uint16_t float_to_fp16(float f) {
  std::uint32_t u = float_to_bits(f);
  const std::uint16_t sign = std::uint16_t((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (u >= 0x477ff000u) return sign | 0x7c00u;  // overflow (>= 65520) -> inf
  if (u < 0x38800000u) {                        // below min normal: subnormal or zero
    if (u < 0x33000000u) return sign;           // < 2^-25 rounds to 0
    // value * 2^24 rounded to nearest even gives the subnormal mantissa
    const std::uint32_t e = u >> 23;
    const std::uint32_t m = (u & 0x7fffffu) | 0x800000u;
    const int shift = int(126 - e);  // 14..24 : m >> (shift) has the mantissa
    std::uint32_t r = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return sign | std::uint16_t(r);
  }
  // normal: rebias exponent and round mantissa from 23 to 10 bits
  std::uint32_t r = u - 0x38000000u;  // exponent -112
  r += 0xfffu + ((r >> 13) & 1u);
  return sign | std::uint16_t(r >> 13);
}

}  // namespace flashpp
