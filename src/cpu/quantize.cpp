#include "cpu/quantize.h"

#include <vector>

#include "common/quant_math.h"
#include "cpu/fp_convert.h"
#include "cpu/kv_prepare.h"

namespace int8attn {
namespace cpu {

void quantize(const QuantizeProblem& p, ThreadPool& pool) {
  const int64_t N = p.N, D = p.D;
  const bool per_block = p.granularity == INT8ATTN_GRANULARITY_PER_BLOCK;
  pool.parallel_for(p.B * p.H, [&](int64_t bh, int) {
    const int64_t b = bh / p.H, h = bh % p.H;
    std::vector<float> x(N * D);
    const int64_t base = b * p.x.stride[0] + h * p.x.stride[1];
    for (int64_t r = 0; r < N; ++r)
      load_row(p.x.data, base + r * p.x.stride[2], p.x.stride[3], D, p.dtype, &x[r * D]);
    if (p.smooth) {
      std::vector<double> acc(D, 0.0);
      for (int64_t r = 0; r < N; ++r)
        for (int64_t c = 0; c < D; ++c) acc[c] += x[r * D + c];
      for (int64_t c = 0; c < D; ++c) {
        const float mu = static_cast<float>(acc[c] / static_cast<double>(N));
        for (int64_t r = 0; r < N; ++r) x[r * D + c] -= mu;
        if (p.mean) p.mean[b * p.mean_stride[0] + h * p.mean_stride[1] + c * p.mean_stride[2]] = mu;
      }
    }
    std::vector<int8_t> q(N * D);
    std::vector<float> s(N);
    quantize_rows_int8(x.data(), N, D, D, per_block, p.scale_multiplier, q.data(), s.data());
    const int64_t obase = b * p.x_int8_stride[0] + h * p.x_int8_stride[1];
    for (int64_t r = 0; r < N; ++r)
      for (int64_t c = 0; c < D; ++c)
        p.x_int8[obase + r * p.x_int8_stride[2] + c * p.x_int8_stride[3]] = q[r * D + c];
    const int64_t G = per_block ? (N + qm::kQuantBlock - 1) / qm::kQuantBlock : N;
    const int64_t step = per_block ? qm::kQuantBlock : 1;
    for (int64_t g = 0; g < G; ++g)
      p.scales[b * p.scales_stride[0] + h * p.scales_stride[1] + g * p.scales_stride[2]] =
          s[g * step];
  });
}

}  // namespace cpu
}  // namespace int8attn
