#include "cpu/rotary.h"

#include <vector>

#include "common/rotary_math.h"
#include "cpu/fp_convert.h"

namespace int8attn {
namespace cpu {

namespace {

template <bool kComplexFma>
void rotate_rows(const RotaryProblem& p, ThreadPool& pool) {
  const int64_t D = p.D;
  // One (batch, head) per item; a row is read whole before it is written, so out may be x.
  pool.parallel_for(p.B * p.H, [&](int64_t bh, int) {
    const int64_t b = bh / p.H, h = bh % p.H;
    std::vector<float> x(D);
    for (int64_t n = 0; n < p.N; ++n) {
      load_row(p.x.data, b * p.x.stride[0] + h * p.x.stride[1] + n * p.x.stride[2], p.x.stride[3],
               D, p.dtype, x.data());
      const float* c = p.cos + n * p.cos_stride[0];
      const float* s = p.sin + n * p.sin_stride[0];
      const int64_t cs = p.cos_stride[1], ss = p.sin_stride[1];
      const int64_t o = b * p.out_stride[0] + h * p.out_stride[1] + n * p.out_stride[2];
      for (int64_t d = 0; d < D; d += 2) {
        float y0, y1;
        rotary::rotate<kComplexFma>(x[d], x[d + 1], c[d * cs], s[d * ss], c[(d + 1) * cs],
                                    s[(d + 1) * ss], y0, y1);
        store_elem(p.out, o + d * p.out_stride[3], p.dtype, y0);
        store_elem(p.out, o + (d + 1) * p.out_stride[3], p.dtype, y1);
      }
    }
  });
}

}  // namespace

void rotary(const RotaryProblem& p, ThreadPool& pool) {
  if (p.complex_fma)
    rotate_rows<true>(p, pool);
  else
    rotate_rows<false>(p, pool);
}

}  // namespace cpu
}  // namespace int8attn
