#include "cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/quant_math.h"
#include "cpu/fp_convert.h"
#include "cpu/kernels.h"
#include "cpu/kv_prepare.h"

namespace int8attn {
namespace cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Scratch {
  std::vector<float> qf, qscale, lse_shift, m, l, acc, s, pr, vt, tmp;
  std::vector<int8_t> q8;
  std::vector<char> nan_row;  // a visible score of the row was NaN: the row's output is NaN
  std::vector<int32_t> dots;
  void init(int64_t D, int64_t dp) {
    qf.assign(kTile * D, 0.0f);
    q8.assign(kTile * dp, 0);
    qscale.assign(kTile, 1.0f);
    lse_shift.assign(kTile, 0.0f);
    m.assign(kTile, kNegInf);
    l.assign(kTile, 0.0f);
    acc.assign(kTile * D, 0.0f);
    s.assign(kTile, 0.0f);
    pr.assign(kTile, 0.0f);
    vt.assign(kTile * D, 0.0f);
    tmp.assign(D, 0.0f);
    dots.assign(kTile, 0);
    nan_row.assign(kTile, 0);
  }
};

void decode_v_tile(const KvView& kv, int64_t j0, int n, int64_t D, float* out) {
  if (kv.v_format == VFormat::F16) {
    const uint16_t* src = static_cast<const uint16_t*>(kv.v) + j0 * D;
    for (int64_t i = 0; i < n * D; ++i) out[i] = f16_to_f32(src[i]);
  } else {
    static const auto table = [] {
      std::vector<float> t(256);
      for (int i = 0; i < 256; ++i) t[i] = e4m3_decode(static_cast<uint8_t>(i));
      return t;
    }();
    const uint8_t* src = static_cast<const uint8_t*>(kv.v) + j0 * D;
    for (int64_t i = 0; i < n * D; ++i) out[i] = table[src[i]];
  }
}

}  // namespace

void run_attention(const AttnProblem& p, const std::vector<const KvView*>& views,
                   ThreadPool& pool) {
  const Kernels& K = kernels();
  const int64_t D = p.D, dp = padded_dim(D), G = p.Hq / p.Hkv;
  const int64_t nqb = (p.Nq + kTile - 1) / kTile;
  const bool exact = p.mode == Mode::kExact;
  const bool fast = p.mode == Mode::kFast;
  std::vector<Scratch> scratch(pool.size());
  std::vector<char> ready(pool.size(), 0);

  pool.parallel_for(p.B * p.Hq * nqb, [&](int64_t item, int tid) {
    Scratch& S = scratch[tid];
    if (!ready[tid]) {
      S.init(D, dp);
      ready[tid] = 1;
    }
    const int64_t qb = item % nqb, bh = item / nqb, b = bh / p.Hq, h = bh % p.Hq;
    const KvView& kv = *views[b * p.Hkv + h / G];
    const int64_t L = kv.length;
    const int64_t i0 = qb * kTile, rows = std::min<int64_t>(kTile, p.Nq - i0);

    // Load (and for INT8 modes quantize) the query rows.
    const int64_t qbase = b * p.q.stride[0] + h * p.q.stride[1];
    for (int64_t r = 0; r < rows; ++r) {
      float* qr = &S.qf[r * D];
      load_row(p.q.data, qbase + (i0 + r) * p.q.stride[2], p.q.stride[3], D, p.dtype, qr);
      if (kv.k_mu) {  // LSE correction for K smoothing: sm_scale·q·μ_K
        float d = 0.0f;
        for (int64_t c = 0; c < D; ++c) d += qr[c] * kv.k_mu[c];
        S.lse_shift[r] = p.sm_scale * d;
      } else {
        S.lse_shift[r] = 0.0f;
      }
      if (!exact) {  // INT8 Q: balancing's 1/α and the rotation (quant_math.h)
        for (int64_t c = 0; c < D; ++c)
          qr[c] *= qm::q_channel_factor(kv.alpha != nullptr ? kv.alpha[c] : 1.0f);
        qm::rotate_groups(qr, D);
      }
    }
    if (!exact) {
      quantize_rows_int8(S.qf.data(), rows, D, dp,
                         p.q_granularity == INT8ATTN_GRANULARITY_PER_BLOCK, p.scale_multiplier,
                         S.q8.data(), S.qscale.data());
      for (int64_t r = 0; r < rows; ++r) S.qscale[r] *= p.sm_scale;
    }
    std::fill(S.m.begin(), S.m.end(), kNegInf);
    std::fill(S.l.begin(), S.l.end(), 0.0f);
    std::fill(S.nan_row.begin(), S.nan_row.end(), 0);
    std::fill(S.acc.begin(), S.acc.begin() + rows * D, 0.0f);

    // Visible keys of row i: j < kend(i), and the block mask.
    auto kend = [&](int64_t i) -> int64_t {
      return p.causal ? std::min(L, std::max<int64_t>(0, i + L - p.Nq + 1)) : L;
    };
    int64_t max_end = 0;
    for (int64_t r = 0; r < rows; ++r) max_end = std::max(max_end, kend(i0 + r));
    const uint8_t* mask_bh =
        p.block_mask ? p.block_mask + b * p.mask_stride[0] + h * p.mask_stride[1] : nullptr;

    for (int64_t j0 = 0; j0 < max_end; j0 += kTile) {
      const int n = static_cast<int>(std::min<int64_t>(kTile, max_end - j0));
      bool v_ready = false;
      const float* vt = nullptr;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + r;
        const int ne = static_cast<int>(std::min<int64_t>(n, kend(i) - j0));
        if (ne <= 0) continue;
        const uint8_t* mrow = mask_bh ? mask_bh + (i / p.mask_q_block) * p.mask_stride[2] : nullptr;
        if (mrow) {
          bool any = false;
          for (int64_t kb = j0 / p.mask_k_block; kb * p.mask_k_block < j0 + ne; ++kb)
            if (mrow[kb * p.mask_stride[3]]) {
              any = true;
              break;
            }
          if (!any) continue;
        }
        float* s = S.s.data();
        if (exact) {
          K.dot_f32(&S.qf[r * D], kv.kf + j0 * D, ne, static_cast<int>(D), s);
          for (int j = 0; j < ne; ++j) s[j] *= p.sm_scale;
        } else {
          K.dot_i8(&S.q8[r * dp], kv.k8 + j0 * dp, ne, static_cast<int>(dp), S.dots.data());
          const float qs = S.qscale[r];
          for (int j = 0; j < ne; ++j)
            s[j] = qs * kv.k_scale[j0 + j] * static_cast<float>(S.dots[j]);
        }
        if (mrow)
          for (int j = 0; j < ne; ++j)
            if (!mrow[((j0 + j) / p.mask_k_block) * p.mask_stride[3]]) s[j] = kNegInf;
        // A NaN score (NaN or inf in Q, K, or their scales) makes the softmax row NaN, as in
        // fp16 attention; the vector exponentials below need not carry it.
        for (int j = 0; j < ne; ++j)
          if (std::isnan(s[j])) S.nan_row[r] = 1;
        float tmax = kNegInf;
        for (int j = 0; j < ne; ++j) tmax = std::max(tmax, s[j]);
        const float m_new = std::max(S.m[r], tmax);
        if (m_new == kNegInf) continue;
        const float alpha = S.m[r] == kNegInf ? 0.0f : std::exp(S.m[r] - m_new);
        S.m[r] = m_new;
        float psum = K.exp_sub(s, m_new, ne, S.pr.data());
        if (!exact) psum = fast ? K.round_e4m3_448(S.pr.data(), ne) : K.round_f16(S.pr.data(), ne);
        S.l[r] = S.l[r] * alpha + psum;
        if (!v_ready) {
          if (kv.v_format == VFormat::F32) {
            vt = static_cast<const float*>(kv.v) + j0 * D;
          } else {
            decode_v_tile(kv, j0, n, D, S.vt.data());
            vt = S.vt.data();
          }
          v_ready = true;
        }
        float* acc = &S.acc[r * D];
        if (fast) {
          // Two-level accumulation: the tile's products in a temporary, then into fp32.
          std::fill(S.tmp.begin(), S.tmp.end(), 0.0f);
          K.pv(S.pr.data(), vt, ne, static_cast<int>(D), 1.0f, S.tmp.data());
          for (int64_t c = 0; c < D; ++c) acc[c] = acc[c] * alpha + S.tmp[c];
        } else {
          K.pv(S.pr.data(), vt, ne, static_cast<int>(D), alpha, acc);
        }
      }
    }

    // Normalise, undo the V scaling/smoothing, write O and LSE.
    const int64_t obase = b * p.o_stride[0] + h * p.o_stride[1];
    const float lse_off = fast ? std::log(qm::kFp8Max) : 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = i0 + r;
      const int64_t orow = obase + i * p.o_stride[2];
      const bool nan = S.nan_row[r] != 0;
      const bool empty = !nan && S.l[r] == 0.0f;  // no visible key (a NaN l is not empty)
      const float inv_l = empty ? 0.0f : 1.0f / S.l[r];
      for (int64_t c = 0; c < D; ++c) {
        float o = 0.0f;
        if (nan) {
          o = std::numeric_limits<float>::quiet_NaN();
        } else if (!empty) {
          o = S.acc[r * D + c] * inv_l;
          if (kv.v_sigma) o *= kv.v_sigma[c];
          if (kv.v_mu) o += kv.v_mu[c];
        }
        store_elem(p.o, orow + c * p.o_stride[3], p.dtype,
                   p.dtype == DType::kF16 ? qm::saturate_f16(o) : o);
      }
      if (p.lse)
        p.lse[b * p.lse_stride[0] + h * p.lse_stride[1] + i * p.lse_stride[2]] =
            nan     ? std::numeric_limits<float>::quiet_NaN()
            : empty ? kNegInf
                    : S.m[r] + std::log(S.l[r]) - lse_off + S.lse_shift[r];
    }
  });
}

}  // namespace cpu
}  // namespace int8attn
