#include "ref_inputs.h"

#include <random>

namespace int8attn_ref {

const char* family_name(Family f) {
  switch (f) {
    case Family::Gaussian: return "gaussian";
    case Family::OutlierChannels: return "outlier";
    case Family::ChannelBias: return "channel_bias";
    case Family::Peaky: return "peaky";
  }
  return "?";
}
std::vector<Family> all_families() {
  return {Family::Gaussian, Family::OutlierChannels, Family::ChannelBias, Family::Peaky};
}

std::vector<float> gaussian(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  return x;
}

Inputs make_inputs(Family family, int64_t B, int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nk,
                   int64_t D, uint64_t seed) {
  Inputs in;
  in.q = gaussian(static_cast<size_t>(B * Hq * Nq * D), seed * 3 + 1);
  in.k = gaussian(static_cast<size_t>(B * Hkv * Nk * D), seed * 3 + 2);
  in.v = gaussian(static_cast<size_t>(B * Hkv * Nk * D), seed * 3 + 3);
  auto scale_channel = [D](std::vector<float>& x, int64_t c, float f) {
    for (size_t i = static_cast<size_t>(c); i < x.size(); i += static_cast<size_t>(D)) x[i] *= f;
  };
  switch (family) {
    case Family::Gaussian: break;
    case Family::OutlierChannels: {
      // Q outliers in channels 1 and D/2+3; K outliers in channels 5 and D−2 (D >= 8).
      scale_channel(in.q, 1, 20.0f);
      scale_channel(in.q, (D / 2 + 3) % D, 20.0f);
      scale_channel(in.k, 5 % D, 20.0f);
      scale_channel(in.k, D - 2, 20.0f);
      break;
    }
    case Family::ChannelBias: {
      const size_t d = static_cast<size_t>(D);
      std::vector<float> bk = gaussian(d, seed * 7 + 11);
      std::vector<float> bv = gaussian(d, seed * 7 + 12);
      for (size_t i = 0; i < in.k.size(); ++i) {
        in.k[i] += 8.0f * bk[i % d];
        in.v[i] += 8.0f * bv[i % d];
      }
      break;
    }
    case Family::Peaky:
      for (auto& x : in.q) x *= 2.0f;
      for (auto& x : in.k) x *= 2.0f;
      break;
  }
  return in;
}

}  // namespace int8attn_ref
