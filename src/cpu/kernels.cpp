#include "cpu/kernels.h"

#include <cmath>
#include <limits>

#include "cpu/fp_convert.h"
#include "common/quant_math.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define I8A_X86 1
#endif

namespace int8attn {
namespace cpu {
namespace {

// ---- portable -------------------------------------------------------------------------------
void dot_i8_port(const int8_t* q, const int8_t* k, int n, int dp, int32_t* out) {
  for (int j = 0; j < n; ++j) {
    int32_t s = 0;
    const int8_t* kr = k + static_cast<int64_t>(j) * dp;
    for (int c = 0; c < dp; ++c) s += static_cast<int32_t>(q[c]) * kr[c];
    out[j] = s;
  }
}
void dot_f32_port(const float* q, const float* k, int n, int d, float* out) {
  for (int j = 0; j < n; ++j) {
    float s = 0.0f;
    const float* kr = k + static_cast<int64_t>(j) * d;
    for (int c = 0; c < d; ++c) s += q[c] * kr[c];
    out[j] = s;
  }
}
float exp_sub_port(const float* s, float m, int n, float* p) {
  float sum = 0.0f;
  for (int j = 0; j < n; ++j) {
    p[j] = s[j] == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(s[j] - m);
    sum += p[j];
  }
  return sum;
}
float round_f16_port(float* p, int n) {
  float sum = 0.0f;
  for (int j = 0; j < n; ++j) sum += (p[j] = round_f16(p[j]));
  return sum;
}
float round_e4m3_port(float* p, int n) {
  float sum = 0.0f;
  for (int j = 0; j < n; ++j) sum += (p[j] = qm::fp8_e4m3_round(448.0f * p[j]));
  return sum;
}
void pv_port(const float* p, const float* v, int n, int d, float alpha, float* acc) {
  for (int c = 0; c < d; ++c) acc[c] *= alpha;
  for (int j = 0; j < n; ++j) {
    const float pj = p[j];
    if (pj == 0.0f) continue;
    const float* vr = v + static_cast<int64_t>(j) * d;
    for (int c = 0; c < d; ++c) acc[c] += pj * vr[c];
  }
}

#if I8A_X86
// ---- AVX2 + FMA + F16C ----------------------------------------------------------------------
#define I8A_AVX2 __attribute__((target("avx2,fma,f16c")))

I8A_AVX2 inline __m128i hsum4_epi32(__m256i a0, __m256i a1, __m256i a2, __m256i a3) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}
I8A_AVX2 inline __m256i dot32(__m256i qabs, __m256i qs, const int8_t* k, __m256i ones) {
  const __m256i kb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k));
  // |q|·(k·sign q) = q·k; pairs sum to at most 2·127·127 < 32767, so maddubs never saturates.
  return _mm256_madd_epi16(_mm256_maddubs_epi16(qabs, _mm256_sign_epi8(kb, qs)), ones);
}

I8A_AVX2 void dot_i8_avx2(const int8_t* q, const int8_t* k, int n, int dp, int32_t* out) {
  const __m256i ones = _mm256_set1_epi16(1);
  int j = 0;
  for (; j + 4 <= n; j += 4) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    const int8_t* k0 = k + static_cast<int64_t>(j) * dp;
    for (int c = 0; c < dp; c += 32) {
      const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + c));
      const __m256i qa = _mm256_abs_epi8(qs);
      a0 = _mm256_add_epi32(a0, dot32(qa, qs, k0 + c, ones));
      a1 = _mm256_add_epi32(a1, dot32(qa, qs, k0 + dp + c, ones));
      a2 = _mm256_add_epi32(a2, dot32(qa, qs, k0 + 2 * dp + c, ones));
      a3 = _mm256_add_epi32(a3, dot32(qa, qs, k0 + 3 * dp + c, ones));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j), hsum4_epi32(a0, a1, a2, a3));
  }
  for (; j < n; ++j) {
    __m256i a = _mm256_setzero_si256();
    const int8_t* kr = k + static_cast<int64_t>(j) * dp;
    for (int c = 0; c < dp; c += 32) {
      const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + c));
      a = _mm256_add_epi32(a, dot32(_mm256_abs_epi8(qs), qs, kr + c, ones));
    }
    const __m128i r = hsum4_epi32(a, a, a, a);
    out[j] = _mm_cvtsi128_si32(r);
  }
}

I8A_AVX2 inline float hsum_ps(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_hadd_ps(s, s);
  s = _mm_hadd_ps(s, s);
  return _mm_cvtss_f32(s);
}

I8A_AVX2 void dot_f32_avx2(const float* q, const float* k, int n, int d, float* out) {
  int j = 0;
  for (; j + 4 <= n; j += 4) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const float* k0 = k + static_cast<int64_t>(j) * d;
    for (int c = 0; c < d; c += 8) {
      const __m256 qv = _mm256_loadu_ps(q + c);
      a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + c), a0);
      a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + d + c), a1);
      a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + 2 * d + c), a2);
      a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + 3 * d + c), a3);
    }
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    _mm_storeu_ps(out + j, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
  }
  for (; j < n; ++j) {
    __m256 a = _mm256_setzero_ps();
    const float* kr = k + static_cast<int64_t>(j) * d;
    for (int c = 0; c < d; c += 8)
      a = _mm256_fmadd_ps(_mm256_loadu_ps(q + c), _mm256_loadu_ps(kr + c), a);
    out[j] = hsum_ps(a);
  }
}

// exp(x) for x <= 0 (Cephes expf polynomial, about 1 ulp); x < −87 gives 0.
I8A_AVX2 inline __m256 exp_neg_ps(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.0f);
  const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_max_ps(x, lo);
  const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
  return _mm256_andnot_ps(under, y);
}

I8A_AVX2 float exp_sub_avx2(const float* s, float m, int n, float* p) {
  const __m256 mv = _mm256_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = exp_neg_ps(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
    _mm256_storeu_ps(p + j, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = hsum_ps(acc);
  if (j < n) {
    alignas(32) float tmp[8];
    for (int i = 0; i < 8; ++i) tmp[i] = j + i < n ? s[j + i] : -INFINITY;
    const __m256 e = exp_neg_ps(_mm256_sub_ps(_mm256_load_ps(tmp), mv));
    _mm256_store_ps(tmp, e);
    for (int i = 0; j + i < n; ++i) {
      p[j + i] = tmp[i];
      sum += tmp[i];
    }
  }
  return sum;
}

I8A_AVX2 float round_f16_avx2(float* p, int n) {
  __m256 acc = _mm256_setzero_ps();
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 r =
        _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(p + j), _MM_FROUND_TO_NEAREST_INT));
    _mm256_storeu_ps(p + j, r);
    acc = _mm256_add_ps(acc, r);
  }
  float sum = hsum_ps(acc);
  for (; j < n; ++j) sum += (p[j] = round_f16(p[j]));
  return sum;
}

// e4m3(448·p) for p in [0, 1] (exactly qm::fp8_e4m3_round on that range).
I8A_AVX2 inline __m256 e4m3_448_ps(__m256 p) {
  const __m256 a = _mm256_mul_ps(p, _mm256_set1_ps(448.0f));
  __m256i u = _mm256_castps_si256(a);
  u = _mm256_add_epi32(
      u, _mm256_add_epi32(_mm256_set1_epi32(0x7ffff),
                          _mm256_and_si256(_mm256_srli_epi32(u, 20), _mm256_set1_epi32(1))));
  u = _mm256_and_si256(u, _mm256_set1_epi32(static_cast<int>(0xfff00000u)));
  const __m256 normal = _mm256_min_ps(_mm256_castsi256_ps(u), _mm256_set1_ps(448.0f));
  const __m256 sub = _mm256_mul_ps(_mm256_round_ps(_mm256_mul_ps(a, _mm256_set1_ps(512.0f)),
                                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                                   _mm256_set1_ps(1.0f / 512.0f));
  return _mm256_blendv_ps(normal, sub, _mm256_cmp_ps(a, _mm256_set1_ps(0.015625f), _CMP_LT_OQ));
}

I8A_AVX2 float round_e4m3_avx2(float* p, int n) {
  __m256 acc = _mm256_setzero_ps();
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 r = e4m3_448_ps(_mm256_loadu_ps(p + j));
    _mm256_storeu_ps(p + j, r);
    acc = _mm256_add_ps(acc, r);
  }
  float sum = hsum_ps(acc);
  for (; j < n; ++j) sum += (p[j] = qm::fp8_e4m3_round(448.0f * p[j]));
  return sum;
}

I8A_AVX2 void pv_avx2(const float* p, const float* v, int n, int d, float alpha, float* acc) {
  const __m256 al = _mm256_set1_ps(alpha);
  for (int c = 0; c < d; c += 32) {
    // Up to 4 vectors of accumulators stay in registers across the key loop.
    const int w = d - c >= 32 ? 4 : (d - c) / 8;
    __m256 a[4];
    for (int t = 0; t < w; ++t) a[t] = _mm256_mul_ps(_mm256_loadu_ps(acc + c + 8 * t), al);
    for (int j = 0; j < n; ++j) {
      const __m256 pj = _mm256_set1_ps(p[j]);
      const float* vr = v + static_cast<int64_t>(j) * d + c;
      for (int t = 0; t < w; ++t) a[t] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vr + 8 * t), a[t]);
    }
    for (int t = 0; t < w; ++t) _mm256_storeu_ps(acc + c + 8 * t, a[t]);
  }
}

// F16C is read from CPUID (leaf 1, ECX bit 29): GCC's __builtin_cpu_supports knows "f16c" but
// clang 14's does not (a compile error). AVX2 and FMA go through the builtin, which also checks
// that the OS saves the YMM registers (XCR0); F16C works on the same registers, so with AVX2
// usable its CPUID bit is all it needs.
bool cpu_has_f16c() {
  unsigned int eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  return (ecx & bit_F16C) != 0;
}

bool cpu_has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
}
#endif

const Kernels kPortable = {dot_i8_port,     dot_f32_port, exp_sub_port, round_f16_port,
                           round_e4m3_port, pv_port,      false,        "portable"};
#if I8A_X86
const Kernels kAvx2 = {dot_i8_avx2,     dot_f32_avx2, exp_sub_avx2, round_f16_avx2,
                       round_e4m3_avx2, pv_avx2,      true,         "avx2"};
#endif

}  // namespace

const Kernels& portable_kernels() { return kPortable; }

const Kernels& kernels() {
#if I8A_X86
  static const Kernels* best = cpu_has_avx2() ? &kAvx2 : &kPortable;
  return *best;
#else
  return kPortable;
#endif
}

}  // namespace cpu
}  // namespace int8attn
