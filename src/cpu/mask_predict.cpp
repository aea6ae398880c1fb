// Block-mask prediction: mean-pool Q per q_block rows and K per k_block keys, score the pooled
// pairs (× sm_scale), softmax over the allowed key blocks, keep the top ⌈keep_ratio·nkb⌉ or the
// smallest set reaching `threshold` of the mass. Key block 0 and (causal) the diagonal block are
// always kept; blocks entirely above the causal diagonal (bottom-right aligned) never are.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "cpu/fp_convert.h"
#include "cpu/quantize.h"

namespace int8attn {
namespace cpu {
namespace {

void pool_blocks(const Operand4& op, DType dtype, int64_t b, int64_t h, int64_t N, int64_t D,
                 int64_t block, int64_t nblocks, std::vector<double>& out) {
  out.assign(nblocks * D, 0.0);
  std::vector<float> row(D);
  const int64_t base = b * op.stride[0] + h * op.stride[1];
  for (int64_t i = 0; i < N; ++i) {
    load_row(op.data, base + i * op.stride[2], op.stride[3], D, dtype, row.data());
    double* o = &out[(i / block) * D];
    for (int64_t c = 0; c < D; ++c) o[c] += row[c];
  }
  for (int64_t k = 0; k < nblocks; ++k) {
    const int64_t cnt = std::min(block, N - k * block);
    for (int64_t c = 0; c < D; ++c) out[k * D + c] /= static_cast<double>(cnt);
  }
}

}  // namespace

void predict_block_mask(const MaskProblem& p, ThreadPool& pool) {
  const int64_t D = p.D, nqb = p.nqb, nkb = p.nkb, G = p.Hq / p.Hkv;
  std::vector<std::vector<double>> kpool(p.B * p.Hkv);
  pool.parallel_for(p.B * p.Hkv, [&](int64_t bh, int) {
    pool_blocks(p.k, p.dtype, bh / p.Hkv, bh % p.Hkv, p.Nk, D, p.k_block, nkb, kpool[bh]);
  });
  pool.parallel_for(p.B * p.Hq, [&](int64_t bh, int) {
    const int64_t b = bh / p.Hq, h = bh % p.Hq;
    std::vector<double> qpool;
    pool_blocks(p.q, p.dtype, b, h, p.Nq, D, p.q_block, nqb, qpool);
    const std::vector<double>& kp = kpool[b * p.Hkv + h / G];
    std::vector<double> score(nkb);
    std::vector<int64_t> order(nkb);
    for (int64_t qb = 0; qb < nqb; ++qb) {
      uint8_t* mrow = p.mask + b * p.mask_stride[0] + h * p.mask_stride[1] + qb * p.mask_stride[2];
      // Causal: the last row of the block sees keys up to last + Nk − Nq.
      const int64_t last_row = std::min(p.Nq, (qb + 1) * p.q_block) - 1;
      const int64_t last_key = last_row + p.Nk - p.Nq;  // may be negative
      std::vector<char> allowed(nkb, 1), keep(nkb, 0);
      double mx = -INFINITY;
      for (int64_t kb = 0; kb < nkb; ++kb) {
        if (p.causal && kb * p.k_block > last_key) allowed[kb] = 0;
        double s = 0.0;
        for (int64_t c = 0; c < D; ++c) s += qpool[qb * D + c] * kp[kb * D + c];
        score[kb] = s * p.sm_scale;
        if (allowed[kb]) mx = std::max(mx, score[kb]);
      }
      double total = 0.0;
      for (int64_t kb = 0; kb < nkb; ++kb) {
        score[kb] = allowed[kb] ? std::exp(score[kb] - mx) : 0.0;
        total += score[kb];
      }
      int64_t nallowed = 0;
      for (int64_t kb = 0; kb < nkb; ++kb) nallowed += allowed[kb];
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t c) { return score[a] > score[c]; });
      if (p.keep_ratio > 0.0f) {
        const int64_t k = std::min<int64_t>(
            nallowed,
            static_cast<int64_t>(std::ceil(static_cast<double>(p.keep_ratio) * nkb - 1e-9)));
        for (int64_t t = 0; t < k; ++t) keep[order[t]] = 1;
      } else {
        double mass = 0.0;
        for (int64_t t = 0; t < nallowed; ++t) {
          if (total > 0.0 && mass >= static_cast<double>(p.threshold) * total) break;
          keep[order[t]] = 1;
          mass += score[order[t]];
        }
      }
      keep[0] = 1;
      if (p.causal && last_key >= 0) keep[std::min(nkb - 1, last_key / p.k_block)] = 1;
      for (int64_t kb = 0; kb < nkb; ++kb) {
        const bool k = keep[kb] && (allowed[kb] || kb == 0);
        mrow[kb * p.mask_stride[3]] = k ? 1 : 0;
      }
    }
  });
}

}  // namespace cpu
}  // namespace int8attn
