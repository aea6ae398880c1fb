// Division by a divisor that is fixed for a launch: a multiply-high, an add and a shift, with the
// divisor's multiplier computed once on the host. The kernels split packed row indices into
// (q-head of the group, query) several times per CTA (row_info); an integer division by a
// runtime divisor is a chain of ~25 instructions through a reciprocal, and these chains sat on
// the CTA's critical path before its first MMA. Host and device code alike (unit-tested on the
// CPU, tests/internal/test_fast_div.cpp).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define I8A_FASTDIV_HD __host__ __device__ __forceinline__
#else
#define I8A_FASTDIV_HD inline
#endif

namespace int8attn {

// n / d for 0 <= n < 2^31 and 1 <= d < 2^31: with s = ceil(log2 d) and
// m = floor(2^32 (2^s − d) / d) + 1, n / d = (mulhi(n, m) + n) >> s (the round-up method of
// Granlund and Montgomery; the sum is taken in 64 bits, so it cannot overflow).
struct FastDiv {
  uint32_t mul = 1, shift = 0;  // divisor 1 (the divisor itself is kept by the caller)

  static FastDiv of(uint32_t d) {
    FastDiv f;
    f.shift = 0;
    while ((uint64_t{1} << f.shift) < d) ++f.shift;
    f.mul = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << f.shift) - d)) / d + 1);
    return f;
  }

  I8A_FASTDIV_HD uint32_t div(uint32_t n) const {
    const uint64_t hi = (static_cast<uint64_t>(n) * mul) >> 32;
    return static_cast<uint32_t>((hi + n) >> shift);
  }
};

}  // namespace int8attn
