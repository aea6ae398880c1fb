// The prepared (quantized or converted) keys and values of one (batch, kv-head) as the attention
// loop reads them. Produced per call by kv_prepare.cpp, or pointing into a KV cache.
#pragma once

#include <cstdint>

namespace int8attn {
namespace cpu {

enum class VFormat { F32, F16, E4M3 };  // EXACT, BALANCED, FAST

struct KvView {
  int64_t length = 0;  // valid keys L (the attention reads keys [0, L))
  // INT8 modes: k8 is [L, dp] int8 (zero-padded rows), k_scale [L] per-token scales.
  const int8_t* k8 = nullptr;
  const float* k_scale = nullptr;
  int64_t dp = 0;
  // EXACT: kf is [L, D] fp32.
  const float* kf = nullptr;
  // V rows of D values: fp32 (EXACT), fp16 bits (BALANCED), e4m3 bits (FAST).
  VFormat v_format = VFormat::F32;
  const void* v = nullptr;
  // Output restore o[c] = sigma[c]·(Σ p̃ ṽ)/l + mu[c]; null = 1 and 0.
  const float* v_sigma = nullptr;
  const float* v_mu = nullptr;
  // K smoothing mean μ_K (null = none): scores were computed from K − μ_K, so the true LSE is
  // the smoothed one + sm_scale·q·μ_K (O is invariant).
  const float* k_mu = nullptr;
  // Channel balancing: Q channels are divided by alpha[c] before quantization (null = none).
  const float* alpha = nullptr;
};

}  // namespace cpu
}  // namespace int8attn
