// Scalar conversions between fp32 and the 16-bit / 8-bit formats the library uses, plus typed
// element loads/stores for the CPU backend. All conversions round to nearest, ties to even.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "common/modes.h"
#include "int8attn.h"

namespace int8attn {
namespace cpu {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// fp32 -> IEEE binary16 bits (RNE; overflow -> inf, NaN kept).
inline uint16_t f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (x >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf
  if (x < 0x38800000u) {                        // below 2^-14: subnormal step 2^-24
    const float a = bits_f32(x);
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  const uint32_t r = x + 0x0fffu + ((x >> 13) & 1u) - 0x38000000u;
  return sign | static_cast<uint16_t>(r >> 13);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float v = static_cast<float>(m) * 5.9604644775390625e-08f;  // 2^-24
    return sign ? -v : v;
  }
  if (e == 31) return bits_f32(sign | 0x7f800000u | (m << 13));
  return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

inline uint16_t f32_to_bf16(float f) {
  const uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
inline float bf16_to_f32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }

inline float round_f16(float x) { return f16_to_f32(f32_to_f16(x)); }

// E4M3 bit pattern of a value that is already exactly representable (output of
// qm::fp8_e4m3_round); NaN is 0x7f (E4M3 has no infinity).
inline uint8_t e4m3_encode_exact(float r) {
  if (std::isnan(r)) return 0x7f;
  uint8_t s = std::signbit(r) ? 0x80 : 0;
  const float a = std::fabs(r);
  if (a == 0.0f) return s;
  if (a < 0.015625f) return s | static_cast<uint8_t>(a * 512.0f);
  int e;
  const float f = std::frexp(a, &e);  // a = f·2^e, f in [0.5,1)
  const int E = e - 1 + 7;
  const int m = static_cast<int>(f * 16.0f) - 8;
  return s | static_cast<uint8_t>((E << 3) | m);
}

inline float e4m3_decode(uint8_t b) {
  if ((b & 0x7f) == 0x7f) return std::numeric_limits<float>::quiet_NaN();  // S.1111.111
  const int E = (b >> 3) & 15, m = b & 7;
  float v = E == 0 ? static_cast<float>(m) / 512.0f : std::ldexp(1.0f + m / 8.0f, E - 7);
  return (b & 0x80) ? -v : v;
}

inline float load_elem(const void* base, int64_t off, DType dtype) {
  switch (dtype) {
    case DType::kF16: return f16_to_f32(static_cast<const uint16_t*>(base)[off]);
    case DType::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(base)[off]);
    default: return static_cast<const float*>(base)[off];
  }
}

inline void store_elem(void* base, int64_t off, DType dtype, float v) {
  switch (dtype) {
    case DType::kF16: static_cast<uint16_t*>(base)[off] = f32_to_f16(v); break;
    case DType::kBF16: static_cast<uint16_t*>(base)[off] = f32_to_bf16(v); break;
    default: static_cast<float*>(base)[off] = v; break;
  }
}

// Load n elements spaced `stride` apart (a row of D channels) into fp32.
inline void load_row(const void* base, int64_t off, int64_t stride, int64_t n, DType dtype,
                     float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = load_elem(base, off + i * stride, dtype);
}

}  // namespace cpu
}  // namespace int8attn
