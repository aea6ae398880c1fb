// The CPU backend: owns a thread pool and a host scratch buffer; forward() prepares K/V once
// per distinct (batch, kv-head) source (or reads a cache) and runs the streaming attention.
#include <memory>
#include <vector>

#include "core/backend.h"
#include "core/context.h"
#include "core/error.h"
#include "cpu/attention.h"
#include "cpu/cpu_cache.h"
#include "cpu/kv_prepare.h"
#include "cpu/quantize.h"
#include "cpu/rms_norm.h"
#include "cpu/rotary.h"
#include "cpu/thread_pool.h"

namespace int8attn {
namespace {

static_assert(cpu::ThreadPool::kMaxThreads == kMaxCpuThreads,
              "the pool's cap is the documented cap on params->num_threads");

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int num_threads) : pool_(num_threads) {}

  size_t forward_workspace_size(const AttnProblem&) override { return 0; }

  void forward(const AttnProblem& prob) override {
    AttnProblem p = prob;
    std::vector<const cpu::KvView*> views(p.B * p.Hkv);
    if (p.cache) {
      const auto* cache = dynamic_cast<const cpu::CpuKvCache*>(p.cache);
      INT8ATTN_REQUIRE(cache != nullptr, INT8ATTN_ERROR_BAD_DEVICE,
                       "kv_cache_forward: the cache does not belong to the CPU backend");
      p.mode = cache->spec().mode;
      p.Nk = cache->length();
      std::vector<cpu::KvView> own(p.B * p.Hkv);
      for (int64_t b = 0; b < p.B; ++b)
        for (int64_t h = 0; h < p.Hkv; ++h) {
          own[b * p.Hkv + h] = cache->view(b, h, cpu::valid_length(p, b));
          views[b * p.Hkv + h] = &own[b * p.Hkv + h];
        }
      cpu::run_attention(p, views, pool_);
      return;
    }
    cpu::PreparedKv kv;
    cpu::prepare_kv(p, pool_, kv);
    for (int64_t i = 0; i < p.B * p.Hkv; ++i) views[i] = &kv.views[kv.unit_of[i]];
    cpu::run_attention(p, views, pool_);
  }

  void quantize(const QuantizeProblem& p) override { cpu::quantize(p, pool_); }
  void rotary(const RotaryProblem& p) override { cpu::rotary(p, pool_); }
  void rms_norm(const RmsNormProblem& p) override { cpu::rms_norm(p, pool_); }
  void predict_block_mask(const MaskProblem& p) override { cpu::predict_block_mask(p, pool_); }

  std::unique_ptr<KvCacheImpl> create_cache(const CacheSpec& spec, void*) override {
    return std::make_unique<cpu::CpuKvCache>(spec, &pool_);
  }

  void* workspace(size_t bytes, void*, const char*) override {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_.empty() ? nullptr : scratch_.data();
  }
  void synchronize(void*) override {}
  bool fp8_available() const override { return true; }  // emulated exactly (cpu/kernels)

 private:
  cpu::ThreadPool pool_;
  std::vector<unsigned char> scratch_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int num_threads) {
  return std::make_unique<CpuBackend>(num_threads);
}

}  // namespace int8attn
