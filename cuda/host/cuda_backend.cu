// The CUDA backend: implements core/backend.h on top of the kernels in cuda/kernels and the
// per-architecture attention instantiations. Host code only; no host synchronisation and no
// allocation on the forward path once the workspace is large enough.
#include <cuda_runtime.h>

#include <cstdio>
#include <memory>
#include <string>

#include "core/backend.h"
#include "core/error.h"
#include "host/cuda_check.h"
#include "host/forward_plan.h"
#include "host/kv_cache_cuda.h"
#include "kernels/attention_launchers.h"
#include "kernels/aux_kernels.h"
#include "kernels/combine.h"
#include "kernels/prepare_kv.h"

namespace int8attn {
namespace {

cudaError_t launch_attention(const ForwardPlan& plan, const DeviceInfo& dev, cudaStream_t s) {
  const AttnKernelParams& a = plan.attn;
  const int mode = plan.kernel_mode;
  const int cc = dev.cc_major * 10 + dev.cc_minor;
  (void)a;
  (void)mode;
  (void)cc;
#if defined(INT8ATTN_HAVE_SM90)
  if (dev.cc_major == 9) {
    if (plan.sm90_wgmma) return launch_attention_sm90_wgmma(a, plan.dpad, mode, s);
    if (mode == INT8ATTN_MODE_EXACT) return launch_attention_sm90_exact(a, plan.dpad, plan.bf16, s);
    if (mode == INT8ATTN_MODE_BALANCED) return launch_attention_sm90_balanced(a, plan.dpad, s);
    return launch_attention_sm90_fast(a, plan.dpad, s);
  }
#endif
#if defined(INT8ATTN_HAVE_SM89)
  if (cc == 89) {
    if (mode == INT8ATTN_MODE_EXACT) return launch_attention_sm89_exact(a, plan.dpad, plan.bf16, s);
    if (mode == INT8ATTN_MODE_BALANCED) return launch_attention_sm89_balanced(a, plan.dpad, s);
    return launch_attention_sm89_fast(a, plan.dpad, s);
  }
#endif
#if defined(INT8ATTN_HAVE_SM80)
  if (dev.cc_major == 8) {  // sm80, sm86, sm87 (and sm89 when only sm80 was compiled)
    if (mode == INT8ATTN_MODE_EXACT) return launch_attention_sm80_exact(a, plan.dpad, plan.bf16, s);
    return launch_attention_sm80_balanced(a, plan.dpad, s);
  }
#endif
  return cudaErrorNoKernelImageForDevice;
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device_id) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
      throw Error(INT8ATTN_ERROR_BAD_DEVICE, "no CUDA device is available (cudaGetDeviceCount "
                                             "found none or the driver is missing)");
    if (device_id < 0 || device_id >= count)
      throw Error(INT8ATTN_ERROR_BAD_DEVICE, "device_id is " + std::to_string(device_id) +
                                                 " but " + std::to_string(count) +
                                                 " CUDA device(s) exist");
    cudaDeviceProp prop{};
    cuda_check(cudaGetDeviceProperties(&prop, device_id), "cudaGetDeviceProperties");
    dev_.id = device_id;
    dev_.cc_major = prop.major;
    dev_.cc_minor = prop.minor;
    dev_.sm_count = prop.multiProcessorCount;
    name_ = prop.name;
#if defined(INT8ATTN_HAVE_SM90)
    if (prop.major == 9) {
      DeviceGuard guard(device_id);
      for (int n = 1; n <= kSmallMaxCluster; ++n) dev_.small_clusters[n] = small_max_active_clusters(n);
    }
#endif
    const bool have = (prop.major == 9 && have_sm90()) ||
                      (prop.major == 8 && prop.minor == 9 && (have_sm89() || have_sm80())) ||
                      (prop.major == 8 && have_sm80());
    if (!have)
      throw Error(INT8ATTN_ERROR_UNSUPPORTED_ARCH,
                  std::string("device ") + std::to_string(device_id) + " (" + name_ + ", sm_" +
                      std::to_string(prop.major) + std::to_string(prop.minor) +
                      ") has no kernels in this build (compiled: " + compiled_list() + ")");
  }

  size_t forward_workspace_size(const AttnProblem& p) override {
    const AttnKernelParams cache_params = cache_params_of(p);
    return plan_forward(p, dev_, nullptr, p.cache ? &cache_params : nullptr).workspace_bytes;
  }

  void forward(const AttnProblem& p) override {
    DeviceGuard guard(dev_.id);
    const cudaStream_t s = static_cast<cudaStream_t>(p.stream);
    const AttnKernelParams cache_params = cache_params_of(p);
    const ForwardPlan plan = plan_forward(p, dev_, p.workspace, p.cache ? &cache_params : nullptr);
    if (plan.workspace_bytes > p.workspace_bytes)
      throw Error(INT8ATTN_ERROR_INTERNAL, "workspace smaller than the plan needs");
#if defined(INT8ATTN_HAVE_SM90)
    if (plan.small) {
      cuda_check(launch_attention_sm90_small(plan.small_params, plan.dpad, plan.kernel_mode, s),
                 "small-problem attention kernel launch");
      return;
    }
#endif
    if (plan.run_prep) cuda_check(launch_kv_prepare(plan.prep, s), "K/V preparation kernel launch");
    cuda_check(launch_attention(plan, dev_, s), "attention kernel launch");
    if (plan.attn.num_splits > 1) {
      CombineParams c;
      c.part_o = plan.attn.part_o;
      c.part_lse = plan.attn.part_lse;
      c.num_splits = plan.attn.num_splits;
      c.B = plan.attn.B;
      c.Hq = plan.attn.Hq;
      c.Nq = plan.attn.Nq;
      c.D = plan.attn.D;
      c.o = p.o;
      for (int i = 0; i < 4; ++i) c.o_stride[i] = p.o_stride[i];
      c.dtype = p.dtype;
      c.lse = p.lse;
      for (int i = 0; i < 3; ++i) c.lse_stride[i] = p.lse_stride[i];
      c.launch_early = dev_.cc_major >= 9;
      cuda_check(launch_combine(c, s), "split-KV combine kernel launch");
    }
  }

  void quantize(const QuantizeProblem& p) override {
    DeviceGuard guard(dev_.id);
    float* ws = static_cast<float*>(workspace(quantize_workspace_floats(p) * sizeof(float)));
    cuda_check(launch_quantize(p, ws, static_cast<cudaStream_t>(p.stream)), "quantize kernel");
  }

  void predict_block_mask(const MaskProblem& p) override {
    DeviceGuard guard(dev_.id);
    if (p.nkb > 4096)
      throw Error(INT8ATTN_ERROR_NOT_SUPPORTED,
                  "predict_block_mask on the GPU supports at most 4096 key blocks; got " +
                      std::to_string(p.nkb) + " (raise k_block)");
    float* ws = static_cast<float*>(workspace(block_mask_workspace_floats(p) * sizeof(float)));
    cuda_check(launch_predict_block_mask(p, ws, static_cast<cudaStream_t>(p.stream)),
               "block-mask prediction kernel");
  }

  std::unique_ptr<KvCacheImpl> create_cache(const CacheSpec& spec, void* stream) override {
    DeviceGuard guard(dev_.id);
    if (spec.mode == INT8ATTN_MODE_FAST && kernel_mode_for(spec.mode, dev_) != spec.mode)
      throw Error(INT8ATTN_ERROR_UNSUPPORTED_MODE,
                  "mode: a FAST (FP8) K/V cache needs FP8 tensor cores (sm89 or newer); this "
                  "device is sm_" + std::to_string(dev_.cc_major) + std::to_string(dev_.cc_minor) +
                      ": use INT8ATTN_MODE_BALANCED");
    return make_cuda_kv_cache(spec, *this, static_cast<cudaStream_t>(stream));
  }

  void* workspace(size_t bytes) override {
    if (bytes > workspace_.size()) {
      DeviceGuard guard(dev_.id);
      // Growing frees the old buffer: wait for work that may still use it.
      cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize before growing the workspace");
      workspace_.resize(bytes + bytes / 4);
    }
    return workspace_.get();
  }

  void synchronize(void* stream) override {
    DeviceGuard guard(dev_.id);
    cuda_check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
  }

 private:
  static bool have_sm80() {
#if defined(INT8ATTN_HAVE_SM80)
    return true;
#else
    return false;
#endif
  }
  static bool have_sm89() {
#if defined(INT8ATTN_HAVE_SM89)
    return true;
#else
    return false;
#endif
  }
  static bool have_sm90() {
#if defined(INT8ATTN_HAVE_SM90)
    return true;
#else
    return false;
#endif
  }
  static std::string compiled_list() {
    std::string s;
    if (have_sm80()) s += "sm80 ";
    if (have_sm89()) s += "sm89 ";
    if (have_sm90()) s += "sm90a ";
    return s.empty() ? "none" : s.substr(0, s.size() - 1);
  }
  static AttnKernelParams cache_params_of(const AttnProblem& p) {
    return p.cache != nullptr ? cuda_kv_cache_params(*p.cache) : AttnKernelParams{};
  }

  DeviceInfo dev_;
  std::string name_;
  DeviceBuffer workspace_;
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
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s, sm_%d%d, %d SMs, %.1f GiB", prop.name, prop.major,
                prop.minor, prop.multiProcessorCount,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace int8attn
