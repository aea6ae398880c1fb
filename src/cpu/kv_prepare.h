// Preparation of K and V for one call: smoothing, channel balancing, INT8 quantization of K and
// fp16 / e4m3 conversion of V (quant_math conventions). One unit per distinct (K, V, valid
// length) source, so K/V broadcast over batches or heads (stride 0) are prepared once.
#pragma once

#include <cstdint>
#include <vector>

#include "common/problem.h"
#include "common/quant_math.h"
#include "cpu/kv_view.h"
#include "cpu/thread_pool.h"

namespace int8attn {
namespace cpu {

struct KvUnit {
  int64_t b = 0, h = 0, length = 0;  // a representative source (batch, kv-head) and L
  std::vector<int8_t> k8;
  std::vector<float> k_scale, kf, v_f32, v_sigma, v_mu, alpha, k_mu;
  std::vector<uint16_t> v16;
  std::vector<uint8_t> v8;
  KvView view(int64_t D) const;
};

struct PreparedKv {
  std::vector<KvUnit> units;
  std::vector<int32_t> unit_of;  // [B·Hkv] -> unit index
  std::vector<KvView> views;
  int64_t Hkv = 0;
};

// Valid key length of batch b (k_lengths or Nk).
int64_t valid_length(const AttnProblem& p, int64_t b);

void prepare_kv(const AttnProblem& p, ThreadPool& pool, PreparedKv& out);

// Shared helpers (also used by the cache).
// Per-channel constants (qm::channel_consts) of `rows` rows of K and V (row stride d), sums in
// double: V's statistics over every row, K's over the rows sampled with `k_stride`
// (qm::stats_stride of the call's key count); q_absmax: [d] max |q| per channel when
// balancing, else null.
std::vector<qm::ChannelConsts> channel_constants(const float* k, const float* v, int64_t rows,
                                                 int64_t d, int k_stride, const float* q_absmax,
                                                 bool smooth_k, bool smooth_v, bool fp8,
                                                 float headroom);
// Per-token INT8 quantization of `rows` rows of fp32 data (row stride d) into int8 rows of
// stride dp; one scale per token, or one per group of 64 tokens when per_block.
void quantize_rows_int8(const float* x, int64_t rows, int64_t d, int64_t dp, bool per_block,
                        float multiplier, int8_t* out, float* scales);

}  // namespace cpu
}  // namespace int8attn

namespace int8attn {
namespace cpu {
// ṽ = fp16 or e4m3 of centered[r,c]/sigma[c] (fp16 saturated to ±65504, e4m3 to ±448).
void encode_v_rows(const float* centered, int64_t rows, int64_t d, const float* sigma, bool fp8,
                   uint16_t* out16, uint8_t* out8);
}  // namespace cpu
}  // namespace int8attn
