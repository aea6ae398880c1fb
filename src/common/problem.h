// The validated, fully resolved description of one call, handed from the host core (src/core,
// src/api) to a backend (src/cpu, cuda/). Backends trust it: every pointer, shape, stride and
// option here has been checked, defaults are filled in and the policy has been applied.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/modes.h"

namespace int8attn {

class KvCacheImpl;

// A rank-4 strided operand in logical [B, H, N, D] order; strides in elements, 0 = broadcast.
struct Operand4 {
  const void* data = nullptr;
  int64_t stride[4] = {0, 0, 0, 0};
};

struct AttnProblem {
  // Shapes. Q [B,Hq,Nq,D]; K,V [B,Hkv,Nk,D]; O [B,Hq,Nq,D]. G = Hq / Hkv q-heads per kv-head.
  int64_t B = 0, Hq = 0, Hkv = 0, Nq = 0, Nk = 0, D = 0;
  DType dtype = DType::kF16;  // of Q, K, V and O (all the same)
  int32_t device_type = 0;    // INT8ATTN_DEVICE_*
  int32_t device_id = 0;

  Operand4 q, k, v;  // k, v unused (data null) when `cache` is set
  void* o = nullptr;
  int64_t o_stride[4] = {0, 0, 0, 0};

  float* lse = nullptr;  // optional [B,Hq,Nq], natural log; −inf for rows without keys
  int64_t lse_stride[3] = {0, 0, 0};

  const int32_t* k_lengths = nullptr;  // optional [B], values already checked to be in [0, Nk]
  int64_t k_lengths_stride = 0;        // (device memory on the GPU: values not readable on host)

  const uint8_t* block_mask = nullptr;  // optional; element (b,h,qb,kb), strides 0 where broadcast
  int64_t mask_stride[4] = {0, 0, 0, 0};
  int64_t mask_q_block = INT8ATTN_MASK_Q_BLOCK_DEFAULT;  // tokens per mask block
  int64_t mask_k_block = INT8ATTN_MASK_K_BLOCK_DEFAULT;
  int64_t mask_nqb = 0, mask_nkb = 0;  // ceil(Nq/q_block), ceil(Nk/k_block)

  // Resolved options.
  Mode mode = Mode::kBalanced;  // what the device runs (resolve.cpp decides it once)
  float sm_scale = 0.0f;        // > 0 resolved (1/sqrt(D) by default)
  bool causal = false;
  int32_t q_granularity = 0;  // INT8ATTN_GRANULARITY_{PER_BLOCK,PER_TOKEN}, never DEFAULT
  int32_t k_granularity = 0;
  uint32_t flags = 0;             // resolved INT8ATTN_FLAG_* (EXPLICIT/default bits removed)
  float scale_multiplier = 1.0f;  // caller's × policy's, in (0, 1]

  const KvCacheImpl* cache = nullptr;  // attention against a cache instead of k/v

  void* workspace = nullptr;  // resolved: caller's or the context's, >= workspace_size(problem)
  size_t workspace_bytes = 0;
  void* stream = nullptr;
};

struct QuantizeProblem {
  int64_t B = 0, H = 0, N = 0, D = 0;
  DType dtype = DType::kF16;
  int32_t device_type = 0, device_id = 0;
  Operand4 x;
  int8_t* x_int8 = nullptr;
  int64_t x_int8_stride[4] = {0, 0, 0, 0};
  float* scales = nullptr;
  int64_t scales_stride[3] = {0, 0, 0};  // [B,H,G]
  float* mean = nullptr;
  int64_t mean_stride[3] = {0, 0, 0};  // [B,H,D] or null
  int32_t granularity = 0;             // PER_BLOCK or PER_TOKEN
  bool smooth = false;
  float scale_multiplier = 1.0f;
  void* stream = nullptr;
};

// int8attn_rotary: out[b,h,n,·] = the interleaved pairs of x[b,h,n,·] rotated by token n's
// angles (common/rotary_math.h), in x's dtype.
struct RotaryProblem {
  int64_t B = 0, H = 0, N = 0, D = 0;
  DType dtype = DType::kF16;  // of x and out
  int32_t device_type = 0, device_id = 0;
  Operand4 x;
  void* out = nullptr;
  int64_t out_stride[4] = {0, 0, 0, 0};
  const float* cos = nullptr;
  const float* sin = nullptr;
  int64_t cos_stride[2] = {0, 0}, sin_stride[2] = {0, 0};  // [N, D]
  bool complex_fma = false;  // INT8ATTN_ROTARY_COMPLEX_FMA (else ROUNDED)
  void* stream = nullptr;
};

// int8attn_rms_norm: out[b,h,n,·] = x[b,h,n,·] / rms(x[b,h,n,·]) (· weight), the maths of
// common/rms_norm_math.h.
struct RmsNormProblem {
  int64_t B = 0, H = 0, N = 0, D = 0;
  DType x_dtype = DType::kF16, out_dtype = DType::kF16;
  bool has_weight = false;
  DType weight_dtype = DType::kF32;  // when has_weight
  int32_t device_type = 0, device_id = 0;
  Operand4 x;
  void* out = nullptr;
  int64_t out_stride[4] = {0, 0, 0, 0};
  const void* weight = nullptr;
  int64_t weight_stride = 0;
  float eps = 1e-6f;
  void* stream = nullptr;
};

struct MaskProblem {
  int64_t B = 0, Hq = 0, Hkv = 0, Nq = 0, Nk = 0, D = 0;
  DType dtype = DType::kF16;
  int32_t device_type = 0, device_id = 0;
  Operand4 q, k;
  uint8_t* mask = nullptr;
  int64_t mask_stride[4] = {0, 0, 0, 0};  // [B,Hq,nqb,nkb]
  int64_t q_block = INT8ATTN_MASK_Q_BLOCK_DEFAULT, k_block = INT8ATTN_MASK_K_BLOCK_DEFAULT;
  int64_t nqb = 0, nkb = 0;
  float keep_ratio = 0.0f;  // > 0: top-k mode
  float threshold = 0.95f;  // else cumulative-mass mode
  bool causal = false;
  float sm_scale = 0.0f;  // resolved
  void* stream = nullptr;
};

struct CacheSpec {
  int32_t device_type = 0, device_id = 0;
  int64_t B = 0, Hkv = 0, capacity = 0, D = 0;
  Mode mode = Mode::kBalanced;  // BALANCED or FAST
  uint32_t flags = 0;           // resolved SMOOTH_K / SMOOTH_V
};

// Keys/values to append to a cache: [B, Hkv, n, D] in `dtype`.
struct CacheAppend {
  int64_t n = 0;
  DType dtype = DType::kF16;
  Operand4 k, v;
  void* stream = nullptr;
};

}  // namespace int8attn
