// int8attn_rotary on the GPU: one pass over x, each thread rotating the pairs of one 16-byte
// chunk of a row (or one pair on the strided path) with common/rotary_math.h, so the results
// are bit-identical to the CPU backend's in either arithmetic.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/rotary_math.h"
#include "cuda/common/aux_kernels.h"
#include "cuda/common/elementwise.cuh"
#include "cuda/common/mma.cuh"

namespace int8attn {
namespace {

// kVec: x and out rows contiguous and 16-byte aligned, cos/sin rows contiguous and 16-byte
// aligned, D a multiple of the chunk: each thread rotates one chunk of kChunk channels.
template <typename T, bool kVec, bool kComplexFma>
__global__ void rotary_kernel(const RotaryProblem p, dev::RowOrder order) {
  constexpr int kChunk = kVec ? 16 / sizeof(T) : 2;  // channels a thread rotates
  const int64_t chunks = p.D / kChunk;
  const int64_t total = p.B * p.H * p.N * chunks;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t d0 = (i % chunks) * kChunk;
    int64_t b, h, n;
    order.decode(i / chunks, b, h, n);
    const int64_t xo = b * p.x.stride[0] + h * p.x.stride[1] + n * p.x.stride[2];
    const int64_t oo = b * p.out_stride[0] + h * p.out_stride[1] + n * p.out_stride[2];
    const float* c = p.cos + n * p.cos_stride[0];
    const float* s = p.sin + n * p.sin_stride[0];
    float x[kChunk], cv[kChunk], sv[kChunk], y[kChunk];
    if constexpr (kVec) {
      union {
        uint4 u;
        T e[kChunk];
      } in, out;
      in.u = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.x.data) + xo + d0);
#pragma unroll
      for (int k = 0; k < kChunk; k += 4) {
        const float4 c4 = *reinterpret_cast<const float4*>(c + d0 + k);
        const float4 s4 = *reinterpret_cast<const float4*>(s + d0 + k);
        cv[k] = c4.x, cv[k + 1] = c4.y, cv[k + 2] = c4.z, cv[k + 3] = c4.w;
        sv[k] = s4.x, sv[k + 1] = s4.y, sv[k + 2] = s4.z, sv[k + 3] = s4.w;
      }
#pragma unroll
      for (int k = 0; k < kChunk; ++k) x[k] = dev::to_float(in.e[k]);
#pragma unroll
      for (int k = 0; k < kChunk; k += 2)
        rotary::rotate<kComplexFma>(x[k], x[k + 1], cv[k], sv[k], cv[k + 1], sv[k + 1], y[k],
                                    y[k + 1]);
#pragma unroll
      for (int k = 0; k < kChunk; ++k) out.e[k] = dev::from_f32<T>(y[k]);
      *reinterpret_cast<uint4*>(static_cast<T*>(p.out) + oo + d0) = out.u;
    } else {
      const T* xs = static_cast<const T*>(p.x.data) + xo;
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        x[k] = dev::to_float(xs[(d0 + k) * p.x.stride[3]]);
        cv[k] = c[(d0 + k) * p.cos_stride[1]];
        sv[k] = s[(d0 + k) * p.sin_stride[1]];
      }
      rotary::rotate<kComplexFma>(x[0], x[1], cv[0], sv[0], cv[1], sv[1], y[0], y[1]);
      T* os = static_cast<T*>(p.out) + oo;
      os[d0 * p.out_stride[3]] = dev::from_f32<T>(y[0]);
      os[(d0 + 1) * p.out_stride[3]] = dev::from_f32<T>(y[1]);
    }
  }
}

bool aligned(const void* ptr, size_t bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % bytes == 0;
}

// Whether every row of p's x and out, and of its tables, is contiguous and 16-byte aligned with
// a whole number of 16-byte chunks.
bool rows_vectorizable(const RotaryProblem& p, size_t elem) {
  const int64_t per16 = static_cast<int64_t>(16 / elem);
  if (p.D % per16 != 0 || p.D % 4 != 0) return false;
  if (p.x.stride[3] != 1 || p.out_stride[3] != 1 || p.cos_stride[1] != 1 || p.sin_stride[1] != 1)
    return false;
  if (!aligned(p.x.data, 16) || !aligned(p.out, 16) || !aligned(p.cos, 16) || !aligned(p.sin, 16))
    return false;
  for (int i = 0; i < 3; ++i)
    if (p.x.stride[i] % per16 != 0 || p.out_stride[i] % per16 != 0) return false;
  return p.cos_stride[0] % 4 == 0 && p.sin_stride[0] % 4 == 0;
}

template <typename T>
cudaError_t launch_typed(const RotaryProblem& p, cudaStream_t s) {
  const bool vec = rows_vectorizable(p, sizeof(T));
  const int64_t chunk = vec ? static_cast<int64_t>(16 / sizeof(T)) : 2;
  const int64_t items = p.B * p.H * p.N * (p.D / chunk);
  if (items == 0) return cudaSuccess;
  int dev = 0, sms = 132;
  if (cudaGetDevice(&dev) == cudaSuccess)
    (void)cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  constexpr int kThreads = 256;
  // A grid-stride loop over a few waves of CTAs (8 per SM resident at 256 threads).
  const int64_t blocks = std::min<int64_t>((items + kThreads - 1) / kThreads, 8LL * 4 * sms);
  const dev::RowOrder order{p.B, p.H, p.N, p.x.stride[1] < p.x.stride[2]};
  const auto launch = [&](auto vec_tag, auto fma_tag) {
    rotary_kernel<T, decltype(vec_tag)::value, decltype(fma_tag)::value>
        <<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(p, order);
  };
  using Yes = std::true_type;
  using No = std::false_type;
  if (vec)
    p.complex_fma ? launch(Yes{}, Yes{}) : launch(Yes{}, No{});
  else
    p.complex_fma ? launch(No{}, Yes{}) : launch(No{}, No{});
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_rotary(const RotaryProblem& p, cudaStream_t s) {
  if (p.dtype == DType::kF32) return launch_typed<float>(p, s);
  return dev::dispatch_half(p.dtype, [&](auto t) { return launch_typed<decltype(t)>(p, s); });
}

}  // namespace int8attn
