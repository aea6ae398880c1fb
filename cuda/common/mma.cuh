// Thin wrappers over the PTX instructions the attention kernels use: ldmatrix, cp.async and the
// warp-level MMAs (INT8 m16n8k32, fp16/bf16 m16n8k16, FP8 E4M3 m16n8k32). Fragment layouts follow
// the PTX ISA "matrix fragments for mma.m16n8k*" sections: lane = 4·g + t, g = group (row), t =
// thread in group.
#pragma once

#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <type_traits>

#include "common/modes.h"
#include "common/quant_math.h"

namespace int8attn {
namespace dev {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One 16-byte global store; the caller guarantees the alignment (the compiler, unable to prove
// it through a computed 2-byte-element pointer, would otherwise split a uint4 store in four).
__device__ __forceinline__ void st_global_16(void* gmem, const uint4& v) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(gmem), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}

// 16-byte global -> shared copy, zero-filled when `valid` is false (tails, padding).
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}

// D = A·B + D, A 16x32 s8 (row), B 32x8 s8 (col), D s32.
__device__ __forceinline__ void mma_s8(int (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                       uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// D = A·B + D in fp32, A 16x16 / B 16x8 of fp16 (kBf16 = false) or bf16.
template <bool kBf16>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
  if constexpr (kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// D = A·B + D in fp32, A 16x32 / B 32x8 of FP8 E4M3 (sm89+).
__device__ __forceinline__ void mma_e4m3(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // never instantiated for sm80: the host dispatch routes FAST to BALANCED there
#endif
}

// The FP8 m16n8k32 product d += a·b as two fp16 m16n8k16 MMAs with fp32 accumulation, for
// sm90, which has no FP8 mma.sync. Each 32-bit fragment register of E4M3 bytes (k = 4t..4t+3
// of thread t, or 16 + 4t..) becomes two fp16x2 registers that the fp16 MMA reads as k = 2t,
// 2t+1 and 2t+8, 2t+9: the same permutation of k on both operands, so the sum is unchanged.
// `a16` holds a's unpacked halves (unpack_a_e4m3, once per P tile); b is unpacked here.
__device__ __forceinline__ void unpack2_e4m3(uint32_t w, uint32_t& lo, uint32_t& hi) {
  // Halves by register selectors (a shift per word otherwise).
  asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.rn.f16x2.e4m3x2 %0, l;\n"
      " cvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
}
__device__ __forceinline__ void unpack_a_e4m3(const uint32_t (&a)[4], uint32_t (&a16)[2][4]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    unpack2_e4m3(a[2 * h], a16[h][0], a16[h][2]);
    unpack2_e4m3(a[2 * h + 1], a16[h][1], a16[h][3]);
  }
}
__device__ __forceinline__ void mma_e4m3_as_f16(float (&d)[4], const uint32_t (&a16)[2][4],
                                                uint32_t b0, uint32_t b1) {
  uint32_t lo, hi;
  unpack2_e4m3(b0, lo, hi);
  mma_16816<false>(d, a16[0], lo, hi);
  unpack2_e4m3(b1, lo, hi);
  mma_16816<false>(d, a16[1], lo, hi);
}

// int32 -> float for |x| < 2^22 on the integer and FMA pipes (1.5·2^23 + x is exact in a
// float's mantissa; the bias is then removed inside the score's FFMA, key_scaled_scores),
// leaving the special-function pipe to the softmax exponentials. INT8 Q·Kᵀ accumulators
// qualify: |acc| <= 127·127·256 < 2^22.
constexpr float kIntFloatBias = 12582912.0f;                   // 1.5·2^23
__device__ __forceinline__ float biased_int_as_float(int x) {  // kIntFloatBias + x, exactly
  return __int_as_float(0x4B400000 + x);
}

// 2^x on the special-function unit, flushing denormal results to 0 (softmax weights below
// 2^-126 of the row max contribute nothing at fp32/fp16/fp8 precision anyway).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Pack two floats into fp16x2 / bf16x2 (low half = first argument).
template <bool kBf16>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (kBf16) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

// Sum of the two 16-bit floats in a packed word.
template <bool kBf16>
__device__ __forceinline__ float sum2(uint32_t w) {
  if constexpr (kBf16) {
    const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w));
    return f.x + f.y;
  } else {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w));
    return f.x + f.y;
  }
}

// Pack four floats into four E4M3 bytes with saturation (byte 0 = a).
__device__ __forceinline__ uint32_t pack4_e4m3(float a, float b, float c, float d) {
  const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
  const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
  return (lo & 0xffffu) | (hi << 16);
}

// Four 8-key score tiles n0..n0+3 of m16n8 accumulators (32 keys), rounded to E4M3, as the A
// fragment of an m16n8k32 FP8 MMA. Tile n's columns are keys 8n + 2t + e; FAST's V^T layout
// stores the keys at these A-fragment positions (fp8_v_logical_position), so P needs no
// shuffles. The `wgmma` kernel packs its accumulators the same way: per warp, its layout is
// the mma.sync one.
template <int N>
__device__ __forceinline__ void pack_a_e4m3(const float (&s)[N][4], int n0, uint32_t (&a)[4]) {
  a[0] = pack4_e4m3(s[n0][0], s[n0][1], s[n0 + 1][0], s[n0 + 1][1]);
  a[1] = pack4_e4m3(s[n0][2], s[n0][3], s[n0 + 1][2], s[n0 + 1][3]);
  a[2] = pack4_e4m3(s[n0 + 2][0], s[n0 + 2][1], s[n0 + 3][0], s[n0 + 3][1]);
  a[3] = pack4_e4m3(s[n0 + 2][2], s[n0 + 2][3], s[n0 + 3][2], s[n0 + 3][3]);
}

// Sum of the four E4M3 values in a packed word (used to keep the row sum consistent with the
// rounded P that the FP8 MMA sees).
__device__ __forceinline__ float sum4_e4m3(uint32_t w) {
  const __half2_raw lo =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w & 0xffffu), __NV_E4M3);
  const __half2_raw hi =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> 16), __NV_E4M3);
  const float2 a = __half22float2(__half2(lo));
  const float2 b = __half22float2(__half2(hi));
  return (a.x + a.y) + (b.x + b.y);
}

// Load one element of a 16-bit/32-bit float tensor as float.
template <typename T>
__device__ __forceinline__ float to_float(T v);
template <>
__device__ __forceinline__ float to_float<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ float to_float<float>(float v) {
  return v;
}

// max(a, b) that returns NaN when either is NaN (PTX max.NaN, sm_80+), at fmaxf's cost: the
// absmax reductions behind INT8 scales use it, so a NaN input reaches its group's scale
// (quant_math.h, "Non-finite inputs").
__device__ __forceinline__ float fmax_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

// A 16-bit float of element type `dtype` (fp16 or bf16) from its raw bits. Loading raw bits
// first and converting after keeps the load itself free of control flow, so the compiler can
// have many loads in flight (a dtype branch around each load serialises them on memory latency).
__device__ __forceinline__ float bits16_to_float(uint16_t bits, DType dtype) {
  return dtype == DType::kF16 ? __half2float(__ushort_as_half(bits))
                              : __bfloat162float(__ushort_as_bfloat16(bits));
}

template <typename T>
inline constexpr bool kIsBf16 = std::is_same_v<T, __nv_bfloat16>;

// Eight fp16 (kBf16 false) or bf16 values of a 16-byte word as floats.
template <bool kBf16>
__device__ __forceinline__ void unpack8(const uint4& w, float (&x)[8]) {
  const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (kBf16) {  // a bf16 is the upper half of its float
      x[2 * i] = __uint_as_float(u[i] << 16);
      x[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
    } else {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&u[i]));
      x[2 * i] = f.x;
      x[2 * i + 1] = f.y;
    }
  }
}
// The same for a runtime element type (fp16 or bf16): one uniform branch.
__device__ __forceinline__ void unpack8(const uint4& w, DType dtype, float (&x)[8]) {
  if (dtype == DType::kF16)
    unpack8<false>(w, x);
  else
    unpack8<true>(w, x);
}

// Element type for a runtime 16-bit dtype, for kernels templated on it: f(__half{}) or
// f(__nv_bfloat16{}); cudaErrorInvalidValue for fp32 (which never reaches the GPU's attention
// path: the core accepts f32 on the CPU only).
template <typename F>
__host__ __forceinline__ cudaError_t dispatch_half(DType dtype, F&& f) {
  if (dtype == DType::kF16) return f(__half{});
  if (dtype == DType::kBF16) return f(__nv_bfloat16{});
  return cudaErrorInvalidValue;
}

__device__ __forceinline__ float load_as_float(const void* base, int64_t index, DType dtype) {
  if (dtype == DType::kF16) return __half2float(static_cast<const __half*>(base)[index]);
  if (dtype == DType::kBF16)
    return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[index]);
  return static_cast<const float*>(base)[index];
}

// An output element: fp16 saturates finite values at ±65504 (qm::saturate_f16).
__device__ __forceinline__ void store_from_float(void* base, int64_t index, DType dtype, float v) {
  if (dtype == DType::kF16)
    static_cast<__half*>(base)[index] = __float2half_rn(qm::saturate_f16(v));
  else if (dtype == DType::kBF16)
    static_cast<__nv_bfloat16*>(base)[index] = __float2bfloat16_rn(v);
  else
    static_cast<float*>(base)[index] = v;
}

}  // namespace dev
}  // namespace int8attn
