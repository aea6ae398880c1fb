// The rotary embedding of one channel pair, shared by the CPU backend and the CUDA kernel: each
// product and each sum rounded to float32 (never fused into a multiply-add), which is what
// evaluating diffusers' `x.float() * cos + x_rotated.float() * sin` in float32 does, so every
// backend is bit-identical to it.
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

}  // namespace rotary
}  // namespace int8attn
