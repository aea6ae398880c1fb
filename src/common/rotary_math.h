// The rotary embedding of one channel pair, shared by the CPU backend and the CUDA kernel, in
// the two arithmetics of int8attn_rotary_arithmetic_values: each product and each sum rounded
// to float32 (diffusers' `x.float() * cos + x_rotated.float() * sin`), or the complex product
// with one fused multiply-add per part (PyTorch's CUDA `view_as_complex(x) * freqs_cis`). Every
// backend evaluates the same steps, so all give the same bits.
#pragma once

#include "common/float_ops.h"

namespace int8attn {
namespace rotary {

// Pair (x0, x1) = channels (2i, 2i+1) with their tables' entries c0, s0 (channel 2i) and
// c1, s1 (channel 2i+1): y0 = x0·c0 − x1·s0, y1 = x1·c1 + x0·s1.
I8A_HD void rotate_pair(float x0, float x1, float c0, float s0, float c1, float s1, float& y0,
                        float& y1) {
  using namespace f32op;
  y0 = sub(mul(x0, c0), mul(x1, s0));
  y1 = add(mul(x1, c1), mul(x0, s1));
}

// The same rotation as the complex product (x0 + i·x1)(c + i·s):
// y0 = fma(x0, c0, −(x1·s0)), y1 = fma(x0, s1, x1·c1).
I8A_HD void rotate_pair_complex_fma(float x0, float x1, float c0, float s0, float c1, float s1,
                                    float& y0, float& y1) {
  using namespace f32op;
  y0 = fma(x0, c0, -mul(x1, s0));
  y1 = fma(x0, s1, mul(x1, c1));
}

// One of the two, chosen at compile time (kComplexFma: INT8ATTN_ROTARY_COMPLEX_FMA).
template <bool kComplexFma>
I8A_HD void rotate(float x0, float x1, float c0, float s0, float c1, float s1, float& y0,
                   float& y1) {
  if constexpr (kComplexFma)
    rotate_pair_complex_fma(x0, x1, c0, s0, c1, s1, y0, y1);
  else
    rotate_pair(x0, x1, c0, s0, c1, s1, y0, y1);
}

}  // namespace rotary
}  // namespace int8attn
