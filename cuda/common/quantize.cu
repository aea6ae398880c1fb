// The standalone quantize entry point on the GPU (int8attn_quantize): per-channel means over
// tokens (when smoothing), then symmetric INT8 per token or per 64-token block.
#include "common/quant_math.h"
#include "cuda/common/mma.cuh"
#include "cuda/common/aux_kernels.h"

namespace int8attn {
namespace {

__device__ __forceinline__ int64_t xoff(const QuantizeProblem& p, int b, int h, int64_t i, int d) {
  return b * p.x.stride[0] + h * p.x.stride[1] + i * p.x.stride[2] + d * p.x.stride[3];
}

__global__ void mean_kernel(const QuantizeProblem p, float* mean_ws) {
  const int bh = blockIdx.x, b = bh / p.H, h = bh % p.H;
  for (int d = threadIdx.x; d < p.D; d += blockDim.x) {
    float s = 0.f;
    for (int64_t i = 0; i < p.N; ++i)
      s += dev::load_as_float(p.x.data, xoff(p, b, h, i, d), p.dtype);
    const float m = p.smooth ? s / static_cast<float>(p.N) : 0.f;
    mean_ws[static_cast<int64_t>(bh) * p.D + d] = m;
    if (p.mean != nullptr)
      p.mean[b * p.mean_stride[0] + h * p.mean_stride[1] + d * p.mean_stride[2]] = m;
  }
}

// One warp per token; a CTA of 2 warps... covers 64 tokens (per-block scale shared by the CTA).
__global__ void quant_kernel(const QuantizeProblem p, const float* mean_ws) {
  __shared__ float s_amax[64];
  const int tile = blockIdx.x, bh = blockIdx.y, b = bh / p.H, h = bh % p.H;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
  const float* mu = mean_ws + static_cast<int64_t>(bh) * p.D;
  for (int r = warp; r < 64; r += nwarps) {
    const int64_t i = static_cast<int64_t>(tile) * 64 + r;
    float amax = 0.f;
    if (i < p.N)
      for (int d = lane; d < p.D; d += 32)
        amax = dev::fmax_nan(
            amax, fabsf(dev::load_as_float(p.x.data, xoff(p, b, h, i, d), p.dtype) - mu[d]));
    for (int o = 16; o > 0; o >>= 1)
      amax = dev::fmax_nan(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if (lane == 0) s_amax[r] = amax;
  }
  __syncthreads();
  const bool per_token = p.granularity == INT8ATTN_GRANULARITY_PER_TOKEN;
  float block_amax = 0.f;
  for (int r = 0; r < 64; ++r) block_amax = dev::fmax_nan(block_amax, s_amax[r]);
  for (int r = warp; r < 64; r += nwarps) {
    const int64_t i = static_cast<int64_t>(tile) * 64 + r;
    if (i >= p.N) continue;
    const float scale = qm::int8_scale(per_token ? s_amax[r] : block_amax, p.scale_multiplier);
    const float inv = 1.0f / scale;
    for (int d = lane; d < p.D; d += 32) {
      const float x = dev::load_as_float(p.x.data, xoff(p, b, h, i, d), p.dtype) - mu[d];
      p.x_int8[b * p.x_int8_stride[0] + h * p.x_int8_stride[1] + i * p.x_int8_stride[2] +
               d * p.x_int8_stride[3]] = qm::quantize_int8(x, inv);
    }
    if (lane == 0 && (per_token || r == 0)) {
      const int64_t g = per_token ? i : tile;
      p.scales[b * p.scales_stride[0] + h * p.scales_stride[1] + g * p.scales_stride[2]] = scale;
    }
  }
}

}  // namespace

int64_t quantize_workspace_floats(const QuantizeProblem& p) { return p.B * p.H * p.D; }

cudaError_t launch_quantize(const QuantizeProblem& p, float* ws, cudaStream_t s) {
  mean_kernel<<<static_cast<unsigned>(p.B * p.H), 128, 0, s>>>(p, ws);
  const unsigned tiles = static_cast<unsigned>((p.N + 63) / 64);
  quant_kernel<<<dim3(tiles, static_cast<unsigned>(p.B * p.H)), 256, 0, s>>>(p, ws);
  return cudaGetLastError();
}

}  // namespace int8attn
