#include "ref_dtype.h"

#include <cmath>
#include <cstring>

#include "int8attn.h"

namespace int8attn_ref {

namespace {
uint32_t fbits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bitsf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

uint16_t float_to_half(float f) {
  uint32_t x = fbits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (x >= 0x477ff000u) return sign | 0x7c00u;
  if (x < 0x38800000u) return sign | static_cast<uint16_t>(std::nearbyint(bitsf(x) * 16777216.0f));
  return sign | static_cast<uint16_t>((x + 0x0fffu + ((x >> 13) & 1u) - 0x38000000u) >> 13);
}
float half_to_float(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float v = static_cast<float>(m) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  if (e == 31) return bitsf(sign | 0x7f800000u | (m << 13));
  return bitsf(sign | ((e + 112u) << 23) | (m << 13));
}
uint16_t float_to_bfloat(float f) {
  const uint32_t x = fbits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
float bfloat_to_float(uint16_t h) { return bitsf(static_cast<uint32_t>(h) << 16); }

float round_to_dtype(float f, int32_t dtype) {
  if (dtype == INT8ATTN_DTYPE_F16) return half_to_float(float_to_half(f));
  if (dtype == INT8ATTN_DTYPE_BF16) return bfloat_to_float(float_to_bfloat(f));
  return f;
}
size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case INT8ATTN_DTYPE_F16:
    case INT8ATTN_DTYPE_BF16: return 2;
    case INT8ATTN_DTYPE_F32:
    case INT8ATTN_DTYPE_I32: return 4;
    default: return 1;
  }
}
const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case INT8ATTN_DTYPE_F16: return "f16";
    case INT8ATTN_DTYPE_BF16: return "bf16";
    case INT8ATTN_DTYPE_F32: return "f32";
    default: return "other";
  }
}

}  // namespace int8attn_ref
