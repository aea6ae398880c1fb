// What the row-wise elementwise kernels (rotary.cu, rms_norm.cu) share: the exact rounding of a
// float into an element type, and an order of [B, H, N] rows that follows the memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "common/modes.h"

namespace int8attn {
namespace dev {

// Round to nearest even, overflowing to infinity (as torch's casts do; unlike
// dev::store_from_float, which saturates attention outputs).
template <typename T>
__device__ __forceinline__ T from_f32(float v) {
  if constexpr (std::is_same<T, float>::value)
    return v;
  else if constexpr (std::is_same<T, __half>::value)
    return __float2half_rn(v);
  else
    return __float2bfloat16_rn(v);
}

// v rounded to a runtime element type and back (a uniform branch).
__device__ __forceinline__ float round_to(DType dtype, float v) {
  if (dtype == DType::kF16) return __half2float(__float2half_rn(v));
  if (dtype == DType::kBF16) return __bfloat162float(__float2bfloat16_rn(v));
  return v;
}

// Rows (b, h, n) enumerated so that consecutive rows are the closer ones in memory: with NHD
// memory (heads inside tokens) the head index runs fastest.
struct RowOrder {
  int64_t B, H, N;
  bool heads_inner;
  __device__ __forceinline__ void decode(int64_t row, int64_t& b, int64_t& h, int64_t& n) const {
    if (heads_inner) {
      h = row % H;
      const int64_t bn = row / H;
      n = bn % N;
      b = bn / N;
    } else {
      n = row % N;
      const int64_t bh = row / N;
      h = bh % H;
      b = bh / H;
    }
  }
};

}  // namespace dev
}  // namespace int8attn
