#include "cpu/kv_prepare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "common/quant_math.h"
#include "cpu/fp_convert.h"
#include "cpu/kernels.h"

namespace int8attn {
namespace cpu {

KvView KvUnit::view(int64_t D) const {
  KvView v;
  v.length = length;
  v.dp = padded_dim(D);
  if (!kf.empty() || !v_f32.empty()) {
    v.kf = kf.data();
    v.v_format = VFormat::F32;
    v.v = v_f32.data();
  } else {
    v.k8 = k8.data();
    v.k_scale = k_scale.data();
    if (!v16.empty() || v8.empty()) {
      v.v_format = VFormat::F16;
      v.v = v16.data();
    } else {
      v.v_format = VFormat::E4M3;
      v.v = v8.data();
    }
    v.v_sigma = v_sigma.data();
    v.v_mu = v_mu.data();
  }
  v.alpha = alpha.empty() ? nullptr : alpha.data();
  v.k_mu = k_mu.empty() ? nullptr : k_mu.data();
  return v;
}

int64_t valid_length(const AttnProblem& p, int64_t b) {
  return p.k_lengths ? static_cast<int64_t>(p.k_lengths[b * p.k_lengths_stride]) : p.Nk;
}

void quantize_rows_int8(const float* x, int64_t rows, int64_t d, int64_t dp, bool per_block,
                        float multiplier, int8_t* out, float* scales) {
  const int64_t group = per_block ? qm::kQuantBlock : 1;
  for (int64_t r0 = 0; r0 < rows; r0 += group) {
    const int64_t r1 = std::min(rows, r0 + group);
    float amax = 0.0f;
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < d; ++c) amax = qm::absmax_nan(amax, x[r * d + c]);
    const float s = qm::int8_scale(amax, multiplier);
    const float inv = 1.0f / s;
    for (int64_t r = r0; r < r1; ++r) {
      int8_t* o = out + r * dp;
      for (int64_t c = 0; c < d; ++c) o[c] = qm::quantize_int8(x[r * d + c], inv);
      for (int64_t c = d; c < dp; ++c) o[c] = 0;
      scales[r] = s;
    }
  }
}

std::vector<qm::ChannelConsts> channel_constants(const float* k, const float* v, int64_t rows,
                                                 int64_t d, int k_stride, const float* q_absmax,
                                                 bool smooth_k, bool smooth_v, bool fp8,
                                                 float headroom) {
  std::vector<qm::ChannelConsts> out(d);
  for (int64_t c = 0; c < d; ++c) {
    qm::ChannelStats st;
    st.valid = static_cast<int>(rows);
    st.k_rows = static_cast<int>(qm::stats_sampled_rows(rows, k_stride));
    double sk = 0.0, sv = 0.0;
    st.max_k = st.max_v = -INFINITY;
    st.min_k = st.min_v = INFINITY;
    for (int64_t r = 0; r < rows; ++r) {
      const float vx = v[r * d + c];
      sv += vx;
      st.max_v = std::max(st.max_v, vx);
      st.min_v = std::min(st.min_v, vx);
      if (!qm::stats_row_sampled(r, k_stride)) continue;
      const float kx = k[r * d + c];
      sk += kx;
      st.max_k = std::max(st.max_k, kx);
      st.min_k = std::min(st.min_k, kx);
    }
    st.sum_k = static_cast<float>(sk);
    st.sum_v = static_cast<float>(sv);
    st.q_absmax = q_absmax ? q_absmax[c] : 0.0f;
    out[c] = qm::channel_consts(st, smooth_k, smooth_v, fp8, headroom, q_absmax != nullptr);
  }
  return out;
}

namespace {

void load_rows(const Operand4& op, DType dtype, int64_t b, int64_t h, int64_t rows, int64_t d,
               float* out) {
  const int64_t base = b * op.stride[0] + h * op.stride[1];
  for (int64_t r = 0; r < rows; ++r)
    load_row(op.data, base + r * op.stride[2], op.stride[3], d, dtype, out + r * d);
}

}  // namespace

// V conversion shared with the cache: ṽ = fmt((v − μ)/σ).
void encode_v_rows(const float* centered, int64_t rows, int64_t d, const float* sigma, bool fp8,
                   uint16_t* out16, uint8_t* out8) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < d; ++c) {
      const float x = centered[r * d + c] / sigma[c];
      if (fp8) {
        out8[r * d + c] = e4m3_encode_exact(qm::fp8_e4m3_round(x));
      } else {
        const float y = std::isnan(x) ? x : std::max(-65504.0f, std::min(65504.0f, x));
        out16[r * d + c] = f32_to_f16(y);
      }
    }
}

void prepare_kv(const AttnProblem& p, ThreadPool& pool, PreparedKv& out) {
  const int64_t B = p.B, Hkv = p.Hkv, D = p.D, dp = padded_dim(D);
  const bool exact = p.mode == Mode::kExact;
  const bool fp8 = p.mode == Mode::kFast;
  const bool balance = !exact && (p.flags & INT8ATTN_FLAG_BALANCE_CHANNELS);
  out.Hkv = Hkv;
  out.units.clear();
  out.unit_of.assign(B * Hkv, 0);
  std::map<std::tuple<int64_t, int64_t, int64_t>, int32_t> seen;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hkv; ++h) {
      const int64_t L = valid_length(p, b);
      const auto key = std::make_tuple(b * p.k.stride[0] + h * p.k.stride[1],
                                       b * p.v.stride[0] + h * p.v.stride[1], L);
      auto it = seen.find(key);
      if (it == seen.end()) {
        it = seen.emplace(key, static_cast<int32_t>(out.units.size())).first;
        KvUnit u;
        u.b = b;
        u.h = h;
        u.length = L;
        out.units.push_back(std::move(u));
      }
      out.unit_of[b * Hkv + h] = it->second;
    }
  const int64_t nunits = static_cast<int64_t>(out.units.size());

  // Channel balancing needs max|q_c| over the sampled query rows that will use the unit.
  std::vector<float> qmax;
  if (balance) {
    const int64_t G = p.Hq / Hkv;
    std::vector<float> per_head(B * p.Hq * D, 0.0f);
    pool.parallel_for(B * p.Hq, [&](int64_t bh, int) {
      const int64_t b = bh / p.Hq, h = bh % p.Hq;
      std::vector<float> row(D);
      float* m = &per_head[bh * D];
      const int stride = qm::stats_stride(p.Nq);
      for (int64_t i = 0; i < p.Nq; ++i) {
        if (!qm::stats_row_sampled(i, stride)) continue;
        load_row(p.q.data, b * p.q.stride[0] + h * p.q.stride[1] + i * p.q.stride[2], p.q.stride[3],
                 D, p.dtype, row.data());
        for (int64_t c = 0; c < D; ++c) m[c] = std::max(m[c], std::fabs(row[c]));
      }
    });
    qmax.assign(nunits * D, 0.0f);
    for (int64_t bh = 0; bh < B * p.Hq; ++bh) {
      const int64_t b = bh / p.Hq, h = bh % p.Hq;
      float* m = &qmax[out.unit_of[b * Hkv + h / G] * D];
      for (int64_t c = 0; c < D; ++c) m[c] = std::max(m[c], per_head[bh * D + c]);
    }
  }

  pool.parallel_for(nunits, [&](int64_t ui, int) {
    KvUnit& u = out.units[ui];
    const int64_t L = u.length;
    std::vector<float> k(L * D), v(L * D);
    load_rows(p.k, p.dtype, u.b, u.h, L, D, k.data());
    load_rows(p.v, p.dtype, u.b, u.h, L, D, v.data());
    if (exact) {
      u.kf = std::move(k);
      u.v_f32 = std::move(v);
      if (u.v_f32.empty()) u.v_f32.resize(1);  // keep the EXACT marker for L = 0
      return;
    }
    const bool smooth_k = p.flags & INT8ATTN_FLAG_SMOOTH_K;
    const std::vector<qm::ChannelConsts> cc = channel_constants(
        k.data(), v.data(), L, D, qm::stats_stride(p.Nk), balance ? &qmax[ui * D] : nullptr,
        smooth_k, p.flags & INT8ATTN_FLAG_SMOOTH_V, fp8, qm::kForwardHeadroom);
    if (smooth_k) u.k_mu.resize(D);
    if (balance) u.alpha.resize(D);
    u.v_mu.resize(D);
    u.v_sigma.resize(D);
    for (int64_t c = 0; c < D; ++c) {
      if (smooth_k) u.k_mu[c] = cc[c].mu_k;
      if (balance) u.alpha[c] = cc[c].alpha;
      u.v_mu[c] = cc[c].mu_v;
      u.v_sigma[c] = cc[c].v_scale;
    }
    // K' = (k − μ_K)·α rotated (qm::rotate8, its normalisation folded into the factor);
    // V' = v − μ_V (then scaled by 1/σ in encode_v_rows).
    std::vector<float> ka(D);
    for (int64_t c = 0; c < D; ++c) ka[c] = qm::k_channel_factor(cc[c].alpha);
    for (int64_t r = 0; r < L; ++r) {
      for (int64_t c = 0; c < D; ++c) {
        k[r * D + c] = (k[r * D + c] - cc[c].mu_k) * ka[c];
        v[r * D + c] -= cc[c].mu_v;
      }
      qm::rotate_groups(&k[r * D], D);
    }
    u.k8.assign(std::max<int64_t>(L, 1) * dp, 0);
    u.k_scale.assign(std::max<int64_t>(L, 1), 1.0f);
    quantize_rows_int8(k.data(), L, D, dp, p.k_granularity == INT8ATTN_GRANULARITY_PER_BLOCK,
                       p.scale_multiplier, u.k8.data(), u.k_scale.data());
    if (fp8) {
      u.v8.assign(std::max<int64_t>(L, 1) * D, 0);
    } else {
      u.v16.assign(std::max<int64_t>(L, 1) * D, 0);
    }
    encode_v_rows(v.data(), L, D, u.v_sigma.data(), fp8, u.v16.data(), u.v8.data());
  });
  out.views.resize(nunits);
  for (int64_t i = 0; i < nunits; ++i) out.views[i] = out.units[i].view(D);
}

}  // namespace cpu
}  // namespace int8attn
