// float32 operations each rounded on its own (never fused into a multiply-add unless fma() says
// so, division and square root correctly rounded), for maths that promises the same bits on
// every backend (rotary_math.h, rms_norm_math.h).
#pragma once

#include <cmath>

#include "common/quant_math.h"  // I8A_HD

namespace int8attn {
namespace f32op {

#if defined(__CUDA_ARCH__)
I8A_HD float mul(float a, float b) { return __fmul_rn(a, b); }
I8A_HD float add(float a, float b) { return __fadd_rn(a, b); }
I8A_HD float sub(float a, float b) { return __fsub_rn(a, b); }
I8A_HD float div(float a, float b) { return __fdiv_rn(a, b); }
I8A_HD float sqrt(float a) { return __fsqrt_rn(a); }
I8A_HD float fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
#else
// The CPU translation units that use these are compiled with -ffp-contract=off
// (CMakeLists.txt), so they stay separately rounded operations.
I8A_HD float mul(float a, float b) { return a * b; }
I8A_HD float add(float a, float b) { return a + b; }
I8A_HD float sub(float a, float b) { return a - b; }
I8A_HD float div(float a, float b) { return a / b; }
I8A_HD float sqrt(float a) { return std::sqrt(a); }
I8A_HD float fma(float a, float b, float c) { return std::fmaf(a, b, c); }  // one rounding
#endif

}  // namespace f32op
}  // namespace int8attn
