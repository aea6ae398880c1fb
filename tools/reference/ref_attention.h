// Float64 reference attention with every forward option of the library: causal (bottom-right
// aligned), per-batch valid key lengths, block-sparse mask, GQA/MQA, sm_scale, LSE output.
#pragma once

#include <cstdint>
#include <vector>

namespace int8attn_ref {

struct RefOptions {
  double sm_scale = 0.0;                // 0 = 1/sqrt(D)
  bool causal = false;                  // bottom-right aligned: j <= i + L_b − Nq
  std::vector<int32_t> k_lengths;       // empty = Nk for every batch
  const uint8_t* block_mask = nullptr;  // dense [mask_B, mask_H, nqb, nkb]; mask_B in {1,B},
  int64_t mask_B = 1, mask_H = 1;       // mask_H in {1,Hq} (1 broadcasts)
  int64_t mask_q_block = 128, mask_k_block = 64;
};

struct RefResult {
  std::vector<double> o;    // [B, Hq, Nq, D]
  std::vector<double> lse;  // [B, Hq, Nq], natural log, −inf for rows with no visible key
};

// q, k, v in logical dense order (pass the dtype-rounded values the library sees). Runs on all
// hardware threads, one (batch, head) at a time per thread.
RefResult reference_attention(const std::vector<float>& q, const std::vector<float>& k,
                              const std::vector<float>& v, int64_t B, int64_t Hq, int64_t Hkv,
                              int64_t Nq, int64_t Nk, int64_t D, const RefOptions& opts = {});

}  // namespace int8attn_ref
