#include "cpu/cpu_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "common/quant_math.h"
#include "core/error.h"
#include "cpu/fp_convert.h"
#include "cpu/kernels.h"
#include "cpu/kv_prepare.h"

namespace int8attn {
namespace cpu {

CpuKvCache::CpuKvCache(const CacheSpec& spec, ThreadPool* pool)
    : spec_(spec), pool_(pool), dp_(padded_dim(spec.D)), fp8_(spec.mode == Mode::kFast) {
  const int64_t cap = spec.capacity, D = spec.D;
  heads_.resize(spec.B * spec.Hkv);
  for (Head& h : heads_) {
    h.k8.assign(cap * dp_, 0);
    h.k_scale.assign(cap, 1.0f);
    h.mu_k.assign(D, 0.0f);
    h.mu_v.assign(D, 0.0f);
    h.sigma.assign(D, 1.0f);
    if (fp8_)
      h.v8.assign(cap * D, 0);
    else
      h.v16.assign(cap * D, 0);
  }
}

void CpuKvCache::reset() {
  length_ = 0;
  have_stats_ = false;
  for (Head& h : heads_) {
    std::fill(h.mu_k.begin(), h.mu_k.end(), 0.0f);
    std::fill(h.mu_v.begin(), h.mu_v.end(), 0.0f);
    std::fill(h.sigma.begin(), h.sigma.end(), 1.0f);
  }
}

void CpuKvCache::append(const CacheAppend& a) {
  const int64_t n = a.n, D = spec_.D, nh = spec_.B * spec_.Hkv;
  if (n <= 0) return;
  if (length_ + n > spec_.capacity)
    throw Error(INT8ATTN_ERROR_CAPACITY_EXCEEDED,
                "kv_cache_append: length " + std::to_string(length_) + " + " + std::to_string(n) +
                    " tokens exceeds the capacity " + std::to_string(spec_.capacity));
  const bool first = !have_stats_;
  // Stage everything first (strong guarantee), then commit with plain copies.
  struct Staged {
    std::vector<int8_t> k8;
    std::vector<float> k_scale, mu_k, mu_v, sigma;
    std::vector<uint16_t> v16;
    std::vector<uint8_t> v8;
  };
  std::vector<Staged> st(nh);
  auto work = [&](int64_t bh, int) {
    const int64_t b = bh / spec_.Hkv, h = bh % spec_.Hkv;
    const Head& hd = heads_[bh];
    Staged& s = st[bh];
    std::vector<float> k(n * D), v(n * D);
    for (int64_t r = 0; r < n; ++r) {
      load_row(a.k.data, b * a.k.stride[0] + h * a.k.stride[1] + r * a.k.stride[2], a.k.stride[3],
               D, a.dtype, &k[r * D]);
      load_row(a.v.data, b * a.v.stride[0] + h * a.v.stride[1] + r * a.v.stride[2], a.v.stride[3],
               D, a.dtype, &v[r * D]);
    }
    if (first) {
      const std::vector<qm::ChannelConsts> cc =
          channel_constants(k.data(), v.data(), n, D, qm::stats_stride(n), nullptr,
                            spec_.flags & INT8ATTN_FLAG_SMOOTH_K,
                            spec_.flags & INT8ATTN_FLAG_SMOOTH_V, fp8_, qm::kCacheHeadroom);
      s.mu_k.resize(D);
      s.mu_v.resize(D);
      s.sigma.resize(D);
      for (int64_t c = 0; c < D; ++c) {
        s.mu_k[c] = cc[c].mu_k;
        s.mu_v[c] = cc[c].mu_v;
        s.sigma[c] = cc[c].v_scale;
      }
    }
    const float* mu_k = first ? s.mu_k.data() : hd.mu_k.data();
    const float* mu_v = first ? s.mu_v.data() : hd.mu_v.data();
    const float* sigma = first ? s.sigma.data() : hd.sigma.data();
    // K' = (k − μ_K) rotated, as in forward (no balancing: a cache's K precedes any Q).
    const float kf = qm::k_channel_factor(1.0f);
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < D; ++c) {
        k[r * D + c] = (k[r * D + c] - mu_k[c]) * kf;
        v[r * D + c] -= mu_v[c];
      }
      qm::rotate_groups(&k[r * D], D);
    }
    s.k8.assign(n * dp_, 0);
    s.k_scale.assign(n, 1.0f);
    quantize_rows_int8(k.data(), n, D, dp_, false, 1.0f, s.k8.data(), s.k_scale.data());
    if (fp8_)
      s.v8.assign(n * D, 0);
    else
      s.v16.assign(n * D, 0);
    encode_v_rows(v.data(), n, D, sigma, fp8_, s.v16.data(), s.v8.data());
  };
  if (pool_)
    pool_->parallel_for(nh, work);
  else
    for (int64_t i = 0; i < nh; ++i) work(i, 0);

  for (int64_t bh = 0; bh < nh; ++bh) {
    Head& hd = heads_[bh];
    Staged& s = st[bh];
    if (first) {
      hd.mu_k = s.mu_k;
      hd.mu_v = s.mu_v;
      hd.sigma = s.sigma;
    }
    std::memcpy(&hd.k8[length_ * dp_], s.k8.data(), n * dp_);
    std::memcpy(&hd.k_scale[length_], s.k_scale.data(), n * sizeof(float));
    if (fp8_)
      std::memcpy(&hd.v8[length_ * D], s.v8.data(), n * D);
    else
      std::memcpy(&hd.v16[length_ * D], s.v16.data(), n * D * sizeof(uint16_t));
  }
  have_stats_ = true;
  length_ += n;
}

KvView CpuKvCache::view(int64_t b, int64_t h, int64_t length) const {
  const Head& hd = heads_[b * spec_.Hkv + h];
  KvView v;
  v.length = std::min(length, length_);
  v.k8 = hd.k8.data();
  v.k_scale = hd.k_scale.data();
  v.dp = dp_;
  v.v_format = fp8_ ? VFormat::E4M3 : VFormat::F16;
  v.v = fp8_ ? static_cast<const void*>(hd.v8.data()) : static_cast<const void*>(hd.v16.data());
  v.v_sigma = hd.sigma.data();
  v.v_mu = hd.mu_v.data();
  v.k_mu = hd.mu_k.data();
  return v;
}

}  // namespace cpu
}  // namespace int8attn
