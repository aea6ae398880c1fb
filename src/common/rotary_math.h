// The rotary embedding of one channel pair, shared by the CPU backend and the CUDA kernel: each
// product and each sum rounded to float32 (never fused into a multiply-add), which is what
// evaluating diffusers' `x.float() * cos + x_rotated.float() * sin` in float32 does, so every
// backend is bit-identical to it.
#pragma once

#include "common/quant_math.h"  // I8A_HD

namespace int8attn {
namespace rotary {

#if defined(__CUDA_ARCH__)
I8A_HD float mul(float a, float b) { return __fmul_rn(a, b); }
I8A_HD float add(float a, float b) { return __fadd_rn(a, b); }
I8A_HD float sub(float a, float b) { return __fsub_rn(a, b); }
#else
// The CPU translation unit is compiled with -ffp-contract=off (CMakeLists.txt), so these stay
// separately rounded operations.
I8A_HD float mul(float a, float b) { return a * b; }
I8A_HD float add(float a, float b) { return a + b; }
I8A_HD float sub(float a, float b) { return a - b; }
#endif

// Pair (x0, x1) = channels (2i, 2i+1) with their tables' entries c0, s0 (channel 2i) and
// c1, s1 (channel 2i+1): y0 = x0·c0 − x1·s0, y1 = x1·c1 + x0·s1.
I8A_HD void rotate_pair(float x0, float x1, float c0, float s0, float c1, float s1, float& y0,
                        float& y1) {
  y0 = sub(mul(x0, c0), mul(x1, s0));
  y1 = add(mul(x1, c1), mul(x0, s1));
}

}  // namespace rotary
}  // namespace int8attn
