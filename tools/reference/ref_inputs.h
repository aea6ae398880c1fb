// Deterministic input families for attention: Gaussian, outlier channels, channel bias, peaky
// softmax. Values are logical dense [B, H, N, D] floats, not yet rounded to a storage dtype.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace int8attn_ref {

enum class Family {
  Gaussian,         // N(0,1) everywhere
  OutlierChannels,  // Gaussian; 2 channels of Q and 2 other channels of K scaled ×20
  ChannelBias,      // Gaussian; K and V get large per-channel offsets (σ = 8)
  Peaky             // Q and K scaled ×2 (score std ≈ 4): rows dominated by a few keys
};
const char* family_name(Family f);
std::vector<Family> all_families();

struct Inputs {
  std::vector<float> q, k, v;  // logical dense [B,Hq,Nq,D], [B,Hkv,Nk,D], [B,Hkv,Nk,D]
};
Inputs make_inputs(Family family, int64_t B, int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nk,
                   int64_t D, uint64_t seed);
// Deterministic N(0, 1) values.
std::vector<float> gaussian(size_t n, uint64_t seed);

}  // namespace int8attn_ref
