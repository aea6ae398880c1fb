// The small-problem path's instantiations for sm_90a (thread-block clusters): BALANCED and FAST
// at every padded head dim, fp16 and bf16 inputs. See attention_small.h.
#include "cuda/sm90/attention_small.h"
#include "cuda/common/dynamic_smem.h"
#include "cuda/sm90/attention_small_kernel.cuh"
#include "cuda/common/head_dims.h"

namespace int8attn {
namespace {

template <int DPAD, Mode MODE, bool BF16, int ROWS>
cudaError_t launch(const SmallAttnParams& p, cudaStream_t stream) {
  const auto kernel = small::attention_small_kernel<DPAD, MODE, BF16, ROWS>;
  const SmallLayout lay =
      small_layout(DPAD, p.a.D, p.nkp, p.kc, ROWS, p.stats_by_copy ? p.cluster : 0);
  if (lay.total > kSmallMaxSmem || p.cluster < 1 || p.cluster > kSmallMaxCluster)
    return cudaErrorInvalidValue;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(p.cluster), static_cast<unsigned>(p.a.B * p.a.Hkv));
  cfg.blockDim = dim3(kSmallThreads);
  cfg.dynamicSmemBytes = lay.total;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(p.cluster);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return with_dynamic_smem(reinterpret_cast<const void*>(kernel), lay.total,
                           [&] { return cudaLaunchKernelEx(&cfg, kernel, p); });
}

// 64 query rows per CTA, or 32.
template <int DPAD, Mode MODE, bool BF16>
cudaError_t launch_rows(const SmallAttnParams& p, cudaStream_t s) {
  if (p.rows == 64) return launch<DPAD, MODE, BF16, 64>(p, s);
  if (p.rows == 32) return launch<DPAD, MODE, BF16, 32>(p, s);
  return cudaErrorInvalidValue;
}

template <Mode MODE, bool BF16>
cudaError_t launch_dpad(const SmallAttnParams& p, int dpad, cudaStream_t s) {
  return SmallHeadDims::dispatch(dpad,
                                 [&](auto d) { return launch_rows<d.value, MODE, BF16>(p, s); });
}

}  // namespace

int small_max_active_clusters(int cluster) {
  // Any instance will do: all run one 256-thread CTA per SM (registers); the most shared memory
  // makes that so for this query too.
  const auto kernel = small::attention_small_kernel<160, Mode::kFast, false, 32>;
  bool set_now = false;
  if (allow_dynamic_smem(reinterpret_cast<const void*>(kernel), kSmallMaxSmem, set_now) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(cluster), 1);
  cfg.blockDim = dim3(kSmallThreads);
  cfg.dynamicSmemBytes = kSmallMaxSmem;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(cluster);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) {
    (void)cudaGetLastError();  // clear it: the caller's next launch must not see it
    return 0;
  }
  return n;
}

cudaError_t launch_attention_sm90_small(const SmallAttnParams& p, int dpad, Mode mode,
                                        cudaStream_t s) {
  const bool bf16 = p.a.dtype == DType::kBF16;
  if (mode == Mode::kFast)
    return bf16 ? launch_dpad<Mode::kFast, true>(p, dpad, s)
                : launch_dpad<Mode::kFast, false>(p, dpad, s);
  if (mode == Mode::kBalanced)
    return bf16 ? launch_dpad<Mode::kBalanced, true>(p, dpad, s)
                : launch_dpad<Mode::kBalanced, false>(p, dpad, s);
  return cudaErrorInvalidValue;
}

}  // namespace int8attn
