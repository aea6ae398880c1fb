#include "ref_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>

namespace int8attn_ref {

RefResult reference_attention(const std::vector<float>& q, const std::vector<float>& k,
                              const std::vector<float>& v, int64_t B, int64_t Hq, int64_t Hkv,
                              int64_t Nq, int64_t Nk, int64_t D, const RefOptions& opts) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  RefResult r;
  r.o.assign(static_cast<size_t>(B * Hq * Nq * D), 0.0);
  r.lse.assign(static_cast<size_t>(B * Hq * Nq), kNegInf);
  const double scale =
      opts.sm_scale > 0.0 ? opts.sm_scale : 1.0 / std::sqrt(static_cast<double>(D));
  const int64_t G = Hq / Hkv;
  const int64_t nqb = (Nq + opts.mask_q_block - 1) / opts.mask_q_block;
  const int64_t nkb = (Nk + opts.mask_k_block - 1) / opts.mask_k_block;
  auto head = [&](int64_t bh) {
    const int64_t b = bh / Hq, h = bh % Hq, hk = h / G;
    const int64_t L = opts.k_lengths.empty() ? Nk : opts.k_lengths[static_cast<size_t>(b)];
    const float* kb = &k[static_cast<size_t>((b * Hkv + hk) * Nk * D)];
    const float* vb = &v[static_cast<size_t>((b * Hkv + hk) * Nk * D)];
    std::vector<double> s(static_cast<size_t>(Nk));
    for (int64_t i = 0; i < Nq; ++i) {
      const float* qi = &q[static_cast<size_t>(((b * Hq + h) * Nq + i) * D)];
      double m = kNegInf;
      for (int64_t j = 0; j < Nk; ++j) {
        bool vis = j < L && (!opts.causal || j <= i + L - Nq);
        if (vis && opts.block_mask) {
          const int64_t mb = opts.mask_B == 1 ? 0 : b, mh = opts.mask_H == 1 ? 0 : h;
          vis = opts.block_mask[((mb * opts.mask_H + mh) * nqb + i / opts.mask_q_block) * nkb +
                                j / opts.mask_k_block] != 0;
        }
        if (!vis) {
          s[static_cast<size_t>(j)] = kNegInf;
          continue;
        }
        double acc = 0.0;
        for (int64_t c = 0; c < D; ++c) acc += static_cast<double>(qi[c]) * kb[j * D + c];
        s[static_cast<size_t>(j)] = acc * scale;
        m = std::max(m, acc * scale);
      }
      if (m == kNegInf) continue;
      double l = 0.0;
      double* o = &r.o[static_cast<size_t>(((b * Hq + h) * Nq + i) * D)];
      for (int64_t j = 0; j < Nk; ++j) {
        const double sj = s[static_cast<size_t>(j)];
        if (sj == kNegInf) continue;
        const double p = std::exp(sj - m);
        l += p;
        for (int64_t c = 0; c < D; ++c) o[c] += p * vb[j * D + c];
      }
      for (int64_t c = 0; c < D; ++c) o[c] /= l;
      r.lse[static_cast<size_t>((b * Hq + h) * Nq + i)] = m + std::log(l);
    }
  };
  const int64_t nbh = B * Hq;
  const int nt = std::max(1, std::min<int>(static_cast<int>(std::thread::hardware_concurrency()),
                                           static_cast<int>(nbh)));
  std::vector<std::thread> threads;
  for (int t = 0; t < nt; ++t)
    threads.emplace_back([&, t] {
      for (int64_t bh = t; bh < nbh; bh += nt) head(bh);
    });
  for (auto& th : threads) th.join();
  return r;
}

}  // namespace int8attn_ref
