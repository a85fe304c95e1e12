// Host fp16 / bf16 conversions (src/common/half.hpp): exact round trips of
// every bit pattern, round-to-nearest-even at every midpoint between adjacent
// representable values, overflow to infinity and NaN preservation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "common/half.hpp"

namespace flashpp {
namespace {

bool fp16_is_nan(std::uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool bf16_is_nan(std::uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

TEST(Fp16, EveryBitPatternRoundTrips) {
  int nans = 0;
  for (std::uint32_t u = 0; u < 65536; ++u) {
    const auto h = std::uint16_t(u);
    const float f = fp16_to_float(h);
    if (fp16_is_nan(h)) {
      ++nans;
      EXPECT_TRUE(std::isnan(f)) << std::hex << u;
      EXPECT_TRUE(fp16_is_nan(float_to_fp16(f))) << std::hex << u;
      continue;
    }
    ASSERT_EQ(float_to_fp16(f), h) << "fp16 0x" << std::hex << u << " -> " << f;
  }
  EXPECT_EQ(nans, 2 * 1023);
}

TEST(Fp16, KnownValues) {
  EXPECT_EQ(fp16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_float(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(fp16_to_float(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(fp16_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(float_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_fp16(1e6f), 0x7c00);
  EXPECT_EQ(float_to_fp16(-1e6f), 0xfc00);
  EXPECT_EQ(float_to_fp16(1e-10f), 0x0000);
  EXPECT_EQ(float_to_fp16(-1e-10f), 0x8000);
}

TEST(Fp16, TiesRoundToEven) {
  // 1 + 2^-11 lies halfway between 1 (even mantissa) and 1 + 2^-10 (odd).
  EXPECT_EQ(float_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3 * 2^-11 lies halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  EXPECT_EQ(float_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Subnormal ties: 2^-25 -> 0, 3 * 2^-25 -> 2 * 2^-24.
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(float_to_fp16(3 * std::ldexp(1.0f, -25)), 0x0002);
  // 65520 is halfway between 65504 (odd) and 65536 (would be even): overflows.
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);
  EXPECT_EQ(float_to_fp16(std::nextafter(65520.0f, 0.0f)), 0x7bff);
}

// Between every pair of adjacent fp16 values a < b (both signs, including the
// subnormal range and max -> inf), the exact midpoint rounds to the one with
// an even mantissa and the floats just beside it round to the nearer side.
TEST(Fp16, EveryMidpointRoundsToNearestEven) {
  for (std::uint32_t sign : {0u, 0x8000u})
    for (std::uint32_t m = 0; m < 0x7c00; ++m) {
      const auto lo = std::uint16_t(sign | m), hi = std::uint16_t(sign | (m + 1));
      const float a = fp16_to_float(lo);
      const float b = m + 1 == 0x7c00 ? (sign ? -65536.0f : 65536.0f) : fp16_to_float(hi);
      const float mid = float((double(a) + double(b)) / 2);  // exact: at most 12 significant bits
      ASSERT_EQ(float_to_fp16(mid), (m & 1u) ? hi : lo) << std::hex << m;
      ASSERT_EQ(float_to_fp16(std::nextafter(mid, a)), lo) << std::hex << m;
      ASSERT_EQ(float_to_fp16(std::nextafter(mid, b)), hi) << std::hex << m;
    }
}

TEST(Fp16, NanAndInfPreserved) {
  EXPECT_TRUE(fp16_is_nan(float_to_fp16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(fp16_is_nan(float_to_fp16(bits_to_float(0x7f800001u))));  // NaN payload only in low bits
  EXPECT_TRUE(fp16_is_nan(float_to_fp16(bits_to_float(0xff800001u))));
  EXPECT_EQ(float_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
}

TEST(Bf16, EveryBitPatternRoundTrips) {
  int nans = 0;
  for (std::uint32_t u = 0; u < 65536; ++u) {
    const auto h = std::uint16_t(u);
    const float f = bf16_to_float(h);
    if (bf16_is_nan(h)) {
      ++nans;
      EXPECT_TRUE(std::isnan(f)) << std::hex << u;
      EXPECT_TRUE(bf16_is_nan(float_to_bf16(f))) << std::hex << u;
      continue;
    }
    ASSERT_EQ(float_to_bf16(f), h) << "bf16 0x" << std::hex << u << " -> " << f;
  }
  EXPECT_EQ(nans, 2 * 127);
}

TEST(Bf16, TiesRoundToEven) {
  // 1 + 2^-8 lies halfway between 1 (even) and 1 + 2^-7 (odd).
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(float_to_bf16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)), 0x3f81);
  // The largest float is past the midpoint between bf16 max and 2^128: inf.
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
}

TEST(Bf16, EveryMidpointRoundsToNearestEven) {
  for (std::uint32_t sign : {0u, 0x8000u})
    for (std::uint32_t m = 0; m < 0x7f7f; ++m) {  // pairs below the max finite value
      const auto lo = std::uint16_t(sign | m), hi = std::uint16_t(sign | (m + 1));
      const float a = bf16_to_float(lo), b = bf16_to_float(hi);
      // In double (a + b overflows float near the top); the midpoint itself
      // has at most 9 significant bits and is exact in float.
      const float mid = float((double(a) + double(b)) / 2);
      ASSERT_EQ(float_to_bf16(mid), (m & 1u) ? hi : lo) << std::hex << m;
      ASSERT_EQ(float_to_bf16(std::nextafter(mid, a)), lo) << std::hex << m;
      ASSERT_EQ(float_to_bf16(std::nextafter(mid, b)), hi) << std::hex << m;
    }
}

TEST(Bf16, NanAndInfPreserved) {
  EXPECT_TRUE(bf16_is_nan(float_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  // A NaN whose payload lies only in the 16 bits bf16 drops must stay NaN, not become inf.
  EXPECT_TRUE(bf16_is_nan(float_to_bf16(bits_to_float(0x7f800001u))));
  EXPECT_TRUE(bf16_is_nan(float_to_bf16(bits_to_float(0xff800001u))));
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
}

}  // namespace
}  // namespace flashpp
