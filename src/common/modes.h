// The vocabulary every layer uses for precision modes and element types, from the host core to
// the kernels: the public API's values (include/int8attn.h) as C++ enums, and the facts that
// follow from a mode, each stated once. The core turns the API's integers into these at the
// boundary (src/core/resolve.cpp); nothing below it compares raw integers.
#pragma once

#include <cstdint>

#include "int8attn.h"

#if defined(__CUDACC__)
#define I8A_MODE_HD __host__ __device__ __forceinline__
#else
#define I8A_MODE_HD inline
#endif

namespace int8attn {

// A concrete precision mode (the API's DEFAULT never reaches a backend).
enum class Mode : int32_t {
  kExact = INT8ATTN_MODE_EXACT,        // fp16/bf16 (fp32 on the CPU) Q·Kᵀ and P·V
  kBalanced = INT8ATTN_MODE_BALANCED,  // INT8 Q·Kᵀ, fp16 P·V
  kFast = INT8ATTN_MODE_FAST,          // INT8 Q·Kᵀ, E4M3 P·V
};

// Element type of Q, K, V and O.
enum class DType : int32_t {
  kF16 = INT8ATTN_DTYPE_F16,
  kBF16 = INT8ATTN_DTYPE_BF16,
  kF32 = INT8ATTN_DTYPE_F32,
};

// Q·Kᵀ runs on INT8 operands (K quantized per key, smoothed and scaled).
I8A_MODE_HD constexpr bool int8_qk(Mode m) { return m != Mode::kExact; }
// P and V are E4M3 (V stored transposed and key-permuted); otherwise V is fp16 (or, in EXACT,
// the input type).
I8A_MODE_HD constexpr bool fp8_pv(Mode m) { return m == Mode::kFast; }

// The mode a device runs for a resolved mode: FAST needs FP8 P·V, which the CPU emulates and
// GPUs without FP8 tensor cores (sm80/sm86) lack; those run BALANCED (documented at
// INT8ATTN_MODE_FAST). The core applies this once per call (resolve.cpp).
I8A_MODE_HD constexpr Mode runnable_mode(Mode m, bool fp8_available) {
  return (m == Mode::kFast && !fp8_available) ? Mode::kBalanced : m;
}

// Calls with few keys (text cross-attention: 77, 120, 300 or 512 keys) are bound by reading Q
// and writing O, or by launches and preparation passes, not by the matrix work: quantizing Q and
// K would add error and passes and save nothing. A call on fresh K/V (not a cache) therefore
// runs EXACT in every mode, on every backend, when it has at most kExactMaxKeys keys, or at
// most kExactMaxShortKeys keys whose K and V are small: keys × head dim (rounded up to 32
// channels) at most kExactMaxKeyChannels, so that a GPU CTA holds a head's K and V (128 KB of
// fp16) in shared memory and streams Q through them in one launch (documented at
// int8attn_mode_t). The core applies this once per call.
inline constexpr int64_t kExactMaxKeys = 128;
inline constexpr int64_t kExactMaxShortKeys = 512;
inline constexpr int64_t kExactMaxKeyChannels = 32768;
I8A_MODE_HD constexpr bool exact_for_keys(int64_t nk, int64_t head_dim) {
  return nk <= kExactMaxKeys ||
         (nk <= kExactMaxShortKeys && nk * ((head_dim + 31) / 32 * 32) <= kExactMaxKeyChannels);
}
I8A_MODE_HD constexpr Mode mode_for_keys(Mode m, int64_t nk, int64_t head_dim, bool cache) {
  return (!cache && exact_for_keys(nk, head_dim)) ? Mode::kExact : m;
}

// Bytes per element of a floating-point input type.
I8A_MODE_HD constexpr int dtype_bytes(DType t) { return t == DType::kF32 ? 4 : 2; }

}  // namespace int8attn

#undef I8A_MODE_HD
