// The CUDA backend: implements core/backend.h on top of the kernels in cuda/common and the
// per-architecture attention instantiations. Host code only; no host synchronisation and no
// allocation on the forward path once the workspace is large enough.
#include <cuda_runtime.h>

#include <cstdio>
#include <memory>
#include <string>

#include "core/backend.h"
#include "core/error.h"
#include "cuda/host/cuda_check.h"
#include "cuda/host/forward_plan.h"
#include "cuda/host/graph_safe_workspace.h"
#include "cuda/host/kernel_dispatch.h"
#include "cuda/host/kv_cache_cuda.h"
#include "cuda/common/aux_kernels.h"
#include "cuda/common/combine.h"
#include "cuda/common/prepare_kv.h"

namespace int8attn {
namespace {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device_id) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
      throw Error(INT8ATTN_ERROR_BAD_DEVICE,
                  "no CUDA device is available (cudaGetDeviceCount "
                  "found none or the driver is missing)");
    if (device_id < 0 || device_id >= count)
      throw Error(INT8ATTN_ERROR_BAD_DEVICE, "device_id is " + std::to_string(device_id) + " but " +
                                                 std::to_string(count) + " CUDA device(s) exist");
    cudaDeviceProp prop{};
    cuda_check(cudaGetDeviceProperties(&prop, device_id), "cudaGetDeviceProperties");
    dev_.id = device_id;
    dev_.cc_major = prop.major;
    dev_.cc_minor = prop.minor;
    dev_.sm_count = prop.multiProcessorCount;
    dev_.smem_per_block = static_cast<int>(prop.sharedMemPerBlockOptin);
    dev_.smem_per_sm = static_cast<int>(prop.sharedMemPerMultiprocessor);
    name_ = prop.name;
#if defined(INT8ATTN_HAVE_SM90)
    if (prop.major == 9) {
      DeviceGuard guard(device_id);
      for (int n = 1; n <= kSmallMaxCluster; ++n)
        dev_.small_clusters[n] = small_max_active_clusters(n);
    }
#endif
    if (!device_has_kernels(dev_))
      throw Error(INT8ATTN_ERROR_UNSUPPORTED_ARCH,
                  std::string("device ") + std::to_string(device_id) + " (" + name_ + ", sm_" +
                      std::to_string(prop.major) + std::to_string(prop.minor) +
                      ") has no kernels in this build (compiled: " + compiled_architectures() +
                      ")");
  }

  size_t forward_workspace_size(const AttnProblem& p) override {
    const AttnKernelParams cache_params = cache_params_of(p);
    return plan_forward(p, dev_, nullptr, p.cache ? &cache_params : nullptr).workspace_bytes;
  }

  void forward(const AttnProblem& p) override {
    DeviceGuard guard(dev_.id);
    const cudaStream_t s = static_cast<cudaStream_t>(p.stream);
    const AttnKernelParams cache_params = cache_params_of(p);
    ForwardPlan plan = plan_forward(p, dev_, p.workspace, p.cache ? &cache_params : nullptr);
    if (plan.workspace_bytes > p.workspace_bytes)
      throw Error(INT8ATTN_ERROR_INTERNAL, "workspace smaller than the plan needs");
#if defined(INT8ATTN_HAVE_SM90)
    if (plan.small) {
      cuda_check(launch_attention_sm90_small(plan.small_params, plan.dpad, plan.mode, s),
                 "small-problem attention kernel launch");
      return;
    }
#endif
    if (plan.short_keys) {
#if defined(INT8ATTN_HAVE_SM90)
      if (plan.short_params.wgmma) {
        cuda_check(launch_attention_short_keys_wgmma(plan.short_params, plan.dpad, s),
                   "few-keys attention kernel launch");
        return;
      }
#endif
      cuda_check(launch_attention_short_keys(plan.short_params, plan.dpad, s),
                 "few-keys attention kernel launch");
      return;
    }
    if (plan.run_prep) {
      const StatsScratch use = use_own_stats_scratch(plan.prep, p);
      cuda_check(launch_kv_prepare(plan.prep, s), "K/V preparation kernel launch");
      if (use == StatsScratch::kFilledNow) stats_filled_ = true;
    }
    cuda_check(launch_attention(plan, dev_, s), "attention kernel launch");
    if (plan.attn.num_splits > 1) {
      cuda_check(launch_combine(plan.attn, dev_.cc_major >= 9, s),
                 "split-KV combine kernel launch");
    }
  }

  void quantize(const QuantizeProblem& p) override {
    DeviceGuard guard(dev_.id);
    float* ws = static_cast<float*>(
        workspace(quantize_workspace_floats(p) * sizeof(float), p.stream, "params->stream"));
    cuda_check(launch_quantize(p, ws, static_cast<cudaStream_t>(p.stream)), "quantize kernel");
  }

  void rotary(const RotaryProblem& p) override {
    DeviceGuard guard(dev_.id);
    cuda_check(launch_rotary(p, static_cast<cudaStream_t>(p.stream)), "rotary kernel");
  }

  void rms_norm(const RmsNormProblem& p) override {
    DeviceGuard guard(dev_.id);
    cuda_check(launch_rms_norm(p, static_cast<cudaStream_t>(p.stream)), "rms_norm kernel");
  }

  void predict_block_mask(const MaskProblem& p) override {
    DeviceGuard guard(dev_.id);
    if (p.nkb > 4096)
      throw Error(INT8ATTN_ERROR_NOT_SUPPORTED,
                  "predict_block_mask on the GPU supports at most 4096 key blocks; got " +
                      std::to_string(p.nkb) + " (raise k_block)");
    float* ws = static_cast<float*>(
        workspace(block_mask_workspace_floats(p) * sizeof(float), p.stream, "params->stream"));
    cuda_check(launch_predict_block_mask(p, ws, static_cast<cudaStream_t>(p.stream)),
               "block-mask prediction kernel");
  }

  std::unique_ptr<KvCacheImpl> create_cache(const CacheSpec& spec, void* stream) override {
    DeviceGuard guard(dev_.id);
    return make_cuda_kv_cache(spec, *this, static_cast<cudaStream_t>(stream));
  }

  void* workspace(size_t bytes, void* stream, const char* stream_arg) override {
    const bool capturing = stream != nullptr && stream_capturing(stream);
    return buffer_of(workspace_, bytes, capturing, stream_arg);
  }

  bool fp8_available() const override { return device_runs_fp8(dev_); }

  void synchronize(void* stream) override {
    DeviceGuard guard(dev_.id);
    cuda_check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
  }

 private:
  // At least `bytes` of `ws` (see GraphSafeWorkspace::get); growing allocates on this device
  // and first waits for queued work that may still use the buffer it frees.
  void* buffer_of(GraphSafeWorkspace<DeviceBuffer>& ws, size_t bytes, bool capturing,
                  const char* stream_arg) {
    if (bytes <= ws.size()) return ws.get(bytes, capturing, stream_arg, [] {});
    DeviceGuard guard(dev_.id);
    return ws.get(bytes, capturing, stream_arg, [] {
      cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize before growing the workspace");
    });
  }

  enum class StatsScratch { kWorkspace, kOwn, kFilledNow };

  // The statistics of forward calls on the context's own workspace accumulate in a buffer of
  // their own, at one row stride for every head dim (kMaxStatsStride), which each call's
  // statistics leave at its identities: only a new buffer's first call launches the fill
  // (one launch fewer a call). A caller's workspace keeps the scratch inside it, filled every
  // call: calls with different workspaces may run at once on different streams. During a
  // capture the buffer cannot grow (a too small one leaves the scratch in the workspace), and a
  // captured fill has not run yet, so it does not count as filling the buffer.
  StatsScratch use_own_stats_scratch(KvPrepParams& k, const AttnProblem& p) {
    if (!int8_qk(k.mode) || p.workspace == nullptr || p.workspace != workspace_.data())
      return StatsScratch::kWorkspace;
    const int64_t head_bytes = kv_stats_head_floats(kMaxStatsStride) * sizeof(float);
    const size_t bytes = static_cast<size_t>(head_bytes) * k.heads_b * k.heads_h;
    const bool capturing = p.stream != nullptr && stream_capturing(p.stream);
    if (bytes > stats_scratch_.size()) {
      if (capturing) return StatsScratch::kWorkspace;
      stats_filled_ = false;  // a new buffer
    }
    k.partials = static_cast<float*>(buffer_of(stats_scratch_, bytes, capturing, "params->stream"));
    k.stats_stride = kMaxStatsStride;
    k.fill = !stats_filled_;
    k.fill_heads = static_cast<int>(stats_scratch_.size() / static_cast<size_t>(head_bytes));
    return k.fill && !capturing ? StatsScratch::kFilledNow : StatsScratch::kOwn;
  }

  static AttnKernelParams cache_params_of(const AttnProblem& p) {
    return p.cache != nullptr ? cuda_kv_cache_params(*p.cache) : AttnKernelParams{};
  }

  // Whether `stream` is capturing a CUDA graph. The legacy stream, while a blocking stream
  // captures, answers cudaErrorStreamCaptureImplicit: that counts as capturing (nothing may
  // allocate then either). Any other error is an earlier launch's, left for the next CUDA call
  // to report.
  static bool stream_capturing(void* stream) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    const cudaError_t err = cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status);
    if (err == cudaErrorStreamCaptureImplicit) {
      (void)cudaGetLastError();  // not sticky; keep it out of the next launch check
      return true;
    }
    return err == cudaSuccess && status != cudaStreamCaptureStatusNone;
  }

  DeviceInfo dev_;
  std::string name_;
  GraphSafeWorkspace<DeviceBuffer> workspace_;
  GraphSafeWorkspace<DeviceBuffer> stats_scratch_;  // see use_own_stats_scratch
  bool stats_filled_ = false;                       // stats_scratch_ holds its identities
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device_id) {
  return std::make_unique<CudaBackend>(device_id);
}

bool cuda_compiled_in() { return true; }

uint64_t cuda_compiled_feature_bits() {
  uint64_t bits = INT8ATTN_FEATURE_CUDA;
#if defined(INT8ATTN_HAVE_SM80)
  bits |= INT8ATTN_FEATURE_SM80;
#endif
#if defined(INT8ATTN_HAVE_SM89)
  bits |= INT8ATTN_FEATURE_SM89;
#endif
#if defined(INT8ATTN_HAVE_SM90)
  bits |= INT8ATTN_FEATURE_SM90A;
#endif
  return bits;
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error for later calls
    return 0;
  }
  return count;
}

std::string cuda_device_describe(int device_id) {
  const int count = cuda_device_count();
  if (device_id < 0 || device_id >= count)
    throw Error(INT8ATTN_ERROR_BAD_DEVICE, "device_id is " + std::to_string(device_id) + " but " +
                                               std::to_string(count) + " CUDA device(s) exist");
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, device_id), "cudaGetDeviceProperties");
  char gib[32];  // the name (up to 256 bytes) goes around snprintf: no truncation
  std::snprintf(gib, sizeof gib, "%.1f GiB",
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return std::string(prop.name) + ", sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + ", " + std::to_string(prop.multiProcessorCount) + " SMs, " +
         gib;
}

}  // namespace int8attn
