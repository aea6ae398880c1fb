#include "cpu/rms_norm.h"

#include <vector>

#include "common/rms_norm_math.h"
#include "cpu/fp_convert.h"

namespace int8attn {
namespace cpu {
namespace {

float round_to(DType dtype, float v) {
  if (dtype == DType::kF16) return f16_to_f32(f32_to_f16(v));
  if (dtype == DType::kBF16) return bf16_to_f32(f32_to_bf16(v));
  return v;
}

// The row's sum of squares in common/rms_norm_math.h's order.
float sum_squares(const float* x, int64_t D) {
  const int L = rms::lanes(D);
  const int64_t chunks = rms::chunks(D);
  float part[rms::kMaxLanes];
  for (int l = 0; l < L; ++l) {
    float s = 0.0f;
    for (int64_t c = l; c < chunks; c += L)
      for (int64_t d = c * rms::kChunk; d < D && d < (c + 1) * rms::kChunk; ++d)
        s = rms::add_square(s, x[d]);
    part[l] = s;
  }
  for (int half = L / 2; half >= 1; half /= 2)
    for (int l = 0; l < half; ++l) part[l] = f32op::add(part[l], part[l + half]);
  return part[0];
}

}  // namespace

void rms_norm(const RmsNormProblem& p, ThreadPool& pool) {
  const int64_t D = p.D;
  std::vector<float> w(p.has_weight ? D : 0);
  if (p.has_weight) load_row(p.weight, 0, p.weight_stride, D, p.weight_dtype, w.data());
  // One (batch, head) per item; a row is read whole before it is written, so out may be x.
  pool.parallel_for(p.B * p.H, [&](int64_t bh, int) {
    const int64_t b = bh / p.H, h = bh % p.H;
    std::vector<float> x(D);
    for (int64_t n = 0; n < p.N; ++n) {
      load_row(p.x.data, b * p.x.stride[0] + h * p.x.stride[1] + n * p.x.stride[2], p.x.stride[3],
               D, p.x_dtype, x.data());
      const float r = rms::inv_rms(sum_squares(x.data(), D), D, p.eps);
      const int64_t o = b * p.out_stride[0] + h * p.out_stride[1] + n * p.out_stride[2];
      for (int64_t d = 0; d < D; ++d) {
        float y = f32op::mul(x[d], r);
        if (p.has_weight) {
          if (p.weight_dtype != DType::kF32) y = round_to(p.weight_dtype, y);
          y = f32op::mul(y, w[d]);
        }
        store_elem(p.out, o + d * p.out_stride[3], p.out_dtype, y);
      }
    }
  });
}

}  // namespace cpu
}  // namespace int8attn
