// GPU K/V cache (see kv_cache_cuda.h). K is stored per token (scales per key, so appends never
// re-quantize earlier tokens); the smoothing means and V's per-channel scales are fixed by the
// first append, with qm::kCacheHeadroom of range for later values.
#include "cuda/host/kv_cache_cuda.h"

#include <string>

#include "common/quant_math.h"
#include "core/error.h"
#include "cuda/host/cuda_check.h"
#include "cuda/common/prepare_kv.h"

namespace int8attn {
namespace {

class CudaKvCache final : public KvCacheImpl {
 public:
  CudaKvCache(const CacheSpec& spec, Backend& backend, cudaStream_t stream)
      : spec_(spec), backend_(backend) {
    dpad_ = static_cast<int>((spec.D + 31) / 32 * 32);
    cap_pad_ = (spec.capacity + 63) / 64 * 64;
    heads_ = spec.B * spec.Hkv;
    const size_t vbytes = fp8_pv(spec.mode) ? 1 : 2;
    k_.resize(static_cast<size_t>(heads_ * cap_pad_ * dpad_));
    k_scale_.resize(static_cast<size_t>(heads_ * cap_pad_) * sizeof(float));
    v_.resize(static_cast<size_t>(heads_ * cap_pad_ * dpad_) * vbytes);
    stats_.resize(static_cast<size_t>(3 * heads_ * dpad_) * sizeof(float));
    cuda_check(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, spec.device_id),
               "cudaDeviceGetAttribute");
    int cc_major = 0;
    cuda_check(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, spec.device_id),
               "cudaDeviceGetAttribute");
    chain_ = cc_major >= 9;
    // Zero once so padding keys/channels are finite zeros forever (masked keys still meet P=0).
    cuda_check(cudaMemsetAsync(k_.get(), 0, k_.size(), stream), "cudaMemsetAsync");
    cuda_check(cudaMemsetAsync(k_scale_.get(), 0, k_scale_.size(), stream), "cudaMemsetAsync");
    cuda_check(cudaMemsetAsync(v_.get(), 0, v_.size(), stream), "cudaMemsetAsync");
    cuda_check(cudaMemsetAsync(stats_.get(), 0, stats_.size(), stream), "cudaMemsetAsync");
  }

  const CacheSpec& spec() const override { return spec_; }
  int64_t length() const override { return length_; }
  void reset() override { length_ = 0; }

  void append(const CacheAppend& a) override {
    KvPrepParams p;
    p.k = a.k;
    p.v = a.v;
    p.dtype = a.dtype;
    p.heads_b = static_cast<int>(spec_.B);
    p.heads_h = static_cast<int>(spec_.Hkv);
    p.n = static_cast<int>(a.n);
    p.D = static_cast<int>(spec_.D);
    p.dpad = dpad_;
    p.mode = spec_.mode;
    p.smooth_k = (spec_.flags & INT8ATTN_FLAG_SMOOTH_K) != 0;
    p.smooth_v = (spec_.flags & INT8ATTN_FLAG_SMOOTH_V) != 0;
    p.k_per_token = true;
    p.v_headroom = qm::kCacheHeadroom;
    p.k_out = k_.get();
    p.k_scale = static_cast<float*>(k_scale_.get());
    p.v_out = v_.get();
    p.k_mean = static_cast<float*>(stats_.get());
    p.v_mean = p.k_mean + heads_ * dpad_;
    p.v_scale = p.v_mean + heads_ * dpad_;
    p.nk_pad = cap_pad_;
    p.key_offset = length_;
    p.fill_tail = false;
    p.sm_count = sm_count_;
    p.chain = chain_;
    const cudaStream_t s = static_cast<cudaStream_t>(a.stream);
    DeviceGuard guard(spec_.device_id);
    if (length_ == 0) {
      p.stats_stride = dpad_;
      const int64_t floats = kv_stats_partial_floats(static_cast<int>(heads_), dpad_);
      const int64_t sums = plan_kv_stats(p);
      p.partials = static_cast<float*>(
          backend_.workspace((floats + sums) * sizeof(float), a.stream, "stream"));
      p.range_sums = p.partials + floats;  // floats is a multiple of 4: 16-byte aligned
      cuda_check(launch_kv_stats(p, s), "cache statistics kernel launch");
    }
    cuda_check(launch_kv_quantize(p, s, length_ == 0), "cache quantization kernel launch");
    length_ += a.n;
  }

  AttnKernelParams params() const {
    AttnKernelParams a;
    a.k = k_.get();
    a.k_scale = static_cast<const float*>(k_scale_.get());
    a.v = v_.get();
    a.v_mean = static_cast<const float*>(stats_.get()) + heads_ * dpad_;
    a.v_scale = a.v_mean + heads_ * dpad_;
    a.q_factor = nullptr;
    a.k_mean = (spec_.flags & INT8ATTN_FLAG_SMOOTH_K) != 0 ? static_cast<const float*>(stats_.get())
                                                           : nullptr;
    a.kv_batch_stride = spec_.Hkv;
    a.kv_head_stride = 1;
    a.nk_pad = cap_pad_;
    return a;
  }

 private:
  CacheSpec spec_;
  Backend& backend_;
  int dpad_ = 0, sm_count_ = 132;
  bool chain_ = false;  // sm_90+: the quantization launches early after the statistics
  int64_t cap_pad_ = 0, heads_ = 0, length_ = 0;
  DeviceBuffer k_, k_scale_, v_, stats_;  // stats_: k_mean | v_mean | v_scale
};

}  // namespace

std::unique_ptr<KvCacheImpl> make_cuda_kv_cache(const CacheSpec& spec, Backend& backend,
                                                cudaStream_t stream) {
  return std::make_unique<CudaKvCache>(spec, backend, stream);
}

AttnKernelParams cuda_kv_cache_params(const KvCacheImpl& cache) {
  const auto* c = dynamic_cast<const CudaKvCache*>(&cache);
  if (c == nullptr)
    throw Error(INT8ATTN_ERROR_BAD_DEVICE, "cache: a CPU cache cannot serve a CUDA forward");
  return c->params();
}

}  // namespace int8attn
