// The CPU KV cache. Layout per (batch, kv-head), all with `capacity` rows:
//   k8      [capacity, dp] int8 (rows zero-padded to dp = D rounded up to 32), K − μ_K quantized
//           per token (scale multiplier 1);
//   k_scale [capacity] fp32 per-token scales;
//   v       [capacity, D] fp16 bits (BALANCED) or e4m3 bits (FAST) of (v − μ_V)/σ;
//   mu_k, mu_v, sigma [D] fp32, fixed by the first append after create/reset
//           (σ with qm::kCacheHeadroom so later appends fit).
#pragma once

#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "cpu/kv_view.h"
#include "cpu/thread_pool.h"

namespace int8attn {
namespace cpu {

class CpuKvCache final : public KvCacheImpl {
 public:
  CpuKvCache(const CacheSpec& spec, ThreadPool* pool);
  const CacheSpec& spec() const override { return spec_; }
  int64_t length() const override { return length_; }
  void append(const CacheAppend& a) override;
  void reset() override;

  // The first `length` (<= length()) tokens of (b, h) as the attention loop reads them.
  KvView view(int64_t b, int64_t h, int64_t length) const;

 private:
  struct Head {
    std::vector<int8_t> k8;
    std::vector<float> k_scale, mu_k, mu_v, sigma;
    std::vector<uint16_t> v16;
    std::vector<uint8_t> v8;
  };
  CacheSpec spec_;
  ThreadPool* pool_;
  int64_t dp_ = 0, length_ = 0;
  bool fp8_ = false, have_stats_ = false;
  std::vector<Head> heads_;
};

}  // namespace cpu
}  // namespace int8attn
