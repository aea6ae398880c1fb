// The maths of int8attn_rms_norm, shared by the CPU backend and the CUDA kernel so both give the
// same bits: the squares of a row are summed in one fixed order (below), and every operation is
// a separately rounded float32 one (float_ops.h).
//
// Summation order: a row's channels form chunks of kChunk (8: one 16-byte load of fp16/bf16),
// chunk c belonging to partial sum c mod L, where L = lanes(D) is the smallest power of two
// ≥ the chunk count, at most 32 (the GPU kernel's lanes per row). Each partial sum adds its
// chunks' squares in channel order, starting from 0; the L partial sums are then combined in
// pairs, s[i] + s[i + L/2] first (a butterfly: what warp shuffles give, every lane ending with
// the same value since float addition is commutative).
#pragma once

#include <cstdint>

#include "common/float_ops.h"

namespace int8attn {
namespace rms {

constexpr int kChunk = 8;
constexpr int kMaxLanes = 32;

I8A_HD int64_t chunks(int64_t D) { return (D + kChunk - 1) / kChunk; }

I8A_HD int lanes(int64_t D) {
  int l = 1;
  while (l < kMaxLanes && l < chunks(D)) l *= 2;
  return l;
}

I8A_HD float add_square(float s, float x) { return f32op::add(s, f32op::mul(x, x)); }

// 1 / sqrt(sum / D + eps), each step rounded.
I8A_HD float inv_rms(float sum_squares, int64_t D, float eps) {
  using namespace f32op;
  return div(1.0f, f32op::sqrt(add(div(sum_squares, static_cast<float>(D)), eps)));
}

}  // namespace rms
}  // namespace int8attn
