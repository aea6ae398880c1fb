// Inner loops of the CPU backend, with an AVX2/FMA/F16C implementation chosen at run time and a
// portable fallback. All tile kernels work on one query row against n key rows (n <= 64).
#pragma once

#include <cstdint>

namespace int8attn {
namespace cpu {

constexpr int kTile = 64;        // keys per tile = query rows per work item (= qm::kQuantBlock)
constexpr int kI8RowAlign = 32;  // int8 rows are zero-padded to a multiple of this many channels

inline int64_t padded_dim(int64_t d) { return (d + kI8RowAlign - 1) / kI8RowAlign * kI8RowAlign; }

struct Kernels {
  // out[j] = Σ_c q[c]·k[j·dp + c] exactly (int32), dp a multiple of 32, values in [−127, 127].
  void (*dot_i8)(const int8_t* q, const int8_t* k, int n, int dp, int32_t* out);
  // out[j] = Σ_c q[c]·k[j·d + c] in fp32, d a multiple of 8.
  void (*dot_f32)(const float* q, const float* k, int n, int d, float* out);
  // p[j] = exp(s[j] − m) (0 for s = −inf); returns Σ p[j].
  float (*exp_sub)(const float* s, float m, int n, float* p);
  // p[j] = round_fp16(p[j]) and returns Σ of the rounded values.
  float (*round_f16)(float* p, int n);
  // p[j] = e4m3(448·p[j]) and returns Σ of the rounded values.
  float (*round_e4m3_448)(float* p, int n);
  // acc[c] = acc[c]·alpha + Σ_j p[j]·v[j·d + c], d a multiple of 8.
  void (*pv)(const float* p, const float* v, int n, int d, float alpha, float* acc);
  bool simd;
  const char* name;
};

// The best kernels for this CPU (AVX2+FMA+F16C when present, else portable C++).
const Kernels& kernels();
const Kernels& portable_kernels();

}  // namespace cpu
}  // namespace int8attn
