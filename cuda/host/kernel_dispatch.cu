// The kernel choice of kernel_dispatch.h.
#include "cuda/host/kernel_dispatch.h"

#include "cuda/common/attention_launchers.h"
#include "cuda/common/head_dims.h"

namespace int8attn {
namespace {

constexpr bool kHaveSm80 =
#if defined(INT8ATTN_HAVE_SM80)
    true;
#else
    false;
#endif
constexpr bool kHaveSm89 =
#if defined(INT8ATTN_HAVE_SM89)
    true;
#else
    false;
#endif
constexpr bool kHaveSm90 =
#if defined(INT8ATTN_HAVE_SM90)
    true;
#else
    false;
#endif

bool is_sm89(const DeviceInfo& dev) { return dev.cc_major == 8 && dev.cc_minor == 9; }

}  // namespace

bool device_has_kernels(const DeviceInfo& dev) {
  if (dev.cc_major == 9) return kHaveSm90;
  if (is_sm89(dev)) return kHaveSm89 || kHaveSm80;
  return dev.cc_major == 8 && kHaveSm80;
}

bool device_runs_fp8(const DeviceInfo& dev) {
  return (dev.cc_major == 9 && kHaveSm90) || (is_sm89(dev) && kHaveSm89);
}

const char* compiled_architectures() {
  static const char* const names[8] = {"none",  "sm80",       "sm89",       "sm80 sm89",
                                       "sm90a", "sm80 sm90a", "sm89 sm90a", "sm80 sm89 sm90a"};
  return names[(kHaveSm80 ? 1 : 0) | (kHaveSm89 ? 2 : 0) | (kHaveSm90 ? 4 : 0)];
}

bool sm90_wgmma_eligible(Mode mode, int dpad, const AttnProblem& p, const DeviceInfo& dev) {
  return kHaveSm90 && dev.cc_major == 9 && int8_qk(mode) && WgmmaHeadDims::contains(dpad) &&
         p.block_mask == nullptr && p.q_granularity != INT8ATTN_GRANULARITY_PER_BLOCK;
}

cudaError_t launch_attention(const ForwardPlan& plan, const DeviceInfo& dev, cudaStream_t s) {
  const AttnKernelParams& a = plan.attn;
#if defined(INT8ATTN_HAVE_SM90)
  if (dev.cc_major == 9) {
    if (plan.sm90_wgmma) return launch_attention_sm90_wgmma(a, plan.dpad, plan.mode, s);
    return launch_attention_mma_sm90(a, plan.dpad, plan.mode, s);
  }
#endif
#if defined(INT8ATTN_HAVE_SM89)
  if (is_sm89(dev)) return launch_attention_mma_sm89(a, plan.dpad, plan.mode, s);
#endif
#if defined(INT8ATTN_HAVE_SM80)
  if (dev.cc_major == 8) return launch_attention_mma_sm80(a, plan.dpad, plan.mode, s);
#endif
  (void)a;
  (void)dev;
  (void)s;
  return cudaErrorNoKernelImageForDevice;
}

}  // namespace int8attn
