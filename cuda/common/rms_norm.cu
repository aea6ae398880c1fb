// int8attn_rms_norm on the GPU: L lanes of a warp per row (common/rms_norm_math.h: the smallest
// power of two covering the row's 8-channel chunks, at most 32), each lane summing the squares
// of its chunks, a butterfly of shuffles combining the lanes' sums (the order the CPU backend
// reproduces), then the same lanes writing the normalized chunks. A lane keeps its first chunk
// in registers between the two passes; further chunks (rows over 256 channels) are read again,
// from L1 or L2.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "common/rms_norm_math.h"
#include "cuda/common/aux_kernels.h"
#include "cuda/common/elementwise.cuh"
#include "cuda/common/mma.cuh"

namespace int8attn {
namespace {

constexpr int kChunk = rms::kChunk;

// Chunk c of a row (channels 8c .. 8c+7) as floats. kVec: contiguous, 16-byte aligned rows and
// D a multiple of 8; otherwise channels past D read as 0 (the callers skip them).
template <typename T, bool kVec>
__device__ __forceinline__ void load_chunk(const T* row, int64_t stride, int64_t D, int64_t c,
                                           float (&x)[kChunk]) {
  if constexpr (kVec) {
    if constexpr (sizeof(T) == 2) {
      dev::unpack8<dev::kIsBf16<T>>(*reinterpret_cast<const uint4*>(row + c * kChunk), x);
    } else {
      const float4* v = reinterpret_cast<const float4*>(row + c * kChunk);
      const float4 a = v[0], b = v[1];
      x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w;
      x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
    }
  } else {
#pragma unroll
    for (int j = 0; j < kChunk; ++j) {
      const int64_t d = c * kChunk + j;
      x[j] = d < D ? dev::to_float(row[d * stride]) : 0.0f;
    }
  }
}

// Chunk c of the weight (runtime dtype), on the same path as x.
template <bool kVec>
__device__ __forceinline__ void load_weight(const RmsNormProblem& p, int64_t c,
                                            float (&w)[kChunk]) {
  if constexpr (kVec) {
    if (p.weight_dtype == DType::kF32) {
      const float4* v =
          reinterpret_cast<const float4*>(static_cast<const float*>(p.weight) + c * kChunk);
      const float4 a = v[0], b = v[1];
      w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w;
      w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
    } else {
      dev::unpack8(
          *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.weight) + c * kChunk),
          p.weight_dtype, w);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kChunk; ++j) {
      const int64_t d = c * kChunk + j;
      w[j] = d < p.D ? dev::load_as_float(p.weight, d * p.weight_stride, p.weight_dtype) : 0.0f;
    }
  }
}

// Chunk c of an output row (runtime dtype), rounded to nearest even.
template <bool kVec>
__device__ __forceinline__ void store_chunk(const RmsNormProblem& p, int64_t row_offset, int64_t c,
                                            const float (&y)[kChunk]) {
  if constexpr (kVec) {
    if (p.out_dtype == DType::kF32) {
      float4* v = reinterpret_cast<float4*>(static_cast<float*>(p.out) + row_offset + c * kChunk);
      v[0] = make_float4(y[0], y[1], y[2], y[3]);
      v[1] = make_float4(y[4], y[5], y[6], y[7]);
      return;
    }
    union {
      uint4 u;
      __half2 h[4];
      __nv_bfloat162 b[4];
    } w;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (p.out_dtype == DType::kF16)
        w.h[j] = __floats2half2_rn(y[2 * j], y[2 * j + 1]);
      else
        w.b[j] = __floats2bfloat162_rn(y[2 * j], y[2 * j + 1]);
    }
    *reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.out) + row_offset + c * kChunk) = w.u;
  } else {
#pragma unroll
    for (int j = 0; j < kChunk; ++j) {
      const int64_t d = c * kChunk + j;
      if (d >= p.D) break;
      const int64_t o = row_offset + d * p.out_stride[3];
      if (p.out_dtype == DType::kF16)
        static_cast<__half*>(p.out)[o] = __float2half_rn(y[j]);
      else if (p.out_dtype == DType::kBF16)
        static_cast<__nv_bfloat16*>(p.out)[o] = __float2bfloat16_rn(y[j]);
      else
        static_cast<float*>(p.out)[o] = y[j];
    }
  }
}

template <bool kVec>
__device__ __forceinline__ float add_squares(float s, const float (&x)[kChunk], int64_t c,
                                             int64_t D) {
#pragma unroll
  for (int j = 0; j < kChunk; ++j)
    if (kVec || c * kChunk + j < D) s = rms::add_square(s, x[j]);
  return s;
}

// Normalizes chunk c (values x) of a row by r and writes it.
template <bool kVec>
__device__ __forceinline__ void emit_chunk(const RmsNormProblem& p, int64_t row_offset, int64_t c,
                                           const float (&x)[kChunk], float r) {
  float y[kChunk];
#pragma unroll
  for (int j = 0; j < kChunk; ++j) y[j] = f32op::mul(x[j], r);
  if (p.has_weight) {
    float w[kChunk];
    load_weight<kVec>(p, c, w);
    const bool round_first = p.weight_dtype != DType::kF32;
#pragma unroll
    for (int j = 0; j < kChunk; ++j)
      y[j] = f32op::mul(round_first ? dev::round_to(p.weight_dtype, y[j]) : y[j], w[j]);
  }
  store_chunk<kVec>(p, row_offset, c, y);
}

// lanes: rms::lanes(D). The loop over row groups is uniform across a warp, so every shuffle has
// all 32 lanes; a lane past the last row works on the last row and stores nothing.
template <typename T, bool kVec>
__global__ void __launch_bounds__(256)
    rms_norm_kernel(const RmsNormProblem p, const dev::RowOrder order, int lanes) {
  const int lane = threadIdx.x & 31;
  const int sub = lane & (lanes - 1);
  const int rows_per_warp = 32 / lanes;
  const int64_t rows = p.B * p.H * p.N;
  const int64_t chunks = rms::chunks(p.D);
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (int64_t first = warp * rows_per_warp; first < rows; first += warps * rows_per_warp) {
    const int64_t want = first + lane / lanes;
    const bool live = want < rows;
    int64_t b, h, n;
    order.decode(live ? want : rows - 1, b, h, n);
    const T* xr =
        static_cast<const T*>(p.x.data) + b * p.x.stride[0] + h * p.x.stride[1] + n * p.x.stride[2];
    const int64_t sx = p.x.stride[3];
    // Pass 1: this lane's chunks sub, sub + lanes, ... (a lane past the chunk count has none).
    float x0[kChunk];
    float s = 0.0f;
    if (sub < chunks) {
      load_chunk<T, kVec>(xr, sx, p.D, sub, x0);
      s = add_squares<kVec>(s, x0, sub, p.D);
    }
    for (int64_t c = sub + lanes; c < chunks; c += lanes) {
      float x[kChunk];
      load_chunk<T, kVec>(xr, sx, p.D, c, x);
      s = add_squares<kVec>(s, x, c, p.D);
    }
    for (int off = lanes / 2; off >= 1; off /= 2)
      s = f32op::add(s, __shfl_xor_sync(0xffffffffu, s, off));
    const float r = rms::inv_rms(s, p.D, p.eps);
    if (!live || sub >= chunks) continue;
    // Pass 2: the same chunks, normalized.
    const int64_t ro = b * p.out_stride[0] + h * p.out_stride[1] + n * p.out_stride[2];
    emit_chunk<kVec>(p, ro, sub, x0, r);
    for (int64_t c = sub + lanes; c < chunks; c += lanes) {
      float x[kChunk];
      load_chunk<T, kVec>(xr, sx, p.D, c, x);
      emit_chunk<kVec>(p, ro, c, x, r);
    }
  }
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// Whether every row of x and out, and the weight, is contiguous and 16-byte aligned with whole
// 8-channel chunks.
bool rows_vectorizable(const RmsNormProblem& p) {
  if (p.D % kChunk != 0 || p.x.stride[3] != 1 || p.out_stride[3] != 1) return false;
  if (!aligned16(p.x.data) || !aligned16(p.out)) return false;
  if (p.has_weight && (p.weight_stride != 1 || !aligned16(p.weight))) return false;
  const int64_t xb = dtype_bytes(p.x_dtype), ob = dtype_bytes(p.out_dtype);
  for (int i = 0; i < 3; ++i)
    if ((p.x.stride[i] * xb) % 16 != 0 || (p.out_stride[i] * ob) % 16 != 0) return false;
  return true;
}

template <typename T>
cudaError_t launch_typed(const RmsNormProblem& p, cudaStream_t s) {
  const int64_t rows = p.B * p.H * p.N;
  if (rows == 0 || p.D == 0) return cudaSuccess;
  const int lanes = rms::lanes(p.D);
  int dev = 0, sms = 132;
  if (cudaGetDevice(&dev) == cudaSuccess)
    (void)cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  constexpr int kThreads = 256;
  const int64_t rows_per_block = kThreads / lanes;
  // A grid-stride loop over a few waves of CTAs (8 per SM resident at 256 threads).
  const int64_t blocks =
      std::min<int64_t>((rows + rows_per_block - 1) / rows_per_block, 8LL * 4 * sms);
  const dev::RowOrder order{p.B, p.H, p.N, p.x.stride[1] < p.x.stride[2]};
  if (rows_vectorizable(p))
    rms_norm_kernel<T, true><<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(p, order, lanes);
  else
    rms_norm_kernel<T, false><<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(p, order, lanes);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_rms_norm(const RmsNormProblem& p, cudaStream_t s) {
  if (p.x_dtype == DType::kF32) return launch_typed<float>(p, s);
  return dev::dispatch_half(p.x_dtype, [&](auto t) { return launch_typed<decltype(t)>(p, s); });
}

}  // namespace int8attn
